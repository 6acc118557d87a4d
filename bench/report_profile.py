#!/usr/bin/env python3
"""Where the weekly report's time goes (the path ``bench/report_scale.py`` times). Run by hand:

    .venv/bin/python bench/report_profile.py FILE [--cprofile N]

``FILE``: a file ``bench/report_scale.py --keep`` wrote. In one process, each step timed apart
(wall and this process' CPU seconds; the reader's blocks are typed in worker threads, so the
read and the typing overlap in the load and are also timed alone, here first):

1. ``read only``: the capture split into Arrow string tables
   (:func:`slurmkit.accounting.read.stream_sacct_file`, as the load reads it), nothing typed;
2. ``load_sacct``: read + typed frame (:func:`slurmkit.accounting.frame.load_sacct`), and
   inside it the thread CPU of the allocation and step typing (``_typed_allocs``,
   ``_typed_steps``), the concatenation and the repeated-key check;
3. ``build_report``: :func:`slurmkit.report.weekly.build_report`, and inside it the input
   checks (``usage.checked_rows``), the period SQL over the rows (``period.open_rows``,
   ``window_figures``, ``rows_table``) and each week-only section;
4. ``json``: the report's JSON.

``--cprofile N``: instead, cProfile the whole path and print the N functions with the most
cumulative time.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import sys
import threading
import time
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from report_scale import WEEK_START  # noqa: E402

SPANS: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])   # name -> [wall, cpu, calls]
_LOCK = threading.Lock()


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def timed(module, name: str, label: str | None = None, thread_cpu: bool = False) -> None:
    """Wrap ``module.name`` so that its calls add to ``SPANS[label]`` (wall; process CPU, or
    the calling thread's CPU with ``thread_cpu``)."""
    fn = getattr(module, name)
    label = label or name

    @functools.wraps(fn)
    def wrapper(*a, **k):
        t0 = time.perf_counter()
        c0 = time.thread_time() if thread_cpu else _cpu()
        try:
            return fn(*a, **k)
        finally:
            c1 = time.thread_time() if thread_cpu else _cpu()
            with _LOCK:
                s = SPANS[label]
                s[0] += time.perf_counter() - t0
                s[1] += c1 - c0
                s[2] += 1

    setattr(module, name, wrapper)


def span(label: str):
    class _S:
        def __enter__(self):
            self.t0, self.c0 = time.perf_counter(), _cpu()

        def __exit__(self, *exc):
            s = SPANS[label]
            s[0] += time.perf_counter() - self.t0
            s[1] += _cpu() - self.c0
            s[2] += 1
    return _S()


def run(path: str) -> dict:
    import pandas as pd

    from slurmkit.heap import keep_freed_memory

    keep_freed_memory()
    from slurmkit.accounting import frame as F
    from slurmkit.accounting import read as R
    from slurmkit.accounting.fields import FIELDS
    from slurmkit.report import weekly as W
    from slurmkit.report.energy import Assumptions
    from slurmkit.report.window import parse_week

    with span("1 read only (Arrow string tables)"):
        batches, _ = R.stream_sacct_file(path, list(FIELDS), "|", int_fields=F.INT_FIELDS)
        n = sum(t.num_rows for t in batches)
    del batches
    for name in ("_typed_allocs", "_typed_steps"):
        timed(F, name, f"2.{name} (thread CPU, in workers)", thread_cpu=True)
    timed(F, "_concat_columns", "2.concat blocks")
    timed(F.JobRows, "drop_repeats", "2.drop_repeats")
    with span("2 load_sacct (read + typed frame)"):
        rows, dq = F.load_sacct(path, None, list(FIELDS), "|")
    from slurmkit.report import period as P
    from slurmkit.report import usage as U

    timed(U, "checked_rows", "3.usage.checked_rows (input checks)")
    for name in ("open_rows", "window_figures", "rows_table", "_aggregate", "_load_steps", "_fine_tables"):
        timed(P, name, f"3.period.{name}")
    for name in ("jobs_frame", "energy_by_policy", "gpus_in_use", "utilization", "breakdown_section",
                 "accounts_section", "unknown_figures", "pending_backlog", "_data_quality", "deltas"):
        if hasattr(W, name):
            timed(W, name, f"3.{name}")
    with span("3 build_report"):
        rep, _ = W.build_report(rows, dq, parse_week("2026-W48"), Assumptions(default_tdp_w=700.0),
                                now=pd.Timestamp(WEEK_START + 7 * 86400, unit="s", tz="UTC"),
                              rows_frame=False)   # (the JSON only, as `--format json` writes it)
    with span("4 json"):
        json.dumps(rep)
    return {"rows": n}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--cprofile", type=int, default=0)
    args = ap.parse_args()
    if args.cprofile:
        import cProfile
        import pstats

        import pandas as pd

        from slurmkit.heap import keep_freed_memory

        keep_freed_memory()
        from slurmkit.accounting.fields import FIELDS
        from slurmkit.accounting.frame import load_sacct
        from slurmkit.report.energy import Assumptions
        from slurmkit.report.weekly import build_report
        from slurmkit.report.window import parse_week

        def whole():
            rows, dq = load_sacct(args.file, None, list(FIELDS), "|")
            rep, _ = build_report(rows, dq, parse_week("2026-W48"), Assumptions(default_tdp_w=700.0),
                                  now=pd.Timestamp(WEEK_START + 7 * 86400, unit="s", tz="UTC"))
            json.dumps(rep)

        pr = cProfile.Profile()
        pr.runcall(whole)
        pstats.Stats(pr).sort_stats("cumulative").print_stats(args.cprofile)
        return
    t0, c0 = time.perf_counter(), _cpu()
    res = run(args.file)
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{res['rows']:,} rows; whole: {wall:.2f} s wall, {cpu:.1f} s CPU, peak RSS {rss:.0f} MiB "
          f"(step 1 is extra: the load reads the file again)")
    print(f"{'span':58s} {'wall s':>7s} {'CPU s':>7s} {'calls':>5s}")
    for k in sorted(SPANS):
        w, c, n = SPANS[k]
        print(f"{k:58s} {w:7.2f} {c:7.2f} {n:5d}")


if __name__ == "__main__":
    main()
