"""Per-allocation usage in a window: clipped hours, GPU-hours, waste, queue wait, efficiency.

Input: the typed row frame of :func:`slurmkit.accounting.frame.jobs_frame` (allocation and
step rows). Output of :func:`allocations`: one row per allocation row (a requeued job has one
row per attempt; ``jobs`` counts distinct ``(cluster, key_id)``) with

- ``run_s``: seconds it ran (ElapsedRaw, which excludes suspended time; End − Start when absent)
- ``in_window_s``: ``run_s`` scaled by the share of [Start, End) inside the window
  (a running job's End is ``now``)
- ``gpu_hours`` = gpus × in_window_s / 3600, ``cpu_hours`` = NCPUS × in_window_s / 3600
- ``wasted``: bool, outcome wastes its GPU-hours (:data:`WASTE_STATES`)
- ``wait_s``: Start − Eligible (Submit when Eligible is unknown), for jobs started in the window
- ``step_mem_mib``: the largest step's memory use (TRESUsageInTot mem / MaxRSS), as seff does
- ``step_gpu_util_pct``: elapsed-weighted mean of the steps' gres/gpuutil (extern excluded)

The data-quality counts get every row that is not used: outside the window, steps without an
allocation row.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from slurmkit.accounting.quality import DataQuality

#: Outcomes whose GPU-hours are waste. REQUEUED rows are earlier attempts of a requeued job.
WASTE_STATES = ("FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED", "REQUEUED",
                "BOOT_FAIL", "DEADLINE")

GPU_BUCKETS = [(0, 0, "0"), (1, 1, "1"), (2, 4, "2-4"), (5, 8, "5-8"), (9, np.inf, "9+")]


def gpu_bucket(gpus: pd.Series) -> pd.Series:
    """GPU-count bucket label: ``0``, ``1``, ``2-4``, ``5-8``, ``9+`` (fractions round up)."""
    g = np.ceil(gpus.fillna(0).to_numpy())
    out = np.full(len(g), "9+", dtype=object)
    for lo, hi, label in reversed(GPU_BUCKETS):
        out[(g >= lo) & (g <= hi)] = label
    return pd.Series(out, index=gpus.index, dtype="str")


def _step_usage(steps: pd.DataFrame) -> pd.DataFrame:
    key = ["cluster", "key_id"]
    if steps.empty:
        return pd.DataFrame(columns=key + ["step_mem_mib", "step_gpu_util_pct", "step_cpu_s"])
    s = steps[["cluster", "key_id", "step", "mem_used_mib", "gpu_util_pct", "elapsed_s",
               "total_cpu_s"]].copy()
    util_ok = s["gpu_util_pct"].notna() & (s["step"] != "extern")
    w = s["elapsed_s"].fillna(0).clip(lower=1.0)
    s["uw"] = (s["gpu_util_pct"] * w).where(util_ok)
    s["w"] = w.where(util_ok)
    g = s.groupby(key, sort=False)
    out = g.agg(step_mem_mib=("mem_used_mib", "max"), uw=("uw", "sum"), w=("w", "sum"),
                step_cpu_s=("total_cpu_s", "sum"))
    out["step_gpu_util_pct"] = (out["uw"] / out["w"]).where(out["w"] > 0)
    return out.drop(columns=["uw", "w"]).reset_index()


def utc(t) -> pd.Timestamp:
    """A timestamp as an aware UTC ``pd.Timestamp`` (naive values are taken as UTC)."""
    t = pd.Timestamp(t)
    return t.tz_localize("UTC") if t.tzinfo is None else t.tz_convert("UTC")


def allocations(rows: pd.DataFrame, start, end, dq: DataQuality, now=None,
                source: str = "") -> pd.DataFrame:
    """Allocation rows in ``[start, end)`` (aware UTC timestamps) with the usage columns of the
    module docstring. Records unused rows in ``dq`` (so ``dq.rows_counted`` is exactly the rows
    used). ``now``: the time a running job's End is taken as (default: the current time)."""
    start, end = utc(start), utc(end)
    now = utc(now) if now is not None else pd.Timestamp.now(tz="UTC")
    is_step = rows["is_step"].to_numpy(bool)
    allocs = rows[~is_step].copy()
    steps = rows[is_step]

    # steps whose allocation row is not in the input
    known = pd.MultiIndex.from_frame(allocs[["cluster", "key_id"]])
    skey = pd.MultiIndex.from_frame(steps[["cluster", "key_id"]])
    orphan = ~skey.isin(known)
    if orphan.any():
        for jid in steps.loc[orphan, "job_id"].head(10):
            dq.skip("step row without its allocation row", 0, source or "input", None, f"JobID {jid}")
        dq.skip("step row without its allocation row", int(orphan.sum()))
        steps = steps[~orphan]

    ran = allocs["start"].notna()
    stop = allocs["end"].fillna(now)
    stop = stop.where(~ran | (stop >= allocs["start"]), allocs["start"])
    lo = allocs["start"].clip(lower=start)
    hi = stop.clip(upper=end)
    overlap = (hi - lo).dt.total_seconds().clip(lower=0).where(ran, 0.0)
    full = (stop - allocs["start"]).dt.total_seconds()
    run_s = allocs["elapsed_s"].where(allocs["elapsed_s"].notna() & allocs["end"].notna(), full)
    run_s = run_s.fillna(full).fillna(0.0)
    frac = (overlap / full).where(full > 0, 0.0).fillna(0.0)
    allocs["run_s"] = run_s
    allocs["in_window_s"] = run_s * frac
    allocs["provisional"] = ran & allocs["end"].isna()

    # which allocation rows belong to the window
    pending = allocs["pending_tasks"] > 0
    t_lo = allocs["start"].fillna(allocs["submit"]).fillna(allocs["end"])
    t_hi = allocs["end"].fillna(now)
    touches = (t_lo < end) & (t_hi >= start)
    touches |= pending & (allocs["submit"].isna() | (allocs["submit"] < end))
    unknown = t_lo.isna() & ~pending
    keep = touches & ~unknown
    n_unknown = int(unknown.sum())
    if n_unknown:
        for jid in allocs.loc[unknown, "job_id"].head(10):
            dq.skip("no Submit/Start/End time", 0, source or "input", None, f"JobID {jid}")
        dq.skip("no Submit/Start/End time", n_unknown)
    n_out = int((~keep & ~unknown).sum())
    outside = allocs.loc[~keep, ["cluster", "key_id"]]
    allocs = allocs[keep]
    # steps of allocations outside the window go with them
    skey = pd.MultiIndex.from_frame(steps[["cluster", "key_id"]])
    inside = pd.MultiIndex.from_frame(allocs[["cluster", "key_id"]])
    step_in = skey.isin(inside)
    dq.skip("outside the window", n_out + int((~step_in).sum()))
    steps = steps[step_in]
    del outside

    allocs = allocs.merge(_step_usage(steps), on=["cluster", "key_id"], how="left")
    for c in ("step_mem_mib", "step_gpu_util_pct", "step_cpu_s"):
        allocs[c] = pd.to_numeric(allocs[c], errors="coerce").astype("float64")
    allocs["job_code"] = allocs.groupby(["cluster", "key_id"], sort=False).ngroup()
    allocs["gpu_hours"] = allocs["gpus"] * allocs["in_window_s"] / 3600.0
    allocs["cpu_hours"] = allocs["ncpus"].fillna(0) * allocs["in_window_s"] / 3600.0
    allocs["wasted"] = allocs["state"].isin(WASTE_STATES)
    allocs["requeued_attempt"] = allocs["state"] == "REQUEUED"
    ready = allocs["eligible"].fillna(allocs["submit"])
    started_in = allocs["start"].notna() & (allocs["start"] >= start) & (allocs["start"] < end)
    allocs["wait_s"] = (allocs["start"] - ready).dt.total_seconds().clip(lower=0).where(started_in)
    allocs["gpu_bucket"] = gpu_bucket(allocs["gpus"])
    cpu_s = allocs["total_cpu_s"].where(allocs["total_cpu_s"] > 0).fillna(allocs["step_cpu_s"])
    denom = allocs["run_s"] * allocs["ncpus"]
    allocs["cpu_eff"] = (cpu_s / denom).where(denom > 0)
    allocs["mem_eff"] = (allocs["step_mem_mib"] / allocs["alloc_mem_mib"]).where(allocs["alloc_mem_mib"] > 0)
    return allocs.reset_index(drop=True)


