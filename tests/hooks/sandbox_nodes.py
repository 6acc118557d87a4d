"""Helpers of the hook tests that run in the real Slurm sandbox: read a node as
``scontrol show node -o`` prints it (waiting: :func:`slurmkit.waiting.wait_until`), read a job,
submit one, install / uninstall the hooks with the CLI an admin runs, read ``scontrol show
config``, reconfigure and wait for every slurmd, restart one node's slurmd (what a gres.conf
change needs)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from slurmkit.hooks import drain
from slurmkit.sandbox.cluster import pid_alive
from slurmkit.slurm.commands import run
from slurmkit.waiting import wait_until


def show_node(conf, name: str) -> dict:
    """Node ``name`` of the cluster of slurm.conf ``conf`` (:func:`drain.parse_show_node`)."""
    return drain.parse_show_node(run(["scontrol", "show", "node", "-o", name], slurm_conf=str(conf), timeout=30).stdout)


def job(conf, job_id) -> dict:
    """``scontrol show job -o`` of ``job_id``: {field: value}."""
    out = run(["scontrol", "show", "job", "-o", str(job_id)], slurm_conf=str(conf), timeout=30).stdout
    return dict(tok.split("=", 1) for tok in out.split() if "=" in tok)


def sbatch(conf, *args) -> str:
    """Submit a batch job (output to /dev/null); its job id."""
    return run(["sbatch", "--parsable", "-o", "/dev/null", *args], slurm_conf=str(conf), timeout=30).stdout.strip()


def show_config(conf) -> dict:
    """``scontrol show config`` of the running slurmctld: {key: value as printed}."""
    out = run(["scontrol", "show", "config"], slurm_conf=str(conf), timeout=30).stdout
    return {m.group(1): m.group(2).strip() for m in re.finditer(r"^(\w+)\s+= (.*)$", out, re.M)}


def hooks_cli(conf, *args) -> subprocess.CompletedProcess:
    """``slurmkit hooks <args> --slurm-conf conf`` as an admin runs it (this interpreter)."""
    return subprocess.run([sys.executable, "-m", "slurmkit", "hooks", *args, "--slurm-conf", str(conf)],
                          capture_output=True, text=True, timeout=120)


def drop_new_backups(conf, before: set) -> None:
    """Remove the ``<slurm.conf>.slurmkit-<time>`` backups install made since ``before`` (the
    names :func:`backups` gave then): a test leaves the shared sandbox's etc as it found it."""
    for p in backups(conf) - before:
        (Path(conf).parent / p).unlink()


def backups(conf) -> set:
    """Names of install's backups of slurm.conf ``conf``."""
    return {p.name for p in Path(conf).parent.glob(Path(conf).name + ".slurmkit-*")}


def install_args(work: Path, snaps: dict, *extra) -> list[str]:
    """``hooks install`` options that keep the hooks' files under ``work`` and replay ``snaps``
    ({node: snapshot path})."""
    return ["install", "--state-dir", str(work / "state"), "--spool-dir", str(work / "spool"),
            "--textfile-dir", str(work / "textfile"), *[f"--snapshot={n}={p}" for n, p in snaps.items()], *extra]


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


def restart(sandbox, daemon: str) -> None:
    """Stop one sandbox daemon (``slurmctld`` or ``slurmd-<node>``: SIGTERM, which it handles) and
    let ``sandbox.up`` start it again with the configuration files as they are now: what
    ``scontrol reconfigure`` does not take (a gres.conf change; on 22.05 a PrologSlurmctld added
    to slurm.conf, shown by ``scontrol show config`` but not run until slurmctld restarts)."""
    pid = {d["name"]: d["pid"] for d in sandbox.daemons()}[daemon]
    os.kill(pid, signal.SIGTERM)
    wait_until(lambda: not pid_alive(pid), 30, what=f"{daemon} stopped")
    sandbox.up(warmup=False)
    if daemon.startswith("slurmd-"):
        node, conf = daemon[len("slurmd-"):], sandbox.slurm_conf
        wait_until(lambda: not show_node(conf, node)["state"].endswith("*")
                   and "NOT_RESPONDING" not in show_node(conf, node)["state"], 60, what=f"{daemon} registered")


def restart_slurmd(sandbox, node: str) -> None:
    """:func:`restart` of ``node``'s slurmd."""
    restart(sandbox, f"slurmd-{node}")
