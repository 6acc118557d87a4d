#!/usr/bin/env python3
"""Scale benchmark of the period report (DuckDB over the Parquet store). Run by hand:

    .venv/bin/python bench/report_period.py [--weeks 13] [--rows-per-week 1000000]
        [--keep DIR | --reuse DIR] [--repeat 2] [--memory-limit 2GB]

Generates (seeded) ``--weeks`` ISO weeks of allocations, ``--rows-per-week`` each, with
:func:`report_scale.generate` (the weekly benchmark's generator: realistic sacct rows plus 3
steps each), reads each week through the live ingest's reader
(:func:`slurmkit.accounting.frame.load_sacct`) and writes it into a store with the store's own
writer (:meth:`slurmkit.accounting.store.Store.save_day`: one file per UTC day, a job in every
day it ran, as the daily sacct pulls give it). Then makes the store's day sums as the ingest
does after storing days (:func:`slurmkit.report.day_sums.summarize`; timed and printed apart:
a cost of the ingest, once per day stored, nothing on a store already summed). Then times, each
in a fresh child process:

1. baseline: pyarrow reading the store files the period report opens, whole, every column,
   batch by batch (:mod:`pyarrow.dataset`; :func:`period_files`): the daily allocation files
   of the period's days and their day sums;
2. slurmkit: the period report over those weeks (:func:`slurmkit.report.period.period_report`,
   breakdown by week) and its JSON.

Prints each run (wall and CPU s), the best of each with its least CPU seconds, the peak RSS of
the children (ru_maxrss), the CPU ratio, and last the ratio slurmkit / baseline (wall).
Target: a quarter of a 1M-jobs-a-week cluster (13 weeks of 1M) within 1.0x, under 4 GiB.
``--reuse`` with a smaller ``--weeks`` times the store's first weeks (a month of a quarter's
store).

Measured 2026-12-07 on the 2-core VM this runs on, shared with other sessions (load average
2-4.5), DuckDB memory limit 2GB, ``--repeat 3`` (the year: 2):

===========================  ========  ==================  ==================  ==========  =====
period, allocations / week   stored    pyarrow: wall, CPU  slurmkit: wall,CPU  peak RSS    ratio
===========================  ========  ==================  ==================  ==========  =====
4 weeks, 1M                  4.8M      1.67 s, 2.7 s       2.26 s, 3.4 s       563 MiB     1.35
13 weeks (a quarter), 1M     15.6M     2.88 s, 5.4 s       5.50 s, 8.2 s       1229 MiB    1.91
13 weeks, 200k               3.1M      1.74 s, 2.2 s       4.79 s, 5.6 s       861 MiB     2.75
52 weeks (a year), 1M        62.9M     21.15 s, 21.6 s     50.67 s, 44.9 s     2768 MiB    2.40
===========================  ========  ==================  ==================  ==========  =====

(CPU: the least of the runs; stored: allocation rows in the files read, a job over midnight in
each day's file.) The CPU ratios: 1.27, 1.52, 2.48, 2.07. The quarter again 20 minutes later
(load 4.3), beside the 200k one: 7.32 s (8.5 s CPU) against 4.37 s (6.1 s), ratio 1.68, CPU
ratio 1.40. The report's cost grows much slower than its rows (the 1M quarter has 5x the 200k
one's rows and costs 1.5x its CPU). The year extrapolated linearly from the 4- and 13-week
runs would be 19.5 s, 29 s CPU and 4.0 GiB; measured, it is 2.6x that time and 2.7 GiB. A
year needs its day sums: :func:`slurmkit.report.day_sums.summarize` over its 367 days failed
at DuckDB's 2GB (``Out of Memory Error ... 1.8 GiB/1.8 GiB used``, in its repeated-key count)
and took 353 s, 8.1 GiB peak with 8GB; without sums the year's report failed at 2GB and 3GB
("its hash tables cannot all spill") and took 62.3 s, 114 s CPU, 5.6 GiB at 8GB. Generating
the year's store: 1,389 s, 7.5 GiB on disk.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

#: The first generated week: ISO week 2026-W40 (Monday 2026-09-28 00:00 UTC).
FIRST_WEEK = 1_790_553_600
CLUSTER = "bench"


def write_store(root: str, weeks: int, rows_per_week: int, seed: int = 40, first_week: int = FIRST_WEEK,
                pulled_after_s: int = 2 * 86400, sums: bool = True) -> dict | None:
    """Generate ``weeks`` weeks of ``rows_per_week`` allocations (+3 steps each) and write them
    into the store at ``root`` (cluster ``bench``), one file per UTC day through
    :meth:`Store.save_day`: each allocation (with its steps) goes into every day from its
    Start (Submit when it never started) to its End (a running job: to its week's end), as a
    daily sacct pull lists it. Each day is saved as pulled ``pulled_after_s`` after it ended.
    Seeded: week ``k`` uses ``seed + k`` and JobIDs from ``10_000_000 * (k + 1)``. ``sums``:
    then the day sums are made (:func:`slurmkit.report.day_sums.summarize`, as the live
    ingest and ``report store`` do after storing days); returns its result (None without)."""
    from report_scale import generate

    from slurmkit.accounting.fields import FIELDS
    from slurmkit.accounting.frame import JobRows, load_sacct
    from slurmkit.accounting.quality import DataQuality
    from slurmkit.accounting.store import Store

    store = Store(root, CLUSTER)
    pending: dict[int, list] = {}   # day (epoch s) -> [JobRows]
    tmp = tempfile.mkdtemp(prefix="sk-period-gen-")

    def flush(before: int | None) -> None:
        for day in sorted(d for d in pending if before is None or d < before):
            parts = pending.pop(day)
            rows = JobRows.concat(parts)
            store.save_day(dt.datetime.fromtimestamp(day, dt.timezone.utc), rows,
                           DataQuality(rows_read=len(rows)), now=day + 86400 + pulled_after_s)

    try:
        for k in range(weeks):
            ws = first_week + 7 * 86400 * k
            path = os.path.join(tmp, f"week{k}.psv")
            generate(path, rows_per_week, seed=seed + k, week_start=ws, first_id=10_000_000 * (k + 1))
            rows, _ = load_sacct(path, None, list(FIELDS), "|")
            os.unlink(path)
            for day, part in by_day(rows, ws + 7 * 86400):
                pending.setdefault(day, []).append(part)
            # the next week's rows start a day before it: days before that are complete
            flush(ws + 7 * 86400 - 86400)
        flush(None)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if sums:
        from slurmkit.report.day_sums import summarize

        return summarize(root, CLUSTER)
    return None


def by_day(rows, until: int):
    """The store's split of rows into daily pulls (:func:`slurmkit.accounting.store.by_day`)."""
    from slurmkit.accounting.store import by_day as split

    return split(rows, until)


def period_of(weeks: int, first_week: int = FIRST_WEEK):
    """The period covering the generated weeks, broken down by ISO week."""
    from slurmkit.report.period import parse_period

    s = dt.datetime.fromtimestamp(first_week, dt.timezone.utc)
    e = s + dt.timedelta(days=7 * weeks)
    return parse_period(start=s.isoformat(), end=e.isoformat(), by="week")


def period_files(root: str, per) -> tuple[list[str], list[str]]:
    """``(allocation files, day-sums files)`` of the store's days in ``per``: the files the
    period report opens (it reads the sums of a day's plain rows and the day file's other row
    groups, :func:`slurmkit.report.period.period_report`); the baseline reads them whole."""
    from slurmkit.accounting.store import Store
    from slurmkit.report.period import SUMS_FILE

    st = Store(root, CLUSTER)
    files = [st.day_files(a)[0] for a, _ in per.window.days()]
    files = [f for f in files if f.exists()]
    sums = [f.parent / SUMS_FILE for f in files]
    return [str(f) for f in files], [str(f) for f in sums if f.exists()]


def _child(mode: str, root: str, weeks: int, memory_limit: str) -> None:
    t0 = time.perf_counter()
    per = period_of(weeks)
    if mode == "baseline":
        import pyarrow.dataset as ds

        # every column of every row group, batch by batch (a year's rows would not fit in
        # memory at once; the report does not hold them either)
        files, sums = period_files(root, per)
        n = sum(b.num_rows for b in ds.dataset(files, format="parquet").to_batches())
        if sums:
            sum(b.num_rows for b in ds.dataset(sums, format="parquet").to_batches())
    else:
        from slurmkit.report.period import period_report

        rep = period_report(root, per, CLUSTER, now=per.window.end, memory_limit=memory_limit,
                            temp_dir=tempfile.gettempdir())
        json.dumps(rep)
        n = rep["totals"]["allocation_rows"]
    wall = time.perf_counter() - t0
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime, "rss_mib": ru.ru_maxrss / 1024,
                      "rows": n}))


