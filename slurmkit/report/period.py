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
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from slurmkit.errors import InputError
from slurmkit.report.usage import GPU_BUCKETS, WASTE_STATES
from slurmkit.report.weekly import REQUEUED_LINE, WAIT_BIN_LABELS, WAIT_BINS
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


def _store_days(store_dir: Path, window: Window) -> tuple[list[str], list[str], list[str], dict]:
    """``(allocation files, days missing, days not final, summed data quality)`` of the
    window's UTC days in the store's cluster folder ``store_dir`` (its ``manifest.json``)."""
    try:
        man = json.loads((store_dir / "manifest.json").read_text())
    except FileNotFoundError:
        man = {}
    files, missing, open_days = [], [], []
    dq = {"rows_read": 0, "skipped": {}, "repaired": {}}
    for d0, _ in window.days():
        name = f"{d0:%Y-%m-%d}"
        path = store_dir / f"{name}.parquet"
        if name not in man or not path.exists():
            missing.append(name)
            continue
        files.append(str(path))
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
    con.execute(f"SET temp_directory = '{temp_dir or tempfile.gettempdir()}'")
    con.execute(f"SET threads = {int(threads or os.cpu_count() or 1)}")
    con.execute("SET preserve_insertion_order = false")
    return con


def _sql_list(items) -> str:
    return "[" + ", ".join("'" + str(x).replace("'", "''") + "'" for x in items) + "]"


def _load_rows(con, files: list[str]) -> None:
    """Table ``b``: the stored allocation rows of ``files``, one copy per (cluster, JobIDRaw,
    Submit, Start) — the latest pull, as :meth:`~slurmkit.accounting.store.Store.load` keeps —
    with times as epoch seconds and ``jk``, an integer per job identity (cluster, JobIDRaw):
    JobIDRaw itself when every key is a number and the store holds one cluster (as
    :func:`~slurmkit.accounting.frame.identity_codes` reads it), else a code per distinct pair."""
    con.execute(f"""
        CREATE TEMP TABLE b AS
        SELECT cluster::VARCHAR AS cluster, key_id::VARCHAR AS key_id, TRY_CAST(key_id AS BIGINT) AS jk,
               state::VARCHAR AS state, "user"::VARCHAR AS "user", account::VARCHAR AS account,
               partition::VARCHAR AS partition, qos::VARCHAR AS qos, gpu_type::VARCHAR AS gpu_type,
               epoch_us(submit::TIMESTAMPTZ) / 1e6 AS submit, epoch_us(eligible::TIMESTAMPTZ) / 1e6 AS eligible,
               epoch_us(start::TIMESTAMPTZ) / 1e6 AS start, epoch_us("end"::TIMESTAMPTZ) / 1e6 AS "end",
               elapsed_s::DOUBLE AS elapsed_s, timelimit_s::DOUBLE AS timelimit_s,
               ncpus::DOUBLE AS ncpus, gpus::DOUBLE AS gpus, coalesce(pending_tasks, 0)::BIGINT AS pending_tasks
        FROM read_parquet({_sql_list(files)}, union_by_name = true, filename = true)
        QUALIFY row_number() OVER (PARTITION BY cluster, key_id, submit, start
                                   ORDER BY pulled_at DESC, filename DESC) = 1""")
    bad, clusters = con.execute("""SELECT count(*) FILTER (WHERE jk IS NULL OR jk < 0 OR jk >= 1099511627776),
                                          count(DISTINCT cluster) FROM b""").fetchone()
    if bad or clusters > 1:
        con.execute("""CREATE TEMP TABLE k AS SELECT cluster, key_id, row_number() OVER () AS code
                       FROM (SELECT DISTINCT cluster, key_id FROM b)""")
        con.execute("""CREATE OR REPLACE TEMP TABLE b AS
                       SELECT b.* EXCLUDE (jk), k.code AS jk FROM b JOIN k USING (cluster, key_id)""")


