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

from sandbox_reconfigure import reconfigure  # noqa: F401  (the hooks' tests import it from here)

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
