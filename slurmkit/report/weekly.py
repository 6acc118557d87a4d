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
from slurmkit.report import week_sql as WS
from slurmkit.report.usage import utc
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




def pending_backlog(con, rows: str) -> dict:
    """The pending backlog from the rows of ``rows`` (:func:`slurmkit.report.period.rows_table`)
    that have not started (``waiting``: PENDING jobs and pending array records): ``jobs`` (an
    array record counts its pending tasks), ``gpus_requested`` (ReqTRES GPUs, AllocTRES when no
    ReqTRES, × tasks), ``gpu_hours_requested`` (those GPUs × each job's time limit,
    TimelimitRaw, h: what the queue asks for, at most), and ``without_time_limit`` (jobs whose
    limit is UNLIMITED or unknown: not in the GPU-hours). Pending jobs none of which has a GPU
    count (no ReqTRES, AllocTRES or AllocGRES in the input): the GPU figures are None
    (unknown), not 0."""
    n, tasks, known, gpu_tasks, gpus, gh, unlimited = con.execute(f"""
        SELECT count(*), coalesce(sum(t), 0), count(g), coalesce(sum(t) FILTER (WHERE g > 0), 0),
               coalesce(sum(coalesce(g, 0) * t), 0.0),
               coalesce(sum(coalesce(g, 0) * t * CASE WHEN isfinite(timelimit_s) THEN timelimit_s ELSE 0 END), 0.0)
                 / 3600.0,
               coalesce(sum(t) FILTER (WHERE g > 0 AND NOT coalesce(isfinite(timelimit_s), false)), 0)
        FROM (SELECT CASE WHEN pending_tasks > 0 THEN pending_tasks ELSE 1 END AS t, coalesce(req_gpus, gpus) AS g,
                     timelimit_s FROM "{rows}" WHERE waiting)""").fetchall()[0]
    if not n:
        return {"jobs": 0, "gpu_jobs": 0, "gpus_requested": 0.0, "gpu_hours_requested": 0.0,
                "without_time_limit": 0}
    if not known:
        return {"jobs": int(tasks), "gpu_jobs": None, "gpus_requested": None, "gpu_hours_requested": None,
                "without_time_limit": None}
    return {"jobs": int(tasks), "gpu_jobs": int(gpu_tasks), "gpus_requested": _num(gpus),
            "gpu_hours_requested": _num(gh), "without_time_limit": int(unlimited)}


def _reconciliation(con, rows_view: str, span: Window, sreport_gpu_hours: float, now: float, assumptions,
                    running_elapsed: bool, window: Window) -> dict:
    """The ``reconciliation`` section (:func:`slurmkit.report.week_sql.reconcile`): the rows
    clipped to ``span`` (sreport's whole hours: view ``rw`` of ``con`` rebuilt over it,
    :func:`slurmkit.report.period.rows_window`, then back over ``window``) beside the report's
    rows that ran (``rows_view``) and compared with ``sreport_gpu_hours``."""
    from slurmkit.report import period as P

    span_rows = None
    if span.end > span.start:
        P.rows_window(con, span, now, running_elapsed)
        span_rows = P.rows_table(con, "span_rows", assumptions)
        P.rows_window(con, window, now, running_elapsed)
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


