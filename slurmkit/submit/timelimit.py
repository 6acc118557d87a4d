"""Slurm time strings (``--time``, ``--switches=N@WAIT``): parse and check them before sbatch does.

Slurm accepts ``MIN``, ``MIN:SEC``, ``HH:MM:SS``, ``D-HH``, ``D-HH:MM`` and ``D-HH:MM:SS``
(``sbatch(1)``, option ``--time``), and ``UNLIMITED`` / ``INFINITE`` for no limit.
"""

from __future__ import annotations

import math

from slurmkit.errors import UsageError
from slurmkit.slurm import duration


def parse_seconds(text: str, option: str = "--time", minimum: int = 1) -> int | None:
    """Seconds of a Slurm time string (``"1:00"`` -> 60, ``"1-12"`` -> 129600, ``"90"`` -> 5400;
    read by :func:`slurmkit.slurm.duration.seconds`, a bare number in minutes);
    None for no limit (``UNLIMITED``, ``INFINITE``, or 0 where ``minimum`` > 0, as sbatch reads it).
    ``minimum``: the least seconds accepted (0 for a ``--switches`` wait). Raises
    :class:`~slurmkit.errors.UsageError` naming ``option`` for anything sbatch would not read
    as a time (sacct's ``Partition_Limit`` / ``INVALID`` and fractions included)."""
    s = str(text).strip()
    try:
        total = duration.seconds(s, "min") if s.upper() not in ("PARTITION_LIMIT", "4294967295") else None
    except duration.DurationError:
        total = None
    if total == math.inf and s.upper() in ("UNLIMITED", "INFINITE"):
        return None
    if total is None or total == math.inf or total != int(total):
        raise UsageError(f"{option} {text!r}", "not a Slurm time (MIN, MIN:SEC, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS)")
    total = int(total)
    if total == 0 and minimum > 0:
        return None                       # sbatch(1): "A time limit of zero requests that no time limit be imposed"
    if total < minimum:
        raise UsageError(f"{option} {text!r}", f"must be at least {minimum} s")
    return total


def slurm_limit(seconds: int) -> int:
    """The time limit Slurm applies for ``seconds``: it keeps whole minutes, rounding up
    (src/common/parse_time.c ``time_str2mins``: ``(secs + 59) / 60``), so ``-t 1:30`` runs
    with ``TimeLimit=00:02:00``. In seconds."""
    return (seconds + 59) // 60 * 60


def hms(seconds: int) -> str:
    """``seconds`` as scontrol shows a time limit: ``HH:MM:SS`` or ``D-HH:MM:SS``."""
    days, rest = divmod(int(seconds), 86400)
    text = f"{rest // 3600:02d}:{rest // 60 % 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text
