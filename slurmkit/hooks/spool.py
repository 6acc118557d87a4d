"""Per-job GPU energy spool: one JSON line per job and node, appended by the epilog.

Path: ``<spool_dir>/<node>.jsonl`` (``spool_dir`` from the hooks config, default
``/var/spool/slurmkit``; the directory is created mode 0700 and the file 0600: root only). Each
node appends only to its own file, so a spool folder on a shared filesystem (NFS, Lustre, where
``O_APPEND`` and ``flock`` across clients are not to be relied on) never sees two nodes append
to one file; the report reads the folder's ``*.jsonl``. Each
line is written with one ``write(2)`` on an ``O_APPEND`` descriptor under ``flock``; when the
write fails part way (disk full) the file is truncated back to its previous length, so readers
only ever see whole lines. A line is a :class:`SpoolRecord` (``to_json`` / ``from_json``);
:func:`read` is the one reader (``slurmkit report`` reads through it): it skips a line that does
not parse and says so.

Line format (JSON object, keys always present)::

    {"v": 1,                      # format version
     "job_id": "123",             # SLURM_JOB_ID (array jobs: the raw job id Slurm gives the hook)
     "node": "n3",                # SLURMD_NODENAME
     "user": "alice", "uid": 1000,# SLURM_JOB_USER / SLURM_JOB_UID (null when unset)
     "start_s": 1767000000.0,     # epoch seconds: prolog's energy read (null when none recorded)
     "end_s": 1767000360.5,       # epoch seconds: epilog's energy read
     "source": "measured",        # measured | unavailable
     "reason": null,              # why "unavailable" (or a note such as a counter reset)
     "state_source": "live",      # where GPU state came from: live | snapshot:PATH | ...
     "energy_mj_total": 123456,   # sum over the GPUs (mJ), null when unavailable
     "gpus": [{"index": 0,        # Slurm GPU index (SLURM_JOB_GPUS position in gres.conf)
               "nvml_index": 2, "minor": 2, "uuid": "GPU-...", "pci_bus_id": "0000:9b:00.0",
               "energy_mj": 61728,          # nvmlDeviceGetTotalEnergyConsumption delta (mJ)
               "start_energy_mj": 100, "end_energy_mj": 61828,
               "counter_reset": false}],    # end < start: the counter restarted (driver reload);
                                            # energy_mj is then the end reading (a lower bound)
     "accounting": {"0": {"gpu_util_pct": 87.5, "max_memory_mib": 30000, "processes": 1}},
                                  # per Slurm GPU index, from nvmlDeviceGetAccountingStats records
                                  # of processes started during the job (time-weighted mean
                                  # utilization %, peak memory MiB); null when unavailable ...
     "accounting_reason": "...",  # ... and why (also set when only some GPUs lack records)
     "events": [{"check": "xid", "status": "fail", "gpu_index": 2, "value": 79, "job_id": "123",
                 "pci_bus_id": "0000:3b:00.0"}],
                                  # XID / ECC / retired-page / row-remap results other than pass
                                  # seen at the epilog on the job's GPUs (or node-wide); an Xid
                                  # only when a line of it is attributed to this job (its GPU and
                                  # run window: slurmkit.hooks.attribution), then "job_id" names
                                  # it (absent: an Xid line naming no GPU, and every other check);
                                  # gpu_index is NVML's, pci_bus_id names the GPU
     "policy": {"name": "steady",           # the clock policy the job ran under
                "origin": "partition steady",  # partition <p> | node type <t> | none
                "status": "applied",        # resting | applied | partly applied | not applied
                "requested": {"locked_clocks_mhz": [1215, 1410]},
                "applied": {"0": {"locked_clocks_mhz": [1215, 1410]}},  # per Slurm GPU index:
                "not_applied": {},          # what NVML accepted / {setting: why} it did not
                "reason": null}}            # why not (fully) applied
                                  # (slurmkit.hooks.clock_policy.JobPolicy); null in lines of
                                  # older versions and when the prolog left no record

``source`` says whether energy figures exist; ``state_source`` whether they were read live or
replayed from a snapshot (a replay's figures describe the snapshot, not this job).
"""

from __future__ import annotations

import json
import os
from enum import StrEnum

from slurmkit.hooks.clock_policy import JobPolicy
from slurmkit.records import GpuIdentity, field, record

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing is not imported when the hooks run
    from typing import Any


def file_name(node: str) -> str:
    """``<node>.jsonl``: the spool file one node appends to (ValueError for a name that is not a
    plain Slurm node name, e.g. with a ``/``)."""
    if not node or "/" in node or node.startswith(".") or "\0" in node:
        raise ValueError(f"node name {node!r} cannot name a spool file")
    return f"{node}.jsonl"
VERSION = 1


