"""Process heap settings for one-shot, memory-heavy commands (``slurmkit report``).

A large ingest allocates and frees many column-sized arrays (NumPy's through glibc malloc).
By default glibc serves each array above its mmap threshold with a fresh mapping and gives it
back on free, and trims the heap top; the next array takes new pages, each a page fault (on a
VM a costly one). :func:`keep_freed_memory` asks glibc to keep freed memory for reuse instead.
Measured on the 1M-allocation benchmark (``bench/report_scale.py``, 2-core VM): page faults
about 600k -> 200k, system time about 4 s -> 2 s, peak RSS about 1.5 -> 1.35 GiB. The cost:
the process does not hand memory back before it exits, so this is for commands that end, not
for daemons or hooks.
"""

from __future__ import annotations

import ctypes
import ctypes.util

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8


def keep_freed_memory(limit_bytes: int = 1 << 30) -> bool:
    """Set glibc's ``M_MMAP_THRESHOLD`` and ``M_TRIM_THRESHOLD`` (``mallopt(3)``) to
    ``limit_bytes`` (default 1 GiB): arrays below it come from the heap and freed memory stays
    there for the next one; and ``M_ARENA_MAX`` to 1, so that what the worker threads typing
    sacct blocks free is reused by the main thread (call it before those threads start).
    Returns True when all three were set; False (and nothing changed) where
    the C library has no ``mallopt`` (not glibc) or refuses a value. Raises ``ValueError`` for a
    limit below 1 MiB."""
    if limit_bytes < 1 << 20:
        raise ValueError(f"keep_freed_memory: limit {limit_bytes} bytes is below 1 MiB")
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    limit = min(int(limit_bytes), 2**31 - 1)
    return all(mallopt(opt, value) for opt, value in
               ((_M_MMAP_THRESHOLD, limit), (_M_TRIM_THRESHOLD, limit), (_M_ARENA_MAX, 1)))
