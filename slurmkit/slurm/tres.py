"""Slurm TRES strings (trackable resources): ``cpu=8,mem=64G,node=1,billing=8,gres/gpu=2,
gres/gpu:a100=2``, and the GPUs a job holds.

Where they come from: sacct ``AllocTRES``, ``ReqTRES``, ``TRESUsageInTot`` / ``TRESUsageInAve``
/ ``TRESUsageInMax`` (usage: ``cpu=00:01:00,mem=2048,energy=12,gres/gpuutil=40,gres/gpumem=37956M``);
``scontrol show node`` ``CfgTRES=`` / ``AllocTRES=``; sacctmgr ``show event`` / ``show
reservation`` ``TRES``. An entry is ``key=value``: ``cpu``, ``mem`` (a memory size,
:mod:`slurmkit.slurm.memory`), ``energy`` (joules), ``billing``, ``node``, ``gres/<name>`` and
``gres/<name>:<type>`` (``gres/gpu:h100=4``, a MIG instance ``gres/gpu:a100_3g.20gb=1`` or
``gres/gpu:nvidia_a100_3g.20gb=1``, ``gres/shard:a100=8``), ``gres/gpuutil`` (percent),
``gres/gpumem`` (a memory size). Keys are written as Slurm prints them (lower case).

A job's GPU count (:func:`gpu_count`) is what ``sreport`` counts for ``-T gres/gpu``: the
untyped ``gres/gpu=N`` Slurm allocated; where only typed entries appear, their sum. A MIG
instance is one GPU, as Slurm and sreport count it: no share of a physical GPU is applied.
The physical view (:func:`physical_gpus`) weighs each instance by its share of the GPU
(:func:`slurmkit.mig.instance_share`): the one place the reports apply that rule.

Standard library only, no pattern compiled: the hooks may import it.
"""

from __future__ import annotations

from fractions import Fraction

from slurmkit import mig
from slurmkit.errors import InputError
from slurmkit.slurm import memory

__all__ = ["TresError", "NegativeGpuCount", "UnknownGpuShare", "parse", "parse_request", "number", "numbers",
           "mem_mib", "gpu_count", "physical_gpus", "gpu_type"]


class TresError(InputError):
    """A TRES string or value that cannot be read: ``file`` (where it was read, "" when not
    known), ``line``, ``message`` (the text and what was expected), ``key`` (the TRES key)."""


class NegativeGpuCount(TresError):
    """A GPU count sacct cannot have printed (``gres/gpu=-1``): unknown, not 0."""


class UnknownGpuShare(TresError):
    """A MIG instance type whose share of a physical GPU is not known
    (:func:`slurmkit.mig.instance_share` gives None: a profile no model has, or one whose share
    differs between the models that have it and the type's prefix does not pick one), or an
    untyped remainder beside MIG instances: the physical GPU count is unknown, not 0."""


def parse(text: str | None, source: str = "") -> dict[str, str]:
    """A TRES string -> ``{key: value as printed}`` in the order written (``cpu=8,gres/gpu=2``
    -> ``{"cpu": "8", "gres/gpu": "2"}``); a key written twice keeps its first value. Empty,
    None, ``N/A`` and ``(null)`` -> {}. Raises :class:`TresError` (``source``) for an entry that
    is not ``key=value``."""
    s = (text or "").strip()
    out: dict[str, str] = {}
    if s in ("", "N/A", "(null)"):
        return out
    for part in s.split(","):
        key, eq, value = part.partition("=")
        if not eq or not key:
            raise TresError(source, None, f"{part!r} in {text!r} is not key=value (expected cpu=8,gres/gpu=2,...)")
        out.setdefault(key, value)
    return out


def _entries(tres, source: str) -> dict[str, str]:
    return tres if isinstance(tres, dict) else parse(tres, source)


def number(tres, key: str, source: str = "") -> float | None:
    """The value of ``key`` (matched exactly: ``gres/gpu`` never matches ``gres/gpumem``,
    ``gres/gpuutil`` or ``gres/gpu:a100``) as a float; None when ``tres`` (a TRES string or
    :func:`parse`'s dict) lacks it. Raises :class:`TresError` (``source``, ``key``) for a value
    that is not a plain number (``mem=10G``: read it with :func:`mem_mib`; ``cpu=00:01:00``)."""
    v = _entries(tres, source).get(key)
    if v is None:
        return None
    head, dot, tail = v.partition(".")
    if not (head.isascii() and head.isdigit() and (not dot or (tail.isascii() and tail.isdigit()))):
        raise TresError(source, None, f"{v!r} is not a number", key)
    return float(v)


