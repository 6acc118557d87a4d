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

import numpy as np
import pandas as pd

from slurmkit.accounting.quality import DataQuality
from slurmkit.report import energy as E
from slurmkit.report.jobs import has_repeats
from slurmkit.report.usage import allocations, end_or_now, epoch_s, hourly_gpus, utc
from slurmkit.report.definitions import (  # noqa: F401  (the report's names, kept importable from here)
    ENERGY_SOURCE_ORDER, GPU_TYPE_UNKNOWN, GPU_UNTYPED, IDLE_JOBS, IDLE_UTIL_PCT, NEVER_STARTED_LINE, REQUEUED_LINE,
    UNKNOWN_WHY, WAIT_BIN_LABELS, WAIT_BINS, utilization, utilization_of_reported, wait_histogram)
from slurmkit.report.window import Window, iso_z

#: Windows longer than this many days get daily, not hourly, GPUs-in-use buckets.
DAILY_AFTER_DAYS = 31

#: How far apart per-job GPU-hours and sreport may be before the reconciliation is flagged.
RECONCILE_TOLERANCE = 0.01


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


def gpu_type_labels(runs: pd.DataFrame) -> pd.Series:
    """The ``by_gpu_type`` group of each allocation row: its ``gpu_type`` (from AllocTRES /
    AllocGRES / ReqTRES), :data:`GPU_UNTYPED` for GPUs without a type, :data:`GPU_TYPE_UNKNOWN`
    where the GPU count is unknown (NaN: no GPU field in the input)."""
    t = runs["gpu_type"]
    t = t if isinstance(t.dtype, pd.CategoricalDtype) else t.astype("category")
    # per category, not per row (a million rows hold a handful of types)
    names = np.array([str(c) or GPU_UNTYPED for c in t.cat.categories] + [GPU_UNTYPED, GPU_TYPE_UNKNOWN], object)
    codes = t.cat.codes.to_numpy(np.int64).copy()
    codes[codes < 0] = len(names) - 2
    codes[runs["gpus"].isna().to_numpy()] = len(names) - 1
    return pd.Series(names[codes], index=runs.index)


#: The energy sources that measure a job's GPUs (the spool's NVML counters, or the same read
#: through Prometheus): the only ones a clock policy's effect shows in.
MEASURED_SOURCES = ("measured", "prometheus")


def energy_by_policy(runs: pd.DataFrame) -> list[dict]:
    """Energy per GPU-hour by the clock policy the GPU jobs ran under: one row per
    ``clock_policy`` label (:func:`slurmkit.report.energy.attach_energy`: the spool records'
    policy; ``none recorded`` for jobs without one, which are counted, not dropped), most
    GPU-hours first: ``{"policy", "jobs"`` (distinct jobs), ``"gpu_hours"`` (in the window),
    ``"measured_gpu_hours"`` (of those, the allocations with measured energy),
    ``"energy_kwh"`` (their measured kWh in the window; None when none is measured),
    ``"kwh_per_gpu_hour": energy_kwh / measured_gpu_hours}`` (None without measured GPU-hours).
    Modelled and Slurm energy are left out: a TDP model shows no policy's effect."""
    sel = runs.loc[runs["gpus"] > 0, ["clock_policy", "gpu_hours", "energy_kwh", "energy_source", "job_code"]]
    if sel.empty:
        return []
    measured = sel["energy_source"].isin(MEASURED_SOURCES).to_numpy()
    codes, uniq = pd.factorize(sel["clock_policy"].astype(str), sort=False)
    frame = pd.DataFrame({"gh": sel["gpu_hours"].to_numpy(float),
                          "mgh": np.where(measured, sel["gpu_hours"].to_numpy(float), 0.0),
                          "kwh": np.where(measured, sel["energy_kwh"].to_numpy(float), np.nan)})
    t = frame[["gh", "mgh"]].groupby(codes).sum()
    t["kwh"] = frame["kwh"].groupby(codes).sum(min_count=1)
    t["jobs"] = _distinct_per_group(codes, sel["job_code"].to_numpy(), len(uniq))[t.index]
    t["policy"] = np.asarray(uniq, dtype=object)[t.index]
    t = t.sort_values(["gh", "policy"], ascending=[False, True])
    return [{"policy": str(name), "jobs": int(j), "gpu_hours": _num(g), "measured_gpu_hours": _num(m),
             "energy_kwh": _num(k), "kwh_per_gpu_hour": _num(k / m) if m > 0 and not math.isnan(k) else None}
            for name, j, g, m, k in zip(t["policy"], t["jobs"], t["gh"], t["mgh"], t["kwh"])]


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


