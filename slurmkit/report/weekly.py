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
from slurmkit.report.jobs import has_repeats
from slurmkit.report import week_sql as WS
from slurmkit.report.usage import allocations, utc
from slurmkit.report.definitions import (  # noqa: F401  (the report's names, kept importable from here)
    ENERGY_SOURCE_ORDER, GPU_TYPE_UNKNOWN, GPU_UNTYPED, IDLE_JOBS, IDLE_UTIL_PCT, NEVER_STARTED_LINE, REQUEUED_LINE,
    UNKNOWN_WHY, WAIT_BIN_LABELS, WAIT_BINS, utilization, utilization_of_reported, wait_histogram)
from slurmkit.report.window import Window, iso_z


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


def unknown_figures(con, rows_view: str, capacity_gpus) -> dict:
    """``{figure: why}`` (:data:`UNKNOWN_WHY`) of the figures whose inputs the allocations that
    ran (``rows_view``) lack altogether (:func:`slurmkit.report.week_sql.unknown_figures`)."""
    return {k: UNKNOWN_WHY[why] for k, why in WS.unknown_figures(con, rows_view, capacity_gpus).items()}


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
    con = duckdb.connect()
    rows_view = WS.frame_rows(con, runs, "runs", now=now)
    unknown = unknown_figures(con, rows_view, capacity_gpus)
    fig = _sql_figures(rows, window, assumptions, spool, now, running_elapsed, gpu_nodes)
    totals = _with_backlog(fig["totals"], queue, int(a["pending_tasks"].sum()),
                           int(((a["pending_tasks"] == 0) & waiting).sum()), spool_unmatched)
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
        **{k: fig[k] for k in ("by_user", "by_account", "by_partition", "by_qos", "by_gpu_type")},
        "energy_by_policy": WS.energy_by_policy(con, rows_view),
        "outcomes": fig["outcomes"],
        "queue_wait": {**fig["queue_wait"], "backlog": queue},
        "efficiency": fig["efficiency"],
        "job_sizes": fig["job_sizes"],
        "hourly": WS.gpus_in_use(con, rows_view, window, upto, known="gpu_hours" not in unknown),
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
