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
:meth:`Store.load` keeps the copy from the latest pull (ties: the later day).

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

        def read(path, rows=True, want=DAY_COLUMNS):
            with InputError.reading(path, "a day file of the store (Parquet)", pa.ArrowException, ValueError):
                table = pq.read_table(path) if rows else pq.read_schema(path).empty_table()
                check_columns(path, table.column_names, want, "a day file of the store")
                return table.to_pandas(
                    types_mapper=lambda t: pd.StringDtype("pyarrow") if t in (pa.string(), pa.large_string()) else None)

        for day in days:
            name = f"{day:%Y-%m-%d}"
            if name not in man or not self._path(name).exists() or not self._path(name, "steps").exists():
                continue
            parts.append(JobRows(read(self._path(name)), read(self._path(name, "steps"), steps, STEP_FILE_COLUMNS)))
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
        return JobRows(rows.allocs.drop(columns=["pulled_at"], errors="ignore").reset_index(drop=True),
                       rows.steps.drop(columns=["pulled_at"], errors="ignore").reset_index(drop=True)), dq

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


def by_day(rows: JobRows, until: float) -> list[tuple[int, JobRows]]:
    """``[(day, JobRows)]``, days ascending: the allocation rows of ``rows`` (with their steps)
    in each UTC day (``day``: epoch s of its midnight) from Start (Submit, else End, when it
    never started) to End (a job with no End: to ``until``, epoch s), as one daily sacct pull
    per day (``sacct -S <day> -E <day+1>``) lists them: a job is in every day it overlaps. Days
    with no row are absent. The one home of this split: the captures' fill
    (:func:`fill_from_capture`) and bench/report_period.py use it."""
    a = rows.allocs
    if not len(a):
        return []
    until_ts = pd.Timestamp(until, unit="s", tz="UTC")
    lo = a["start"].fillna(a["submit"]).fillna(a["end"])
    hi = a["end"].fillna(lo.where(lo > until_ts, until_ts))
    lo_s = lo.astype("int64").to_numpy() // 10**9
    d0 = lo_s // 86400 * 86400
    d1 = np.maximum(hi.astype("int64").to_numpy() // 10**9, lo_s) // 86400 * 86400
    # steps go with their allocation's identity (a requeued job's with each of its attempts)
    codes, _ = pd.factorize(np.concatenate([a["key_id"].astype(str).to_numpy(),
                                            rows.steps["key_id"].astype(str).to_numpy()]))
    acode, scode = codes[:len(a)], codes[len(a):]
    out = []
    for day in range(int(d0.min()), int(d1.max()) + 86400, 86400):
        sel = (d0 <= day) & (d1 >= day)
        if sel.any():
            has = np.zeros(len(codes) + 1, bool)
            has[acode[sel]] = True
            steps = rows.steps[has[scode]]
            out.append((day, JobRows(a[sel].reset_index(drop=True), steps.reset_index(drop=True))))
    return out


def fill_from_capture(store: "Store", rows: JobRows, as_of: float, first_day: float | None = None,
                      last_day: float | None = None, replace_final: bool = False, record: dict | None = None) -> dict:
    """Fill ``store``'s days from captured sacct rows taken at ``as_of`` (epoch s, UTC), as
    daily live pulls would have: the rows split by :func:`by_day` (a job still without End
    runs to ``as_of``), every UTC day from ``first_day`` (epoch s; default: the first day a
    row is in) to the day of ``as_of`` (or of ``last_day``, epoch s, when earlier) written with :meth:`Store.save_day` (``now=as_of``, so a
    day is final only when ``as_of`` is more than :data:`SETTLE_S` past its end and none of
    its rows is open); a day inside that span with no row is written empty (the capture
    covers it). Days the capture does not cover (before ``first_day``, after ``as_of``) are
    not written, a day already final in the store is kept unless ``replace_final``, and so is
    a day pulled after ``as_of`` (a later capture or live pull knows more than this one).
    ``record``: kept in each written day's manifest entry (:meth:`Store.save_day`).

    Returns ``{"written": [day], "final": [day], "kept_final": [day], "kept_newer": [day]}``
    (``YYYY-MM-DD``)."""
    split = by_day(rows, as_of)
    out = {"written": [], "final": [], "kept_final": [], "kept_newer": []}
    if not split and first_day is None:
        return out
    start = int(first_day // 86400 * 86400) if first_day is not None else split[0][0]
    last = int(min(as_of, last_day if last_day is not None else as_of) // 86400 * 86400)
    have = dict(split)
    empty = JobRows(rows.allocs.iloc[0:0], rows.steps.iloc[0:0])
    man = store.manifest()
    for day in range(start, last + 86400, 86400):
        d = dt.datetime.fromtimestamp(day, dt.timezone.utc)
        name = f"{d:%Y-%m-%d}"
        if not replace_final and man.get(name, {}).get("final"):
            out["kept_final"].append(name)
            continue
        if not replace_final and float(man.get(name, {}).get("pulled_at") or 0.0) > as_of:
            out["kept_newer"].append(name)
            continue
        part = have.get(day, empty)
        store.save_day(d, part, DataQuality(rows_read=len(part)), now=as_of, record=record)
        out["written"].append(name)
        if store.manifest()[name]["final"]:
            out["final"].append(name)
    return out
