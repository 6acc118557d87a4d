"""The Slurm releases the sandbox offers and their root filesystems: the pure parts
(:mod:`slurmkit.sandbox.releases`, :mod:`slurmkit.sandbox.rootfs`) on recorded mmdebstrap output
and a real rootfs's dpkg files. The live parts (a sandbox of each release) are in
tests/sandbox/test_sandbox_versions.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmkit.sandbox import SpecError
from slurmkit.sandbox.config import SandboxSpec
from slurmkit.sandbox.releases import major, offered, release
from slurmkit.sandbox import rootfs
from slurmkit.sandbox.rootfs import Rootfs, build_failure, debian_mirror, dpkg_version

FIXTURES = Path(__file__).parent / "fixtures" / "mmdebstrap"


def test_each_offered_name_and_the_error_for_others():
    assert release(None).name == "22.05" and release(None).host
    assert release("24.11").suite == "trixie"
    assert release("newest") == release("26.05") and release("26.05").suite == "sid"
    with pytest.raises(SpecError) as err:
        release("23.11")
    assert str(err.value) == ("--slurm 23.11: the sandbox offers Slurm 22.05 (default), 24.11, 26.05 (newest), the "
                              "releases Debian packages; for a site on another release, try the nearest "
                              "(docs/slurm-versions.md)")
    assert release("24.11.5").name == "24.11" and release("latest").name == "26.05"
    assert offered() == "22.05 (default), 24.11, 26.05 (newest)"
    with pytest.raises(SpecError, match="--slurm 25.05"):
        SandboxSpec(slurm="25.05").validate()


def test_major_of_slurm_and_debian_versions():
    assert major("24.11.5") == "24.11" and major("26.05.5-1") == "26.05" and major("22.05.8-4+deb12u3") == "22.05"


def test_build_failure_names_the_package_or_the_archive():
    assert build_failure((FIXTURES / "missing-package.log").read_text()) == \
        "package slurm-nonexistent-pkg is not in the archive"
    assert build_failure((FIXTURES / "no-archive.log").read_text()) == (
        "the archive did not answer: http://127.0.0.1:9/debian/dists/trixie/InRelease: "
        "Could not connect to 127.0.0.1:9 (127.0.0.1). - connect (111: Connection refused)")
    assert build_failure("I: nothing useful\n") == ""


def test_dpkg_version_reads_installed_packages_only():
    status = ("Package: slurmctld\nStatus: install ok installed\nVersion: 24.11.5-1\n\n"
              "Package: slurmdbd\nStatus: deinstall ok config-files\nVersion: 24.11.4-1\n")
    assert dpkg_version(status, "slurmctld") == "24.11.5-1"
    assert dpkg_version(status, "slurmdbd") is None and dpkg_version(status, "munge") is None


def test_debian_mirror_from_deb822_sources(tmp_path, monkeypatch):
    monkeypatch.delenv("SLURMKIT_DEBIAN_MIRROR", raising=False)
    # Debian 12's own /etc/apt/sources.list.d/debian.sources (docker debian:12 image)
    src = tmp_path / "debian.sources"
    src.write_text("Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates\n"
                   "Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n"
                   "Types: deb\nURIs: http://deb.debian.org/debian-security\nSuites: bookworm-security\n"
                   "Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n")
    assert debian_mirror(src) == "http://deb.debian.org/debian"
    assert debian_mirror(tmp_path / "absent") == "http://deb.debian.org/debian"
    monkeypatch.setenv("SLURMKIT_DEBIAN_MIRROR", "http://127.0.0.1:3142/debian")
    assert debian_mirror(src) == "http://127.0.0.1:3142/debian"


def test_wrapper_runs_directly_inside_its_namespace_and_through_unshare_outside():
    fs = Rootfs(Path("/cache/trixie"), "trixie", "24.11.5", "http://deb.debian.org/debian")
    text = fs.wrapper("/usr/bin/sbatch")
    lines = text.splitlines()
    assert lines[0] == "#!/bin/sh" and "Slurm 24.11.5's /usr/bin/sbatch" in lines[1]
    assert '[ -e /usr/share/slurmkit/rootfs-trixie ] && exec /usr/bin/sbatch "$@"' in lines
    assert lines[-1].startswith("exec 'unshare' '--mount' '--propagation' 'private' '--' '/bin/sh' '-c' ")
    assert lines[-1].endswith("'sh' '/cache/trixie' 'trixie' '/usr/bin/sbatch' \"$@\"")


def test_a_package_not_in_the_archive_names_archive_suite_and_package(tmp_path):
    """A real mmdebstrap run against Debian's archive with a package trixie does not have."""
    with pytest.raises(rootfs.RootfsBuildError) as err:
        rootfs.ensure(release("24.11"), root=tmp_path, packages=("slurmd", "slurm-nonexistent-pkg"))
    msg = str(err.value)
    assert f"from the Debian archive {rootfs.debian_mirror()}, suite trixie" in msg
    assert "package slurm-nonexistent-pkg is not in the archive" in msg
    assert "Slurm 22.05, this machine's packages, still works: leave out --slurm" in msg
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trixie.log"]      # nothing half-built kept


def test_a_sandbox_keeps_its_release_once_it_has_state(tmp_path):
    """A stopped sandbox's state and database belong to its release: up under another one is refused
    before anything starts (24.11's slurmdbd refuses 22.05's database as too old; 24.11's slurmctld
    cannot read 26.05's state), and sandbox.json keeps the release it had."""
    from slurmkit.sandbox import Sandbox, SandboxError

    first = Sandbox(tmp_path, SandboxSpec(slurm="26.05"))
    (first.var / "spool" / "ctld").mkdir(parents=True)
    (first.var / "spool" / "ctld" / "node_state").write_text("")
    saved = '{"nodes": 4, "gpus_per_node": 4, "gpu_type": "h100", "port_base": 6817, "cluster": "sandbox", ' \
            '"host_cpus": [0, 1], "memory_mib": 16000, "db_password": "x", "sched_interval_s": null, "slurm": "26.05"}'
    (tmp_path / "sandbox.json").write_text(saved + "\n")
    with pytest.raises(SandboxError) as err:
        Sandbox(tmp_path, SandboxSpec(slurm="24.11", host_cpus=(0, 1))).up()
    assert str(err.value).startswith(f"the sandbox in {tmp_path} holds Slurm 26.05's state and accounting database")
    assert f"'slurmkit sandbox down --purge --dir {tmp_path}'" in str(err.value)
    assert (tmp_path / "sandbox.json").read_text() == saved + "\n"
    assert not (tmp_path / "etc").exists()   # nothing written, nothing started