def _measure(mode: str, root: str, weeks: int, memory_limit: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", mode, root, str(weeks), memory_limit],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    from slurmkit.report.period import DEFAULT_MEMORY_LIMIT

    ap = argparse.ArgumentParser()
    ap.add_argument("--weeks", type=int, default=13)
    ap.add_argument("--rows-per-week", type=int, default=1_000_000)
    ap.add_argument("--keep", help="write the store here and keep it")
    ap.add_argument("--reuse", help="time an existing generated store (its first --weeks weeks: as many as it "
                                    "holds, or fewer)")
    ap.add_argument("--repeat", type=int, default=2, help="runs of each side (the best counts)")
    ap.add_argument("--memory-limit", default=DEFAULT_MEMORY_LIMIT, help="DuckDB's memory limit")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        if args.child[0] == "generate":
            write_store(args.child[1], int(args.child[2]), int(args.child[3]), sums=False)
        elif args.child[0] == "summarize":
            from slurmkit.report.day_sums import summarize

            print(json.dumps(summarize(args.child[1], CLUSTER)))
        else:
            _child(args.child[0], args.child[1], int(args.child[2]), args.child[3])
        return
    root = args.reuse or args.keep or tempfile.mkdtemp(prefix="sk-bench-store-")
    if not args.reuse:
        t0 = time.perf_counter()
        # in a child: Linux keeps ru_maxrss across exec, so the timed children forked from a
        # parent that generated would report the generator's peak
        subprocess.run([sys.executable, __file__, "--child", "generate", root, str(args.weeks),
                        str(args.rows_per_week)], check=True)
        size = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(root) for f in fs)
        print(f"generated {args.weeks} weeks x {args.rows_per_week:,} allocations (+3 steps each) into "
              f"{root}: {size / 2**20:.0f} MiB in {time.perf_counter() - t0:.1f} s")
        os.sync()
    # the day sums, as the ingest makes them after storing days (timed apart: a cost of the
    # ingest, paid once per day stored; nothing to do on a store already summed)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, __file__, "--child", "summarize", root, str(args.weeks), "-"],
                         capture_output=True, text=True)
    if out.returncode == 0:
        res = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"day sums: {res['summed']} of {res['days']} day(s) summed in {time.perf_counter() - t0:.1f} s; "
              f"{res['plain_rows']:,} of {res['rows']:,} stored rows summed, {res['direct_rows']:,} read directly")
    else:   # (the report then reads every row: the same figures, slower)
        why = next((ln for ln in reversed(out.stderr.splitlines()) if ln.strip()), "")
        print(f"day sums: failed after {time.perf_counter() - t0:.1f} s ({why}); the report reads every row")
    os.sync()
    try:
        from report_scale import interleaved

        runs = interleaved(lambda mode: _measure(mode, root, args.weeks, args.memory_limit), args.repeat)
        base = min(runs["baseline"], key=lambda r: r["wall_s"])
        sk = min(runs["slurmkit"], key=lambda r: r["wall_s"])
        cpu = {m: min(r["cpu_s"] for r in runs[m]) for m in runs}
        print(f"pyarrow read of the period's store files: {base['wall_s']:.2f} s best of {args.repeat} "
              f"({cpu['baseline']:.1f} s CPU least), peak RSS {max(r['rss_mib'] for r in runs['baseline']):.0f} MiB, "
              f"{base['rows']:,} stored rows")
        print(f"slurmkit period report (DuckDB, memory_limit {args.memory_limit}): {sk['wall_s']:.2f} s best of "
              f"{args.repeat} ({cpu['slurmkit']:.1f} s CPU least), peak RSS "
              f"{max(r['rss_mib'] for r in runs['slurmkit']):.0f} MiB, {sk['rows']:,} allocation rows in the period")
        print(f"CPU ratio {cpu['slurmkit'] / cpu['baseline']:.2f} (least CPU s of each side)")
        print(f"ratio {sk['wall_s'] / base['wall_s']:.2f}")
    finally:
        if not (args.keep or args.reuse):
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