def _rows_sql(windows: list[tuple[int, Window]], now: float) -> str:
    """The per (row, window) relation over table ``b`` (:func:`_load_rows`): each row once per
    window it belongs to, with the usage columns of :func:`slurmkit.report.usage.allocations`.
    ``requeued``: an earlier attempt (by Start) of a job with several rows in the window;
    ``multi``: the job has several rows in the window (its distinct count needs the job);
    ``last_run``: the job's last run (by Start) in the window, the row its outcome line counts
    it on (an earlier attempt whose later one is still pending counts on the requeued line)."""
    wins = ", ".join(f"({i}, {_epoch(w.start)!r}::DOUBLE, {_epoch(w.end)!r}::DOUBLE)" for i, w in windows)
    waste = ", ".join(f"'{s}'" for s in WASTE_STATES)
    bucket = " ".join(f"WHEN ceil(coalesce(gpus, 0)) <= {hi} THEN '{label}'"
                      for lo, hi, label in GPU_BUCKETS if lo > 0 and math.isfinite(hi))
    cols = f"""wid, jk, state, "user", account, partition, qos, gpu_type, gpus,
           gpus * run_s * frac / 3600.0 AS gpu_hours,
           coalesce(ncpus, 0) * run_s * frac / 3600.0 AS cpu_hours,
           ran AND "end" IS NULL AS provisional,
           pending_tasks > 0 OR (state = 'PENDING' AND NOT ran) AS waiting,
           CASE WHEN ran AND start >= ws AND start < we
                THEN greatest(start - coalesce(eligible, submit), 0) END AS wait_s,
           CASE WHEN ceil(coalesce(gpus, 0)) <= 0 THEN '0' {bucket} ELSE '9+' END AS gpu_bucket,
           state IN ({waste}) AS waste_state"""
    return f"""
    WITH multi_jobs AS (SELECT jk FROM b GROUP BY jk HAVING count(*) > 1
    ), base AS (
        SELECT *,
               CASE WHEN "end" IS NULL AND start + timelimit_s < {now!r} AND isfinite(timelimit_s)
                    THEN start + timelimit_s ELSE coalesce("end", {now!r}) END AS stop0,
               coalesce(start, submit, "end") AS t_lo,
               start IS NOT NULL AS ran,
               jk IN (SELECT jk FROM multi_jobs) AS mm
        FROM b
    ), win(wid, ws, we) AS (VALUES {wins}
    ), j AS (
        SELECT b.*, w.wid, w.ws, w.we,
               CASE WHEN ran AND stop0 < start THEN start ELSE stop0 END AS stop
        FROM base b JOIN win w
          ON (b.t_lo IS NOT NULL OR b.pending_tasks > 0)
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
                        full_s, 0) AS run_s,
               coalesce(CASE WHEN full_s > 0 THEN overlap / full_s ELSE 0 END, 0) AS frac
        FROM u
    )
    SELECT {cols}, false AS requeued, false AS multi, true AS last_run FROM v WHERE NOT mm
    UNION ALL
    SELECT {cols},
           row_number() OVER (PARTITION BY wid, jk ORDER BY start DESC NULLS FIRST, submit DESC NULLS FIRST) > 1,
           count(*) OVER (PARTITION BY wid, jk) > 1,
           row_number() OVER (PARTITION BY wid, jk, pending_tasks > 0 OR (state = 'PENDING' AND NOT ran)
                              ORDER BY start DESC NULLS FIRST) = 1
    FROM v WHERE mm
    """


def _num(x):
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else round(x, 9)


def _fetch(con, sql: str) -> pd.DataFrame:
    return con.execute(sql).df()


def period_report(store_root, period: Period, cluster: str = "", now=None,
                  memory_limit: str = DEFAULT_MEMORY_LIMIT, temp_dir: str | None = None,
                  threads: int | None = None) -> dict:
    """The period report (a plain dict, the JSON output) from the store at ``store_root``
    (cluster folder ``cluster`` or ``_default``), computed in DuckDB.

    ``{"period": {"label", "start", "end", "by"}, "as_of", "cluster", "store": {"days",
    "days_missing", "days_not_final", "files"}, "totals", "by_user", "by_account",
    "by_partition", "by_qos", "by_gpu_type", "outcomes", "queue_wait", "breakdown": [{"label",
    "start", "end", "totals", "by_account", "by_partition", "by_user", "outcomes",
    "queue_wait"}, ...], "data_quality"}``: hours are GPU-/CPU-hours inside the window (the
    period or the part); wait times in s. ``now``: the time running jobs are taken to end
    (default: the current time). Raises :class:`~slurmkit.errors.InputError` (the store's
    folder, DuckDB's message naming the file) when a store file cannot be read."""
    from slurmkit.accounting.store import Store

    now_ts = pd.Timestamp(now) if now is not None else pd.Timestamp.now(tz="UTC")
    now_ts = now_ts.tz_localize("UTC") if now_ts.tzinfo is None else now_ts.tz_convert("UTC")
    store = Store(store_root, cluster)
    files, missing, open_days, dq = _store_days(store.dir, period.window)
    parts = period.parts()
    windows = [(0, period.window)] + [(i + 1, w) for i, (_, w) in enumerate(parts)]
    per = {wid: _empty_window() for wid, _ in windows}
    if files:
        import duckdb

        con = connect(memory_limit, temp_dir, threads)
        try:
            _load_rows(con, files)
            con.execute("CREATE TEMP TABLE rw AS " + _rows_sql(windows, now_ts.timestamp()))
            con.execute("DROP TABLE b")
            _aggregate(con, per)
        except (duckdb.IOException, duckdb.InvalidInputException) as exc:
            first = " ".join(str(exc).split())
            raise InputError(str(store.dir), None, f"a store file cannot be read: {first}") from None
        finally:
            con.close()
    w0 = per[0]
    return {
        "period": {"label": period.label, **period.window.as_dict(), "by": period.by},
        "as_of": iso_z(now_ts),
        "cluster": cluster or "",
        "store": {"dir": str(store.dir), "days": len(files), "days_missing": missing,
                  "days_not_final": open_days},
        **w0,
        "breakdown": [{"label": label, **w.as_dict(), **per[i + 1]} for i, (label, w) in enumerate(parts)],
        "data_quality": dq,
    }


