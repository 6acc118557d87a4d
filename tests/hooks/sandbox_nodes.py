"""Helpers of the hook tests that run in the real Slurm sandbox: wait for a condition, read a
node as ``scontrol show node -o`` prints it."""

from __future__ import annotations

import time

from slurmkit.hooks import drain
from slurmkit.slurm.commands import run


def wait_for(what: str, predicate, timeout: float):
    """Poll ``predicate()`` every 0.5 s until it returns something true (returned), or raise
    AssertionError naming ``what`` after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = predicate()
        if got:
            return got
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def show_node(conf, name: str) -> dict:
    """Node ``name`` of the cluster of slurm.conf ``conf`` (:func:`drain.parse_show_node`)."""
    return drain.parse_show_node(run(["scontrol", "show", "node", "-o", name], slurm_conf=str(conf), timeout=30).stdout)
