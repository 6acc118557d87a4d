"""Root filesystems holding a newer Slurm, built once from Debian's archive and kept.

A release that this machine's packages do not hold (:mod:`slurmkit.sandbox.releases`) runs
from a Debian root filesystem (``mmdebstrap --variant=minbase`` of the release's suite with
Slurm's packages). Its programs do not run in a chroot: each runs in a mount namespace of its
own in which ``/usr`` is an overlay of the rootfs's ``/usr`` over this machine's. Slurm's
binaries, plugins and libraries (and the C library they need) come from the rootfs; every
other path (the sandbox's directory, a job's working directory, /etc/hosts, the Python and
torch that jobs and slurmkit's hooks run) is this machine's. The namespace ends with its last
process, so nothing stays mounted after ``sandbox down``.

Layout under :func:`cache_dir` (``$XDG_CACHE_HOME/slurmkit/rootfs``, ``~/.cache/...``)::

    trixie/                 a complete rootfs (only complete ones carry this name)
    trixie.log              mmdebstrap's output of the last build
    trixie.partial-<pid>/   a build under way or interrupted (never used; removed by the next)

Builds are serialised by ``flock`` on the cache directory itself (no lock file is left).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from slurmkit.atomicfile import atomic_write
from slurmkit.sandbox.errors import SandboxError
from slurmkit.sandbox.releases import SlurmRelease, major

#: Debian packages of a rootfs (slurmd pulls slurm-wlm-basic-plugins with job_submit/lua).
PACKAGES = ("slurmd", "slurmctld", "slurmdbd", "slurm-client")
#: Seconds mmdebstrap may take (measured: 13-25 s from deb.debian.org).
BUILD_TIMEOUT_S = 900
#: Written last into a complete rootfs: its suite, Slurm version, mirror and build time.
MANIFEST = "usr/share/slurmkit/rootfs.json"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
#: Daemons whose /usr/sbin name is a link through /etc/alternatives (Debian's slurm-wlm).
ALTERNATIVES = ("slurmd", "slurmctld", "slurmstepd")


def cache_dir() -> Path:
    """Where rootfs are kept: ``$SLURMKIT_ROOTFS_DIR``, else ``$XDG_CACHE_HOME/slurmkit/rootfs``
    (``~/.cache/slurmkit/rootfs``)."""
    if os.environ.get("SLURMKIT_ROOTFS_DIR"):
        return Path(os.environ["SLURMKIT_ROOTFS_DIR"]).absolute()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "slurmkit" / "rootfs"


def debian_mirror(sources: Path = Path("/etc/apt/sources.list.d/debian.sources")) -> str:
    """The Debian mirror to build from: ``$SLURMKIT_DEBIAN_MIRROR``, else the first ``URIs:``
    of this machine's deb822 sources that is not the security archive, else
    http://deb.debian.org/debian."""
    if os.environ.get("SLURMKIT_DEBIAN_MIRROR"):
        return os.environ["SLURMKIT_DEBIAN_MIRROR"]
    try:
        text = sources.read_text()
    except OSError:
        return DEFAULT_MIRROR
    for line in text.splitlines():
        if line.startswith("URIs:"):
            for uri in line.split()[1:]:
                if "security" not in uri:
                    return uri
    return DEFAULT_MIRROR


def dpkg_version(status: str, package: str) -> str | None:
    """The version of ``package`` in a dpkg status file's text (``/var/lib/dpkg/status``):
    ``"24.11.5-1"``, or None when it is not installed."""
    for stanza in status.split("\n\n"):
        fields = dict(re.findall(r"^([A-Za-z-]+): ?(.*)$", stanza, re.M))
        if fields.get("Package") == package and "installed" in fields.get("Status", "").split():
            return fields.get("Version")
    return None


def build_failure(log: str) -> str:
    """What went wrong in mmdebstrap's output ``log``: the package apt could not install
    (``Unable to locate package X``, ``X : Depends: ...``) or the archive it could not reach
    (``Failed to fetch URL ...``), else its last ``E:`` line; '' when it names none."""
    for pattern, say in ((r"Unable to locate package (\S+)", "package {0} is not in the archive"),
                         (r"^\s*(\S+) : Depends: (.+)$", "package {0} is not installable (Depends: {1})"),
                         (r"Failed to fetch (\S+)\s+(.+)$", "the archive did not answer: {0}: {1}"),
                         (r"Release file .*? is (expired|not valid yet).*$", "the archive's Release file is {0}")):
        found = re.search(pattern, log, re.M)
        if found:
            return say.format(*(g.strip() for g in found.groups()))
    errors = [line[2:].strip() for line in log.splitlines() if line.startswith("E:")]
    errors = [e for e in errors if not e.startswith(("mmdebstrap failed", "setup failed"))]
    return errors[-1] if errors else ""


