"""Reports over any period (a month, a quarter, a year, ``--start/--end``) from the Parquet store.

The weekly report (:mod:`slurmkit.report.weekly`) holds a week's rows in memory (pandas); a
quarter or a year of a large cluster does not fit. Here the same figures are computed by
DuckDB (embedded) directly over the store's daily allocation files
(``<store>/cluster=<name>/day=<YYYY-MM-DD>/allocs.parquet``, :mod:`slurmkit.accounting.store`),
with a memory limit and a spill folder, so memory does not grow with the period. Nothing is
pulled from sacct: days missing from the store are listed (``days_missing``), not fetched.
Where the store keeps day sums (:mod:`slurmkit.report.day_sums`), a day's plain rows are read
as its sums and the copies of a job over midnight as one row (the same figures: the tests
compare both ways; ``use_sums=False`` reads every row).

Each figure is defined once, here, in SQL (docs/report.md names each rule): :func:`_build_rows`
(the per-allocation rows of a window) and :func:`_aggregate` (the totals, groups, outcomes,
queue wait, job sizes, efficiency). The weekly report's figures come from the same SQL over a
capture's or a live pull's rows, registered as Arrow tables (:func:`rows_figures`);
:func:`slurmkit.report.usage.allocations` keeps the per-allocation frame of the weekly report's
own sections and files (tests/report/test_report_period.py keeps the two equal). Evaluated per
window: the whole
period and each part of the breakdown (ISO weeks or calendar months, clipped to the period),
for all clusters together and, with several, for each. A window's figures are exactly what
the weekly model gives for that window:

- rows: one copy per (cluster, JobIDRaw, Submit, Start), the latest pull (as
  :meth:`~slurmkit.accounting.store.Store.load`);
- a row belongs to a window when it touches it (its Start, else Submit, else End, before the
  window's end, and its End — a running job's ``now``, never past Start + Timelimit — at or
  after its start), or is a pending array record submitted before its end;
- runs: rows that started (:func:`slurmkit.report.usage.started`) and are not pending; the
  others that did not start are *cancelled before start* (a job with no run in the window);
- ``in_window_s`` = ``run_s`` (ElapsedRaw; End − Start without it) × the share of
  [Start, End) inside the window; ``gpu_hours`` = GPUs × in_window_s / 3600;
  ``cpu_hours`` = NCPUS × in_window_s / 3600; a window none of whose runs has a GPU count
  (NCPUS) has its GPU (CPU) figures None, never 0;
- wasted: State in :data:`~slurmkit.report.usage.WASTE_STATES`, or not the job's final
  attempt in the window;
- ``wait_s`` = Start − (Eligible, else Submit), once per job (its first attempt started in
  the window), in the bucket of the GPUs it asked for (ReqTRES, else GPUs); quantiles with
  linear interpolation (pandas' and DuckDB's ``quantile_cont`` are the same).

Energy, efficiency (steps), the hourly curve, utilization and downtime are not in the period
report: they need the spool, the step rows or node events (left for later; sreport's
breakdown, :mod:`slurmkit.report.breakdown`, adds its section beside ``totals``).
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

import numpy as np
import pandas as pd

from slurmkit.accounting.frame import GPU_SOURCES
from slurmkit.errors import InputError, UsageError
from slurmkit.report.energy import J_PER_KWH, Assumptions
from slurmkit.report.period_plots import part_days
from slurmkit.report.period_text import empty_group_text, missing_counts, period_span, queue_wait_text, time_zone_text, time_zones
from slurmkit.report.jobs import SIZE_DURATION_BUCKETS, SIZE_GPU_BUCKETS, size_table
from slurmkit.report.usage import GPU_BUCKET_UNKNOWN, GPU_BUCKETS, WASTE_STATES
from slurmkit.report.definitions import (ENERGY_SOURCE_ORDER, GPU_TYPE_UNKNOWN, IDLE_JOBS, IDLE_UTIL_PCT, GPU_UNTYPED, NEVER_STARTED_LINE, REQUEUED_LINE, UNKNOWN_WHY,
                                    WAIT_BIN_LABELS, wait_histogram)
from slurmkit.report.window import Window, WindowError, iso_z, parse_when

#: DuckDB's memory limit when none is given: the aggregation spills past it (2GB: a quarter of
#: 13M jobs peaks at about 1.5 GiB RSS with it, and runs 15 % faster than with 1GB).
DEFAULT_MEMORY_LIMIT = "2GB"

#: The queue wait's GPU buckets by their number in the SQL (:func:`_build_rows`): unknown, then
#: :data:`~slurmkit.report.usage.GPU_BUCKETS` in order.
_BUCKET_LABELS = (GPU_BUCKET_UNKNOWN,) + tuple(label for _, _, label in GPU_BUCKETS)

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
                out.append((f"{y:04d}-W{w:02d}", Window(max(t, s), min(nxt, e))))
                t = nxt
        else:
            t = dt.datetime(s.year, s.month, 1, tzinfo=dt.timezone.utc)
            while t < e:
                nxt = _add_months(t, 1)
                out.append((f"{t.year:04d}-{t.month:02d}", Window(max(t, s), min(nxt, e))))
                t = nxt
        return out


def _add_months(t: dt.datetime, n: int) -> dt.datetime:
    m = t.month - 1 + n
    return t.replace(year=t.year + m // 12, month=m % 12 + 1, day=1)


#: The years a period may fall in: its end (the next year's 1 January at most) must be a date too.
YEARS = (1, 9998)


def _year(text: str, option: str) -> int:
    y = int(text)
    if not YEARS[0] <= y <= YEARS[1]:
        raise WindowError(option, f"year {y} is out of range ({YEARS[0]} to {YEARS[1]})")
    return y


def parse_period(month: str | None = None, quarter: str | None = None, year: str | None = None,
                 start: str | None = None, end: str | None = None, by: str | None = None) -> Period:
    """The period of exactly one of ``month`` (``2026-11``), ``quarter`` (``2026-Q4``; also
    ``2026Q4`` and ``2026-q4``, labelled ``2026-Q4``), ``year`` (``2026``) or ``start`` +
    ``end`` (end exclusive); years 1 to 9998 (:data:`YEARS`); ``by``: ``week`` or ``month``
    (default: weeks for a month or a span up to 62 days, months otherwise). An option given
    empty ("") is given (and refused as not a month, quarter, ...).
    Raises :class:`~slurmkit.report.window.WindowError` naming the option."""
    given = [n for n, v in (("--month", month), ("--quarter", quarter), ("--year", year),
                            ("--start", start if start is not None else end)) if v is not None]
    if len(given) != 1:
        raise WindowError(given[1] if len(given) > 1 else "--month",
                          "give one of --month, --quarter, --year or --start/--end")
    utc = dt.timezone.utc
    if month is not None:
        m = re.fullmatch(r"(\d{4})-(\d{1,2})", month.strip())
        if not m or not 1 <= int(m.group(2)) <= 12:
            raise WindowError("--month", f"not a month: {month!r} (expected e.g. 2026-11)")
        s = dt.datetime(_year(m.group(1), "--month"), int(m.group(2)), 1, tzinfo=utc)
        w, label = Window(s, _add_months(s, 1)), f"{s.year:04d}-{s.month:02d}"
    elif quarter is not None:
        m = re.fullmatch(r"(\d{4})-?Q([1-4])", quarter.strip(), re.I)
        if not m:
            raise WindowError("--quarter", f"not a quarter: {quarter!r} (expected e.g. 2026-Q4)")
        s = dt.datetime(_year(m.group(1), "--quarter"), 3 * int(m.group(2)) - 2, 1, tzinfo=utc)
        w, label = Window(s, _add_months(s, 3)), f"{s.year:04d}-Q{m.group(2)}"
    elif year is not None:
        if not re.fullmatch(r"\d{4}", year.strip()):
            raise WindowError("--year", f"not a year: {year!r} (expected e.g. 2026)")
        s = dt.datetime(_year(year.strip(), "--year"), 1, 1, tzinfo=utc)
        w, label = Window(s, s.replace(year=s.year + 1)), f"{s.year:04d}"
    else:
        if not (start and end):
            raise WindowError("--start" if end else "--end", "give both --start and --end")
        s = parse_when(start, "--start")
        e = parse_when(end, "--end")
        if e <= s:
            raise WindowError("--end", f"{iso_z(e)} is not after --start ({iso_z(s)})")
        w, label = Window(s, e), f"{iso_z(s)}..{iso_z(e)}"
    if by is None:
        by = "week" if (month is not None or (start and w.hours <= 62 * 24)) else "month"
    if by not in ("week", "month"):
        raise WindowError("--by", f"unknown breakdown {by!r} (week or month)")
    return Period(w, label, by)


def _store_days(store, window: Window, now: float | None = None, future: list | None = None,
                after_now: list | None = None) -> tuple[list[tuple[str, str]], list[str], list[str], dict]:
    """``(files, days missing, days not final, data quality)`` of ``store``'s days in
    ``window``: ``files`` a list of ``(day, allocs.parquet)``; data quality summed from the
    manifest (each day's pull: rows read, skipped, repaired). A day that starts at or after
    ``now`` (epoch s) is not read: it is future (appended to ``future``), not missing, and when
    the store holds it, it is also appended to ``after_now`` (a report pinned by ``--now``
    reads the same days whatever the store gained since)."""
    man = store.manifest()
    files, missing, open_days = [], [], []
    dq = {"rows_read": 0, "skipped": {}, "repaired": {}}
    for d0, _ in window.days():
        name = f"{d0:%Y-%m-%d}"
        path, steps = store.day_files(name)
        midnight = d0.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
        # (as Store.load: a day is read with both its files)
        held = name in man and path.exists() and steps.exists()
        if now is not None and future is not None and midnight >= now:
            future.append(name)
            if held and after_now is not None:
                after_now.append(name)
            continue
        if not held:
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
    the system's temp) past ``memory_limit`` (DuckDB's syntax: ``1GB``, ``512MB``). Raises
    :class:`~slurmkit.errors.UsageError` (``--memory-limit``) for a size DuckDB does not take."""
    import duckdb

    con = duckdb.connect(":memory:")
    try:
        con.execute(f"SET memory_limit = '{_q(str(memory_limit))}'")
    except duckdb.Error as exc:
        con.close()
        raise UsageError("--memory-limit", f"DuckDB does not take {memory_limit!r} (a size such as 2GB or "
                         f"512MB): {str(exc).splitlines()[0]}") from None
    con.execute(f"SET temp_directory = '{_q(temp_dir or tempfile.gettempdir())}'")
    con.execute(f"SET threads = {int(threads or os.cpu_count() or 1)}")
    con.execute("SET preserve_insertion_order = false")
    # (each view over the store's files binds their footers again: read once)
    con.execute("SET parquet_metadata_cache = true")
    # (DuckDB draws its own bar on a terminal for a query past 2 s, over the report's progress lines)
    con.execute("SET enable_progress_bar = false")
    return con


def memory_limit_error(memory_limit: str, what: str = "the report") -> UsageError:
    """The error of a DuckDB pass past ``memory_limit`` (DuckDB's size syntax): it names the
    limit and a larger one to give (twice it; ``--memory-limit``)."""
    import re

    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([KMGT]i?B|[KMGT]|B|bytes)?\s*", str(memory_limit), re.I)
    larger = f"{float(m.group(1)) * 2:g}{m.group(2) or ''}" if m else "a larger size (e.g. 4GB)"
    return UsageError("--memory-limit", f"{what} does not fit in DuckDB's memory limit {memory_limit} (its hash "
                                        f"tables cannot all spill): give a larger one, e.g. --memory-limit {larger}")


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
    epoch_us(pulled_at::TIMESTAMPTZ) AS pulled_us, physical_gpus::DOUBLE AS physical_gpus,
    energy_j::DOUBLE AS energy_j, energy_tres_j::DOUBLE AS energy_tres_j, total_cpu_s::DOUBLE AS total_cpu_s,
    alloc_mem_mib::DOUBLE AS alloc_mem_mib, job_id::VARCHAR AS job_id, req_cpus::DOUBLE AS req_cpus,
    nodelist::VARCHAR AS nodelist"""

#: The columns of :data:`_COLUMNS` a day file written by an earlier version may lack: read as
#: NULL (unknown, never 0).
_OPTIONAL = ("physical_gpus", "energy_j", "energy_tres_j", "total_cpu_s", "alloc_mem_mib", "req_cpus")
#: The text columns of :data:`_COLUMNS` a relation may lack (read as NULL).
_OPTIONAL_TEXT = ("nodelist",)


def _columns(names) -> str:
    """:data:`_COLUMNS` for a day file (or table) whose columns are ``names``: a file written
    before the frame had one of :data:`_OPTIONAL` (``physical_gpus``, ``energy_tres_j``) reads
    it as NULL (unknown, never 0); rows without ``pulled_at`` (a capture's) have no pull time."""
    out = _COLUMNS
    for c in _OPTIONAL:
        if c not in names:
            out = out.replace(f"{c}::DOUBLE AS {c}", f"NULL::DOUBLE AS {c}")
    for c in _OPTIONAL_TEXT:
        if c not in names:
            out = out.replace(f"{c}::VARCHAR AS {c}", f"NULL::VARCHAR AS {c}")
    if "pulled_at" not in names:   # (a capture's rows, :func:`register_rows`: never pulled)
        out = out.replace("epoch_us(pulled_at::TIMESTAMPTZ) AS pulled_us", "NULL::BIGINT AS pulled_us")
    return out


#: SQL: the key ``kn`` is a number below 2**40 (the JobIDRaw of every Slurm; as
#: :func:`~slurmkit.accounting.frame.identity_codes` reads keys as numbers).
NUMERIC = "kn BETWEEN 0 AND 1099511627775"


def _names(path) -> list[str]:
    """The columns of Parquet file ``path`` (its footer only); a file pyarrow cannot read is
    taken to have every column: reading it then fails as any unreadable day file does
    (:func:`store_read_error`)."""
    import pyarrow.parquet as pq

    try:
        return pq.read_schema(path).names
    except (OSError, ValueError):   # (pyarrow's ArrowInvalid is a ValueError)
        return list(_OPTIONAL + _OPTIONAL_TEXT)


@dataclass(frozen=True)
class Registered:
    """A relation registered in a DuckDB connection, read where a store file is read
    (:func:`_load_rows`, :func:`_load_steps`): a capture's rows as an in-memory Arrow table
    (:func:`register_rows`), no Parquet written. ``name``: the relation's name; ``columns``: its
    column names. Its rows carry ``file_row_number``, their position, as DuckDB's
    ``read_parquet(..., file_row_number = true)`` gives a file's."""

    name: str
    columns: tuple


def _source_names(src) -> list[str]:
    """The columns of a source: a :class:`Registered` relation's, or a Parquet file's (:func:`_names`)."""
    return list(src.columns) if isinstance(src, Registered) else _names(src)


def _scan(src, row_numbers: bool = False, hive: bool = True) -> str:
    """SQL: the relation a source is read from: a :class:`Registered` relation by its name, a
    Parquet file by ``read_parquet`` (``row_numbers``: with ``file_row_number``, as a registered
    relation carries it; ``hive`` False: its Cluster as the file holds it, not the folder's)."""
    if isinstance(src, Registered):
        return src.name
    opts = (", file_row_number = true" if row_numbers else "") + ("" if hive else ", hive_partitioning = false")
    return f"read_parquet('{_q(src)}'{opts})"


def register_rows(con, rows, name: str = "capture") -> tuple[Registered, Registered]:
    """Register a capture's typed rows (``rows``, a :class:`~slurmkit.accounting.frame.JobRows`:
    the frames of :func:`~slurmkit.accounting.frame.jobs_frame`, the columns the store writes,
    :meth:`~slurmkit.accounting.store.Store.save_day`) in ``con`` as two Arrow tables,
    ``<name>_allocs`` and ``<name>_steps``, each row with its position (``file_row_number``):
    ``(allocation rows, step rows)`` as :class:`Registered` sources of :func:`_load_rows` and
    :func:`_load_steps`. Nothing is copied into DuckDB: it scans the Arrow buffers."""
    import pyarrow as pa

    out = []
    for kind, frame in (("allocs", rows.allocs), ("steps", rows.steps)):
        t = pa.Table.from_pandas(frame, preserve_index=False)
        t = t.append_column("file_row_number", pa.array(np.arange(t.num_rows, dtype=np.int64)))
        con.register(f"{name}_{kind}", t)
        out.append(Registered(f"{name}_{kind}", tuple(t.column_names)))
    return out[0], out[1]


def _find_copies(con) -> None:
    """Tables ``cand`` (the rows of view ``raw`` whose ``jk`` several rows hold, from table
    ``keys_seen``) and ``cand_rows`` (``rk``; ``dropped``: a copy, of the same key pulled
    earlier, or the pending copy of a job a later pull shows started; ``multi``: a row kept of
    a job with several rows kept)."""
    # those rows' keys; of the rows of one key every copy but the latest pull's is dropped, and
    # the rows kept of a ``jk`` still held by several rows are the jobs with several rows
    con.execute("""CREATE TEMP TABLE cand AS
        SELECT (fi::BIGINT << 32) | fr AS rk, sc, cluster, key_id, submit, start, pulled_us, fday, jk,
               pending_tasks FROM raw
        SEMI JOIN (SELECT jk FROM keys_seen WHERE jk IS NOT NULL) g USING (jk)""")
    # a row without Start (the job pending when it was pulled) whose job a later pull shows
    # started (same Submit) is that job's earlier copy, dropped as copies are (``late``: as
    # :meth:`~slurmkit.accounting.frame.JobRows.drop_started_later` reads it)
    con.execute("""CREATE TEMP TABLE cand_rows AS
        SELECT rk, NOT kept AS dropped,
               kept AND count(*) FILTER (WHERE kept) OVER (PARTITION BY jk) > 1 AS multi
        FROM (SELECT rk, jk, rn = 1 AND NOT coalesce(start IS NULL AND pending_tasks = 0 AND pulled_us < late, false) AS kept
              FROM (SELECT rk, jk, start, pending_tasks, pulled_us,
                           row_number() OVER (PARTITION BY jk, sc, cluster, key_id, submit, start
                                              ORDER BY pulled_us DESC NULLS FIRST, fday DESC) AS rn,
                           max(pulled_us) FILTER (WHERE start IS NOT NULL)
                               OVER (PARTITION BY jk, sc, cluster, key_id, submit) AS late
                    FROM cand))""")


def _load_rows(con, files: dict[str, list[tuple]], flags: dict[str, tuple[bool, bool]] | None = None) -> None:
    """The stored allocation rows of ``files`` (store cluster -> ``[(day, allocs.parquet)]``, a
    source being a Parquet file or a :class:`Registered` relation: a capture's rows,
    :func:`register_rows`; a
    summed day as ``(day, allocs.parquet, c, hi)``: its compared rows ``[0, c)`` go through the
    copies' rules below, its direct rows ``[c, hi)`` (view ``direct``) are jobs with one row
    each, its other rows are in its sums: :mod:`slurmkit.report.day_sums`),
    one copy per (cluster, JobIDRaw, Submit, Start) — the latest pull, ties to the later day,
    as :meth:`~slurmkit.accounting.store.Store.load` keeps — in three views, each row with
    ``sc`` (the store's cluster), ``kn`` (the key as a number, else NULL) and ``jk`` (a number
    equal for the rows of one job identity: the key as a number marked with the store
    cluster, else a hash; rows of different jobs may share one, so it only narrows which jobs
    can have several rows; the identity itself, ``jid``, is view ``bj``'s, :func:`_identity`):

    - ``b``: every row kept (the copies dropped);
    - ``single``: the rows of the jobs with one row (most of them: no sort, no lookup by key);
    - ``several``: the rows of the jobs with several rows (several attempts, or several jobs
      of one ``jk``), also table ``multi_rows`` by (file, row).

    Table ``clusters_seen``: per store cluster, whether any key is not a number below 2**40
    (``textual``) and any row of ``b`` has Eligible (``elig``), or so say ``flags`` (store
    cluster -> ``(elig, textual)`` of the rows read from day sums instead).

    The copies (docs/report.md, *Copies*) and the jobs with several rows are found from one
    grouping of every row by ``jk`` (a number): only the rows of a ``jk`` held by several rows
    (``cand``: a job over midnight or running, held by each day's pull, and the jobs with
    several attempts) are compared, by a window sort over that part of the store. Nothing is
    copied into DuckDB but ``cand``'s keys: each statement reads the files with the columns it
    needs (``raw``, each row with its file ``fi`` and row number ``fr`` there); rows are named
    by (file, row) (``rk``), so each view is ``raw`` less (or only) a set of them."""
    parts, direct, fi = [], [], 0
    for ci, (sc, fs) in enumerate(files.items()):
        for day, path, *runs in fs:
            d0 = _epoch(f"{day}T00:00:00Z")
            head = f"""SELECT {fi} AS fi, file_row_number AS fr, '{_q(sc)}' AS sc, {ci << 40} AS sck,
                       {d0!r}::DOUBLE AS fday, {_columns(_source_names(path))}
                       FROM {_scan(path, row_numbers=True)}"""
            if runs:
                # (a summed day: its compared rows, and its direct rows apart: row groups;
                # a run with no row is not read at all)
                c, hi = (int(x) for x in runs)
                if c > 0:
                    parts.append(f"{head} WHERE file_row_number < {c}")
                if hi > c:
                    direct.append(f"{head} WHERE file_row_number >= {c} AND file_row_number < {hi}")
            else:
                parts.append(head)
            empty = f"{head} LIMIT 0"   # (the columns, no row: a view over no file)
            fi += 1
    # (``jk``: a key that is a number below 2**40 (``NUMERIC``) is that number plus the store
    # cluster's number x 2**40 (``sck``), never negative; any other key is negative, a hash of
    # the store cluster and the key; no text hashed per row where the key is a number; sacct's
    # Cluster is left out: rows of two sacct clusters sharing a JobIDRaw only share a ``jk``)
    for view, sel in (("raw", parts or [empty]), ("direct", direct or [empty])):
        con.execute(f"""CREATE TEMP VIEW {view} AS
            SELECT * EXCLUDE (sck), CASE WHEN {NUMERIC} THEN kn + sck ELSE -1 - (hash(sc, key_id) >> 1)::BIGINT END AS jk
            FROM (SELECT *, TRY_CAST(key_id AS BIGINT) AS kn FROM (""" + "\nUNION ALL\n".join(sel) + "))")
    # one grouping of every row by a number: the job identities held by several rows, and per
    # store cluster (the set ``(sc)``, ``jk`` NULL) whether any key is not a number below 2**40
    # (``textual``: a negative ``jk``; the same in ``b``: a dropped copy has the key of the copy
    # kept)
    con.execute("""CREATE TEMP TABLE keys_seen AS
        SELECT sc, jk, min(jk) < 0 AS textual
        FROM raw GROUP BY GROUPING SETS ((jk), (sc)) HAVING GROUPING(jk) = 1 OR count(*) > 1""")
    _find_copies(con)
    con.execute("CREATE TEMP TABLE multi_rows AS SELECT rk FROM cand_rows WHERE multi")
    con.execute("CREATE TEMP TABLE skipped AS SELECT rk FROM cand_rows WHERE dropped OR multi")
    # (the direct rows of summed days: one copy each, of a job with one row)
    con.execute("""CREATE TEMP VIEW b AS
        SELECT * EXCLUDE (fi, fr), (fi::BIGINT << 32) | fr AS rk FROM raw
        WHERE ((fi::BIGINT << 32) | fr) NOT IN (SELECT rk FROM cand_rows WHERE dropped)
        UNION ALL SELECT * EXCLUDE (fi, fr), (fi::BIGINT << 32) | fr AS rk FROM direct""")
    # ``single``: the rows of the jobs with one row; ``several``: the others' (copies dropped)
    con.execute("""CREATE TEMP VIEW single AS
        SELECT * EXCLUDE (fi, fr), (fi::BIGINT << 32) | fr AS rk FROM raw WHERE ((fi::BIGINT << 32) | fr) NOT IN (SELECT rk FROM skipped)
        UNION ALL SELECT * EXCLUDE (fi, fr), (fi::BIGINT << 32) | fr AS rk FROM direct""")
    con.execute("""CREATE TEMP VIEW several AS
        SELECT * EXCLUDE (fi, fr), (fi::BIGINT << 32) | fr AS rk FROM raw WHERE ((fi::BIGINT << 32) | fr) IN (SELECT rk FROM multi_rows)""")
    # any row with Eligible, per store cluster (the first such row answers)
    flags = flags or {}
    elig = {sc: flags.get(sc, (False, False))[0] or bool(con.execute(
        f"""SELECT count(*) FROM (SELECT 1 FROM b WHERE sc = '{_q(sc)}' AND eligible IS NOT NULL LIMIT 1)""").fetchone()[0])
        for sc in files}
    con.execute("CREATE TEMP TABLE clusters_seen(sc VARCHAR, textual BOOLEAN, elig BOOLEAN)")
    con.execute("INSERT INTO clusters_seen SELECT sc, textual, NULL FROM keys_seen WHERE jk IS NULL")
    for sc, e in elig.items():
        textual = str(bool(flags.get(sc, (False, False))[1])).lower()
        if not con.execute(f"SELECT count(*) FROM clusters_seen WHERE sc = '{_q(sc)}'").fetchone()[0]:
            con.execute(f"INSERT INTO clusters_seen VALUES ('{_q(sc)}', {textual}, NULL)")
        con.execute(f"UPDATE clusters_seen SET elig = {str(e).lower()}, textual = textual OR {textual} "
                    f"WHERE sc = '{_q(sc)}'")


#: Seconds after its attempt's Start a step may start and still be that attempt's (as
#: :func:`slurmkit.report.usage.attempt_of_steps` matches them).
STEP_TOLERANCE_S = 5
#: A time later than every time (a step or an attempt without Start sorts last, as in
#: :func:`~slurmkit.report.usage.attempt_of_steps`).
_LAST = 2.0 ** 40


def step_files(files: dict) -> dict[str, list[str]]:
    """The step files (``steps.parquet``) beside the day files of ``files`` (store cluster ->
    ``[(day, allocs.parquet, ...)]``), per store cluster."""
    return {sc: [str(Path(f[1]).parent / "steps.parquet") for f in fs] for sc, fs in files.items()}


#: The step columns :func:`_load_steps` reads (a file written before one existed reads it NULL).
_STEP_COLUMNS = ("elapsed_s", "total_cpu_s", "mem_used_mib", "gpu_util_pct", "gpus", "energy_j")

#: SQL: the steps' figures of an allocation, over its step rows (one copy each), as
#: :func:`slurmkit.report.usage.allocations` aggregates them (``_step_usage``): ``sej`` the
#: largest ``energy=`` of TRESUsageInTot (J); ``smem`` the largest step memory (MiB); ``scpu`` the
#: steps' TotalCPU summed (s; NULL when none has one); ``sutil`` the mean gres/gpuutil (capped at
#: 100 %) of the steps that hold GPUs (not ``extern``, not 0 GPUs), weighted by their GPUs (1
#: where unknown) x ElapsedRaw (at least 1 s).
_STEP_FIGURES = """max(energy_j) AS sej, max(mem_used_mib) AS smem,
    CASE WHEN count(total_cpu_s) > 0 THEN sum(total_cpu_s) END AS scpu,
    sum(least(gpu_util_pct, 100.0) * greatest(coalesce(elapsed_s, 0), 1) * coalesce(gpus, 1))
        FILTER (WHERE gpu_util_pct IS NOT NULL AND step <> 'extern' AND NOT coalesce(gpus = 0, false))
    / nullif(sum(greatest(coalesce(elapsed_s, 0), 1) * coalesce(gpus, 1))
        FILTER (WHERE gpu_util_pct IS NOT NULL AND step <> 'extern' AND NOT coalesce(gpus = 0, false)), 0) AS sutil"""


def _load_steps(con, steps: dict[str, list[str]], multi: bool, hive: bool = True, of_rows: bool = False) -> None:
    """Tables of the step rows' figures per allocation (:data:`_STEP_FIGURES`), from the step
    files ``steps`` (store cluster -> ``steps.parquet`` paths, or :class:`Registered` relations:
    a capture's step rows, :func:`register_rows`), each step row once (the copy of
    the latest pull, ties to the later day, as :meth:`~slurmkit.accounting.store.Store.load`
    keeps it): ``steps_job`` per job identity (store cluster, sacct's Cluster, JobIDRaw: the
    figures of a job with one row, which holds all its steps) and, with ``multi`` (view
    ``several`` holds rows), ``steps_att`` per attempt of the jobs with several rows
    (``several``'s rows, by Submit and Start): each step goes to the attempt that started last
    at or before its Start (+ :data:`STEP_TOLERANCE_S`), one without Start to the last, one
    before every attempt to the first (:func:`slurmkit.report.usage.attempt_of_steps`).
    ``hive``: the files' Cluster read as their rows are (:func:`_load_rows`: from the store's
    ``cluster=`` folder, as DuckDB reads a Hive path; False: as the files hold it). ``of_rows``:
    only the steps of the jobs of view ``b`` (the rows read one by one: with day sums, the
    plain rows' steps are in their sums)."""
    parts = []
    for sc, paths in steps.items():
        for path in paths:
            names = _source_names(path)
            if names != ["physical_gpus"] and not isinstance(path, Registered):   # (a file pyarrow reads: another file in its place is an error)
                from slurmkit.accounting import store as S

                S.check_columns(path, names, S.STEP_FILE_COLUMNS, "a day's step file of the store")
            cols = ", ".join(f"{c}::DOUBLE AS {c}" if c in names else f"NULL::DOUBLE AS {c}" for c in _STEP_COLUMNS)
            pull = "epoch_us(pulled_at::TIMESTAMPTZ)" if "pulled_at" in names else "NULL::BIGINT"
            day = (_epoch(f"{Path(path).parent.name[4:]}T00:00:00Z")
                   if not isinstance(path, Registered) and Path(path).parent.name.startswith("day=") else 0.0)
            parts.append(f"""SELECT '{_q(sc)}' AS sc, coalesce(cluster::VARCHAR, '') AS cl, key_id::VARCHAR AS key_id,
                                    step::VARCHAR AS step, epoch_us(submit::TIMESTAMPTZ) / 1e6 AS submit,
                                    epoch_us(start::TIMESTAMPTZ) / 1e6 AS start, {cols},
                                    coalesce({pull}, 9223372036854775807) AS pu, {day!r}::DOUBLE AS fday
                             FROM {_scan(path, hive=hive)}""")
    empty = ("SELECT NULL::VARCHAR AS sc, NULL::VARCHAR AS cl, NULL::VARCHAR AS key_id, NULL::VARCHAR AS step, "
             "NULL::DOUBLE AS submit, NULL::DOUBLE AS start, "
             + ", ".join(f"NULL::DOUBLE AS {c}" for c in _STEP_COLUMNS) + ", 0::BIGINT AS pu, 0.0 AS fday LIMIT 0")
    src = "\nUNION ALL\n".join(parts) or empty
    # one copy of each step row (a job over midnight is in each day's pull)
    latest = ", ".join(f"arg_max({c}, (pu, fday)) AS {c}" for c in _STEP_COLUMNS)
    only = ("SEMI JOIN (SELECT DISTINCT sc, coalesce(cluster, '') AS cl, key_id FROM b) USING (sc, cl, key_id)"
            if of_rows else "")
    con.execute(f"""CREATE TEMP TABLE stp AS SELECT sc, cl, key_id, step, submit, start, {latest}
                    FROM ({src}) {only} GROUP BY sc, cl, key_id, step, submit, start""")
    con.execute(f"CREATE TEMP TABLE steps_job AS SELECT sc, cl, key_id, {_STEP_FIGURES} FROM stp GROUP BY ALL")
    con.execute("""CREATE TEMP TABLE steps_att(sc VARCHAR, cl VARCHAR, key_id VARCHAR, submit DOUBLE, start DOUBLE,
                                               sej DOUBLE, smem DOUBLE, scpu DOUBLE, sutil DOUBLE)""")
    if not multi:
        return
    last = repr(_LAST)
    con.execute(f"""INSERT INTO steps_att
        WITH att AS (SELECT DISTINCT sc, coalesce(cluster, '') AS cl, key_id, submit, start,
                            coalesce(start, {last}) AS k FROM several),
             first AS (SELECT sc, cl, key_id, arg_min(submit, k) AS submit, arg_min(start, k) AS start
                       FROM att GROUP BY ALL),
             s AS (SELECT stp.* EXCLUDE (submit, start), coalesce(start + {STEP_TOLERANCE_S}, {last}) AS k FROM stp
                   SEMI JOIN att USING (sc, cl, key_id)),
             m AS (SELECT s.* EXCLUDE (k), a.k IS NOT NULL AS hit, a.submit, a.start
                   FROM s ASOF LEFT JOIN att a ON s.sc = a.sc AND s.cl = a.cl AND s.key_id = a.key_id AND s.k >= a.k)
        SELECT m.sc, m.cl, m.key_id, CASE WHEN hit THEN m.submit ELSE f.submit END AS submit,
               CASE WHEN hit THEN m.start ELSE f.start END AS start, {_STEP_FIGURES}
        FROM m JOIN first f USING (sc, cl, key_id) GROUP BY m.sc, m.cl, m.key_id, 4, 5""")


def _load_spool(con, spool, tolerance_s: float) -> None:
    """Table ``spool_att``: the hook spool's records (``spool``, the frame of
    :func:`slurmkit.report.energy.read_spool`; None or empty: no row) matched to the attempts
    of view ``b`` as :func:`slurmkit.report.energy.match_spool` matches them (same JobIDRaw,
    its prolog's read inside the attempt's [Start, End] ± ``tolerance_s``, a running attempt
    open-ended; the one that started later when two hold it; a record without a start time
    to the job's only attempt), per attempt (store cluster, Cluster, JobIDRaw, Submit, Start):
    ``smj`` (mJ, the records' sum), ``sok`` (every record measured), ``sutilp`` (the records'
    mean GPU utilization, %: the utilization of a job its steps do not give), ``sprom`` (a
    record was read through Prometheus, ``provenance``: the energy is Prometheus'), ``spol``
    (the clock policy the records name: one label, :data:`~slurmkit.report.energy.MIXED_POLICIES`
    when they disagree, a record without one counting as ``none recorded``; NULL when the spool
    has no ``policy`` column). Table ``spool_lost``: the position (``rec``) in ``spool`` of each
    record of a job ``b`` holds that no attempt holds in time (node clock skew, sacct times read
    in another zone: its energy is not used)."""
    from slurmkit.hooks.clock_policy import NONE_RECORDED
    from slurmkit.report.energy import MIXED_POLICIES

    con.execute("""CREATE TEMP TABLE spool_att(sc VARCHAR, cl VARCHAR, key_id VARCHAR, submit DOUBLE, start DOUBLE,
                                               smj DOUBLE, sok BOOLEAN, sutilp DOUBLE, sprom BOOLEAN, spol VARCHAR)""")
    con.execute("CREATE TEMP TABLE spool_lost(rec BIGINT)")
    if spool is None or not len(spool):
        return
    has_policy = "policy" in spool
    rec = pd.DataFrame({"rec": np.arange(len(spool)), "job_id": spool["job_id"].astype(str).to_numpy(),
                        "t": pd.to_numeric(spool["start_s"], errors="coerce").to_numpy(float),
                        "mj": pd.to_numeric(spool["energy_mj"], errors="coerce").to_numpy(float),
                        "ok": spool["measured"].to_numpy(bool),
                        "util": pd.to_numeric(spool["gpu_util_pct"], errors="coerce").to_numpy(float)
                        if "gpu_util_pct" in spool else np.full(len(spool), np.nan),
                        "prom": (spool["provenance"] == "prometheus").to_numpy(bool)
                        if "provenance" in spool else np.zeros(len(spool), bool),
                        "pol": spool["policy"].astype(object).where(spool["policy"].notna(), NONE_RECORDED)
                        .astype(str).to_numpy(object) if has_policy else np.full(len(spool), None, object)})
    con.register("spool_rec", rec)
    tol = float(tolerance_s)
    con.execute(f"""CREATE TEMP TABLE spool_hit AS
        WITH att AS (SELECT sc, coalesce(cluster, '') AS cl, key_id, submit, start, "end" FROM b
                     SEMI JOIN spool_rec r ON b.key_id = r.job_id),
             n AS (SELECT key_id, count(*) AS natt FROM att GROUP BY key_id)
        SELECT r.rec, r.mj, r.ok, r.util, r.prom, r.pol, a.* FROM spool_rec r JOIN att a ON a.key_id = r.job_id
        JOIN n USING (key_id)
        WHERE (NOT coalesce(isnan(r.t), true) AND r.t >= a.start - {tol!r} AND r.t <= coalesce(a."end", 'infinity'::DOUBLE) + {tol!r})
           OR (coalesce(isnan(r.t), true) AND n.natt = 1)
        QUALIFY row_number() OVER (PARTITION BY r.rec ORDER BY a.start DESC NULLS FIRST) = 1""")
    pol = (f"CASE WHEN count(DISTINCT pol) > 1 THEN '{_q(MIXED_POLICIES)}' ELSE any_value(pol) END"
           if has_policy else "NULL::VARCHAR")
    con.execute(f"""INSERT INTO spool_att
        SELECT sc, cl, key_id, submit, start, coalesce(sum(mj) FILTER (WHERE NOT coalesce(isnan(mj), true)), 0) AS smj,
               bool_and(ok) AS sok, avg(util) FILTER (WHERE NOT coalesce(isnan(util), true)) AS sutilp,
               bool_or(prom) AS sprom, {pol} AS spol
        FROM spool_hit GROUP BY sc, cl, key_id, submit, start""")
    con.execute("""INSERT INTO spool_lost
        SELECT rec FROM spool_rec r SEMI JOIN b ON b.key_id = r.job_id
        WHERE rec NOT IN (SELECT rec FROM spool_hit) ORDER BY rec""")
    con.execute("DROP TABLE spool_hit")
    con.unregister("spool_rec")


def _identity(con) -> None:
    """View ``bj``: view ``several`` (the rows of the jobs with several rows) with ``jid``, the
    job identity: store cluster, sacct's Cluster and JobIDRaw, as
    :func:`~slurmkit.accounting.frame.identity_codes` reads it: the number when every key of the
    store's cluster is one below 2**40 (as the pandas path casts it, so ``012`` is ``12``), else
    the text (table ``clusters_seen``, :func:`_load_rows`, says which);
    read for the jobs with several rows only (``m``)."""
    textual = [r[0] for r in con.execute("SELECT sc FROM clusters_seen WHERE textual").fetchall()]
    text_sql = "sc IN (" + ", ".join(f"'{_q(s)}'" for s in textual) + ")" if textual else "false"
    ident = f"""CASE WHEN {text_sql} THEN key_id ELSE CAST(kn AS VARCHAR) END"""
    con.execute(f"""CREATE OR REPLACE TEMP VIEW bj AS
        SELECT * EXCLUDE (kn), sc || chr(31) || coalesce(cluster, '') || chr(31) || ({ident}) AS jid FROM several""")


def _as_of_sql(now: float) -> str:
    """SQL over ``{only}`` (the rows, :data:`_COLUMNS`): the rows as the store stood at ``now``
    (epoch s). A row ended after it was running then (End, Elapsed, energy and CPU time not
    known yet: NULL, State RUNNING); one started after it was pending (Start NULL, State
    PENDING); a row submitted after it is not read. The report's figures then do not depend on
    when the store was filled."""
    late = f"""(coalesce("end" > {now!r}, false) OR coalesce(start > {now!r}, false))"""
    return f"""SELECT * REPLACE (
                   CASE WHEN start > {now!r} THEN NULL ELSE start END AS start,
                   CASE WHEN {late} THEN NULL ELSE "end" END AS "end",
                   CASE WHEN NOT {late} THEN state WHEN start IS NULL OR start > {now!r} THEN 'PENDING'
                        ELSE 'RUNNING' END AS state,
                   CASE WHEN {late} THEN NULL ELSE elapsed_s END AS elapsed_s,
                   CASE WHEN {late} THEN NULL ELSE energy_j END AS energy_j,
                   CASE WHEN {late} THEN NULL ELSE energy_tres_j END AS energy_tres_j,
                   CASE WHEN {late} THEN NULL ELSE total_cpu_s END AS total_cpu_s)
               FROM ({{only}}) WHERE NOT coalesce(least(submit, start, "end") > {now!r}, false)"""


def _build_rows(con, windows: list[tuple[int, float, float, str]], now: float,
                rollup: dict[int, tuple[int, float | None]] | None = None, running_elapsed: bool = False,
                clip: bool = True) -> None:
    """View ``rw``: the per (row, window) relation over views ``single`` and ``several``
    (:func:`_load_rows`): each row once per window it belongs to, with its columns (each rule as
    docs/report.md states it: ``jobs.csv``, :func:`rows_table`). ``windows``: ``(wid, start, end, scope)``, epoch s; ``scope`` "" (every cluster) or one
    store cluster. ``multi``: the job has several rows in the store's days (its flags need the
    job's other rows); ``requeued``: not the job's final attempt in the window (by Start, then
    Submit, unset last); ``last_run``: the job's last run in the window (its outcome line);
    ``wait_first``: the job's first attempt that started in the window; ``run``: started and
    not pending; ``never``: neither (cancelled before start). The rows of the jobs with several
    rows are table ``m`` (small: their flags need a window sort; ``has_run``: the job has a run
    in the window); the others are computed again by each query over ``rw``, not stored.

    ``rollup``: ``{part wid: (its period's wid, the previous part's start or None)}``: the
    rows with one row in the store are joined to the parts only (the period is rolled up from
    them, :func:`_aggregate`), each with ``prim``: the row is in no earlier part (counted once
    in the period); without it every row is joined to every window it touches. ``clip``: the
    rows as the store stood at ``now`` (:func:`_as_of_sql`; False: the day sums' rows, as they are).
    ``running_elapsed``: the rows are a capture's (:func:`register_rows`): a running row ran,
    as far as the capture knows, until sacct printed its Elapsed (Start + ElapsedRaw, when over
    0), never past ``now``. Built again over other windows, it replaces the earlier build."""
    # (per store cluster, a constant in the SQL: no join per row; no job with several rows:
    # ``multi`` false, no lookup per row, and ``m`` empty, no scan of the files)
    elig = dict(con.execute("SELECT sc, elig FROM clusters_seen").fetchall())
    any_elig = ("CASE sc " + " ".join(f"WHEN '{_q(c)}' THEN {str(bool(e)).lower()}" for c, e in elig.items())
                + " END") if elig else "false"
    has_multi = bool(con.execute("SELECT count(*) FROM multi_rows").fetchone()[0])
    _identity(con)
    rollup = rollup or {}
    wins = ", ".join(f"({i}, {s!r}::DOUBLE, {e!r}::DOUBLE, '{_q(sc)}', {str(not rollup or i in rollup).lower()}, "
                     f"{'NULL' if rollup.get(i, (0, None))[1] is None else repr(rollup[i][1])}::DOUBLE)"
                     for i, s, e, sc in windows)
    cols = _row_columns()
    _record_windows(con, windows)
    # a running row (no End) runs up to its pull (the copy kept is the latest one: after it
    # nothing is known; a store filled from a capture: the capture's time), never past ``now``
    hz = f"least(coalesce(pulled_us / 1e6, {now!r}), {now!r})"
    if running_elapsed:   # (least skips a NULL: a row with an End, or no Elapsed over 0)
        hz = f"""least({hz}, CASE WHEN "end" IS NULL AND elapsed_s > 0 THEN start + elapsed_s END)"""
    rows = f"""
    WITH b AS ({_as_of_sql(now) if clip else "{only}"}), base AS (
        SELECT b.*, {_energy_class()} AS ec,
               CASE WHEN "end" IS NULL AND isfinite(timelimit_s) AND start + timelimit_s < {hz}
                    THEN start + timelimit_s ELSE coalesce("end", {hz}) END AS stop0,
               coalesce(start, submit, "end") AS t_lo,
               start IS NOT NULL AND NOT coalesce(start > "end", false)
                 AND NOT (coalesce(start = "end", false) AND NOT coalesce(elapsed_s > 0, false)
                          AND ((eligible IS NOT NULL AND start < eligible) OR (eligible IS NULL AND {any_elig})))
                 AS ran,
               pending_tasks > 0 OR (state = 'PENDING' AND start IS NULL) AS waiting,
        FROM b
    ), win(wid, ws, we, scope, part, pws) AS (VALUES {wins}
    ), j AS (
        SELECT b.*, w.wid, w.ws, w.we,
               CASE WHEN ran AND stop0 < start THEN start ELSE stop0 END AS stop,
               w.pws IS NULL OR NOT coalesce((b.t_lo < w.ws AND b.stop0 >= w.pws)
                                             OR (b.pending_tasks > 0 AND (b.submit IS NULL OR b.submit < w.ws)), false)
                 AS prim
        FROM base b JOIN win w
          ON (w.scope = '' OR w.scope = b.sc) {{parts}}
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
                        full_s, 0) AS run_s,
               coalesce(CASE WHEN elapsed_s IS NOT NULL AND "end" IS NOT NULL THEN elapsed_s ELSE full_s END,
                        full_s, 0)
               * coalesce(CASE WHEN full_s > 0 THEN overlap / full_s ELSE 0 END, 0) AS in_window_s,
               ran AND "end" IS NULL AS provisional
        FROM u
    ) SELECT *, {_class_joules()} * CASE WHEN run_s > 0 THEN in_window_s / run_s ELSE 1.0 END AS ej FROM v
    """
    derived = """*, NOT waiting AND ran AS run, NOT waiting AND NOT ran AS never,
           CASE WHEN waste_state OR requeued OR gpus IS NULL THEN gpu_hours ELSE 0 END AS waste,
           CASE WHEN provisional OR gpus IS NULL THEN gpu_hours ELSE 0 END AS prov,
           CASE WHEN wait_first THEN wait0 END AS wait_s"""
    only = _with_extras(con, "(SELECT *, true AS multi FROM bj)" if has_multi else
                        "(SELECT *, true AS multi FROM bj WHERE false)", "steps_att")
    con.execute(f"""CREATE TEMP TABLE m AS
        SELECT {derived}, bool_or(NOT waiting AND ran) OVER (PARTITION BY wid, jid) AS has_run FROM (
            SELECT {cols},
                   row_number() OVER (PARTITION BY wid, jid ORDER BY start DESC NULLS FIRST,
                                      submit DESC NULLS FIRST) > 1 AS requeued,
                   NOT waiting AND ran AND row_number() OVER (PARTITION BY wid, jid, NOT waiting AND ran
                                                              ORDER BY start DESC NULLS FIRST) = 1 AS last_run,
                   row_number() OVER (PARTITION BY wid, jid, ran AND start >= ws AND start < we
                                      ORDER BY start) = 1 AS wait_first
            FROM ({rows.replace("{only}", only).replace("{parts}", "")}) WHERE multi)""")
    con.execute(f"""CREATE OR REPLACE TEMP VIEW rw AS
        SELECT {derived} FROM (
            SELECT {cols}, false AS requeued, true AS last_run, true AS wait_first FROM ({rows.replace("{only}", _with_extras(con, "(SELECT *, NULL::VARCHAR AS jid, false AS multi FROM single)", "steps_job")).replace("{parts}", "AND w.part")}) WHERE NOT multi)
        UNION ALL SELECT * EXCLUDE (has_run) FROM m""")


def _record_windows(con, windows: list[tuple[int, float, float, str]]) -> None:
    """Table ``rw_windows``: the windows ``(wid, ws, we, scope)`` view ``rw`` is built over
    (again: table ``m`` of an earlier build dropped)."""
    con.execute("DROP TABLE IF EXISTS m")
    con.execute("CREATE OR REPLACE TEMP TABLE rw_windows(wid INTEGER, ws DOUBLE, we DOUBLE, scope VARCHAR)")
    con.executemany("INSERT INTO rw_windows VALUES (?, ?, ?, ?)", [list(w) for w in windows])


def _has_rows(con, table: str) -> bool:
    """True when temp table ``table`` exists in ``con`` and holds a row."""
    if not con.execute("SELECT count(*) FROM duckdb_tables() WHERE temporary AND table_name = ?", [table]).fetchone()[0]:
        return False
    return bool(con.execute(f"SELECT count(*) FROM (SELECT 1 FROM {table} LIMIT 1)").fetchone()[0])


def _with_extras(con, only: str, steps: str) -> str:
    """SQL: the rows of ``only`` with their steps' figures (``sej``: table ``steps`` of
    :func:`_load_steps`, ``steps_job`` by job identity or ``steps_att`` by attempt) and their
    spool records' (``smj``, ``sok``: table ``spool_att`` of :func:`_load_spool`); NULL where a
    table is absent or empty (no join)."""
    key = "x.sc = r.sc AND x.cl = coalesce(r.cluster, '') AND x.key_id = r.key_id"
    att = f"{key} AND x.submit IS NOT DISTINCT FROM r.submit AND x.start IS NOT DISTINCT FROM r.start"
    cols, joins = [], []
    if _has_rows(con, steps):
        cols += ["st.sej", "st.smem", "st.scpu", "st.sutil"]
        joins.append(f"LEFT JOIN {steps} st ON {(key if steps == 'steps_job' else att).replace('x.', 'st.')}")
    else:
        cols += ["NULL::DOUBLE AS sej", "NULL::DOUBLE AS smem", "NULL::DOUBLE AS scpu", "NULL::DOUBLE AS sutil"]
    if _has_rows(con, "spool_att"):
        cols += ["sp.smj", "sp.sok", "sp.sutilp", "sp.sprom", "sp.spol"]
        joins.append(f"LEFT JOIN spool_att sp ON {att.replace('x.', 'sp.')}")
    else:
        cols += ["NULL::DOUBLE AS smj", "NULL::BOOLEAN AS sok", "NULL::DOUBLE AS sutilp", "NULL::BOOLEAN AS sprom",
                 "NULL::VARCHAR AS spol"]
    return f"SELECT r.*, {', '.join(cols)} FROM {only} r {' '.join(joins)}"


#: The energy class of a row (``ec``): which of a job's energy figures is its own, in
#: :func:`slurmkit.report.energy.attach_energy`'s order, before any assumption: the hook spool's
#: (measured: its records matched, every one measured; ``prometheus``, number 6 of
#: :data:`ENERGY_SOURCES`, where one of them was read through Prometheus), Slurm's
#: ConsumedEnergyRaw, the ``energy=`` of AllocTRES, the largest ``energy=`` of its steps'
#: TRESUsageInTot (each over 0), else none. The assumptions (whether Slurm's energy is trusted, the GPU TDP that models the
#: others) are applied to the sums, :func:`energy_source_sql`.
ENERGY_CLASSES = ("none", "measured", "slurm", "slurm_tres", "slurm_usage")
#: The energy sources of the period report, by number (``esrc``): the classes, then modelled,
#: then the spool's records read through Prometheus (a class of its own, as measured).
ENERGY_SOURCES = ENERGY_CLASSES + ("modelled", "prometheus")


def _energy_class() -> str:
    """SQL: a row's :data:`ENERGY_CLASSES` index (6: Prometheus', :data:`ENERGY_SOURCES`), over
    its ``smj``/``sok``/``sprom`` (spool), ``energy_j``, ``energy_tres_j`` and ``sej`` (steps)."""
    return ("CASE WHEN smj IS NOT NULL AND sok THEN CASE WHEN sprom THEN 6 ELSE 1 END WHEN energy_j > 0 THEN 2 WHEN energy_tres_j > 0 THEN 3 "
            "WHEN sej > 0 THEN 4 ELSE 0 END")


def _class_joules() -> str:
    """SQL: a row's energy of its class (J, over its whole run; NULL for none): the spool's mJ /
    1000, ConsumedEnergyRaw, AllocTRES' or the steps' ``energy=``. Scaled by the share of the run
    inside the window (``ej`` of view ``rw``), as :func:`slurmkit.report.energy.attach_energy`
    scales it (a run of 0 s: the whole of it)."""
    return "CASE ec WHEN 1 THEN smj / 1000.0 WHEN 6 THEN smj / 1000.0 WHEN 2 THEN energy_j WHEN 3 THEN energy_tres_j WHEN 4 THEN sej END"


def tdp_sql(a, gtype: str) -> str:
    """SQL: the GPU TDP (W) of GPU type group ``gtype`` (a SQL expression: the ``by_gpu_type``
    label, :func:`_row_columns`) from assumptions ``a`` (:class:`~slurmkit.report.energy.Assumptions`:
    ``gpu_tdp_w`` by type, lower case; ``default_tdp_w`` for the others and for untyped GPUs),
    NULL when not known: as :func:`slurmkit.report.energy.attach_energy` looks it up."""
    default = repr(float(a.default_tdp_w)) if a.default_tdp_w else "NULL"
    cases = " ".join(f"WHEN '{_q(k)}' THEN {float(v)!r}" for k, v in a.gpu_tdp_w.items())
    typed = f"CASE lower({gtype}) {cases} END" if cases else "NULL::DOUBLE"
    return f"(CASE WHEN {gtype} = '{GPU_UNTYPED}' THEN {default} ELSE coalesce({typed}, {default}) END)"


def energy_source_sql(a, ec: str, gp: str, gtype: str) -> str:
    """SQL: the energy source (:data:`ENERGY_SOURCES` index) of rows of energy class ``ec``, with
    GPUs (``gp``, a boolean) of type group ``gtype``, under assumptions ``a``: measured; Slurm's
    three where trusted (``trust_slurm``); else modelled where the rows hold GPUs of a known TDP
    (:func:`tdp_sql`); else none. The order of :func:`slurmkit.report.energy.attach_energy`."""
    trusted = f"{ec} IN (2, 3, 4)" if a.trust_slurm else "false"
    return (f"(CASE WHEN {ec} IN (1, 6) THEN {ec} WHEN {trusted} THEN {ec} WHEN {gp} AND {tdp_sql(a, gtype)} IS NOT NULL "
            f"THEN 5 ELSE 0 END)")


def energy_kwh_sql(a, src: str, ej: str, gh: str, gtype: str) -> str:
    """SQL: the IT energy (kWh) of rows of energy source ``src`` (:func:`energy_source_sql`)
    whose class's energy in the window is ``ej`` (J) and GPU-hours ``gh``, of GPU type group
    ``gtype``: measured and Slurm's as recorded; modelled = GPU-hours x TDP; NULL (unknown) for
    none. A sum of rows or of their sums (all adds up)."""
    return (f"(CASE WHEN {src} BETWEEN 1 AND 4 OR {src} = 6 THEN {ej} / {J_PER_KWH!r} "
            f"WHEN {src} = 5 THEN {tdp_sql(a, gtype)} * {gh} / 1000.0 END)")


def _row_columns() -> str:
    """SQL of the columns of a (row, window) of view ``rw`` (:func:`_build_rows`): the row's
    own fields, its GPU type group (the ``by_gpu_type`` label: its type, else untyped or unknown), its
    GPU- and CPU-hours inside the window, its queue wait, its GPU bucket (``_BUCKET_LABELS``'
    index) and its job-size cell (:func:`_size_cells`)."""
    waste = ", ".join(f"'{s}'" for s in WASTE_STATES)
    # the GPU bucket as a number (``_BUCKET_LABELS``' index: no text per row; named in ``fine``)
    bucket = " ".join(f"WHEN ceil(coalesce(req_gpus, gpus, 0)) <= {hi} THEN {i + 1}"
                      for i, (lo, hi, label) in enumerate(GPU_BUCKETS) if lo > 0 and math.isfinite(hi))
    # the GPU type group (the one definition of ``by_gpu_type``'s label): untyped GPUs, and rows with no GPU count
    gtype = (f"CASE WHEN gpus IS NULL THEN '{GPU_TYPE_UNKNOWN}' WHEN coalesce(gpu_type, '') = '' AND gpus > 0 "
             f"THEN '{GPU_UNTYPED}' ELSE gpu_type END AS gpu_type")
    return f"""wid, prim, CASE WHEN multi THEN jid END AS jid, multi, state, "user", account, partition, qos, {gtype}, gpus, ncpus, gpu_source,
           eligible, ran, waiting, provisional, cluster, key_id, submit, start, "end", stop, run_s, in_window_s,
           timelimit_s, pending_tasks, req_gpus, req_cpus, nodelist, gpu_type AS gpu_type_raw, sutil, sutilp, spol,
           smem, alloc_mem_mib, total_cpu_s, scpu, sej, rk,
           gpus * in_window_s / 3600.0 AS gpu_hours,
           physical_gpus * in_window_s / 3600.0 AS physical_gpu_hours, physical_gpus,
           ncpus * in_window_s / 3600.0 AS cpu_hours, ec, ej, {_efficiency_columns()},
           state IN ({waste}) AS waste_state,
           CASE WHEN ran AND start >= ws AND start < we AND coalesce(eligible, submit) IS NOT NULL
                THEN greatest(start - coalesce(eligible, submit), 0) END AS wait0,
           CASE WHEN coalesce(req_gpus, gpus) IS NULL THEN 0
                WHEN ceil(coalesce(req_gpus, gpus, 0)) <= 0 THEN 1 {bucket} ELSE {len(GPU_BUCKETS)} END AS gpu_bucket,
           {_size_cells()}"""


def _efficiency_columns() -> str:
    """SQL of a (row, window)'s efficiency inputs (the ``efficiency`` section, :func:`_fill_efficiency`):
    ``done`` (finished: End set, run over 0 s); ``cn`` / ``cd`` / ``chk``: its CPU time
    (TotalCPU when over 0, else the steps' summed, ``scpu``), its core-seconds (``run_s`` x
    NCPUS) and CPU-hours, where a finished row has both (CPU efficiency = sum cn / sum cd, the
    share of CPU-hours it covers = sum chk / CPU-hours); ``me``: a finished row's memory
    efficiency (the largest step's memory / AllocTRES mem); ``gu``: a GPU row's GPU utilization
    (%, its steps' ``sutil``, else its spool records' ``sutilp``); ``job_id`` (the idle jobs)."""
    cpu = "(CASE WHEN total_cpu_s > 0 THEN total_cpu_s ELSE scpu END)"
    ce = f"(\"end\" IS NOT NULL AND run_s > 0 AND {cpu} IS NOT NULL AND run_s * ncpus > 0)"
    return f"""\"end\" IS NOT NULL AND run_s > 0 AS done,
           CASE WHEN {ce} THEN {cpu} END AS cn, CASE WHEN {ce} THEN run_s * ncpus END AS cd,
           CASE WHEN {ce} THEN ncpus * in_window_s / 3600.0 END AS chk,
           CASE WHEN \"end\" IS NOT NULL AND run_s > 0 AND alloc_mem_mib > 0 THEN smem / alloc_mem_mib END AS me,
           CASE WHEN gpus > 0 THEN coalesce(sutil, sutilp) END AS gu, job_id"""


def _size_cells() -> str:
    """SQL of the job-size cell of a row (:func:`slurmkit.report.jobs.job_sizes`' buckets):
    ``sg`` the row of :data:`~slurmkit.report.jobs.SIZE_GPU_BUCKETS` of ceil(GPUs) (inclusive
    bounds; one past the last when the GPU count is unknown), ``sd`` the column of
    :data:`~slurmkit.report.jobs.SIZE_DURATION_BUCKETS` of ``run_s`` (``[lo, hi)``; below 0
    in the first)."""
    g = " ".join(f"WHEN ceil(gpus) >= {lo} " + (f"AND ceil(gpus) <= {hi} " if math.isfinite(hi) else "") + f"THEN {i}"
                 for i, (lo, hi, _) in enumerate(SIZE_GPU_BUCKETS))
    d = " ".join(f"WHEN run_s >= {lo} " + (f"AND run_s < {hi} " if math.isfinite(hi) else "") + f"THEN {j}"
                 for j, (lo, hi, _) in enumerate(SIZE_DURATION_BUCKETS))
    return (f"CASE WHEN gpus IS NULL THEN {len(SIZE_GPU_BUCKETS)} {g} END AS sg, "
            f"CASE {d} ELSE 0 END AS sd")


def _job_sizes(con, per: dict) -> None:
    """Each window's ``job_sizes`` from view ``fine_all``: per cell, the jobs whose last run in
    the window is in it (``last_run``: a job with one row is its own last run) and the runs'
    GPU-hours inside the window, as :func:`slurmkit.report.jobs.job_sizes` counts them."""
    ng, nd = len(SIZE_GPU_BUCKETS), len(SIZE_DURATION_BUCKETS)
    cells = {}
    for wid, sg, sd, jobs, gh in con.execute("""
            SELECT wid, sg, sd, coalesce(sum(nrows) FILTER (WHERE last_run), 0)::BIGINT, coalesce(sum(gh), 0)
            FROM fine_all WHERE run AND dim = 'size' GROUP BY wid, sg, sd""").fetchall():
        cells.setdefault(wid, []).append((int(sg), int(sd), int(jobs), float(gh)))
    for wid, cs in cells.items():
        unknown = any(sg == ng for sg, *_ in cs)
        jm = [[0] * nd for _ in range(ng + unknown)]
        hm = [[0.0] * nd for _ in range(ng + unknown)]
        for sg, sd, jobs, gh in cs:
            jm[sg][sd] += jobs
            hm[sg][sd] += gh
        per[wid]["job_sizes"] = size_table(jm, hm, unknown)


def _num(x):
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else round(x, 9)


def _zero(x) -> float:
    """A sum over no known value (None, NaN) as 0.0, as pandas' ``sum()`` gives it."""
    return 0.0 if x is None or x != x else _num(x)


def _fetch(con, sql: str) -> pd.DataFrame:
    return con.execute(sql).df()


#: A row's flags, packed with its window id in one number (``fl`` = wid x 2**len + the bits: a
#: narrow group key; every flag is true or false, never NULL, on the rows that ran or were
#: cancelled before start): name -> SQL over view ``rw``.
_FLAGS = {"prim": "prim", "run": "run", "never": "never", "multi": "multi", "requeued": "requeued", "last_run": "last_run",
          "provisional": "provisional", "gp": "coalesce(gpus > 0, false)", "gt": "coalesce(gpus > 0, true)",
          "req_src": f"coalesce(gpu_source = '{REQUESTED}', false)", "gpus_null": "gpus IS NULL",
          "ncpus_null": "ncpus IS NULL", "elig": "eligible IS NOT NULL", "phys_null": "physical_gpus IS NULL"}
#: The dimensions of the group tables (name -> columns of ``rw``) and those of few values.
_DIMS = {"user": '"user"', "account": "account", "partition": "partition", "qos": "qos",
         "gpu_type": "gpu_type", "state": "state", "size": "sg, sd"}
_FEW = [d for d in _DIMS if d not in ("user", "account")]


#: The sums of table ``fine0`` (:func:`fine0_sql`) beside ``nrows``: GPU-, CPU-, wasted,
#: provisional, physical GPU-hours; the energy class's joules; the efficiency inputs
#: (:func:`_efficiency_columns`): CPU time, core-seconds and CPU-hours where both are known,
#: allocations over their memory, GPU utilization x GPU-hours, GPU-hours with a utilization and
#: under 1 %, GPU rows with a utilization, finished rows.
_SUMMED = ("gh", "ch", "wh", "ph", "pgh", "ej", "cn", "cd", "chk", "om", "uw", "ghu", "igh", "nu", "nd")
#: Those of a row's whole run, not of its hours in the window: a row in several parts of a period
#: counts once in the period (in its first part, ``prim``), as its rows (``nrows``) do.
_PER_ROW = ("cn", "cd", "om", "nu", "nd")


def fine0_sql() -> str:
    """SQL (a SELECT over view ``rw``, :func:`_build_rows`) of table ``fine0``: the sums and
    counts per finest group, in four grouping sets fed by one scan (each set is a hash table
    fed every row): ``(fl, user)``, ``(fl, account)``, the dimensions of few values together
    ``(fl, partition, qos, gpu_type, state, sg, sd)`` (their tables are rolled up from it, a
    small table), and the queue wait's ``(wid, multi, partition, gpu_bucket, wq)``: the waits
    counted per value, a few hundred thousand rows where the runs are millions. ``dim`` names
    the set; ``nrows``, ``gh``, ``ch``, ``wh``, ``ph``, ``pgh``: rows, GPU-, CPU-, wasted,
    provisional and physical GPU-hours. Every figure adds up over rows, so tables of this shape from
    disjoint rows are merged by stacking them (:func:`_add_day_sums`)."""
    nb = len(_FLAGS)
    packed = f"wid * {1 << nb} + " + " + ".join(f"CASE WHEN {e} THEN {1 << i} ELSE 0 END"
                                                 for i, e in enumerate(_FLAGS.values()))
    return f"""
        SELECT fl, wid, CASE WHEN GROUPING(wq) = 0 THEN multi END AS wmulti, ec, "user", account, partition, qos,
               gpu_type, state, sg, sd, gpu_bucket, wq, me, ij, ig, iu,
               CASE WHEN GROUPING(wq) = 0 THEN 'wait' WHEN GROUPING(me) = 0 THEN 'mem' WHEN GROUPING(ij) = 0 THEN 'idle'
                    WHEN GROUPING("user") = 0 THEN 'user' WHEN GROUPING(account) = 0 THEN 'account' ELSE 'few' END AS dim,
               count(*) AS nrows, {", ".join(f"sum({x}) AS {x}" for x in _SUMMED)}
        FROM (SELECT {packed} AS fl, wid, multi, ec, "user", account, partition, qos, gpu_type, state, sg, sd,
                     gpu_hours AS gh, cpu_hours AS ch, waste AS wh, prov AS ph, physical_gpu_hours AS pgh, ej,
                     cn, cd, chk, (done AND me > 1)::INTEGER AS om, gu * gpu_hours AS uw,
                     CASE WHEN gu IS NOT NULL THEN gpu_hours END AS ghu, CASE WHEN gu < 1 THEN gpu_hours END AS igh,
                     (gu IS NOT NULL)::INTEGER AS nu, done::INTEGER AS nd, gpu_bucket,
                     CASE WHEN run THEN wait_s END AS wq, me,
                     CASE WHEN gu < {IDLE_UTIL_PCT!r} THEN job_id END AS ij, CASE WHEN gu < {IDLE_UTIL_PCT!r} THEN gpus END AS ig,
                     CASE WHEN gu < {IDLE_UTIL_PCT!r} THEN gu END AS iu
              FROM rw WHERE run OR never)
        GROUP BY GROUPING SETS ((fl, ec, "user", gpu_type), (fl, ec, account, gpu_type),
                                (fl, ec, {", ".join(_DIMS[d] for d in _FEW)}),
                                (wid, multi, partition, gpu_bucket, wq), (fl, "user", me), (fl, "user", ij, ig, iu))"""


def _add_day_sums(con, sums: list[tuple[str, list[int]]]) -> None:
    """Stack the day sums ``sums`` (``[(_sums.parquet, [window ids])]``: each day in each
    window that holds it whole) onto table ``fine0``: each stored group once per window, its
    window id (0 in the file) replaced (``fl``'s high bits, or ``wid`` in the wait set)."""
    nb = len(_FLAGS)
    pairs = ", ".join(f"('{_q(path)}', {w})" for path, wids in sums for w in wids)
    if not pairs:
        return
    paths = ", ".join(f"'{_q(path)}'" for path, _ in sums)
    # (the groups of the days of one window merged: a day's sums hold a group per wait value)
    keys = ("fl, wid, wmulti, ec, \"user\", account, partition, qos, gpu_type, state, sg, sd, gpu_bucket, wq, "
            "me, ij, ig, iu, dim")
    con.execute(f"""INSERT INTO fine0 BY NAME
        SELECT {keys}, sum(nrows)::BIGINT AS nrows, {", ".join(f"sum({x}) AS {x}" for x in _SUMMED)} FROM (
        SELECT s.* EXCLUDE (filename, wid, fl),
               CASE WHEN s.fl IS NULL THEN NULL ELSE (s.fl & {(1 << nb) - 1}) + m.wid * {1 << nb} END AS fl,
               CASE WHEN s.wid IS NULL THEN NULL ELSE m.wid END AS wid
        FROM read_parquet([{paths}], filename = true, hive_partitioning = false) s JOIN (VALUES {pairs}) m(path, wid) ON s.filename = m.path)
        GROUP BY ALL""")


#: The day sums' manifest in a store cluster's folder, and each day's sums beside its files
#: (names starting with ``_``: not data to Hive, Spark or Trino).
SUMS_MANIFEST = "_sums.json"
SUMS_FILE = "_sums.parquet"


def sums_version() -> str:
    """The day sums' format: a digest of the SQL that computes them (:func:`_build_rows`,
    :func:`_size_cells`, :func:`fine0_sql`) and the buckets and states it names; sums of
    another version are not read (a release that changes a rule makes them stale)."""
    import hashlib
    import inspect

    parts = ["day runs 2", fine0_sql(), repr((GPU_BUCKETS, SIZE_GPU_BUCKETS, SIZE_DURATION_BUCKETS, WASTE_STATES, _COLUMNS))]
    for fn in (_build_rows, _size_cells):
        try:
            parts.append(inspect.getsource(fn))
        except (OSError, TypeError):   # (no source installed: the name stands for it)
            parts.append(fn.__qualname__)
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def store_read_error(exc, store_root, paths) -> BaseException:
    """The error to raise for DuckDB error ``exc`` met reading store files ``paths`` (day files
    and ``_sums.parquet`` files): an :class:`~slurmkit.errors.InputError` naming the first of
    them that pyarrow cannot read whole or that lacks the columns of its kind (another file in
    its place; DuckDB's message does not always name the file), else one naming ``store_root``
    for an IO or input error, else ``exc`` itself (not about a file)."""
    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq

    from slurmkit.accounting import store as S

    for path in paths:
        sums = Path(path).name == SUMS_FILE
        step = Path(path).name == "steps.parquet"
        what = ("the day's sums (Parquet; delete it and 'slurmkit report day-sums' makes it again)"
                if sums else "a day file of the store (Parquet)")
        try:
            with InputError.reading(path, what, pa.ArrowException, ValueError):
                names = pq.read_table(path).column_names
            S.check_columns(path, names, ("fl", "wid", "nrows") if sums else S.STEP_FILE_COLUMNS if step
                            else S.DAY_COLUMNS,
                            "the day's sums" if sums else "a day file of the store")
        except InputError as bad:
            return bad
    if isinstance(exc, (duckdb.IOException, duckdb.InvalidInputException)):
        return InputError(str(store_root), None, f"a store file cannot be read: {' '.join(str(exc).split())}")
    return exc


def summable_days(store) -> list[str]:
    """The days of :class:`~slurmkit.accounting.store.Store` ``store`` the period report reads
    (a ``day=<D>`` folder holding both files, with a manifest entry: as :func:`_store_days`),
    sorted: the days :func:`slurmkit.report.day_sums.summarize` sums, and the set
    :func:`valid_day_sums` checks."""
    man = store.manifest()
    days = (f.parent.name[4:] for f in store.dir.glob("day=*/allocs.parquet"))
    return sorted(d for d in days if d in man and store.day_files(d)[1].exists())


def file_stamp(path) -> list[int]:
    """``[size, mtime_ns]`` of ``path`` (what the day sums' manifest records of a file)."""
    st = os.stat(path)
    return [st.st_size, st.st_mtime_ns]


#: Whole ``_sums.json`` day entries have these (integers).
SUMS_ENTRY = ("size", "mtime_ns", "rows", "direct_from", "earlier_from", "plain_from", "sums_size", "sums_mtime_ns")


def valid_day_sums(store) -> tuple[dict[str, dict], str]:
    """The day sums of :class:`~slurmkit.accounting.store.Store` ``store`` that may be read, and
    why: ``({day: {"rows", "direct_from", "earlier_from", "plain_from", "elig", "textual",
    "sums"}}, state)`` from ``_sums.json`` (:func:`slurmkit.report.day_sums.summarize`). State
    ``"used"``; ``"absent"`` (never summed: empty); ``"stale"`` (empty: made by another
    version, or the days the report reads (:func:`summable_days`) are not exactly those summed
    with the same day files and sums files, sizes and modification times: a day stored since,
    by any writer, may hold a row of a job another day's sums counted as its only row)."""
    try:
        man = json.loads((store.dir / SUMS_MANIFEST).read_text())
    except FileNotFoundError:
        return {}, "absent"
    except (OSError, ValueError):
        return {}, "stale"
    if not isinstance(man, dict) or man.get("version") != sums_version() or not isinstance(man.get("days"), dict):
        return {}, "stale"
    days = man["days"]
    if set(summable_days(store)) != set(days):
        return {}, "stale"
    out = {}
    for day, e in days.items():
        path = store.day_files(day)[0]
        if not day_entry_unchanged(e, path):
            return {}, "stale"
        out[day] = {**e, "sums": str(path.parent / SUMS_FILE)}
    return out, "used"


def day_entry_unchanged(e, path) -> bool:
    """True when ``e`` is a whole ``_sums.json`` day entry (:data:`SUMS_ENTRY`) whose day file
    ``path`` and its sums file are as it recorded them (:func:`file_stamp`)."""
    try:
        return (isinstance(e, dict) and all(isinstance(e.get(k), int) for k in SUMS_ENTRY)
                and [e["size"], e["mtime_ns"]] == file_stamp(path)
                and [e["sums_size"], e["sums_mtime_ns"]] == file_stamp(Path(path).parent / SUMS_FILE))
    except OSError:
        return False


def _aggregate(con, per: dict, rollup: dict[int, tuple[int, float | None]] | None = None,
               sums: list | None = None, assumptions=None, waits_unknown: set | None = None) -> None:
    """Fill ``per`` (window id -> its section dict) from view ``rw`` (:func:`_build_rows`): the
    definitions of :func:`slurmkit.report.weekly.build_report` over the runs. One pass over
    the rows (table ``fine``, grouping sets: the row's flags with each dimension apart, and
    the waits counted per value) from which the totals, the five group tables, the outcomes,
    the jobs cancelled before start, the job sizes and the queue-wait quantiles and histogram
    are rolled up; the distinct jobs with several rows come from table ``m`` (a job with one
    row in the store is one row: counted, no DISTINCT over millions of rows). ``waits_unknown``:
    the windows whose queue waits are unknown (:func:`_waits_unknown`)."""
    _fine_tables(con, rollup, sums)
    _job_sizes(con, per)
    assumptions = assumptions or Assumptions()
    a = _group_figures(con, assumptions)
    _fill_totals(a, per, assumptions)
    _fill_groups(a, per)
    _fill_outcomes(con, a, per)
    _fill_queue_wait(con, per, waits_unknown or set())
    _fill_efficiency(con, per)


#: The columns of :func:`_group_figures`' grouping sets: each group table's, the outcome line
#: (``line``) and the cancelled-before-start state (``nstate``).
_GROUPED = [c for _, c in GROUPS] + ["line", "nstate"]


def _fine_tables(con, rollup: dict | None, sums: list | None) -> None:
    """Tables ``fine`` (the rows of ``rw`` summed per finest group, with the day sums
    ``sums``) and ``fine_all`` (``fine`` with each part's rows with one row in the store also
    rolled up into its period, ``rollup``)."""
    # one pass: the sums and counts per finest group (window, user, account, partition, QOS,
    # GPU type, outcome line, cancelled-before-start state, GPUs > 0), a few hundred thousand
    # rows at most; every table is a roll-up of it (sums and counts add up; the jobs with one
    # row in the store are counted as rows, the others from ``m`` below)
    # (one scan of ``rw``, one small hash table per dimension: grouping by all the dimensions
    # together gives nearly a group per row when users, accounts and states are independent)
    nb, flags, dims, few = len(_FLAGS), _FLAGS, _DIMS, _FEW
    unpack = ", ".join(f"(fl & {1 << i}) <> 0 AS {k}" for i, k in enumerate(flags) if k != "multi")
    con.execute(f"CREATE TEMP TABLE fine0 AS {fine0_sql()}")
    if sums:
        _add_day_sums(con, sums)
    # (every set keeps the GPU type, which the modelled energy needs: it is named last)
    which = " ".join(f"WHEN GROUPING({dims[d].split(',')[0]}) = 0 THEN '{d}'" for d in few if d != "gpu_type")
    label = "CASE gpu_bucket " + " ".join(f"WHEN {i} THEN '{_q(b)}'" for i, b in enumerate(_BUCKET_LABELS)) + " END"
    con.execute(f"""CREATE TEMP TABLE fine AS
        SELECT coalesce(wid, fl >> {nb}) AS wid, {unpack}, * EXCLUDE (wid, fl, wmulti, gpu_bucket),
               {label} AS gpu_bucket, coalesce(wmulti, (fl & {1 << list(flags).index("multi")}) <> 0) AS multi FROM (
        SELECT * FROM fine0 WHERE dim <> 'few'
        UNION ALL BY NAME
        SELECT fl, ec, partition, qos, gpu_type, state, sg, sd, CASE {which} ELSE 'gpu_type' END AS dim,
               sum(nrows)::BIGINT AS nrows, {", ".join(f"sum({x}) AS {x}" for x in _SUMMED)}
        FROM fine0 WHERE dim = 'few'
        GROUP BY GROUPING SETS ({", ".join(f"(fl, ec, {dims[d]}{'' if d == 'gpu_type' else ', gpu_type'})" for d in few)}))""")
    # the periods' rows with one row in the store: their parts' (hours add up; a row in
    # several parts is counted in the first, ``prim``; a wait is in the part of its Start)
    con.execute("CREATE TEMP TABLE rollup_map(wid INTEGER, pwid INTEGER)")
    if rollup:
        con.execute("INSERT INTO rollup_map VALUES " + ", ".join(f"({w}, {p})" for w, (p, _) in rollup.items()))
    con.execute(f"""CREATE TEMP TABLE fine_all AS SELECT * FROM fine UNION ALL BY NAME
        SELECT * REPLACE (CASE WHEN prim OR dim = 'wait' THEN nrows ELSE 0 END AS nrows,
                          {", ".join(f"CASE WHEN prim THEN {x} END AS {x}" for x in _PER_ROW)})
        FROM (SELECT f.* EXCLUDE (wid), r.pwid AS wid FROM fine f JOIN rollup_map r ON f.wid = r.wid)
        WHERE NOT multi""")


def _group_figures(con, assumptions):
    """The figures of every grouping set (the whole window, each group table's column, the
    outcome lines, the cancelled-before-start states) per window, from ``fine_all``, with the
    distinct jobs with several rows from table ``m`` added: a DataFrame, one row per
    (wid, set, value), ``is_<column>`` saying which set. The energy by source under
    ``assumptions`` (:func:`energy_source_sql`, :func:`energy_kwh_sql`; ``kwh_<source>``,
    ``jobs_<source>``) and what it covers (:func:`slurmkit.report.energy.energy_coverage`)."""
    cols = _GROUPED
    sets = ", ".join(["(wid)"] + [f'(wid, "{c}")' for c in cols])
    head = f"""SELECT wid, {", ".join(f'"{c}"' for c in cols)},
               {", ".join(f'GROUPING("{c}") = 0 AS "is_{c}"' for c in cols)}"""

    def src(table: str, per_row: bool = False) -> str:
        # the sums of ``fine_all`` (a group's flags, its GPU type, its GPU-hours ``gh``) or the
        # rows of ``m`` (their GPUs, ``gpu_hours``): each with its energy source and kWh
        gp, gh = ("coalesce(gpus > 0, false)", "gpu_hours") if per_row else ("gp", "gh")
        return f"""FROM (SELECT *, {energy_kwh_sql(assumptions, "esrc", "ej", gh, "gpu_type")} AS ekwh FROM (
                   SELECT *, CASE WHEN run THEN CASE WHEN requeued THEN '{REQUEUED_LINE}' ELSE state END END AS line,
                          CASE WHEN never THEN state END AS nstate,
                          {energy_source_sql(assumptions, "ec", gp, "gpu_type")} AS esrc FROM {table}))"""

    def n(cond):
        return f"coalesce(sum(nrows) FILTER (WHERE {cond}), 0)::BIGINT"

    aggs = []
    for sfx, cond in (("", "run"), ("_g", "run AND gp"), ("_t", "run AND gt")):
        aggs.append(f"""{n(f"{cond} AND NOT multi")} AS jobs{sfx}, {n(cond)} AS n{sfx},
           sum(gh) FILTER (WHERE {cond}) AS gpu_hours{sfx}, sum(ch) FILTER (WHERE {cond}) AS cpu_hours{sfx},
           sum(wh) FILTER (WHERE {cond}) AS wasted{sfx}, sum(ph) FILTER (WHERE {cond}) AS prov{sfx},
           sum(pgh) FILTER (WHERE {cond}) AS physical{sfx}, sum(ekwh) FILTER (WHERE {cond}) AS kwh{sfx},
           {n(f"{cond} AND NOT multi AND esrc = 0")} AS jobs_none{sfx}""")
    # energy by source and what it covers (the whole window's)
    aggs.append(", ".join(f"sum(ekwh) FILTER (WHERE run AND esrc = {i}) AS \"kwh_{name}\", "
                          f"{n(f'run AND NOT multi AND esrc = {i}')} AS \"jobs_{name}\""
                          for i, name in enumerate(ENERGY_SOURCES) if i))   # (none: ``jobs_none``)
    aggs.append(f"""{n("run AND esrc <> 0")} AS rows_energy, sum(ch) FILTER (WHERE run AND esrc <> 0) AS cpu_hours_energy,
           sum(gh) FILTER (WHERE run AND esrc <> 0) AS gpu_hours_energy,
           sum(gh) FILTER (WHERE run AND esrc = 0) AS gpu_hours_without_energy""")
    # (a sum over groups all of whose figures are unknown stays unknown: SQL's sum of NULLs)
    figures = f"""{", ".join(aggs)},
        {n("run AND NOT multi AND provisional")} AS provisional_jobs, {n("run AND requeued")} AS requeued_attempts,
        {n("run AND last_run")} AS last_runs, {n("run AND NOT gpus_null")} AS gpus_known,
        {n("run AND NOT ncpus_null")} AS ncpus_known, sum(gh) FILTER (WHERE run AND req_src) AS gpu_hours_from_request,
        {n("run AND gpus_null")} AS allocation_rows_gpus_unknown,
        {n("run AND NOT gpus_null AND phys_null")} AS allocation_rows_physical_unknown,
        {n("run AND gp AND NOT phys_null")} AS physical_known_g, coalesce(bool_or(elig) FILTER (WHERE run), false) AS elig,
        {n("never AND NOT multi")} AS never_rows"""
    # each grouping set from its dimension's rows of ``fine`` (the whole window, the outcome
    # lines and the cancelled-before-start states from the state rows)
    selects = []
    for by, dim in [(None, "state")] + [(c, c) for _, c in GROUPS] + [("line", "state"), ("nstate", "state")]:
        picked = ", ".join(f'"{c}"' if c == by else f'NULL::VARCHAR AS "{c}"' for c in cols)
        is_ = ", ".join(f'{str(c == by).lower()} AS "is_{c}"' for c in cols)
        selects.append(f"""SELECT wid, {picked}, {is_}, {figures}
            {src(f"fine_all WHERE dim = '{dim}'")} GROUP BY wid{f', "{by}"' if by else ""}""")
    a = _fetch(con, "\nUNION ALL\n".join(selects))
    # the jobs with several rows, by identity, in the same groups
    distinct = [("jobs", "run"), ("jobs_g", "run AND gpus > 0"), ("jobs_t", "run AND coalesce(gpus > 0, true)"),
                ("provisional_jobs", "run AND provisional"), ("jobs_none", "run AND esrc = 0"),
                ("jobs_none_g", "run AND gpus > 0 AND esrc = 0"),
                ("jobs_none_t", "run AND coalesce(gpus > 0, true) AND esrc = 0")] + \
        [(f"jobs_{name}", f"run AND esrc = {i}") for i, name in enumerate(ENERGY_SOURCES) if i]
    m = _fetch(con, f"""{head},
           {", ".join(f'count(DISTINCT jid) FILTER (WHERE {cond}) AS "{c}"' for c, cond in distinct)}
        {src("m", per_row=True)} GROUP BY GROUPING SETS ({sets})""")
    keys = ["wid"] + cols + [f"is_{c}" for c in cols]
    if len(m):
        none = "\0"   # a grouping set's other columns are NULL: a stand-in to join on
        a[cols] = a[cols].astype(object).where(a[cols].notna(), none)
        m[cols] = m[cols].astype(object).where(m[cols].notna(), none)
        a = a.merge(m, on=keys, how="left", suffixes=("", "_multi"))
        for c, _ in distinct:
            a[c] = a[c] + a[c + "_multi"].fillna(0).astype("int64")
        for c in cols:
            a[c] = [None if v == none else v for v in a[c]]
    for c in cols:
        a[f"is_{c}"] = a[f"is_{c}"].astype(bool)
    return a


def _fill_totals(a, per: dict, assumptions) -> None:
    """Each window's ``totals``, ``unknown`` and ``queue_wait.from`` from the whole-window rows
    of :func:`_group_figures`; a window without runs keeps its zeros. The energy by source, its
    coverage (:func:`slurmkit.report.energy.energy_coverage`) and the facility energy, CO2e and
    cost of ``assumptions`` (:func:`slurmkit.report.energy.costs`), as the weekly report's
    totals hold them."""
    whole = ~a[[f"is_{c}" for c in _GROUPED]].any(axis=1)
    for r in a[whole].to_dict("records"):
        w = per[r["wid"]]
        w["queue_wait"]["from"] = "Eligible" if r["elig"] else "Submit"
        if not r["n"]:
            continue   # no run: the totals stay 0 (a window without runs has nothing unknown)
        unknown = {}
        if not r["gpus_known"]:
            unknown["gpu_hours"] = UNKNOWN_WHY["gpu_hours"]
        if not r["ncpus_known"]:
            unknown["cpu_hours"] = UNKNOWN_WHY["cpu_hours"]
        # no run has an energy source: the 0 kWh is no measurement (and what is built on it)
        energy_known = bool(r["rows_energy"])
        if not energy_known:
            unknown["energy_kwh"] = UNKNOWN_WHY["energy_kwh"]
        w["unknown"] = unknown
        g = (lambda x: None) if "gpu_hours" in unknown else _zero

        w["totals"] = {"jobs": int(r["jobs"]), "gpu_jobs": None if "gpu_hours" in unknown else int(r["jobs_g"]),
                       "allocation_rows": int(r["n"]), "requeued_attempts": int(r["requeued_attempts"]),
                       "gpu_hours": g(r["gpu_hours"]),
                       "cpu_hours": None if "cpu_hours" in unknown else _zero(r["cpu_hours"]),
                       "wasted_gpu_hours": g(r["wasted"]), "provisional_jobs": int(r["provisional_jobs"]),
                       "provisional_gpu_hours": g(r["prov"]), "gpu_hours_from_request": g(r["gpu_hours_from_request"]),
                       "allocation_rows_gpus_unknown": int(r["allocation_rows_gpus_unknown"]),
                       # (unknown when rows with GPUs have none known)
                       "physical_gpu_hours": None if "gpu_hours" in unknown or (r["n_g"] and not r["physical_known_g"])
                       else _zero(r["physical"]),
                       "allocation_rows_physical_unknown": int(r["allocation_rows_physical_unknown"])}
        w["totals"].update(_energy_totals(r, w["totals"], energy_known, assumptions))


def _energy_totals(r: dict, t: dict, energy_known: bool, assumptions) -> dict:
    """The energy keys of a window's totals from its :func:`_group_figures` row ``r`` and its
    hours ``t``: kWh by source (:data:`slurmkit.report.energy.REPORTED_SOURCES`; ``prometheus``,
    which the store does not hold, 0), jobs by source, the coverage, the GPU-hours without an
    energy figure, then :func:`slurmkit.report.energy.costs`."""
    from slurmkit.report.energy import REPORTED_SOURCES, costs, energy_coverage

    by_src = {name: _zero(r.get(f"kwh_{name}")) for name in REPORTED_SOURCES}
    kwh = sum(by_src.values())
    jobs = {name: int(r.get(f"jobs_{name}", 0)) for name in REPORTED_SOURCES} | {"none": int(r["jobs_none"])}
    gpu_known = t["gpu_hours"] is not None
    money = costs(kwh if energy_known else None, t["gpu_hours"] if gpu_known else None, assumptions)
    return {"energy_kwh": _num(kwh) if energy_known else None,
            "energy_kwh_by_source": {k: (_num(v) if energy_known else None) for k, v in by_src.items()},
            "energy_known": energy_known, "energy_jobs_by_source": jobs,
            "energy_coverage": energy_coverage(t["jobs"], jobs["none"], t["cpu_hours"], r["cpu_hours_energy"],
                                               t["gpu_hours"], r["gpu_hours_energy"], energy_known),
            "gpu_hours_without_energy": _zero(r["gpu_hours_without_energy"]) if gpu_known else None,
            **{k: (_num(v) if isinstance(v, float) else v) for k, v in money.items()}}


def _fill_groups(a, per: dict) -> None:
    """Each window's group tables (``by_user``, ...) from :func:`_group_figures`: largest
    GPU-hours first, then CPU-hours (unknown last), then the name."""
    for key, col in GROUPS:
        sfx = "_t" if col == "gpu_type" else ""   # GPU rows and rows of unknown GPUs
        # a row without the group's value (no user, no GPU type) is in no group, as in pandas
        t = a[a[f"is_{col}"] & (a[f"n{sfx}"] > 0) & a[col].notna()]
        rows = [{col: r[col], "jobs": int(r[f"jobs{sfx}"]), "gpu_hours": _num(r[f"gpu_hours{sfx}"]),
                 "cpu_hours": _num(r[f"cpu_hours{sfx}"]), "energy_kwh": _num(r[f"kwh{sfx}"]),
                 "energy_jobs_unknown": int(r[f"jobs_none{sfx}"]), "wasted_gpu_hours": _num(r[f"wasted{sfx}"]),
                 "provisional_gpu_hours": _num(r[f"prov{sfx}"]), "physical_gpu_hours": _num(r[f"physical{sfx}"]),
                 "_wid": r["wid"]}
                for r in t.to_dict("records")]
        # largest GPU-hours first, then CPU-hours (unknown last), then the name
        rows.sort(key=lambda d: (d["gpu_hours"] is None, -(d["gpu_hours"] or 0.0),
                                 d["cpu_hours"] is None, -(d["cpu_hours"] or 0.0), str(d[col])))
        for d in rows:
            per[d.pop("_wid")][key].append(d)


def _fill_outcomes(con, a, per: dict) -> None:
    """Each window's ``outcomes``: each job on the line of its last run, earlier attempts on
    the requeued line with their states, then the jobs that ended before they started."""
    # outcomes: each job on the line of its last run; earlier attempts (rows of ``m`` only) on
    # the requeued line, with their states
    states = _fetch(con, "SELECT wid, state, count(*) AS n FROM m WHERE run AND requeued GROUP BY wid, state")
    out = a[a["is_line"] & a["line"].notna() & (a["n"] > 0)]
    out = out.assign(_last=out["line"] == REQUEUED_LINE, _name=out["line"].astype(str))
    for r in out.sort_values(["wid", "_last", "_name"]).to_dict("records"):
        o = {"state": r["line"], "jobs": int(r["last_runs"]), "attempts": int(r["n"]), "rows": int(r["n"]),
             "gpu_hours": _num(r["gpu_hours"]), "wasted_gpu_hours": _num(r["wasted"])}
        if r["line"] == REQUEUED_LINE:
            sel = states[states["wid"] == r["wid"]].sort_values("state")
            o["states"] = {str(x): int(n) for x, n in zip(sel["state"], sel["n"])}
        per[r["wid"]]["outcomes"].append(o)
    # jobs that ended before they started: their own line, in no figure above; a job with one
    # row is one job, one with several counts when none of its rows ran in the window
    never = {}
    for r in a[a["is_nstate"] & a["nstate"].notna() & (a["never_rows"] > 0)].to_dict("records"):
        never.setdefault(r["wid"], [0, {}])
        never[r["wid"]][0] += int(r["never_rows"])
        never[r["wid"]][1][str(r["nstate"])] = int(r["never_rows"])
    mn = _fetch(con, "SELECT wid, state, count(*) AS n FROM m WHERE never AND NOT has_run GROUP BY wid, state")
    for wid, state, n in zip(mn["wid"], mn["state"], mn["n"]):
        never.setdefault(wid, [0, {}])
        never[wid][1][str(state)] = never[wid][1].get(str(state), 0) + int(n)
    for wid, jobs in con.execute("""SELECT wid, count(DISTINCT jid) FROM m WHERE never AND NOT has_run
                                    GROUP BY wid""").fetchall():
        never[wid][0] += int(jobs)
    for wid, (jobs, st) in never.items():
        n = sum(st.values())
        per[wid]["outcomes"].append({"state": NEVER_STARTED_LINE, "jobs": jobs, "attempts": n, "rows": n,
                                     "gpu_hours": 0.0, "wasted_gpu_hours": 0.0, "ran": False,
                                     "states": dict(sorted(st.items()))})


#: Why a window's queue waits are unknown (``queue_wait.unknown``).
WAITS_UNKNOWN = "no Submit or Eligible time in the input (sacct printed without them): the waits are unknown"


def _waits_unknown(con, windows: list[tuple[int, float, float, str]], summed=()) -> set[int]:
    """The windows (``(wid, start, end, scope)``) whose queue waits are unknown, not 0: no
    store cluster of their scope has a row of view ``b`` with Submit or Eligible (a capture
    printed without them), nor days read from day sums (``summed``: their clusters)."""
    have = set(summed) | {sc for (sc,) in con.execute("SELECT sc FROM clusters_seen").fetchall() if con.execute(
        f"""SELECT count(*) FROM (SELECT 1 FROM b WHERE sc = '{_q(sc)}'
              AND (submit IS NOT NULL OR eligible IS NOT NULL) LIMIT 1)""").fetchone()[0]}
    every = {sc for (sc,) in con.execute("SELECT sc FROM clusters_seen").fetchall()}
    return {wid for wid, _, _, scope in windows if not ((every if scope == "" else {scope}) & have)}


def _fill_queue_wait(con, per: dict, waits_unknown: set) -> None:
    """Each window's queue-wait quantiles and histogram from the waits counted per value
    (``fine_all``'s wait set), the whole window and per partition x GPU bucket. A window of
    ``waits_unknown`` with runs has them unknown: ``n``, the quantiles and the histogram None,
    ``unknown`` saying why (:data:`WAITS_UNKNOWN`), never a row of zeros."""
    # queue wait: the quantiles and the histogram from the waits counted per value (``fine``'s
    # wait set), the whole window and per partition x GPU bucket
    order = {label: i for i, (_, _, label) in enumerate(GPU_BUCKETS)} | {GPU_BUCKET_UNKNOWN: len(GPU_BUCKETS)}
    q = _fetch(con, """SELECT wid, partition, gpu_bucket, wq, sum(nrows) AS nrows FROM fine_all
                       WHERE dim = 'wait' AND wq IS NOT NULL GROUP BY ALL ORDER BY wid, wq""")
    for wid, g in q.groupby("wid", sort=True):
        qw = per[wid]["queue_wait"]
        qw["all"] = _counted_quantiles(g["wq"].to_numpy(float), g["nrows"].to_numpy(np.int64))
        qw["histogram"] = wait_histogram(g["wq"].to_numpy(float), g["nrows"].to_numpy(float))
        # (no partition: in no group, as in pandas)
        g = g[g["partition"].notna()]
        g = g.assign(_b=g["gpu_bucket"].map(order), _p=g["partition"].astype(str))
        for (_, _, p, b), c in g.groupby(["_p", "_b", "partition", "gpu_bucket"], sort=True):
            v, n = c["wq"].to_numpy(float), c["nrows"].to_numpy(np.int64)
            qw["by_partition_gpus"].append({"partition": p, "gpu_bucket": b, **_counted_quantiles(v, n),
                                            "histogram": wait_histogram(v, n)})
    for wid in waits_unknown:
        if per[wid]["totals"]["allocation_rows"]:
            qw = per[wid]["queue_wait"]
            qw.update({"all": {k: None for k in qw["all"]}, "by_partition_gpus": [], "histogram": None,
                       "unknown": WAITS_UNKNOWN})


def _z(x) -> float:
    """A sum over no known value (None, NaN) as 0.0."""
    return 0.0 if x is None or x != x else float(x)


def _efficiency_figures(r: dict, gpu_known: bool, util_known: bool) -> dict:
    """The efficiency figures of a window or a user from their sums ``r`` (:data:`_SUMMED` over
    the runs: ``cn``/``cd`` CPU time and core-seconds where known, ``chk``/``ch`` CPU-hours of
    those and of all, ``uw``/``ghu`` GPU utilization x GPU-hours and the GPU-hours with a
    utilization, ``igh`` GPU-hours under 1 %): the ``efficiency`` section's figures, the weekly
    report's too."""
    cn, cd, ghu = _z(r.get("cn")), _z(r.get("cd")), _z(r.get("ghu"))
    return {"cpu_efficiency": _num(cn / cd) if cd > 0 else None,
            "gpu_util_pct_weighted": _num(_z(r.get("uw")) / ghu) if ghu > 0 else None,
            "gpu_hours_with_util": _num(ghu) if util_known else None,
            "gpu_hours_near_zero_util": _num(_z(r.get("igh"))) if util_known else None}


def _fill_efficiency(con, per: dict) -> None:
    """Each window's ``efficiency`` (the weekly report's section too, :func:`rows_figures`) from
    ``fine_all``: CPU efficiency and the share of the CPU-hours it covers, allocations over
    their memory, the GPU-hour weighted GPU utilization, the GPU-hours with one and near 0 %
    (the whole window from the state set, each user from the user set); the median memory
    efficiency, of the window and of each user, from the finished rows' values counted per value
    (set ``mem``); the jobs that held GPUs idle (under :data:`~slurmkit.report.definitions.IDLE_UTIL_PCT`,
    set ``idle``), most GPU-hours first. ``unknown["gpu_utilization"]`` as
    :func:`slurmkit.report.weekly.unknown_figures` says it."""
    sums = ", ".join(f"sum({x}) FILTER (WHERE run) AS {x}" for x in ("cn", "cd", "chk", "ch", "om", "uw", "ghu", "igh",
                                                                     "nu", "nd"))
    q = _fetch(con, f"""
        SELECT wid, NULL::VARCHAR AS "user", false AS is_user, {sums}, sum(gh) FILTER (WHERE run AND gp) AS ghg,
               coalesce(sum(nrows) FILTER (WHERE run AND gp), 0) AS ng, coalesce(sum(nrows) FILTER (WHERE run), 0) AS n
        FROM fine_all WHERE dim = 'state' GROUP BY wid
        UNION ALL
        SELECT wid, "user", true, {sums}, sum(gh) FILTER (WHERE run AND gp),
               coalesce(sum(nrows) FILTER (WHERE run AND gp), 0), coalesce(sum(nrows) FILTER (WHERE run), 0)
        FROM fine_all WHERE dim = 'user' AND "user" IS NOT NULL GROUP BY wid, "user"
        """)
    # the medians of the memory efficiencies counted per value (the window's, each user's): the
    # value at rank (n - 1) / 2, linear between the two around it (as pandas' median)
    med = _fetch(con, """
        WITH v AS (SELECT wid, "user", me, GROUPING("user") = 1 AS whole, sum(nrows) AS k FROM fine_all
                   WHERE dim = 'mem' AND run AND me IS NOT NULL GROUP BY GROUPING SETS ((wid, me), (wid, "user", me))),
             c AS (SELECT *, sum(k) OVER (PARTITION BY wid, "user", whole ORDER BY me ROWS UNBOUNDED PRECEDING) AS cum,
                          sum(k) OVER (PARTITION BY wid, "user", whole) AS n FROM v WHERE whole OR "user" IS NOT NULL)
        SELECT wid, "user", whole,
               min(me) FILTER (WHERE cum > floor((n - 1) / 2)) AS lo, min(me) FILTER (WHERE cum > ceil((n - 1) / 2)) AS hi,
               (n - 1) / 2 - floor((n - 1) / 2) AS frac
        FROM c GROUP BY wid, "user", whole, n""")
    idle = _fetch(con, """SELECT wid, "user", ij, ig, iu, sum(gh) AS gh FROM fine_all
                          WHERE dim = 'idle' AND run AND ij IS NOT NULL GROUP BY ALL""")

    got = med["lo"] + (med["hi"] - med["lo"]) * med["frac"]
    whole = med["whole"].to_numpy(bool)
    umed = dict(zip(zip(med["wid"][~whole], med["user"][~whole]), got[~whole]))
    med = dict(zip(med["wid"][whole], got[whole]))
    users_of = {wid: g for wid, g in q[q["is_user"]].groupby("wid", sort=False)}
    idle_of = {wid: g for wid, g in idle.groupby("wid", sort=False)}
    for r in q[~q["is_user"]].to_dict("records"):
        sec = per[r["wid"]]
        if not r["n"]:
            continue   # no run: the empty window's efficiency stands
        gpu_known = "gpu_hours" not in sec["unknown"]
        util_known = gpu_known and not (r["ng"] and not _z(r["nu"]))
        if not util_known:
            sec["unknown"]["gpu_utilization"] = UNKNOWN_WHY["gpu_utilization"]
        f = _efficiency_figures(r, gpu_known, util_known)
        ch = _z(r["ch"])
        users = []
        for u in (users_of[r["wid"]].to_dict("records") if r["wid"] in users_of else []):
            if not (_z(u["nd"]) or u["ng"]):
                continue   # (a user with neither a finished row nor a GPU row, as in pandas)
            uf = _efficiency_figures(u, gpu_known, util_known)
            ghg = _z(u["ghg"])
            users.append({"user": u["user"], "cpu_efficiency": uf["cpu_efficiency"] if _z(u["nd"]) else None,
                          "memory_efficiency_median": _num(umed.get((r["wid"], u["user"]))),
                          "gpu_hours": _num(ghg) if gpu_known else None, "gpu_util_pct": uf["gpu_util_pct_weighted"],
                          "gpu_hours_near_zero_util": (uf["gpu_hours_near_zero_util"] or 0.0) if util_known else None})
        # worst offenders first, as the weekly report sorts them
        users.sort(key=lambda x: (-(x["gpu_hours_near_zero_util"] or 0.0),
                                  x["gpu_util_pct"] if x["gpu_util_pct"] is not None else 1e9,
                                  x["cpu_efficiency"] if x["cpu_efficiency"] is not None else 2.0, str(x["user"])))
        i = (idle_of[r["wid"]] if r["wid"] in idle_of else idle.iloc[0:0]).sort_values(
            ["gh", "ij"], ascending=[False, True]).head(IDLE_JOBS)
        sec["efficiency"] = {
            "cpu_efficiency": f["cpu_efficiency"],
            "cpu_hours_share": _num(_z(r["chk"]) / ch) if ch > 0 else None,
            "memory_efficiency_median": _num(med.get(r["wid"])),
            "allocations_over_memory": int(_z(r["om"])),
            "gpu_util_pct_weighted": f["gpu_util_pct_weighted"], "gpu_hours_with_util": f["gpu_hours_with_util"],
            "gpu_hours_near_zero_util": f["gpu_hours_near_zero_util"], "by_user": users,
            "idle_jobs": None if not util_known else [
                {"job_id": str(j), "user": str(u), "gpus": _num(n), "gpu_hours": _num(h), "gpu_util_pct": _num(x)}
                for j, u, n, h, x in zip(i["ij"], i["user"], i["ig"], i["gh"], i["iu"])]}


def _counted_quantiles(values, counts) -> dict:
    """``{"n", "p50_s", ...}`` (:data:`_QUANTILES`) of the waits ``values`` (seconds, any
    order), each ``counts`` times: linear interpolation between the ranks around q x (n - 1),
    as pandas' ``quantile`` and DuckDB's ``quantile_cont`` over the values repeated."""
    o = np.argsort(values, kind="stable")
    v, cum = np.asarray(values, float)[o], np.cumsum(np.asarray(counts, np.int64)[o])
    n = int(cum[-1]) if len(cum) else 0
    if not n:
        return {"n": 0, **{k: None for k, _ in _QUANTILES}}

    def at(rank):
        return v[np.searchsorted(cum, rank, side="right")]

    out = {"n": n}
    for k, q in _QUANTILES:
        h = q * (n - 1)
        lo = math.floor(h)
        a, b = at(lo), at(min(lo + 1, n - 1))
        out[k] = _num(a + (b - a) * (h - lo))
    return out


def _empty_window(assumptions=None) -> dict:
    """A window's section before its figures: what a window without runs reads (0 hours, no
    energy source: energy unknown, not 0 kWh)."""
    t = {"jobs": 0, "gpu_jobs": 0, "allocation_rows": 0, "requeued_attempts": 0,
         "gpu_hours": 0.0, "cpu_hours": 0.0, "wasted_gpu_hours": 0.0,
         "provisional_jobs": 0, "provisional_gpu_hours": 0.0,
         "gpu_hours_from_request": 0.0, "allocation_rows_gpus_unknown": 0,
         "physical_gpu_hours": 0.0, "allocation_rows_physical_unknown": 0}
    t.update(_energy_totals({"jobs_none": 0, "cpu_hours_energy": None, "gpu_hours_energy": None,
                             "gpu_hours_without_energy": None}, t, False, assumptions or Assumptions()))
    return {"totals": t,
            "unknown": {}, **{k: [] for k, _ in GROUPS}, "outcomes": [],
            "queue_wait": {"all": {"n": 0, **{k: None for k, _ in _QUANTILES}}, "by_partition_gpus": [],
                           "from": "Submit", "bins": list(WAIT_BIN_LABELS), "histogram": [0] * len(WAIT_BIN_LABELS)},
            "job_sizes": size_table([0] * (len(SIZE_GPU_BUCKETS) * len(SIZE_DURATION_BUCKETS)),
                                    [0.0] * (len(SIZE_GPU_BUCKETS) * len(SIZE_DURATION_BUCKETS)), False),
            # (as the weekly report's over no run)
            "efficiency": {"cpu_efficiency": None, "cpu_hours_share": None, "memory_efficiency_median": None,
                           "allocations_over_memory": 0, "gpu_util_pct_weighted": None, "gpu_hours_with_util": 0.0,
                           "gpu_hours_near_zero_util": 0.0, "by_user": [], "idle_jobs": []}}


def _not_stored(w: dict, why: str) -> dict:
    """A window's figures when none of its days is in the store: every total null, the
    tables empty, the job-size cells null (``jobs`` and ``gpu_hours``, never 0),
    ``not_in_store`` saying why (``not in the store`` or ``not yet``)."""
    js = w.get("job_sizes")
    if js:
        js = {**js, "jobs": [[None] * len(r) for r in js["jobs"]], "gpu_hours": [[None] * len(r) for r in js["gpu_hours"]],
              "cells": [{**c, "jobs": None, "gpu_hours": None} for c in js["cells"]], "not_in_store": why}
    util = {**w["utilization"], "utilization": None} if w.get("utilization") else w.get("utilization")
    eff = {k: ([] if k == "by_user" else None) for k in w.get("efficiency") or {}}
    return {**w, "totals": {k: None for k in w["totals"]}, "not_in_store": why, "utilization": util, "efficiency": eff,
            **{k: [] for k, _ in GROUPS}, "outcomes": [], **({"job_sizes": js} if js else {}),
            "queue_wait": {**w["queue_wait"], "all": {k: None for k in w["queue_wait"]["all"]},
                           "by_partition_gpus": [], "histogram": None}}


def _store_clusters(store_root, clusters) -> list[str]:
    """The store clusters the report reads: ``clusters`` (a name, a list, or None for every
    cluster in the store; "" is ``_default``). Raises :class:`~slurmkit.errors.InputError`
    when ``store_root`` is not a folder, holds no ``cluster=`` folder (a cluster folder given
    for the store says so), or lacks a cluster asked for."""
    from slurmkit.accounting import store as S

    if not Path(store_root).is_dir():
        raise InputError(str(store_root), None, "no store there (not a folder); fill one with 'slurmkit report "
                         "weekly' (live) or 'slurmkit report store --from-sacct FILE' (captures)")
    have = S.clusters(store_root)
    root = Path(store_root)
    if not have:
        if root.name.startswith("cluster=") or (root / "_manifest.json").exists():
            raise InputError(str(store_root), None, "this looks like a cluster folder of a store (cluster=<name>): "
                             f"give its parent, --store {root.parent}")
        raise InputError(str(store_root), None, "no cluster= folders in it: not a store, or an empty one; fill "
                         "it with 'slurmkit report weekly' (live) or 'slurmkit report store --from-sacct FILE'")
    if clusters is None:
        return have
    names = [c or "_default" for c in ([clusters] if isinstance(clusters, str) else clusters)]
    lost = [c for c in names if c not in have]
    if lost:
        raise InputError(str(store_root), None, f"cluster(s) {', '.join(lost)} not in the store "
                         f"(it holds: {', '.join(have) or 'none'})")
    return names


def _days_to_read(store_root, names: list[str], window: Window, now: float):
    """The day files of ``window`` per store cluster: ``(files, store_info, data_quality,
    latest_pull)``; ``files``: ``{cluster: [(day, path)]}`` (:func:`_store_days`),
    ``store_info``: the report's ``store.clusters`` entries, ``latest_pull``: the latest
    manifest ``pulled_at`` of the days read (epoch s) or None."""
    from slurmkit.accounting import store as S

    files, store_info, dq = {}, {}, {"rows_read": 0, "skipped": {}, "repaired": {}}
    latest_pull = None   # the latest pull of the days read (epoch s; the manifest's pulled_at)
    for c in names:
        st = S.Store(store_root, c)
        future: list[str] = []
        after: list[str] = []
        fs, missing, open_days, cdq = _store_days(st, window, now, future, after)
        files[st.cluster] = fs
        man = st.manifest()
        pulls = [float(man[d]["pulled_at"]) for d, _ in fs if man.get(d, {}).get("pulled_at") is not None]
        if pulls:
            latest_pull = max(latest_pull or 0.0, max(pulls))
        store_info[st.cluster] = {"dir": str(st.dir), "days": len(fs), "days_missing": missing,
                                  "days_not_final": open_days, "days_future": future, "days_after_now": after}
        dq["rows_read"] += cdq["rows_read"]
        for kind in ("skipped", "repaired"):
            for k, v in cdq[kind].items():
                dq[kind][k] = dq[kind].get(k, 0) + v
    return files, store_info, dq, latest_pull


def _report_windows(period: Period, scopes: list[str]):
    """The windows computed: the period and each of its parts, per scope ("": every cluster,
    then each cluster with several). ``(parts, windows, ids, rollup)``: ``windows``
    ``[(wid, start, end, scope)]`` (epoch s), ``ids`` ``{(scope, 0 for the period or part
    index + 1): wid}``, ``rollup`` as :func:`_build_rows` takes it."""
    parts = period.parts()
    windows, ids = [], {}
    for scope in scopes:
        for i, w in enumerate([period.window] + [w for _, w in parts]):
            ids[(scope, i)] = len(windows)
            windows.append((len(windows), _epoch(w.start), _epoch(w.end), scope))
    # each part rolls up into its period (:func:`_build_rows`): (period wid, previous part's start)
    rollup = {ids[(scope, i + 1)]: (ids[(scope, 0)], _epoch(parts[i - 1][1].start) if i else None)
              for scope in scopes for i in range(len(parts))}
    return parts, windows, ids, rollup


def _plan_day_sums(store_root, files: dict, windows: list, rollup: dict, store_info: dict, use_sums: bool,
                   why_not: str | None = None, now: float | None = None):
    """The days read from their sums (the rows of jobs with one row, the day whole in each
    window that touches it): ``(sums, flags, summed_rows)`` for :func:`_aggregate` and
    :func:`_load_rows`. Each summed day's entry in ``files`` gains the offsets after which its
    rows are not read (:func:`valid_day_sums`); ``store_info`` gains ``days_from_sums`` and
    ``day_sums`` per cluster. A window boundary other than a UTC midnight, or ``now`` (epoch s)
    inside a day read that was pulled after it (its rows are read as they stood then): every
    row is read."""
    from slurmkit.accounting import store as S

    sums, flags, summed_rows = [], {}, 0
    midnights = all(ws % 86400 == 0 and we % 86400 == 0 for _, ws, we, _ in windows)
    for sc, fs in files.items():
        info, state = valid_day_sums(S.Store(store_root, sc)) if use_sums and midnights else ({}, "")
        store_info[sc]["days_from_sums"] = 0
        store_info[sc]["day_sums"] = (state if use_sums and midnights else
                                      "not read (a period boundary off midnight)" if use_sums else
                                      why_not or "not read (--no-day-sums)")
        if not fs or any(day not in info for day, _ in fs):
            continue   # (the direct rows' one copy needs every day read summed)
        man = S.Store(store_root, sc).manifest() if now is not None else {}
        if now is not None and any(0 < now - _epoch(f"{day}T00:00:00Z") < 86400
                                   and float(man.get(day, {}).get("pulled_at") or math.inf) > now for day, _ in fs):
            store_info[sc]["day_sums"] = "not read (--now inside a day read)"
            continue
        last = max(day for day, _ in fs)
        for k, (day, path) in enumerate(fs):
            e = info[day]
            d0 = _epoch(f"{day}T00:00:00Z")
            wids = [wid for wid, ws, we, scope in windows if scope in ("", sc) and ws <= d0 and d0 + 86400 <= we
                    and (not rollup or wid in rollup)]
            # the compared rows, the direct rows' last copies (every direct row on the last day
            # read: the latest copy read of a job whose run goes on), the plain rows' sums
            fs[k] = (day, path, int(e["direct_from"]), int(e["plain_from"] if day == last else e["earlier_from"]))
            sums.append((e["sums"], wids))
            e0, t0_ = flags.get(sc, (False, False))
            flags[sc] = (e0 or bool(e.get("elig")), t0_ or bool(e.get("textual")))
            summed_rows += int(e["rows"]) - int(e["plain_from"])
        store_info[sc]["days_from_sums"] = len(fs)
    return sums, flags, summed_rows


def _compute_windows(store_root, files: dict, flags: dict, windows: list, now: float, rollup: dict,
                     sums: list, summed_rows: int, per: dict, memory_limit: str, temp_dir, threads,
                     progress, t0: float, assumptions=None, spool=None) -> None:
    """Fill ``per`` (wid -> section) from the day files in DuckDB: :func:`_load_rows`, the
    steps' figures (:func:`_load_steps`), the spool (:func:`_load_spool`), :func:`_build_rows`,
    :func:`_aggregate` under ``assumptions``. Raises :class:`~slurmkit.errors.UsageError` for a
    memory limit DuckDB does not take or is too small, :class:`~slurmkit.errors.InputError`
    when a store file cannot be read."""
    import duckdb

    nfiles = sum(len(f) for f in files.values())
    con = connect(memory_limit, temp_dir, threads)
    steps: dict = {}   # (the step files read: named by the error when one cannot be)
    try:
        if progress:
            progress(f"reading {nfiles} day file(s) of {len(files)} cluster(s)")
        read = {c: f for c, f in files.items() if f}
        _load_rows(con, read, flags)
        from slurmkit.report.energy import SPOOL_MATCH_TOLERANCE_S

        _load_steps(con, step_files(read), bool(con.execute("SELECT count(*) FROM multi_rows").fetchone()[0]),
                    of_rows=bool(sums))
        _load_spool(con, spool, SPOOL_MATCH_TOLERANCE_S)
        _build_rows(con, windows, now, rollup)
        if progress:
            n = con.execute("SELECT count(*) FROM b").fetchone()[0]
            from_sums = f" ({summed_rows:,} from {len(sums)} day sums)" if sums else ""
            progress(f"{n + summed_rows:,} allocation rows{from_sums}, {time.monotonic() - t0:.1f} s; aggregating")
        _aggregate(con, per, rollup, sums, assumptions, _waits_unknown(con, windows, flags or {}))
    except duckdb.OutOfMemoryException:
        raise memory_limit_error(memory_limit) from None
    except duckdb.Error as exc:
        raise store_read_error(exc, store_root, [f[1] for fs in files.values() for f in fs]
                               + [path for path, _ in sums]
                               + [p for ps in steps.values() for p in ps]) from None
    finally:
        con.close()


def open_rows(rows, window: Window, now: float, spool=None, running_elapsed: bool = False,
              memory_limit: str = DEFAULT_MEMORY_LIMIT, threads: int | None = None):
    """A DuckDB connection holding a capture's (or a live pull's) typed rows ``rows`` (a
    :class:`~slurmkit.accounting.frame.JobRows`) as the store's rows are held: registered as
    Arrow tables (:func:`register_rows`, no Parquet written), read by :func:`_load_rows` and
    :func:`_load_steps`, the spool's records matched by :func:`_load_spool`, and view ``rw``
    (:func:`_build_rows`) over ``window`` (``[start, end)``, window id 0). ``now``: epoch s, the
    time a running job runs up to at the latest; ``running_elapsed``: a running job runs its
    Elapsed (captures). The caller closes it. Raises what DuckDB raises."""
    from slurmkit.report.energy import SPOOL_MATCH_TOLERANCE_S

    con = connect(memory_limit, None, threads)
    try:
        allocs, steps = register_rows(con, rows)
        _load_rows(con, {"": [("1970-01-01", allocs)]})
        _load_steps(con, {"": [steps]}, bool(con.execute("SELECT count(*) FROM multi_rows").fetchone()[0]),
                    hive=False)
        _load_spool(con, spool, SPOOL_MATCH_TOLERANCE_S)
        rows_window(con, window, now, running_elapsed)
    except BaseException:
        con.close()
        raise
    return con


def rows_window(con, window: Window, now: float, running_elapsed: bool = False) -> None:
    """View ``rw`` of ``con`` (:func:`open_rows`) over ``window`` instead (window id 0)."""
    _build_rows(con, [(0, _epoch(window.start), _epoch(window.end), "")], now, running_elapsed=running_elapsed)


def window_figures(con, assumptions=None) -> dict:
    """The figures of view ``rw``'s window (:func:`open_rows`): its section (:func:`_empty_window`'s
    keys: ``totals``, ``unknown``, the group tables, ``outcomes``, ``queue_wait``, ``job_sizes``,
    ``efficiency``) under ``assumptions``, by :func:`_aggregate`."""
    assumptions = assumptions or Assumptions()
    per = {0: _empty_window(assumptions)}
    _aggregate(con, per, None, None, assumptions, _waits_unknown(con, _rw_windows(con)))
    return per[0]


def _rw_windows(con) -> list[tuple[int, float, float, str]]:
    """The windows view ``rw`` was built over (table ``rw_windows`` of :func:`_build_rows`)."""
    return [tuple(r) for r in con.execute("SELECT wid, ws, we, scope FROM rw_windows ORDER BY wid").fetchall()]


def rows_figures(rows, window: Window, now: float, assumptions=None, spool=None, running_elapsed: bool = False,
                 memory_limit: str = DEFAULT_MEMORY_LIMIT, threads: int | None = None) -> dict:
    """One window's figures over a capture's (or a live pull's) typed rows ``rows`` (a
    :class:`~slurmkit.accounting.frame.JobRows`), by the same SQL as the store's
    (:func:`open_rows`, then :func:`window_figures` under ``assumptions``). ``now``: epoch s,
    the time a running job runs up to at the latest; ``running_elapsed``: a running job runs its
    Elapsed (captures: :func:`_build_rows`). Returns the window's section (:func:`_empty_window`'s
    keys: ``totals``, ``unknown``, the group tables, ``outcomes``, ``queue_wait``, ``job_sizes``,
    ``efficiency``)."""
    assumptions = assumptions or Assumptions()
    if not len(rows.allocs):
        return _empty_window(assumptions)
    con = open_rows(rows, window, now, spool, running_elapsed, memory_limit, threads)
    try:
        return window_figures(con, assumptions)
    finally:
        con.close()


#: The energy source names of :data:`ENERGY_SOURCES` as a SQL list (1-based).
def _source_names_sql() -> str:
    return "[" + ", ".join(f"'{s}'" for s in ENERGY_SOURCES) + "]"


def rows_table(con, name: str, assumptions=None) -> str:
    """Table ``name``: the rows of view ``rw`` (one window, :func:`open_rows`) one per allocation
    row, with the columns of ``jobs.csv`` (docs/report.md, *Per allocation*) and those
    :mod:`slurmkit.report.week_sql` reads, each by the rule of :func:`_build_rows`: times in
    epoch s (``submit``, ``eligible``, ``start``, ``end``, ``stop``), ``run_s``,
    ``in_window_s``, the GPU-, CPU- and physical GPU-hours in the window, ``started`` (``ran``),
    ``waiting``, ``run``, ``never``, ``provisional``, ``wasted`` (a waste state or a requeued
    attempt), ``requeued_attempt``, ``wait_s``, ``gpu_bucket`` (its label), ``cpu_eff``,
    ``mem_eff``, the steps' figures (``step_mem_mib``, ``step_cpu_s``, ``step_energy_j``,
    ``step_gpu_util_pct``), ``spool_gpu_util_pct``, ``gu``, ``energy_source``
    (:data:`ENERGY_SOURCES` name, under ``assumptions``: :func:`energy_source_sql`) and
    ``energy_kwh`` (in the window; NULL: unknown, :func:`energy_kwh_sql`), ``clock_policy``
    (the spool records', ``none recorded`` without one), ``jid`` (a job with several rows; NULL:
    a job of one row), ``rk`` (the row's position in its source: :func:`rows_with_fields`).
    Returns ``name``."""
    from slurmkit.hooks.clock_policy import NONE_RECORDED

    a = assumptions or Assumptions()
    label = "CASE gpu_bucket " + " ".join(f"WHEN {i} THEN '{_q(b)}'" for i, b in enumerate(_BUCKET_LABELS)) + " END"
    src = energy_source_sql(a, "ec", "gpus > 0", "gpu_type")
    cpu = "(CASE WHEN total_cpu_s > 0 THEN total_cpu_s ELSE scpu END)"
    con.execute(f"""CREATE OR REPLACE TEMP TABLE "{name}" AS
        SELECT cluster, job_id, key_id, "user", account, partition, qos, state, submit, eligible, start, "end", stop,
               run_s, in_window_s, gpus, physical_gpus, coalesce(gpu_type_raw, '') AS gpu_type, gpu_source, ncpus,
               req_gpus, req_cpus, timelimit_s, pending_tasks, nodelist, NULL::VARCHAR AS reservation,
               ran AS started, ran, waiting, run, never, provisional, gpu_hours, physical_gpu_hours, cpu_hours,
               waste_state OR requeued AS wasted, requeued AS requeued_attempt, wait_s, {label} AS gpu_bucket,
               CASE WHEN run_s * ncpus > 0 THEN {cpu} / (run_s * ncpus) END AS cpu_eff,
               CASE WHEN alloc_mem_mib > 0 THEN smem / alloc_mem_mib END AS mem_eff,
               sutil AS step_gpu_util_pct, sutilp AS spool_gpu_util_pct, gu,
               {_source_names_sql()}[{src} + 1] AS energy_source,
               {energy_kwh_sql(a, src, "ej", "gpu_hours", "gpu_type")} AS energy_kwh,
               coalesce(spol, '{_q(NONE_RECORDED)}') AS clock_policy, jid,
               smem AS step_mem_mib, scpu AS step_cpu_s, sej AS step_energy_j, rk
        FROM rw""")
    return name


def rows_with_fields(con, rows: str, raw: str = "capture_allocs") -> str:
    """SQL: the rows of table ``rows`` (:func:`rows_table`) each with the other columns of its
    allocation row in ``raw`` (the registered capture rows, :func:`register_rows`: JobName,
    ExitCode, ...), by its position (``rk``), in the input's order; ``rk`` left out."""
    mine = {r[0] for r in con.execute(f'DESCRIBE "{rows}"').fetchall()}
    other = [c for (c,) in con.execute(f'SELECT column_name FROM (DESCRIBE "{raw}")').fetchall()
             if c not in mine and c != "file_row_number" and not c.startswith("_")]
    cols = "".join(f', r."{c}"' for c in other)
    return f"""SELECT j.* EXCLUDE (rk){cols} FROM "{rows}" j
               LEFT JOIN "{raw}" r ON r.file_row_number = (j.rk & 4294967295) ORDER BY j.rk"""



def capacity_inputs(capacity_gpus: float | None = None, source: str | None = None, profile=None,
                    inputs: dict | None = None, live: bool = False) -> dict:
    """What the utilization's denominator is made of, as the weekly report takes it: the GPUs
    of the cluster (``capacity_gpus``, ``--capacity-gpus``; else the site ``profile``'s,
    :func:`slurmkit.report.capacity.gpus_per_node_profile`; else the breakdown ``inputs``' node
    TRES: ``scontrol show -o nodes``, live or captured), GPUs per node for the down GPU-hours
    (the profile's, else the node TRES'), the node events (``inputs["events"]``: down time and
    the cluster's registration). ``{"gpus", "source", "gpus_per_node", "events"}``, each None
    when not known."""
    from slurmkit.report.capacity import gpus_per_node_profile

    per_node = gpus_per_node_profile(profile) if profile is not None else None
    tres = (inputs or {}).get("node_tres")
    if per_node is None and tres is not None:
        per_node = {n: int(t.get("gres/gpu") or 0) for n, t in tres.items()}
    if capacity_gpus is None and profile is not None:
        capacity_gpus = float(sum(per_node.values())) or None
        source = "site profile (each partition's node type's GPUs)" if capacity_gpus else None
    if capacity_gpus is None and tres is not None:
        capacity_gpus = float(sum(per_node.values())) or None
        source = (("scontrol show nodes (each node's Gres GPUs)" if live else
                   "--nodes (captured scontrol show -o nodes: each node's GPUs)") if capacity_gpus else None)
    return {"gpus": capacity_gpus, "source": source, "gpus_per_node": per_node, "events": (inputs or {}).get("events")}


def _utilization(per: dict, windows: list, capacity: dict | None, horizon: pd.Timestamp, now_ts: pd.Timestamp,
                 several: bool) -> None:
    """Each window's ``utilization`` (:func:`slurmkit.report.definitions.utilization`: GPU-hours over
    the capacity's GPU-hours from the window's start, or the cluster's registration inside it,
    to ``horizon``, less the down GPU-hours, :func:`slurmkit.report.capacity.down_gpu_hours`,
    ongoing events to ``now_ts``), with ``capacity_source``; ``unknown["utilization"]`` as
    :func:`slurmkit.report.weekly.unknown_figures` says it. ``several``: the report covers
    several clusters, which one capacity does not describe (utilization unknown)."""
    from slurmkit.report.breakdown import registration
    from slurmkit.report.capacity import down_gpu_hours
    from slurmkit.report.definitions import utilization

    cap = capacity or {}
    gpus = None if several else cap.get("gpus")
    events, per_node = cap.get("events"), cap.get("gpus_per_node")
    reg = registration(events)
    for wid, ws, we, _scope in windows:
        w = Window(pd.Timestamp(ws, unit="s", tz="UTC").to_pydatetime(), pd.Timestamp(we, unit="s", tz="UTC").to_pydatetime())
        upto = min(pd.Timestamp(w.end), max(horizon, pd.Timestamp(w.start)))
        down = (down_gpu_hours(events, per_node, w.start, upto, now_ts)
                if gpus and events is not None and per_node is not None else None)
        sec = per[wid]
        sec["utilization"] = {**utilization(sec["totals"]["gpu_hours"], gpus, down, w, upto, capacity_from=reg),
                              "capacity_source": (cap.get("source") or "unknown") if gpus else
                              ("unknown (one capacity, several clusters)" if several and cap.get("gpus") else "unknown"),
                              "of_reported": None}
        if not gpus or "gpu_hours" in sec["unknown"]:
            sec["unknown"]["utilization"] = (
                UNKNOWN_WHY["gpu_hours"] if gpus else
                "one capacity describes one cluster, and this report covers several (give --cluster NAME)"
                if several and cap.get("gpus") else UNKNOWN_WHY["utilization"])


def _of_reported(out: dict) -> None:
    """Each section's ``utilization.of_reported`` (:func:`slurmkit.report.definitions.utilization_of_reported`)
    from sreport's breakdown computed over its whole hours (``out["sreport_breakdown"]``, by
    window label), where there is one."""
    from slurmkit.report.definitions import utilization_of_reported

    bd = {w["label"]: w for w in (out.get("sreport_breakdown") or {}).get("windows") or []}
    for label, sec in [("(period)", out)] + [(b["label"], b) for b in out["breakdown"]]:
        w = bd.get(label)
        if w is not None and "utilization" in sec:
            sec["utilization"]["of_reported"] = utilization_of_reported(w.get("ours"), {"start": w["start"],
                                                                                       "end": w["end"]})


def _with_coverage(per: dict, ids: dict, period: Period, parts: list, files: dict, store_info: dict):
    """``section(scope)``: a scope's period section with its ``breakdown`` of parts, each with
    ``days_in_part``, ``days_stored`` and ``days_future``; a window none of whose days any
    cluster (of the scope) holds has its figures not known (:func:`_not_stored`), never 0;
    days after ``now`` are future ("not yet"), not missing."""
    held = {c: {f[0] for f in fs} for c, fs in files.items()}
    fut = {d for s_ in store_info.values() for d in s_["days_future"]}

    def coverage(scope: str, w: Window, figures: dict) -> dict:
        days = [f"{d0:%Y-%m-%d}" for d0, _ in w.days()]
        have = set().union(*held.values()) if scope == "" else held[scope]
        cov = {"days_in_part": len(days), "days_stored": sum(d in have for d in days),
               "days_future": sum(d in fut for d in days)}
        if days and not cov["days_stored"]:
            figures = _not_stored(figures, "not yet (after --now)" if cov["days_future"] == len(days)
                                  else "not in the store")
        return {**figures, **cov}

    def section(scope: str) -> dict:
        w0 = coverage(scope, period.window, per[ids[(scope, 0)]])
        return {**w0, "breakdown": [{"label": label, **w.as_dict(), **coverage(scope, w, per[ids[(scope, i + 1)]])}
                                    for i, (label, w) in enumerate(parts)]}

    return section


def period_report(store_root, period: Period, clusters=None, now=None,
                  memory_limit: str = DEFAULT_MEMORY_LIMIT, temp_dir: str | None = None,
                  threads: int | None = None, progress=None, sections=None, use_sums: bool = True,
                  assumptions=None, spool=None, capacity: dict | None = None) -> dict:
    """The period report (a plain dict, the JSON output; its shape in docs/report.md) from the
    store at ``store_root``, computed in DuckDB over the store's daily allocation files.

    ``clusters``: a store cluster name, a list of them, or None (every cluster in the store,
    :func:`slurmkit.accounting.store.clusters`); "" is ``_default``. ``now``: the time running
    jobs are taken to end at the latest (default: the current time; a running job runs up to its row's pull, never past it). ``progress``: a callable
    ``(message)`` told what is being read and done (the CLI prints it on a terminal).
    ``sections``: ``{name: callable(windows, clusters) -> dict}``, the hook of sections this
    module does not compute (sreport's breakdown and the account tree,
    :func:`slurmkit.report.period_breakdown.breakdown_sections`): each is called with the
    windows (``[(label, Window)]``, the period's first as ``"(period)"``, then the parts) and
    the store clusters, and its dict is the report's ``name``. ``use_sums``: read the store's
    day sums where they are valid (:func:`valid_day_sums`; False: every row, the same figures).
    ``assumptions``: the energy and cost assumptions (:class:`~slurmkit.report.energy.Assumptions`,
    the weekly report's: the site profile's and the options over them; None: none set, Slurm's
    energy trusted); ``spool``: the hook spool's records (:func:`slurmkit.report.energy.read_spool`'s
    frame; measured energy, matched per row: the day sums are then not read). ``capacity``:
    :func:`capacity_inputs` (the GPUs, their source, GPUs per node, node events), for each
    window's ``utilization`` (:func:`_utilization`; its ``of_reported`` from sreport's breakdown
    when ``sections`` computes it).

    ``{"period": {"label", "start", "end", "by"}, "as_of" (``now``), "running_up_to" (a running
    job runs up to its row's pull, never past ``now``: the latest pull of the days read, else
    ``now``), "clusters", "store": {"root",
    "days", "days_missing", "days_not_final", "days_future", "days_after_now"} (per cluster, with
    ``days_from_sums``: days read with their sums, and ``day_sums``: :func:`valid_day_sums`'
    state, or why none was read; a day not stored
    after ``now`` is future, not missing; a stored day starting at or after ``now`` is not read,
    and listed in ``days_after_now`` too), "time_zones" (:func:`time_zones`)}, "totals", "unknown", "by_user",
    "by_account", "by_partition", "by_qos", "by_gpu_type", "outcomes", "queue_wait",
    "breakdown": [{"label", "start", "end", <the same sections>}] (each section, the period's
    too, with ``days_in_part``, ``days_stored`` (held by some cluster of its scope) and
    ``days_future`` (after ``now``); one with no day stored has every figure None and
    ``not_in_store``: "not in the store" or "not yet (after --now)"), "by_cluster": [{"cluster",
    <the same sections>, "breakdown"}] (several clusters only), "data_quality"}``: hours are
    GPU-/CPU-hours inside the window (the period or the part); wait times in s; an unknown
    figure is None. Raises :class:`~slurmkit.errors.InputError` (the store's folder, DuckDB's
    message naming the file) when ``store_root`` is not a folder or holds no ``cluster=``
    folder (a cluster folder given for the store says so), when a store file cannot be read, and when a cluster asked for is
    not in the store."""
    t0 = time.monotonic()
    now_ts = pd.Timestamp(now) if now is not None else pd.Timestamp.now(tz="UTC")
    now_ts = now_ts.tz_localize("UTC") if now_ts.tzinfo is None else now_ts.tz_convert("UTC")
    names = _store_clusters(store_root, clusters)
    files, store_info, dq, latest_pull = _days_to_read(store_root, names, period.window, now_ts.timestamp())
    scopes = [""] + (list(files) if len(files) > 1 else [])
    parts, windows, ids, rollup = _report_windows(period, scopes)
    assumptions = assumptions or Assumptions()
    per = {wid: _empty_window(assumptions) for wid, *_ in windows}
    spooled = spool is not None and len(spool) > 0
    sums, flags, summed_rows = _plan_day_sums(store_root, files, windows, rollup, store_info, use_sums and not spooled,
                                              "not read (a spool: measured energy is matched per row)" if spooled
                                              else None, now_ts.timestamp())
    if sum(len(f) for f in files.values()):
        _compute_windows(store_root, files, flags, windows, now_ts.timestamp(), rollup, sums, summed_rows, per,
                         memory_limit, temp_dir, threads, progress, t0, assumptions, spool)
    # (running jobs run up to their row's pull, never past now: so does the capacity)
    horizon = min(now_ts, pd.Timestamp(latest_pull, unit="s", tz="UTC")) if latest_pull is not None else now_ts
    _utilization(per, windows, capacity, horizon, now_ts, len(files) > 1)
    section = _with_coverage(per, ids, period, parts, files, store_info)
    fut = {d for s_ in store_info.values() for d in s_["days_future"]}
    out = {
        "period": {"label": period.label, **period.window.as_dict(), "by": period.by},
        "as_of": iso_z(now_ts),
        # running jobs run up to their row's pull, never past now: the latest of those
        "running_up_to": iso_z(horizon),
        "clusters": list(files),
        "store": {"root": str(store_root), "clusters": store_info,
                  "days": sum(s["days"] for s in store_info.values()),
                  "days_missing": sorted({d for s in store_info.values() for d in s["days_missing"]}),
                  "days_not_final": sorted({d for s in store_info.values() for d in s["days_not_final"]}),
                  "days_future": sorted(fut),
                  "days_after_now": sorted({d for s_ in store_info.values() for d in s_["days_after_now"]}),
                  "time_zones": time_zones(store_root, list(files), part_days(period.window.as_dict()))},
        **section(""),
        "data_quality": dq,
        # (the energy and cost assumptions, with where each came from, as the weekly report's)
        "assumptions": assumptions.as_dict(),
        "energy_sources": {"order": [s_ for s_ in ENERGY_SOURCE_ORDER if not s_.startswith("prometheus")],
                           "spool_records": 0 if spool is None else int(len(spool))},
    }
    if len(scopes) > 1:
        out["by_cluster"] = [{"cluster": c, **section(c)} for c in scopes[1:]]
    for name, fn in (sections or {}).items():
        out[name] = fn([("(period)", period.window)] + parts, list(files))
    _of_reported(out)
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


#: The figures of a window's ``efficiency`` (efficiency.csv, a row per cluster and part).
_EFFICIENCY_COLUMNS = ["cpu_efficiency", "cpu_hours_share", "memory_efficiency_median", "allocations_over_memory",
                       "gpu_util_pct_weighted", "gpu_hours_with_util", "gpu_hours_near_zero_util"]

#: Each CSV's header (written also when the table has no row: a file of 0 bytes is no CSV).
_GROUP_COLUMNS = ["jobs", "gpu_hours", "cpu_hours", "energy_kwh", "energy_jobs_unknown", "wasted_gpu_hours",
                  "provisional_gpu_hours", "physical_gpu_hours"]
_QW_COLUMNS = ["n"] + [k for k, _ in _QUANTILES]
HEADERS = {**{f"{key}.csv": ["cluster", "part", col, *_GROUP_COLUMNS] for key, col in GROUPS},
           "outcomes.csv": ["cluster", "part", "state", "jobs", "attempts", "rows", "gpu_hours", "wasted_gpu_hours"],
           "queue_wait.csv": ["cluster", "part", "partition", "gpu_bucket", *_QW_COLUMNS],
           "job_sizes.csv": ["cluster", "part", "gpus", "duration", "jobs", "gpu_hours"],
           "efficiency.csv": ["cluster", "part", *_EFFICIENCY_COLUMNS],
           "efficiency_by_user.csv": ["cluster", "part", "user", "cpu_efficiency", "memory_efficiency_median",
                                      "gpu_hours", "gpu_util_pct", "gpu_hours_near_zero_util"],
           "idle_jobs.csv": ["cluster", "part", "job_id", "user", "gpus", "gpu_hours", "gpu_util_pct"]}


def flat_totals(t: dict) -> dict:
    """A ``totals`` dict as one CSV row: its nested figures a column each (``energy_kwh_by_source``
    as ``energy_kwh_<source>``, ``energy_jobs_by_source`` as ``energy_jobs_<source>``,
    ``energy_coverage`` as ``energy_coverage_<key>``; a section not in the store, whose nested
    figures are None, has those columns empty)."""
    from slurmkit.report.energy import REPORTED_SOURCES

    out = {}
    nested = {"energy_kwh_by_source": ("energy_kwh_", REPORTED_SOURCES),
              "energy_jobs_by_source": ("energy_jobs_", REPORTED_SOURCES + ("none",)),
              "energy_coverage": ("energy_coverage_", ("jobs_with_energy", "jobs_unknown", "cpu_hours_share",
                                                       "gpu_hours_share", "complete"))}
    for k, v in t.items():
        if k in nested:
            head, keys = nested[k]
            out.update({head + x: (v or {}).get(x) for x in keys})
        else:
            out[k] = v
    return out


def flat_utilization(u: dict | None) -> dict:
    """A section's ``utilization`` as CSV columns: ``utilization`` (of the available capacity),
    ``utilization_of_reported`` (sreport's Allocated / Reported, where computed), the capacity's
    GPUs, GPU-hours, down and available GPU-hours, where they come from and the hours counted."""
    u = u or {}
    rep = u.get("of_reported") or {}
    cp = u.get("capacity_period") or {}
    return {"utilization": u.get("utilization"), "utilization_of_reported": rep.get("utilization"),
            "capacity_gpus": u.get("capacity_gpus"), "capacity_gpu_hours": u.get("capacity_gpu_hours"),
            "down_gpu_hours": u.get("down_gpu_hours"), "available_gpu_hours": u.get("available_gpu_hours"),
            "reported_gpu_hours": rep.get("reported_gpu_hours"), "capacity_source": u.get("capacity_source"),
            "capacity_start": cp.get("start"), "capacity_end": cp.get("end")}


def _tables(report: dict) -> dict[str, list[dict]]:
    """CSV tables written by :func:`write_period` (file -> the rows, each flattened, with its
    ``cluster`` and ``part`` columns)."""
    parts = _parts(report)
    out = {"totals.csv": [{"cluster": c, "part": p, "days_in_part": s.get("days_in_part"),
                           "days_stored": s.get("days_stored"), "not_in_store": s.get("not_in_store", ""),
                           **flat_totals(s["totals"]), **flat_utilization(s.get("utilization"))} for c, p, s in parts]}
    for key, _ in GROUPS:
        out[f"{key}.csv"] = [{"cluster": c, "part": p, **g} for c, p, s in parts for g in s[key]]
    out["outcomes.csv"] = [{"cluster": c, "part": p, **{k: v for k, v in o.items() if k not in ("states", "ran")}}
                           for c, p, s in parts for o in s["outcomes"]]
    out["queue_wait.csv"] = [{"cluster": c, "part": p, "partition": "(all)", "gpu_bucket": "(all)",
                              **s["queue_wait"]["all"]} for c, p, s in parts] + \
                            [{"cluster": c, "part": p, **{k: v for k, v in q.items() if k != "histogram"}}
                             for c, p, s in parts for q in s["queue_wait"]["by_partition_gpus"]]
    # (as the weekly report's job_sizes.csv: one row per cell; a part not in the store: its
    # cells empty, never 0)
    out["job_sizes.csv"] = [{"cluster": c, "part": p, **cell} for c, p, s in parts
                            for cell in s.get("job_sizes", {}).get("cells", [])]
    # efficiency (the weekly report's section, per part): its figures, per user, the idle jobs
    # (a part not in the store: its figures empty, its tables no row)
    out["efficiency.csv"] = [{"cluster": c, "part": p, **{k: (s.get("efficiency") or {}).get(k)
                                                          for k in _EFFICIENCY_COLUMNS}} for c, p, s in parts]
    out["efficiency_by_user.csv"] = [{"cluster": c, "part": p, **u} for c, p, s in parts
                                     for u in (s.get("efficiency") or {}).get("by_user") or []]
    out["idle_jobs.csv"] = [{"cluster": c, "part": p, **j} for c, p, s in parts
                            for j in (s.get("efficiency") or {}).get("idle_jobs") or []]
    from slurmkit.report.period_breakdown_text import tables     # sreport's breakdown, the account tree (sections=)

    out.update(tables(report))
    return out


def render_markdown(report: dict) -> str:
    """The period report as Markdown: totals per part (and per cluster with several), then the
    period's tables. An unknown figure reads "unknown", with why below the totals; a section
    none of whose days is in the store reads "not in the store"; an empty name "(none)"."""
    from slurmkit.report.period_text import utilization_text
    from slurmkit.report.render import (_md_efficiency, _md_job_sizes, _md_text, energy_by_source_text,
                                         energy_coverage_text, derived_text, fmt, group_kwh, pct)

    def f(x):
        return "unknown" if x is None else fmt(x)

    def _util(s, x, none="unknown"):
        return pct(x) if x is not None else ("unknown" if "utilization" in s.get("unknown", {}) else none)

    def name(x):
        return _md_text(x) or "(none)"

    p, st = report["period"], report["store"]
    missing = missing_counts(report)
    several = len(st.get("clusters") or {}) > 1
    lines = [f"# Usage report {period_span(p)}, by {p['by']}", "",
             f"As of {report['as_of']} (running jobs up to their pull, at the latest "
             f"{report.get('running_up_to', report['as_of'])}); cluster(s) {', '.join(report['clusters']) or '(none)'}; "
             f"{st['days']} day file(s) from the store"
             + (f"; **{missing}**: " + ", ".join(st["days_missing"][:10]) + (" ..." if len(st["days_missing"]) > 10 else "")
                if missing else "")
             + (f"; {len(st['days_not_final'])} day(s) not final (provisional)" if st["days_not_final"] else "")
             + (f"; {len(st.get('days_future', []))} day(s) not yet (after {report['as_of']})"
                + (f", {len(st['days_after_now'])} of them stored and not read" if st.get("days_after_now") else "")
                if st.get("days_future") else ""), ""]
    if st.get("time_zones"):
        lines += [f"Times of the captures read in: {time_zone_text(st['time_zones'])}.", ""]
    cols = ["jobs", "gpu_jobs", "gpu_hours", "cpu_hours", "wasted_gpu_hours", "provisional_gpu_hours",
            "physical_gpu_hours"]
    money = ["facility_kwh", "co2e_kg", "cost_total"]
    lines += ["## Totals", "", "| cluster | part | days stored | " + " | ".join(cols) + " | utilization | "
              "utilization of Reported | energy (IT) | " + " | ".join(money) + " |",
              "|---" * (len(cols) + len(money) + 6) + "|"]
    for c, label, s in _parts(report):
        label = "**period**" if label == "(period)" else label
        days = f"{s['days_stored']} / {s['days_in_part']}" if "days_in_part" in s else ""
        t = s["totals"]
        u = s.get("utilization") or {}
        cells = ([s["not_in_store"]] + ["—"] * (len(cols) + len(money) + 2) if s.get("not_in_store")
                 else [f(t[k]) for k in cols] + [_util(s, u.get("utilization")),
                                                 _util(s, (u.get("of_reported") or {}).get("utilization"), "–")]
                 + [energy_coverage_text(t, short=True)] + [derived_text(t, k) for k in money])
        lines.append(f"| {c} | {label} | {days} | " + " | ".join(cells) + " |")
    if several:
        lines += ["", "(all): days stored by some cluster; each cluster's own in its rows."]
    if not report.get("not_in_store"):
        t = report["totals"]
        lines += ["", f"Energy (IT) over the period: {energy_coverage_text(t)}"
                  + (f"; by source: {energy_by_source_text(t)}" if t.get("energy_known") else "") + "."]
    lines += ["", utilization_text(report)]
    for k, why in report["unknown"].items():
        lines.append(f"\n{k.replace('_', ' ')}: unknown ({why})")
    for key, col in GROUPS:
        title = "GPU type" if col == "gpu_type" else col.replace("qos", "QOS")
        lines += ["", f"## By {title}", ""]
        if not report[key]:
            lines += [empty_group_text(report, key)]
            continue
        lines += [f"| {title} | jobs | GPU-h | CPU-h | kWh | wasted GPU-h | physical GPU-h |", "|---|---|---|---|---|---|---|"]
        lines += [f"| {name(g[col])} | {f(g['jobs'])} | {f(g['gpu_hours'])} | {f(g['cpu_hours'])} | {group_kwh(report, g)} | "
                  f"{f(g['wasted_gpu_hours'])} | {f(g.get('physical_gpu_hours'))} |" for g in report[key]]
    lines += ["", "## Outcomes", ""]
    if report["outcomes"]:
        lines += ["| state | jobs | attempts | GPU-h | wasted GPU-h |", "|---|---|---|---|---|"]
        lines += [f"| {o['state']} | {f(o['jobs'])} | {f(o['attempts'])} | {f(o['gpu_hours'])} | {f(o['wasted_gpu_hours'])} |"
                  for o in report["outcomes"]]
    else:
        lines += [empty_group_text(report, "outcomes")]
    lines += ["", "## Queue wait", "", queue_wait_text(report), ""]
    # the weekly report's section, over the period (each part's in job_sizes.csv)
    if report.get("not_in_store"):
        lines += ["## Job sizes (GPUs x duration)", "", f"Job sizes: {report['not_in_store']}.", ""]
    else:
        lines += _md_job_sizes(report)
    # the weekly report's efficiency section and assumptions, over the period (each part's in
    # efficiency.csv, efficiency_by_user.csv, idle_jobs.csv)
    if report.get("not_in_store"):
        lines += ["## Efficiency", "", f"Efficiency: {report['not_in_store']}.", ""]
    else:
        lines += _md_efficiency(report, 25)
    from slurmkit.report.period_breakdown_text import markdown_lines     # sreport's breakdown, the account tree

    lines += markdown_lines(report)
    return "\n".join(lines) + "\n"


def write_period(report: dict, outdir, formats=("json", "csv", "md")) -> list[Path]:
    """Write ``period.json``, the CSV tables (each with its header row, also when it has no
    row: :data:`HEADERS`), ``period.md`` and (``html`` in ``formats``) ``period.html`` into
    ``outdir`` (created); every file is complete before it replaces an earlier one. Returns
    the paths written."""
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
            head = list(dict.fromkeys(k for r in rows for k in r)) or HEADERS.get(name)
            if head:
                w = csv.DictWriter(buf, fieldnames=head)
                w.writeheader()
                w.writerows(rows)
            atomic_write(out / name, buf.getvalue())
            written.append(out / name)
    if "md" in formats:
        atomic_write(out / "period.md", render_markdown(report))
        written.append(out / "period.md")
    # the page and its plots live in report.period_html
    if "html" in formats:
        from slurmkit.report.period_html import to_html

        atomic_write(out / "period.html", to_html(report))
        written.append(out / "period.html")
    return written


__all__ = ["Period", "parse_period", "period_report", "write_period", "render_markdown", "connect"]
