"""What the hooks remember between runs on one node, under ``<state_dir>/<node>/``.

- ``health.json``: a :class:`NodeHealth`, ``{"drained_reason": str | null`` (the reason
  slurmkit drained the node with, null when it has not), ``"clean_runs": int`` (health checks in
  a row without a fail since), ``"own_errors": {hook: int}`` (runs that hit slurmkit's own
  trouble: the textfile counter), ``"drained_boot_id"``, ``"xid_holds"`` (the GPUs whose
  hardware XIDs keep the node drained)}``; written and read by the hooks (:mod:`slurmkit.hooks.flows`,
  :mod:`slurmkit.hooks.main`);
- ``job-<id>.json``: a :class:`JobStart`, the prolog's energy readings for a job (``{"start_s":
  epoch s, "state_source": str, "gpus": [{index, nvml_index, minor, uuid, pci_bus_id,
  start_energy_mj, acct_seen}], "user": SLURM_JOB_USER, "end_by_s": SLURM_JOB_END_TIME,
  "policy": the clock policy the job runs under, :class:`slurmkit.hooks.clock_policy.JobPolicy`
  JSON, "kmsg_seq": int | null, "boot_id": str | null}``),
  written by the prolog and removed by the epilog; its presence is what
  ``slurmkit_gpu_job_info`` lists. A record whose epilog never ran (node crash, epilog killed at
  PrologEpilogTimeout) goes when a new prolog gives its GPUs to another job
  (:func:`drop_jobs_on_gpus`; not on GPUs shared by design) or when the health check finds it
  past its job's end (:func:`drop_stale_jobs`);
- ``kmsg-<hook>.cursor``: the kernel-log position the XID reader keeps, one per hook (and
  ``kmsg-epilog-<id>.cursor`` while a job's epilog reads from its prolog's position);
- ``gpu-resets.json``: the GPU resets recorded this boot (:mod:`slurmkit.hooks.gpureset`);
- ``port-counters.json``: error counters (InfiniBand ports) the next run compares with, written by
  :func:`slurmkit.health.baseline.swap`.

Files are replaced atomically; the directory is created 0700.

One thing is published to the job's user, outside that directory: ``<jobs_dir>/<node>/job-<id>.json``
(:func:`publish_job`; ``jobs_dir``: the hooks config's, by default ``jobs`` beside the state directory), the job's kernel-log window only (its GPUs' identities, start, end,
``kmsg_seq``, ``boot_id``: no energy, no other job's processes, no clock policy), for the batch
shell's Xid query (:mod:`slurmkit.hooks.jobxids`), which runs as the job's user. ``jobs_dir`` and
``jobs_dir/<node>`` are root's, mode 0711 (enterable, not listable, not writable); the file is
``root:<job's gid>`` mode 0640 (SLURM_JOB_GID; without it ``<job's uid>`` mode 0400). It goes
with the prolog record (epilog, or a ghost record dropped).
"""

from __future__ import annotations

import json
import os
import time

from slurmkit.atomicfile import atomic_write, atomic_write_with
from slurmkit.records import GpuIdentity, field, record


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _int(v, default=None):
    return int(v) if _num(v) else default


class _Record:
    """Equality and repr of the records below from their ``to_json()`` (what their file
    holds), so they are made with ``record(eq=False, repr=False)``."""

    __hash__ = None

    def __eq__(self, other):
        return type(other) is type(self) and other.to_json() == self.to_json()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.to_json()!r})"


