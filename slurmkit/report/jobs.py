"""Per-job efficiency view (like reportseff / seff / jobstats) and the job-size distribution.

Pure functions over the per-allocation frame of :func:`slurmkit.report.usage.allocations`
(with :func:`slurmkit.report.energy.attach_energy`'s energy columns), which the weekly report
builds too: one definition of CPU, memory and GPU efficiency for both.

:func:`job_view` gives one row per allocation row (a job, an array task ``123_4``, a het
component ``900+1``, a requeued attempt: JobID as sacct prints it) with :data:`COLUMNS`;
a figure whose inputs are absent is NaN (JSON null, "unknown" in a table or CSV), never 0.
:func:`select` filters it (user, account, state, job IDs, window); :func:`to_rows`,
:func:`to_table`, :func:`to_csv` render it. :func:`job_sizes` is the GPUs x duration
distribution of the weekly report (``job_sizes``), callable per period.

:func:`slurmkit.report.pipeline.load_jobs` is the edge: it reads captures (the weekly
report's reader: ``--tz``, ``--delimiter``, ``--sacct-fields``, data quality), live sacct or the
store, and calls :func:`job_view`.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

#: The per-job columns, each with its definition and source (docs/report.md "Per-job view").
COLUMNS: dict[str, str] = {
    "job_id": "JobID as sacct prints it (array task 123_4, het component 900+1)",
    "key_id": "JobIDRaw (an array task's or het component's own ID), else JobID",
    "cluster": "Cluster",
    "user": "User",
    "account": "Account",
    "partition": "Partition",
    "state": "State (without 'by N')",
    "start": "Start (UTC, ISO)",
    "end": "End (UTC, ISO); null while running",
    "elapsed_s": "ElapsedRaw (Elapsed when absent; else End - Start, or a running job's Start to the capture "
                 "time / now), s; null when the row has none of ElapsedRaw, Elapsed, Start and End",
    "timelimit_s": "TimelimitRaw x 60, else Timelimit, s; null for UNLIMITED / Partition_Limit",
    "time_eff": "elapsed_s / timelimit_s",
    "ncpus": "NCPUS (AllocCPUS)",
    "total_cpu_s": "TotalCPU of the allocation row, else the sum of its steps' TotalCPU, s",
    "cpu_eff": "total_cpu_s / (elapsed_s x ncpus); null while running",
    "mem_req_mib": "AllocTRES mem=, else ReqMem (4000Mc x NCPUS, 4000Mn x NNodes), MiB",
    "mem_used_mib": "largest step's TRESUsageInTot mem=, else MaxRSS x NTasks, MiB",
    "mem_eff": "mem_used_mib / mem_req_mib; null while running",
    "gpus": "AllocTRES gres/gpu, else AllocGRES gpu:N, else ReqTRES (requested)",
    "gpu_type": "the typed gres/gpu:<type> of the same field",
    "gpu_source": "which field the GPU count came from",
    "gpu_util_pct": "steps' TRESUsageInAve gres/gpuutil (TRESUsageInTot / NTasks), weighted by GPUs x ElapsedRaw; "
                    "else the hooks' spool (NVML), %",
    "gpu_util_source": "sacct (gres/gpuutil) | spool | null",
    "gpu_mem_mib": "largest step's gres/gpumem of TRESUsageInMax (else TRESUsageInTot), MiB",
    "energy_kwh": "the weekly report's energy sources (slurmkit.report.energy.attach_energy), kWh",
    "energy_source": "measured | prometheus | slurm | slurm_tres | modelled | none",
    "provisional": "still running: elapsed and energy grow; efficiencies not known yet",
}

#: The columns of the table format, with their headers.
TABLE = (("job_id", "JobID"), ("user", "User"), ("account", "Account"), ("state", "State"),
         ("elapsed_s", "Elapsed"), ("time_eff", "TimeEff"), ("cpu_eff", "CPUEff"), ("mem_eff", "MemEff"),
         ("gpus", "GPUs"), ("gpu_util_pct", "GPUUtil"), ("gpu_mem_mib", "GPUMem"), ("energy_kwh", "kWh"),
         ("energy_source", "EnergySrc"))

UNKNOWN = "unknown"


def _nan_where(s: pd.Series, mask) -> pd.Series:
    return s.astype("float64").where(~np.asarray(mask, bool))


def job_view(allocs: pd.DataFrame) -> pd.DataFrame:
    """One row per allocation row of ``allocs`` (the frame of
    :func:`~slurmkit.report.usage.allocations` after
    :func:`~slurmkit.report.energy.attach_energy`), with :data:`COLUMNS`.

    Efficiencies are ratios (0.5 = 50 %). Unknown stays NaN: a time limit that is UNLIMITED or
    0, no NCPUS or elapsed 0 (CPU), no memory request or no step memory (memory), no GPU
    utilization. A running job (End unknown) has its time efficiency so far, and no CPU or
    memory efficiency (sacct adds TotalCPU when a step ends); a job that never started (pending,
    cancelled while pending) has none of them, and a pending one no elapsed time either."""
    a = allocs
    ran = a["started"].to_numpy(bool) if "started" in a else a["start"].notna().to_numpy()
    running = a["provisional"].to_numpy(bool) if "provisional" in a else a["end"].isna().to_numpy()
    tl = a["timelimit_s"].astype("float64")
    tl = tl.where(np.isfinite(tl) & (tl > 0))
    pending = (a["state"].astype(str) == "PENDING").to_numpy() | (a["pending_tasks"] > 0).to_numpy()
    # a running job: its Elapsed as sacct printed it (when the capture was taken), else up to now
    run_s = a["run_s"].where(~running | a["elapsed_s"].isna(), a["elapsed_s"])
    # a job cancelled before it started ran 0 s; a row with no ElapsedRaw / Elapsed / CPUTime, no
    # Start and no End (a capture without those fields) ran for an unknown time, not 0 s
    no_times = (a["elapsed_s"].isna() & a["start"].isna() & a["end"].isna()).to_numpy()
    elapsed = _nan_where(run_s, pending | no_times)
    su = a["step_gpu_util_pct"].astype("float64") if "step_gpu_util_pct" in a else pd.Series(np.nan, index=a.index)
    spu = a["spool_gpu_util_pct"].astype("float64") if "spool_gpu_util_pct" in a else pd.Series(np.nan, index=a.index)
    util_src = np.where(su.notna(), "sacct (gres/gpuutil)", np.where(spu.notna(), "spool", None))
    cpu_s = a["total_cpu_s"].where(a["total_cpu_s"] > 0).fillna(a["step_cpu_s"]) if "step_cpu_s" in a \
        else a["total_cpu_s"]
    out = pd.DataFrame({
        "job_id": a["job_id"].astype(str).to_numpy(),
        "key_id": a["key_id"].astype(str).to_numpy(),
        "cluster": a["cluster"].astype(str).to_numpy(),
        "user": a["user"].astype(str).to_numpy(),
        "account": a["account"].astype(str).to_numpy(),
        "partition": a["partition"].astype(str).to_numpy(),
        "state": a["state"].astype(str).to_numpy(),
        "start": a["start"].to_numpy(),
        "end": a["end"].to_numpy(),
        "elapsed_s": elapsed.to_numpy(),
        "timelimit_s": tl.to_numpy(),
        "time_eff": _nan_where(elapsed / tl, ~ran).to_numpy(),
        "ncpus": a["ncpus"].astype("float64").to_numpy(),
        "total_cpu_s": _nan_where(cpu_s, ~ran).to_numpy(),
        "cpu_eff": _nan_where(a["cpu_eff"], ~ran | running).to_numpy(),
        "mem_req_mib": a["alloc_mem_mib"].astype("float64").to_numpy(),
        "mem_used_mib": _nan_where(a["step_mem_mib"], ~ran).to_numpy(),
        "mem_eff": _nan_where(a["mem_eff"], ~ran | running).to_numpy(),
        "gpus": a["gpus"].astype("float64").to_numpy(),
        "gpu_type": a["gpu_type"].astype(str).to_numpy(),
        "gpu_source": a["gpu_source"].astype(str).to_numpy() if "gpu_source" in a else None,
        "gpu_util_pct": su.fillna(spu).to_numpy(),
        "gpu_util_source": util_src,
        "gpu_mem_mib": (a["step_gpu_mem_mib"].astype("float64") if "step_gpu_mem_mib" in a
                        else pd.Series(np.nan, index=a.index)).to_numpy(),
        "energy_kwh": (a["energy_kwh"].astype("float64") if "energy_kwh" in a
                       else pd.Series(np.nan, index=a.index)).to_numpy(),
        "energy_source": a["energy_source"].astype(str).to_numpy() if "energy_source" in a else "none",
        "provisional": running,
    })
    # a job without GPUs has no GPU utilization to know
    out.loc[out["gpus"] == 0, "gpu_util_source"] = None
    return out


def _base(job_id: str) -> str:
    """The job of a JobID: ``123`` of ``123_4`` / ``123_[5-9]`` / ``123+1``."""
    for sep in ("_", "+"):
        job_id = job_id.split(sep, 1)[0]
    return job_id


def select(view: pd.DataFrame, users: Sequence[str] = (), accounts: Sequence[str] = (),
           states: Sequence[str] = (), job_ids: Sequence[str] = (), window=None) -> pd.DataFrame:
    """The rows of ``view`` (:func:`job_view`) that match every filter given: ``users``,
    ``accounts``, ``states`` (sacct names, any case: ``completed``, ``FAILED``), ``job_ids``
    (a JobID as printed, ``123_4``, its JobIDRaw ``key_id``, or a job's base ID ``123``,
    which takes all of its array tasks and het components, as reportseff does) and ``window``
    (a :class:`~slurmkit.report.window.Window`: jobs that ran in it, or were pending or
    submitted in it). Rows keep their order."""
    keep = np.ones(len(view), bool)
    if users:
        keep &= view["user"].isin(list(users)).to_numpy()
    if accounts:
        keep &= view["account"].isin(list(accounts)).to_numpy()
    if states:
        keep &= view["state"].str.upper().isin([s.upper() for s in states]).to_numpy()
    if job_ids:
        want = set(map(str, job_ids))
        jid = view["job_id"]
        hit = jid.isin(want) | jid.map(_base).isin(want) | view["key_id"].isin(want)
        keep &= hit.to_numpy()
    if window is not None:
        lo = pd.Timestamp(window.start)
        hi = pd.Timestamp(window.end)
        lo = lo.tz_localize("UTC") if lo.tzinfo is None else lo
        hi = hi.tz_localize("UTC") if hi.tzinfo is None else hi
        start = pd.to_datetime(view["start"], utc=True)
        end = pd.to_datetime(view["end"], utc=True)
        ran = start.notna() & (start < hi) & (end.isna() | (end >= lo))
        keep &= ran.to_numpy()
    return view[keep].reset_index(drop=True)


def why_not_listed(view: pd.DataFrame, job_id: str, window=None, **filters) -> str:
    """Why ``job_id`` is not in :func:`select`'s rows of ``view`` with ``window`` and
    ``filters`` (``users``, ``accounts``, ``states``): ``not found`` (not read), ``never
    started (cancelled before start)`` (read, no Start: the window
    holds jobs that ran; another state than CANCELLED named), ``ran outside the window (<first Start> .. <last End>)`` or ``read,
    but not of the --user/--account/--state given``."""
    rows = select(view, job_ids=[job_id])
    if not len(rows):
        return "not found"
    if not len(select(rows, **filters)):
        return "read, but not of the --user/--account/--state given"
    rows = select(rows, **filters)
    start = pd.to_datetime(rows["start"], utc=True)
    if start.isna().all():
        states = list(dict.fromkeys(str(s) for s in rows["state"]))
        if all(s.startswith("CANCELLED") for s in states):
            return "never started (cancelled before start)"
        return f"never started (state {', '.join(states)})"
    end = pd.to_datetime(rows["end"], utc=True)
    return f"ran outside the window ({_iso(start.min())} .. {_iso(end.max()) or 'running'})"


def _iso(t) -> str | None:
    if t is None or pd.isna(t):
        return None
    return pd.Timestamp(t).tz_convert("UTC").strftime("%Y-%m-%dT%H:%M:%SZ") if pd.Timestamp(t).tzinfo \
        else pd.Timestamp(t).strftime("%Y-%m-%dT%H:%M:%SZ")


def _plain(v):
    if v is None:
        return None
    if isinstance(v, (np.bool_, bool)):
        return bool(v)
    if isinstance(v, (float, np.floating)):
        return None if math.isnan(v) else round(float(v), 6)
    if isinstance(v, (np.integer,)):
        return int(v)
    return v


def to_rows(view: pd.DataFrame) -> list[dict]:
    """The view as plain dicts (JSON): times ISO UTC, unknown as None (an empty Cluster,
    User, Account, Partition, GPU type too), ratios as ratios."""
    rows = []
    for rec in view.to_dict("records"):
        r = {k: _plain(v) for k, v in rec.items()}
        r["start"], r["end"] = _iso(rec["start"]), _iso(rec["end"])
        for k in ("cluster", "user", "account", "partition", "gpu_type", "gpu_source"):
            if r.get(k) in ("", "nan", "None"):   # a field the input does not give: unknown
                r[k] = None
        rows.append(r)
    return rows


def hms(s) -> str:
    """Seconds as sacct prints Elapsed, ``[D-]HH:MM:SS`` (:func:`slurmkit.submit.timelimit.hms`,
    rounded to the second); "unknown" for None / NaN."""
    from slurmkit.submit.timelimit import hms as _hms

    if s is None or (isinstance(s, float) and math.isnan(s)):
        return UNKNOWN
    return _hms(int(round(float(s))))


def _cell(key: str, v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)) or v == "":
        return UNKNOWN
    if key == "elapsed_s":
        return hms(v)
    if key.endswith("_eff"):
        return f"{100.0 * v:.1f}%"
    if key == "gpu_util_pct":
        return f"{v:.1f}%"
    if key == "gpu_mem_mib":
        return f"{v / 1024.0:.1f}G"
    if key == "gpus":
        return f"{v:g}"
    if key == "energy_kwh":
        return f"{v:.3g}"
    return str(v)


def to_table(view: pd.DataFrame) -> str:
    """A fixed-width table like reportseff's (:data:`TABLE` columns; efficiencies in %, GPU
    memory in GiB, "unknown" where not known; a running job's state gets ``*``)."""
    rows = [[h for _, h in TABLE]]
    for rec in view.to_dict("records"):
        row = []
        for key, _ in TABLE:
            v = rec[key]
            if key == "gpus" and not (isinstance(v, float) and math.isnan(v)) and rec.get("gpu_type") not in ("", "nan", None):
                row.append(f"{v:g}:{rec['gpu_type']}")
                continue
            if key == "state" and rec.get("provisional"):
                row.append(f"{v}*")
                continue
            row.append(_cell(key, v))
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(TABLE))]
    return "\n".join("  ".join(c.ljust(w) if i < 4 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
                     for r in rows) + "\n"


def to_csv(view: pd.DataFrame) -> str:
    """The view as CSV (every :data:`COLUMNS` column, raw units; "unknown" where not known)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(list(COLUMNS))
    for r in to_rows(view):
        w.writerow([UNKNOWN if r[k] is None and k not in ("end",) else ("" if r[k] is None else r[k])
                    for k in COLUMNS])
    return buf.getvalue()


# --- job-size distribution ----------------------------------------------------------------

#: GPU-count buckets of :func:`job_sizes` (inclusive bounds) of ``gpus``, sreport's count: a MIG instance is one GPU.
SIZE_GPU_BUCKETS = ((0, 0, "0"), (1, 1, "1"), (2, 4, "2-4"), (5, 8, "5-8"), (9, 16, "9-16"),
                    (17, 64, "17-64"), (65, math.inf, "65+"))
#: Duration buckets of :func:`job_sizes`: ``[lo, hi)`` seconds of the job's run.
SIZE_DURATION_BUCKETS = ((0, 3600, "<1h"), (3600, 4 * 3600, "1-4h"), (4 * 3600, 12 * 3600, "4-12h"),
                         (12 * 3600, 24 * 3600, "12-24h"), (24 * 3600, math.inf, ">24h"))


def _bucket(values: np.ndarray, buckets, upper_inclusive: bool) -> np.ndarray:
    code = np.full(len(values), -1, np.int64)
    for i, (lo, hi, _) in enumerate(buckets):
        inside = (values >= lo) & ((values <= hi) if upper_inclusive else (values < hi))
        code[inside & (code < 0)] = i
    return code


def has_repeats(codes: np.ndarray) -> bool:
    """True when a value of the integer array ``codes`` (the report's ``job_code``: dense
    codes 0 .. jobs-1) occurs twice: a count per value when they are small non-negative
    integers (one pass, no sort of a million codes per section), else a sort."""
    codes = np.asarray(codes)
    if len(codes) < 2:
        return False
    if codes.dtype.kind in "iu":
        lo, hi = int(codes.min()), int(codes.max())
        if lo >= 0 and hi <= 4 * len(codes) + 1024:
            return bool(np.bincount(codes).max() > 1)
    srt = np.sort(codes)
    return bool((srt[1:] == srt[:-1]).any())


def job_sizes(runs: pd.DataFrame) -> dict:
    """The GPUs x duration distribution of the allocations that ran (``runs``: the weekly
    report's allocation rows that started, columns ``job_code``, ``start``, ``gpus``,
    ``run_s`` and ``gpu_hours`` of :func:`~slurmkit.report.usage.allocations`).

    GPU buckets :data:`SIZE_GPU_BUCKETS` (AllocTRES / AllocGRES / ReqTRES GPUs, ceil), plus
    ``unknown`` when some rows have no GPU count (only ``unknown`` when none has one); duration buckets
    :data:`SIZE_DURATION_BUCKETS` of ``run_s`` (ElapsedRaw: the whole run, not clipped to the
    window). Per cell: ``jobs`` (distinct jobs, each in the cell of its last attempt in
    ``runs``, so the cells add up to the report's ``totals.jobs``) and ``gpu_hours`` (each
    attempt's GPU-hours inside the window, in its own cell; None in the ``unknown`` row).

    Returns ``{"gpu_buckets", "duration_buckets", "jobs": [[...]], "gpu_hours": [[...]],
    "cells": [{"gpus", "duration", "jobs", "gpu_hours"}], "duration_from"}``, matrices with
    one row per GPU bucket and one column per duration bucket. Pure; a period report calls it
    once per period on that period's runs."""
    g = runs["gpus"].to_numpy(float)
    dur = runs["run_s"].to_numpy(float)
    gcode = _bucket(np.ceil(np.nan_to_num(g, nan=-1.0)), SIZE_GPU_BUCKETS, True)
    labels = [b[2] for b in SIZE_GPU_BUCKETS]
    unknown = np.isnan(g)
    if unknown.any():
        gcode[unknown] = len(labels)
        labels.append(UNKNOWN)
    dcode = _bucket(np.nan_to_num(dur, nan=0.0), SIZE_DURATION_BUCKETS, False)
    dcode[dcode < 0] = 0
    ng, nd = len(labels), len(SIZE_DURATION_BUCKETS)
    cell = gcode * nd + dcode
    gh = np.bincount(cell, weights=np.nan_to_num(runs["gpu_hours"].to_numpy(float)), minlength=ng * nd)
    # one count per job: its last attempt (by Start) in ``runs`` (each row its own job when no
    # job_code repeats; else the two sort keys and the cell sorted, not the whole frame)
    if not has_repeats(runs["job_code"].to_numpy()):
        jobs = np.bincount(cell.astype(np.int64), minlength=ng * nd)
    else:
        order = runs[["job_code", "start"]].assign(_cell=cell).sort_values(
            ["job_code", "start"], kind="stable", na_position="first")
        last = order.drop_duplicates("job_code", keep="last")
        jobs = np.bincount(last["_cell"].to_numpy(np.int64), minlength=ng * nd)
    return size_table(jobs.reshape(ng, nd), gh.reshape(ng, nd), bool(unknown.any()))


def size_table(jobs, gpu_hours, unknown: bool) -> dict:
    """The :func:`job_sizes` dict from its two matrices (numpy or nested lists): ``jobs``
    (distinct jobs) and ``gpu_hours`` (GPU-hours inside the window), one row per GPU bucket
    of :data:`SIZE_GPU_BUCKETS` (plus a last ``unknown`` row when ``unknown``: some runs have
    no GPU count; its GPU-hours are None) and one column per duration bucket of
    :data:`SIZE_DURATION_BUCKETS`. The period report (:mod:`slurmkit.report.period`) counts
    the cells in DuckDB and builds its table here, so both reports shape it once."""
    labels = [b[2] for b in SIZE_GPU_BUCKETS] + ([UNKNOWN] if unknown else [])
    ng, nd = len(labels), len(SIZE_DURATION_BUCKETS)
    jm, hm = np.asarray(jobs, dtype=np.int64).reshape(ng, nd), np.asarray(gpu_hours, dtype=float).reshape(ng, nd)
    if unknown and jm[-1].any() and not jm[:-1].any():
        # no job has a GPU count: no bucket of known GPUs (its zeros would be read as "no job")
        jm, hm, labels, ng = jm[-1:], hm[-1:], labels[-1:], 1
    hours = [[None if labels[i] == UNKNOWN else round(float(hm[i, j]), 6) for j in range(nd)] for i in range(ng)]
    cells = [{"gpus": labels[i], "duration": SIZE_DURATION_BUCKETS[j][2], "jobs": int(jm[i, j]),
              "gpu_hours": hours[i][j]} for i in range(ng) for j in range(nd)]
    return {"gpu_buckets": labels, "duration_buckets": [b[2] for b in SIZE_DURATION_BUCKETS],
            "jobs": jm.astype(int).tolist(), "gpu_hours": hours, "cells": cells,
            "duration_from": "Elapsed: sacct's ElapsedRaw, else Elapsed (else CPUTime / NCPUS, End - Start); the whole run, "
                             "not clipped to the window"}
