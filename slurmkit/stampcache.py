"""A JSON cache of something derived from files, valid while none of those files changes.

The hooks run on every job; parsing TOML (the site profile, the shipped ``checks.toml``) costs
more of their start-up than the checks. What they derive from those files is kept as JSON with
the path, modification time (ns) and size of every file it came from; :func:`read` returns it
only while all of them are unchanged. Only ``json`` and ``os`` are imported.
"""

from __future__ import annotations

import json
import os


def stamp(path) -> list:
    """``[path, st_mtime_ns, st_size]`` of ``path`` (``OSError`` when it cannot be stat'ed)."""
    st = os.stat(path)
    return [os.fspath(path), st.st_mtime_ns, st.st_size]


def read(cache_file, key: str):
    """The value cached in ``cache_file`` under ``key`` while every file it was derived from is
    unchanged, else None (missing, unreadable, another key, a file changed or gone)."""
    try:
        with open(cache_file, encoding="utf-8") as fh:
            data = json.load(fh)
        if data["key"] == key and data["files"] and all(stamp(f) == [f, ns, size] for f, ns, size in data["files"]):
            return data["value"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def read_last(cache_file, key: str):
    """The value cached in ``cache_file`` under ``key`` whether or not the files it was derived
    from changed since (the last good derivation, for when deriving it again fails), else None
    (missing, unreadable, another key)."""
    try:
        with open(cache_file, encoding="utf-8") as fh:
            data = json.load(fh)
        if data["key"] == key:
            return data["value"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def write(cache_file, key: str, files, value) -> bool:
    """Cache ``value`` (JSON-able) under ``key`` as derived from ``files`` (paths), atomically,
    the folder made 0700 and the file 0600. Returns False, raising nothing, when it cannot (the
    next run derives the value again)."""
    from slurmkit.atomicfile import atomic_write

    try:
        stamps = [stamp(f) for f in files]
        os.makedirs(os.path.dirname(os.fspath(cache_file)) or ".", mode=0o700, exist_ok=True)
        atomic_write(cache_file, json.dumps({"key": key, "files": stamps, "value": value}) + "\n", 0o600)
        return True
    except (OSError, TypeError, ValueError):
        return False