@record(eq=False, repr=False)
class NodeHealth(_Record):
    """``health.json``: ``drained_reason`` (the reason slurmkit drained the node with; None
    when it has not), ``clean_runs`` (health checks in a row without a fail since that drain),
    ``own_errors`` (hook name -> runs that hit slurmkit's own trouble, a Prometheus counter),
    ``own_error_at`` (hook name -> Unix time of the last such run: the alert fires on a recent
    one, so a count that reappears after a gap in the data does not fire again),
    ``drained_boot_id`` (the kernel's boot id, ``/proc/sys/kernel/random/boot_id``, when slurmkit
    drained: a hardware-XID drain lasts until it changes), ``xid_holds`` (the GPUs whose hardware
    XIDs keep the node drained until a reboot or their reset: :mod:`slurmkit.hooks.xidhold`)."""

    drained_reason: str | None = None
    clean_runs: int = 0
    own_errors: dict[str, int] = field(default_factory=dict)
    drained_boot_id: str | None = None
    xid_holds: dict[str, dict] = field(default_factory=dict)
    own_error_at: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"drained_reason": self.drained_reason, "clean_runs": self.clean_runs,
                "own_errors": dict(self.own_errors), "own_error_at": dict(self.own_error_at),
                "drained_boot_id": self.drained_boot_id,
                "xid_holds": {k: dict(v) for k, v in self.xid_holds.items()}}

    @classmethod
    def from_json(cls, d) -> "NodeHealth":
        """Tolerant: a missing or mistyped key reads as its default (a file from an older
        version, or edited by hand, never stops a hook)."""
        if not isinstance(d, dict):
            return cls()
        reason = d.get("drained_reason")
        errs = d.get("own_errors")
        at = d.get("own_error_at")
        boot = d.get("drained_boot_id")
        holds = d.get("xid_holds")
        holds = {str(k): {"since_s": float(v["since_s"]) if _num(v.get("since_s")) else 0.0,
                          "since_seq": _int(v.get("since_seq")), "reason": str(v.get("reason") or "")}
                 for k, v in holds.items() if isinstance(v, dict)} if isinstance(holds, dict) else {}
        return cls(drained_reason=str(reason) if reason else None, clean_runs=_int(d.get("clean_runs"), 0),
                   own_errors={str(k): _int(v, 0) for k, v in errs.items()} if isinstance(errs, dict) else {},
                   own_error_at={str(k): float(v) for k, v in at.items() if _num(v)} if isinstance(at, dict) else {},
                   drained_boot_id=str(boot) if isinstance(boot, str) and boot else None, xid_holds=holds)


@record(eq=False, repr=False)
class JobGpuStart(_Record, GpuIdentity):
    """One of the job's GPUs as the prolog saw it: its :class:`~slurmkit.records.GpuIdentity`
    (``index``, ``nvml_index``, ``minor``, ``uuid``, ``pci_bus_id``), then
    ``start_energy_mj`` (``nvmlDeviceGetTotalEnergyConsumption``, mJ; None when not read),
    ``acct_seen``: ``[(pid, start_time_us)]`` of the ``nvmlDeviceGetAccountingStats`` records
    already on the GPU (earlier jobs' processes, which the epilog leaves out)."""

    start_energy_mj: int | None = None
    acct_seen: list[tuple] = field(default_factory=list)

    def to_json(self) -> dict:
        return {**self.identity_json(), "start_energy_mj": self.start_energy_mj,
                "acct_seen": [list(k) for k in self.acct_seen]}

    @classmethod
    def from_json(cls, d: dict) -> "JobGpuStart":
        """Raises ValueError when ``d`` has no integer ``index``."""
        ident = GpuIdentity.identity_fields(d)
        seen = d.get("acct_seen") if isinstance(d.get("acct_seen"), list) else []
        return cls(**ident, start_energy_mj=_int(d.get("start_energy_mj")),
                   acct_seen=[tuple(k) for k in seen if isinstance(k, list) and len(k) == 2])


