"""Incremental Parquet store of sacct rows: a Hive-partitioned Parquet dataset, one folder per
cluster and UTC day pulled.

Layout (docs/report.md, "The store"; other engines read it as it is: Spark, Trino, DuckDB)::

    <root>/cluster=<name>/day=<YYYY-MM-DD>/allocs.parquet   the day's typed allocation rows
    <root>/cluster=<name>/day=<YYYY-MM-DD>/steps.parquet    the day's typed step rows
    <root>/cluster=<name>/_manifest.json                    day -> {"pulled_at", "final", "rows", "dq"
                                                             (+ "time_zone", "time_zone_given": report store)}
    <root>/cluster=<name>/day=<YYYY-MM-DD>/_sums.parquet    the period report's day sums, and
    <root>/cluster=<name>/_sums.json                        their manifest (slurmkit.report.day_sums,
                                                             which also orders a day file's rows)
    <root>/cluster=<name>/_weeks/<YYYY-Www>.parquet         weekly aggregates (trends)

The Parquet files are the frames of :func:`slurmkit.accounting.frame.jobs_frame` (columns in
its docstring) plus ``pulled_at`` (timestamp, UTC: when that day was pulled), written with
pyarrow. The ``cluster`` partition is the store's cluster name (``_default`` for ""); the
files keep sacct's own Cluster column, which an engine reading the partitions sees replaced by
the folder's value. Names starting with ``_`` are not data for Hive, Spark or Trino.

A day is final once it was pulled more than ``SETTLE_S`` after it ended and none of its rows is
still running or pending; only non-final days are pulled again, so a weekly run re-reads only
recent days. Running jobs are provisional and re-pulled.

Rows are keyed by (cluster, JobIDRaw, Submit, Start), a step row also by its step name; a job
running over midnight is in each day's pull. When several days (or pulls) hold the same key,
:meth:`Store.load` keeps the copy from the latest pull (ties: the later day). A live pull
replaces its day (:meth:`Store.save_day`: sacct's whole day); a capture is merged into each
day by that key (:func:`fill_from_capture`: jobs added, later copies replacing earlier ones,
the store's other jobs kept).

The layout before this one (``<root>/<cluster>/<YYYY-MM-DD>.parquet``, ``.steps.parquet``,
``manifest.json``, ``weeks/``) is moved into this one the first time a :class:`Store` is
opened on it (:func:`migrate`), file by file with ``os.replace``: an interrupted move is
finished by the next open.

Weekly aggregates: one small table per ISO week whose report was built
(:meth:`Store.save_week`): a row per account and per partition with its jobs, GPU-, CPU-hours,
wasted and provisional GPU-hours and kWh (:data:`WEEK_COLUMNS`). Trends over N weeks read N
such tables (:meth:`Store.load_weeks`), never the rows again. A week built again (a later run,
its running jobs since finished) replaces its table.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from slurmkit.accounting.frame import ALLOC_KEY, STEP_KEY, JobRows
from slurmkit.accounting.quality import SAME_ROW_PULL, DataQuality
from slurmkit.atomicfile import atomic_write, atomic_write_with
from slurmkit.errors import InputError

#: Seconds after a day's end before its pull can be final (accounting reaches slurmdbd late).
SETTLE_S = 3600
OPEN_STATES = ("RUNNING", "PENDING", "REQUEUED", "SUSPENDED", "COMPLETING", "CONFIGURING",
               "RESIZING", "REQUEUE_HOLD", "REQUEUE_FED", "SIGNALING", "STAGE_OUT")


#: The columns of a weekly aggregate table (:meth:`Store.save_week`): ``kind`` is ``account``
#: or ``partition``, ``name`` its value; hours are inside the ISO week; ``provisional`` is True
#: when the week's report still had running jobs.
WEEK_COLUMNS = ("week", "kind", "name", "jobs", "gpu_hours", "cpu_hours", "wasted_gpu_hours",
                "provisional_gpu_hours", "energy_kwh", "provisional", "built_at")


#: The columns a day's allocation / step file must have (it has more; one written by an older
#: version may lack others): without them it is another file in its place.
DAY_COLUMNS = (*ALLOC_KEY, "state", "end")
STEP_FILE_COLUMNS = tuple(STEP_KEY)


def check_columns(path, names, want, what: str) -> None:
    """Raise :class:`~slurmkit.errors.InputError` naming ``path`` when its column ``names``
    lack any of ``want`` (``what``: what the file should be, "a day file of the store")."""
    lost = [c for c in want if c not in names]
    if lost:
        raise InputError(path, None, f"not {what}: it has no {', '.join(lost)} column"
                                     f"{'s' if len(lost) > 1 else ''} (another file in its place?)")


def cluster_dir(root, cluster: str = "") -> Path:
    """``<root>/cluster=<name>`` (``""`` is stored as ``_default``)."""
    return Path(root) / f"cluster={cluster or '_default'}"


def clusters(root) -> list[str]:
    """The cluster names held by the store at ``root`` (its ``cluster=<name>`` folders, and
    old-layout folders, which :class:`Store` migrates), sorted; [] when there is none."""
    root = Path(root)
    if not root.is_dir():
        return []
    names = set()
    for p in root.iterdir():
        if p.is_dir() and p.name.startswith("cluster="):
            names.add(p.name[len("cluster="):])
        elif p.is_dir() and (p / "manifest.json").exists():
            names.add(p.name)
    return sorted(names)


def migrate(root, cluster: str = "") -> int:
    """Move the old layout of ``cluster`` (``<root>/<cluster>/<day>.parquet``,
    ``<day>.steps.parquet``, ``manifest.json``, ``weeks/``) into the Hive layout; the
    manifest last, merged into the new one (a day already in the new layout keeps its entry).
    Returns the files moved (0 when there is no old layout). Idempotent: an interrupted move
    is finished by the next call."""
    old = Path(root) / (cluster or "_default")
    old_man = old / "manifest.json"
    if not old_man.exists():
        return 0
    new = cluster_dir(root, cluster)
    moved = 0
    for f in sorted(old.glob("????-??-??*.parquet")):
        m = re.fullmatch(r"(\d{4}-\d{2}-\d{2})(\.steps)?\.parquet", f.name)
        if not m:
            continue
        dest = new / f"day={m.group(1)}" / ("steps.parquet" if m.group(2) else "allocs.parquet")
        dest.parent.mkdir(parents=True, exist_ok=True)
        if not dest.exists():
            os.replace(f, dest)
            moved += 1
        else:
            f.unlink()   # the new layout already holds a later pull of that day
    if (old / "weeks").is_dir():
        (new / "_weeks").mkdir(parents=True, exist_ok=True)
        for f in sorted((old / "weeks").glob("*.parquet")):
            dest = new / "_weeks" / f.name
            if not dest.exists():
                os.replace(f, dest)
                moved += 1
            else:
                f.unlink()
        _rmdir(old / "weeks")
    man = read_manifest(old_man)
    new_man_path = new / "_manifest.json"
    man.update(read_manifest(new_man_path, missing_ok=True))
    new.mkdir(parents=True, exist_ok=True)
    atomic_write(new_man_path, json.dumps(man, indent=1, sort_keys=True))
    old_man.unlink()
    _rmdir(old)
    return moved


def read_manifest(path, missing_ok: bool = False) -> dict:
    """A store manifest file (``_manifest.json``, or an old layout's ``manifest.json``): day
    (``YYYY-MM-DD``) -> entry (an object). ``missing_ok``: {} when the file does not exist.
    Raises :class:`~slurmkit.errors.InputError` naming the file when it cannot be read, is not
    JSON, or is not such an object."""
    path = Path(path)
    with InputError.reading(path, "a store manifest (JSON: day -> entry)"):
        try:
            man = json.loads(path.read_bytes().decode("utf-8"))
        except FileNotFoundError:
            if missing_ok:
                return {}
            raise
    if not isinstance(man, dict):
        raise InputError(path, None, f"not a store manifest (JSON: day -> entry): a JSON {type(man).__name__}")
    for day, entry in man.items():
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", day) or not isinstance(entry, dict):
            raise InputError(path, None, "not a store manifest (JSON: day -> entry)", key=day)
        for key, want, what in _ENTRY_TYPES:
            value = entry.get(key, None)
            if key in entry and not want(value):
                raise InputError(path, None, f"want {what}, got {json.dumps(value)[:40]}", key=f"{day}.{key}")
    return man


def _counts(v) -> bool:
    return isinstance(v, dict) and all(isinstance(n, int) and not isinstance(n, bool) for n in v.values())


#: A manifest entry's keys as :meth:`Store.save_day` writes them: (key, test, what is wanted).
_ENTRY_TYPES = (
    ("pulled_at", lambda v: v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)),
     "epoch seconds"),
    ("final", lambda v: isinstance(v, bool), "true or false"),
    ("rows", lambda v: isinstance(v, int) and not isinstance(v, bool), "a row count"),
    ("dq", lambda v: isinstance(v, dict) and isinstance(v.get("rows_read", 0), int)
     and _counts(v.get("skipped", {})) and _counts(v.get("repaired", {})),
     'data quality {"rows_read", "skipped", "repaired"}'),
    ("time_zone", lambda v: isinstance(v, str), "a zone name"),
    ("time_zone_given", lambda v: isinstance(v, bool), "true or false"),
    ("times_local", lambda v: isinstance(v, bool), "true or false"),
)


def _rmdir(path: Path) -> None:
    try:
        path.rmdir()
    except OSError:   # not empty: files that are not the store's stay where they are
        pass


class Store:
    """A store rooted at ``root`` (created on first write), cluster ``cluster`` ("" is
    stored as ``_default``); its folder is ``dir`` (``<root>/cluster=<name>``). An old
    layout of that cluster is migrated when the store is opened (:func:`migrate`)."""

    def __init__(self, root, cluster: str = ""):
        self.root = Path(root)
        self.cluster = cluster or "_default"
        self.dir = cluster_dir(self.root, cluster)
        migrate(self.root, cluster)

    def _manifest_path(self) -> Path:
        return self.dir / "_manifest.json"

    def manifest(self) -> dict:
        """The manifest (day string -> entry), {} when the store is new. Raises
        :class:`~slurmkit.errors.InputError` naming ``_manifest.json`` when it cannot be read or
        is not a JSON object of ``YYYY-MM-DD`` -> object entries (never read as empty: a write
        over it would lose the days it lists)."""
        path = self._manifest_path()
        man = read_manifest(path, missing_ok=True)
        if not man and not path.exists() and self.dir.is_dir():
            held = sorted(p.parent.name for p in self.dir.glob("day=*/allocs.parquet"))
            if held:   # (day files the manifest would list: without it every day reads as never pulled)
                raise InputError(path, None, f"missing, while {len(held)} day folder(s) hold day files "
                                             f"({held[0]} .. {held[-1]}): restore it, or remove the day folders "
                                             "and store the days again")
        return man

    def lost_files(self, days) -> list[Path]:
        """The day files of ``days`` (dates, datetimes or ``YYYY-MM-DD``) that the manifest lists
        but that are not there (removed or copied in part): those days are read as not stored."""
        man = self.manifest()
        names = [d if isinstance(d, str) else f"{d:%Y-%m-%d}" for d in days]
        return [p for n in names if n in man for p in self.day_files(n) if not p.exists()]

    def needs_pull(self, day: dt.datetime, now: float | None = None) -> bool:
        """True when ``day`` (its UTC midnight) is absent or not final."""
        entry = self.manifest().get(f"{day:%Y-%m-%d}")
        return not (entry and entry.get("final"))

    def save_day(self, day: dt.datetime, rows: JobRows, dq: DataQuality,
                 now: float | None = None, record: dict | None = None) -> Path:
        """Write one day's rows (replacing an earlier pull) and update the manifest; ``record``
        (e.g. ``{"time_zone", "time_zone_given"}`` of a fill from captures) is kept in the day's
        manifest entry. Returns the allocation rows' file."""
        now = time.time() if now is None else now
        name = f"{day:%Y-%m-%d}"
        man = self.manifest()   # (read first: refused when damaged, before a file is replaced)
        self._path(name).parent.mkdir(parents=True, exist_ok=True)
        pulled = pd.Timestamp(now, unit="s", tz="UTC")
        for frame, path in ((rows.steps, self._path(name, "steps")), (rows.allocs, self._path(name))):
            table = pa.Table.from_pandas(frame.assign(pulled_at=pulled), preserve_index=False)
            atomic_write_with(path, lambda tmp, table=table: pq.write_table(table, tmp))
        path = self._path(name)
        allocs = rows.allocs
        day_end = day.replace(hour=0, minute=0, second=0, microsecond=0) + dt.timedelta(days=1)
        open_rows = bool(allocs["state"].isin(OPEN_STATES).any() or allocs["end"].isna().any()) if len(allocs) else False
        final = (now - day_end.timestamp()) > SETTLE_S and not open_rows
        man[name] = {"pulled_at": now, "final": final, "rows": int(len(rows)),
                     "dq": {"rows_read": dq.rows_read, "skipped": dict(dq.skipped),
                            "repaired": dict(dq.repaired)}, **(record or {})}
        atomic_write(self._manifest_path(), json.dumps(man, indent=1, sort_keys=True))
        return path

    def _path(self, name: str, kind: str = "allocs") -> Path:
        return self.dir / f"day={name}" / f"{kind}.parquet"

    def day_files(self, day) -> tuple[Path, Path]:
        """``(allocs.parquet, steps.parquet)`` of ``day`` (a date, datetime or ``YYYY-MM-DD``)."""
        name = day if isinstance(day, str) else f"{day:%Y-%m-%d}"
        return self._path(name), self._path(name, "steps")

    def load(self, days: list[dt.datetime], steps: bool = True) -> tuple[JobRows, DataQuality]:
        """Rows of the given days (one copy per key, the latest pull) and their data quality
        (repeats across days are counted as skipped: ``same row in another day's pull``).
        Days not in the store are ignored. ``steps=False``: the step rows are not read (an
        empty step frame of the files' columns: for what needs the allocations only). Raises
        :class:`~slurmkit.errors.InputError` naming a day file (or the manifest) that cannot be
        read."""
        man = self.manifest()
        parts, dq = [], DataQuality()
        for day in days:
            name = f"{day:%Y-%m-%d}"
            if name not in man or not self._path(name).exists() or not self._path(name, "steps").exists():
                continue
            parts.append(self.read_day(name, steps))
            d = man[name].get("dq", {})
            dq.rows_read += int(d.get("rows_read", 0))
            for k, v in d.get("skipped", {}).items():
                dq.skip(k, int(v))
            dq.repaired.update(Counter({k: int(v) for k, v in d.get("repaired", {}).items()}))
        rows = JobRows.concat(parts)
        rows = JobRows(rows.allocs.sort_values("pulled_at", kind="stable"),
                       rows.steps.sort_values("pulled_at", kind="stable")) if parts else rows
        rows = rows.drop_repeats(dq, str(self.dir), keep="last", reason=SAME_ROW_PULL,
                                 list_rows=False)
        if len(rows.allocs):   # (a pending copy of a job a later pull saw started)
            pulled = pd.to_datetime(rows.allocs["pulled_at"], utc=True, errors="coerce")
            secs = pulled.dt.tz_localize(None).to_numpy("datetime64[ns]").view(np.int64) / 1e9
            rows = rows.drop_started_later(dq, np.where(pulled.notna().to_numpy(), secs, np.nan))
        return JobRows(rows.allocs.drop(columns=["pulled_at"], errors="ignore").reset_index(drop=True),
                       rows.steps.drop(columns=["pulled_at"], errors="ignore").reset_index(drop=True)), dq

    def read_day(self, name: str, steps: bool = True) -> JobRows:
        """The rows of day ``name`` (``YYYY-MM-DD``) as stored, with their ``pulled_at`` (text
        columns as pandas' Arrow-backed strings). ``steps=False``: an empty step frame of the
        file's columns. Raises :class:`~slurmkit.errors.InputError` naming a day file that
        cannot be read or lacks the columns a day file has (another file in its place)."""
        def read(path, rows=True, want=DAY_COLUMNS):
            with InputError.reading(path, "a day file of the store (Parquet)", pa.ArrowException, ValueError):
                table = pq.read_table(path) if rows else pq.read_schema(path).empty_table()
                check_columns(path, table.column_names, want, "a day file of the store")
                return table.to_pandas(
                    types_mapper=lambda t: pd.StringDtype("pyarrow") if t in (pa.string(), pa.large_string()) else None)

        return JobRows(read(self._path(name)), read(self._path(name, "steps"), steps, STEP_FILE_COLUMNS))

    def held(self, name: str, man: dict | None = None) -> bool:
        """True when day ``name`` is in the manifest (``man``, else read) with both its files."""
        man = self.manifest() if man is None else man
        return name in man and self._path(name).exists() and self._path(name, "steps").exists()

    def forget(self, names) -> list[str]:
        """Remove days ``names`` (``YYYY-MM-DD``) from the store: their manifest entries first
        (a day no longer listed is not read), then their folders' files (day files and day
        sums). Returns the days that were held (listed, or with a folder). The day sums notice
        (:mod:`slurmkit.report.day_sums`: a day gone is a change)."""
        man = self.manifest()
        gone = [n for n in names if n in man or (self.dir / f"day={n}").is_dir()]
        if not gone:
            return []
        for n in gone:
            man.pop(n, None)
        self.write_manifest(man)
        for n in gone:
            folder = self.dir / f"day={n}"
            if folder.is_dir():
                for f in folder.iterdir():
                    if f.is_file() and (f.suffix == ".parquet" or f.name.startswith(".")):
                        f.unlink()
                _rmdir(folder)
        return gone

    def write_manifest(self, man: dict) -> None:
        """Replace the manifest with ``man`` (day -> entry), atomically."""
        self.dir.mkdir(parents=True, exist_ok=True)
        atomic_write(self._manifest_path(), json.dumps(man, indent=1, sort_keys=True))

    def has_days(self, days: list[dt.datetime]) -> bool:
        """True when every day is in the store (week-over-week deltas need the whole week)."""
        man = self.manifest()
        return all(f"{d:%Y-%m-%d}" in man for d in days)

    def _week_path(self, week: str) -> Path:
        return self.dir / "_weeks" / f"{week}.parquet"

    def save_week(self, week: str, table: pd.DataFrame, now: float | None = None) -> Path:
        """Write ISO week ``week`` (``2026-W01``)'s aggregate table (columns
        :data:`WEEK_COLUMNS` but ``week`` and ``built_at``, which are set here), replacing an
        earlier one. Returns its path."""
        now = time.time() if now is None else now
        path = self._week_path(week)
        path.parent.mkdir(parents=True, exist_ok=True)
        t = table.assign(week=week, built_at=float(now))
        t = t[[c for c in WEEK_COLUMNS]]
        atomic_write_with(path, lambda tmp: pq.write_table(pa.Table.from_pandas(t, preserve_index=False), tmp))
        return path

    def load_weeks(self, weeks: list[str]) -> pd.DataFrame:
        """The aggregate tables of ``weeks`` that are in the store, one after the other
        (:data:`WEEK_COLUMNS`); weeks never built are absent. Raises
        :class:`~slurmkit.errors.InputError` naming a week's file that cannot be read."""
        parts = []
        for w in weeks:
            if self._week_path(w).exists():
                with InputError.reading(self._week_path(w), "a weekly aggregate of the store (Parquet)",
                                        pa.ArrowException, ValueError):
                    table = pq.read_table(self._week_path(w))
                    check_columns(self._week_path(w), table.column_names, WEEK_COLUMNS, "a weekly aggregate")
                    parts.append(table.to_pandas())
        if not parts:
            return pd.DataFrame({c: pd.Series(dtype=object) for c in WEEK_COLUMNS})
        return pd.concat(parts, ignore_index=True)


def _day_pairs(rows: JobRows, until: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(alloc rows, their days, step rows, their days)``: every (row, UTC day) pair of the
    split :func:`by_day` describes (rows by position in ``rows``; days as epoch s of their
    midnight), ordered by day, then row."""
    a = rows.allocs
    if not len(a):
        z = np.zeros(0, np.int64)
        return z, z, z, z
    until_ts = pd.Timestamp(until, unit="s", tz="UTC")
    lo = a["start"].fillna(a["submit"]).fillna(a["end"])
    hi = a["end"].fillna(lo.where(lo > until_ts, until_ts))
    lo_s = lo.astype("int64").to_numpy() // 10**9
    d0 = lo_s // 86400 * 86400
    d1 = np.maximum(hi.astype("int64").to_numpy() // 10**9, lo_s) // 86400 * 86400
    n_days = (d1 - d0) // 86400 + 1
    arow = np.repeat(np.arange(len(a), dtype=np.int64), n_days)
    first = np.repeat(np.cumsum(n_days) - n_days, n_days)
    aday = np.repeat(d0, n_days) + (np.arange(len(arow), dtype=np.int64) - first) * 86400
    order = np.lexsort((arow, aday))
    arow, aday = arow[order], aday[order]
    # steps go with their allocation's identity (a requeued job's with each of its attempts)
    acode, scode = rows.identity()
    pairs = pd.DataFrame({"c": acode[arow], "day": aday}).drop_duplicates()
    s = pd.DataFrame({"c": scode, "row": np.arange(len(scode), dtype=np.int64)}).merge(pairs, on="c")
    s = s.sort_values(["day", "row"], kind="stable")
    return arow, aday, s["row"].to_numpy(np.int64), s["day"].to_numpy(np.int64)


def by_day(rows: JobRows, until: float) -> list[tuple[int, JobRows]]:
    """``[(day, JobRows)]``, days ascending: the allocation rows of ``rows`` (with their steps)
    in each UTC day (``day``: epoch s of its midnight) from Start (Submit, else End, when it
    never started) to End (a job with no End: to ``until``, epoch s), as one daily sacct pull
    per day (``sacct -S <day> -E <day+1>``) lists them: a job is in every day it overlaps, its
    step rows with it. Days with no row are absent. The one home of this split: the captures'
    fill (:func:`fill_from_capture`) and bench/report_period.py use it."""
    arow, aday, srow, sday = _day_pairs(rows, until)
    out = []
    days = np.unique(aday)
    ab = np.searchsorted(aday, days), np.searchsorted(aday, days, side="right")
    sb = np.searchsorted(sday, days), np.searchsorted(sday, days, side="right")
    for k, day in enumerate(days):
        out.append((int(day), JobRows(rows.allocs.iloc[arow[ab[0][k]:ab[1][k]]].reset_index(drop=True),
                                      rows.steps.iloc[srow[sb[0][k]:sb[1][k]]].reset_index(drop=True))))
    return out


#: The counts of a day in :func:`fill_from_capture`'s result (allocation rows; ``steps_``:
#: the same of step rows).
DAY_COUNTS = ("added", "replaced", "kept", "not_newer", "removed")


def _day_name(day: int) -> str:
    return f"{dt.datetime.fromtimestamp(day, dt.timezone.utc):%Y-%m-%d}"


def _merge_held(store: "Store", new: JobRows, span: list[int], held: list[int], names: dict, man: dict,
                record: dict | None, captured_days: set) -> tuple:
    """:func:`fill_from_capture`'s merge of the capture's rows ``new`` (a ``_day`` column) with
    the stored days ``held``: ``(merged rows of the days that change, counts per day, the days
    that change, allocation rows per stored day)``. Which rows change is read from the key
    columns of the stored days; the whole rows of the days that change only. Raises
    :class:`~slurmkit.errors.InputError` for days stored in another zone (:func:`_check_zones`)."""
    # which rows change, from the key columns of the stored days; then the whole rows of
    # the days that change only
    old = JobRows(_read_keys(store, [names[d] for d in held], held, ALLOC_KEY),
                  _read_keys(store, [names[d] for d in held], held, STEP_KEY, "steps"))
    with_rows = set(old.allocs["_day"].unique().tolist())
    _check_zones(store, man, record, [d for d in held if d in with_rows], names, captured_days)
    keys = JobRows(new.allocs[old.allocs.columns], new.steps[old.steps.columns])
    (keep_new, keep_old), counts, changed = _merge(keys, old, span, held)
    old_rows = dict(zip(*np.unique(old.allocs["_day"].to_numpy(np.int64), return_counts=True)))
    rewrite = [d for d in held if d in changed]
    if rewrite:
        full = JobRows.concat([JobRows(p.allocs.assign(_day=d), p.steps.assign(_day=d))
                               for d, p in ((d, store.read_day(names[d])) for d in rewrite)])
        sel = [np.isin(f["_day"].to_numpy(np.int64), rewrite) for f in (old.allocs, old.steps)]
        full = JobRows(full.allocs[keep_old[0][sel[0]]], full.steps[keep_old[1][sel[1]]])
    else:
        full = JobRows(new.allocs.iloc[0:0], new.steps.iloc[0:0])
    frames = []
    for old_f, new_f, keep in ((full.allocs, new.allocs, keep_new[0]), (full.steps, new.steps, keep_new[1])):
        new_f = new_f[keep & np.isin(new_f["_day"].to_numpy(np.int64), list(changed))]
        both = JobRows.concat([JobRows(old_f, old_f.iloc[0:0]), JobRows(new_f, new_f.iloc[0:0])]).allocs \
            if len(old_f) else new_f
        # each day's stored rows first, then this capture's (a stable sort by day)
        frames.append(both.iloc[np.argsort(both["_day"].to_numpy(np.int64), kind="stable")].reset_index(drop=True))
    merged = JobRows(*frames)
    return merged, counts, changed, old_rows


def _write_days(store: "Store", out: dict, merged: JobRows, tables: tuple, span: list[int], names: dict,
                counts: dict, changed: set, held_set: set, old_rows: dict, man: dict, as_of: float,
                replace: bool, record: dict | None) -> None:
    """:func:`fill_from_capture`'s writing: each day of ``span`` that changed gets its slice of
    the merged rows' Arrow ``tables`` (``((allocs, bounds), (steps, bounds))``) written and its
    manifest entry in ``man`` (written by the caller); ``out`` gets each day's counts and the
    lists ``written`` / ``final`` / ``unchanged``."""
    (atable, ab), (stable, sb) = tables
    is_open = merged.allocs["state"].isin(OPEN_STATES).to_numpy(bool) | merged.allocs["end"].isna().to_numpy(bool)
    for i, d in enumerate(span):
        name = names[d]
        c = counts.setdefault(d, {})
        n_a = int(ab[i + 1] - ab[i])
        entry = {k: c.get(k, 0) for k in DAY_COUNTS} | {f"steps_{k}": c.get(f"steps_{k}", 0) for k in DAY_COUNTS}
        entry["rows"] = n_a
        if d not in changed:
            entry.update(rows=int(old_rows.get(d, 0)), final=bool(man[name].get("final")), written=False)
            out["unchanged"].append(name)
            out["days"][name] = entry
            continue
        sl = slice(int(ab[i]), int(ab[i + 1]))
        pull_s = as_of if replace or d not in held_set else max(as_of, float(man[name].get("pulled_at") or 0.0))
        final = (pull_s - (d + 86400)) > SETTLE_S and not bool(is_open[sl].any())
        old_entry = man.get(name, {}) if not replace else {}
        old_dq = old_entry.get("dq", {}) if d in held_set else {}
        n_read = c.get("added", 0) + c.get("replaced", 0) + c.get("not_newer", 0)
        n_read += c.get("steps_added", 0) + c.get("steps_replaced", 0) + c.get("steps_not_newer", 0)
        path = store._path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        for table, b, p in ((stable, sb, store._path(name, "steps")), (atable, ab, path)):
            part = table.slice(int(b[i]), int(b[i + 1] - b[i]))
            atomic_write_with(p, lambda tmp, t=part: pq.write_table(t, tmp))
        man[name] = {**old_entry, "pulled_at": pull_s, "final": final, "rows": n_a + int(sb[i + 1] - sb[i]),
                     "dq": {"rows_read": int(old_dq.get("rows_read", 0)) + n_read,
                            "skipped": dict(old_dq.get("skipped", {})), "repaired": dict(old_dq.get("repaired", {}))},
                     **(record or {})}
        entry.update(final=final, written=True)
        out["days"][name] = entry
        out["written"].append(name)
        if final:
            out["final"].append(name)


def fill_from_capture(store: "Store", rows: JobRows, as_of: float, first_day: float | None = None,
                      last_day: float | None = None, replace: bool = False, record: dict | None = None,
                      now: float | None = None) -> dict:
    """Store captured sacct rows taken at ``as_of`` (epoch s, UTC) in ``store``'s days, as daily
    live pulls would have listed them: the rows split by :func:`by_day` (a job still without
    End runs to ``as_of``), every UTC day from ``first_day`` (epoch s; default: the first day a
    row is in) to the day of ``as_of`` (or of ``last_day``, epoch s, when earlier); a day inside
    that span with no row is stored too (the capture covers it: an empty day). Days starting
    at or after ``now`` (epoch s; None: no such limit) are not stored (``after_now``).

    Each day is merged with what the store holds for it, row by row, by the store's key (one
    copy per (cluster, JobIDRaw, Submit, Start), as :meth:`Store.load` and the period report
    read the store, :data:`~slurmkit.accounting.frame.ALLOC_KEY`; step rows by
    :data:`~slurmkit.accounting.frame.STEP_KEY`): a row the day lacks is added; a row it holds
    is replaced when this capture is a later pull (``as_of`` after the stored copy's
    ``pulled_at``), else kept (``not_newer``: a later or the same pull is stored); the store's
    rows this capture lacks are kept. A day whose rows do not change is not written. Storing
    the same capture twice changes nothing; two captures stored one after the other hold every
    job of both, whatever their order. ``replace``: the days of the span hold this capture's
    rows only (what the store held for them is dropped: ``removed``), and with ``last_day``
    after the day of ``as_of`` the store's days after it up to ``last_day`` are removed
    (:meth:`Store.forget`; ``forgotten``): the way to store again days stored in the wrong
    zone.

    A written day's manifest entry: ``pulled_at`` the latest pull of its rows, ``final`` when
    that is more than :data:`SETTLE_S` past the day's end and none of its rows is running or
    pending, ``rows``, ``dq`` (rows read: the stored count plus this capture's), and
    ``record`` (e.g. the zone of a fill from captures, ``{"time_zone", "time_zone_given",
    "times_local"}``) over the stored entry's.

    Returns ``{"written": [day], "final": [day] (written and final), "unchanged": [day],
    "after_now": [day], "forgotten": [day], "days": {day: {DAY_COUNTS and steps_<count>, "rows"
    (allocation rows after), "final", "written"}}}`` (days ``YYYY-MM-DD``). Raises
    :class:`~slurmkit.errors.InputError` naming the manifest, before anything is written, when
    days that both this capture and the store hold rows of were stored with times read in
    another zone than ``record``'s (``times_local`` captures only; merged, a job read in two
    zones would be two jobs: ``replace`` is the way), or naming a day file that cannot be
    read."""
    arow, aday, srow, sday = _day_pairs(rows, as_of)
    out = {"written": [], "final": [], "unchanged": [], "after_now": [], "forgotten": [], "days": {}}
    if not len(arow) and first_day is None:
        return out
    start = int(first_day // 86400 * 86400) if first_day is not None else int(aday[0])
    last = int(min(as_of, last_day if last_day is not None else as_of) // 86400 * 86400)
    span = list(range(start, last + 86400, 86400))
    out["after_now"] = [_day_name(d) for d in span if now is not None and d >= now]
    span = [d for d in span if now is None or d < now]
    man = store.manifest()
    beyond = []
    if replace and last_day is not None:
        beyond = [_day_name(d) for d in range(last + 86400, int(last_day // 86400 * 86400) + 86400, 86400)
                  if now is None or d < now]
    if not span:
        out["forgotten"] = store.forget([n for n in beyond if n in man])
        return out
    lo_day, hi_day = span[0], span[-1]
    a_in = (aday >= lo_day) & (aday <= hi_day)
    s_in = (sday >= lo_day) & (sday <= hi_day)
    pulled = pd.Timestamp(as_of, unit="s", tz="UTC")
    new = JobRows(rows.allocs.iloc[arow[a_in]].reset_index(drop=True).assign(pulled_at=pulled, _day=aday[a_in]),
                  rows.steps.iloc[srow[s_in]].reset_index(drop=True).assign(pulled_at=pulled, _day=sday[s_in]))
    names = {d: _day_name(d) for d in span}
    held = [d for d in span if store.held(names[d], man)]
    held_set = set(held)
    n_new = _per_day(new, span)
    old_rows = {}   # day -> allocation rows the store holds (days not written)
    if replace or not held:
        merged, counts = new, {d: {"added": n_new[0][i], "steps_added": n_new[1][i]} for i, d in enumerate(span)}
        if replace:
            for d in held:
                a_old, s_old = (pq.ParquetFile(p).metadata.num_rows for p in store.day_files(names[d]))
                counts[d].update(removed=a_old, steps_removed=s_old)
        changed = set(span)
    else:
        merged, counts, changed, old_rows = _merge_held(store, new, span, held, names, man, record,
                                                        set(aday[a_in].tolist()))
    # the days' files: the merged rows, each day's in one slice (old rows first, then new)
    tables = []
    for frame in (merged.allocs, merged.steps):
        idx = ((frame["_day"].to_numpy(np.int64) - lo_day) // 86400)
        bounds = np.searchsorted(idx, np.arange(len(span) + 1))
        table = pa.Table.from_pandas(frame.drop(columns=["_day"]), preserve_index=False)
        tables.append((table, bounds))
    (atable, ab), (stable, sb) = tables
    _write_days(store, out, merged, ((atable, ab), (stable, sb)), span, names, counts, changed, held_set, old_rows,
                man, as_of, replace, record)
    store.write_manifest(man)
    out["forgotten"] = store.forget([n for n in beyond if n in man])
    return out


def _per_day(rows: JobRows, span: list[int]) -> tuple[list[int], list[int]]:
    """The rows of each day of ``span`` (a ``_day`` column): ``(allocation rows, step rows)``."""
    lo = span[0]
    return tuple([int(x) for x in np.bincount((f["_day"].to_numpy(np.int64) - lo) // 86400,
                                              minlength=len(span))[:len(span)]]
                 for f in (rows.allocs, rows.steps))


def _read_keys(store: "Store", names: list[str], days: list[int], key: list[str], kind: str = "allocs") -> pd.DataFrame:
    """The key columns (``key``), ``job_id`` and ``pulled_at`` of the ``kind`` files of days ``names``
    (their midnights ``days``, epoch s, in a ``_day`` column), one frame, the files' rows in
    order. Raises :class:`~slurmkit.errors.InputError` naming a file that cannot be read."""
    cols, parts = [*key, "job_id", "pulled_at"], []   # (job_id: what drop_repeats names a row by)
    for name, day in zip(names, days):
        path = store._path(name, kind)
        with InputError.reading(path, "a day file of the store (Parquet)", pa.ArrowException, ValueError):
            names_in = pq.read_schema(path).names
            check_columns(path, names_in, cols, "a day file of the store")
            t = pq.read_table(path, columns=cols)
        t = pa.table([c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c for c in t.columns],
                     names=t.column_names)
        parts.append(t.append_column("_day", pa.array(np.full(t.num_rows, day, np.int64))))
    table = pa.concat_tables(parts, promote_options="permissive") if parts else pa.table(
        {c: pa.array([], pa.string()) for c in cols} | {"_day": pa.array([], pa.int64())})
    return table.to_pandas(types_mapper=lambda t: pd.StringDtype("pyarrow")
                           if t in (pa.string(), pa.large_string()) else None)


def _merge(new: JobRows, old: JobRows, span: list[int], held: list[int]):
    """Merge ``new`` (this capture's rows: key columns, ``_day``, ``pulled_at``) into ``old``
    (the store's rows of the days ``held``, the same columns), day by day by the store's key
    (:meth:`JobRows.drop_repeats`: one copy per key, the latest pull; of two copies pulled at
    the same time the stored one). Returns ``((new rows kept, stored rows kept), counts, the
    days whose rows change)``: each a pair of masks (allocation rows, step rows) in the
    frames' order; ``counts`` ``{day: DAY_COUNTS and steps_*}``."""
    lo, n_days = span[0], len(span)
    both = JobRows.concat([new, old])
    acode, scode = both.identity()
    counts, changed = {d: {} for d in span}, {d for d in span if d not in set(held)}
    keep_new, keep_old = [], []
    for frame, code, n, pre in ((both.allocs, acode, len(new.allocs), ""), (both.steps, scode, len(new.steps), "steps_")):
        src = np.r_[np.zeros(n, np.int64), np.ones(len(frame) - n, np.int64)]          # 0 new, 1 stored
        didx = (frame["_day"].to_numpy(np.int64) - lo) // 86400
        frame = frame.assign(_pos=np.arange(len(frame), dtype=np.int64))
        # the latest pull last; of the same pull the stored copy last (kept: the day unchanged)
        order = frame["pulled_at"].sort_values(kind="stable", na_position="last").index.to_numpy()
        frame = frame.iloc[order].reset_index(drop=True)
        codes, none = code[order] * n_days + didx[order], np.zeros(0, np.int64)
        keyed = (JobRows(frame, frame.iloc[0:0], (codes, none)) if not pre else
                 JobRows(frame.iloc[0:0], frame, (none, codes)))
        kept = keyed.drop_repeats(DataQuality(), "store", keep="last", reason=SAME_ROW_PULL, list_rows=False)
        kept = kept.steps if pre else kept.allocs
        keep = np.zeros(len(frame), bool)
        keep[kept["_pos"].to_numpy(np.int64)] = True
        keep_new.append(keep[:n])
        keep_old.append(keep[n:])
        before = [np.bincount(didx[src == s], minlength=n_days) for s in (0, 1)]
        after = [np.bincount(didx[(src == s) & keep], minlength=n_days) for s in (0, 1)]
        for i, d in enumerate(span):
            replaced = int(before[1][i] - after[1][i])
            added = int(after[0][i]) - replaced
            counts[d].update({f"{pre}added": added, f"{pre}replaced": replaced, f"{pre}kept": int(after[1][i]),
                              f"{pre}not_newer": int(before[0][i] - after[0][i])})
            if added or replaced:
                changed.add(d)
    return (tuple(keep_new), tuple(keep_old)), counts, changed


def _check_zones(store: "Store", man: dict, record: dict | None, days: list[int], names: dict, new_days: set) -> None:
    """Raise :class:`~slurmkit.errors.InputError` naming the manifest when any of ``days``
    (held with rows, and with rows of this capture: ``new_days``) was stored with times read in
    another zone than ``record``'s (a capture of local times: ``times_local``)."""
    if not record or not record.get("times_local") or not record.get("time_zone"):
        return
    zone = record["time_zone"]
    other = [(names[d], man[names[d]].get("time_zone")) for d in days if d in new_days
             and man[names[d]].get("time_zone") not in (None, zone) and man[names[d]].get("times_local", True)]
    if other:
        zones = sorted({z for _, z in other})
        raise InputError(store._manifest_path(), None,
                         f"{len(other)} day(s) ({other[0][0]} .. {other[-1][0]}) hold rows stored with times read in "
                         f"{', '.join(zones)}, and this capture's are read in {zone}: merged, a job read in both "
                         "zones would be two jobs. To store the days again in this zone, add --replace (the days "
                         "of the capture, or of --start/--end, then hold this capture's rows only); to keep "
                         f"{', '.join(zones)}, give --tz {zones[0]}")