class EnergySource(StrEnum):
    """Whether a record has energy figures (``source``): ``measured`` when every GPU of the job
    on the node has a prolog and an epilog reading, else ``unavailable`` (``reason`` says why)."""

    MEASURED = "measured"
    UNAVAILABLE = "unavailable"


def _num(v):
    """``v`` when it is a JSON number (not a bool), else None (a bad value reads as unknown)."""
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _int(v):
    v = _num(v)
    return int(v) if v is not None else None


def _str(v):
    return None if v is None else str(v)


def _list(d: dict, key: str) -> list:
    v = d.get(key)
    if v is None:
        return []
    if not isinstance(v, list):
        raise ValueError(f"{key}: want a list")
    return v


@record
class GpuEnergy(GpuIdentity):
    """One of the job's GPUs in a spool record: its :class:`~slurmkit.records.GpuIdentity`
    (``index``: Slurm GPU index; ``nvml_index`` / ``minor`` / ``uuid`` / ``pci_bus_id``: the NVML
    device it maps to, None when unknown), then ``start_energy_mj`` / ``end_energy_mj``: the
    prolog's / epilog's ``nvmlDeviceGetTotalEnergyConsumption`` readings (mJ since driver
    load); ``energy_mj`` their delta (mJ, :func:`energy_delta`); ``counter_reset``: the counter
    restarted in between."""

    start_energy_mj: int | None = None
    end_energy_mj: int | None = None
    energy_mj: int | None = None
    counter_reset: bool = False

    def to_json(self) -> dict:
        return {**self.identity_json(), "start_energy_mj": self.start_energy_mj, "end_energy_mj": self.end_energy_mj,
                "energy_mj": self.energy_mj, "counter_reset": self.counter_reset}

    @classmethod
    def from_json(cls, d: dict) -> "GpuEnergy":
        """Raises ValueError when ``d`` is not an object with an integer ``index``."""
        return cls(**GpuIdentity.identity_fields(d), start_energy_mj=_int(d.get("start_energy_mj")),
                   end_energy_mj=_int(d.get("end_energy_mj")), energy_mj=_int(d.get("energy_mj")),
                   counter_reset=d.get("counter_reset") is True)


@record
class GpuAccounting:
    """One GPU's figures from ``nvmlDeviceGetAccountingStats`` over the processes the job
    started on it: ``gpu_util_pct`` time-weighted mean utilization (%, weights: each process's
    ``time`` in ms; None when no process ran), ``max_memory_mib`` peak memory (MiB),
    ``processes`` how many accounting records counted."""

    gpu_util_pct: float | None = None
    max_memory_mib: int | None = None
    processes: int = 0

    def to_json(self) -> dict:
        return {"gpu_util_pct": self.gpu_util_pct, "max_memory_mib": self.max_memory_mib,
                "processes": self.processes}

    @classmethod
    def from_json(cls, d: dict) -> "GpuAccounting":
        if not isinstance(d, dict):
            raise ValueError("accounting: want an object per GPU")
        util = _num(d.get("gpu_util_pct"))
        return cls(gpu_util_pct=None if util is None else float(util),
                   max_memory_mib=_int(d.get("max_memory_mib")), processes=_int(d.get("processes")) or 0)


@record
class SpoolEvent:
    """A health-check result other than pass seen at the epilog on the job's GPUs (or
    node-wide): ``check`` id, ``status`` (a :class:`slurmkit.health.result.CheckStatus` value),
    ``gpu_index`` (NVML index, None: node-wide; not the Slurm GPU index of the line's ``gpus``),
    ``value`` what was seen, ``job_id`` the job an Xid is attributed to
    (:mod:`slurmkit.hooks.attribution`; None: not an Xid, or an Xid line naming no GPU),
    ``pci_bus_id`` the GPU's PCI bus id (``nvmlDeviceGetPciInfo``; None: node-wide or not known),
    which names the GPU whatever the numbering."""

    check: str
    status: str
    gpu_index: int | None = None
    value: Any = None
    job_id: str | None = None
    pci_bus_id: str | None = None

    def to_json(self) -> dict:
        out = {"check": self.check, "status": self.status, "gpu_index": self.gpu_index, "value": self.value}
        if self.job_id is not None:  # only on an Xid attributed to the job: older lines read back unchanged
            out["job_id"] = self.job_id
        if self.pci_bus_id is not None:
            out["pci_bus_id"] = self.pci_bus_id
        return out

    @classmethod
    def from_json(cls, d: dict) -> "SpoolEvent":
        if not isinstance(d, dict) or not isinstance(d.get("check"), str):
            raise ValueError("events: want objects with a check")
        return cls(check=d["check"], status=str(d.get("status", "")), gpu_index=_int(d.get("gpu_index")),
                   value=d.get("value"), job_id=_str(d.get("job_id")), pci_bus_id=_str(d.get("pci_bus_id")))