def _empty_window() -> dict:
    return {"totals": {"jobs": 0, "gpu_jobs": 0, "allocation_rows": 0, "requeued_attempts": 0,
                       "gpu_hours": 0.0, "cpu_hours": 0.0, "wasted_gpu_hours": 0.0,
                       "provisional_jobs": 0, "provisional_gpu_hours": 0.0},
            **{k: [] for k, _ in GROUPS}, "outcomes": [],
            "queue_wait": {"all": {"n": 0, **{k: None for k, _ in _QUANTILES}}, "by_partition_gpus": [],
                           "bins": list(WAIT_BIN_LABELS), "histogram": [0] * len(WAIT_BIN_LABELS)}}


def _jobs(cond: str, mode: str) -> str:
    """Distinct jobs among the rows where ``cond``: in the ``single`` pass the jobs with one
    row in the window (one row, one job: no DISTINCT over millions of rows), in the ``multi``
    pass (over the ``multi`` rows only, few) by their ``jk``."""
    if mode == "single":
        return f"count(*) FILTER (WHERE NOT multi AND {cond})"
    return f"count(DISTINCT jk) FILTER (WHERE {cond})"


def _two_pass(con, sql, keys: list[str], job_cols: list[str]) -> pd.DataFrame:
    """``sql(mode, where)`` run over all runs (``single``) and, when the window holds jobs with
    several rows, over those (``multi``), their job counts added by ``keys``."""
    main = _fetch(con, sql("single", "NOT waiting"))
    if not con.execute("SELECT count(*) FROM rw WHERE multi AND NOT waiting").fetchone()[0]:
        return main
    extra = _fetch(con, sql("multi", "NOT waiting AND multi"))
    none = "\0"   # group keys may be NULL (a grouping set's other columns): a stand-in to join on
    m, e = main.copy(), extra.copy()
    for c in keys:
        m[c] = m[c].astype(object).where(m[c].notna(), none)
        e[c] = e[c].astype(object).where(e[c].notna(), none)
    m = m.merge(e[keys + job_cols], on=keys, how="left", suffixes=("", "_multi"))
    for c in job_cols:
        m[c] = m[c] + m[c + "_multi"].fillna(0).astype("int64")
    for c in keys:
        m[c] = m[c].where(m[c] != none, None)
    return m.drop(columns=[c + "_multi" for c in job_cols])


