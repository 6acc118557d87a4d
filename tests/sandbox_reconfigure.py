"""``scontrol reconfigure`` on the sandbox, and the wait for every slurmd to read slurm.conf
again: the one helper the sandbox tests (hooks, submit) reconfigure with."""

from __future__ import annotations

from pathlib import Path

from slurmkit.slurm.commands import run
from slurmkit.waiting import wait_until


# a line slurmd logs each time it reads slurm.conf (at start and at each reconfigure: the
# sandbox sets no CpuFreqDef), so the count of these lines tells that a read happened
_READ_CONF_LINE = "CPU frequency setting not configured for this node"


def _conf_reads(sandbox) -> dict[str, int]:
    """{running slurmd daemon name: the :data:`_READ_CONF_LINE` lines in its log}."""
    logs = Path(sandbox.dir) / "var" / "log"
    out = {}
    for d in sandbox.daemons():
        if d["name"].startswith("slurmd-") and d["alive"]:
            try:
                out[d["name"]] = (logs / f"{d['name']}.log").read_text(errors="replace").count(_READ_CONF_LINE)
            except FileNotFoundError:
                out[d["name"]] = 0
    return out


def reconfigure(sandbox, timeout_s: float = 30.0) -> None:
    """``scontrol reconfigure``, then wait until every running slurmd has read slurm.conf again
    (its log gains :data:`_READ_CONF_LINE`): slurmctld sends the slurmds their reconfigure
    after scontrol returns, so a job started at once could still meet a node's old Prolog or
    Epilog (a CI run once did). Raises :class:`~slurmkit.waiting.WaitTimeout` naming the
    slurmds that did not."""
    before = _conf_reads(sandbox)
    run(["scontrol", "reconfigure"], slurm_conf=str(sandbox.slurm_conf), timeout=30)

    def behind():
        now = _conf_reads(sandbox)
        return sorted(n for n, c in before.items() if n in now and now[n] <= c)

    wait_until(lambda: not behind(), timeout_s, 0.2, "every slurmd to read slurm.conf again",
               lambda: f"not yet: {', '.join(behind())}")
