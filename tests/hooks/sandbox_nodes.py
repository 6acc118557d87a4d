"""Helpers of the hook tests that run in the real Slurm sandbox: read a node as
``scontrol show node -o`` prints it (waiting: :func:`slurmkit.waiting.wait_until`)."""

from __future__ import annotations

from slurmkit.hooks import drain
from slurmkit.slurm.commands import run


def show_node(conf, name: str) -> dict:
    """Node ``name`` of the cluster of slurm.conf ``conf`` (:func:`drain.parse_show_node`)."""
    return drain.parse_show_node(run(["scontrol", "show", "node", "-o", name], slurm_conf=str(conf), timeout=30).stdout)