@record
class SpoolRecord:
    """One spool line (see the module docstring for the JSON): the epilog writes it
    (:func:`append`), ``slurmkit report`` reads it (:func:`read`, then
    :func:`slurmkit.report.energy.read_spool`).

    ``start_s`` / ``end_s``: epoch seconds of the prolog's / epilog's energy read;
    ``energy_mj_total``: mJ over the GPUs (None unless ``source`` is measured); ``accounting``:
    per Slurm GPU index (None when unavailable, ``accounting_reason`` says why); ``policy``: the
    clock policy the job ran under (None: not recorded)."""

    job_id: str
    node: str = ""
    user: str | None = None
    uid: int | None = None
    start_s: float | None = None
    end_s: float | None = None
    source: EnergySource = EnergySource.UNAVAILABLE
    reason: str | None = None
    state_source: str = ""
    energy_mj_total: int | None = None
    gpus: list[GpuEnergy] = field(default_factory=list)
    accounting: dict[int, GpuAccounting] | None = None
    accounting_reason: str | None = None
    events: list[SpoolEvent] = field(default_factory=list)
    policy: JobPolicy | None = None

    @property
    def measured(self) -> bool:
        """True when the record carries an energy figure (``source`` measured and a total)."""
        return self.source == EnergySource.MEASURED and self.energy_mj_total is not None

    @property
    def gpu_util_pct(self) -> float | None:
        """Mean of the GPUs' accounting utilization (%) over the GPUs that have one; None when
        none has (no accounting, or no process of the job ran)."""
        vals = [a.gpu_util_pct for a in (self.accounting or {}).values() if a.gpu_util_pct is not None]
        return sum(vals) / len(vals) if vals else None

    def to_json(self) -> dict:
        """The spool line's object (every key present; ``accounting`` keyed by the GPU index as a
        string, as JSON objects are)."""
        return {
            "v": VERSION, "job_id": self.job_id, "node": self.node, "user": self.user, "uid": self.uid,
            "start_s": self.start_s, "end_s": self.end_s, "source": self.source, "reason": self.reason,
            "state_source": self.state_source, "energy_mj_total": self.energy_mj_total,
            "gpus": [g.to_json() for g in self.gpus],
            "accounting": None if self.accounting is None else
            {str(k): a.to_json() for k, a in sorted(self.accounting.items())},
            "accounting_reason": self.accounting_reason,
            "events": [e.to_json() for e in self.events],
            "policy": None if self.policy is None else self.policy.to_json(),
        }

    @classmethod
    def from_json(cls, d) -> "SpoolRecord":
        """Inverse of :meth:`to_json`. Keys left out read as their defaults (lines written by
        hand or by older tools); a value of the wrong type as unknown. Raises ValueError for
        something that is not a version-1 record with a ``job_id``."""
        if not isinstance(d, dict) or "job_id" not in d:
            raise ValueError("not a spool record (no job_id)")
        if d.get("v", VERSION) != VERSION:
            raise ValueError(f"not a version {VERSION} record (v={d.get('v')!r})")
        src = d.get("source")
        acc = d.get("accounting")
        accounting = None
        if isinstance(acc, dict):
            accounting = {}
            for k, a in acc.items():
                try:
                    accounting[int(k)] = GpuAccounting.from_json(a)
                except (TypeError, ValueError):
                    raise ValueError(f"accounting: {k!r} is not a GPU index with an object") from None
        start, end = _num(d.get("start_s")), _num(d.get("end_s"))
        try:
            policy = JobPolicy.from_json(d["policy"]) if d.get("policy") is not None else None
        except ValueError:
            policy = None  # a policy that does not read is unknown; the energy record still counts
        return cls(
            job_id=str(d["job_id"]), node=str(d.get("node") or ""), user=_str(d.get("user")),
            uid=_int(d.get("uid")), start_s=None if start is None else float(start),
            end_s=None if end is None else float(end),
            source=EnergySource(src) if src in EnergySource._value2member_map_ else EnergySource.UNAVAILABLE,
            reason=_str(d.get("reason")), state_source=str(d.get("state_source") or ""),
            energy_mj_total=_int(d.get("energy_mj_total")),
            gpus=[GpuEnergy.from_json(g) for g in _list(d, "gpus")],
            accounting=accounting, accounting_reason=_str(d.get("accounting_reason")),
            events=[SpoolEvent.from_json(e) for e in _list(d, "events")], policy=policy)