def build_report(rows, dq: DataQuality, window: Window, assumptions: E.Assumptions,
                 spool: pd.DataFrame | None = None, capacity_gpus: float | None = None,
                 down_gpu_hours: float | None = None, sreport_gpu_hours: float | None = None,
                 previous: dict | None = None, now=None, source: str = "",
                 cluster: str = "", recon_window: Window | None = None,
                 horizon=None, downtime: dict | None = None, capacity_source: str | None = None,
                 breakdown_inputs: dict | None = None, running_elapsed: bool = False,
                 gpu_nodes: dict | None = None, rows_frame: bool = True) -> tuple[dict, pd.DataFrame | None]:
    """``(report dict, per-allocation frame)``. See the module docstring. The frame is
    :func:`jobs_frame`'s (``jobs.csv``), None with ``rows_frame`` False (a report that writes no
    per-allocation file).

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
    from slurmkit.report import period as P
    from slurmkit.report.usage import checked_rows

    rows = checked_rows(rows, window.start, window.end, dq, now=now, source=source, running_elapsed=running_elapsed,
                        gpu_nodes=gpu_nodes)
    t_now = (utc(now) if now is not None else pd.Timestamp.now(tz="UTC")).timestamp()
    con = P.open_rows(rows, window, t_now, spool, running_elapsed)
    # (no row: the window's figures as the period report has them for no row)
    fig = None if len(rows.allocs) else P.rows_figures(rows, window, t_now, assumptions)
    try:
        report = _report(con, rows, dq, window, assumptions, spool, capacity_gpus, down_gpu_hours, sreport_gpu_hours,
                         previous, now, t_now, source, cluster, recon_window, horizon, downtime, capacity_source,
                         breakdown_inputs, running_elapsed, fig)
        jobs = jobs_frame(con) if rows_frame else None
    finally:
        con.close()
    return report, jobs


#: The columns of ``jobs.csv`` that are times (epoch s in SQL, ISO UTC in the file).
_TIME_COLUMNS = ("submit", "eligible", "start", "end", "stop")


def jobs_frame(con, rows: str = "jobs") -> pd.DataFrame:
    """The per-allocation rows (table ``rows`` of :func:`slurmkit.report.period.rows_table`,
    with their rows' other fields: :func:`~slurmkit.report.period.rows_with_fields`) as a
    frame, for ``jobs.csv`` / ``jobs.parquet``, in the input's order: times as aware UTC
    timestamps, the internal columns (``ran``, ``run``, ``never``, ``gu``, ``jid``,
    ``reservation``) left out."""
    from slurmkit.report.period import rows_with_fields

    f = con.execute(f"SELECT * EXCLUDE (ran, run, never, gu, jid, reservation) FROM ({rows_with_fields(con, rows)})").df()
    for c in _TIME_COLUMNS:
        f[c] = pd.to_datetime(f[c], unit="s", utc=True)
    return f


def _report(con, rows, dq: DataQuality, window: Window, assumptions: E.Assumptions, spool, capacity_gpus,
            down_gpu_hours, sreport_gpu_hours, previous, now, t_now: float, source: str, cluster: str,
            recon_window, horizon, downtime, capacity_source, breakdown_inputs, running_elapsed: bool,
            fig: dict | None) -> dict:
    """:func:`build_report`'s dict over ``con`` (:func:`slurmkit.report.period.open_rows` of
    ``rows``): the shared figures (``fig``, else :func:`slurmkit.report.period.window_figures`),
    then the week's own sections over table ``jobs`` (:func:`slurmkit.report.period.rows_table`)
    and its rows that ran (view ``runs``)."""
    from slurmkit.report import period as P

    P.rows_table(con, "jobs", assumptions)
    con.execute('CREATE OR REPLACE TEMP VIEW runs AS SELECT * FROM jobs WHERE run')
    if breakdown_inputs:
        from slurmkit.report import breakdown as BD

        facts = WS.job_facts(con, "jobs")
        if breakdown_inputs.get("assocs"):     # (a tree of several clusters: the jobs' one's)
            breakdown_inputs = {**breakdown_inputs, "assocs": BD.cluster_tree(
                breakdown_inputs["assocs"], facts["clusters"] | ({cluster} if cluster else set()))}
        BD.refuse_foreign(facts, breakdown_inputs)
    spool_unmatched = _spool_unmatched(con, spool, dq)
    dq.check()
    queue = pending_backlog(con, "jobs")
    backlog, pending_jobs = con.execute(
        "SELECT coalesce(sum(pending_tasks), 0), count(*) FILTER (WHERE waiting AND pending_tasks = 0) FROM jobs"
    ).fetchall()[0]
    unknown = unknown_figures(con, "runs", capacity_gpus)
    if fig is None:
        fig = P.window_figures(con, assumptions)
    totals = _with_backlog(fig["totals"], queue, int(backlog), int(pending_jobs), spool_unmatched)
    horizon = utc(horizon) if horizon is not None else pd.Timestamp.now(tz="UTC")
    upto = min(utc(window.end), max(horizon, utc(window.start)))
    recon = None
    if sreport_gpu_hours is not None:
        recon = _reconciliation(con, "runs", recon_window or window, float(sreport_gpu_hours), t_now, assumptions,
                                running_elapsed, window)
    from slurmkit.report.breakdown import registration

    reg = registration((breakdown_inputs or {}).get("events"))
    util = {**utilization(totals["gpu_hours"], capacity_gpus, down_gpu_hours, window, upto, capacity_from=reg),
            "capacity_source": capacity_source or "unknown"}
    jobs = (con, "jobs")
    util["breakdown"] = breakdown_section(jobs, breakdown_inputs, capacity_source, util, totals["gpu_hours"], upto)
    util["of_reported"] = utilization_of_reported((util["breakdown"] or {}).get("ours"),
                                                  (util["breakdown"] or {}).get("window"))
    clusters = [c for (c,) in con.execute(
        "SELECT DISTINCT cluster FROM runs WHERE coalesce(cluster, '') <> '' ORDER BY cluster").fetchall()]
    return {
        "window": window.as_dict(),
        "as_of": iso_z(utc(now) if now is not None else pd.Timestamp.now(tz="UTC")),
        "cluster": cluster or ",".join(clusters),
        "totals": totals,
        **{k: fig[k] for k in ("by_user", "by_account", "by_partition", "by_qos", "by_gpu_type")},
        "energy_by_policy": WS.energy_by_policy(con, "runs"),
        "outcomes": fig["outcomes"],
        "queue_wait": {**fig["queue_wait"], "backlog": queue},
        "efficiency": fig["efficiency"],
        "job_sizes": fig["job_sizes"],
        "hourly": WS.gpus_in_use(con, "runs", window, upto, known="gpu_hours" not in unknown),
        "utilization": util,
        "accounts": accounts_section(jobs, breakdown_inputs),
        "downtime": downtime,
        "reconciliation": recon,
        "energy_sources": {"jobs": dict(totals["energy_jobs_by_source"]), "order": list(ENERGY_SOURCE_ORDER)},
        "assumptions": assumptions.as_dict(),
        "deltas": deltas(totals, previous),
        "unknown": unknown,
        "data_quality": _data_quality(dq, unknown, con, source),
    }


def _spool_unmatched(con, spool, dq: DataQuality) -> int:
    """The spool records of a job in the input that no attempt holds in time (table
    ``spool_lost`` of :func:`slurmkit.report.period.open_rows`), each listed in ``dq``
    (:func:`slurmkit.report.energy.list_unmatched`)."""
    lost = [r for (r,) in con.execute("SELECT rec FROM spool_lost ORDER BY rec").fetchall()]
    if lost:
        E.list_unmatched(spool, lost, dq)
    return len(lost)


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


def _data_quality(dq: DataQuality, unknown: dict, con, source: str) -> dict:
    """The ``data_quality`` section: :meth:`DataQuality.as_dict` with ``unknown`` (the figures
    the input cannot give, and why) and ``notes``: each unknown figure and the allocation rows
    that ran (view ``runs`` of ``con``) whose GPU count is unknown or only requested (ReqTRES),
    in the shape of a listed problem (data_quality.csv lists them first)."""
    from slurmkit.report.period import REQUESTED

    d = dq.as_dict()
    d["unknown"] = dict(unknown)
    head = [{"source": source or "input", "line": None, "reason": f"unknown: {k}", "detail": why,
             "counted": True} for k, why in unknown.items()]
    if "gpu_hours" not in unknown:
        n, req = con.execute("SELECT count(*) FILTER (WHERE gpus IS NULL), count(*) FILTER (WHERE gpu_source = ?) "
                             "FROM runs", [REQUESTED]).fetchall()[0]
        if n:
            head.append({"source": source or "input", "line": None, "reason": "unknown: GPU count",
                         "detail": f"{n} allocation row(s) from an input without AllocTRES, AllocGRES or ReqTRES: "
                                   "not in the GPU-hours", "counted": True})
        if req:
            head.append({"source": source or "input", "line": None, "reason": "GPUs requested, not allocated",
                         "detail": f"{int(req)} allocation row(s): GPU count from ReqTRES (the input has "
                                   "no AllocTRES or AllocGRES)", "counted": True})
    d["notes"] = head
    return d