def _aggregate(con, per: dict) -> None:
    """Fill ``per`` (window id -> its section dict) from the ``rw`` table."""
    runs = "FROM rw WHERE NOT waiting"

    def totals_sql(mode, where):
        return f"""
        SELECT wid, {_jobs("true", mode)} AS jobs, {_jobs("gpus > 0", mode)} AS gpu_jobs,
               count(*) AS allocation_rows, count(*) FILTER (WHERE requeued) AS requeued_attempts,
               coalesce(sum(gpu_hours), 0) AS gpu_hours, coalesce(sum(cpu_hours), 0) AS cpu_hours,
               coalesce(sum(gpu_hours) FILTER (WHERE waste_state OR requeued), 0) AS wasted_gpu_hours,
               {_jobs("provisional", mode)} AS provisional_jobs,
               coalesce(sum(gpu_hours) FILTER (WHERE provisional), 0) AS provisional_gpu_hours
        FROM rw WHERE {where} GROUP BY wid"""

    tot = _two_pass(con, totals_sql, ["wid"], ["jobs", "gpu_jobs", "provisional_jobs"])
    for r in tot.itertuples(index=False):
        per[r.wid]["totals"] = {k: (int(getattr(r, k)) if k in ("jobs", "gpu_jobs", "allocation_rows",
                                                               "requeued_attempts", "provisional_jobs")
                                    else _num(getattr(r, k))) for k in per[r.wid]["totals"]}
    # the five group tables in one pass: by GPU type counts the GPU rows only
    sets = ", ".join(f'(wid, "{col}")' for _, col in GROUPS)

    def groups_sql(mode, where):
        aggs = []
        for suffix, cond in (("", "true"), ("_g", "gpus > 0")):
            aggs.append(f"""{_jobs(cond, mode)} AS jobs{suffix},
               coalesce(sum(gpu_hours) FILTER (WHERE {cond}), 0) AS gpu_hours{suffix},
               coalesce(sum(cpu_hours) FILTER (WHERE {cond}), 0) AS cpu_hours{suffix},
               coalesce(sum(gpu_hours) FILTER (WHERE (waste_state OR requeued) AND {cond}), 0) AS wasted{suffix},
               coalesce(sum(gpu_hours) FILTER (WHERE provisional AND {cond}), 0) AS prov{suffix},
               count(*) FILTER (WHERE {cond}) AS n{suffix}""")
        return f"""
        SELECT wid, {", ".join(f'"{col}"' for _, col in GROUPS)},
               {", ".join(f'GROUPING("{col}") = 0 AS is_{col}' for _, col in GROUPS)}, {", ".join(aggs)}
        FROM rw WHERE {where} GROUP BY GROUPING SETS ({sets})"""

    g = _two_pass(con, groups_sql, ["wid"] + [c for _, c in GROUPS] + [f"is_{c}" for _, c in GROUPS],
                  ["jobs", "jobs_g"])
    for key, col in GROUPS:
        sfx = "_g" if col == "gpu_type" else ""
        t = g[g[f"is_{col}"].astype(bool) & (g[f"n{sfx}"] > 0)]
        t = t.sort_values(["wid", f"gpu_hours{sfx}", f"cpu_hours{sfx}", col], ascending=[True, False, False, True],
                          kind="stable")
        for r in t.to_dict("records"):
            per[r["wid"]][key].append({col: r[col], "jobs": int(r[f"jobs{sfx}"]), "gpu_hours": _num(r[f"gpu_hours{sfx}"]),
                                       "cpu_hours": _num(r[f"cpu_hours{sfx}"]), "wasted_gpu_hours": _num(r[f"wasted{sfx}"]),
                                       "provisional_gpu_hours": _num(r[f"prov{sfx}"])})
    out = _fetch(con, f"""
        SELECT wid, CASE WHEN requeued THEN '{REQUEUED_LINE}' ELSE state END AS line,
               count(*) FILTER (WHERE last_run) AS jobs, count(*) AS attempts,
               coalesce(sum(gpu_hours), 0) AS gpu_hours,
               coalesce(sum(gpu_hours) FILTER (WHERE waste_state OR requeued), 0) AS wasted
        {runs} GROUP BY wid, line ORDER BY wid, line = '{REQUEUED_LINE}', line""")
    states = _fetch(con, f"""SELECT wid, state, count(*) AS n {runs} AND requeued
                             GROUP BY wid, state ORDER BY wid, state""")
    for r in out.itertuples(index=False):
        o = {"state": r.line, "jobs": int(r.jobs), "attempts": int(r.attempts), "rows": int(r.attempts),
             "gpu_hours": _num(r.gpu_hours), "wasted_gpu_hours": _num(r.wasted)}
        if r.line == REQUEUED_LINE:
            o["states"] = {s.state: int(s.n) for s in states.itertuples(index=False) if s.wid == r.wid}
        per[r.wid]["outcomes"].append(o)
    # all the quantiles from one sort per group
    qs = "quantile_cont(wait_s, [" + ", ".join(str(q) for _, q in _QUANTILES) + "]) AS q"
    edges = WAIT_BINS[1:-1]
    hist = "[" + ", ".join(
        f"count(*) FILTER (WHERE wait_s >= {lo} AND wait_s < {hi})" if math.isfinite(hi)
        else f"count(*) FILTER (WHERE wait_s >= {lo})"
        for lo, hi in zip((0,) + edges, edges + (math.inf,))) + "]"
    for grouping in ("wid", "wid, partition, gpu_bucket"):
        q = _fetch(con, f"""SELECT {grouping}, count(wait_s) AS n, {qs}, {hist} AS histogram
                            {runs} AND wait_s IS NOT NULL GROUP BY {grouping} ORDER BY {grouping}""")
        for r in q.to_dict("records"):
            d = {"n": int(r["n"]), **{k: _num(v) for (k, _), v in zip(_QUANTILES, r["q"])}}
            qw = per[r["wid"]]["queue_wait"]
            if grouping == "wid":
                qw["all"] = d
                qw["histogram"] = [int(x) for x in r["histogram"]]
            else:
                qw["by_partition_gpus"].append({"partition": r["partition"], "gpu_bucket": r["gpu_bucket"], **d,
                                                "histogram": [int(x) for x in r["histogram"]]})
    for w in per.values():
        w["queue_wait"]["from"] = "Eligible or Submit"


