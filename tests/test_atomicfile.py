"""slurmkit.atomicfile: the one atomic replace (temp file, fsync, chmod, rename, fsync dir), alone or
several files with one directory fsync."""

from __future__ import annotations

import os
import stat

import pytest

from slurmkit import atomicfile
from slurmkit.atomicfile import atomic_write, atomic_write_all, atomic_write_with


def _fsyncs(monkeypatch) -> list[str]:
    """Record what each os.fsync call syncs: 'dir' or the file's bytes."""
    seen: list[str] = []
    real = os.fsync

    def spy(fd):
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            seen.append("dir")
        else:
            with open(os.readlink(f"/proc/self/fd/{fd}")) as fh:  # the fd may be write-only
                seen.append(fh.read())
        real(fd)

    monkeypatch.setattr(atomicfile.os, "fsync", spy)
    return seen


def test_text_and_bytes_replace_the_file_and_leave_no_temp(tmp_path):
    p = tmp_path / "a.json"
    atomic_write(p, "grüße\n")
    assert p.read_bytes() == "grüße\n".encode()
    atomic_write(str(p), b"\x00\x01")
    assert p.read_bytes() == b"\x00\x01"
    assert os.listdir(tmp_path) == ["a.json"]


def test_file_then_directory_are_fsynced(tmp_path, monkeypatch):
    seen = _fsyncs(monkeypatch)
    atomic_write(tmp_path / "x", "data")
    assert seen == ["data", "dir"]
    seen.clear()
    atomic_write_with(tmp_path / "y", lambda tmp: open(tmp, "w").write("via path"))
    assert seen == ["via path", "dir"]
    assert (tmp_path / "y").read_text() == "via path"


def test_mode_given_kept_or_0644(tmp_path):
    p = tmp_path / "m"
    atomic_write(p, "1")
    assert stat.S_IMODE(p.stat().st_mode) == 0o644
    os.chmod(p, 0o600)
    atomic_write(p, "2")
    assert stat.S_IMODE(p.stat().st_mode) == 0o600
    atomic_write(p, "3", 0o755)
    assert stat.S_IMODE(p.stat().st_mode) == 0o755
    assert p.read_text() == "3"


def test_a_failed_write_leaves_the_old_file_and_no_temp(tmp_path):
    p = tmp_path / "keep"
    atomic_write(p, "old")

    def boom(tmp):
        with open(tmp, "w") as fh:
            fh.write("half")
        raise RuntimeError("writer died")

    with pytest.raises(RuntimeError, match="writer died"):
        atomic_write_with(p, boom)
    assert p.read_text() == "old"
    assert os.listdir(tmp_path) == ["keep"]
    with pytest.raises(FileNotFoundError):
        atomic_write_with(p, lambda tmp: None)
    assert p.read_text() == "old"


def test_missing_directory_raises_oserror(tmp_path):
    with pytest.raises(FileNotFoundError):
        atomic_write(tmp_path / "no" / "such", "x")


def test_temp_file_is_hidden_beside_the_target(tmp_path):
    names = []
    atomic_write_with(tmp_path / "m.prom", lambda tmp: (names.append(tmp), open(tmp, "w").close()))
    assert os.path.dirname(names[0]) == str(tmp_path)
    assert os.path.basename(names[0]) == f".m.prom.tmp{os.getpid()}"


def test_several_files_one_directory_fsync_renamed_in_order(tmp_path, monkeypatch):
    (tmp_path / "b.prom").write_text("old b")
    os.chmod(tmp_path / "b.prom", 0o600)
    seen = _fsyncs(monkeypatch)
    renames = []
    real = os.replace
    monkeypatch.setattr(atomicfile.os, "replace", lambda a, b: (renames.append(os.path.basename(b)), real(a, b)))
    atomic_write_all([(tmp_path / "a.prom", "A", 0o644), (str(tmp_path / "b.prom"), b"B", None),
                      (tmp_path / "c.prom", "C", 0o640)])
    assert seen == ["A", "B", "C", "dir"]  # every file's data first, the directory once after the renames
    assert renames == ["a.prom", "b.prom", "c.prom"]
    assert [(p.name, p.read_text(), stat.S_IMODE(p.stat().st_mode)) for p in sorted(tmp_path.iterdir())] == [
        ("a.prom", "A", 0o644), ("b.prom", "B", 0o600), ("c.prom", "C", 0o640)]


def test_several_files_a_failed_write_replaces_none_and_leaves_no_temp(tmp_path):
    atomic_write(tmp_path / "a", "old a")
    with pytest.raises(FileNotFoundError):
        atomic_write_all([(tmp_path / "a", "new a", None), (tmp_path / "no" / "b", "b", None)])
    assert (tmp_path / "a").read_text() == "old a"
    assert os.listdir(tmp_path) == ["a"]


def test_several_files_a_failed_rename_keeps_the_ones_before_it(tmp_path, monkeypatch):
    seen = _fsyncs(monkeypatch)
    real = os.replace

    def replace(a, b):
        if os.path.basename(b) == "b":
            raise PermissionError(13, "Permission denied", b)
        real(a, b)

    monkeypatch.setattr(atomicfile.os, "replace", replace)
    with pytest.raises(PermissionError):
        atomic_write_all([(tmp_path / "a", "A", None), (tmp_path / "b", "B", None), (tmp_path / "c", "C", None)])
    assert sorted(os.listdir(tmp_path)) == ["a"]  # b and c not replaced, their temp files gone
    assert (tmp_path / "a").read_text() == "A"
    assert seen == ["A", "B", "C", "dir"]  # the rename of a is made durable all the same