def hourly_gpus(allocs: pd.DataFrame, start, end, now=None) -> pd.Series:
    """Average GPUs in use in each hour of ``[start, end)``: a Series indexed by the hour's
    start (UTC). Exact piecewise-linear integration, O(n log n) with numpy; running jobs end
    at ``now``. Suspended time is not subtracted (Slurm keeps the GPUs allocated)."""
    start, end = utc(start), utc(end)
    now = utc(now) if now is not None else pd.Timestamp.now(tz="UTC")
    hours = pd.date_range(start.floor("h"), end, freq="h", inclusive="left")
    epoch = pd.Timestamp(0, tz="UTC")
    edges = np.append((hours - epoch).total_seconds().to_numpy(), (end - epoch).total_seconds())
    a = allocs[allocs["start"].notna() & (allocs["gpus"] > 0)]
    if a.empty:
        return pd.Series(0.0, index=hours)
    s = (a["start"] - epoch).dt.total_seconds().to_numpy()
    e = (a["end"].fillna(now) - epoch).dt.total_seconds().to_numpy()
    e = np.maximum(e, s)
    g = a["gpus"].to_numpy(float)

    def integral(times, weights, at):
        order = np.argsort(times)
        t, w = times[order], weights[order]
        cw, ctw = np.concatenate([[0], np.cumsum(w)]), np.concatenate([[0], np.cumsum(w * t)])
        idx = np.searchsorted(t, at, side="right")
        return at * cw[idx] - ctw[idx]

    F = integral(s, g, edges) - integral(e, g, edges)  # GPU-seconds before each edge
    per_hour = np.diff(F) / np.diff(edges)
    return pd.Series(per_hour, index=hours)
