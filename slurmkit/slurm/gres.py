"""Slurm GRES specifications: ``gpu:h100:8,gpu:2(S:0-1),shard:16``, the GPUs they name.

Where they come from: slurm.conf ``NodeName=... Gres=`` (``slurm.conf(5)``:
``name[:type][:no_consume]:count``); ``scontrol show node`` ``Gres=`` (with the sockets in
parentheses, ``gpu:h100:4(S:0-1)``; ``(null)`` for none); sacct ``AllocGRES`` / ``ReqGRES``
(Slurm before TRES: ``gpu:tesla:2(IDX:0-1)``). A job's request (squeue ``%b``, ``gres:gpu:4`` or
``gres/gpu:4``) is read by :func:`slurmkit.slurm.tres.parse_request`. A count may carry a K/M/G/T suffix (powers of 1024: a
``bandwidth`` or ``mps`` count).

Standard library only, no pattern compiled: the hooks may import it.
"""

from __future__ import annotations

from slurmkit.errors import InputError

__all__ = ["GresSpecError", "count", "parse", "gpu_count"]


class GresSpecError(InputError):
    """A GRES specification that cannot be read: ``file`` (where it was read, "" when not
    known), ``line``, ``message`` (the text and what was expected)."""


_SUFFIX = {"k": 1024, "m": 1024 ** 2, "g": 1024 ** 3, "t": 1024 ** 4}


def count(text: str, source: str = "") -> int:
    """A Slurm gres count (slurm.conf ``Gres=``, gres.conf ``Count=``): digits with an optional
    K/M/G/T suffix (powers of 1024). Raises :class:`GresSpecError` (``source``) otherwise."""
    s = (text or "").strip()
    mult = _SUFFIX.get(s[-1:].lower(), 1)
    digits = s[:-1] if mult > 1 else s
    if not (digits.isascii() and digits.isdigit()):
        raise GresSpecError(source, None, f"not a count: {text!r} (expected digits with an optional K/M/G/T)")
    return int(digits) * mult


def _split(text: str) -> list[str]:
    """Comma-separated items, commas inside parentheses kept (``gpu:2(IDX:0,2)``)."""
    out, depth, cur = [], 0, []
    for c in text:
        if c == "(":
            depth += 1
        elif c == ")":
            depth = max(depth - 1, 0)
        if c == "," and not depth:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    out.append("".join(cur))
    return out


def parse(text: str | None, source: str = "") -> dict[tuple[str, str | None], int]:
    """A GRES specification -> ``{(name lower case, type or None): count}`` in first-seen order,
    counts of a repeated (name, type) summed: ``gpu:h100:8,gpu:2(S:0-1),shard:16`` ->
    ``{("gpu", "h100"): 8, ("gpu", None): 2, ("shard", None): 16}``. A name with no count
    counts 1; the ``no_consume`` flag and what is in parentheses are dropped. ``(null)``,
    ``N/A``, "" -> {}. Raises :class:`GresSpecError`
    (``source``) for a count that is not one."""
    out: dict[tuple[str, str | None], int] = {}
    s = (text or "").strip()
    if s in ("", "(null)", "N/A"):
        return out
    for part in _split(s):
        part = part.strip()
        if "(" in part:
            part = part[:part.index("(")]
        if not part:
            continue
        bits = [b for b in part.split(":") if b.lower() != "no_consume"]
        name = bits[0].lower()
        if len(bits) == 1:
            kind, n = None, 1
        elif len(bits) == 2:
            try:
                kind, n = None, count(bits[1], source)
            except GresSpecError:
                kind, n = bits[1], 1
        else:
            kind, n = bits[1], count(bits[2], source)
        out[(name, kind)] = out.get((name, kind), 0) + n
    return out


def gpu_count(text: str | None, source: str = "") -> int:
    """GPUs a GRES specification names: the counts of every ``gpu`` item, typed or not, summed
    (``gpu:a100:2,gpu:v100:1`` -> 3; no ``gpu`` item -> 0)."""
    return sum(n for (name, _), n in parse(text, source).items() if name == "gpu")