@record(eq=False, repr=False)
class JobStart(_Record):
    """``job-<id>.json``: what the prolog leaves for the epilog. ``start_s``: epoch seconds of
    the prolog's energy read; ``state_source``: where the GPU state came from (``live``,
    ``snapshot:PATH``...); ``gpus``: the job's GPUs on this node; ``user``: SLURM_JOB_USER
    (the ``user`` label of ``slurmkit_gpu_job_info``; None when Slurm gave none); ``end_by_s``:
    the job's projected end (SLURM_JOB_END_TIME, epoch s; None when Slurm gave none or the job
    has no time limit): past it and :data:`STALE_GRACE_S` the record is a ghost; ``policy``: the
    clock policy the prolog recorded for the job (:meth:`slurmkit.hooks.clock_policy.JobPolicy.to_json`;
    None in a record of an older version), for the epilog's spool line; ``kmsg_seq``: the
    last ``/dev/kmsg`` sequence number the prolog read (None: not read live), and ``boot_id`` the
    boot it belongs to: the job's kernel-log window starts there (its epilog reads the Xids
    since, :mod:`slurmkit.hooks.attribution` places them in the job)."""

    start_s: float | None = None
    state_source: str = ""
    gpus: list[JobGpuStart] = field(default_factory=list)
    user: str | None = None
    end_by_s: float | None = None
    policy: dict | None = None
    kmsg_seq: int | None = None
    boot_id: str | None = None

    def to_json(self) -> dict:
        return {"start_s": self.start_s, "state_source": self.state_source,
                "gpus": [g.to_json() for g in self.gpus], "user": self.user, "end_by_s": self.end_by_s,
                "policy": self.policy, "kmsg_seq": self.kmsg_seq, "boot_id": self.boot_id}

    @classmethod
    def from_json(cls, d) -> "JobStart":
        """Raises ValueError for something that is not a prolog record."""
        if not isinstance(d, dict) or not isinstance(d.get("gpus", []), list):
            raise ValueError("not a prolog job record")
        t = d.get("start_s")
        return cls(start_s=float(t) if _num(t) else None, state_source=str(d.get("state_source") or ""),
                   gpus=[JobGpuStart.from_json(g) for g in d.get("gpus", [])],
                   user=d["user"] if isinstance(d.get("user"), str) else None,
                   end_by_s=float(d["end_by_s"]) if _num(d.get("end_by_s")) else None,
                   policy=d["policy"] if isinstance(d.get("policy"), dict) else None,
                   kmsg_seq=_int(d.get("kmsg_seq")),
                   boot_id=d["boot_id"] if isinstance(d.get("boot_id"), str) else None)


def node_dir(state_dir, node: str) -> str:
    """``<state_dir>/<node>``, made when missing (best effort: a read-only or full state
    directory is not an error here; the write that needs it raises, and its caller says so)."""
    d = os.path.join(os.fspath(state_dir), node)
    try:
        os.makedirs(d, mode=0o700, exist_ok=True)
    except OSError:
        pass
    return d


def _write(path: str, data: dict) -> None:
    atomic_write(path, json.dumps(data))


def _read(path: str, default: dict) -> dict:
    try:
        with open(path) as fh:
            data = json.load(fh)
        return data if isinstance(data, dict) else dict(default)
    except (OSError, ValueError):
        return dict(default)


def load_health(state_dir, node: str) -> NodeHealth:
    """``health.json`` (defaults when absent or unreadable). Raises OSError only when the state
    directory cannot be made."""
    return NodeHealth.from_json(_read(os.path.join(node_dir(state_dir, node), "health.json"), {}))


def save_health(state_dir, node: str, health: NodeHealth) -> None:
    """Replace ``health.json``; raises OSError."""
    _write(os.path.join(node_dir(state_dir, node), "health.json"), health.to_json())


def count_own_error(state_dir, node: str, hook: str) -> int:
    """Add one to the own-trouble counter of ``hook`` and set its ``own_error_at`` to now (Unix
    time, s); returns the new total. When the state directory cannot be written (read-only,
    full) the total is the recorded one plus this run's, not kept for the next run: the metric
    still says this run had trouble."""
    try:
        h = load_health(state_dir, node)
    except OSError:
        return 1
    h.own_errors[hook] = h.own_errors.get(hook, 0) + 1
    h.own_error_at[hook] = round(time.time(), 3)
    try:
        save_health(state_dir, node, h)
    except OSError:
        pass
    return h.own_errors[hook]


def save_job(state_dir, node: str, job_id: str, job: JobStart) -> None:
    """Write ``job-<id>.json`` (the prolog); raises OSError."""
    _write(os.path.join(node_dir(state_dir, node), f"job-{job_id}.json"), job.to_json())


def published_path(jobs_dir, node: str, job_id: str) -> str:
    """``<jobs_dir>/<node>/job-<id>.json``: the job's window as published to its user
    (:func:`publish_job`; ``jobs_dir``: the hooks config's)."""
    return os.path.join(os.fspath(jobs_dir), node, f"job-{job_id}.json")


#: Mode of ``<jobs_dir>`` and ``<jobs_dir>/<node>``: root's, enterable by anyone
#: who knows a file's name, not listable, not writable.
PUBLISHED_DIR_MODE = 0o711