def energy_delta(start_mj: int | None, end_mj: int | None) -> tuple[int | None, bool]:
    """``(delta mJ, counter_reset)`` of two ``nvmlDeviceGetTotalEnergyConsumption`` readings
    (mJ since the driver loaded). ``end < start`` means the counter restarted: the delta is then
    ``end`` (energy since the restart, a lower bound). None when either reading is missing."""
    if start_mj is None or end_mj is None:
        return None, False
    if end_mj < start_mj:
        return int(end_mj), True
    return int(end_mj - start_mj), False


#: A job at least this long (s) whose GPU energy counter did not move has no measurement
#: (:func:`record`).
FROZEN_COUNTER_S = 5.0


def record(job_id, node, user, uid, start_s, end_s, gpus: list[GpuEnergy], state_source: str,
           reason: str | None = None, accounting: dict[int, GpuAccounting] | None = None,
           accounting_reason: str | None = None, events: list[SpoolEvent] | None = None,
           policy: JobPolicy | None = None) -> SpoolRecord:
    """Build one spool record. ``gpus``: the job's GPUs with their ``start_energy_mj`` /
    ``end_energy_mj`` readings; their ``energy_mj`` and ``counter_reset`` are computed here.
    ``source`` is measured when every GPU has a delta, and none is 0 over a job of
    :data:`FROZEN_COUNTER_S` or more (a counter that did not advance); ``reason`` defaults to why
    not (or to a note on a counter reset). ``policy``: the clock policy the job ran under."""
    rows = []
    for g in gpus:
        delta, reset = energy_delta(g.start_energy_mj, g.end_energy_mj)
        rows.append(GpuEnergy(*g.identity(), g.start_energy_mj, g.end_energy_mj, delta, reset))
    measured = bool(rows) and all(r.energy_mj is not None for r in rows)
    # a counter that did not move over a job of seconds measured nothing (a GPU draws tens of
    # watts idle): a frozen counter, or a recorded snapshot replayed unchanged; not 0 J
    still = [r for r in rows if r.energy_mj == 0 and not r.counter_reset]
    ran_s = (end_s - start_s) if isinstance(start_s, (int, float)) and isinstance(end_s, (int, float)) else None
    if measured and still and ran_s is not None and ran_s >= FROZEN_COUNTER_S:
        measured = False
        reason = reason or (f"the energy counter of {', '.join(f'GPU{r.index}' for r in still)} did not advance over "
                            f"the job's {ran_s:.0f} s (a frozen counter or a replayed snapshot): not a measurement")
    if not rows and reason is None:
        reason = "the job has no GPU on this node"
    if rows and not measured and reason is None:
        reason = "no energy reading at prolog or epilog for " + ", ".join(
            f"GPU{r.index}" for r in rows if r.energy_mj is None)
    if measured and any(r.counter_reset for r in rows) and reason is None:
        reason = "energy counter restarted during the job: lower bound"
    return SpoolRecord(
        job_id=str(job_id), node=node, user=user, uid=uid, start_s=start_s, end_s=end_s,
        source=EnergySource.MEASURED if measured else EnergySource.UNAVAILABLE, reason=reason,
        state_source=state_source, energy_mj_total=sum(r.energy_mj for r in rows) if measured else None,
        gpus=rows, accounting=accounting, accounting_reason=accounting_reason, events=list(events or []),
        policy=policy)


def append(spool_dir, rec: SpoolRecord) -> str:
    """Append ``rec`` as one line to ``<spool_dir>/<rec.node>.jsonl`` (:func:`file_name`);
    returns the file path.

    Raises OSError (e.g. ENOSPC) after truncating away any partial line; ValueError for a node
    name that cannot name a file.
    """
    import fcntl

    spool_dir = os.fspath(spool_dir)
    os.makedirs(spool_dir, mode=0o700, exist_ok=True)
    path = os.path.join(spool_dir, file_name(rec.node))
    data = (json.dumps(rec.to_json(), separators=(",", ":"), sort_keys=True) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        try:
            n = os.write(fd, data)
            if n != len(data):
                raise OSError(28, f"short write to {path} ({n} of {len(data)} bytes): disk full?")
            os.fsync(fd)
        except OSError:
            try:
                os.ftruncate(fd, size)
            except OSError:
                pass
            raise
    finally:
        os.close(fd)
    return path


def read(path) -> tuple[list[SpoolRecord], list[str]]:
    """Read a spool file: ``(records, problems)``; a line that does not parse is reported as
    ``"<path>:<line>: why"`` in ``problems`` and skipped. Raises OSError when the file cannot be
    opened."""
    recs, problems = [], []
    with open(path, encoding="utf-8", errors="replace") as fh:  # a bad byte spoils its own line only: that line is a problem, the rest is read
        for no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                recs.append(SpoolRecord.from_json(json.loads(line)))
            except ValueError as exc:
                problems.append(f"{path}:{no}: {exc}")
    return recs, problems
