"""The weekly report model: one plain dict (the JSON output) from rows + window + assumptions.

:func:`build_report` is pure: it takes the typed sacct rows (:class:`~slurmkit.accounting.frame.JobRows`), the spool frame, the
assumptions and optional capacity / down-time / sreport figures, and returns

``totals.energy_known`` is False when no job has any energy source (``energy_kwh`` then reads
0 but is unknown; facility kWh, CO2e and energy cost are None).

``{"window", "totals", "by_user", "by_account", "by_partition", "by_qos", "by_gpu_type",
"energy_by_policy", "outcomes", "queue_wait", "efficiency", "hourly", "utilization" (with "capacity_source" and "breakdown"), "accounts", "downtime",
"reconciliation", "assumptions", "energy_sources", "data_quality", "deltas", "job_sizes"}`` — the keys of
``weekly.json``.
Hours are GPU-hours / CPU-hours inside the window; energy in kWh.
The per-allocation frame (for CSV / Parquet) is returned beside it.
"""

from __future__ import annotations

import math

import duckdb
import numpy as np
import pandas as pd

from slurmkit.accounting.quality import DataQuality
from slurmkit.report import energy as E
from slurmkit.report.jobs import has_repeats, job_sizes
from slurmkit.report import week_sql as WS
from slurmkit.report.usage import allocations, utc
# (the GPU type group labels have their home beside their SQL; named here for the period report)
from slurmkit.report.week_sql import GPU_TYPE_UNKNOWN, GPU_UNTYPED  # noqa: F401
from slurmkit.report.window import Window, iso_z

#: The outcomes line of earlier attempts of requeued jobs (their ``attempts``; ``jobs`` only
#: counts a job whose later attempt is not in the window).
REQUEUED_LINE = "requeued attempts"

#: A job under this GPU utilization (percent) held its GPUs idle; the report lists the top ones.
IDLE_UTIL_PCT = 5.0
IDLE_JOBS = 20


def _num(x):
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else round(x, 9)