def publish_job(jobs_dir, node: str, job_id: str, job: JobStart, uid: int | None, gid: int | None) -> str:
    """Write the job's kernel-log window (of the prolog's record ``job``: its GPUs' identities,
    ``start_s``, ``end_by_s``, ``kmsg_seq``, ``boot_id``; nothing else) where the job's user can
    read it and nobody else but root and the job's group can: :func:`published_path`, owned
    ``root:gid`` mode 0640 (``gid``: SLURM_JOB_GID), else ``uid`` mode 0400 (SLURM_JOB_UID), else
    root's 0600. Run as root by the prolog; its directories are made (and kept) mode
    :data:`PUBLISHED_DIR_MODE`. Returns the path; raises OSError (chown: not root)."""
    path = published_path(jobs_dir, node, job_id)
    d = os.path.dirname(path)
    os.makedirs(os.path.dirname(os.fspath(jobs_dir)) or ".", exist_ok=True)
    for sub in (os.fspath(jobs_dir), d):
        try:
            os.mkdir(sub, PUBLISHED_DIR_MODE)
        except FileExistsError:
            pass
        if os.stat(sub).st_mode & 0o7777 != PUBLISHED_DIR_MODE:
            os.chmod(sub, PUBLISHED_DIR_MODE)  # whatever the umask made of it
    window = JobStart(start_s=job.start_s, state_source=job.state_source, end_by_s=job.end_by_s,
                      kmsg_seq=job.kmsg_seq, boot_id=job.boot_id,
                      gpus=[JobGpuStart(g.index, g.nvml_index, g.minor, g.uuid, g.pci_bus_id) for g in job.gpus])
    owner, mode = ((-1, gid), 0o640) if gid is not None else (((uid, -1), 0o400) if uid is not None else (None, 0o600))

    def write(tmp: str) -> None:
        with open(tmp, "w") as fh:
            json.dump(window.to_json(), fh)
        if owner is not None:
            os.chown(tmp, *owner)

    atomic_write_with(path, write, mode=mode)
    return path


def read_job(state_dir, jobs_dir, node: str, job_id: str) -> JobStart:
    """The job's window for ``job_id`` on ``node`` as the job's user can
    read it (a running job's: the batch shell's Xid query, :mod:`slurmkit.hooks.jobxids`): the
    published one (:func:`publish_job`), else (a prolog that published nothing: root reading)
    the prolog's own record; both left in place. Raises OSError when neither can be read
    (FileNotFoundError: no prolog record; PermissionError: not the job's user, or a state
    directory others cannot enter) and ValueError (naming the file) when it is not a prolog
    record."""
    path = published_path(jobs_dir, node, job_id)
    try:
        fh = open(path)
    except FileNotFoundError:
        path = os.path.join(os.fspath(state_dir), node, f"job-{job_id}.json")
        try:
            fh = open(path)
        except FileNotFoundError:
            raise FileNotFoundError(2, "No such file or directory", published_path(jobs_dir, node, job_id)) from None
    with fh:
        try:
            return JobStart.from_json(json.load(fh))
        except ValueError as exc:  # json's errors are ValueErrors too
            raise ValueError(f"{path}: not a prolog record ({exc})") from None


def _unpublish(jobs_dir, node: str, job_id: str) -> None:
    try:
        os.unlink(published_path(jobs_dir, node, job_id))
    except OSError:
        pass


def pop_job(state_dir, node: str, job_id: str, jobs_dir=None) -> JobStart | None:
    """The prolog's record for ``job_id`` (removed), or None when there is none or it does not
    parse."""
    path = os.path.join(node_dir(state_dir, node), f"job-{job_id}.json")
    data = _read(path, {})
    try:
        os.unlink(path)
    except OSError:
        pass
    if jobs_dir is not None:  # and what was published of it
        _unpublish(jobs_dir, node, job_id)
    if not data:
        return None
    try:
        return JobStart.from_json(data)
    except ValueError:
        return None


def boot_id(path: str = "/proc/sys/kernel/random/boot_id") -> str | None:
    """This boot's id (a new one after every reboot), None when unreadable."""
    try:
        with open(path) as fh:
            return fh.read().strip() or None
    except OSError:
        return None


def kmsg_cursor(state_dir, node: str, hook: str) -> str:
    """``<state_dir>/<node>/kmsg-<hook>.cursor``: each consumer (prolog, epilog, healthcheck)
    keeps its own kernel-log position, so a health check during a job does not hide the job's
    XIDs from its epilog."""
    return os.path.join(node_dir(state_dir, node), f"kmsg-{hook}.cursor")


