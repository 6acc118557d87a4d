"""Atomic file replacement: a reader (slurmd re-reading slurm.conf, node_exporter, a hook, the
report) sees the old file or the new one, never a truncated or half-written one, and after a
crash the new one is either wholly there or not at all.

Every file slurmkit replaces in place goes through here: hook state, textfile metrics, the
kmsg cursor, the accounting store's Parquet files and manifest, snapshots, slurm.conf and the
hooks config written by install, the sandbox's configuration.

How: the data goes to a hidden temp file in the same directory (``.<name>.tmp<pid>``, so a
reader globbing ``*.prom`` or ``*.parquet`` never picks it up), which is fsync'ed, given its
mode and renamed over ``path``; then the directory is fsync'ed so that the rename itself
survives a crash. :func:`atomic_write_all` replaces several files that way with one fsync per
directory (a hook run's four textfiles: one directory fsync instead of four). Standard library
only: the hooks import this on every job.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator


def _fsync_dir(directory: str) -> None:
    """fsync ``directory`` (makes a rename in it durable). Filesystems that cannot (some
    network and FUSE mounts answer EINVAL) are let be: the rename has still happened."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _temp_path(path: str) -> str:
    """The hidden temp file beside ``path``: ``.<name>.tmp<pid>``."""
    directory, name = os.path.split(path)
    return os.path.join(directory, f".{name}.tmp{os.getpid()}")


def _mode_for(path: str, mode: int | None) -> int:
    """``mode``, else the permission bits of the file being replaced, else 0644."""
    if mode is not None:
        return mode
    try:
        return os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        return 0o644


@contextlib.contextmanager
def _replacing(path: str | os.PathLike, mode: int | None) -> Iterator[str]:
    """Yield the temp path to fill (and fsync); on a clean exit chmod it, rename it over
    ``path`` and fsync the directory; on any exception remove it and re-raise."""
    path = os.fspath(path)
    tmp = _temp_path(path)
    try:
        yield tmp
        os.chmod(tmp, _mode_for(path, mode))
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(os.path.dirname(path) or ".")


def atomic_write(path: str | os.PathLike, data: bytes | str, mode: int | None = None) -> None:
    """Replace ``path`` atomically with ``data`` (bytes, or str written as UTF-8).

    ``mode``: permission bits of the new file; None keeps the replaced file's mode, else 0644.
    Raises ``OSError`` (the temp file is removed; ``path`` is left as it was).
    """
    with _replacing(path, mode) as tmp:
        _write_synced(tmp, data)


def _write_synced(tmp: str, data: bytes | str) -> None:
    """Write ``data`` (str as UTF-8) to the new file ``tmp`` (0600 until chmod'ed) and fsync it."""
    if isinstance(data, str):
        data = data.encode()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_all(files: list) -> None:
    """Replace each file of ``files`` (``[(path, data bytes or str, mode or None)]``, distinct
    paths, ``mode`` as for :func:`atomic_write`) atomically, as :func:`atomic_write` does, with
    one directory fsync per directory instead of one per file: every temp file is written and
    fsync'ed first, then renamed over its path in the given order (a reader sees each file old
    or new, never half; the renames follow each other closely), then each directory of a renamed
    file is fsync'ed once. Raises ``OSError``: from writing a temp file, no path replaced yet;
    from a rename, the files before it replaced and the rest left as they were (no temp file
    is left behind either way)."""
    tmps: list = []
    renamed = 0
    try:
        for path, data, _ in files:
            tmps.append(_temp_path(os.fspath(path)))
            _write_synced(tmps[-1], data)
        for tmp, (path, _, mode) in zip(tmps, files):
            os.chmod(tmp, _mode_for(os.fspath(path), mode))
            os.replace(tmp, path)
            renamed += 1
    except BaseException:
        for tmp in tmps[renamed:]:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        raise
    finally:
        for directory in dict.fromkeys(os.path.dirname(os.fspath(p)) or "." for p, _, _ in files[:renamed]):
            _fsync_dir(directory)


def atomic_write_with(path: str | os.PathLike, write: Callable[[str], None], mode: int | None = None) -> None:
    """Replace ``path`` atomically with the file that ``write(tmp_path)`` writes at the temp
    path it is given (for writers that want a path, such as ``pyarrow.parquet.write_table``);
    the temp file is then fsync'ed, chmod'ed and renamed over ``path``.

    ``mode``: as for :func:`atomic_write`. Raises ``OSError`` and whatever ``write`` raises
    (the temp file is removed; ``path`` is left as it was); ``FileNotFoundError`` when
    ``write`` wrote nothing.
    """
    with _replacing(path, mode) as tmp:
        write(tmp)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
