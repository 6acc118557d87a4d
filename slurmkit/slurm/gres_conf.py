"""gres.conf records (``gres.conf(5)``): one :class:`GresConfRecord` per ``Key=Value`` line, its
hostlists and device ranges expanded.

The file is read through :mod:`slurmkit.slurm.conf` (Slurm's ``Key=Value`` syntax, comments,
continuation lines, ``Include`` followed): :func:`load` for a file on disk (the hooks' path),
:func:`records` over the lines of a :func:`slurmkit.slurm.conf.load_tree` result already read
(:func:`slurmkit.slurm.conf.key_value_lines`). What each key means is gres.conf(5)'s:

- ``NodeName`` (a hostlist; absent: every node reading the file), ``Name`` (``gpu``, ``shard``,
  ``mps``, ``nic``, ...), ``Type`` (``h100``, a MIG profile ``nvidia_a100_3g.20gb``);
- ``File`` (device files, ranges expanded: ``/dev/nvidia[0-3]``), ``MultipleFiles`` (the files
  of one gres: a MIG instance's GPU and caps files), ``Count`` (digits with an optional
  K/M/G/T: :func:`slurmkit.slurm.gres.count`);
- ``Cores`` / ``CPUs`` (the older name; as written, ``0-19,40-59``), ``Links`` (as written),
  ``AutoDetect`` (``nvml``, ``nvidia``, ``rsmi``, ``off``; lower case), ``Flags`` (as written).

Standard library only at import (the hooks import it; hostlists are expanded by
:mod:`slurmkit.hostlist`, imported when a record is built).
"""

from __future__ import annotations

from slurmkit.errors import InputError
from slurmkit.records import record
from slurmkit.slurm import gres

__all__ = ["GresConfError", "GresConfRecord", "records", "parse", "load", "autodetect"]


class GresConfError(InputError):
    """A gres.conf line that cannot be used: ``file``, ``line`` (1-based, None when not about a
    line), ``message`` (what is wrong and what was expected)."""


@record(frozen=True)
class GresConfRecord:
    """One gres.conf line. ``file``, ``line`` (1-based); ``nodes``: ``NodeName`` expanded (a
    tuple; None: every node); ``name``: ``Name`` in lower case (None on a line without one,
    such as ``AutoDetect=nvml`` alone); ``type``: ``Type`` as written (None when absent);
    ``files``: ``File`` (else ``MultipleFiles``) expanded, () when absent; ``multiple``:
    ``MultipleFiles`` given (its files are one gres); ``count``: ``Count`` (int; None when
    absent); ``cores``: ``Cores`` (else ``CPUs``) as written; ``links``, ``flags``: as written;
    ``autodetect``: ``AutoDetect`` in lower case; ``keys``: {lower-case key: value as written}."""

    file: str
    line: int
    nodes: tuple | None
    name: str | None
    type: str | None
    files: tuple
    multiple: bool
    count: int | None
    cores: str | None
    links: str | None
    flags: str | None
    autodetect: str | None
    keys: dict

    def applies_to(self, node: str) -> bool:
        """True when the line is for ``node`` (no ``NodeName``, or a hostlist naming it)."""
        return self.nodes is None or node in self.nodes

    def units(self) -> int:
        """Gres this line gives one node: one per ``File=`` device, one for ``MultipleFiles=``,
        else ``Count=`` (default 1)."""
        if self.multiple:
            return 1
        if self.files:
            return len(self.files)
        return self.count if self.count is not None else 1


def _record(file: str, line: int, pairs) -> GresConfRecord:
    from slurmkit.hostlist import BadHostlist, expand_hostlist

    keys = {k.lower(): v for k, v in pairs}

    def expand(key: str, what: str):
        try:
            return tuple(expand_hostlist(keys[key]))
        except BadHostlist as exc:
            raise GresConfError(file, line, f"bad {what} {keys[key]!r}: {exc}", key) from None

    nodes = expand("nodename", "NodeName hostlist") if "nodename" in keys else None
    src = "file" if "file" in keys else "multiplefiles" if "multiplefiles" in keys else None
    files = expand(src, f"{'File' if src == 'file' else 'MultipleFiles'}= range") if src and keys[src] else ()
    try:
        count = gres.count(keys["count"]) if "count" in keys else None
    except gres.GresSpecError as exc:
        raise GresConfError(file, line, f"Count={keys['count']!r}: {exc.message}", "count") from None
    name = keys.get("name")
    auto = keys.get("autodetect")
    return GresConfRecord(file, line, nodes, name.lower() if name is not None else None, keys.get("type"),
                          files, "multiplefiles" in keys, count, keys.get("cores", keys.get("cpus")),
                          keys.get("links"), keys.get("flags"), auto.lower() if auto is not None else None, keys)


def records(lines) -> list[GresConfRecord]:
    """``[(file, line, [(key, value)])]`` (the ``Key=Value`` lines of a gres.conf in reading
    order: :func:`slurmkit.slurm.conf.read_lines` / :func:`slurmkit.slurm.conf.key_value_lines`)
    -> their records. Raises :class:`GresConfError` (file, line, key) for a ``NodeName``
    hostlist, a ``File`` / ``MultipleFiles`` range or a ``Count`` that does not parse."""
    return [_record(str(f), n, pairs) for f, n, pairs in lines if pairs]


def load(path) -> list[GresConfRecord]:
    """The records of the gres.conf at ``path`` and of the files it ``Include``s
    (:func:`slurmkit.slurm.conf.read_lines`). Raises :class:`GresConfError` for a line slurmd
    would not read, a missing file or included file, or a value :func:`records` refuses."""
    from slurmkit.slurm import conf

    try:
        lines = conf.read_lines(path)
    except conf.ConfError as exc:
        raise GresConfError(exc.file, exc.line, exc.message) from None
    return records(lines)


def parse(text: str, path: str = "gres.conf") -> list[GresConfRecord]:
    """The records of a gres.conf text read from ``path`` (:func:`slurmkit.slurm.conf.parse`);
    an ``Include`` in it is refused (read the file with :func:`load`). Raises
    :class:`GresConfError` as :func:`load` does."""
    from slurmkit.slurm import conf

    try:
        cf = conf.parse(text, path)
    except conf.ConfError as exc:
        raise GresConfError(exc.file, exc.line, exc.message) from None
    for e in cf.entries:
        if e.include:
            raise GresConfError(path, e.lineno, "Include in a gres.conf text read without its file: read the file")
    return records((str(path), e.lineno, e.pairs) for e in cf.entries)


def autodetect(recs: list[GresConfRecord], node: str | None) -> str | None:
    """The ``AutoDetect=`` that applies to ``node`` (lower case: the last line without
    ``NodeName`` or naming the node; ``node`` None: the last global one); None when none
    does. ``off`` is returned as is."""
    found = None
    for r in recs:
        if r.autodetect is not None and (r.nodes is None or (node is not None and node in r.nodes)):
            found = r.autodetect
    return found
