"""Reports over any period (a month, a quarter, a year, ``--start/--end``) from the Parquet store.

The weekly report (:mod:`slurmkit.report.weekly`) holds a week's rows in memory (pandas); a
quarter or a year of a large cluster does not fit. Here the same figures are computed by
DuckDB (embedded) directly over the store's daily allocation files
(``<store>/<cluster>/<YYYY-MM-DD>.parquet``, :mod:`slurmkit.accounting.store`), with a memory
limit and a spill folder, so memory does not grow with the period. Nothing is pulled from
sacct: days missing from the store are listed (``days_missing``), not fetched.

Definitions are the weekly report's (docs/report.md, :func:`slurmkit.report.usage.allocations`
and :func:`slurmkit.report.weekly.build_report`), evaluated per window: the whole period
(``window_id`` 0) and each part of the breakdown (ISO weeks or calendar months, clipped to the
period). A window's figures are exactly what the weekly report gives for that window:

- rows: one copy per (cluster, JobIDRaw, Submit, Start), the latest pull (as
  :meth:`~slurmkit.accounting.store.Store.load`);
- a row belongs to a window when it touches it (its Start, else Submit, else End, before the
  window's end, and its End — a running job's ``now``, never past Start + Timelimit — at or
  after its start), or is a pending array record submitted before its end; pending rows
  (PENDING without Start, pending array records) are not runs;
- ``in_window_s`` = ``run_s`` (ElapsedRaw; End − Start without it) × the share of
  [Start, End) inside the window; ``gpu_hours`` = GPUs × in_window_s / 3600;
  ``cpu_hours`` = NCPUS × in_window_s / 3600;
- wasted: State in :data:`~slurmkit.report.usage.WASTE_STATES`, or an earlier attempt (by
  Start) of a job with several attempts in the window;
- ``wait_s`` = Start − (Eligible, else Submit) of rows started in the window, quantiles with
  linear interpolation (pandas' and DuckDB's ``quantile_cont`` are the same).

Energy, efficiency (steps), the hourly curve, utilization and downtime are not in the period
report: they need the spool, the step rows or node events (left for later).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from slurmkit.accounting.frame import GPU_SOURCES
from slurmkit.errors import InputError
from slurmkit.report.usage import GPU_BUCKETS, WASTE_STATES
from slurmkit.report.weekly import NEVER_STARTED_LINE, REQUEUED_LINE, UNKNOWN_WHY, WAIT_BIN_LABELS, WAIT_BINS
from slurmkit.report.window import Window, WindowError, iso_z, parse_when

#: DuckDB's memory limit when none is given: the aggregation spills past it.
DEFAULT_MEMORY_LIMIT = "1GB"

#: The per-window group tables and the column each groups by.
GROUPS = (("by_user", "user"), ("by_account", "account"), ("by_partition", "partition"),
          ("by_qos", "qos"), ("by_gpu_type", "gpu_type"))

_QUANTILES = (("p50_s", 0.5), ("p90_s", 0.9), ("p95_s", 0.95), ("p5_s", 0.05), ("p25_s", 0.25),
              ("p75_s", 0.75), ("max_s", 1.0))


@dataclass(frozen=True)
class Period:
    """A report period: ``window`` ([start, end), UTC), its ``label`` (``2026-11``,
    ``2026-Q4``, ``2026``, or ``<start>..<end>``) and the breakdown ``by`` (``week``:
    ISO weeks, ``month``: calendar months, each clipped to the window)."""

    window: Window
    label: str
    by: str

    def parts(self) -> list[tuple[str, Window]]:
        """The breakdown's windows, in order: ``(label, Window)`` — ``2026-W45`` or ``2026-11``,
        clipped to the period (a month's first and last ISO weeks may be partial)."""
        s, e = self.window.start, self.window.end
        out = []
        if self.by == "week":
            t = dt.datetime.combine(s.date() - dt.timedelta(days=s.weekday()), dt.time(), dt.timezone.utc)
            while t < e:
                nxt = t + dt.timedelta(days=7)
                y, w, _ = t.isocalendar()
                out.append((f"{y}-W{w:02d}", Window(max(t, s), min(nxt, e))))
                t = nxt
        else:
            t = dt.datetime(s.year, s.month, 1, tzinfo=dt.timezone.utc)
            while t < e:
                nxt = _add_months(t, 1)
                out.append((f"{t:%Y-%m}", Window(max(t, s), min(nxt, e))))
                t = nxt
        return out


def _add_months(t: dt.datetime, n: int) -> dt.datetime:
    m = t.month - 1 + n
    return t.replace(year=t.year + m // 12, month=m % 12 + 1, day=1)


def parse_period(month: str | None = None, quarter: str | None = None, year: str | None = None,
                 start: str | None = None, end: str | None = None, by: str | None = None) -> Period:
    """The period of exactly one of ``month`` (``2026-11``), ``quarter`` (``2026-Q4``),
    ``year`` (``2026``) or ``start`` + ``end`` (end exclusive); ``by``: ``week``
    or ``month`` (default: weeks for a month or a span up to 62 days, months otherwise).
    Raises :class:`~slurmkit.report.window.WindowError` naming the option."""
    given = [n for n, v in (("--month", month), ("--quarter", quarter), ("--year", year),
                            ("--start", start or end)) if v]
    if len(given) != 1:
        raise WindowError(given[1] if len(given) > 1 else "--month",
                          "give one of --month, --quarter, --year or --start/--end")
    utc = dt.timezone.utc
    if month:
        m = re.fullmatch(r"(\d{4})-(\d{1,2})", month.strip())
        if not m or not 1 <= int(m.group(2)) <= 12:
            raise WindowError("--month", f"not a month: {month!r} (expected e.g. 2026-11)")
        s = dt.datetime(int(m.group(1)), int(m.group(2)), 1, tzinfo=utc)
        w, label = Window(s, _add_months(s, 1)), f"{s:%Y-%m}"
    elif quarter:
        m = re.fullmatch(r"(\d{4})-?Q([1-4])", quarter.strip(), re.I)
        if not m:
            raise WindowError("--quarter", f"not a quarter: {quarter!r} (expected e.g. 2026-Q4)")
        s = dt.datetime(int(m.group(1)), 3 * int(m.group(2)) - 2, 1, tzinfo=utc)
        w, label = Window(s, _add_months(s, 3)), f"{m.group(1)}-Q{m.group(2)}"
    elif year:
        if not re.fullmatch(r"\d{4}", year.strip()):
            raise WindowError("--year", f"not a year: {year!r} (expected e.g. 2026)")
        s = dt.datetime(int(year), 1, 1, tzinfo=utc)
        w, label = Window(s, s.replace(year=s.year + 1)), f"{s.year}"
    else:
        if not (start and end):
            raise WindowError("--start" if end else "--end", "give both --start and --end")
        s = parse_when(start, "--start")
        e = parse_when(end, "--end")
        if e <= s:
            raise WindowError("--end", f"{iso_z(e)} is not after --start ({iso_z(s)})")
        w, label = Window(s, e), f"{iso_z(s)}..{iso_z(e)}"
    if by is None:
        by = "week" if (month or (start and w.hours <= 62 * 24)) else "month"
    if by not in ("week", "month"):
        raise WindowError("--by", f"unknown breakdown {by!r} (week or month)")
    return Period(w, label, by)


def _store_days(store, window: Window) -> tuple[list[tuple[str, str]], list[str], list[str], dict]:
    """``(files, days missing, days not final, data quality)`` of ``store``'s days in
    ``window``: ``files`` a list of ``(day, allocs.parquet)``; data quality summed from the
    manifest (each day's pull: rows read, skipped, repaired)."""
    man = store.manifest()
    files, missing, open_days = [], [], []
    dq = {"rows_read": 0, "skipped": {}, "repaired": {}}
    for d0, _ in window.days():
        name = f"{d0:%Y-%m-%d}"
        path, _steps = store.day_files(name)
        if name not in man or not path.exists():
            missing.append(name)
            continue
        files.append((name, str(path)))
        entry = man[name]
        if not entry.get("final"):
            open_days.append(name)
        d = entry.get("dq", {})
        dq["rows_read"] += int(d.get("rows_read", 0))
        for kind in ("skipped", "repaired"):
            for k, v in d.get(kind, {}).items():
                dq[kind][k] = dq[kind].get(k, 0) + int(v)
    return files, missing, open_days, dq


def _epoch(t) -> float:
    return pd.Timestamp(t).timestamp()


def connect(memory_limit: str = DEFAULT_MEMORY_LIMIT, temp_dir: str | None = None, threads: int | None = None):
    """An in-memory DuckDB connection that spills to ``temp_dir`` (default: a folder under
    the system's temp) past ``memory_limit`` (DuckDB's syntax: ``1GB``, ``512MB``)."""
    import duckdb

    con = duckdb.connect(":memory:")
    con.execute(f"SET memory_limit = '{memory_limit}'")
    con.execute(f"SET temp_directory = '{_q(temp_dir or tempfile.gettempdir())}'")
    con.execute(f"SET threads = {int(threads or os.cpu_count() or 1)}")
    con.execute("SET preserve_insertion_order = false")
    return con


def _q(text: str) -> str:
    return str(text).replace("'", "''")


#: ``gpu_source`` of a GPU count taken from ReqTRES (what was asked, not what was allocated).
REQUESTED = GPU_SOURCES[2]

#: The columns read from the store's allocation files (epoch seconds for times).
_COLUMNS = """cluster::VARCHAR AS cluster, key_id::VARCHAR AS key_id, state::VARCHAR AS state,
    "user"::VARCHAR AS "user", account::VARCHAR AS account, partition::VARCHAR AS partition,
    qos::VARCHAR AS qos, gpu_type::VARCHAR AS gpu_type, gpu_source::VARCHAR AS gpu_source,
    epoch_us(submit::TIMESTAMPTZ) / 1e6 AS submit, epoch_us(eligible::TIMESTAMPTZ) / 1e6 AS eligible,
    epoch_us(start::TIMESTAMPTZ) / 1e6 AS start, epoch_us("end"::TIMESTAMPTZ) / 1e6 AS "end",
    elapsed_s::DOUBLE AS elapsed_s, timelimit_s::DOUBLE AS timelimit_s, ncpus::DOUBLE AS ncpus,
    gpus::DOUBLE AS gpus, req_gpus::DOUBLE AS req_gpus, coalesce(pending_tasks, 0)::BIGINT AS pending_tasks,
    epoch_us(pulled_at::TIMESTAMPTZ) AS pulled_us"""


def _load_rows(con, files: dict[str, list[tuple[str, str]]]) -> None:
    """View ``b``: the stored allocation rows of ``files`` (store cluster -> ``[(day,
    allocs.parquet)]``), one copy per (cluster, JobIDRaw, Submit, Start) — the latest pull,
    ties to the later day, as :meth:`~slurmkit.accounting.store.Store.load` keeps — with
    ``sc`` (the store's cluster), ``jid`` (the job identity: store cluster, sacct's Cluster and
    JobIDRaw, as :func:`~slurmkit.accounting.frame.identity_codes` reads it: a number when
    every key of the store's cluster is one, so ``012`` is ``12``) and ``jh`` (a hash of it).

    The copies: a row whose times (Submit, Eligible, Start, End) all lie in the day of the
    file that holds it is in no other day's pull (a day's pull lists the jobs that touch the
    day), so only the other rows (a job over midnight, a running job) and the rows sharing a
    key with them are compared (:data:`DEDUP_RULE` in docs/report.md): the window sort runs
    over a small part of the store."""
    parts = []
    for sc, fs in files.items():
        for day, path in fs:
            d0 = _epoch(f"{day}T00:00:00Z")
            parts.append(f"""SELECT '{_q(sc)}' AS sc, {d0!r}::DOUBLE AS fday, {_COLUMNS}
                             FROM read_parquet('{_q(path)}')""")
    con.execute("CREATE TEMP VIEW raw AS\n" + "\nUNION ALL\n".join(parts))
    con.execute("""CREATE TEMP VIEW raw2 AS SELECT *,
        "end" IS NOT NULL AND least(submit, eligible, start, "end") >= fday
            AND greatest(submit, eligible, start, "end") < fday + 86400 AS home
        FROM raw""")
    # the rows that may have copies in other days' files, and the keys they hold
    con.execute("""CREATE TEMP TABLE away AS SELECT * FROM raw2 WHERE NOT home""")
    con.execute("""CREATE TEMP TABLE away_keys AS SELECT DISTINCT sc, cluster, key_id, submit, start FROM away""")
    con.execute("""CREATE TEMP TABLE kept AS
        SELECT * EXCLUDE (rn) FROM (
            SELECT *, row_number() OVER (PARTITION BY sc, cluster, key_id, submit, start
                                         ORDER BY pulled_us DESC NULLS FIRST, fday DESC) AS rn
            FROM (SELECT * FROM away
                  UNION ALL
                  SELECT r.* FROM raw2 r SEMI JOIN away_keys k
                      ON r.sc = k.sc AND r.cluster IS NOT DISTINCT FROM k.cluster AND r.key_id = k.key_id
                     AND r.submit IS NOT DISTINCT FROM k.submit AND r.start IS NOT DISTINCT FROM k.start
                  WHERE r.home))
        WHERE rn = 1""")
    # every key of a store cluster a number below 2**40: the number is the identity (as the
    # pandas path casts it), else the text
    textual = [r[0] for r in con.execute("""
        SELECT sc FROM raw GROUP BY sc
        HAVING count(*) FILTER (WHERE TRY_CAST(key_id AS BIGINT) IS NULL
                                 OR TRY_CAST(key_id AS BIGINT) NOT BETWEEN 0 AND 1099511627775) > 0""").fetchall()]
    text_sql = "sc IN (" + ", ".join(f"'{_q(s)}'" for s in textual) + ")" if textual else "false"
    ident = f"""CASE WHEN {text_sql} THEN key_id ELSE CAST(TRY_CAST(key_id AS BIGINT) AS VARCHAR) END"""
    con.execute(f"""CREATE TEMP VIEW b AS
        SELECT *, sc || chr(31) || coalesce(cluster, '') || chr(31) || ({ident}) AS jid,
               hash(sc, coalesce(cluster, ''), {ident}) AS jh
        FROM (SELECT * EXCLUDE (home) FROM raw2 r WHERE home AND NOT EXISTS (
                  SELECT 1 FROM away_keys k
                  WHERE r.sc = k.sc AND r.cluster IS NOT DISTINCT FROM k.cluster AND r.key_id = k.key_id
                    AND r.submit IS NOT DISTINCT FROM k.submit AND r.start IS NOT DISTINCT FROM k.start)
              UNION ALL
              SELECT * EXCLUDE (home) FROM kept)""")


def _rows_sql(windows: list[tuple[int, float, float, str]], now: float) -> str:
    """The per (row, window) relation over view ``b`` (:func:`_load_rows`): each row once per
    window it belongs to, with the columns of :func:`slurmkit.report.usage.allocations` and
    :func:`slurmkit.report.weekly.build_report` (each rule as they state it: docs/report.md).
    ``windows``: ``(wid, start, end, scope)``, epoch s; ``scope`` "" (every cluster) or one
    store cluster. ``multi``: the job has several rows in the store's days (its flags need the
    job's other rows); ``requeued``: not the job's final attempt in the window (by Start, then
    Submit, unset last); ``last_run``: the job's last run in the window (its outcome line);
    ``wait_first``: the job's first attempt that started in the window."""
    wins = ", ".join(f"({i}, {s!r}::DOUBLE, {e!r}::DOUBLE, '{_q(sc)}')" for i, s, e, sc in windows)
    waste = ", ".join(f"'{s}'" for s in WASTE_STATES)
    bucket = " ".join(f"WHEN ceil(coalesce(req_gpus, gpus, 0)) <= {hi} THEN '{label}'"
                      for lo, hi, label in GPU_BUCKETS if lo > 0 and math.isfinite(hi))
    cols = f"""wid, jid, multi, state, "user", account, partition, qos, gpu_type, gpus, ncpus, gpu_source,
           eligible, ran, waiting, provisional,
           gpus * in_window_s / 3600.0 AS gpu_hours,
           ncpus * in_window_s / 3600.0 AS cpu_hours,
           state IN ({waste}) AS waste_state,
           CASE WHEN ran AND start >= ws AND start < we AND coalesce(eligible, submit) IS NOT NULL
                THEN greatest(start - coalesce(eligible, submit), 0) END AS wait0,
           CASE WHEN ceil(coalesce(req_gpus, gpus, 0)) <= 0 THEN '0' {bucket} ELSE '9+' END AS gpu_bucket"""
    return f"""
    WITH multi_jobs AS (SELECT jh FROM b GROUP BY jh HAVING count(*) > 1
    ), anyelig AS (SELECT sc AS esc, bool_or(eligible IS NOT NULL) AS any_elig FROM b GROUP BY sc
    ), base AS (
        SELECT b.*,
               CASE WHEN "end" IS NULL AND isfinite(timelimit_s) AND start + timelimit_s < {now!r}
                    THEN start + timelimit_s ELSE coalesce("end", {now!r}) END AS stop0,
               coalesce(start, submit, "end") AS t_lo,
               start IS NOT NULL AND NOT coalesce(start > "end", false)
                 AND NOT (coalesce(start = "end", false) AND NOT coalesce(elapsed_s > 0, false)
                          AND ((eligible IS NOT NULL AND start < eligible) OR (eligible IS NULL AND any_elig)))
                 AS ran,
               pending_tasks > 0 OR (state = 'PENDING' AND start IS NULL) AS waiting,
               jh IN (SELECT jh FROM multi_jobs) AS multi
        FROM b JOIN anyelig ON b.sc = anyelig.esc
    ), win(wid, ws, we, scope) AS (VALUES {wins}
    ), j AS (
        SELECT b.*, w.wid, w.ws, w.we,
               CASE WHEN ran AND stop0 < start THEN start ELSE stop0 END AS stop
        FROM base b JOIN win w
          ON (w.scope = '' OR w.scope = b.sc)
         AND (b.t_lo IS NOT NULL OR b.pending_tasks > 0)
         AND ((b.t_lo < w.we AND b.stop0 >= w.ws)
              OR (b.pending_tasks > 0 AND (b.submit IS NULL OR b.submit < w.we)))
    ), u AS (
        SELECT *,
               CASE WHEN ran THEN greatest(least(stop, we) - greatest(start, ws), 0) ELSE 0 END AS overlap,
               stop - start AS full_s
        FROM j
    ), v AS (
        SELECT *,
               coalesce(CASE WHEN elapsed_s IS NOT NULL AND "end" IS NOT NULL THEN elapsed_s ELSE full_s END,
                        full_s, 0)
               * coalesce(CASE WHEN full_s > 0 THEN overlap / full_s ELSE 0 END, 0) AS in_window_s,
               ran AND "end" IS NULL AS provisional
        FROM u
    )
    SELECT {cols}, false AS requeued, true AS last_run, true AS wait_first FROM v WHERE NOT multi
    UNION ALL
    SELECT {cols},
           row_number() OVER (PARTITION BY wid, jid ORDER BY start DESC NULLS FIRST, submit DESC NULLS FIRST) > 1,
           NOT waiting AND ran AND row_number() OVER (PARTITION BY wid, jid, NOT waiting AND ran
                                                      ORDER BY start DESC NULLS FIRST) = 1,
           row_number() OVER (PARTITION BY wid, jid, ran AND start >= ws AND start < we ORDER BY start) = 1
    FROM v WHERE multi
    """


def _num(x):
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else round(x, 9)


def _fetch(con, sql: str) -> pd.DataFrame:
    return con.execute(sql).df()


def _jobs(cond: str) -> str:
    """Distinct jobs among the rows where ``cond``: a job with one row in the store is one row
    (a count, no DISTINCT over millions of rows), the others by their identity."""
    return f"(count(*) FILTER (WHERE NOT multi AND {cond}) + count(DISTINCT jid) FILTER (WHERE multi AND {cond}))"


#: The totals' integer figures.
_INT_TOTALS = ("jobs", "gpu_jobs", "allocation_rows", "requeued_attempts", "provisional_jobs",
               "allocation_rows_gpus_unknown")


def _aggregate(con, per: dict) -> None:
    """Fill ``per`` (window id -> its section dict) from table ``rw``: the definitions of
    :func:`slurmkit.report.weekly.build_report` over the runs (not waiting, started)."""
    runs = "FROM rw WHERE run"
    tot = _fetch(con, f"""
        SELECT wid, {_jobs("true")} AS jobs, {_jobs("gpus > 0")} AS gpu_jobs,
               count(*) AS allocation_rows, count(*) FILTER (WHERE requeued) AS requeued_attempts,
               count(gpus) AS gpus_known, count(ncpus) AS ncpus_known,
               coalesce(sum(gpu_hours), 0) AS gpu_hours, coalesce(sum(cpu_hours), 0) AS cpu_hours,
               coalesce(sum(waste), 0) AS wasted_gpu_hours,
               {_jobs("provisional")} AS provisional_jobs,
               coalesce(sum(prov), 0) AS provisional_gpu_hours,
               coalesce(sum(gpu_hours) FILTER (WHERE gpu_source = '{REQUESTED}'), 0) AS gpu_hours_from_request,
               count(*) FILTER (WHERE gpus IS NULL) AS allocation_rows_gpus_unknown
        {runs} GROUP BY wid""")
    for r in tot.to_dict("records"):
        t = per[r["wid"]]["totals"]
        gpu_known = r["gpus_known"] > 0
        unknown = {}
        if not gpu_known:
            unknown["gpu_hours"] = UNKNOWN_WHY["gpu_hours"]
        if r["ncpus_known"] == 0:
            unknown["cpu_hours"] = UNKNOWN_WHY["cpu_hours"]
        per[r["wid"]]["unknown"] = unknown
        for k in t:
            v = r[k]
            if k in ("gpu_jobs", "gpu_hours", "wasted_gpu_hours", "provisional_gpu_hours",
                     "gpu_hours_from_request") and not gpu_known:
                t[k] = None
            elif k == "cpu_hours" and "cpu_hours" in unknown:
                t[k] = None
            else:
                t[k] = int(v) if k in _INT_TOTALS else _num(v)
    # the five group tables in one pass: by GPU type counts the GPU rows only
    sets = ", ".join(f'(wid, "{col}")' for _, col in GROUPS)
    aggs = []
    for suffix, cond in (("", "true"), ("_g", "gpus > 0")):
        aggs.append(f"""{_jobs(cond)} AS jobs{suffix},
           sum(gpu_hours) FILTER (WHERE {cond}) AS gpu_hours{suffix},
           sum(cpu_hours) FILTER (WHERE {cond}) AS cpu_hours{suffix},
           sum(waste) FILTER (WHERE {cond}) AS wasted{suffix},
           sum(prov) FILTER (WHERE {cond}) AS prov{suffix},
           count(*) FILTER (WHERE {cond}) AS n{suffix}""")
    g = _fetch(con, f"""
        SELECT wid, {", ".join(f'"{col}"' for _, col in GROUPS)},
               {", ".join(f'GROUPING("{col}") = 0 AS is_{col}' for _, col in GROUPS)}, {", ".join(aggs)}
        {runs} GROUP BY GROUPING SETS ({sets})""")
    for key, col in GROUPS:
        sfx = "_g" if col == "gpu_type" else ""
        # a row without the group's value (no user, no GPU type) is in no group, as in pandas
        t = g[g[f"is_{col}"].astype(bool) & (g[f"n{sfx}"] > 0) & g[col].notna()]
        rows = [{col: r[col], "jobs": int(r[f"jobs{sfx}"]), "gpu_hours": _num(r[f"gpu_hours{sfx}"]),
                 "cpu_hours": _num(r[f"cpu_hours{sfx}"]), "wasted_gpu_hours": _num(r[f"wasted{sfx}"]),
                 "provisional_gpu_hours": _num(r[f"prov{sfx}"]), "_wid": r["wid"]}
                for r in t.to_dict("records")]
        # largest GPU-hours first, then CPU-hours (unknown last), then the name
        rows.sort(key=lambda d: (d["gpu_hours"] is None, -(d["gpu_hours"] or 0.0),
                                 d["cpu_hours"] is None, -(d["cpu_hours"] or 0.0), str(d[col])))
        for d in rows:
            per[d.pop("_wid")][key].append(d)
    out = _fetch(con, f"""
        SELECT wid, CASE WHEN requeued THEN '{REQUEUED_LINE}' ELSE state END AS line,
               count(*) FILTER (WHERE last_run) AS jobs, count(*) AS attempts,
               sum(gpu_hours) AS gpu_hours, sum(waste) AS wasted
        {runs} GROUP BY wid, line""")
    states = _fetch(con, f"""SELECT wid, state, count(*) AS n {runs} AND requeued GROUP BY wid, state""")
    out = out.assign(_last=out["line"] == REQUEUED_LINE, _name=out["line"].astype(str))
    for r in out.sort_values(["wid", "_last", "_name"]).to_dict("records"):
        o = {"state": r["line"], "jobs": int(r["jobs"]), "attempts": int(r["attempts"]), "rows": int(r["attempts"]),
             "gpu_hours": _num(r["gpu_hours"]), "wasted_gpu_hours": _num(r["wasted"])}
        if r["line"] == REQUEUED_LINE:
            sel = states[states["wid"] == r["wid"]].sort_values("state")
            o["states"] = {str(s): int(n) for s, n in zip(sel["state"], sel["n"])}
        per[r["wid"]]["outcomes"].append(o)
    # jobs that ended before they started: their own line, not in any figure above
    con.execute("CREATE TEMP TABLE nv AS SELECT wid, jid, state FROM rw WHERE NOT waiting AND NOT ran")
    con.execute("""CREATE TEMP TABLE nv2 AS SELECT * FROM nv ANTI JOIN (
                       SELECT wid, jid FROM rw WHERE run AND jid IN (SELECT jid FROM nv)) r USING (wid, jid)""")
    never = _fetch(con, "SELECT wid, state, count(*) AS attempts FROM nv2 GROUP BY wid, state")
    jobs_never = _fetch(con, "SELECT wid, count(DISTINCT jid) AS jobs FROM nv2 GROUP BY wid")
    for wid, sel in never.groupby("wid"):
        sel = sel.sort_values("state")
        jobs = int(jobs_never.loc[jobs_never["wid"] == wid, "jobs"].iloc[0])
        n = int(sel["attempts"].sum())
        per[wid]["outcomes"].append({"state": NEVER_STARTED_LINE, "jobs": jobs, "attempts": n, "rows": n,
                                     "gpu_hours": 0.0, "wasted_gpu_hours": 0.0, "ran": False,
                                     "states": {str(s): int(k) for s, k in zip(sel["state"], sel["attempts"])}})
    # all the quantiles from one sort per group
    qs = "quantile_cont(wait_s, [" + ", ".join(str(q) for _, q in _QUANTILES) + "]) AS q"
    edges = WAIT_BINS[1:-1]
    hist = "[" + ", ".join(
        f"count(*) FILTER (WHERE wait_s >= {lo} AND wait_s < {hi})" if math.isfinite(hi)
        else f"count(*) FILTER (WHERE wait_s >= {lo})"
        for lo, hi in zip((0,) + edges, edges + (math.inf,))) + "]"
    order = {label: i for i, (_, _, label) in enumerate(GPU_BUCKETS)}
    for grouping in ("wid", "wid, partition, gpu_bucket"):
        q = _fetch(con, f"""SELECT {grouping}, count(wait_s) AS n, {qs}, {hist} AS histogram
                            {runs} AND wait_s IS NOT NULL GROUP BY {grouping}""")
        if grouping != "wid":
            q = q.assign(_b=q["gpu_bucket"].map(order)).sort_values(["wid", "partition", "_b"])
        for r in q.to_dict("records"):
            d = {"n": int(r["n"]), **{k: _num(v) for (k, _), v in zip(_QUANTILES, r["q"])}}
            qw = per[r["wid"]]["queue_wait"]
            if grouping == "wid":
                qw["all"] = d
                qw["histogram"] = [int(x) for x in r["histogram"]]
            else:
                qw["by_partition_gpus"].append({"partition": r["partition"], "gpu_bucket": r["gpu_bucket"], **d,
                                                "histogram": [int(x) for x in r["histogram"]]})
    frm = dict(con.execute("SELECT wid, bool_or(eligible IS NOT NULL) FROM rw WHERE run GROUP BY wid").fetchall())
    for wid, w in per.items():
        w["queue_wait"]["from"] = "Eligible" if frm.get(wid) else "Submit"


def _empty_window() -> dict:
    return {"totals": {"jobs": 0, "gpu_jobs": 0, "allocation_rows": 0, "requeued_attempts": 0,
                       "gpu_hours": 0.0, "cpu_hours": 0.0, "wasted_gpu_hours": 0.0,
                       "provisional_jobs": 0, "provisional_gpu_hours": 0.0,
                       "gpu_hours_from_request": 0.0, "allocation_rows_gpus_unknown": 0},
            "unknown": {}, **{k: [] for k, _ in GROUPS}, "outcomes": [],
            "queue_wait": {"all": {"n": 0, **{k: None for k, _ in _QUANTILES}}, "by_partition_gpus": [],
                           "from": "Submit", "bins": list(WAIT_BIN_LABELS), "histogram": [0] * len(WAIT_BIN_LABELS)}}


def period_report(store_root, period: Period, clusters=None, now=None,
                  memory_limit: str = DEFAULT_MEMORY_LIMIT, temp_dir: str | None = None,
                  threads: int | None = None, progress=None) -> dict:
    """The period report (a plain dict, the JSON output; its shape in docs/report.md) from the
    store at ``store_root``, computed in DuckDB over the store's daily allocation files.

    ``clusters``: a store cluster name, a list of them, or None (every cluster in the store,
    :func:`slurmkit.accounting.store.clusters`); "" is ``_default``. ``now``: the time running
    jobs are taken to end (default: the current time). ``progress``: a callable
    ``(message)`` told what is being read and done (the CLI prints it on a terminal).

    ``{"period": {"label", "start", "end", "by"}, "as_of", "clusters", "store": {"root",
    "days", "days_missing", "days_not_final"} (per cluster), "totals", "unknown", "by_user",
    "by_account", "by_partition", "by_qos", "by_gpu_type", "outcomes", "queue_wait",
    "breakdown": [{"label", "start", "end", <the same sections>}], "by_cluster": [{"cluster",
    <the same sections>, "breakdown"}] (several clusters only), "data_quality"}``: hours are
    GPU-/CPU-hours inside the window (the period or the part); wait times in s; an unknown
    figure is None. Raises :class:`~slurmkit.errors.InputError` (the store's folder, DuckDB's
    message naming the file) when a store file cannot be read, and when a cluster asked for is
    not in the store."""
    from slurmkit.accounting import store as S

    t0 = time.monotonic()
    now_ts = pd.Timestamp(now) if now is not None else pd.Timestamp.now(tz="UTC")
    now_ts = now_ts.tz_localize("UTC") if now_ts.tzinfo is None else now_ts.tz_convert("UTC")
    have = S.clusters(store_root)
    if clusters is None:
        names = have or ["_default"]
    else:
        names = [c or "_default" for c in ([clusters] if isinstance(clusters, str) else clusters)]
        lost = [c for c in names if c not in have]
        if lost:
            raise InputError(str(store_root), None, f"cluster(s) {', '.join(lost)} not in the store "
                             f"(it holds: {', '.join(have) or 'none'})")
    files, store_info, dq = {}, {}, {"rows_read": 0, "skipped": {}, "repaired": {}}
    for c in names:
        st = S.Store(store_root, c)
        fs, missing, open_days, cdq = _store_days(st, period.window)
        files[st.cluster] = fs
        store_info[st.cluster] = {"dir": str(st.dir), "days": len(fs), "days_missing": missing,
                                  "days_not_final": open_days}
        dq["rows_read"] += cdq["rows_read"]
        for kind in ("skipped", "repaired"):
            for k, v in cdq[kind].items():
                dq[kind][k] = dq[kind].get(k, 0) + v
    parts = period.parts()
    scopes = [""] + (list(files) if len(files) > 1 else [])
    windows, ids = [], {}
    for scope in scopes:
        for i, w in enumerate([period.window] + [w for _, w in parts]):
            ids[(scope, i)] = len(windows)
            windows.append((len(windows), _epoch(w.start), _epoch(w.end), scope))
    per = {wid: _empty_window() for wid, *_ in windows}
    nfiles = sum(len(f) for f in files.values())
    if nfiles:
        import duckdb

        con = connect(memory_limit, temp_dir, threads)
        try:
            if progress:
                progress(f"reading {nfiles} day file(s) of {len(files)} cluster(s)")
            _load_rows(con, {c: f for c, f in files.items() if f})
            con.execute(f"""CREATE TEMP TABLE rw AS
                SELECT *, NOT waiting AND ran AS run,
                       CASE WHEN waste_state OR requeued OR gpus IS NULL THEN gpu_hours ELSE 0 END AS waste,
                       CASE WHEN provisional OR gpus IS NULL THEN gpu_hours ELSE 0 END AS prov,
                       CASE WHEN wait_first THEN wait0 END AS wait_s
                FROM ({_rows_sql(windows, now_ts.timestamp())})""")
            if progress:
                n = con.execute("SELECT count(*) FROM rw WHERE wid = 0").fetchone()[0]
                progress(f"{n:,} allocation rows in the period, {time.monotonic() - t0:.1f} s; aggregating")
            _aggregate(con, per)
        except (duckdb.IOException, duckdb.InvalidInputException) as exc:
            first = " ".join(str(exc).split())
            raise InputError(str(store_root), None, f"a store file cannot be read: {first}") from None
        finally:
            con.close()

    def section(scope: str) -> dict:
        w0 = per[ids[(scope, 0)]]
        return {**w0, "breakdown": [{"label": label, **w.as_dict(), **per[ids[(scope, i + 1)]]}
                                    for i, (label, w) in enumerate(parts)]}

    out = {
        "period": {"label": period.label, **period.window.as_dict(), "by": period.by},
        "as_of": iso_z(now_ts),
        "clusters": list(files),
        "store": {"root": str(store_root), "clusters": store_info,
                  "days": sum(s["days"] for s in store_info.values()),
                  "days_missing": sorted({d for s in store_info.values() for d in s["days_missing"]}),
                  "days_not_final": sorted({d for s in store_info.values() for d in s["days_not_final"]})},
        **section(""),
        "data_quality": dq,
    }
    if len(scopes) > 1:
        out["by_cluster"] = [{"cluster": c, **section(c)} for c in scopes[1:]]
    if progress:
        progress(f"done in {time.monotonic() - t0:.1f} s")
    return out


def _parts(report: dict) -> list[tuple[str, str, dict]]:
    """``(cluster, part, section)`` of every section: the period (``(period)``) and each part,
    for all clusters (``(all)``) and, with several, for each."""
    out = [("(all)", "(period)", report)] + [("(all)", b["label"], b) for b in report["breakdown"]]
    for c in report.get("by_cluster", []):
        out += [(c["cluster"], "(period)", c)] + [(c["cluster"], b["label"], b) for b in c["breakdown"]]
    return out


def _tables(report: dict) -> dict[str, list[dict]]:
    """CSV tables written by :func:`write_period` (file -> the rows, each flattened, with its
    ``cluster`` and ``part`` columns)."""
    parts = _parts(report)
    out = {"totals.csv": [{"cluster": c, "part": p, **s["totals"]} for c, p, s in parts]}
    for key, _ in GROUPS:
        out[f"{key}.csv"] = [{"cluster": c, "part": p, **g} for c, p, s in parts for g in s[key]]
    out["outcomes.csv"] = [{"cluster": c, "part": p, **{k: v for k, v in o.items() if k not in ("states", "ran")}}
                           for c, p, s in parts for o in s["outcomes"]]
    out["queue_wait.csv"] = [{"cluster": c, "part": p, "partition": "(all)", "gpu_bucket": "(all)",
                              **s["queue_wait"]["all"]} for c, p, s in parts] + \
                            [{"cluster": c, "part": p, **{k: v for k, v in q.items() if k != "histogram"}}
                             for c, p, s in parts for q in s["queue_wait"]["by_partition_gpus"]]
    return out


def render_markdown(report: dict) -> str:
    """The period report as Markdown: totals per part (and per cluster with several), then the
    period's tables. An unknown figure reads "unknown", with why below the totals."""
    from slurmkit.report.render import fmt

    def f(x):
        return "unknown" if x is None else fmt(x)

    p, st = report["period"], report["store"]
    lines = [f"# Usage report {p['label']} ({p['start']} .. {p['end']}, by {p['by']})", "",
             f"As of {report['as_of']}; cluster(s) {', '.join(report['clusters']) or '(none)'}; "
             f"{st['days']} day file(s) from the store"
             + (f"; **{len(st['days_missing'])} day(s) not in the store**: "
                + ", ".join(st["days_missing"][:10]) + (" ..." if len(st["days_missing"]) > 10 else "")
                if st["days_missing"] else "")
             + (f"; {len(st['days_not_final'])} day(s) not final (provisional)" if st["days_not_final"] else ""), ""]
    cols = ["jobs", "gpu_jobs", "gpu_hours", "cpu_hours", "wasted_gpu_hours", "provisional_gpu_hours"]
    lines += ["## Totals", "", "| cluster | part | " + " | ".join(cols) + " |", "|---" * (len(cols) + 2) + "|"]
    for c, label, s in _parts(report):
        label = "**period**" if label == "(period)" else label
        lines.append(f"| {c} | {label} | " + " | ".join(f(s["totals"][k]) for k in cols) + " |")
    for k, why in report["unknown"].items():
        lines.append(f"\n{k.replace('_', ' ')}: unknown ({why})")
    for key, col in GROUPS[:3]:
        lines += ["", f"## By {col}", "", f"| {col} | jobs | GPU-h | CPU-h | wasted GPU-h |", "|---|---|---|---|---|"]
        lines += [f"| {g[col]} | {g['jobs']} | {f(g['gpu_hours'])} | {f(g['cpu_hours'])} | "
                  f"{f(g['wasted_gpu_hours'])} |" for g in report[key]]
    lines += ["", "## Outcomes", "", "| state | jobs | attempts | GPU-h | wasted GPU-h |", "|---|---|---|---|---|"]
    lines += [f"| {o['state']} | {o['jobs']} | {o['attempts']} | {f(o['gpu_hours'])} | {f(o['wasted_gpu_hours'])} |"
              for o in report["outcomes"]]
    qa = report["queue_wait"]["all"]
    lines += ["", "## Queue wait", "", f"{qa['n']} jobs started in the period (wait from "
              f"{report['queue_wait']['from']}); p50 {fmt(qa['p50_s'])} s, "
              f"p95 {fmt(qa['p95_s'])} s, longest {fmt(qa['max_s'])} s.", ""]
    return "\n".join(lines) + "\n"


def write_period(report: dict, outdir, formats=("json", "csv", "md")) -> list[Path]:
    """Write ``period.json``, the CSV tables, ``period.md`` and (``html`` in ``formats``)
    ``period.html`` into ``outdir`` (created); every file is complete before it replaces an
    earlier one. Returns the paths written."""
    import csv
    import io

    from slurmkit.atomicfile import atomic_write

    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    if "json" in formats:
        atomic_write(out / "period.json", json.dumps(report, indent=1, ensure_ascii=False))
        written.append(out / "period.json")
    if "csv" in formats:
        for name, rows in _tables(report).items():
            buf = io.StringIO()
            if rows:
                w = csv.DictWriter(buf, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
                w.writeheader()
                w.writerows(rows)
            atomic_write(out / name, buf.getvalue())
            written.append(out / name)
    if "md" in formats:
        atomic_write(out / "period.md", render_markdown(report))
        written.append(out / "period.md")
    # --- html (issue 27.6, branch h27v): the page and its plots live in report.period_html ---
    if "html" in formats:
        from slurmkit.report.period_html import to_html

        atomic_write(out / "period.html", to_html(report))
        written.append(out / "period.html")
    # --- end html ---
    return written


__all__ = ["Period", "parse_period", "period_report", "write_period", "render_markdown", "connect"]
