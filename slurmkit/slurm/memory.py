"""Slurm memory sizes: ``199G``, ``32000M``, ``356K``, ``1.5T``, and the per-node / per-CPU forms
sacct printed for ReqMem before Slurm 21.08 (``4000Mn``, ``4000Mc``), in MiB.

Where they come from: sacct ``ReqMem``, ``MaxRSS``, ``AveRSS``, ``MaxVMSize``; the ``mem=`` and
``gres/gpumem=`` values of a TRES string (sacct ``AllocTRES``, ``ReqTRES``, ``TRESUsageIn*``;
read through :mod:`slurmkit.slurm.tres`). A unit letter is a power of 1024 (``K`` KiB, ``M``
MiB, ``G`` GiB, ``T`` TiB, ``P`` PiB, ``E`` EiB; ``B`` bytes), as Slurm's ``convert_num_unit``
prints them. A number without a letter is in the caller's unit: MiB for ReqMem and TRES
``mem=`` (Slurm's own unit), bytes for usage fields printed with ``sacct --noconvert``.

Standard library only, no pattern compiled: the hooks may import it.
"""

from __future__ import annotations

from slurmkit.errors import InputError

__all__ = ["MemorySizeError", "UNIT_MIB", "mib"]


class MemorySizeError(InputError):
    """A memory size that is not one: ``file`` (where it was read, "" when not known), ``line``,
    ``message`` (the value and what was expected)."""


#: MiB in one of each unit letter Slurm prints.
UNIT_MIB = {"B": 1 / 1048576, "K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1048576.0,
            "P": 1073741824.0, "E": 1099511627776.0}
_PER = {"n": "node", "c": "cpu"}


def mib(text: str, bare: str = "M", source: str = "") -> tuple[float, str] | None:
    """A memory size -> ``(MiB as float, per)``; None when ``text`` is empty (not set).

    ``text``: digits with an optional decimal part, an optional unit letter of :data:`UNIT_MIB`
    and, for ReqMem as sacct printed it before Slurm 21.08, ``n`` (per node) or ``c`` (per CPU):
    ``per`` is then ``"node"`` / ``"cpu"``, else ``""``. ``bare``: the unit letter of a number
    written without one (``"M"`` for ReqMem and TRES ``mem=``, ``"B"`` for ``--noconvert`` usage).
    Blanks around the value are ignored. Raises :class:`MemorySizeError` (``source``) for
    anything else (``5KK``, ``12é``, ``-1G``)."""
    s = (text or "").strip()
    if not s:
        return None
    per = _PER.get(s[-1], "")
    if per:
        s = s[:-1]
    unit = bare
    if s[-1:] in UNIT_MIB:
        unit, s = s[-1], s[:-1]
    head, dot, tail = s.partition(".")
    if not (head.isascii() and head.isdigit() and (not dot or (tail.isascii() and tail.isdigit()))):
        raise MemorySizeError(source, None, f"{text!r} is not a memory size (expected digits with an optional "
                                            "K/M/G/T/P unit and n/c suffix: 4000M, 1.5G, 4000Mc)")
    return float(s) * UNIT_MIB[unit], per