#: CSV tables written by :func:`write_period` (file -> the rows, each flattened).
def _tables(report: dict) -> dict[str, list[dict]]:
    parts = [("(period)", report)] + [(b["label"], b) for b in report["breakdown"]]
    out = {"totals.csv": [{"part": p, **s["totals"]} for p, s in parts]}
    for key, _ in GROUPS:
        out[f"{key}.csv"] = [{"part": p, **g} for p, s in parts for g in s[key]]
    out["outcomes.csv"] = [{"part": p, **{k: v for k, v in o.items() if k != "states"}}
                           for p, s in parts for o in s["outcomes"]]
    out["queue_wait.csv"] = [{"part": p, "partition": "(all)", "gpu_bucket": "(all)", **s["queue_wait"]["all"]}
                             for p, s in parts] + \
                            [{"part": p, **{k: v for k, v in q.items() if k != "histogram"}}
                             for p, s in parts for q in s["queue_wait"]["by_partition_gpus"]]
    return out


def render_markdown(report: dict) -> str:
    """The period report as Markdown: totals per part, then the period's tables."""
    from slurmkit.report.render import fmt

    p = report["period"]
    lines = [f"# Usage report {p['label']} ({p['start']} .. {p['end']}, by {p['by']})", "",
             f"As of {report['as_of']}; cluster {report['cluster'] or '(default)'}; "
             f"{report['store']['days']} day(s) from the store"
             + (f"; **{len(report['store']['days_missing'])} day(s) not in the store**: "
                + ", ".join(report["store"]["days_missing"][:10]) if report["store"]["days_missing"] else "")
             + (f"; {len(report['store']['days_not_final'])} day(s) not final (provisional)"
                if report["store"]["days_not_final"] else ""), ""]
    cols = ["jobs", "gpu_jobs", "gpu_hours", "cpu_hours", "wasted_gpu_hours", "provisional_gpu_hours"]
    lines += ["## Totals", "", "| part | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for label, s in [("**period**", report)] + [(b["label"], b) for b in report["breakdown"]]:
        lines.append(f"| {label} | " + " | ".join(fmt(s["totals"][c]) for c in cols) + " |")
    for key, col in GROUPS[:3]:
        lines += ["", f"## By {col}", "", f"| {col} | jobs | GPU-h | CPU-h | wasted GPU-h |", "|---|---|---|---|---|"]
        lines += [f"| {g[col]} | {g['jobs']} | {fmt(g['gpu_hours'])} | {fmt(g['cpu_hours'])} | "
                  f"{fmt(g['wasted_gpu_hours'])} |" for g in report[key]]
    lines += ["", "## Outcomes", "", "| state | jobs | attempts | GPU-h | wasted GPU-h |", "|---|---|---|---|---|"]
    lines += [f"| {o['state']} | {o['jobs']} | {o['attempts']} | {fmt(o['gpu_hours'])} | {fmt(o['wasted_gpu_hours'])} |"
              for o in report["outcomes"]]
    qa = report["queue_wait"]["all"]
    lines += ["", "## Queue wait", "", f"{qa['n']} jobs started in the period; p50 {fmt(qa['p50_s'])} s, "
              f"p95 {fmt(qa['p95_s'])} s, longest {fmt(qa['max_s'])} s.", ""]
    return "\n".join(lines) + "\n"


def write_period(report: dict, outdir, formats=("json", "csv", "md")) -> list[Path]:
    """Write ``period.json``, the CSV tables and ``period.md`` into ``outdir`` (created);
    every file is complete before it replaces an earlier one. Returns the paths written."""
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
    return written


__all__ = ["Period", "parse_period", "period_report", "write_period", "render_markdown", "connect"]
