"""Slurm hostlist expressions (``n[1-4,7]``, ``gpu-[01-02]``), through python-hostlist.

The one place slurmkit expands or builds a hostlist: profiles' ``nodes``, gres.conf
``NodeName=`` / ``File=`` ranges, generated gres.conf / topology.conf lines, and the NodeList
that squeue, sacct and sacctmgr print. Light to import (python-hostlist is one pure-Python
module): the hooks use it.
"""

from __future__ import annotations

from collections.abc import Iterable

import hostlist as _hl

#: Raised for an expression that is not a hostlist (unbalanced brackets, a bad range).
BadHostlist = _hl.BadHostlist

# what squeue / sacct print for a job that has no nodes (yet)
_NO_NODES = ("", "None assigned", "(null)")


def expand_hostlist(expr: str | Iterable[str]) -> list[str]:
    """``"n[1-3],m1"`` -> ``["n1", "n2", "n3", "m1"]``: in the expression's order, each name
    once. A list or tuple of expressions is read as their comma join; "" -> ``[]``.
    Raises :class:`BadHostlist`."""
    if not isinstance(expr, str):
        expr = ",".join(expr)
    return _hl.expand_hostlist(expr)


def collect_hostlist(names: Iterable[str]) -> str:
    """Node names -> the shortest hostlist Slurm reads (``["n2", "n1", "n10"]`` ->
    ``"n[1-2,10]"``; names sorted numerically, one name stays bare: ``"n1"``)."""
    return _hl.collect_hostlist(list(names))


def expand_nodelist(nodelist: str | None) -> tuple[str, ...]:
    """A job's NodeList as squeue / sacct print it -> its node names; ``()`` for a job with no
    node (``None assigned``, ``(null)``, a pending reason in parentheses such as
    ``(Resources)``, "" or None). Raises :class:`BadHostlist`."""
    nodelist = (nodelist or "").strip()
    if nodelist in _NO_NODES or nodelist.startswith("("):
        return ()
    return tuple(_hl.expand_hostlist(nodelist))