@dataclass(frozen=True)
class Rootfs:
    """A complete rootfs: ``path`` (its top directory), ``suite`` (Debian suite), ``version``
    (Slurm's full version, from slurmctld's entry in the rootfs's dpkg status, ``"24.11.5"``)
    and ``mirror`` it was built from."""

    path: Path
    suite: str
    version: str
    mirror: str

    @property
    def marker(self) -> str:
        """A file that exists only inside this rootfs's namespace (its programs exec directly
        there: a job or hook calling ``scontrol`` is already in it)."""
        return f"/usr/share/slurmkit/rootfs-{self.suite}"

    def argv(self, program: str) -> list[str]:
        """The command line that runs ``program`` (a path inside the rootfs, such as
        ``/usr/sbin/slurmd``) with the rootfs's /usr over this machine's (see the module).
        Root only (a mount namespace)."""
        script = ('mount -t overlay "slurmkit-$2" -o "ro,lowerdir=$1/usr:/usr" /usr && shift 2 && exec "$@"')
        return ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", script, "sh",
                str(self.path), self.suite, program]

    def wrapper(self, program: str) -> str:
        """Text of a ``/bin/sh`` script that runs ``program`` of this rootfs with its arguments
        (``sandbox up`` writes one per Slurm command into the sandbox's ``bin/``)."""
        inner = " ".join(_sh_quote(a) for a in self.argv(program))
        return (f"#!/bin/sh\n# Slurm {self.version}'s {program}, from the Debian {self.suite} root filesystem\n"
                f"# {self.path} (written by 'slurmkit sandbox up'; /usr is that rootfs's over this\n"
                f"# machine's, in a mount namespace of its own)\n"
                f"[ -e {self.marker} ] && exec {program} \"$@\"\n"
                f"exec {inner} \"$@\"\n")


class RootfsBuildError(SandboxError):
    """mmdebstrap could not build a rootfs from Debian's archive (an archive that does not
    answer, a package not installable in the suite today); the message names the archive,
    the suite and the package."""


def write_wrappers(fs: Rootfs, directory: Path) -> dict[str, Path]:
    """Write ``directory/<command>`` (mode 755, :meth:`Rootfs.wrapper`) for each Slurm command
    of ``fs`` (:func:`programs`); returns ``{command: path}``."""
    directory.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, program in programs(fs.path).items():
        out[name] = directory / name
        atomic_write(out[name], fs.wrapper(program), 0o755)
    return out


def _sh_quote(word: str) -> str:
    return "'" + word.replace("'", "'\\''") + "'"


def programs(rootfs: Path) -> dict[str, str]:
    """Slurm's commands in a rootfs: ``{name: path inside it}`` for the clients
    (``/usr/bin/sbatch``...) and daemons (``/usr/sbin/slurmd``...), from the dpkg file lists of
    its Slurm packages."""
    found = {}
    for listing in sorted((rootfs / "var/lib/dpkg/info").glob("slurm*.list")):
        for line in listing.read_text().splitlines():
            if re.fullmatch(r"/usr/s?bin/s[a-z0-9]+(-wlm)?", line):
                name = line.rsplit("/", 1)[1].removesuffix("-wlm")
                found[name] = f"/usr/{line.split('/')[2]}/{name}"
    return found


def _manifest(path: Path) -> dict | None:
    try:
        data = json.loads((path / MANIFEST).read_text())
        return data if {"suite", "version", "mirror"} <= set(data) else None
    except (OSError, ValueError):
        return None


def find(release: SlurmRelease, root: Path | None = None) -> Rootfs | None:
    """The complete rootfs of ``release`` kept under ``root`` (default :func:`cache_dir`), or
    None when there is none yet."""
    path = (root or cache_dir()) / release.suite
    data = _manifest(path)
    if data is None:
        return None
    return Rootfs(path, data["suite"], data["version"], data["mirror"])


@contextmanager
def _locked(root: Path):
    try:
        root.mkdir(parents=True, exist_ok=True)
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise SandboxError(f"the root filesystems' directory {root} ($SLURMKIT_ROOTFS_DIR, default "
                           f"~/.cache/slurmkit/rootfs) cannot be used: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def ensure(release: SlurmRelease, progress=None, root: Path | None = None,
           packages: tuple[str, ...] = PACKAGES) -> Rootfs:
    """The rootfs of ``release``, built first when there is none (:func:`build`); one process
    builds while the others wait for it. Raises :class:`SandboxError` (see :func:`build`)."""
    root = root or cache_dir()
    kept = find(release, root)
    if kept is not None:
        return _checked(kept, release)
    with _locked(root):
        kept = find(release, root)
        if kept is None:
            kept = build(release, root, progress, packages)
    return _checked(kept, release)


def _checked(fs: Rootfs, release: SlurmRelease) -> Rootfs:
    if major(fs.version) != release.name:
        raise SandboxError(
            f"the Debian {fs.suite} root filesystem in {fs.path} holds Slurm {fs.version}, not {release.name}: "
            f"Debian's {release.debian} has moved on. Remove {fs.path} to build it again, and ask for the "
            f"version it holds")
    return fs


