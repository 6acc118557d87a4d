"""Incremental Parquet store of sacct rows, one file per cluster and UTC day pulled.

Layout: ``<root>/<cluster>/<YYYY-MM-DD>.parquet`` and ``<YYYY-MM-DD>.steps.parquet`` (the typed
allocation and step rows of that day's sacct call, written with pyarrow) and
``<root>/<cluster>/manifest.json``: day -> ``{"pulled_at": epoch s,
"final": bool, "dq": {...}}``. A day is final once it was pulled more than ``SETTLE_S`` after
it ended and none of its rows is still running or pending; only non-final days are pulled
again, so a weekly run re-reads only recent days. Running jobs are provisional and re-pulled.

Rows are keyed by (cluster, JobIDRaw, Submit, Start), a step row also by its step name; when
several days (or pulls) hold the same key, :meth:`Store.load` keeps the copy from the latest pull.

Weekly aggregates: ``<root>/<cluster>/weeks/<YYYY-Www>.parquet``, one small table per ISO week
whose report was built (:meth:`Store.save_week`): a row per account and per partition with
its jobs, GPU-, CPU-hours, wasted and provisional GPU-hours and kWh (:data:`WEEK_COLUMNS`).
Trends over N weeks read N such tables (:meth:`Store.load_weeks`), never the rows again. A
week built again (a later run, its running jobs since finished) replaces its table.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from slurmkit.accounting.frame import JobRows
from slurmkit.accounting.quality import SAME_ROW_PULL, DataQuality
from slurmkit.atomicfile import atomic_write, atomic_write_with

#: Seconds after a day's end before its pull can be final (accounting reaches slurmdbd late).
SETTLE_S = 3600
OPEN_STATES = ("RUNNING", "PENDING", "REQUEUED", "SUSPENDED", "COMPLETING", "CONFIGURING",
               "RESIZING", "REQUEUE_HOLD", "REQUEUE_FED", "SIGNALING", "STAGE_OUT")


#: The columns of a weekly aggregate table (:meth:`Store.save_week`): ``kind`` is ``account``
#: or ``partition``, ``name`` its value; hours are inside the ISO week; ``provisional`` is True
#: when the week's report still had running jobs.
WEEK_COLUMNS = ("week", "kind", "name", "jobs", "gpu_hours", "cpu_hours", "wasted_gpu_hours",
                "provisional_gpu_hours", "energy_kwh", "provisional", "built_at")


class Store:
    """A store rooted at ``root`` (created on first write). ``cluster``: "" is stored as
    ``_default``."""

    def __init__(self, root, cluster: str = ""):
        self.root = Path(root)
        self.cluster = cluster or "_default"
        self.dir = self.root / self.cluster

    def _manifest_path(self) -> Path:
        return self.dir / "manifest.json"

    def manifest(self) -> dict:
        """The manifest (day string -> entry), {} when the store is new."""
        try:
            return json.loads(self._manifest_path().read_text())
        except FileNotFoundError:
            return {}

    def needs_pull(self, day: dt.datetime, now: float | None = None) -> bool:
        """True when ``day`` (its UTC midnight) is absent or not final."""
        entry = self.manifest().get(f"{day:%Y-%m-%d}")
        return not (entry and entry.get("final"))

    def save_day(self, day: dt.datetime, rows: JobRows, dq: DataQuality,
                 now: float | None = None) -> Path:
        """Write one day's rows (replacing an earlier pull) and update the manifest. Returns
        the allocation rows' file."""
        now = time.time() if now is None else now
        self.dir.mkdir(parents=True, exist_ok=True)
        name = f"{day:%Y-%m-%d}"
        pulled = pd.Timestamp(now, unit="s", tz="UTC")
        for frame, path in ((rows.steps, self._path(name, "steps")), (rows.allocs, self._path(name))):
            table = pa.Table.from_pandas(frame.assign(pulled_at=pulled), preserve_index=False)
            atomic_write_with(path, lambda tmp, table=table: pq.write_table(table, tmp))
        path = self._path(name)
        allocs = rows.allocs
        day_end = day.replace(hour=0, minute=0, second=0, microsecond=0) + dt.timedelta(days=1)
        open_rows = bool(allocs["state"].isin(OPEN_STATES).any() or allocs["end"].isna().any()) if len(allocs) else False
        final = (now - day_end.timestamp()) > SETTLE_S and not open_rows
        man = self.manifest()
        man[name] = {"pulled_at": now, "final": final, "rows": int(len(rows)),
                     "dq": {"rows_read": dq.rows_read, "skipped": dict(dq.skipped),
                            "repaired": dict(dq.repaired)}}
        atomic_write(self._manifest_path(), json.dumps(man, indent=1, sort_keys=True))
        return path

    def _path(self, name: str, kind: str = "") -> Path:
        return self.dir / (f"{name}.{kind}.parquet" if kind else f"{name}.parquet")

    def load(self, days: list[dt.datetime]) -> tuple[JobRows, DataQuality]:
        """Rows of the given days (one copy per key, the latest pull) and their data quality
        (repeats across days are counted as skipped: ``same row in another day's pull``).
        Days not in the store are ignored."""
        man = self.manifest()
        parts, dq = [], DataQuality()

        def read(path):
            return pq.read_table(path).to_pandas(
                types_mapper=lambda t: pd.StringDtype("pyarrow") if t in (pa.string(), pa.large_string()) else None)

        for day in days:
            name = f"{day:%Y-%m-%d}"
            if name not in man or not self._path(name).exists() or not self._path(name, "steps").exists():
                continue
            parts.append(JobRows(read(self._path(name)), read(self._path(name, "steps"))))
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
        return self.dir / "weeks" / f"{week}.parquet"

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
        (:data:`WEEK_COLUMNS`); weeks never built are absent."""
        parts = [pq.read_table(self._week_path(w)).to_pandas() for w in weeks if self._week_path(w).exists()]
        if not parts:
            return pd.DataFrame({c: pd.Series(dtype=object) for c in WEEK_COLUMNS})
        return pd.concat(parts, ignore_index=True)