def _distinct_per_group(codes: np.ndarray, job_code: np.ndarray, n: int) -> np.ndarray:
    """Distinct ``job_code`` values per group ``codes`` (0 .. n-1; -1 is no group): a requeued
    job's attempts count once."""
    ok = codes >= 0
    if not has_repeats(job_code):   # no requeued job: one row per job
        return np.bincount(codes[ok], minlength=n)
    width = np.int64(job_code.max(initial=0)) + 1
    pairs = pd.unique(codes[ok].astype(np.int64) * width + job_code[ok])
    return np.bincount(pairs // width, minlength=n)


def _group(a: pd.DataFrame, col: str, name: str, mask=None) -> list[dict]:
    """Per value of ``col`` (rows in ``mask`` only): distinct jobs, GPU-, CPU-hours, kWh and
    the jobs it misses (``energy_jobs_unknown``: with a run of no energy source), wasted
    GPU-hours and physical GPU-hours (MIG instances weighed by their share of the GPU; None when
    no row of the group has them), largest GPU-hours first."""
    cols = [col, "gpu_hours", "cpu_hours", "energy_kwh", "waste_gpu_hours", "provisional_gpu_hours",
            "physical_gpu_hours"]
    sel = a.loc[mask, cols + ["job_code", "energy_source"]] if mask is not None else a[cols + ["job_code", "energy_source"]]
    if sel.empty:
        return []
    codes, uniq = pd.factorize(sel[col], sort=False)
    # a group whose rows all lack a figure (no GPU field, no NCPUS): unknown (None), not 0
    t = sel[cols[1:]].groupby(codes, sort=False).sum(min_count=1)
    # a group none of whose jobs has an energy figure: unknown (None), not 0 kWh
    t["energy_kwh"] = sel["energy_kwh"].groupby(codes, sort=False).sum(min_count=1)
    t = t[t.index >= 0]
    t["jobs"] = _distinct_per_group(codes, sel["job_code"].to_numpy(), len(uniq))[t.index]
    none = (sel["energy_source"] == "none").to_numpy()
    t["jobs_none"] = _distinct_per_group(np.where(none, codes, -1), sel["job_code"].to_numpy(), len(uniq))[t.index]
    t[col] = np.asarray(uniq)[t.index]
    t = t.sort_values(["gpu_hours", "cpu_hours", col], ascending=[False, False, True])
    return [{name: k, "jobs": int(j), "gpu_hours": _num(g), "cpu_hours": _num(c), "energy_kwh": _num(e),
             "energy_jobs_unknown": int(u), "wasted_gpu_hours": _num(w), "provisional_gpu_hours": _num(p),
             "physical_gpu_hours": _num(ph)}
            for k, j, g, c, e, u, w, p, ph in zip(t[col], t["jobs"], t["gpu_hours"], t["cpu_hours"],
                                                  t["energy_kwh"], t["jobs_none"], t["waste_gpu_hours"],
                                                  t["provisional_gpu_hours"], t["physical_gpu_hours"])]


_QUANTILES = [0.5, 0.9, 0.95, 0.05, 0.25, 0.75, 1.0]
_QNAMES = ["p50_s", "p90_s", "p95_s", "p5_s", "p25_s", "p75_s", "max_s"]

#: Queue-wait histogram bins (seconds, ``[lo, hi)``) and their labels.
WAIT_BINS = (0, 60, 300, 900, 3600, 4 * 3600, 12 * 3600, 86400, 3 * 86400, math.inf)
WAIT_BIN_LABELS = ("<1 min", "1-5 min", "5-15 min", "15 min-1 h", "1-4 h", "4-12 h", "12 h-1 d",
                   "1-3 d", "3 d+")


def _wait_dict(n: int, q) -> dict:
    """``{"n", "p50_s", "p90_s", "p95_s", "p5_s", "p25_s", "p75_s", "max_s"}`` from a count and
    the :data:`_QUANTILES` values (seconds)."""
    return {"n": int(n), **{k: _num(v) for k, v in zip(_QNAMES, q)}}


def _quantiles(x: pd.Series) -> dict:
    x = x.dropna()
    if x.empty:
        return {"n": 0, **{k: None for k in _QNAMES}}
    return _wait_dict(len(x), x.quantile(_QUANTILES).to_numpy())


def wait_histogram(wait_s, weights=None) -> list[int]:
    """Jobs per :data:`WAIT_BINS` bin of their queue wait (seconds; NaN not counted);
    ``weights``: the jobs each value stands for (the period report's counted waits), else 1."""
    x = np.asarray(wait_s, float)
    w = None if weights is None else np.asarray(weights, float)[~np.isnan(x)]
    x = x[~np.isnan(x)]
    h = np.histogram(np.clip(x, 0, 1e12), bins=np.array(WAIT_BINS[:-1] + (1e12 + 1,)), weights=w)[0]
    return [int(round(v)) for v in h]


def pending_backlog(waiting: pd.DataFrame) -> dict:
    """The pending backlog from the rows that have not started (PENDING jobs and pending array
    records): ``jobs`` (an array record counts its pending tasks), ``gpus_requested`` (ReqTRES
    GPUs, AllocTRES when no ReqTRES, × tasks), ``gpu_hours_requested`` (those GPUs × each job's
    time limit, TimelimitRaw, h: what the queue asks for, at most), and ``without_time_limit``
    (jobs whose limit is UNLIMITED or unknown: not in the GPU-hours). Pending jobs none of
    which has a GPU count (no ReqTRES, AllocTRES or AllocGRES in the input): the GPU figures are
    None (unknown), not 0."""
    if waiting.empty:
        return {"jobs": 0, "gpu_jobs": 0, "gpus_requested": 0.0, "gpu_hours_requested": 0.0,
                "without_time_limit": 0}
    tasks = waiting["pending_tasks"].where(waiting["pending_tasks"] > 0, 1).to_numpy(float)
    req = waiting["req_gpus"] if "req_gpus" in waiting else pd.Series(np.nan, index=waiting.index)
    g = req.fillna(waiting["gpus"])
    if g.isna().all():
        return {"jobs": int(tasks.sum()), "gpu_jobs": None, "gpus_requested": None, "gpu_hours_requested": None,
                "without_time_limit": None}
    g = g.fillna(0.0).to_numpy(float)
    tl = waiting["timelimit_s"].to_numpy(float)
    limited = np.isfinite(tl)
    gpu_jobs = g > 0
    return {"jobs": int(tasks.sum()), "gpu_jobs": int(tasks[gpu_jobs].sum()),
            "gpus_requested": _num((g * tasks).sum()),
            "gpu_hours_requested": _num((g * tasks * np.where(limited, tl, 0.0)).sum() / 3600.0),
            "without_time_limit": int(tasks[gpu_jobs & ~limited].sum())}


def _reconciliation(con, rows_view: str, rows, span: Window, sreport_gpu_hours: float, now=None) -> dict:
    """The ``reconciliation`` section (:func:`slurmkit.report.week_sql.reconcile`): the rows
    clipped to ``span`` (sreport's whole hours; :func:`slurmkit.report.usage.allocations` of
    ``rows``) registered beside the report's rows that ran (``rows_view``) and compared with
    ``sreport_gpu_hours``."""
    span_rows = None
    if span.end > span.start:
        ra = allocations(rows, span.start, span.end, DataQuality(rows_read=len(rows)), now=now)
        span_rows = WS.frame_rows(con, ra, "span_rows", now=now)
    return WS.reconcile(con, span_rows, rows_view, span, sreport_gpu_hours)


#: Why a figure is unknown (``report["unknown"]``), by figure.
UNKNOWN_WHY = {
    "gpu_hours": "no GPU count in the input (no AllocTRES, AllocGRES or ReqTRES field)",
    "cpu_hours": "no NCPUS or AllocCPUS field in the input",
    "energy_kwh": "no energy source (no spool measurement, no Slurm energy, no GPU TDP in the profile)",
    "gpu_utilization": "no GPU utilization in the input (no gres/gpuutil in TRESUsageInAve/TRESUsageInTot, "
                       "no spool or Prometheus figure)",
    "utilization": "no capacity (no --capacity-gpus, no site profile, no live node list)",
}


def unknown_figures(con, rows_view: str, capacity_gpus) -> dict:
    """``{figure: why}`` (:data:`UNKNOWN_WHY`) of the figures whose inputs the allocations that
    ran (``rows_view``) lack altogether (:func:`slurmkit.report.week_sql.unknown_figures`)."""
    return {k: UNKNOWN_WHY[why] for k, why in WS.unknown_figures(con, rows_view, capacity_gpus).items()}


def physical_totals(runs: pd.DataFrame, gpu_known: bool = True) -> dict:
    """``{"physical_gpu_hours", "allocation_rows_physical_unknown"}`` of the allocations that
    ran: their ``physical_gpu_hours`` summed (MIG instances weighed by their share of the GPU,
    :func:`slurmkit.slurm.tres.physical_gpus`; beside ``gpu_hours``, which counts an instance as
    one GPU, as sreport does) and the rows with a GPU count but no physical one (a MIG share not
    known, a store day written before the frame had it): their physical GPU-hours are not in
    the sum. ``physical_gpu_hours`` is None when the GPU-hours are unknown, or when rows with
    GPUs have none known."""
    phys = runs["physical_gpu_hours"] if "physical_gpu_hours" in runs else pd.Series(np.nan, index=runs.index)
    missing = runs["gpus"].notna() & phys.isna()
    gpu_rows = runs["gpus"].fillna(0) > 0
    known = gpu_known and not (gpu_rows.any() and phys[gpu_rows].isna().all())
    return {"physical_gpu_hours": _num(float(phys.sum())) if known else None,
            "allocation_rows_physical_unknown": int(missing.sum())}


def _totals(runs: pd.DataFrame, queue: dict, backlog: int, pending_jobs: int, spool_unmatched: int,
            assumptions: E.Assumptions, unknown: dict | None = None) -> tuple[dict, dict]:
    """``(totals, jobs per energy source)`` over the allocations that ran (``runs``): jobs,
    GPU-/CPU-hours, energy by source, waste, the pending backlog (``queue``: the
    :func:`pending_backlog` dict) and the costs of :func:`slurmkit.report.energy.costs`.
    A figure in ``unknown`` (:func:`unknown_figures`) and those derived from it are None."""
    unknown = unknown or {}
    keys = runs["job_code"]
    gpu_h, cpu_h = float(runs["gpu_hours"].sum()), float(runs["cpu_hours"].sum())
    gpu_known = "gpu_hours" not in unknown
    kwh_src = {s: float(runs.loc[runs["energy_source"] == s, "energy_kwh"].sum()) for s in E.REPORTED_SOURCES}
    kwh = sum(kwh_src.values())
    jobs_by_src = {s: int(keys[runs["energy_source"] == s].nunique())
                   for s in (*E.REPORTED_SOURCES, "none")}
    # no job has any source (no spool record, no trusted ConsumedEnergyRaw, no TDP): the 0 kWh
    # is not a measurement, so the figures built on it are unknown
    energy_known = bool((runs["energy_source"] != "none").any())
    money = E.costs(kwh if energy_known else None, gpu_h if gpu_known else None, assumptions)
    with_energy = runs["energy_source"] != "none"
    coverage = E.energy_coverage(int(keys.nunique()), jobs_by_src["none"],
                                 _num(cpu_h) if "cpu_hours" not in unknown else None,
                                 float(runs.loc[with_energy, "cpu_hours"].sum()), gpu_h if gpu_known else None,
                                 float(runs.loc[with_energy, "gpu_hours"].sum()), energy_known)
    g = _num if gpu_known else (lambda x: None)
    totals = {
        "jobs": int(keys.nunique()), "gpu_jobs": int(keys[runs["gpus"] > 0].nunique()) if gpu_known else None,
        "allocation_rows": int(len(runs)), "requeued_attempts": int(runs["requeued_attempt"].sum()),
        "gpu_hours": g(gpu_h), "cpu_hours": _num(cpu_h) if "cpu_hours" not in unknown else None,
        "energy_kwh": _num(kwh) if energy_known else None,
        "energy_kwh_by_source": {k: (_num(v) if energy_known else None) for k, v in kwh_src.items()},
        "energy_known": energy_known, "energy_jobs_by_source": dict(jobs_by_src), "energy_coverage": coverage,
        "gpu_hours_without_energy": g(runs.loc[runs["energy_source"] == "none", "gpu_hours"].sum()),
        "gpu_hours_from_request": g(runs.loc[runs["gpu_source"] == "ReqTRES (requested)", "gpu_hours"].sum())
        if "gpu_source" in runs else None,
        "allocation_rows_gpus_unknown": int(runs["gpus"].isna().sum()),
        **physical_totals(runs, gpu_known),
        "spool_records_unmatched": spool_unmatched,
        "wasted_gpu_hours": g(runs["waste_gpu_hours"].sum()),
        "pending_array_tasks": backlog, "pending_jobs": pending_jobs,
        "pending_gpus_requested": queue["gpus_requested"],
        "pending_gpu_hours_requested": queue["gpu_hours_requested"],
        "pending_without_time_limit": queue["without_time_limit"],
        "provisional_jobs": int(keys[runs["provisional"]].nunique()),
        "provisional_gpu_hours": g(runs.loc[runs["provisional"], "gpu_hours"].sum()),
        **{k: (_num(v) if isinstance(v, float) else v) for k, v in money.items()},
    }
    return totals, jobs_by_src


def outcomes(runs: pd.DataFrame) -> list[dict]:
    """Each job once, on the line of its last attempt in the window (by final state); earlier
    attempts of requeued jobs on their own line (:data:`REQUEUED_LINE`), counted as attempts:
    ``[{"state", "jobs", "attempts", "rows", "gpu_hours", "wasted_gpu_hours"}]`` by state name,
    the requeued line last (with ``states``: its attempts per final state)."""
    out = []
    code = runs["job_code"].to_numpy()
    if pd.Series(code).duplicated().any():
        last = ~runs.sort_values(["job_code", "start"], na_position="last", kind="stable")[
            "job_code"].duplicated(keep="last")
        last = last.reindex(runs.index).to_numpy(bool)
    else:
        last = np.ones(len(runs), bool)
    scode, states = pd.factorize(runs["state"], sort=False)
    names = [str(x) for x in states] + [REQUEUED_LINE]
    requeued = runs["requeued_attempt"].to_numpy(bool)
    line = np.where(requeued, len(names) - 1, scode)
    nlines = len(names)
    attempts = np.bincount(line, minlength=nlines)
    # pandas' sums (compensated, as the totals'), not bincount's
    sums = runs[["gpu_hours", "waste_gpu_hours"]].groupby(line).sum(min_count=1).reindex(range(nlines))
    gh, wh = sums["gpu_hours"].to_numpy(), sums["waste_gpu_hours"].to_numpy()
    jobs = _distinct_per_group(np.where(last, line, -1), code, nlines)
    for i in sorted(np.flatnonzero(attempts), key=lambda i: names[i]):
        o = {"state": names[i], "jobs": int(jobs[i]), "attempts": int(attempts[i]), "rows": int(attempts[i]),
             "gpu_hours": _num(gh[i]), "wasted_gpu_hours": _num(wh[i])}
        if names[i] == REQUEUED_LINE:
            o["states"] = {str(k): int(v) for k, v in
                           runs.loc[requeued, "state"].astype(str).value_counts().sort_index().items()}
        out.append(o)
    out.sort(key=lambda o: o["state"] == REQUEUED_LINE)
    return out


#: The outcomes line of jobs that ended before they started (cancelled while pending or held).
NEVER_STARTED_LINE = "cancelled before start"


def cancelled_before_start(never: pd.DataFrame, runs: pd.DataFrame) -> list[dict]:
    """The outcomes line of the jobs that ended without starting (``never``: rows neither
    pending nor started, :func:`slurmkit.report.usage.started`), those with no attempt that
    ran (a requeued job whose last attempt was cancelled pending counts as the job that ran):
    ``[{"state": "cancelled before start", "jobs", "attempts", "rows", "gpu_hours": 0,
    "wasted_gpu_hours": 0, "ran": False, "states"}]``, or ``[]``. Not in the jobs total, the
    GPU-hours or the queue wait."""
    sel = never[~never["job_code"].isin(runs["job_code"])]
    if sel.empty:
        return []
    return [{"state": NEVER_STARTED_LINE, "jobs": int(sel["job_code"].nunique()), "attempts": int(len(sel)),
             "rows": int(len(sel)), "gpu_hours": 0.0, "wasted_gpu_hours": 0.0, "ran": False,
             "states": {str(k): int(v) for k, v in sel["state"].astype(str).value_counts().sort_index().items()}}]


def queue_wait(runs: pd.DataFrame, queue: dict) -> dict:
    """The ``queue_wait`` section: quantiles and histograms of ``wait_s`` over all jobs
    (``all``) and per partition x GPU bucket (``by_partition_gpus``), the start it is measured
    from (``from``: Eligible, else Submit) and the pending ``backlog`` (``queue``)."""
    waits = []
    w = runs.loc[runs["wait_s"].notna(), ["partition", "gpu_bucket", "wait_s"]]
    if len(w):
        by = w.groupby(["partition", "gpu_bucket"], sort=True, observed=True)["wait_s"]
        q = by.quantile(_QUANTILES).unstack()
        for (part, bucket), grp in by:
            waits.append({"partition": part, "gpu_bucket": bucket,
                          **_wait_dict(len(grp), q.loc[(part, bucket), _QUANTILES].to_numpy()),
                          "histogram": wait_histogram(grp.to_numpy())})
    wait_from = "Eligible" if runs["eligible"].notna().any() else "Submit"
    return {"all": _quantiles(w["wait_s"]), "by_partition_gpus": waits, "from": wait_from,
            "bins": list(WAIT_BIN_LABELS), "histogram": wait_histogram(w["wait_s"].to_numpy()),
            "backlog": queue}


def efficiency(runs: pd.DataFrame, unknown: dict | None = None) -> dict:
    """The ``efficiency`` section: CPU efficiency (CPU time / core-seconds of finished jobs),
    median memory efficiency, GPU-hour weighted GPU utilization (%), GPU-hours near 0 %, per
    user (``by_user``, worst first) and the jobs that held GPUs idle (``idle_jobs``, under
    :data:`IDLE_UTIL_PCT`). Without any GPU utilization figure (``gpu_utilization`` in
    ``unknown``) the GPU-hours near 0 % and the idle jobs are None (unknown), not 0 / none."""
    util_known = "gpu_utilization" not in (unknown or {})
    # no GPU count in the input: each user's GPU-hours are unknown (None), not 0
    gpu_known = "gpu_hours" not in (unknown or {})
    done = runs.loc[runs["end"].notna() & (runs["run_s"] > 0), ["user", "run_s", "ncpus", "cpu_eff", "mem_eff"]]
    cpu_den = (done["run_s"] * done["ncpus"]).where(done["cpu_eff"].notna()).sum()
    cpu_num = (done["cpu_eff"] * done["run_s"] * done["ncpus"]).sum()
    gpu = (runs["gpus"] > 0).to_numpy()
    gu_g = runs["step_gpu_util_pct"].fillna(runs["spool_gpu_util_pct"]).to_numpy(float)[gpu]
    gh_g = runs["gpu_hours"].to_numpy(float)[gpu]
    idle = gh_g[gu_g < 1.0].sum()
    known = gh_g[~np.isnan(gu_g)].sum()
    eff = {
        "cpu_efficiency": _num(cpu_num / cpu_den) if cpu_den > 0 else None,
        "cpu_hours_share": _num(float(runs.loc[done.index[done["cpu_eff"].notna()], "cpu_hours"].sum())
                                / float(runs["cpu_hours"].sum())) if runs["cpu_hours"].sum() > 0 else None,
        "memory_efficiency_median": _num(done["mem_eff"].median()) if done["mem_eff"].notna().any() else None,
        "allocations_over_memory": int((done["mem_eff"] > 1.0).sum()),
        "gpu_util_pct_weighted": _num(np.nansum(gu_g * gh_g) / known) if known > 0 else None,
        "gpu_hours_with_util": _num(known) if util_known else None,
        "gpu_hours_near_zero_util": _num(idle) if util_known else None,
        "by_user": [],
    }
    den = (done["run_s"] * done["ncpus"]).where(done["cpu_eff"].notna())
    per_user = done.assign(_num=done["cpu_eff"] * den, _den=den).groupby("user", sort=True).agg(
        num=("_num", "sum"), den=("_den", "sum"), mem=("mem_eff", "median"))
    # per user: GPU utilization (GPU-hour weighted, where known) and GPU-hours at ~0 %
    g = runs.loc[gpu, ["user", "job_id", "gpus", "gpu_hours"]].assign(_u=gu_g)
    g["_known"] = g["gpu_hours"].where(g["_u"].notna(), 0.0)
    g["_uw"] = (g["_u"] * g["gpu_hours"]).fillna(0.0)
    g["_idle"] = g["gpu_hours"].where(g["_u"] < 1.0, 0.0)
    gu = g.groupby("user", sort=True).agg(gh=("gpu_hours", "sum"), known=("_known", "sum"),
                                          uw=("_uw", "sum"), idle=("_idle", "sum"))
    for user in sorted(set(per_user.index) | set(gu.index), key=str):
        r = per_user.loc[user] if user in per_user.index else None
        q = gu.loc[user] if user in gu.index else None
        eff["by_user"].append({
            "user": user,
            "cpu_efficiency": _num(r["num"] / r["den"]) if r is not None and r["den"] > 0 else None,
            "memory_efficiency_median": _num(r["mem"]) if r is not None else None,
            "gpu_hours": (_num(q["gh"]) if q is not None else 0.0) if gpu_known else None,
            "gpu_util_pct": _num(q["uw"] / q["known"]) if q is not None and q["known"] > 0 else None,
            "gpu_hours_near_zero_util": (_num(q["idle"]) if q is not None else 0.0) if util_known else None})
    # worst offenders first: GPU-hours held at ~0 %, then the lowest GPU utilization, then the
    # lowest CPU efficiency
    eff["by_user"].sort(key=lambda u: (-(u["gpu_hours_near_zero_util"] or 0.0),
                                       u["gpu_util_pct"] if u["gpu_util_pct"] is not None else 1e9,
                                       u["cpu_efficiency"] if u["cpu_efficiency"] is not None else 2.0,
                                       str(u["user"])))
    idle_jobs = g[g["_u"] < IDLE_UTIL_PCT].sort_values(["gpu_hours", "job_id"], ascending=[False, True]).head(IDLE_JOBS)
    eff["idle_jobs"] = None if not util_known else [{"job_id": str(j), "user": str(u), "gpus": _num(n), "gpu_hours": _num(h),
                         "gpu_util_pct": _num(x)}
                        for j, u, n, h, x in zip(idle_jobs["job_id"], idle_jobs["user"], idle_jobs["gpus"],
                                                 idle_jobs["gpu_hours"], idle_jobs["_u"])]
    return eff


def utilization(gpu_h: float | None, capacity_gpus: float | None, down_gpu_hours: float | None,
                window: Window, upto, capacity_from=None) -> dict:
    """The ``utilization`` section: GPU-hours / available GPU-hours, where available =
    ``capacity_gpus`` x the hours of ``capacity_period`` - ``down_gpu_hours``; None without a
    capacity. ``capacity_period`` (``{"start", "end", "why"}``, ISO UTC): from the window's start,
    or from ``capacity_from`` when it lies inside the window (the cluster's registration,
    ``sacctmgr show event`` "Cluster Registered TRES": it did not exist before), up to ``upto``
    (the capture time or now: no future hour)."""
    begin = utc(window.start)
    why = "the window's start"
    if capacity_from is not None and begin < utc(capacity_from) < utc(window.end):
        begin, why = utc(capacity_from), "the cluster's registration (sacctmgr show event: Cluster Registered TRES)"
    end = max(utc(upto), begin)
    util = {"capacity_gpus": _num(capacity_gpus), "capacity_gpu_hours": None,
            "down_gpu_hours": _num(down_gpu_hours), "available_gpu_hours": None, "utilization": None,
            "capacity_period": {"start": iso_z(begin), "end": iso_z(end), "why": f"from {why} to the capture time or now"}}
    if capacity_gpus:
        # capacity only up to the capture / now: an hour in the future holds no use yet
        cap = capacity_gpus * max((end - begin).total_seconds(), 0.0) / 3600.0
        avail = cap - (down_gpu_hours or 0.0)
        util.update(capacity_gpu_hours=_num(cap), available_gpu_hours=_num(avail),
                    utilization=_num(gpu_h / avail) if avail > 0 and gpu_h is not None else None)
    return util


def utilization_of_reported(ours: dict | None, window: dict | None) -> dict | None:
    """``utilization.of_reported``: sreport's own utilization, Allocated / Reported GPU-hours of
    the breakdown computed here (``ours``: :func:`slurmkit.report.breakdown.breakdown`'s
    ``tres``, over ``window``, the whole hours it covers): ``{"window", "allocated_gpu_hours",
    "reported_gpu_hours", "utilization"}`` (None without a Reported figure); None without the
    breakdown (no node TRES)."""
    if not ours:
        return None
    g = ours.get("gres/gpu") or {}
    al, rep = g.get("allocated"), g.get("reported")
    return {"window": window, "allocated_gpu_hours": _num(al), "reported_gpu_hours": _num(rep),
            "utilization": _num(al / rep) if al is not None and rep else None}


def deltas(totals: dict, previous: dict | None) -> dict | None:
    """Week-over-week changes of the headline totals against ``previous`` (the previous
    window's ``totals``): ``{key: {"previous", "change", "relative"}}``; None without one."""
    if not previous:
        return None
    out = {}
    for k in ("jobs", "gpu_hours", "cpu_hours", "energy_kwh", "wasted_gpu_hours"):
        cur, prev = totals.get(k), previous.get(k)
        if cur is not None and prev is not None:
            out[k] = {"previous": prev, "change": _num(cur - prev),
                      "relative": _num((cur - prev) / prev) if prev else None}
    return out


#: What each energy source is, in the order a job's figure is taken from them.
ENERGY_SOURCE_ORDER = ["measured (hook spool, NVML energy counters)",
                       "prometheus (the hooks' NVML energy counters read through Prometheus)",
                       "slurm (ConsumedEnergyRaw, non-zero and trusted)",
                       "slurm_tres (energy= of AllocTRES, J, non-zero and trusted: a capture without ConsumedEnergyRaw)",
                       "slurm_usage (the largest energy= of the job's steps' TRESUsageInTot, J, non-zero and "
                       "trusted: a capture with neither)",
                       "modelled (GPUs x hours x GPU TDP)"]


def build_report(rows, dq: DataQuality, window: Window, assumptions: E.Assumptions,
                 spool: pd.DataFrame | None = None, capacity_gpus: float | None = None,
                 down_gpu_hours: float | None = None, sreport_gpu_hours: float | None = None,
                 previous: dict | None = None, now=None, source: str = "",
                 cluster: str = "", recon_window: Window | None = None,
                 horizon=None, downtime: dict | None = None, capacity_source: str | None = None,
                 breakdown_inputs: dict | None = None, running_elapsed: bool = False,
                 gpu_nodes: dict | None = None) -> tuple[dict, pd.DataFrame]:
    """``(report dict, per-allocation frame)``. See the module docstring.

    ``capacity_gpus``: GPUs in the cluster (profile or scontrol); ``down_gpu_hours``: from node
    events; ``sreport_gpu_hours``: sreport's figure over the window's whole hours (after a
    rollup); ``previous``: the previous window's ``totals`` for week-over-week deltas;
    ``downtime``: the node timeline of :func:`slurmkit.report.capacity.downtime` (live
    ``sacctmgr show event``, or a captured events file), reported as is;
    ``horizon``: hours after it are in the future (no use, no capacity yet; default the current
    time): the GPUs-in-use curve and the capacity stop there. ``capacity_source``: where
    ``capacity_gpus`` came from (``utilization.capacity_source``; "unknown" when None).
    ``breakdown_inputs``: the inputs of sreport's breakdown and the account tree
    (:func:`breakdown_section`), or None. ``running_elapsed``: a running job runs sacct's
    Elapsed (captures: :func:`slurmkit.report.usage.allocations`). ``gpu_nodes``: node -> GPUs
    (the site profile's): a job on a GPU node whose AllocTRES has no gres/gpu has unknown GPUs
    (:func:`slurmkit.report.usage.untracked_gpus`); None: not known."""
    a = allocations(rows, window.start, window.end, dq, now=now, source=source, running_elapsed=running_elapsed,
                    gpu_nodes=gpu_nodes)
    if breakdown_inputs:
        from slurmkit.report import breakdown as BD

        facts = BD.job_facts(a)
        if breakdown_inputs.get("assocs"):     # (a tree of several clusters: the jobs' one's)
            breakdown_inputs = {**breakdown_inputs, "assocs": BD.cluster_tree(
                breakdown_inputs["assocs"], facts["clusters"] | ({cluster} if cluster else set()))}
        BD.refuse_foreign(facts, breakdown_inputs)
    a = E.attach_energy(a, assumptions, spool, dq)
    spool_unmatched = int(a.attrs.get("spool_unmatched", 0))
    # an unknown GPU count (NaN) stays unknown in what is derived from it
    unknown_g = a["gpu_hours"].isna()
    a["waste_gpu_hours"] = a["gpu_hours"].where(a["wasted"] | unknown_g, 0.0)
    a["provisional_gpu_hours"] = a["gpu_hours"].where(a["provisional"] | unknown_g, 0.0)
    dq.check()
    waiting = (a["pending_tasks"] > 0) | ((a["state"] == "PENDING") & a["start"].isna())
    # jobs cancelled (or ended) before they started: neither pending nor run
    never = ~waiting & ~a["started"]
    runs = a[~waiting & ~never] if (waiting | never).any() else a
    queue = pending_backlog(a[waiting])
    con = duckdb.connect()
    rows_view = WS.frame_rows(con, runs, "runs", now=now)
    unknown = unknown_figures(con, rows_view, capacity_gpus)
    totals, jobs_by_src = _totals(runs, queue, int(a["pending_tasks"].sum()),
                                  int(((a["pending_tasks"] == 0) & waiting).sum()), spool_unmatched, assumptions,
                                  unknown)
    horizon = utc(horizon) if horizon is not None else pd.Timestamp.now(tz="UTC")
    upto = min(utc(window.end), max(horizon, utc(window.start)))
    recon = None
    if sreport_gpu_hours is not None:
        recon = _reconciliation(con, rows_view, rows, recon_window or window, float(sreport_gpu_hours), now=now)
    from slurmkit.report.breakdown import registration

    reg = registration((breakdown_inputs or {}).get("events"))
    util = {**utilization(totals["gpu_hours"], capacity_gpus, down_gpu_hours, window, upto, capacity_from=reg),
            "capacity_source": capacity_source or "unknown"}
    util["breakdown"] = breakdown_section(a, breakdown_inputs, capacity_source, util, totals["gpu_hours"], upto)
    util["of_reported"] = utilization_of_reported((util["breakdown"] or {}).get("ours"),
                                                  (util["breakdown"] or {}).get("window"))
    report = {
        "window": window.as_dict(),
        "as_of": iso_z(utc(now) if now is not None else pd.Timestamp.now(tz="UTC")),
        "cluster": cluster or ",".join(sorted(set(map(str, runs["cluster"].unique())) - {""})),
        "totals": totals,
        "by_user": _group(runs, "user", "user"),
        "by_account": _group(runs, "account", "account"),
        "by_partition": _group(runs, "partition", "partition"),
        "by_qos": _group(runs, "qos", "qos"),
        "by_gpu_type": _group(runs[["gpu_hours", "cpu_hours", "energy_kwh", "waste_gpu_hours", "provisional_gpu_hours",
                                    "physical_gpu_hours", "job_code", "energy_source"]].assign(gpu_type=WS.gpu_type_labels(con, rows_view)),
                              "gpu_type", "gpu_type",
                              (runs["gpus"] > 0) | runs["gpus"].isna()),
        "energy_by_policy": WS.energy_by_policy(con, rows_view),
        "outcomes": outcomes(runs) + cancelled_before_start(a[never], runs),
        "queue_wait": queue_wait(runs, queue),
        "efficiency": efficiency(runs, unknown),
        "job_sizes": job_sizes(runs),
        "hourly": WS.gpus_in_use(con, rows_view, window, upto, known="gpu_hours" not in unknown),
        "utilization": util,
        "accounts": accounts_section(a, breakdown_inputs),
        "downtime": downtime,
        "reconciliation": recon,
        "energy_sources": {"jobs": jobs_by_src, "order": list(ENERGY_SOURCE_ORDER)},
        "assumptions": assumptions.as_dict(),
        "deltas": deltas(totals, previous),
        "unknown": unknown,
        "data_quality": _data_quality(dq, unknown, runs, source),
    }
    return report, a


def breakdown_section(allocs: pd.DataFrame, inputs: dict | None, capacity_source: str | None,
                      util: dict | None = None, gpu_hours: float | None = None, upto=None) -> dict | None:
    """``utilization.breakdown``: sreport's breakdown computed here (:func:`slurmkit.report.
    breakdown.breakdown`) beside sreport's own, over ``inputs["window"]`` (the whole hours sreport
    covers): ``{"window", "capacity_source", "ours" ({TRES: figures, hours}), "sreport" (same
    shape, or None when not reached), "differences" (:func:`~slurmkit.report.breakdown.compare`),
    "notes" (the differences in words, and the utilization's own denominator, ``util``: its
    capacity, down and available GPU-hours, beside sreport's GPU figures)}``; None without
    ``inputs``. ``inputs``: ``window``
    (a Window), ``events`` (node_events with cluster rows, or None), ``reservations``,
    ``node_tres``, ``sreport`` (cluster_utilization's result or None)."""
    from slurmkit.report import breakdown as BD

    if not inputs or inputs.get("node_tres") is None:
        return None
    w = inputs["window"]
    # ongoing events and running jobs count to the end of the hours, as slurmdbd's rollup counts them
    bd = BD.breakdown(w.start, w.end, allocs, inputs.get("events"), inputs.get("reservations"), inputs["node_tres"],
                      now=w.end)
    sre = inputs.get("sreport")
    diffs = BD.compare(bd["tres"], sre) if sre is not None else []
    notes = BD.explain(bd, sre, diffs, bd["window"], capacity_source)
    if util is not None:
        g = (sre or {}).get("gres/gpu") or {}
        f = lambda x: "unknown" if x is None else f"{x:.4g}"  # noqa: E731
        notes.append(
            f"Utilization's own denominator, {util['capacity_period']['start']} to {util['capacity_period']['end']}: "
            f"capacity {f(util.get('capacity_gpu_hours'))} GPU-h ({capacity_source or 'unknown'}) − down "
            f"{f(util.get('down_gpu_hours'))} = available {f(util.get('available_gpu_hours'))}, of which jobs used "
            f"{f(gpu_hours)}"
            + (f"; sreport over its whole hours: Reported {f(g.get('reported'))}, Allocated {f(g.get('allocated'))}, "
               f"Down {f(g.get('down'))}, Idle {f(g.get('idle'))} GPU-h (they differ by the hours sreport has not "
               "rolled up, and by capacity where the registered TRES differ from the capacity source)" if g else "")
            + ".")
    return {"window": bd["window"], "capacity_source": bd["capacity_source"], "ours": bd["tres"], "registered": bd["registered"],
            "sreport": sre, "differences": diffs, "notes": notes}


def accounts_section(allocs: pd.DataFrame, inputs: dict | None) -> dict | None:
    """``accounts``: the account hierarchy (``inputs["assocs"]``, sacctmgr's assoc tree) with
    each user's GPU-hours and CPU-hours over ``inputs["window"]`` (:func:`slurmkit.report.
    breakdown.account_tree`, with the reservations' idle shares of
    :func:`~slurmkit.report.breakdown.reservation_shares`), its rows depth first, and the comparison with sreport's
    AccountUtilizationByUser (``inputs["account_users"]``, or None when not reached):
    ``{"window", "tree", "rows", "differences", "note"}``; None without an assoc tree."""
    from slurmkit.report import breakdown as BD

    if not inputs or not inputs.get("assocs"):
        return None
    w = inputs["window"]
    shares = BD.reservation_shares(inputs.get("reservations") or [], allocs, inputs.get("events"),
                                   inputs.get("node_tres") or {}, w.start, w.end, now=w.end)
    tree = BD.account_tree(inputs["assocs"], allocs, w.start, w.end, now=w.end, shares=shares)
    theirs = inputs.get("account_users")
    return {"window": w.as_dict(), "tree": tree, "rows": BD.tree_rows(tree),
            "differences": BD.compare_accounts(tree, theirs) if theirs is not None else [],
            "note": ("jobs' usage, plus each reservation's idle time split evenly among the accounts and users "
                     "allowed in it, as sreport counts it (man sreport)"
                     + ("" if theirs is not None else "; sreport not reached"))}


def _data_quality(dq: DataQuality, unknown: dict, runs: pd.DataFrame, source: str) -> dict:
    """The ``data_quality`` section: :meth:`DataQuality.as_dict` with ``unknown`` (the figures
    the input cannot give, and why) and ``notes``: each unknown figure and the allocation rows
    whose GPU count is unknown or only requested (ReqTRES), in the shape of a listed problem
    (data_quality.csv lists them first)."""
    d = dq.as_dict()
    d["unknown"] = dict(unknown)
    head = [{"source": source or "input", "line": None, "reason": f"unknown: {k}", "detail": why,
             "counted": True} for k, why in unknown.items()]
    if "gpu_hours" not in unknown:
        n = int(runs["gpus"].isna().sum())
        if n:
            head.append({"source": source or "input", "line": None, "reason": "unknown: GPU count",
                         "detail": f"{n} allocation row(s) from an input without AllocTRES, AllocGRES or ReqTRES: "
                                   "not in the GPU-hours", "counted": True})
        if "gpu_source" in runs:
            req = runs["gpu_source"] == "ReqTRES (requested)"
            if req.any():
                head.append({"source": source or "input", "line": None, "reason": "GPUs requested, not allocated",
                             "detail": f"{int(req.sum())} allocation row(s): GPU count from ReqTRES (the input has "
                                       "no AllocTRES or AllocGRES)", "counted": True})
    d["notes"] = head
    return d
