"""Drain and resume with reason ownership.

Ownership is read from Slurm's *current* reason (``scontrol show node``), never from what the
hooks remember: slurmkit drains a node only when its current reason is empty or one of ours
(``slurmkit: ...``), and resumes only a node whose current reason is its own. Any other reason
(an admin's, another tool's such as NHC, Slurm's own ``Prolog error`` / ``Epilog error`` /
``Kill task failed``) is never overwritten nor resumed: the party that set it owns the node.
Reasons read ``slurmkit: <check> GPU<i> <PCI bus id>: <meaning>`` (``slurmkit: nvml-timeout``
for a hang).

:func:`parse_show_node` and :func:`may_take_over` are pure; :func:`drain` / :func:`resume` run
``scontrol`` (through :func:`slurmkit.slurm.commands.run`, with a timeout) and are only called on
the unhealthy path or to resume a node slurmkit drained; they return a :class:`DrainResult`.
"""

from __future__ import annotations

import re
from enum import StrEnum

from slurmkit.records import record

PREFIX = "slurmkit:"


class DrainOutcome(StrEnum):
    """What :func:`drain` / :func:`resume` did."""

    DRAINED = "drained"
    RESUMED = "resumed"
    NOT_DRAINED = "not drained"   # resume: the node is not draining
    KEPT = "kept"                 # another party owns the node's reason: left alone


@record(frozen=True)
class DrainResult:
    """``outcome`` and, when it is :attr:`DrainOutcome.KEPT`, ``their_reason`` (the node's
    current reason, from ``scontrol show node``). ``str()`` reads ``drained`` / ``resumed`` /
    ``not drained`` / ``kept <their reason>`` (the words the hooks log)."""

    outcome: DrainOutcome
    their_reason: str | None = None

    def __str__(self) -> str:
        return f"{self.outcome} {self.their_reason}" if self.outcome is DrainOutcome.KEPT else str(self.outcome)


def sanitize(reason: str) -> str:
    """One printable line of at most :data:`slurmkit.health.result.REASON_MAX` characters, cut
    at a word (:func:`slurmkit.health.result.fit_reason`: the one rule for every reason)."""
    from slurmkit.health.result import fit_reason

    return fit_reason(reason)


def parse_show_node(text: str) -> dict:
    """``scontrol show node -o NAME`` -> ``{"state": "IDLE+DRAIN", "reason": str | None}``.

    The reason is what follows ``Reason=`` minus Slurm's ``[user@time]`` suffix.
    """
    state = re.search(r"\bState=(\S+)", text)
    m = re.search(r"\bReason=(.*?)(?: \[[^\]]*@[^\]]*\])?(?=\s+\w+=|\s*$)", text)
    reason = m.group(1).strip() if m else None
    if reason in ("", "(null)", "None"):
        reason = None
    return {"state": state.group(1) if state else "", "reason": reason}


def is_ours(reason: str | None) -> bool:
    """True for a reason slurmkit set."""
    return bool(reason) and reason.startswith(PREFIX)


def may_take_over(reason: str | None) -> bool:
    """True when slurmkit may (re)set the reason: none, or ours. Slurm's own reasons
    (``Kill task failed``, ``Prolog error``), an admin's or another tool's: False."""
    return not reason or is_ours(reason)


def show_node(node: str, timeout: float, slurm_conf: str | None = None, bin_dir: str | None = None) -> dict:
    """The node's state and reason (``scontrol show node -o``); raises ``SlurmError``."""
    from slurmkit.slurm.commands import run

    res = run([_exe("scontrol", bin_dir), "show", "node", "-o", node], timeout=timeout, slurm_conf=slurm_conf)
    return parse_show_node(res.stdout)


def _exe(name: str, bin_dir: str | None) -> str:
    import os

    return os.path.join(bin_dir, name) if bin_dir else name


def drain(node: str, reason: str, timeout: float, slurm_conf: str | None = None,
          bin_dir: str | None = None) -> DrainResult:
    """Drain ``node`` with ``reason`` unless another party owns its current reason.

    Returns DRAINED, or KEPT with their reason. Raises ``SlurmError`` (scontrol missing, timed
    out, refused).
    """
    from slurmkit.slurm.commands import run

    current = show_node(node, timeout, slurm_conf, bin_dir)
    if not may_take_over(current["reason"]):
        return DrainResult(DrainOutcome.KEPT, current["reason"])
    run([_exe("scontrol", bin_dir), "update", f"nodename={node}", "state=drain", f"reason={sanitize(reason)}"],
        timeout=timeout, slurm_conf=slurm_conf)
    return DrainResult(DrainOutcome.DRAINED)


def resume(node: str, timeout: float, slurm_conf: str | None = None,
           bin_dir: str | None = None) -> DrainResult:
    """Resume ``node`` when its current reason is slurmkit's. Returns RESUMED, NOT_DRAINED (not
    draining, or draining with no reason), or KEPT with their reason (anyone else's, Slurm's
    "Prolog error" included). Raises ``SlurmError``."""
    from slurmkit.slurm.commands import run

    current = show_node(node, timeout, slurm_conf, bin_dir)
    if "DRAIN" not in current["state"].upper() or not current["reason"]:
        return DrainResult(DrainOutcome.NOT_DRAINED)
    if not is_ours(current["reason"]):
        return DrainResult(DrainOutcome.KEPT, current["reason"])
    run([_exe("scontrol", bin_dir), "update", f"nodename={node}", "state=resume"], timeout=timeout,
        slurm_conf=slurm_conf)
    return DrainResult(DrainOutcome.RESUMED)