def numbers(tres, source: str = "") -> dict[str, float]:
    """The entries of a TRES string (or :func:`parse`'s dict) whose value is a plain number,
    with ``gres/gpu`` set to :func:`gpu_count` wherever the string has a ``gres/gpu`` entry,
    typed or not: ``cpu=8,mem=16000M,gres/gpu:a100=4`` -> ``{"cpu": 8.0, "gres/gpu:a100": 4.0,
    "gres/gpu": 4.0}`` (``mem=16000M`` is left out: :func:`mem_mib` reads it). Raises
    :class:`TresError` for a string :func:`parse` refuses or a GPU count that is not one."""
    entries = _entries(tres, source)
    out = {}
    for k, v in entries.items():
        try:
            out[k] = number({k: v}, k, source)
        except TresError:
            continue
    gpus = gpu_count(entries, source)
    if gpus is not None:
        out["gres/gpu"] = float(gpus)
    return out


def mem_mib(tres, key: str = "mem", bare: str = "M", source: str = "") -> float | None:
    """A memory value of a TRES string (``mem=199G``, ``gres/gpumem=20500736K``) in MiB
    (:func:`slurmkit.slurm.memory.mib`); ``bare``: the unit of a number without a letter (``"M"``
    in AllocTRES / ReqTRES, ``"B"`` in usage printed with ``--noconvert``). None when absent.
    Raises :class:`TresError` for a value that is not a memory size."""
    v = _entries(tres, source).get(key)
    if v is None:
        return None
    try:
        got = memory.mib(v, bare, source)
    except memory.MemorySizeError as exc:
        raise TresError(source, None, exc.message, key) from None
    return None if got is None else got[0]


def _count(key: str, v: str, source: str) -> int:
    if v.startswith("-") and v[1:].isascii() and v[1:].isdigit():
        raise NegativeGpuCount(source, None, f"{v!r}: a negative GPU count (unknown)", key)
    if not (v.isascii() and v.isdigit()):
        raise TresError(source, None, f"{v!r} is not a GPU count (expected digits)", key)
    return int(v)


def gpu_count(tres, source: str = "") -> int | None:
    """GPUs of a TRES string (or :func:`parse`'s dict) as sreport counts them: the untyped
    ``gres/gpu=N`` when present (typed entries of the same job are the same GPUs), else the sum
    of the typed ``gres/gpu:<type>=N`` (a MIG instance, ``gres/gpu:a100_3g.20gb=1``, is one
    GPU). None when there is no ``gres/gpu`` entry at all (a CPU job, or a string that does not
    say): not 0, so a caller can tell "none said". Never ``gres/gpumem`` / ``gres/gpuutil`` /
    ``gres/shard``. Raises :class:`NegativeGpuCount` for ``gres/gpu=-1`` (unknown) and
    :class:`TresError` for a count that is not digits."""
    entries = _entries(tres, source)
    if "gres/gpu" in entries:
        return _count("gres/gpu", entries["gres/gpu"], source)
    typed = [_count(k, v, source) for k, v in entries.items() if k.startswith("gres/gpu:")]
    return sum(typed) if typed else None


