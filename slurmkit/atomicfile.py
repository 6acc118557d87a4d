"""Atomic file replacement: a reader (slurmd re-reading slurm.conf, node_exporter, a hook)
sees the old file or the new one, never a truncated or half-written one."""
from __future__ import annotations

import os
from pathlib import Path


def atomic_write(path: Path | str, data: bytes | str, mode: int | None = None) -> None:
    """Write ``data`` (str is UTF-8 encoded) to ``path`` atomically: a temp file in the same
    directory, fsync, chmod, rename over. ``mode`` defaults to the replaced file's mode, else
    0644. Raises ``OSError`` (the temp file is removed; ``path`` is left as it was)."""
    path = Path(path)
    if isinstance(data, str):
        data = data.encode()
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is None:
            try:
                mode = path.stat().st_mode & 0o7777
            except FileNotFoundError:
                mode = 0o644
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
