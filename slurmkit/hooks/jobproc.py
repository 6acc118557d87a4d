"""Which Slurm job a process on a GPU belongs to, and whether the epilog may kill it.

The epilog kills a leftover process on the job's GPUs only when it is positively the job's own:

- its job, from ``/proc/<pid>/cgroup`` (Slurm's cgroup plugins put every task under
  ``.../job_<id>/...``), else from ``SLURM_JOB_ID`` in ``/proc/<pid>/environ`` (set by
  slurmstepd for every task, inherited by what it starts), equals the ending job's id;
- its owner (``/proc/<pid>`` uid) is the job's user (``SLURM_JOB_UID``) and not root or a system
  account (uid below ``UID_MIN``, 1000 unless ``/etc/login.defs`` says otherwise): a job run as
  root never has its processes killed, nor does nvidia-persistenced, DCGM or a display server.

A process of another running job (the same user's second job sharing the GPU through
``gres/shard`` or MPS) is left alone, and a process whose job cannot be told (no Slurm cgroup, no
readable environment) is logged, not killed. :func:`verdict` is pure; :func:`job_of`,
:func:`owner_of` and :func:`uid_min` read ``/proc`` and ``/etc/login.defs``.
"""

from __future__ import annotations

import os
import re

from slurmkit.records import record

_JOB_CGROUP = re.compile(r"/job_(\d+)(?:/|$)")
DEFAULT_UID_MIN = 1000


def job_of(pid: int, proc: str = "/proc") -> str | None:
    """The Slurm job id of process ``pid`` (cgroup ``job_<id>``, else ``SLURM_JOB_ID`` in its
    environment), or None when it cannot be told (no such process, no Slurm cgroup, environment
    unreadable)."""
    try:
        with open(f"{proc}/{int(pid)}/cgroup") as fh:
            for line in fh:
                m = _JOB_CGROUP.search(line.rstrip("\n").split(":", 2)[-1])
                if m:
                    return m.group(1)
    except OSError:
        pass
    try:
        with open(f"{proc}/{int(pid)}/environ", "rb") as fh:
            for item in fh.read().split(b"\0"):
                if item.startswith(b"SLURM_JOB_ID="):
                    return item[len(b"SLURM_JOB_ID="):].decode(errors="replace") or None  # an id that is not UTF-8 matches no job; never raise in a hook
    except OSError:
        pass
    return None


def owner_of(pid: int, proc: str = "/proc") -> int | None:
    """The uid owning process ``pid`` (``stat /proc/<pid>``), None when it is gone."""
    try:
        return os.stat(f"{proc}/{int(pid)}").st_uid
    except (OSError, ValueError):
        return None


def uid_min(login_defs: str = "/etc/login.defs") -> int:
    """``UID_MIN`` of ``login_defs`` (the first uid of a person's account), else 1000."""
    try:
        with open(login_defs) as fh:
            for line in fh:
                parts = line.split()
                if len(parts) >= 2 and parts[0] == "UID_MIN" and parts[1].isdigit():
                    return int(parts[1])
    except OSError:
        pass
    return DEFAULT_UID_MIN


@record(frozen=True)
class Verdict:
    """``kill`` (bool) and ``why`` (the words the epilog logs)."""

    kill: bool
    why: str


def verdict(pid: int, owner: int | None, proc_job: str | None, job_id: str | None, job_uid: int | None,
            min_uid: int = DEFAULT_UID_MIN) -> Verdict:
    """May the epilog of ``job_id`` (run by ``job_uid``) kill ``pid`` (owned by ``owner``, of
    job ``proc_job``)? Only when it is the job's own process and a person's (see the module)."""
    if owner is None:
        return Verdict(False, f"pid {pid} is gone")
    if owner == 0 or owner < min_uid:
        return Verdict(False, f"pid {pid} belongs to {'root' if owner == 0 else f'system uid {owner}'}: never killed")
    if job_uid is None or owner != job_uid:
        return Verdict(False, f"pid {pid}: owner {owner} is not the job's user {job_uid}")
    if proc_job is None:
        return Verdict(False, f"pid {pid} of uid {owner}: its job is unknown (no Slurm cgroup or environment): "
                              f"logged, not killed")
    if proc_job != str(job_id):
        return Verdict(False, f"pid {pid} belongs to job {proc_job}, not {job_id}: left alone")
    return Verdict(True, f"pid {pid} of job {job_id} (uid {owner}) left on the GPU")
