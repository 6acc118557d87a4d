"""Slurm durations and time limits: ``[D-]HH:MM:SS``, ``MM:SS``, ``MM``, ``D-HH``, ``D-HH:MM``,
and the words for no limit (``UNLIMITED``, ``INFINITE``, ``Partition_Limit``) or none
(``INVALID``), in seconds.

Where they come from: sacct ``Elapsed``, ``CPUTime``, ``TotalCPU`` (``MM:SS.mmm`` under an hour),
``Suspended``, ``Timelimit`` (``Partition_Limit`` when the job took its partition's limit),
``TimelimitRaw`` (whole minutes, ``4294967295`` for INFINITE); ``scontrol show job``
``TimeLimit=``; sbatch's ``--time`` (``sbatch(1)``; Slurm's src/common/parse_time.c
``time_str2secs``). A bare number is minutes in Slurm's own grammar (``--time=90``), seconds in
sacct's ``*Raw`` fields: the caller says which (``bare``).

Standard library only, no pattern compiled: the hooks may import it.
"""

from __future__ import annotations

import math

from slurmkit.errors import InputError

__all__ = ["DurationError", "NO_LIMIT", "NOT_SET", "seconds"]


class DurationError(InputError):
    """A duration that is not one: ``file`` (where it was read, "" when not known), ``line``,
    ``message`` (the value and the forms expected)."""


#: Slurm's INFINITE (a 32-bit all-ones) as TimelimitRaw prints it (minutes).
_INFINITE_RAW = "4294967295"
#: Words (any case) for no limit: ``seconds`` gives ``math.inf``; :data:`_INFINITE_RAW` too
#: where a bare number is minutes.
NO_LIMIT = ("UNLIMITED", "INFINITE", "PARTITION_LIMIT", _INFINITE_RAW)
#: Words (any case) sacct prints for a duration that is not set: ``seconds`` gives None.
NOT_SET = ("", "INVALID", "UNKNOWN", "NONE", "N/A")

_FORMS = "MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS, UNLIMITED, Partition_Limit or INVALID"


def _digits(s: str) -> bool:
    return s.isascii() and s.isdigit()


def _secs(s: str) -> bool:
    """Digits with an optional decimal part (TotalCPU's ``MM:SS.mmm``)."""
    head, dot, tail = s.partition(".")
    return _digits(head) and (not dot or _digits(tail))


def seconds(text: str, bare: str = "min", source: str = "") -> float | None:
    """Seconds of a Slurm duration (int when whole, float with TotalCPU's fraction):
    ``"1:00"`` -> 60, ``"1-12"`` -> 129600, ``"2-03:04:05"`` -> 183845, ``"05:07.250"`` -> 307.25;
    ``math.inf`` for a word of :data:`NO_LIMIT`; None for one of :data:`NOT_SET`.

    ``bare``: the unit of a bare number, ``"min"`` (Slurm's grammar: ``--time``, Timelimit,
    TimelimitRaw) or ``"s"`` (sacct's ``ElapsedRaw``, ``CPUTimeRAW``). Blanks around the value
    are ignored. Raises :class:`DurationError` (``source``) for anything else (``1:2:3:4``,
    ``-5``, ``1h``)."""
    s = (text or "").strip()
    word = s.upper()
    if word in NOT_SET:
        return None
    if word in NO_LIMIT and (word != _INFINITE_RAW or bare == "min"):
        return math.inf
    dashed = "-" in s
    days, body = 0, s
    if dashed:
        d, _, body = s.partition("-")
        if not _digits(d):
            raise DurationError(source, None, f"{text!r} is not a Slurm duration (expected {_FORMS})")
        days = int(d)
    parts = body.split(":")
    if len(parts) > 3 or not all(_digits(p) for p in parts[:-1]) or not _secs(parts[-1]):
        raise DurationError(source, None, f"{text!r} is not a Slurm duration (expected {_FORMS})")
    is_secs = len(parts) == 3 if dashed else (len(parts) > 1 or bare == "s")
    if "." in parts[-1] and not is_secs:
        raise DurationError(source, None, f"{text!r}: only seconds may have a fraction")
    last = float(parts[-1]) if "." in parts[-1] else int(parts[-1])
    if dashed:   # D-HH, D-HH:MM, D-HH:MM:SS
        h, m, sec = int(parts[0]), int(parts[1]) if len(parts) > 1 else 0, last if len(parts) > 2 else 0
        return ((days * 24 + h) * 60 + m) * 60 + sec
    if len(parts) == 3:
        return (int(parts[0]) * 60 + int(parts[1])) * 60 + last
    if len(parts) == 2:
        return int(parts[0]) * 60 + last
    return last * 60 if bare == "min" else last
