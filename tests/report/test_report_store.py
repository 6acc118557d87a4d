"""The store as a Hive-partitioned Parquet dataset: the old layout moved on
first open, and another engine (DuckDB's ``read_parquet(..., hive_partitioning=1)``, as Spark or
Trino read partitions) sees the ``cluster`` and ``day`` columns.

Data: Habrok's real capture (the ``habrok`` fixture: ../shared/corpus/sacct/habrok_gpu_cluster_parsable2.psv,
see the corpus README), split into daily pulls as bench/report_period.py's ``by_day`` does.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from slurmkit.accounting.frame import load_sacct
from slurmkit.accounting.quality import DataQuality
from slurmkit.accounting.store import Store, clusters
from slurmkit.report.energy import Assumptions
from slurmkit.report.weekly import build_report
from slurmkit.report.window import Window

ROOT = Path(__file__).resolve().parents[2]
UNTIL = int(pd.Timestamp("2024-04-19T12:00:00Z").timestamp())


def _days(habrok):
    spec = importlib.util.spec_from_file_location("report_period_bench", ROOT / "bench" / "report_period.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rows, _ = load_sacct(habrok)
    return mod.by_day(rows, UNTIL)


def _write_old_layout(root: Path, cluster: str, days) -> dict:
    """The layout main's Store wrote before this one, file names and all:
    ``<root>/<cluster>/<day>.parquet``, ``<day>.steps.parquet``, ``manifest.json``,
    ``weeks/<week>.parquet`` (pyarrow tables of the frames plus ``pulled_at``)."""
    d = root / cluster
    (d / "weeks").mkdir(parents=True)
    man = {}
    for day, part in days:
        name = f"{dt.datetime.fromtimestamp(day, dt.timezone.utc):%Y-%m-%d}"
        pulled = pd.Timestamp(day + 2 * 86400, unit="s", tz="UTC")
        for frame, path in ((part.steps, d / f"{name}.steps.parquet"), (part.allocs, d / f"{name}.parquet")):
            pq.write_table(pa.Table.from_pandas(frame.assign(pulled_at=pulled), preserve_index=False), path)
        man[name] = {"pulled_at": day + 2 * 86400, "final": True, "rows": len(part),
                     "dq": {"rows_read": len(part), "skipped": {}, "repaired": {}}}
    (d / "manifest.json").write_text(json.dumps(man))
    week = pd.DataFrame({"week": ["2024-W01"], "kind": ["account"], "name": ["a"], "jobs": [1], "gpu_hours": [2.0],
                         "cpu_hours": [3.0], "wasted_gpu_hours": [0.0], "provisional_gpu_hours": [0.0],
                         "energy_kwh": [None], "provisional": [False], "built_at": [1.0]})
    pq.write_table(pa.Table.from_pandas(week, preserve_index=False), d / "weeks" / "2024-W01.parquet")
    return man


def test_old_layout_is_moved_on_first_open_and_reads_the_same(habrok, tmp_path):
    days = _days(habrok)
    window = Window(dt.datetime(2024, 3, 1, tzinfo=dt.timezone.utc), dt.datetime(2024, 4, 19, tzinfo=dt.timezone.utc))
    wdays = [d for d, _ in window.days()]
    # the same pulls in the new layout, written by the store itself: the reference
    ref = Store(tmp_path / "new", "habrok")
    for day, part in days:
        ref.save_day(dt.datetime.fromtimestamp(day, dt.timezone.utc), part, DataQuality(rows_read=len(part)),
                     now=day + 2 * 86400)
    want, _ = ref.load(wdays)
    man = _write_old_layout(tmp_path / "old", "habrok", days)
    assert clusters(tmp_path / "old") == ["habrok"]          # an old folder is listed (and migrated on open)
    st = Store(tmp_path / "old", "habrok")
    assert not (tmp_path / "old" / "habrok").exists()        # moved, nothing left behind
    assert st.manifest() == man
    day0 = next(iter(man))
    assert [p.name for p in st.day_files(day0)] == ["allocs.parquet", "steps.parquet"]
    assert all(p.exists() for p in st.day_files(day0))
    assert (st.dir / f"day={day0}").parent.name == "cluster=habrok"
    got, dq = st.load(wdays)
    assert len(got.allocs) == len(want.allocs) > 20
    pd.testing.assert_frame_equal(got.allocs, want.allocs)
    pd.testing.assert_frame_equal(got.steps, want.steps)
    assert st.load_weeks(["2024-W01"])["gpu_hours"].tolist() == [2.0]
    rep, _ = build_report(got, dq, window, Assumptions(), now=pd.Timestamp(UNTIL, unit="s", tz="UTC"))
    assert rep["totals"]["jobs"] > 20
    # opening again moves nothing and changes nothing
    assert Store(tmp_path / "old", "habrok").manifest() == man


def test_an_interrupted_move_is_finished_by_the_next_open(habrok, tmp_path):
    days = _days(habrok)[:5]
    man = _write_old_layout(tmp_path / "s", "_default", days)      # the folder of cluster ""
    first = next(iter(man))
    dest = tmp_path / "s" / "cluster=_default" / f"day={first}"
    dest.mkdir(parents=True)
    (tmp_path / "s" / "_default" / f"{first}.parquet").rename(dest / "allocs.parquet")   # moved, then stopped
    st = Store(tmp_path / "s")
    assert st.manifest() == man and not (tmp_path / "s" / "_default").exists()
    assert sorted(p.parent.name for p in st.dir.glob("day=*/allocs.parquet")) == [f"day={d}" for d in sorted(man)]


def test_another_engine_sees_cluster_and_day_columns(habrok, tmp_path):
    """DuckDB reading the store as a Hive-partitioned dataset, as Spark's
    ``spark.read.parquet`` or Trino's ``partitioned_by`` would: every row with its cluster
    (the folder's name) and its day."""
    days = _days(habrok)
    for cluster in ("habrok", "other"):
        st = Store(tmp_path / "store", cluster)
        for day, part in days[:10]:
            st.save_day(dt.datetime.fromtimestamp(day, dt.timezone.utc), part, DataQuality(rows_read=len(part)),
                        now=day + 2 * 86400)
    glob = str(tmp_path / "store" / "**" / "allocs.parquet")
    got = duckdb.sql(f"""SELECT cluster, CAST(day AS VARCHAR) AS day, count(*) AS n, count(DISTINCT key_id) AS jobs
                         FROM read_parquet('{glob}', hive_partitioning = 1)
                         GROUP BY ALL ORDER BY cluster, day""").df()
    want = [(f"{dt.datetime.fromtimestamp(d, dt.timezone.utc):%Y-%m-%d}", len(p.allocs)) for d, p in days[:10]]
    assert list(zip(got["day"], got["n"])) == want * 2
    assert sorted(set(got["cluster"])) == ["habrok", "other"]
    steps = duckdb.sql(f"""SELECT count(*) FROM read_parquet('{tmp_path / "store" / "**" / "steps.parquet"}',
                           hive_partitioning = 1) WHERE cluster = 'habrok'""").fetchall()[0][0]
    assert steps == sum(len(p.steps) for _, p in days[:10])
