"""Incremental Parquet store of sacct rows, one file per cluster and UTC day pulled.

Layout: ``<root>/<cluster>/<YYYY-MM-DD>.parquet`` (the typed rows of that day's sacct call,
written with pyarrow) and ``<root>/<cluster>/manifest.json``: day -> ``{"pulled_at": epoch s,
"final": bool, "dq": {...}}``. A day is final once it was pulled more than ``SETTLE_S`` after
it ended and none of its rows is still running or pending; only non-final days are pulled
again, so a weekly run re-reads only recent days. Running jobs are provisional and re-pulled.

Rows are keyed by (cluster, JobIDRaw, step, Submit, Start); when several days (or pulls) hold
the same key, :meth:`Store.load` keeps the copy from the latest pull.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from slurmkit.accounting.quality import DataQuality

#: Seconds after a day's end before its pull can be final (accounting reaches slurmdbd late).
SETTLE_S = 3600
KEY = ["cluster", "key_id", "step", "submit", "start"]
OPEN_STATES = ("RUNNING", "PENDING", "REQUEUED", "SUSPENDED", "COMPLETING", "CONFIGURING",
               "RESIZING", "REQUEUE_HOLD", "REQUEUE_FED", "SIGNALING", "STAGE_OUT")


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

    def save_day(self, day: dt.datetime, rows: pd.DataFrame, dq: DataQuality,
                 now: float | None = None) -> Path:
        """Write one day's rows (replacing an earlier pull) and update the manifest."""
        now = time.time() if now is None else now
        self.dir.mkdir(parents=True, exist_ok=True)
        name = f"{day:%Y-%m-%d}"
        path = self.dir / f"{name}.parquet"
        tmp = path.with_suffix(".parquet.tmp")
        out = rows.copy()
        out["pulled_at"] = pd.Timestamp(now, unit="s", tz="UTC")
        pq.write_table(pa.Table.from_pandas(out, preserve_index=False), tmp)
        os.replace(tmp, path)
        day_end = day.replace(hour=0, minute=0, second=0, microsecond=0) + dt.timedelta(days=1)
        open_rows = bool(rows["state"].isin(OPEN_STATES).any() or rows["end"].isna().any()) if len(rows) else False
        final = (now - day_end.timestamp()) > SETTLE_S and not open_rows
        man = self.manifest()
        man[name] = {"pulled_at": now, "final": final, "rows": int(len(rows)),
                     "dq": {"rows_read": dq.rows_read, "skipped": dict(dq.skipped),
                            "repaired": dict(dq.repaired)}}
        tmpm = self._manifest_path().with_suffix(".tmp")
        tmpm.write_text(json.dumps(man, indent=1, sort_keys=True))
        os.replace(tmpm, self._manifest_path())
        return path

    def load(self, days: list[dt.datetime]) -> tuple[pd.DataFrame, DataQuality]:
        """Rows of the given days (one copy per key, the latest pull) and their data quality
        (repeats across days are counted as skipped: ``same row in another day's pull``).
        Days not in the store are ignored."""
        man = self.manifest()
        frames, dq = [], DataQuality()
        for day in days:
            name = f"{day:%Y-%m-%d}"
            path = self.dir / f"{name}.parquet"
            if name not in man or not path.exists():
                continue
            frames.append(pq.read_table(path).to_pandas(
                types_mapper=lambda t: pd.StringDtype("pyarrow") if t in (pa.string(), pa.large_string()) else None))
            d = man[name].get("dq", {})
            dq.rows_read += int(d.get("rows_read", 0))
            for k, v in d.get("skipped", {}).items():
                dq.skip(k, int(v))
            dq.repaired.update(Counter({k: int(v) for k, v in d.get("repaired", {}).items()}))
        if not frames:
            return pd.DataFrame(), dq
        rows = pd.concat(frames, ignore_index=True).sort_values("pulled_at", kind="stable")
        dup = rows.duplicated(KEY, keep="last")
        dq.skip("same row in another day's pull", int(dup.sum()))
        rows = rows[~dup].drop(columns=["pulled_at"]).reset_index(drop=True)
        return rows, dq

    def has_days(self, days: list[dt.datetime]) -> bool:
        """True when every day is in the store (week-over-week deltas need the whole week)."""
        man = self.manifest()
        return all(f"{d:%Y-%m-%d}" in man for d in days)