def most_at_once(allocs: pd.DataFrame, start, end, now=None) -> float:
    """The most GPUs allocated at one instant in ``[start, end)``: a sweep over the jobs'
    Start (+GPUs) and End (-GPUs, running jobs as :func:`~slurmkit.report.usage.end_or_now`
    says), clipped to the window; 0.0 when no GPU job ran in it."""
    start, end = utc(start), utc(end)
    if end <= start:
        return 0.0
    sel = (allocs["start"].notna() & (allocs["gpus"] > 0)).to_numpy()
    if not sel.any():
        return 0.0
    now = utc(now) if now is not None else pd.Timestamp.now(tz="UTC")
    s0, s1 = start.timestamp(), end.timestamp()
    st = np.clip(epoch_s(allocs["start"])[sel], s0, s1)
    en = np.clip(epoch_s(end_or_now(allocs, now))[sel], s0, s1)
    g = allocs["gpus"].to_numpy(float)[sel]
    live = en > st
    if not live.any():
        return 0.0
    t = np.concatenate([st[live], en[live]])
    w = np.concatenate([g[live], -g[live]])
    key = _sweep_keys(t, w)
    if key is not None:   # whole seconds and whole GPUs: the sums are exact in any order
        return float(np.cumsum((np.sort(key) & 0xFFFF) - (1 << 15)).max())
    order = np.lexsort((w, t))   # at one instant, ends before starts
    return float(np.cumsum(w[order]).max())


def _sweep_keys(t: np.ndarray, w: np.ndarray) -> np.ndarray | None:
    """One int64 per event of :func:`most_at_once` (``t``: epoch seconds, ``w``: +GPUs at a
    start, -GPUs at an end) that sorts as its sweep does, by time with the ends of an instant
    first, and holds ``w`` in its low 16 bits: a sort of integers instead of a lexsort of two
    float columns. None unless every time is a whole second in [0, 2**40) and every count a
    whole number under 2**15 (then any order of one instant's ends, or of its starts, gives
    the same exact running sums, so the same maximum)."""
    if not len(t) or not (np.isfinite(t).all() and t.min() >= 0 and t.max() < 2.0**40 and (t == np.floor(t)).all()):
        return None
    if not ((np.abs(w) < 2**15).all() and (w == np.floor(w)).all()):
        return None
    return (((t.astype(np.int64) << 1) | (w > 0)) << 16) | (w.astype(np.int64) + (1 << 15))


def reconcile(rows, runs: pd.DataFrame, span: Window, sreport_gpu_hours: float,
              now=None, limit: int = 20) -> dict:
    """Per-job GPU-hours clipped to exactly ``span`` (the whole hours sreport covers: up to its
    last rollup, never the current hour) vs ``sreport_gpu_hours`` over the same span.

    ``status``: ``reconciled`` (within :data:`RECONCILE_TOLERANCE`), ``flagged`` (further apart;
    ``jobs_to_check`` names the jobs with GPU time in the span, those cut by its edges or still
    running first, then by GPU-hours) or ``not_reconciled`` (the span is empty or holds no GPU
    time on either side; ``note`` says why, e.g. the jobs ran after sreport's last hour).
    ``runs``: the report's allocation frame (for the jobs after the span)."""
    out = {"window": span.as_dict(), "jobs_gpu_hours": None, "sreport_gpu_hours": _num(sreport_gpu_hours),
           "difference": None, "relative": None, "flagged": False, "status": "not_reconciled",
           "note": "", "jobs_to_check": []}
    upto = f"{span.end:%Y-%m-%d %H:00} UTC"
    if span.end > span.start:
        ra = allocations(rows, span.start, span.end, DataQuality(rows_read=len(rows)), now=now)
        ra = ra[(ra["pending_tasks"] == 0) & ~((ra["state"] == "PENDING") & ra["start"].isna())
                & (ra["gpus"] > 0)]
        rec_h = float(ra["gpu_hours"].sum())
    else:
        ra, rec_h = None, 0.0
    out["jobs_gpu_hours"] = _num(rec_h)
    if rec_h <= 0 and sreport_gpu_hours <= 0:
        later = runs[(runs["gpus"] > 0) & (runs["gpu_hours"] > 0)]
        if span.end <= span.start:
            out["note"] = "sreport covers no whole hour of the window yet"
        elif len(later):
            out["note"] = f"sreport covers up to {upto}, the jobs ran after"
        else:
            out["note"] = "no GPU job time in the window"
        return out
    diff = rec_h - sreport_gpu_hours
    rel = abs(diff) / sreport_gpu_hours if sreport_gpu_hours > 0 else None
    flagged = rel is None or rel > RECONCILE_TOLERANCE
    out.update(difference=_num(diff), relative=_num(rel) if rel is not None else None,
               flagged=bool(flagged), status="flagged" if flagged else "reconciled")
    if flagged and ra is not None and len(ra):
        s0 = pd.Timestamp(span.start)
        s1 = pd.Timestamp(span.end)
        cut = ra["provisional"] | (ra["start"] < s0) | ra["end"].isna() | (ra["end"] > s1)
        order = ra.assign(_cut=cut).sort_values(["_cut", "gpu_hours"], ascending=[False, False])
        out["jobs_to_check"] = [f"{j} ({g:.3g} GPU-h{', cut by the span' if c else ''})"
                                for j, g, c in zip(order["job_id"].astype(str), order["gpu_hours"],
                                                   order["_cut"])][:limit]
    if flagged and sreport_gpu_hours <= 0:
        out["note"] = (f"sreport reports no GPU time up to {upto}: has slurmdbd rolled these hours "
                       f"up (sacctmgr -i rollup, or --rollup)?")
    return out


