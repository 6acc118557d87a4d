#!/usr/bin/env python3
"""Measurement, not product code: the weekly report's core figures in DuckDB SQL over a capture
read into Arrow, timed side by side with the plain pyarrow read ``bench/report_scale.py`` uses
as its baseline. Run by hand:

    .venv/bin/python bench/report_sql_proto.py --reuse FILE [--repeat 3] [--modes a,b,...]
    .venv/bin/python bench/report_sql_proto.py --reuse FILE --check

``FILE``: a file ``bench/report_scale.py --keep`` wrote (27 fields, ``|``, no header).

Modes, each in a fresh child process (wall, CPU seconds, peak RSS):

- ``baseline``: pyarrow's plain CSV read, every column a string (report_scale's baseline);
- ``duckdb``: DuckDB's ``read_csv`` of the capture (the 27 columns as VARCHAR: no type guess)
  streamed twice, once into the steps' usage per job and once into the typed allocation rows
  (TRES, times, counts parsed in SQL), joined into one small table of the allocations in the
  window; the figures below in SQL over it. (Rows printed: those allocations.)
- ``duckdb-table``: as ``duckdb``, but the capture loaded once into a DuckDB table first
  (measured to show that a second scan is cheaper than a table);
- ``arrow-typed``: pyarrow's CSV read of the columns the figures need, epoch times and counts
  read as int64 by the CSV reader (nulls for ``Unknown``), into Arrow; DuckDB SQL over that
  Arrow table (TRES strings parsed in SQL);
- ``reader``: slurmkit's own reader (:func:`slurmkit.accounting.read.stream_sacct_file`, the
  one that counts and repairs bad rows, with its int64 fields), its Arrow blocks handed to
  DuckDB as they are (no pandas), then the same SQL;
- ``slurmkit``: the weekly report as ``bench/report_scale.py`` times it (ingest + typed
  frame + ``build_report`` + JSON), for the ratio in the same run.

The figures (the weekly report's core): jobs, GPU-hours, CPU-hours, wasted GPU-hours over the
window (each allocation's run seconds scaled by its share inside the window, as
:func:`slurmkit.report.usage.allocations`); jobs / GPU-hours / CPU-hours per user and per
account; queue wait quantiles (Start − Eligible, else Submit, of the jobs started in the window);
per allocation the largest step memory (TRESUsageInTot ``mem=``) and the GPU-hour weighted mean
of the steps' ``gres/gpuutil`` (GPUs x ElapsedRaw weights, extern excluded), whence the
GPU-hour weighted utilization and the median memory efficiency. Simplified where the generated
capture never goes (documented in :data:`CORE_SQL`): no requeued attempts, no held-cancel rule,
untyped ``gres/gpu=`` counts. ``--check``: the SQL's figures against the report's on ``FILE``
(both computed here, in one process; use a small file).

Measured 2026-12-07, the 2-core VM this runs on, shared with other sessions (load average 2.6
to 3.1), the 1M-allocation file of ``bench/report_scale.py`` (1,144 MiB, 4M rows), ``--repeat
3``; ``--check`` on the 200k file: every figure above equal to the report's (60 of 60).

============  ===========  ==========  ============  ==========  =========
mode          best wall s  least CPU   peak RSS MiB  wall ratio  CPU ratio
============  ===========  ==========  ============  ==========  =========
baseline      2.84         4.3         1774          1.00        1.00
duckdb        5.63         10.6        719           1.98        2.48
arrow-typed   4.43         8.4         1723          1.56        1.97
reader        6.18         10.2        1918          2.18        2.40
slurmkit      6.20         9.1         1763          2.18        2.12
============  ===========  ==========  ============  ==========  =========

What the SQL costs (EXPLAIN ANALYZE of ``duckdb``, 1M, operator times): each ``read_csv``
scan of the text 2.4-2.8 s (two scans: the steps' and the allocations'), the TRES and usage
splits of the 3M step rows 1.0 s, the steps' group-by 0.7 s, the join 0.5 s. Measured and
dropped on the way (same file): ``regexp_extract`` for the TRES values (about 1.5x the
``split_part`` cost); the capture loaded once into a DuckDB table (``duckdb-table``: 11.3-12.7
s CPU; its lines typed into the table instead: 14.8 s), a ``MATERIALIZED`` CTE of the typed
lines (16.8 s), or the typed lines exported to Arrow and split there (18.7 s); one pass grouping
every line by job with the allocation's fields as ``any_value`` (12.0 s); single runs at load
2-5. A second scan of the text costs less than keeping its lines. DuckDB's reader
alone (``count(*)`` or three columns' lengths) is 1.9-2.3 s CPU, against 4.3-7 s for the plain
pyarrow read of every column.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from report_scale import WEEK_START  # noqa: E402

WS, WE = WEEK_START, WEEK_START + 7 * 86400
NOW = WE

#: Columns the figures read.
NEEDED = ("Cluster", "JobID", "JobIDRaw", "State", "User", "Account", "Partition", "Submit", "Eligible",
          "Start", "End", "ElapsedRaw", "TimelimitRaw", "NCPUS", "ReqMem", "AllocTRES", "TotalCPU",
          "TRESUsageInTot")
INT_COLS = ("Submit", "Eligible", "Start", "End", "ElapsedRaw", "NCPUS", "TimelimitRaw")

#: Parse macros (TRY_CAST reads an int64 column or a string one alike). TRES values are cut out
#: with ``split_part`` (measured: about 1.5x cheaper than ``regexp_extract`` on 4M rows).
MACROS = r"""
CREATE OR REPLACE MACRO epoch(x) AS TRY_CAST(x AS BIGINT);
CREATE OR REPLACE MACRO kv(t, k) AS split_part(split_part(',' || t || ',', ',' || k || '=', 2), ',', 1);
CREATE OR REPLACE MACRO kv_num(t, k) AS TRY_CAST(kv(t, k) AS DOUBLE);
CREATE OR REPLACE MACRO mem_mib(v, bare) AS CASE WHEN v = '' THEN NULL ELSE
    CASE right(v, 1) WHEN 'K' THEN TRY_CAST(v[:-2] AS DOUBLE) / 1024 WHEN 'M' THEN TRY_CAST(v[:-2] AS DOUBLE)
        WHEN 'G' THEN TRY_CAST(v[:-2] AS DOUBLE) * 1024 WHEN 'T' THEN TRY_CAST(v[:-2] AS DOUBLE) * 1048576
        WHEN 'P' THEN TRY_CAST(v[:-2] AS DOUBLE) * 1073741824
        ELSE TRY_CAST(v AS DOUBLE) * CASE bare WHEN 'B' THEN 1.0 / 1048576 ELSE 1.0 END END END;
