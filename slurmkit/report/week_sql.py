"""The figures only a week's report has, in SQL (DuckDB) over per-allocation rows.

Each function here takes a DuckDB connection and the name of a relation (a view or table) of
per-allocation rows clipped to the report's window, with the column names of the period
report's rows (view ``rw`` of :func:`slurmkit.report.period._build_rows`), and returns plain
data (numbers, lists, dicts): the aggregation is SQL, pandas and numpy only touch the small
result tables (one row per hour, per policy).

The columns each function reads (epoch seconds are DOUBLE, UTC):

- ``start``: the allocation's Start (sacct Start), NULL when it did not start; ``end``: its End
  (sacct End), NULL while it runs;
- ``stop``: when it stopped holding its GPUs: End, or for a running job the time it was last
  seen running, never past Start + Timelimit (:func:`slurmkit.report.usage.end_or_now`);
- ``gpus``: GPUs allocated (AllocTRES / AllocGRES / ReqTRES ``gres/gpu``), NULL when the input
  gives no GPU count; ``gpu_type``: their type as written there ('' or NULL: untyped);
  ``ncpus``: CPUs allocated (NCPUS / AllocCPUS);
- ``ran``: the allocation started (:func:`slurmkit.report.usage.started`); ``eligible``: sacct's
  Eligible (epoch s); ``pending_tasks``: the pending tasks of an array record; ``req_cpus``: the
  CPUs asked for (ReqTRES ``cpu``); ``reservation``: sacct's Reservation;
- ``gu``: the GPU utilization (%) of a row with GPUs: its steps' (``gres/gpuutil`` of
  TRESUsageInAve / TRESUsageInTot), else its spool records'; NULL when not known;
- ``cluster``, ``account``, ``user``, ``nodelist``: sacct's Cluster, Account, User, NodeList;
- ``gpu_hours``: GPU-hours inside the window;
- ``jid``: the job's identity where a job has several rows (requeued attempts), NULL for a job
  with one row (each such row is a job of its own); ``job_id``: sacct's JobID;
- ``waiting``: pending (a pending array record, or PENDING without a Start); ``provisional``:
  started and still running (its figures grow);
- ``clock_policy``: the clock policy the hook spool recorded for the attempt
  (:func:`slurmkit.report.energy.attach_energy`); a relation without the column has none
  recorded for every row;
- ``energy_source`` (:data:`slurmkit.report.energy.SOURCES` name) and ``energy_kwh`` (IT energy
  inside the window, kWh; NULL when unknown).

:func:`frame_rows` registers the weekly report's pandas allocation frame under those names.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from slurmkit.report.usage import end_or_now, epoch_s, utc

#: The energy sources that measure a job's GPUs (the spool's NVML counters, or the same read
#: through Prometheus): the only ones a clock policy's effect shows in.
MEASURED_SOURCES = ("measured", "prometheus")

#: Windows longer than this many days get daily, not hourly, GPUs-in-use buckets.
DAILY_AFTER_DAYS = 31

#: How far apart per-job GPU-hours and sreport may be before the reconciliation is flagged.
RECONCILE_TOLERANCE = 0.01

#: The columns :func:`frame_rows` registers.
ROW_COLUMNS = ("start", "stop", "end", "gpus", "ncpus", "gpu_type", "gpu_hours", "jid", "job_id", "waiting",
               "provisional", "ran", "eligible", "pending_tasks", "req_cpus", "cluster", "account", "user", "nodelist",
               "reservation", "gu", "clock_policy", "energy_source", "energy_kwh")
#: Those of :data:`ROW_COLUMNS` that are text (a frame's categories, or strings).
_TEXT = ("gpu_type", "cluster", "account", "user", "nodelist", "reservation", "clock_policy", "energy_source")


def _num(x):
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else round(x, 9)


def _q(text: str) -> str:
    """``text`` as the inside of a SQL string literal."""
    return str(text).replace("'", "''")


def frame_rows(con, frame: pd.DataFrame, name: str, now=None) -> str:
    """Register ``frame`` (the weekly report's allocation frame: :func:`slurmkit.report.usage.
    allocations` with :func:`slurmkit.report.energy.attach_energy`'s columns) in ``con`` as
    view ``name`` with the columns of :data:`ROW_COLUMNS` (see the module docstring): Start and
    stop (:func:`~slurmkit.report.usage.end_or_now`, running jobs up to ``now``) in epoch
    seconds, ``jid`` the frame's ``job_code`` (every row carries it: a job's rows count once;
    without it each row is a job). A column the frame lacks is unknown (NULL), the clock policy
    ``none recorded``, the energy source ``none``. Returns ``name``."""
    now = utc(now) if now is not None else pd.Timestamp.now(tz="UTC")
    n = len(frame)
    # (the text columns as the frame holds them, categories where they are: DuckDB reads a
    # pandas Categorical as an ENUM, one code per row; the view below makes them text)
    rel = pd.DataFrame({
        "start": epoch_s(frame["start"]) if n else np.zeros(0),
        "stop": epoch_s(_stop(frame, now)) if n else np.zeros(0),
        "end": epoch_s(frame["end"]) if n and "end" in frame else np.full(n, np.nan),
        "gpus": frame["gpus"].to_numpy(float),
        "ncpus": frame["ncpus"].to_numpy(float) if "ncpus" in frame else np.full(n, np.nan),
        "gpu_type": frame["gpu_type"].array if "gpu_type" in frame else np.full(n, None, object),
        "gpu_hours": frame["gpu_hours"].to_numpy(float) if "gpu_hours" in frame else np.full(n, np.nan),
        "jid": frame["job_code"].to_numpy(np.int64) if "job_code" in frame else np.arange(n, dtype=np.int64),
        "job_id": frame["job_id"].astype(str).to_numpy(object) if "job_id" in frame else np.full(n, None, object),
        "waiting": (((frame["pending_tasks"] > 0) | ((frame["state"] == "PENDING") & frame["start"].isna())).to_numpy(bool)
                    if "pending_tasks" in frame else np.zeros(n, bool)),
        "provisional": frame["provisional"].to_numpy(bool) if "provisional" in frame else np.zeros(n, bool),
        "ran": frame["started"].to_numpy(bool) if "started" in frame else frame["start"].notna().to_numpy(bool),
        "eligible": epoch_s(frame["eligible"]) if n and "eligible" in frame else np.full(n, np.nan),
        **{c: frame[c].to_numpy(float) if c in frame else np.full(n, np.nan) for c in ("pending_tasks", "req_cpus")},
        **{c: frame[c].array if c in frame else np.full(n, None, object) for c in ("cluster", "account", "user",
                                                                                 "nodelist", "reservation")},
        "gu": _gpu_util(frame),
        "clock_policy": frame["clock_policy"].array if "clock_policy" in frame else np.full(n, _none_recorded(), object),
        "energy_source": frame["energy_source"].array if "energy_source" in frame else np.full(n, "none", object),
        "energy_kwh": frame["energy_kwh"].to_numpy(float) if "energy_kwh" in frame else np.full(n, np.nan),
    })
    for c in _TEXT:
        if not isinstance(rel[c].dtype, pd.CategoricalDtype):
            rel[c] = rel[c].astype(object).where(rel[c].notna(), None)
    con.register(f"{name}_frame", rel)
    con.execute(f'CREATE OR REPLACE TEMP VIEW "{name}" AS SELECT * REPLACE ('
                + ", ".join(f'CAST("{c}" AS VARCHAR) AS "{c}"' for c in _TEXT) + f') FROM "{name}_frame"')
    return name


def _stop(frame: pd.DataFrame, now: pd.Timestamp) -> pd.Series:
    """Each row's stop: the frame's ``stop``, else :func:`~slurmkit.report.usage.end_or_now`
    (with a time limit), else End or ``now``."""
    if "stop" in frame or "timelimit_s" in frame:
        return end_or_now(frame, now)
    return frame["end"].fillna(now)


def _gpu_util(frame: pd.DataFrame) -> np.ndarray:
    """Each row's GPU utilization (%): the steps' figure, else the spool's; NaN without one."""
    util = pd.Series(np.nan, index=frame.index)
    for c in ("spool_gpu_util_pct", "step_gpu_util_pct"):   # (the later one first)
        if c in frame:
            util = frame[c].fillna(util)
    return util.to_numpy(float)


def _none_recorded() -> str:
    from slurmkit.hooks.clock_policy import NONE_RECORDED

    return NONE_RECORDED


def _has_column(con, rows_view: str, column: str) -> bool:
    cols = [r[0] for r in con.execute(f'DESCRIBE SELECT * FROM "{rows_view}"').fetchall()]
    return column in cols


def _distinct_jobs(cond: str = "true") -> str:
    """SQL: the distinct jobs of the rows where ``cond`` holds (a job of one row, ``jid`` NULL,
    is one job; the rows of a job with several share a ``jid``)."""
    return f"(count(*) FILTER (WHERE ({cond}) AND jid IS NULL) + count(DISTINCT jid) FILTER (WHERE {cond}))"


def energy_by_policy(con, rows_view: str) -> list[dict]:
    """Energy per GPU-hour by the clock policy the GPU jobs (``gpus`` > 0) ran under: one row
    per ``clock_policy`` label (the spool records' policy; ``none recorded`` for jobs without
    one, which are counted, not dropped), most GPU-hours first: ``{"policy", "jobs"`` (distinct
    jobs), ``"gpu_hours"`` (in the window), ``"measured_gpu_hours"`` (of those, the allocations
    with measured energy, :data:`MEASURED_SOURCES`), ``"energy_kwh"`` (their measured kWh in the
    window; None when none is measured), ``"kwh_per_gpu_hour": energy_kwh /
    measured_gpu_hours}`` (None without measured GPU-hours). Modelled and Slurm energy are left
    out: a TDP model shows no policy's effect."""
    policy = ("CAST(clock_policy AS VARCHAR)" if _has_column(con, rows_view, "clock_policy")
              else f"'{_q(_none_recorded())}'")
    measured = "energy_source IN (" + ", ".join(f"'{s}'" for s in MEASURED_SOURCES) + ")"
    rows = con.execute(f"""
        SELECT policy, {_distinct_jobs()} AS jobs, sum(gpu_hours) AS gh,
               coalesce(sum(gpu_hours) FILTER (WHERE m), 0.0) AS mgh, sum(energy_kwh) FILTER (WHERE m) AS kwh
        FROM (SELECT {policy} AS policy, jid, gpu_hours, energy_kwh, {measured} AS m
              FROM "{rows_view}" WHERE gpus > 0)
        GROUP BY policy ORDER BY gh DESC, policy""").fetchall()
    return [{"policy": str(p), "jobs": int(j), "gpu_hours": _num(g), "measured_gpu_hours": _num(m),
             "energy_kwh": _num(k), "kwh_per_gpu_hour": _num(k / m) if m and m > 0 and k is not None else None}
            for p, j, g, m, k in rows]


def most_at_once(con, rows_view: str, start, end) -> float:
    """The most GPUs allocated at one instant in ``[start, end)``: a sweep over the rows'
    ``start`` (+GPUs) and ``stop`` (-GPUs), clipped to the window, ends before starts at one
    instant (the GPUs held after each instant's events: its ends then its starts, which only
    add); 0.0 when no GPU job ran in it."""
    s0, s1 = utc(start).timestamp(), utc(end).timestamp()
    if s1 <= s0:
        return 0.0
    got = con.execute(f"""
        WITH c AS (SELECT greatest(least(start, {s1!r}), {s0!r}) AS st,
                          greatest(least(stop, {s1!r}), {s0!r}) AS en, gpus
                   FROM "{rows_view}" WHERE start IS NOT NULL AND gpus > 0),
             live AS (SELECT * FROM c WHERE en > st),
             ev AS (SELECT st AS t, gpus AS w FROM live UNION ALL SELECT en AS t, -gpus AS w FROM live),
             net AS (SELECT t, sum(w) AS w FROM ev GROUP BY t)
        SELECT max(held) FROM (SELECT sum(w) OVER (ORDER BY t ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
                               AS held FROM net)""").fetchall()[0][0]
    return float(got) if got is not None else 0.0


def hourly_gpus(con, rows_view: str, start, end) -> pd.Series:
    """Average GPUs in use in each hour of ``[start, end)`` (the first hour from ``start``'s
    whole hour, the last one up to ``end``): a Series indexed by the hour's start (UTC). Exact
    piecewise-linear integration: SQL sums each hour's starts (+GPUs) and stops (-GPUs) and
    their GPU x time; the running sums over the hours give the GPU-seconds before each hour's
    edge. Suspended time is not subtracted (Slurm keeps the GPUs allocated)."""
    start, end = utc(start), utc(end)
    hours = pd.date_range(start.floor("h"), end, freq="h", inclusive="left")
    if not len(hours):
        return pd.Series(0.0, index=hours)
    edges = np.append(np.array([h.timestamp() for h in hours]), end.timestamp())
    # (a stop before its start: the row holds no GPU time; no stop: it holds them on)
    gpu_s = time_bins(con, f"""SELECT start AS lo, CASE WHEN stop >= start THEN stop WHEN stop IS NOT NULL
                                                         THEN start END AS hi, gpus AS w
                               FROM "{rows_view}" WHERE start IS NOT NULL AND gpus > 0""", edges)
    return pd.Series(gpu_s / np.diff(edges), index=hours)


def time_bins(con, intervals: str, bounds: np.ndarray) -> np.ndarray:
    """Per bin ``[bounds[j], bounds[j+1])`` (epoch s, increasing): the sum over the rows of
    ``intervals`` (a SELECT of ``lo``, ``hi``, ``w``) of ``w`` x the seconds of ``[lo, hi)``
    inside it. Exact piecewise-linear integration: SQL sums each bound's starts (+w) and ends
    (-w) and their w x time (each event at the first bound at or after it; an event after
    the last bound counts nowhere; ``hi`` NULL: the interval has no end); the running sums give
    the w-seconds before each bound. An interval with ``hi`` <= ``lo`` counts nothing."""
    bounds = np.asarray(bounds, float)
    if len(bounds) < 2:
        return np.zeros(0)
    b0 = float(bounds[0])
    con.register("time_bounds", pd.DataFrame({"j": np.arange(len(bounds), dtype=np.int64), "b": bounds - b0}))
    rows = con.execute(f"""
        WITH i AS (SELECT lo - {b0!r} AS lo, hi - {b0!r} AS hi, w FROM ({intervals}) WHERE lo IS NOT NULL
                   AND NOT coalesce(hi <= lo, false)),
             ev AS (SELECT lo AS t, w FROM i UNION ALL SELECT hi AS t, -w AS w FROM i WHERE hi IS NOT NULL)
        SELECT b.j, sum(ev.w), sum(ev.w * ev.t) FROM ev ASOF JOIN time_bounds b ON ev.t <= b.b
        GROUP BY b.j""").fetchall()
    con.unregister("time_bounds")
    w, wt = np.zeros(len(bounds)), np.zeros(len(bounds))
    for j, sw, swt in rows:
        w[int(j)], wt[int(j)] = sw, swt
    before = (bounds - b0) * np.cumsum(w) - np.cumsum(wt)   # w-seconds before each bound
    return np.diff(before)


def gpus_in_use(con, rows_view: str, window, upto, known: bool = True) -> dict:
    """The ``hourly`` section: the GPUs-in-use curve (:func:`hourly_gpus`) from ``window``'s
    start (a :class:`~slurmkit.report.window.Window`) up to ``upto`` (never a future hour;
    hourly means, daily past :data:`DAILY_AFTER_DAYS`), its peak and p95, and the most GPUs
    allocated at once (:func:`most_at_once`): ``{"bucket": "hour" | "day", "hours" (ISO UTC),
    "gpus_in_use", "peak", "p95", "peak_at_once"}``. ``known`` False (no GPU count in the
    input): no curve, every figure None."""
    if not known:
        return {"bucket": "hour", "hours": [], "gpus_in_use": [], "peak": None, "p95": None, "peak_at_once": None}
    # (``upto`` before the window's start, an --as-of earlier than the window: no hour, an empty
    # curve with a time index)
    curve = hourly_gpus(con, rows_view, window.start, upto) if utc(upto) > utc(window.start) else \
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
            "peak_at_once": _num(most_at_once(con, rows_view, window.start, upto))}


def reconcile(con, span_rows: str | None, rows_view: str, span, sreport_gpu_hours: float, limit: int = 20) -> dict:
    """Per-job GPU-hours clipped to exactly ``span`` (a :class:`~slurmkit.report.window.Window`:
    the whole hours sreport covers, up to its last rollup, never the current hour) vs
    ``sreport_gpu_hours`` over the same span: the ``reconciliation`` section, ``{"window",
    "jobs_gpu_hours", "sreport_gpu_hours", "difference", "relative", "flagged", "status", "note",
    "jobs_to_check"}``.

    ``span_rows``: the rows clipped to ``span`` (None when the span is empty); the GPU-hours are
    those of its rows not waiting with GPUs. ``rows_view``: the report's rows that ran (for the
    jobs after the span). ``status``: ``reconciled`` (within :data:`RECONCILE_TOLERANCE`),
    ``flagged`` (further apart; ``jobs_to_check`` names up to ``limit`` jobs with GPU time in
    the span, those cut by its edges or still running first, then by GPU-hours, then by JobID)
    or ``not_reconciled`` (the span is empty or holds no GPU time on either side; ``note`` says
    why, e.g. the jobs ran after sreport's last hour)."""
    out = {"window": span.as_dict(), "jobs_gpu_hours": None, "sreport_gpu_hours": _num(sreport_gpu_hours),
           "difference": None, "relative": None, "flagged": False, "status": "not_reconciled",
           "note": "", "jobs_to_check": []}
    upto = f"{span.end:%Y-%m-%d %H:00} UTC"
    has_span = span_rows is not None and span.end > span.start
    sel = f'FROM "{span_rows}" WHERE NOT waiting AND gpus > 0' if has_span else ""
    rec_h = float(con.execute(f"SELECT coalesce(sum(gpu_hours), 0.0) {sel}").fetchall()[0][0]) if has_span else 0.0
    out["jobs_gpu_hours"] = _num(rec_h)
    if rec_h <= 0 and sreport_gpu_hours <= 0:
        later = con.execute(f'SELECT count(*) FROM "{rows_view}" WHERE gpus > 0 AND gpu_hours > 0').fetchall()[0][0]
        if span.end <= span.start:
            out["note"] = "sreport covers no whole hour of the window yet"
        elif later:
            out["note"] = f"sreport covers up to {upto}, the jobs ran after"
        else:
            out["note"] = "no GPU job time in the window"
        return out
    diff = rec_h - sreport_gpu_hours
    rel = abs(diff) / sreport_gpu_hours if sreport_gpu_hours > 0 else None
    flagged = rel is None or rel > RECONCILE_TOLERANCE
    out.update(difference=_num(diff), relative=_num(rel) if rel is not None else None,
               flagged=bool(flagged), status="flagged" if flagged else "reconciled")
    if flagged and has_span:
        s0, s1 = utc(span.start).timestamp(), utc(span.end).timestamp()
        cut = f'coalesce(provisional OR start < {s0!r} OR "end" IS NULL OR "end" > {s1!r}, false)'
        rows = con.execute(f"""SELECT job_id, gpu_hours, {cut} AS c {sel}
                               ORDER BY c DESC, gpu_hours DESC, job_id, start LIMIT {int(limit)}""").fetchall()
        out["jobs_to_check"] = [f"{j} ({g:.3g} GPU-h{', cut by the span' if c else ''})" for j, g, c in rows]
    if flagged and sreport_gpu_hours <= 0:
        out["note"] = (f"sreport reports no GPU time up to {upto}: has slurmdbd rolled these hours "
                       f"up (sacctmgr -i rollup, or --rollup)?")
    return out


def job_facts(con, rows_view: str) -> dict:
    """What sreport's breakdown inputs must agree with, from the rows (``cluster``, ``nodelist``,
    ``start``): ``{"clusters"`` (the set of non-empty names), ``"nodes"`` (the set of node names
    the jobs ran on: each distinct NodeList expanded; one that is not a hostlist names none),
    ``"last_start"`` (the latest Start, aware UTC, or None)}``."""
    from slurmkit import hostlist

    (clusters, lists, last), = con.execute(f"""
        SELECT list(DISTINCT cluster) FILTER (WHERE coalesce(cluster, '') <> ''),
               list(DISTINCT nodelist) FILTER (WHERE nodelist IS NOT NULL), max(start)
        FROM "{rows_view}" """).fetchall()
    nodes = set()
    for nl in lists or []:
        try:
            nodes.update(hostlist.expand_nodelist(str(nl)))
        except hostlist.BadHostlist:
            continue
    return {"clusters": set(clusters or []), "nodes": nodes,
            "last_start": None if last is None else pd.Timestamp(last, unit="s", tz="UTC")}


def usage_hours(con, rows_view: str, start: float, end: float) -> pd.DataFrame:
    """Per (account, user), sorted: the GPU-hours and CPU-hours of the rows that ran (``ran``)
    inside ``[start, end)`` (epoch s): their GPUs / CPUs x the seconds from ``start`` to
    ``stop`` clipped to it (no Start: none; no stop: to the window's start, none), None
    where every count of the pair is unknown. Columns ``account``, ``user``, ``gpu_hours``,
    ``cpu_hours``: the account tree's usage (:func:`slurmkit.report.breakdown.account_tree`)."""
    s, e = float(start), float(end)
    secs = (f"CASE WHEN ran THEN greatest(least(greatest(coalesce(stop, {s!r}), {s!r}), {e!r})"
            f" - least(greatest(coalesce(start, {e!r}), {s!r}), {e!r}), 0.0) ELSE 0.0 END")
    return con.execute(f"""
        SELECT coalesce(account, '') AS account, coalesce("user", '') AS "user",
               sum(x * gpus / 3600.0) AS gpu_hours, sum(x * ncpus / 3600.0) AS cpu_hours
        FROM (SELECT *, {secs} AS x FROM "{rows_view}")
        GROUP BY ALL ORDER BY account, "user" """).df()


def job_seconds(con, rows_view: str, tres: str, reservations: set[str], start: float, end: float,
                bounds: np.ndarray, now: float) -> tuple[np.ndarray, np.ndarray, bool]:
    """sreport's breakdown's job figures of TRES ``tres`` (``gres/gpu``: ``gpus``, ``cpu``:
    ``ncpus``) per bin of ``bounds`` (:func:`time_bins`, seconds x count): ``(allocated,
    planned, known)``. Allocated: the rows that ran, outside the ``reservations`` (names: their
    jobs are in the reservation's figure), from Start to stop clipped to ``[start, end)``;
    planned (CPUs only, else zeros): the rows with an Eligible outside the reservations, from
    Eligible to Start (else stop, else ``now``) clipped, x the CPUs asked for (ReqTRES, else
    allocated) x their pending tasks (at least 1); ``known``: every row that ran has a count."""
    col = {"gres/gpu": "gpus", "cpu": "ncpus"}.get(tres)
    nb = len(bounds) - 1
    if col is None:
        return np.zeros(nb), np.zeros(nb), True
    s, e = float(start), float(end)
    names = ", ".join(f"'{_q(r)}'" for r in sorted(reservations))
    out_resv = f"NOT coalesce(reservation IN ({names}), false)" if names else "true"
    run = f'FROM "{rows_view}" WHERE ran AND {out_resv} AND start IS NOT NULL AND stop IS NOT NULL'
    unknown = con.execute(f"SELECT count(*) FILTER (WHERE {col} IS NULL) {run}").fetchall()[0][0]

    def clip(x: str) -> str:
        return f"least(greatest({x}, {s!r}), {e!r})"

    allocated = time_bins(con, f"SELECT {clip('start')} AS lo, {clip('stop')} AS hi, coalesce({col}, 0) AS w {run}",
                          bounds)
    planned = np.zeros(nb)
    if tres == "cpu":
        planned = time_bins(con, f"""
            SELECT {clip('eligible')} AS lo, {clip(f'coalesce(start, stop, {float(now)!r})')} AS hi,
                   coalesce(req_cpus, ncpus) * greatest(coalesce(pending_tasks, 0), 1) AS w
            FROM "{rows_view}" WHERE eligible IS NOT NULL AND {out_resv} AND coalesce(req_cpus, ncpus) IS NOT NULL""",
                            bounds)
    return allocated, planned, not unknown


def reservation_job_seconds(con, rows_view: str, name: str, tres: str, lo: float, hi: float,
                            bounds: np.ndarray) -> np.ndarray:
    """Per bin of ``bounds`` (:func:`time_bins`): the TRES ``tres`` seconds of the rows that ran
    in reservation ``name`` (sacct Reservation), Start to stop clipped to ``[lo, hi)``."""
    col = "gpus" if tres == "gres/gpu" else "ncpus"

    def clip(x: str) -> str:
        return f"least(greatest({x}, {float(lo)!r}), {float(hi)!r})"

    return time_bins(con, f"""SELECT {clip('start')} AS lo, {clip('stop')} AS hi, coalesce({col}, 0) AS w
                              FROM "{rows_view}" WHERE ran AND start IS NOT NULL AND reservation = '{_q(name)}'""",
                     bounds)


def unknown_figures(con, rows_view: str, capacity_gpus) -> dict[str, str]:
    """The figures whose inputs the rows that ran (``rows_view``) lack altogether, each with the
    figure whose absence makes it unknown (the reason's key): ``gpu_hours`` (no row has a GPU
    count), ``cpu_hours`` (no row has a CPU count), ``energy_kwh`` (no row has an energy source),
    ``gpu_utilization`` (GPU hours unknown, or rows with GPUs, none with a utilization ``gu``),
    ``utilization`` (no capacity: ``utilization``; else unknown GPU-hours: ``gpu_hours``). What
    is derived from one (waste, idle jobs, efficiency, cost) is unknown with it. With no row,
    only the utilization can be."""
    n, ng, nc, ne, gp, gpu_util = con.execute(f"""
        SELECT count(*), count(gpus), count(ncpus), count(*) FILTER (WHERE energy_source <> 'none'),
               count(*) FILTER (WHERE gpus > 0), count(*) FILTER (WHERE gpus > 0 AND gu IS NOT NULL)
        FROM "{rows_view}" """).fetchall()[0]
    out = {}
    if n:
        if not ng:
            out["gpu_hours"] = "gpu_hours"
        if not nc:
            out["cpu_hours"] = "cpu_hours"
        if not ne:
            out["energy_kwh"] = "energy_kwh"
        if "gpu_hours" in out or (gp and not gpu_util):
            out["gpu_utilization"] = "gpu_utilization"
    if not capacity_gpus or "gpu_hours" in out:
        out["utilization"] = "utilization" if not capacity_gpus else "gpu_hours"
    return out