def job_kmsg_cursor(state_dir, node: str, job_id: str) -> str:
    """``<state_dir>/<node>/kmsg-epilog-<job>.cursor``: a job's epilog reads the kernel log from
    where its prolog stopped (``JobStart.kmsg_seq``), so on a shared node another job's epilog
    (which moves ``kmsg-epilog.cursor``) does not hide this job's XIDs; removed after the read."""
    return os.path.join(node_dir(state_dir, node), f"kmsg-epilog-{job_id}.cursor")


def counters_path(state_dir, node: str) -> str:
    """``port-counters.json``: error counters kept between runs (:mod:`slurmkit.health.baseline`)."""
    return os.path.join(node_dir(state_dir, node), "port-counters.json")


#: Seconds past a job's projected end (SLURM_JOB_END_TIME) after which its prolog record is
#: taken for a ghost (the node crashed, or the epilog was killed at PrologEpilogTimeout): the
#: time limit plus Slurm's OverTimeLimit and a slow epilog fit in it.
STALE_GRACE_S = 3600.0
#: The bound for a record without ``end_by_s`` (a job without a time limit, an older prolog).
MAX_RECORD_AGE_S = 30 * 86400.0


def slurm_end_time(env) -> float | None:
    """``SLURM_JOB_END_TIME`` (epoch s, the job's start plus its time limit, in the prolog's
    environment) or None when absent, not a number or 0 (no limit)."""
    try:
        v = float(env.get("SLURM_JOB_END_TIME") or 0)
    except ValueError:
        return None
    return v if v > 0 else None


def _job_records(state_dir, node: str):
    d = node_dir(state_dir, node)
    for name in sorted(os.listdir(d)):
        if name.startswith("job-") and name.endswith(".json"):
            path = os.path.join(d, name)
            try:
                rec = JobStart.from_json(_read(path, {"gpus": None}))
            except ValueError:
                rec = None
            yield name[len("job-"):-len(".json")], path, rec


def job_records(state_dir, node: str) -> list[tuple[str, JobStart]]:
    """``[(job id, JobStart)]`` of the prolog records on the node (jobs running, or whose
    epilog has not run yet), readable ones only; [] when the state directory cannot be read."""
    try:
        return [(j, rec) for j, _, rec in _job_records(state_dir, node) if rec is not None]
    except OSError:
        return []


def _unlink(path: str, jobs_dir=None) -> bool:
    """Remove a prolog record ``<state_dir>/<node>/job-<id>.json`` and what was published of it
    in ``jobs_dir`` (None: nothing was)."""
    try:
        os.unlink(path)
    except OSError:
        return False
    if jobs_dir is not None:
        d, name = os.path.split(path)
        _unpublish(jobs_dir, os.path.basename(d), name[len("job-"):-len(".json")])
    return True


def drop_jobs_on_gpus(state_dir, node: str, job_id: str, indexes: list[int], jobs_dir=None) -> list[str]:
    """Remove the prolog records of other jobs that hold any of the Slurm GPU ``indexes`` (a job
    that still seems to hold a GPU Slurm gives to a new job is gone: its epilog never ran).
    Returns their job ids. Only for GPUs that are not shared by design (gres/shard, MPS)."""
    want = set(indexes)
    if not want:
        return []
    return [j for j, path, rec in _job_records(state_dir, node)
            if j != str(job_id) and rec is not None and want & {g.index for g in rec.gpus} and _unlink(path, jobs_dir)]


def drop_stale_jobs(state_dir, node: str, now: float, grace_s: float = STALE_GRACE_S,
                    max_age_s: float = MAX_RECORD_AGE_S, jobs_dir=None) -> list[str]:
    """Remove the prolog records past their job's projected end by more than ``grace_s``
    (without one: older than ``max_age_s``), and unreadable ones older than that. Returns their
    job ids; never raises (a state directory that cannot be read drops nothing)."""
    try:
        out = []
        for j, path, rec in _job_records(state_dir, node):
            if rec is not None and rec.end_by_s is not None:
                stale = now > rec.end_by_s + grace_s
            else:
                started = rec.start_s if rec is not None and rec.start_s is not None else os.stat(path).st_mtime
                stale = now > started + max_age_s
            if stale and _unlink(path, jobs_dir):
                out.append(j)
        return out
    except OSError:
        return []
