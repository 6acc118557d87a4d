"""Day sums: what a period report over months needs from a stored day, prepared once when the
day is stored, so the report reads each day's few thousand groups and the rows it must compare,
not every row again (the aggregation tables of XDMoD, the usage rollups of slurmdbd;
docs/report.md, *Day sums*).

:func:`summarize` sorts the rows of each ``day=<D>/allocs.parquet`` of a store cluster into
four runs, each its own Parquet row group (a reader skips the others), by what the period
report's rules (:mod:`slurmkit.report.period`) need to count each row:

1. *compared* rows: the rows of a job whose rows differ from one another (a requeued job's
   attempts; a job pulled while running, then finished; a key shared by two jobs): the
   report finds the copies and the jobs with several rows among them as it does without sums;
2. *direct* rows, the last copy: the rows of a job whose rows are copies of one row (every
   column the report reads but ``pulled_at``), one per stored day over a run of consecutive
   stored days (a job over midnight, in each day's pull), each day's copy pulled no later
   than the next day's (so the latest copy the report reads of any run of those days is the
   last one), in the last day of the run; and any other row whose key no other row holds;
3. *direct* rows, an earlier copy: the same jobs' copies in the other days of their run;
4. *plain* rows: a key no other row holds, a finished row (End set, no open state, no pending
   array tasks) whose Start (else Submit) and End are inside day D, and not a zero-length run
   without Eligible (whether it ran then depends on the other rows of its cluster): the
   period report's rules give it the same figures in every window that holds day D whole.

Table ``fine0`` (:func:`slurmkit.report.period.fine0_sql`) of the plain rows, the day as window
0, is ``day=<D>/_sums.parquet``. The period report reads runs 1 and 2 of each day, run 3 of the
last day it reads (one copy of each direct job: the latest one read, as it keeps), and the sums
of run 4 (:func:`slurmkit.report.period.period_report`).

The store cluster's ``_sums.json`` records the rules' version
(:func:`~slurmkit.report.period.sums_version`) and per day its file's ``size`` and
``mtime_ns``, ``rows``, where runs 2, 3 and 4 start (``direct_from``, ``earlier_from``,
``plain_from``), whether a plain row has Eligible (``elig``) and whether a key of runs 2-4 is
not a number (``textual``). Sums are read only while every day file of the cluster is as
summed (:func:`~slurmkit.report.period.valid_day_sums`): a day stored since, by any writer,
makes the period report read the cluster's rows one by one (the same figures, slower) until
the next :func:`summarize`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from slurmkit.accounting.store import DAY_COLUMNS, OPEN_STATES, Store, check_columns
from slurmkit.atomicfile import atomic_write, atomic_write_with
from slurmkit.errors import InputError
from slurmkit.report import period as P

#: SQL: the key of a row as the store cluster's identity reads it (a number below 2**40 as
#: that number, so ``012`` is ``12``; any other key as its text, apart from the numbers).
KEY = ("CASE WHEN TRY_CAST(key_id AS BIGINT) BETWEEN 0 AND 1099511627775 "
       "THEN CAST(TRY_CAST(key_id AS BIGINT) AS VARCHAR) ELSE chr(31) || coalesce(key_id, '') END")

#: The columns whose values make two rows copies of one (all the period report reads but
#: ``pulled_at``).
CONTENT = ("cluster", "key_id", "state", "user", "account", "partition", "qos", "gpu_type", "gpu_source",
           "submit", "eligible", "start", "end", "elapsed_s", "timelimit_s", "ncpus", "gpus", "req_gpus",
           "pending_tasks")

#: The runs of a sorted day file, in order (the module's docstring).
COMPARED, DIRECT_LAST, DIRECT_EARLIER, PLAIN = range(4)


def _ep(c: str) -> str:
    return f'epoch_us("{c}"::TIMESTAMPTZ) / 1e6'


def _finished() -> str:
    states = ", ".join(f"'{s}'" for s in OPEN_STATES)
    return f"""("end" IS NOT NULL AND coalesce(pending_tasks, 0) = 0 AND coalesce(state NOT IN ({states}), true))"""


def _category_sql(i: str, d0: str) -> str:
    """SQL: a row's run (:data:`COMPARED` .. :data:`PLAIN`) in its day (index ``i``, midnight
    ``d0``, epoch s), over its columns joined (LEFT) with table ``groups`` (``k``, ``direct``,
    ``i1``: the keys held by several rows) as ``g``."""
    t_lo = f"coalesce({_ep('start')}, {_ep('submit')}, {_ep('end')})"
    d1 = f"({d0} + 86400)"
    plain = f"""({_finished()} AND {t_lo} >= {d0} AND {t_lo} < {d1} AND {_ep('end')} >= {d0} AND {_ep('end')} < {d1}
        AND NOT (coalesce(start = "end", false) AND NOT coalesce(elapsed_s > 0, false) AND eligible IS NULL))"""
    return f"""CASE WHEN g.k IS NULL THEN CASE WHEN {plain} THEN {PLAIN} ELSE {DIRECT_LAST} END
                    WHEN NOT g.direct THEN {COMPARED} WHEN g.i1 = {i} THEN {DIRECT_LAST} ELSE {DIRECT_EARLIER} END"""


def _counts(days: int, summed: int, entries: dict, t0: float) -> dict:
    """:func:`summarize`'s result from the manifest ``entries`` of the days (``t0``: its start,
    ``time.monotonic()``)."""
    return {"days": days, "summed": summed, "rows": sum(int(e["rows"]) for e in entries.values()),
            "plain_rows": sum(int(e["rows"]) - int(e["plain_from"]) for e in entries.values()),
            "direct_rows": sum(int(e["plain_from"]) - int(e["direct_from"]) for e in entries.values()),
            "seconds": round(time.monotonic() - t0, 3)}


def _old_entries(st: Store, version: str) -> dict:
    """The day entries of ``st``'s ``_sums.json`` when it is of sums ``version``, else {} (none,
    unreadable, or of another version)."""
    try:
        old = json.loads((st.dir / P.SUMS_MANIFEST).read_text())
        old = old["days"] if isinstance(old, dict) and old.get("version") == version else {}
    except (OSError, ValueError, KeyError, TypeError):
        old = {}
    return old if isinstance(old, dict) else {}


def _day_runs(con, days: list[str], paths: dict) -> dict[int, dict[int, tuple[int, int, int]]]:
    """Each day's runs as its file holds them now: ``{day index: {category: (rows, first file
    row, last file row)}}``, the categories of :func:`_category_sql` (a day is sorted when each
    run's rows are where its counts put them). Leaves in ``con`` view ``days_rows`` (every
    row of the day files with ``i``, its day's index, ``d0``, its midnight, epoch s, ``fr``, its
    row in its file, and ``k``, :data:`KEY`) and table ``groups`` (the keys held by several
    rows), which :func:`_categories` reads."""
    if not days:
        return {}
    for d in days:   # (the scan reads a column a file lacks as NULL: another file in a day's place is named)
        with InputError.reading(paths[d], "a day file of the store (Parquet)", pa.ArrowException):
            check_columns(paths[d], pq.read_schema(paths[d]).names, DAY_COLUMNS, "a day file of the store")
    # one scan of every day file (a UNION of one read per file plans slowly past a few
    # hundred days), each row with its day by its file's name
    con.execute("CREATE TEMP TABLE day_index(path VARCHAR, i INTEGER, d0 DOUBLE)")
    con.executemany("INSERT INTO day_index VALUES (?, ?, ?)",
                    [(str(paths[d]), i, P._epoch(f"{d}T00:00:00Z")) for i, d in enumerate(days)])
    files = ", ".join(f"'{P._q(str(paths[d]))}'" for d in days)
    con.execute(f"""CREATE TEMP VIEW days_rows AS
        SELECT x.i, x.d0, r.file_row_number AS fr, {KEY} AS k, r.* EXCLUDE (filename, file_row_number)
        FROM read_parquet([{files}], filename = true, file_row_number = true, hive_partitioning = false,
                          union_by_name = true) r
        JOIN day_index x ON x.path = r.filename""")
    # the keys held by several rows, and whether they are copies of one finished row over
    # consecutive stored days (``direct``; ``i1`` the last of those days)
    # (rows per key and day first: plain GROUP BYs, which DuckDB spills past its memory limit,
    # where a count(DISTINCT) over every row of a year does not fit)
    con.execute("""CREATE TEMP TABLE ks AS SELECT k, sum(c) AS n, count(*) AS nd, min(i) AS i0, max(i) AS i1
                    FROM (SELECT k, i, count(*) AS c FROM days_rows GROUP BY k, i)
                    GROUP BY k HAVING sum(c) > 1""")
    content = ", ".join(f'"{c}"' for c in CONTENT)
    # (copies are the same when their contents' 64-bit hashes are: fixed-size aggregate states,
    # which spill, where a count(DISTINCT row(...)) of a year's keys does not fit in 2GB; two
    # different copies of one job with one hash: a chance of 2**-64)
    # (a copy pulled later than the next day's copy: the latest copy read is not the
    # last one, a NULL pull being the latest, as the period report ranks them)
    # (each pass its own table: each has the whole memory limit)
    con.execute(f"""CREATE TEMP TABLE ks_same AS
        SELECT k, min(hash(row({content}))) = max(hash(row({content}))) AS same
        FROM days_rows SEMI JOIN ks USING (k) GROUP BY k""")
    con.execute("""CREATE TEMP TABLE ks_late AS
        SELECT DISTINCT k FROM (
            SELECT k, p, lead(p) OVER (PARTITION BY k ORDER BY i) AS np
            FROM (SELECT k, i, coalesce(epoch_us(pulled_at::TIMESTAMPTZ), 9223372036854775807) AS p
                  FROM days_rows SEMI JOIN ks USING (k)))
        WHERE p > np""")
    con.execute("""CREATE TEMP TABLE groups AS
        SELECT ks.k, ks.i1, coalesce(c.same, false) AND late.k IS NULL AND ks.n = ks.nd
               AND ks.i1 - ks.i0 + 1 = ks.nd AS direct
        FROM ks LEFT JOIN ks_same c ON c.k = ks.k LEFT JOIN ks_late late ON late.k = ks.k""")
    for t in ("ks", "ks_same", "ks_late"):   # (held in the memory limit the sums' passes need)
        con.execute(f"DROP TABLE {t}")
    # each day's runs as its file holds them now: sorted when each run's rows are
    # where its counts put them
    got = con.execute(f"""SELECT i, cat, count(*), min(fr), max(fr) FROM (
            SELECT i, fr, {_category_sql('i', 'd0')} AS cat FROM days_rows r LEFT JOIN groups g USING (k))
        GROUP BY i, cat""").fetchall()
    runs: dict[int, dict[int, tuple[int, int, int]]] = {}
    for i, cat, n, lo, hi in got:
        runs.setdefault(int(i), {})[int(cat)] = (int(n), int(lo), int(hi))
    return runs


def _categories(con, days: list[int]) -> dict[int, tuple[np.ndarray, np.ndarray, bool]]:
    """Of the days ``days`` (indexes of :func:`_day_runs`' view ``days_rows``): ``{i: (file
    rows in run order, their categories, whether a key of runs 2-4 is not a number)}``, from one
    query."""
    if not days:
        return {}
    got = con.execute(f"""SELECT i, fr, {_category_sql('i', 'd0')} AS cat,
                                 NOT coalesce(TRY_CAST(key_id AS BIGINT) BETWEEN 0 AND 1099511627775, false) AS txt
                          FROM days_rows r LEFT JOIN groups g USING (k)
                          WHERE i IN ({', '.join(str(int(i)) for i in days)})
                          ORDER BY i, cat, fr""").fetchnumpy()
    i = np.asarray(got["i"], dtype=np.int64)
    fr = np.asarray(got["fr"], dtype=np.int64)
    cat = np.asarray(got["cat"], dtype=np.int64)
    txt = np.asarray(got["txt"], dtype=bool)
    out = {}
    for d in days:
        lo, hi = np.searchsorted(i, d), np.searchsorted(i, d, side="right")
        c = cat[lo:hi]
        out[int(d)] = (fr[lo:hi], c, bool(txt[lo:hi][c >= DIRECT_LAST].any()))
    return out


def summarize(store_root, cluster: str = "", progress=None, threads: int | None = None,
              memory_limit: str | None = None, temp_dir: str | None = None) -> dict:
    """Bring the day sums of store cluster ``cluster`` ("" is ``_default``) up to date: each day
    file (with its steps file and manifest entry, as the period report reads a day) whose rows
    are not in the runs they belong to now, or whose sums are missing, of another version or
    stale, is sorted and summed again; the others are left as they are. ``progress``: a
    callable told each day summed.

    Returns ``{"days", "summed", "rows", "plain_rows", "direct_rows", "seconds"}``: day files
    in the cluster, days summed now, rows in them, and of them the plain and direct ones (the
    module's docstring). Files are replaced atomically; an interrupted run leaves files that
    no longer match ``_sums.json`` (the period report then reads the rows; the next run
    finishes). Raises :class:`~slurmkit.errors.InputError` naming a day file (or the store's
    manifest) that cannot be read, :class:`~slurmkit.errors.UsageError` when a pass does not fit
    in ``memory_limit`` (DuckDB's, default the period report's 2GB; spilled to ``temp_dir``);
    ``OSError`` when the sums cannot be written."""
    import duckdb

    t0 = time.monotonic()
    st = Store(store_root, cluster)
    if not st.dir.is_dir():
        return _counts(0, 0, {}, t0)
    days = P.summable_days(st)
    version = P.sums_version()
    old = _old_entries(st, version)
    paths = {d: st.day_files(d)[0] for d in days}
    if old and set(old) == set(days) and all(P.day_entry_unchanged(old[d], paths[d]) for d in days):
        # (no day file changed since: the runs and sums stand)
        return _counts(len(days), 0, old, t0)
    con = P.connect(memory_limit or P.DEFAULT_MEMORY_LIMIT, temp_dir, threads=threads)
    entries, summed = {}, 0
    try:
        runs = _day_runs(con, days, paths)
        batch, held = [], 0

        def flush():
            nonlocal batch, held
            if batch:
                for day, e in _sum_batch(con, st.cluster, batch).items():
                    entries[day].update(e)
            batch, held = [], 0

        plan = []   # (day index, in order, run bounds) of the days to sort and sum
        for i, d in enumerate(days):
            r = runs.get(i, {})
            bounds, at = [], 0
            for cat in range(4):
                bounds.append(at)
                at += r.get(cat, (0,))[0]
            bounds.append(at)
            in_order = all(bounds[c] <= r[c][1] and r[c][2] < bounds[c + 1] for c in r)
            e = old.get(d)
            keep = (in_order and P.day_entry_unchanged(e, paths[d]) and e.get("rows") == at
                    and [e.get("direct_from"), e.get("earlier_from"), e.get("plain_from")] == bounds[1:4])
            if keep:
                entries[d] = e
            else:
                plan.append((i, in_order, bounds))
        if plan:
            # (first the days about to change leave the manifest: a run cut off midway
            # leaves the cluster's sums unused, never a day's rows both summed and read)
            atomic_write(st.dir / P.SUMS_MANIFEST, json.dumps(
                {"version": version, "days": {k: v for k, v in old.items() if k in entries}}))
        cats: dict = {}
        for n, (i, in_order, bounds) in enumerate(plan):
            d = days[i]
            if i not in cats:
                # (the rows' runs of the next days to sort, up to BATCH_ROWS rows, from one query)
                cats.clear()
                group, rows = [], 0
                for j, _, b in plan[n:]:
                    if group and rows + b[4] > BATCH_ROWS:
                        break
                    group.append(j)
                    rows += b[4]
                cats.update(_categories(con, group))
            entries[d], plain = _sort_day(d, paths[d], in_order and _groups_split(paths[d], bounds), cats.pop(i))
            batch.append((d, paths[d], plain))
            held += plain.num_rows
            summed += 1
            if held >= BATCH_ROWS:
                flush()
            if progress:
                progress(f"day {d}: {entries[d]['plain_from']:,} of {entries[d]['rows']:,} rows to read "
                         "by the period report, the others summed")
        flush()
    except duckdb.OutOfMemoryException:
        raise P.memory_limit_error(memory_limit or P.DEFAULT_MEMORY_LIMIT, "summing the days") from None
    except (duckdb.Error, pa.ArrowException) as exc:
        raise P.store_read_error(exc, store_root, list(paths.values())) from None
    finally:
        con.close()
    atomic_write(st.dir / P.SUMS_MANIFEST, json.dumps({"version": version, "days": entries}, indent=1, sort_keys=True))
    return _counts(len(days), summed, entries, t0)


#: Plain rows summed together (one query for many days; a bound on the memory held).
BATCH_ROWS = 500_000


def _sort_day(day: str, path: Path, in_place: bool, runs_of: tuple) -> tuple[dict, object]:
    """Sort one day file into its runs (each its own row group; ``in_place``: it is already),
    ``runs_of`` its rows' runs (:func:`_categories`). Returns its ``_sums.json`` entry (but
    ``elig``) and its plain rows (a pyarrow table, for :func:`_sum_batch`)."""
    order, cats, textual = runs_of
    table = pq.read_table(path)
    n = table.num_rows
    runs = [table.take(pa.array(order[cats == c], pa.int64())) for c in range(4)]
    if not in_place:
        def write(tmp):
            with pq.ParquetWriter(tmp, table.schema) as w:
                for part in runs:
                    if part.num_rows:
                        w.write_table(part)
                if not n:
                    w.write_table(table)

        atomic_write_with(path, write)
    at = [0]
    for part in runs:
        at.append(at[-1] + part.num_rows)
    size, mtime = P.file_stamp(path)
    return ({"size": size, "mtime_ns": mtime, "rows": int(n), "direct_from": at[1], "earlier_from": at[2],
             "plain_from": at[3], "textual": textual}, runs[PLAIN])


def _sum_batch(con, cluster: str, batch: list[tuple[str, Path, object]]) -> dict[str, dict]:
    """Write the sums of ``batch`` (``[(day, allocs.parquet, its plain rows)]``): table
    ``fine0`` (:func:`slurmkit.report.period.fine0_sql`) over them, each day its own window,
    then each day's groups as window 0 into its ``_sums.parquet``. Returns per day its entry's
    ``elig`` (a plain row has Eligible) and the sums file's ``sums_size`` and ``sums_mtime_ns``."""
    sub = con.cursor()   # (its own temp tables; the database's settings)
    try:
        # (one table: the days' files may type a column apart, e.g. one with no value in a day)
        plain = pa.concat_tables([_plain_types(t).append_column(
            "_fday", pa.array([P._epoch(f"{day}T00:00:00Z")] * t.num_rows, pa.float64())) for day, _, t in batch],
            promote_options="permissive")
        sub.register("p", plain)
        sub.execute(f"""CREATE TEMP VIEW single AS SELECT '{P._q(cluster)}' AS sc, _fday AS fday,
                               {P._columns(plain.column_names)},
                               TRY_CAST(key_id AS BIGINT) AS kn, 0::BIGINT AS jk, NULL::BIGINT AS rk FROM p""")
        sub.execute("CREATE TEMP VIEW several AS SELECT * FROM single WHERE false")
        # (the plain rows' steps' figures: energy, memory, CPU time, GPU utilization)
        P._load_steps(sub, {cluster: [str(path.parent / "steps.parquet") for _, path, _ in batch]}, False, hive=False)
        sub.execute("CREATE TEMP TABLE multi_rows(rk BIGINT)")
        sub.execute(f"CREATE TEMP TABLE clusters_seen AS SELECT '{P._q(cluster)}' AS sc, false AS textual, "
                    "false AS elig")
        # (a plain row is inside its day: it joins its day's window only)
        P._build_rows(sub, [(j, P._epoch(f"{day}T00:00:00Z"), P._epoch(f"{day}T00:00:00Z") + 86400, "")
                            for j, (day, _, _) in enumerate(batch)], 0.0, None, clip=False)
        nb = len(P._FLAGS)
        sums = sub.sql(f"""SELECT coalesce(wid, fl >> {nb}) AS _day, * REPLACE (
                               CASE WHEN fl IS NULL THEN NULL ELSE fl & {(1 << nb) - 1} END AS fl,
                               CASE WHEN wid IS NULL THEN NULL ELSE 0 END AS wid)
                           FROM ({P.fine0_sql()})""").to_arrow_table()
    finally:
        sub.close()
    out = {}
    for j, (day, path, plain) in enumerate(batch):
        mine = sums.filter(pc.equal(sums["_day"], j)).drop_columns(["_day"])
        atomic_write_with(path.parent / P.SUMS_FILE, lambda tmp, t=mine: pq.write_table(t, tmp))
        size, mtime = P.file_stamp(path.parent / P.SUMS_FILE)
        out[day] = {"elig": bool(plain.num_rows) and plain["eligible"].null_count < plain.num_rows,
                    "sums_size": size, "sums_mtime_ns": mtime}
    return out


def _plain_types(table):
    """``table`` with its text columns as large strings (pandas' categories are dictionaries in
    one day's file and strings in another's): tables of several days concatenate."""
    cols = []
    for name, col in zip(table.column_names, table.columns):
        if pa.types.is_dictionary(col.type):
            col = col.cast(col.type.value_type)
        if pa.types.is_string(col.type):
            col = col.cast(pa.large_string())
        cols.append(col)
    return pa.table(cols, names=table.column_names)


def _groups_split(path: Path, bounds: list[int]) -> bool:
    """True when each non-empty run of ``path`` (``bounds``: where each starts, then the end)
    starts a row group (the period report reads a run without the others)."""
    md = pq.ParquetFile(path).metadata
    starts, at = set(), 0
    for g in range(md.num_row_groups):
        starts.add(at)
        at += md.row_group(g).num_rows
    return all(bounds[c] in starts for c in range(4) if bounds[c + 1] > bounds[c])
