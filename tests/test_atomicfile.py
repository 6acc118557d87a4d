"""slurmkit.atomicfile: the one atomic replace (temp file, fsync, chmod, rename, fsync dir)."""

from __future__ import annotations

import os
import stat

import pytest

from slurmkit import atomicfile
from slurmkit.atomicfile import atomic_write, atomic_write_with


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