def physical_gpus(tres, source: str = "") -> Fraction | None:
    """Physical GPUs of a TRES string (or :func:`parse`'s dict): each MIG instance weighed by
    its share of the GPU, compute slices over the GPU's (:func:`slurmkit.mig.instance_share`,
    from NVIDIA's MIG user guide: ``gres/gpu:a100_3g.20gb=1`` -> 3/7, ``gres/gpu:nvidia_a30_4g.24gb=1``
    -> 1, ``gres/gpu:nvidia_a30_1g.6gb=1`` -> 1/4). :func:`gpu_count` is the default view, what
    Slurm allocated and sreport counts (an instance is one GPU); this is the second view.

    The rule: the typed entries ``gres/gpu:<type>=N`` summed, each N x the type's share (a type
    that names no MIG profile, ``h100``, is a whole GPU); the untyped ``gres/gpu=N`` beside them
    is the same GPUs (``gres/gpu:a100_3g.20gb=1,gres/gpu=1`` -> 3/7). Untyped GPUs beyond the
    typed ones are whole GPUs when no typed entry is a MIG instance; beside MIG instances their
    share is not known. Only an untyped ``gres/gpu=N``: N whole GPUs. None when there is no
    ``gres/gpu`` entry at all (as :func:`gpu_count`).

    Unknown is an error, never a number: raises :class:`UnknownGpuShare` when a MIG type's
    share is unknown (column readers turn it into NaN), :class:`NegativeGpuCount` for
    ``gres/gpu=-1`` and :class:`TresError` for a count that is not digits."""
    entries = _entries(tres, source)
    untyped = _count("gres/gpu", entries["gres/gpu"], source) if "gres/gpu" in entries else None
    total, typed, instances = Fraction(0), 0, False
    for k, v in entries.items():
        if not k.startswith("gres/gpu:"):
            continue
        n = _count(k, v, source)
        gtype = k[len("gres/gpu:"):]
        share = mig.instance_share(gtype)
        if share is None:
            raise UnknownGpuShare(source, None, f"{gtype!r}: a MIG instance whose share of a GPU is not known "
                                                "(no GPU model in slurmkit.mig has that profile, or several "
                                                "with different shares)", k)
        instances = instances or mig.profile_in_type(gtype) is not None
        total += n * share
        typed += n
    if untyped is None:
        return total if typed else None
    if untyped > typed:
        if instances:
            raise UnknownGpuShare(source, None, f"gres/gpu={untyped} beside {typed} typed MIG instance(s): "
                                                "the share of the other GPUs is not known", "gres/gpu")
        total += untyped - typed
    return total


def _is_count(text: str) -> bool:
    digits = text[:-1] if text[-1:].lower() in ("k", "m", "g", "t") else text
    return digits.isascii() and digits.isdigit()


def parse_request(text: str | None, source: str = "") -> dict[str, str]:
    """A job's resource request as Slurm keeps it, in every release's form -> :func:`parse`'s
    shape with TRES keys, so :func:`gpu_count` and :func:`numbers` read it.

    Where it comes from: the job's ``tres_per_job`` / ``tres_per_node`` / ``tres_per_task`` /
    ``tres_per_socket`` and ``cpus_per_tres`` / ``mem_per_tres`` (a job_submit.lua ``job_desc``
    field, ``scontrol show job`` ``TresPerNode=`` / ``TresPerJob=`` / ``TresPerTask=``, squeue
    ``%b``). Slurm 22.05 writes ``gres:gpu:2`` and ``gres:gpu:a100:2``; 24.11 and later
    ``gres/gpu:2``, ``gres/gpu:a100:2`` and, in ``tres_per_task``, ``gres/gpu=1`` (measured on
    each release's slurmctld: docs/slurm-versions.md). All read as ``{"gres/gpu": "2"}`` /
    ``{"gres/gpu:a100": "2"}``; a GRES with no count is 1; a ``cpu=4`` entry is kept as is.
    Empty, None, ``N/A`` and ``(null)`` -> {}. Raises :class:`TresError` (``source``) for an
    entry that is neither."""
    s = (text or "").strip()
    out: dict[str, str] = {}
    if s in ("", "N/A", "(null)"):
        return out
    for part in s.split(","):
        part = part.strip()
        if part[:5].lower() in ("gres:", "gres/"):
            name, eq, value = part[5:].partition("=")
            bits = name.split(":")
            if not eq:
                value = bits.pop() if len(bits) > 1 and _is_count(bits[-1]) else "1"
            key = "gres/" + ":".join(bits)
        else:
            key, eq, value = part.partition("=")
        if not key or key == "gres/" or not value:
            raise TresError(source, None, f"{part!r} in {text!r} is not a resource request "
                                          "(expected gres:gpu:2, gres/gpu:2, gres/gpu=1 or cpu=4)")
        out.setdefault(key, value)
    return out


def gpu_type(tres, source: str = "") -> str:
    """The type of the first typed ``gres/gpu:<type>=N`` entry (``a100``, ``a100_3g.20gb``);
    "" when there is none."""
    for k in _entries(tres, source):
        if k.startswith("gres/gpu:"):
            return k[len("gres/gpu:"):]
    return ""