def unknown_figures(runs: pd.DataFrame, capacity_gpus) -> dict:
    """``{figure: why}`` (:data:`UNKNOWN_WHY`) of the figures whose inputs the allocations that
    ran lack altogether: ``gpu_hours`` (no row has a GPU count), ``cpu_hours`` (no NCPUS),
    ``energy_kwh`` (no row has an energy source), ``gpu_utilization`` (GPU jobs, none with a
    utilization figure), ``utilization`` (no capacity). What is derived from one (waste, idle
    jobs, efficiency, cost) is unknown with it. Empty for an input with no row."""
    out = {}
    if len(runs):
        if runs["gpus"].isna().all():
            out["gpu_hours"] = UNKNOWN_WHY["gpu_hours"]
        if runs["ncpus"].isna().all():
            out["cpu_hours"] = UNKNOWN_WHY["cpu_hours"]
        if not (runs["energy_source"] != "none").any():
            out["energy_kwh"] = UNKNOWN_WHY["energy_kwh"]
        gpu = runs["gpus"] > 0
        util = runs["step_gpu_util_pct"].fillna(runs["spool_gpu_util_pct"])
        if "gpu_hours" in out or (gpu.any() and util[gpu].isna().all()):
            out["gpu_utilization"] = UNKNOWN_WHY["gpu_utilization"]
    if not capacity_gpus or "gpu_hours" in out:
        out["utilization"] = UNKNOWN_WHY["utilization"] if not capacity_gpus else UNKNOWN_WHY["gpu_hours"]
    return out


#: The keys of the weekly report's ``totals``, in their order (those of the period report's,
#: :func:`slurmkit.report.period.rows_figures`, with the pending backlog and the spool records
#: no job holds).
TOTALS_KEYS = ("jobs", "gpu_jobs", "allocation_rows", "requeued_attempts", "gpu_hours", "cpu_hours", "energy_kwh",
               "energy_kwh_by_source", "energy_known", "energy_jobs_by_source", "energy_coverage",
               "gpu_hours_without_energy", "gpu_hours_from_request", "allocation_rows_gpus_unknown",
               "physical_gpu_hours", "allocation_rows_physical_unknown", "spool_records_unmatched",
               "wasted_gpu_hours", "pending_array_tasks", "pending_jobs", "pending_gpus_requested",
               "pending_gpu_hours_requested", "pending_without_time_limit", "provisional_jobs",
               "provisional_gpu_hours", "facility_kwh", "co2e_kg", "cost_energy", "cost_gpu_hours", "cost_total",
               "currency")


def _with_backlog(sql_totals: dict, queue: dict, backlog: int, pending_jobs: int, spool_unmatched: int) -> dict:
    """The weekly ``totals``: the window's totals of the period engine (``sql_totals``,
    :func:`slurmkit.report.period.rows_figures`: jobs, hours, energy by source and its
    coverage, CO2e, cost) with the pending backlog (``queue``, :func:`pending_backlog`; the
    pending array tasks ``backlog`` and the pending jobs) and the spool records no attempt
    holds (``spool_unmatched``), in :data:`TOTALS_KEYS`' order (keys the engine adds after)."""
    extra = {"spool_records_unmatched": spool_unmatched, "pending_array_tasks": backlog, "pending_jobs": pending_jobs,
             "pending_gpus_requested": queue["gpus_requested"], "pending_gpu_hours_requested": queue["gpu_hours_requested"],
             "pending_without_time_limit": queue["without_time_limit"]}
    merged = {**sql_totals, **extra}
    return {**{k: merged[k] for k in TOTALS_KEYS if k in merged}, **merged}


