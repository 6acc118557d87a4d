"""Sync a project to the login node and give each submit its own immutable run folder there.

Layout on the login node, for a remote directory ``R`` (``--remote-dir``, default
``~/slurmkit-remote/<project name>``)::

    R/                          the synced tree (rsync target; nothing in it is deleted)
    R/.slurmkit/origin          "<local host>:<local root>" of the project that syncs here
    R/.slurmkit/snapshots/ID    the list of code files of run ID (NUL-separated; for cleanup)
    R/slurmkit-runs/ID/         run ID: a hard-link copy of the synced tree, the job's
                                working directory (its -o file, slurmkit-logs/ and relative
                                outputs land here)

What is sent (:func:`file_list`): inside a git work tree exactly the files git does not ignore
(``git ls-files --cached --others --exclude-standard``: every ``.gitignore``, negations,
anchoring, ``.git/info/exclude`` and ``core.excludesFile``), outside git the rsync filter
``:- .gitignore``; ``.git`` and ``slurmkit-runs`` are never sent; ``--exclude`` patterns
(rsync syntax) apply on top. The project root (:func:`find_source`) is ``--sync-dir``, else the
git work tree of the current directory, else the current directory; the job runs in the
matching subfolder of its run folder.

A run folder's code is a snapshot: rsync replaces changed files (new inodes), so what a queued
or requeued job reads is what was synced when it was submitted. After :data:`KEEP_RUNS` newer
runs, the code files of a run whose job has left the queue (``squeue -u $USER -o %Z``) are
removed; its outputs stay.
"""

from __future__ import annotations

import os
import posixpath
import secrets
import shlex
import socket
import subprocess
import time
from dataclasses import dataclass

from slurmkit.remote.ssh import Remote, RemoteError

#: The remote directory used when none is given: ``~/slurmkit-remote/<project name>``.
DEFAULT_PARENT = "~/slurmkit-remote"

#: Per-run folders, under the remote directory (never synced from here).
RUNS = "slurmkit-runs"

#: How many newest runs keep their code whatever their jobs' state.
KEEP_RUNS = 20


@dataclass(frozen=True)
class SyncSource:
    """What a remote submit sends: ``root`` (absolute local directory synced into the remote
    directory), ``subdir`` (the job's folder relative to ``root``, POSIX, "" for the root:
    the current directory when it lies inside ``root``) and ``git`` (True when ``root`` is in
    a git work tree: the file list comes from git)."""

    root: str
    subdir: str
    git: bool

    @property
    def name(self) -> str:
        """The project name: the root folder's name."""
        return os.path.basename(self.root.rstrip("/")) or "root"


