"""Per-job GPU energy spool: one JSON line per job and node, appended by the epilog.

Path: ``<spool_dir>/energy.jsonl`` (``spool_dir`` from the hooks config, default
``/var/spool/slurmkit``; the directory is created mode 0700 and the file 0600: root only). Each
line is written with one ``write(2)`` on an ``O_APPEND`` descriptor under ``flock``; when the
write fails part way (disk full) the file is truncated back to its previous length, so readers
only ever see whole lines. Readers (``slurmkit report``) should skip a line that does not parse
and say so.

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
     "events": [{"check": "xid", "status": "fail", "gpu_index": 2, "value": 79}]}
                                  # XID / ECC / retired-page / row-remap results other than pass
                                  # seen at the epilog on the job's GPUs (or node-wide)

``source`` says whether energy figures exist; ``state_source`` whether they were read live or
replayed from a snapshot (a replay's figures describe the snapshot, not this job).
"""

from __future__ import annotations

import json
import os

FILE_NAME = "energy.jsonl"
VERSION = 1


def energy_delta(start_mj: int | None, end_mj: int | None) -> tuple[int | None, bool]:
    """``(delta mJ, counter_reset)`` of two ``nvmlDeviceGetTotalEnergyConsumption`` readings
    (mJ since the driver loaded). ``end < start`` means the counter restarted: the delta is then
    ``end`` (energy since the restart, a lower bound). None when either reading is missing."""
    if start_mj is None or end_mj is None:
        return None, False
    if end_mj < start_mj:
        return int(end_mj), True
    return int(end_mj - start_mj), False


def record(job_id, node, user, uid, start_s, end_s, gpus: list, state_source: str,
           reason: str | None = None, accounting=None, accounting_reason: str | None = None) -> dict:
    """Build one spool record (see the module docstring). ``gpus``: dicts with index, nvml_index,
    minor, uuid, pci_bus_id, start_energy_mj, end_energy_mj; ``energy_mj`` and
    ``counter_reset`` are computed here. ``source`` is ``measured`` when every GPU has a delta."""
    rows = []
    for g in gpus:
        delta, reset = energy_delta(g.get("start_energy_mj"), g.get("end_energy_mj"))
        rows.append({**g, "energy_mj": delta, "counter_reset": reset})
    measured = bool(rows) and all(r["energy_mj"] is not None for r in rows)
    if not rows and reason is None:
        reason = "the job has no GPU on this node"
    if rows and not measured and reason is None:
        reason = "no energy reading at prolog or epilog for " + ", ".join(
            f"GPU{r['index']}" for r in rows if r["energy_mj"] is None)
    if measured and any(r["counter_reset"] for r in rows) and reason is None:
        reason = "energy counter restarted during the job: lower bound"
    return {
        "v": VERSION, "job_id": str(job_id), "node": node, "user": user, "uid": uid,
        "start_s": start_s, "end_s": end_s, "source": "measured" if measured else "unavailable",
        "reason": reason, "state_source": state_source,
        "energy_mj_total": sum(r["energy_mj"] for r in rows) if measured else None,
        "gpus": rows, "accounting": accounting,
        "accounting_reason": accounting_reason,
    }


def append(spool_dir, rec: dict) -> str:
    """Append ``rec`` as one line to ``<spool_dir>/energy.jsonl``; returns the file path.

    Raises OSError (e.g. ENOSPC) after truncating away any partial line.
    """
    import fcntl

    spool_dir = os.fspath(spool_dir)
    os.makedirs(spool_dir, mode=0o700, exist_ok=True)
    path = os.path.join(spool_dir, FILE_NAME)
    data = (json.dumps(rec, separators=(",", ":"), sort_keys=True) + "\n").encode()
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


def read(path) -> tuple[list[dict], list[str]]:
    """Read a spool file: ``(records, problems)``; a line that does not parse is reported as
    ``"<path>:<line>: ..."`` in ``problems`` and skipped."""
    recs, problems = [], []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                if not isinstance(rec, dict) or rec.get("v") != VERSION:
                    raise ValueError(f"not a version {VERSION} record")
                recs.append(rec)
            except ValueError as exc:
                problems.append(f"{path}:{no}: {exc}")
    return recs, problems