def gpus_in_use(runs: pd.DataFrame, window: Window, upto, now=None, known: bool = True) -> dict:
    """The ``hourly`` section: the GPUs-in-use curve from the window's start up to ``upto`` (never
    a future hour; hourly means, daily past :data:`DAILY_AFTER_DAYS`), its peak and p95, and the
    most GPUs allocated at once (:func:`most_at_once`). ``known`` False (no GPU count in the
    input): no curve, every figure None."""
    if not known:
        return {"bucket": "hour", "hours": [], "gpus_in_use": [], "peak": None, "p95": None, "peak_at_once": None}
    # (``upto`` before the window's start, an --as-of earlier than the window: no hour, an empty
    # curve with a time index)
    curve = hourly_gpus(runs, window.start, upto, now=now) if upto > utc(window.start) else \
        pd.Series(dtype=float, index=pd.DatetimeIndex([], tz="UTC"))
    bucket = "hour"
    if window.hours > DAILY_AFTER_DAYS * 24 and len(curve):
        bucket = "day"
        # each hour weighs its length: the last one ends at ``upto`` (a capture taken at 01:10
        # covers 10 minutes of its hour), so a day's mean is its GPU-hours over its hours covered
        secs = pd.Series(3600.0, index=curve.index)
        secs.iloc[-1] = min(3600.0, (utc(upto) - curve.index[-1]).total_seconds())
        curve = (curve * secs).resample("D").sum() / secs.resample("D").sum()
    return {"bucket": bucket, "hours": list(curve.index.strftime("%Y-%m-%dT%H:%M:%SZ")),
            "gpus_in_use": [round(float(v), 6) for v in curve.to_numpy()],
            "peak": _num(curve.max()) if len(curve) else None,
            "p95": _num(curve.quantile(0.95)) if len(curve) else None,
            "peak_at_once": _num(most_at_once(runs, window.start, upto, now))}


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


def _sql_figures(rows, window: Window, assumptions: E.Assumptions, spool, now, running_elapsed: bool,
                 gpu_nodes: dict | None) -> dict:
    """The window's shared figures (totals, group tables, outcomes, queue wait, job sizes,
    efficiency) from the period report's SQL over ``rows`` (:func:`slurmkit.report.period.rows_figures`):
    with ``gpu_nodes``, the rows whose GPUs Slurm did not track have them unknown first
    (:func:`slurmkit.report.usage.untracked_gpus`, on a copy; its data quality is recorded by
    :func:`~slurmkit.report.usage.allocations`)."""
    from slurmkit.accounting.frame import JobRows
    from slurmkit.report.period import rows_figures
    from slurmkit.report.usage import tracked_clusters, untracked_gpus

    if gpu_nodes and len(rows.allocs):
        allocs = rows.allocs.copy()
        if untracked_gpus(allocs, gpu_nodes, DataQuality(), "", tracked_clusters(rows.allocs)).any():
            rows = JobRows(allocs, rows.steps)
    t = utc(now) if now is not None else pd.Timestamp.now(tz="UTC")
    return rows_figures(rows, window, t.timestamp(), assumptions, spool, running_elapsed)


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
    unknown = unknown_figures(runs, capacity_gpus)
    fig = _sql_figures(rows, window, assumptions, spool, now, running_elapsed, gpu_nodes)
    totals = _with_backlog(fig["totals"], queue, int(a["pending_tasks"].sum()),
                           int(((a["pending_tasks"] == 0) & waiting).sum()), spool_unmatched)
    horizon = utc(horizon) if horizon is not None else pd.Timestamp.now(tz="UTC")
    upto = min(utc(window.end), max(horizon, utc(window.start)))
    recon = None
    if sreport_gpu_hours is not None:
        recon = reconcile(rows, runs, recon_window or window, float(sreport_gpu_hours), now=now)
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
        **{k: fig[k] for k in ("by_user", "by_account", "by_partition", "by_qos", "by_gpu_type")},
        "energy_by_policy": energy_by_policy(runs),
        "outcomes": fig["outcomes"],
        "queue_wait": {**fig["queue_wait"], "backlog": queue},
        "efficiency": fig["efficiency"],
        "job_sizes": fig["job_sizes"],
        "hourly": gpus_in_use(runs, window, upto, now, known="gpu_hours" not in unknown),
        "utilization": util,
        "accounts": accounts_section(a, breakdown_inputs),
        "downtime": downtime,
        "reconciliation": recon,
        "energy_sources": {"jobs": dict(totals["energy_jobs_by_source"]), "order": list(ENERGY_SOURCE_ORDER)},
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