def build(release: SlurmRelease, root: Path, progress=None, packages: tuple[str, ...] = PACKAGES) -> Rootfs:
    """Build the rootfs of ``release`` under ``root`` with mmdebstrap (the caller holds the
    lock): into ``<suite>.partial-<pid>``, made usable (see :func:`_finish`), checked by running
    its ``slurmctld -V`` the way the sandbox runs it, then renamed to ``<suite>``.

    Raises :class:`SandboxError` naming the archive, the suite and the package or step that
    failed, and saying that 22.05 still works; the partial tree is removed.
    """
    say = progress or (lambda msg: None)
    suite, mirror = release.suite, debian_mirror()
    for stale in root.glob(f"{suite}.partial-*"):
        shutil.rmtree(stale, ignore_errors=True)
    if shutil.which("mmdebstrap") is None:
        raise SandboxError(f"Slurm {release.name} runs from a Debian {suite} root filesystem, built with "
                           "mmdebstrap, which is not installed: apt-get install mmdebstrap (or 'sandbox up "
                           "--install'). Slurm 22.05, this machine's packages, still works: leave out --slurm")
    partial = root / f"{suite}.partial-{os.getpid()}"
    logfile = root / f"{suite}.log"
    argv = ["mmdebstrap", "--variant=minbase", "--include=" + ",".join(packages)]
    if suite in ("sid", "unstable"):
        # unstable's Release file may be past its Valid-Until on a mirror or snapshot
        argv.append('--aptopt=Acquire::Check-Valid-Until "false"')
    argv += [suite, str(partial), mirror]
    say(f"building the Slurm {release.name} root filesystem: Debian {suite} from {mirror} (about 30 s, once)")
    t0 = time.monotonic()
    try:
        with open(logfile, "w") as fh:
            rc = subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                timeout=BUILD_TIMEOUT_S).returncode
    except subprocess.TimeoutExpired:
        rc, why = None, f"mmdebstrap did not finish within {BUILD_TIMEOUT_S} s"
    if rc != 0:
        if rc is not None:
            why = build_failure(logfile.read_text(errors="replace")) or f"mmdebstrap exited {rc}"
        shutil.rmtree(partial, ignore_errors=True)
        raise RootfsBuildError(
            f"cannot build the Slurm {release.name} root filesystem from the Debian archive {mirror}, suite "
            f"{suite} (packages {', '.join(packages)}): {why} (mmdebstrap's log: {logfile}; another mirror: "
            "$SLURMKIT_DEBIAN_MIRROR). Slurm 22.05, this machine's packages, still works: leave out --slurm")
    try:
        fs = _finish(partial, release, mirror, packages)
        final = root / suite
        shutil.rmtree(final, ignore_errors=True)
        os.rename(partial, final)
    except (OSError, SandboxError):
        shutil.rmtree(partial, ignore_errors=True)
        raise
    say(f"Slurm {fs.version} root filesystem ready in {final} ({time.monotonic() - t0:.0f} s)")
    return Rootfs(final, fs.suite, fs.version, fs.mirror)


def _finish(tree: Path, release: SlurmRelease, mirror: str, packages: tuple[str, ...]) -> Rootfs:
    """Make a fresh mmdebstrap tree usable from this machine, check it, and write its manifest.

    - /usr/sbin/slurmd, slurmctld and slurmstepd point at ``*-wlm`` directly: Debian links
      them through /etc/alternatives, and /etc is this machine's in the namespace.
    - Slurm's plugin directory is made opaque (``trusted.overlay.opaque``), so that plugins of
      this machine's own Slurm never show through the overlay.
    - ``slurmctld -V``, run as the sandbox runs it, must print the version dpkg recorded.
    """
    status = (tree / "var/lib/dpkg/status").read_text(errors="replace")
    version = dpkg_version(status, "slurmctld")
    if version is None:
        raise SandboxError(f"{tree}: mmdebstrap succeeded but slurmctld is not installed in it")
    version = version.split("-", 1)[0]
    for name in ALTERNATIVES:
        link = tree / "usr/sbin" / name
        if (tree / "usr/sbin" / f"{name}-wlm").exists():
            link.unlink(missing_ok=True)
            link.symlink_to(f"{name}-wlm")
    for plugins in tree.glob("usr/lib/*/slurm-wlm"):
        os.setxattr(plugins, "trusted.overlay.opaque", b"y")
    share = tree / "usr/share/slurmkit"
    share.mkdir(parents=True, exist_ok=True)
    (share / f"rootfs-{release.suite}").write_text("")
    fs = Rootfs(tree, release.suite, version, mirror)
    try:
        proc = subprocess.run(fs.argv("/usr/sbin/slurmctld") + ["-V"], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        raise SandboxError(f"{tree}: slurmctld -V did not return within 60 s") from None
    if proc.returncode != 0 or version not in proc.stdout:
        raise SandboxError(f"{tree}: slurmctld -V, run with the rootfs's /usr, printed "
                           f"{(proc.stdout + proc.stderr).strip()!r}, not slurm {version}")
    (tree / MANIFEST).write_text(json.dumps({"suite": release.suite, "version": version, "mirror": mirror,
                                             "packages": list(packages), "built": int(time.time())}) + "\n")
    return fs