-- JobIDRaw (before a step's dot) as an integer: a cheap join and group key
CREATE OR REPLACE MACRO job_key(raw) AS TRY_CAST(split_part(raw, '.', 1) AS BIGINT);
"""

#: The steps' usage per allocation (one scan of the source's step rows): the largest step
#: memory, and gres/gpuutil weighted by GPUs x ElapsedRaw over the non-extern steps with GPUs.
STEPS_SQL = """
SELECT Cluster AS cluster, job_key(JobIDRaw) AS key_id,
       max(mem_mib(kv(TRESUsageInTot, 'mem'), 'B')) AS step_mem,
       sum(u * w) FILTER (WHERE ok) / sum(w) FILTER (WHERE ok) AS step_util
FROM (SELECT *, kv_num(TRESUsageInTot, 'gres/gpuutil') AS u,
             coalesce(kv_num(AllocTRES, 'gres/gpu'), 0) AS g,
             greatest(coalesce(TRY_CAST(ElapsedRaw AS DOUBLE), 0), 1) * g AS w,
             NOT ends_with(JobID, '.extern') AND g <> 0 AND u IS NOT NULL AS ok
      FROM {src} WHERE contains(JobID, '.'))
GROUP BY ALL
"""

#: The allocation rows, typed (a second scan of the source).
ALLOCS_SQL = """
SELECT Cluster AS cluster, job_key(JobIDRaw) AS key_id, split_part(State, ' ', 1) AS state, "User" AS usr,
       Account AS account, Partition AS part, epoch(Submit) AS submit, epoch(Eligible) AS eligible,
       epoch(Start) AS start, epoch("End") AS "end", TRY_CAST(ElapsedRaw AS DOUBLE) AS elapsed,
       TRY_CAST(TimelimitRaw AS DOUBLE) * 60 AS tl, TRY_CAST(NCPUS AS DOUBLE) AS ncpus,
       coalesce(kv_num(AllocTRES, 'gres/gpu'), 0) AS gpus,
       coalesce(mem_mib(kv(AllocTRES, 'mem'), 'M'), mem_mib(ReqMem, 'M')) AS alloc_mem
FROM {src} WHERE NOT contains(JobID, '.')
"""

#: Per allocation (a job: no requeued attempts in the generated capture) its window figures and
#: its steps' usage, streamed from the two scans into one small table (the only one made).
#: Simplified where the generated capture never goes: a job cancelled while held (Start = End
#: before Eligible) is not told apart; steps join on (cluster, JobIDRaw) without the attempt
#: search; ``gres/gpu=`` is read untyped only.
RUNS_SQL = f"""
CREATE TEMP TABLE runs AS
WITH su AS ({{steps}}), a AS (
    SELECT *, CASE WHEN "end" IS NULL THEN least({NOW}, start + tl) ELSE "end" END AS stop,
           start IS NOT NULL AND NOT coalesce(start > "end", false) AS ran
    FROM ({{allocs}})
), t AS (
    SELECT *, stop - start AS full_s,
           CASE WHEN ran THEN greatest(least(greatest(stop, start), {WE}) - greatest(start, {WS}), 0) ELSE 0 END
             AS overlap
    FROM a WHERE coalesce(start, submit, "end") < {WE} AND stop >= {WS}
), r AS (
    SELECT *, coalesce(CASE WHEN elapsed IS NOT NULL AND "end" IS NOT NULL THEN elapsed ELSE full_s END, 0)
              AS run_s,
              CASE WHEN full_s > 0 THEN overlap / full_s ELSE 0 END AS frac
    FROM t WHERE ran
)
SELECT r.*, run_s * frac AS in_window_s, gpus * run_s * frac / 3600 AS gpu_hours,
       ncpus * run_s * frac / 3600 AS cpu_hours,
       state IN ('FAILED', 'TIMEOUT', 'OUT_OF_MEMORY', 'NODE_FAIL', 'PREEMPTED', 'REQUEUED', 'BOOT_FAIL',
                 'DEADLINE') AS wasted,
       CASE WHEN start >= {WS} AND start < {WE} THEN greatest(start - coalesce(eligible, submit), 0) END AS wait_s,
       su.step_mem, su.step_util,
       CASE WHEN alloc_mem > 0 THEN su.step_mem / alloc_mem END AS mem_eff
FROM r LEFT JOIN su USING (cluster, key_id)
"""

#: Measured and dropped (``--modes duckdb-table``): the capture parsed once into a typed table of
#: all its lines, then the two halves from it. Building the table costs more than a second scan.
LINES_SQL = """
CREATE TEMP TABLE lines AS
SELECT * FROM {src}
"""

FIGURES = {
    "totals": """SELECT count(DISTINCT (cluster, key_id)) AS jobs, count(*) AS allocation_rows,
        sum(gpu_hours) AS gpu_hours, sum(cpu_hours) AS cpu_hours,
        sum(gpu_hours) FILTER (WHERE wasted) AS wasted_gpu_hours FROM runs""",
    "by_user": """SELECT usr AS user, count(DISTINCT (cluster, key_id)) AS jobs, sum(gpu_hours) AS gpu_hours,
        sum(cpu_hours) AS cpu_hours FROM runs GROUP BY usr ORDER BY gpu_hours DESC, cpu_hours DESC, usr""",
    "by_account": """SELECT account, count(DISTINCT (cluster, key_id)) AS jobs, sum(gpu_hours) AS gpu_hours,
        sum(cpu_hours) AS cpu_hours FROM runs GROUP BY account ORDER BY gpu_hours DESC, cpu_hours DESC, account""",
    "queue_wait": """SELECT count(wait_s) AS n, quantile_cont(wait_s, 0.5) AS p50_s, quantile_cont(wait_s, 0.9) AS p90_s,
        quantile_cont(wait_s, 0.95) AS p95_s, max(wait_s) AS max_s FROM runs""",
    "efficiency": """SELECT sum(step_util * gpu_hours) FILTER (WHERE gpus > 0 AND step_util IS NOT NULL)
          / sum(gpu_hours) FILTER (WHERE gpus > 0 AND step_util IS NOT NULL) AS gpu_util_pct_weighted,
        sum(gpu_hours) FILTER (WHERE gpus > 0 AND step_util < 1) AS gpu_hours_near_zero_util,
        median(mem_eff) FILTER (WHERE "end" IS NOT NULL AND run_s > 0) AS memory_efficiency_median FROM runs""",
}


def _csv_source(con, path: str) -> str:
    from slurmkit.accounting.fields import FIELDS

    cols = "{" + ", ".join(f"'{f}': 'VARCHAR'" for f in FIELDS) + "}"
    return (f"read_csv('{path}', delim='|', header=false, quote='', escape='', auto_detect=false, "
            f"columns={cols})")


def figures(con, src: str) -> dict:
    """Run the SQL over ``src`` (a relation with the sacct field names) -> the figures."""
    con.execute(MACROS)
    con.execute(RUNS_SQL.format(steps=STEPS_SQL.format(src=src), allocs=ALLOCS_SQL.format(src=src)))
    out = {}
    for name, sql in FIGURES.items():
        cur = con.execute(sql)
        cols = [d[0] for d in cur.description]
        rows = [dict(zip(cols, r)) for r in cur.fetchall()]
        out[name] = rows if name.startswith("by_") else rows[0]
    return out


def _connect(threads: int | None = None):
    import duckdb

    con = duckdb.connect(config={"threads": threads or os.cpu_count() or 1,
                                 "preserve_insertion_order": False})
    return con


def run_mode(mode: str, path: str) -> tuple[int, dict | None]:
    """``(rows read, figures)`` of one mode."""
    from slurmkit.accounting.fields import FIELDS

    if mode == "baseline":
        import pyarrow as pa
        import pyarrow.csv as pacsv

        t = pacsv.read_csv(path, read_options=pacsv.ReadOptions(column_names=list(FIELDS)),
                           parse_options=pacsv.ParseOptions(delimiter="|"),
                           convert_options=pacsv.ConvertOptions(column_types={f: pa.string() for f in FIELDS}))
        return t.num_rows, None
    if mode == "slurmkit":
        import pandas as pd

        from slurmkit.accounting.frame import load_sacct
        from slurmkit.heap import keep_freed_memory
        from slurmkit.report.energy import Assumptions
        from slurmkit.report.weekly import build_report
        from slurmkit.report.window import parse_week

        keep_freed_memory()
        rows, dq = load_sacct(path, None, list(FIELDS), "|")
        rep, _ = build_report(rows, dq, parse_week("2026-W48"), Assumptions(default_tdp_w=700.0),
                              now=pd.Timestamp(NOW, unit="s", tz="UTC"))
        json.dumps(rep)
        return rep["data_quality"]["rows_read"], rep
    con = _connect()
    if mode == "duckdb":
        src = _csv_source(con, path)
        fig = figures(con, src)
        return con.execute("SELECT count(*) FROM runs").fetchone()[0], fig
    if mode == "duckdb-table":
        con.execute(LINES_SQL.format(src=_csv_source(con, path)))
        return con.execute("SELECT count(*) FROM lines").fetchone()[0], figures(con, "lines")
    if mode == "arrow-typed":
        import pyarrow as pa
        import pyarrow.csv as pacsv

        types = {f: (pa.int64() if f in INT_COLS else pa.string()) for f in FIELDS}
        t = pacsv.read_csv(path, read_options=pacsv.ReadOptions(column_names=list(FIELDS)),
                           parse_options=pacsv.ParseOptions(delimiter="|", quote_char=False),
                           convert_options=pacsv.ConvertOptions(
                               column_types=types, include_columns=list(NEEDED), check_utf8=False,
                               null_values=["Unknown", "None", "", "N/A", "INVALID"],
                               strings_can_be_null=False))
        con.register("capture", t)
        return t.num_rows, figures(con, "capture")
    if mode == "reader":
        import pyarrow as pa

        from slurmkit.accounting.frame import INT_FIELDS
        from slurmkit.accounting.read import stream_sacct_file

        batches, dq = stream_sacct_file(path, list(FIELDS), "|", int_fields=INT_FIELDS)
        blocks = [b.select(list(NEEDED)) for b in batches]
        # a block's int field is int64, or string where it held text: one schema for DuckDB
        schema = pa.unify_schemas([b.schema for b in blocks], promote_options="permissive")
        t = pa.concat_tables([b.cast(schema) if b.schema != schema else b for b in blocks])
        del blocks
        con.register("capture", t)
        return dq.rows_read, figures(con, "capture")
    raise SystemExit(f"unknown mode {mode}")


def _child(mode: str, path: str) -> None:
    t0 = time.perf_counter()
    n, _ = run_mode(mode, path)
    wall = time.perf_counter() - t0
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime, "rss_mib": ru.ru_maxrss / 1024, "rows": n}))


def check(path: str) -> None:
    """The SQL figures of each SQL mode against the weekly report's, printed side by side."""
    _, rep = run_mode("slurmkit", path)
    t, q, e = rep["totals"], rep["queue_wait"]["all"], rep["efficiency"]
    ref = {"jobs": t["jobs"], "gpu_hours": t["gpu_hours"], "cpu_hours": t["cpu_hours"],
           "wasted_gpu_hours": t["wasted_gpu_hours"], "wait n": q["n"], "wait p50_s": q["p50_s"],
           "wait p90_s": q["p90_s"], "wait max_s": q["max_s"], "gpu_util_pct_weighted": e["gpu_util_pct_weighted"],
           "gpu_hours_near_zero_util": e["gpu_hours_near_zero_util"],
           "memory_efficiency_median": e["memory_efficiency_median"],
           "top user": (rep["by_user"][0]["user"], rep["by_user"][0]["jobs"], round(rep["by_user"][0]["gpu_hours"], 6)),
           "top account": (rep["by_account"][0]["account"], rep["by_account"][0]["jobs"],
                           round(rep["by_account"][0]["gpu_hours"], 6)),
           "users": len(rep["by_user"]), "accounts": len(rep["by_account"])}
    ok = True
    for mode in ("duckdb", "duckdb-table", "arrow-typed", "reader"):
        _, f = run_mode(mode, path)
        ft, fq, fe = f["totals"], f["queue_wait"], f["efficiency"]
        got = {"jobs": ft["jobs"], "gpu_hours": ft["gpu_hours"], "cpu_hours": ft["cpu_hours"],
               "wasted_gpu_hours": ft["wasted_gpu_hours"], "wait n": fq["n"], "wait p50_s": fq["p50_s"],
               "wait p90_s": fq["p90_s"], "wait max_s": fq["max_s"],
               "gpu_util_pct_weighted": fe["gpu_util_pct_weighted"],
               "gpu_hours_near_zero_util": fe["gpu_hours_near_zero_util"],
               "memory_efficiency_median": fe["memory_efficiency_median"],
               "top user": (f["by_user"][0]["user"], f["by_user"][0]["jobs"], round(f["by_user"][0]["gpu_hours"], 6)),
               "top account": (f["by_account"][0]["account"], f["by_account"][0]["jobs"],
                               round(f["by_account"][0]["gpu_hours"], 6)),
               "users": len(f["by_user"]), "accounts": len(f["by_account"])}
        for k, v in ref.items():
            g = got[k]
            same = (abs(g - v) <= 1e-6 * max(1.0, abs(v))) if isinstance(v, float) else g == v
            ok &= same
            print(f"{mode:12s} {k:26s} report {v!s:40s} sql {g!s:40s} {'ok' if same else 'DIFFERS'}")
    print("all equal" if ok else "SOME DIFFER")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reuse", help="a file bench/report_scale.py --keep wrote")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--modes", default="baseline,duckdb,arrow-typed,reader,slurmkit")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(*args.child)
        return
    if not args.reuse:
        ap.error("--reuse FILE is required")
    if args.check:
        check(args.reuse)
        return
    from report_scale import interleaved

    modes = args.modes.split(",")

    def measure(mode):
        out = subprocess.run([sys.executable, __file__, "--child", mode, args.reuse], capture_output=True,
                             text=True, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])

    runs = interleaved(measure, args.repeat, modes)
    best = {m: min(runs[m], key=lambda r: r["wall_s"]) for m in modes}
    base = best.get("baseline")
    print(f"{'mode':12s} {'best wall s':>11s} {'its CPU s':>9s} {'min CPU s':>9s} {'peak RSS MiB':>12s} "
          f"{'wall ratio':>10s} {'CPU ratio':>9s}")
    for m in modes:
        b = best[m]
        mc = min(r["cpu_s"] for r in runs[m])
        rw = f"{b['wall_s'] / base['wall_s']:.2f}" if base else "-"
        rc = f"{mc / min(r['cpu_s'] for r in runs['baseline']):.2f}" if base else "-"
        print(f"{m:12s} {b['wall_s']:11.2f} {b['cpu_s']:9.1f} {mc:9.1f} {max(r['rss_mib'] for r in runs[m]):12.0f} "
              f"{rw:>10s} {rc:>9s}")


if __name__ == "__main__":
    main()
