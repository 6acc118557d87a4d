"""Sync a working directory to the login node: what to send and where (pure), and the rsync.

``.gitignore`` files are honoured the way rsync can (``--filter=':- .gitignore'``: each
directory's ``.gitignore`` applies below it), ``.git`` itself is never sent, and ``excludes``
adds rsync/gitignore-style patterns. Nothing on the remote side is deleted (the jobs' outputs
live in the same directory).
"""

from __future__ import annotations

import os
import posixpath

from slurmkit.remote.ssh import Remote, RemoteError

#: The remote directory used when none is given: ``~/slurmkit-remote/<project name>``.
DEFAULT_PARENT = "~/slurmkit-remote"


def project_name(sync_dir: str) -> str:
    """The project name of ``sync_dir``: its git work tree's folder name when inside one, else
    its own folder name."""
    path = os.path.abspath(sync_dir)
    probe = path
    while True:
        if os.path.exists(os.path.join(probe, ".git")):
            return os.path.basename(probe)
        parent = os.path.dirname(probe)
        if parent == probe:
            return os.path.basename(path) or "root"
        probe = parent


def resolve_remote_dir(remote_dir: str | None, sync_dir: str, home: str) -> str:
    """The absolute remote directory: ``remote_dir`` (``~`` = the remote ``home``; relative =
    under ``home``) or ``~/slurmkit-remote/<project name>``."""
    path = remote_dir or posixpath.join(DEFAULT_PARENT, project_name(sync_dir))
    if path == "~" or path.startswith("~/"):
        path = home + path[1:]
    elif not path.startswith("/"):
        path = posixpath.join(home, path)
    return posixpath.normpath(path)


def rsync_options(excludes=()) -> list[str]:
    """rsync options for a sync: compress, keep partial files out of the way, honour
    ``.gitignore`` files, never send ``.git``, plus each pattern of ``excludes``."""
    opts = ["--compress", "--filter=:- .gitignore", "--exclude=/.git"]
    opts += [f"--exclude={pattern}" for pattern in excludes]
    return opts


def sync(remote: Remote, sync_dir: str, dest: str, excludes=()) -> None:
    """Copy ``sync_dir`` (a local directory) into ``dest`` (absolute, on the remote host).
    Raises :class:`RemoteError` (step ``sync``) when ``sync_dir`` is not a directory or rsync
    fails (disk full, no permission, connection)."""
    if not os.path.isdir(sync_dir):
        raise RemoteError(remote.host, "sync", f"--sync-dir {sync_dir} is not a directory")
    remote.shell(f"mkdir -p -- {_q(dest)}", "sync")
    remote.rsync(os.path.abspath(sync_dir).rstrip("/") + "/", dest.rstrip("/") + "/", rsync_options(excludes))


def check_exists(remote: Remote, dest: str) -> None:
    """With ``--no-sync``: raise :class:`RemoteError` (step ``sync``) unless ``dest`` is a
    directory on the remote host."""
    res = remote.shell(f"test -d {_q(dest)}", "sync", check=False)
    if res.returncode != 0:
        raise RemoteError(remote.host, "sync", f"{dest} does not exist there (--no-sync: nothing was sent; "
                          "run once without --no-sync)")


def _q(text: str) -> str:
    import shlex

    return shlex.quote(text)