def _git(args, cwd, timeout=30) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(["git", "-C", cwd, *args], capture_output=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None


def git_toplevel(path: str) -> str | None:
    """The git work tree ``path`` lies in (``git rev-parse --show-toplevel``); None outside
    git (or without git installed)."""
    res = _git(["rev-parse", "--show-toplevel"], path)
    if res is None or res.returncode != 0:
        return None
    return os.path.realpath(res.stdout.decode().strip()) or None


def find_source(sync_dir: str | None = None, cwd: str | None = None) -> SyncSource:
    """The :class:`SyncSource` for a submit from ``cwd`` (default: the current directory):
    ``sync_dir`` when given, else the git work tree's root, else ``cwd``."""
    cwd = os.path.realpath(cwd or os.getcwd())
    if sync_dir:
        root = os.path.realpath(sync_dir)
        git = git_toplevel(root) is not None if os.path.isdir(root) else False
    else:
        top = git_toplevel(cwd)
        root, git = (top, True) if top else (cwd, False)
    rel = os.path.relpath(cwd, root)
    subdir = "" if rel == "." or rel.startswith("..") else rel.replace(os.sep, "/")
    return SyncSource(root, subdir, git)


def file_list(source: SyncSource) -> list[str] | None:
    """The files to send, relative to ``source.root`` (git's view: tracked and untracked, not
    ignored, still present), or None outside git (rsync's ``.gitignore`` filter decides).
    ``slurmkit-runs/`` is left out. Raises :class:`RemoteError` (sync) when git fails."""
    if not source.git:
        return None
    res = _git(["ls-files", "--cached", "--others", "--exclude-standard", "-z"], source.root, timeout=120)
    if res is None or res.returncode != 0:
        err = (res.stderr.decode(errors="replace").strip().splitlines() or ["?"])[-1] if res else "did not run"  # git's stderr: shown in the message only
        raise RemoteError("local", "sync", f"git ls-files in {source.root} failed: {err}")
    out, seen = [], set()
    for raw in res.stdout.split(b"\0"):
        path = os.fsdecode(raw)
        if not path or path in seen or path == RUNS or path.startswith(RUNS + "/"):
            continue
        seen.add(path)     # a file with merge conflicts is listed once per stage
        if os.path.lexists(os.path.join(source.root, path)):   # deleted here, not yet staged
            out.append(path)
    return out


def resolve_remote_dir(remote_dir: str | None, name: str, home: str) -> str:
    """The absolute remote directory: ``remote_dir`` (``~`` = the remote ``home``; relative =
    under ``home``) or ``~/slurmkit-remote/<name>`` (``name``: the project name)."""
    path = remote_dir or posixpath.join(DEFAULT_PARENT, name)
    if path == "~" or path.startswith("~/"):
        path = home + path[1:]
    elif not path.startswith("/"):
        path = posixpath.join(home, path)
    return posixpath.normpath(path)


def new_run_id(now: float | None = None) -> str:
    """A run id: UTC time of the submit and 6 random hex digits (``20261201T171334Z-3fa2c1``);
    ids sort by time."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now)) + "-" + secrets.token_hex(3)


def run_dir(remote_dir: str, run_id: str) -> str:
    """The run folder of ``run_id`` on the login node: ``<remote_dir>/slurmkit-runs/<run_id>``."""
    return posixpath.join(remote_dir, RUNS, run_id)


def origin_of(source: SyncSource) -> str:
    """``<local host name>:<absolute local root>``: who syncs into a remote directory."""
    return f"{socket.gethostname()}:{source.root}"


def _rsync_version() -> tuple[int, ...]:
    try:
        out = subprocess.run(["rsync", "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ()
    words = out.split()
    if len(words) > 2 and words[1] == "version":
        try:
            return tuple(int(x) for x in words[2].split(".")[:3] if x.isdigit())
        except ValueError:
            return ()
    return ()


def change_check() -> str:
    """How rsync tells a changed file: ``--modify-window=-1`` (size and mtime to the
    nanosecond; rsync >= 3.1.3) so that a file rewritten within the same second with the same
    size (a config edited and resubmitted at once, a sweep writing configs in a loop) is sent;
    ``--checksum`` with an older local rsync (macOS's 2.6.9)."""
    return "--modify-window=-1" if _rsync_version() >= (3, 1, 3) else "--checksum"


def rsync_options(excludes=(), files: bool = False) -> list[str]:
    """rsync options for a sync: compress, :func:`change_check`; with ``files`` (a git file
    list on stdin, NUL separated) ``--files-from=- --from0``, else the ``.gitignore`` filter;
    never ``.git`` or ``slurmkit-runs``; plus each pattern of ``excludes``."""
    opts = ["--compress", change_check()]
    opts += ["--files-from=-", "--from0"] if files else ["--filter=:- .gitignore"]
    opts += ["--exclude=/.git", f"--exclude=/{RUNS}", "--exclude=/.slurmkit"]
    opts += [f"--exclude={pattern}" for pattern in excludes]
    return opts


def _q(text: str) -> str:
    return shlex.quote(text)


def claim_script(dest: str, who: str) -> str:
    """POSIX shell: create ``dest`` and its origin marker (``who``), or exit 75 printing the
    recorded origin when another project syncs there."""
    marker = f"{dest}/.slurmkit/origin"
    return (f"mkdir -p -- {_q(dest)}/.slurmkit {_q(dest)}/{RUNS} || exit 1; "
            f"if [ -s {_q(marker)} ]; then o=$(cat {_q(marker)}); "
            f"[ \"$o\" = {_q(who)} ] || {{ printf '%s\\n' \"$o\"; exit 75; }}; "
            f"else printf '%s\\n' {_q(who)} > {_q(marker)}; fi")


def claim(remote: Remote, dest: str, source: SyncSource, must_exist: bool = False) -> None:
    """Check that ``dest`` belongs to this project (``.slurmkit/origin``), recording it when
    new. Raises :class:`RemoteError` (sync) naming both origins when another project (another
    host or local path) syncs there, or with ``must_exist`` (``--no-sync``) when ``dest`` does
    not exist there."""
    who = origin_of(source)
    if must_exist:
        res = remote.shell(f"test -d {_q(dest)}", "sync", check=False)
        if res.returncode != 0:
            raise RemoteError(remote.host, "sync", f"{dest} does not exist there (--no-sync: nothing was sent; "
                              "run once without --no-sync)")
    res = remote.shell(claim_script(dest, who), "sync", check=False)
    if res.returncode == 75:
        other = res.stdout.strip()
        raise RemoteError(remote.host, "sync", f"{dest} holds another project (synced from {other}; this is {who}): "
                          f"pass --remote-dir to use another directory (or remove {dest}/.slurmkit/origin "
                          "there if it is this project, moved or renamed)")
    if res.returncode != 0:
        msg = (res.stderr.strip() or "no output").splitlines()[-1]
        raise RemoteError(remote.host, "sync", f"cannot create {dest}: {msg}")


def sync(remote: Remote, source: SyncSource | str, dest: str, excludes=(), run_id: str | None = None) -> None:
    """Copy ``source`` (a :class:`SyncSource`, or a local directory) into ``dest`` (absolute,
    on the remote host) after :func:`claim`; with ``run_id`` also into that run's folder,
    hard-linked against ``dest`` (``rsync --link-dest``: unchanged files cost no transfer and
    no space), so the run folder holds exactly what was sent. Raises :class:`RemoteError`
    (step ``sync``) when the directory is missing here, another project owns ``dest``, or
    rsync fails (disk full, no permission, connection)."""
    if isinstance(source, str):
        if not os.path.isdir(source):
            raise RemoteError(remote.host, "sync", f"--sync-dir {source} is not a directory")
        source = find_source(source, source)
    if not os.path.isdir(source.root):
        raise RemoteError(remote.host, "sync", f"--sync-dir {source.root} is not a directory")
    files = file_list(source)
    claim(remote, dest, source)
    src = source.root.rstrip("/") + "/"
    data = None if files is None else b"".join(os.fsencode(f) + b"\0" for f in files)
    opts = rsync_options(excludes, files=files is not None)
    remote.rsync(src, dest.rstrip("/") + "/", opts, input=data)
    if run_id is not None:
        run = run_dir(dest, run_id)
        remote.rsync(src, run + "/", [*opts, f"--link-dest={dest}"], input=data)


def check_exists(remote: Remote, dest: str, source: SyncSource | None = None) -> None:
    """With ``--no-sync``: raise :class:`RemoteError` (step ``sync``) unless ``dest`` is a
    directory on the remote host (and, given ``source``, one this project owns)."""
    if source is None:
        res = remote.shell(f"test -d {_q(dest)}", "sync", check=False)
        if res.returncode != 0:
            raise RemoteError(remote.host, "sync", f"{dest} does not exist there (--no-sync: nothing was sent; "
                              "run once without --no-sync)")
        return
    claim(remote, dest, source, must_exist=True)


def finish_run_script(dest: str, run_id: str, copy_tree: bool, keep: int = KEEP_RUNS) -> str:
    """POSIX shell (GNU cp and find on the login node) that completes run ``run_id``'s folder
    in ``dest`` and then cleans old runs' code.

    ``copy_tree`` (``--no-sync``): the folder is made as a hard-link copy (``cp -al``; plain
    ``cp -a`` where the file system has no hard links) of every entry of the synced tree but
    ``.slurmkit`` and ``slurmkit-runs``. The folder's file list is kept in
    ``.slurmkit/snapshots/<run_id>`` (NUL-separated). Cleanup: for all but the newest ``keep``
    lists, when squeue answers and no job of the user has its working directory in that run
    folder (``squeue -u $USER -o %Z``), remove the listed files (outputs stay), the folders
    left empty, and the list. Exit 1 with a message when the folder cannot be made."""
    d, rid = _q(dest), _q(run_id)
    lists = f"{d}/.slurmkit/snapshots"
    copy = ""
    if copy_tree:
        sel = f"find . -mindepth 1 -maxdepth 1 ! -name .slurmkit ! -name {RUNS} -exec"
        copy = (f"mkdir -p \"$run\" && {{ {sel} cp -al -t \"$run\" -- {{}} + 2>/dev/null || "
                f"{{ rm -rf \"$run\"; mkdir -p \"$run\" && {sel} cp -a -t \"$run\" -- {{}} +; }}; }} || "
                f"{{ echo \"cannot make the run folder $run\" >&2; rm -rf \"$run\"; exit 1; }}; ")
    return (
        f"cd {d} || exit 1; run={_q(run_dir(dest, run_id))}; mkdir -p {lists} || exit 1; {copy}"
        f"test -d \"$run\" || {{ echo \"the run folder $run is missing\" >&2; exit 1; }}; "
        f"(cd \"$run\" && find . ! -type d -print0) > {lists}/{rid} || exit 1; "
        # cleanup: never a run folder a queued or running job of this user works in
        f"busy=$(env -u SQUEUE_FORMAT squeue -h -u \"$(id -un)\" -o %Z 2>/dev/null) || exit 0; "
        f"ls -1 {lists} | sort -r | tail -n +{int(keep) + 1} | while read -r id; do "
        f"r={d}/{RUNS}/$id; "
        f"printf '%s\\n' \"$busy\" | awk -v r=\"$r\" '{{sub(/ +$/, \"\")}} $0 == r || index($0, r \"/\") == 1 "
        f"{{f = 1}} END {{exit !f}}' && continue; "
        f"(cd \"$r\" 2>/dev/null && xargs -0 -r rm -f -- < {lists}/\"$id\" && "
        f"find . -mindepth 1 -depth -type d -empty -delete); rm -f {lists}/\"$id\"; "
        f"done; exit 0")


def finish_run(remote: Remote, dest: str, run_id: str, copy_tree: bool = False, keep: int = KEEP_RUNS) -> str:
    """Complete run ``run_id``'s folder in ``dest`` and clean old runs' code
    (:func:`finish_run_script`; ``copy_tree``: make the folder from the synced tree there, for
    ``--no-sync``); the run folder's absolute path. Raises :class:`RemoteError` (step
    ``sync``) when it cannot be made (disk full, no permission)."""
    res = remote.shell(finish_run_script(dest, run_id, copy_tree, keep), "sync", check=False)
    if res.returncode != 0:
        msg = (res.stderr.strip() or res.stdout.strip() or "no output").splitlines()[-1]
        if "No space left on device" in msg:
            msg = f"the remote disk is full (No space left on device) making {run_dir(dest, run_id)}"
        raise RemoteError(remote.host, "sync", msg)
    return run_dir(dest, run_id)
