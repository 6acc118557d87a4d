"""What ``slurmkit status`` adds to a job's state: how often it restarted, which nodes it runs
without, and why it last waited.

Sources: sacct with ``--duplicates`` (one row per run of a requeued job: restarts are its rows
less one; ``Reason``: slurmdbd's last reason the job waited, kept after it started), slurmctld's
``scontrol show job`` (``Restarts``, ``ExcNodeList``) while it knows the job, and the job's rank-log
folder from its record (:mod:`slurmkit.submit.jobrecord`: the ``badnode-<node>-restartN`` files
a launcher wrote before the job requeued itself without that node).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from slurmkit.hostlist import expand_hostlist
from slurmkit.submit import jobrecord


@dataclass(frozen=True)
class History:
    """``restarts``: runs before the current one (int; None when neither Slurm nor sacct says);
    ``excluded``: node names the job may not use (``--exclude`` and nodes slurmkit took away
    after a fault), sorted; ``last_reason``: why the job last waited (``Resources``,
    ``Priority``...; "" when it never waited or Slurm does not say)."""

    restarts: int | None
    excluded: tuple[str, ...]
    last_reason: str


def _scontrol(backend, job_id: str) -> dict[str, str]:
    """``Key=Value`` fields of ``scontrol show job -o JOB`` (first line: an array's first task);
    empty when slurmctld does not know the job."""
    res = backend.run(["scontrol", "show", "job", "-o", job_id], check=False)
    if res.returncode != 0 or not res.stdout.strip():
        return {}
    line = res.stdout.splitlines()[0]
    return dict(m.groups() for m in re.finditer(r"(?:^|\s)(\w+)=(\S*)", line))


def _sacct_runs(backend, job_ids) -> dict[str, list[tuple[str, str]]]:
    """Job id -> ``[(state, reason), ...]``, one per run (``sacct -D -X``: the requeued runs
    first). ``Reason`` is asked for and dropped when this sacct has no such field."""
    argv = ["sacct", "-D", "-X", "-n", "-P", "-j", ",".join(job_ids), "-o", "JobID,State,Reason"]
    res = backend.run(argv, check=False)
    if res.returncode != 0:
        res = backend.run(argv[:-1] + ["JobID,State"], check=False)
    runs: dict[str, list[tuple[str, str]]] = {}
    for line in res.stdout.splitlines():
        parts = line.split("|")
        if len(parts) >= 2 and parts[0]:
            runs.setdefault(parts[0], []).append((parts[1], parts[2] if len(parts) > 2 else ""))
    return runs


def _badnodes(backend, job_id: str) -> set[str]:
    """Nodes the job's launchers found bad (``badnode-<node>-restartN`` in the rank-log folder
    its record names; only for jobs submitted from this machine)."""
    if getattr(backend, "remote", None) is not None:
        return set()
    rec = jobrecord.read(job_id, backend)
    if rec is None or not rec.log_dir:
        return set()
    try:
        names = os.listdir(rec.log_dir)
    except OSError:
        return set()
    return {m.group(1) for n in names if (m := re.fullmatch(r"badnode-(.+)-restart\d+", n))}


def histories(backend, job_ids) -> dict[str, History]:
    """:class:`History` of each job id (``123`` or ``123_4``; an array's id sums its tasks'
    restarts): one sacct call, one ``scontrol show job`` per job."""
    ids = [str(j) for j in job_ids]
    runs = _sacct_runs(backend, ids) if ids else {}
    out = {}
    for j in ids:
        mine = runs.get(j) or []
        tasks = [r for k, r in runs.items() if k.startswith(j + "_")] if "_" not in j else []
        ctl = _scontrol(backend, j)
        restarts: int | None = None
        if mine:
            restarts = len(mine) - 1
        elif tasks:
            restarts = sum(len(t) - 1 for t in tasks)
        if ctl.get("Restarts", "").isdigit() and not tasks:
            restarts = max(restarts or 0, int(ctl["Restarts"]))
        excluded = _badnodes(backend, j)
        if ctl.get("ExcNodeList") not in (None, "", "(null)"):
            excluded |= set(expand_hostlist(ctl["ExcNodeList"]))
        reasons = [r for _, r in (mine or [x for t in tasks for x in t]) if r and r != "None"]
        out[j] = History(restarts, tuple(sorted(excluded)), reasons[-1] if reasons else "")
    return out
