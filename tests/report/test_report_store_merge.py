"""``report store`` merges each day job by job: two overlapping captures stored one after the
other hold every job of both, and the period report over them gives the whole capture's figures.

Data: Habrok's real capture (the ``habrok`` fixture: ../shared/corpus/sacct/habrok_gpu_cluster_parsable2.psv,
real ``sacct -P`` output of its GPU partitions, June 2023 to April 2024; see the corpus README).
The two overlapping captures are an edit of that real file, made here: its 100 jobs (each
allocation line with the step lines after it) cut into jobs 1-60 and jobs 41-100, the header
line in each, as an analyst splitting one capture in two files would.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from slurmkit.accounting.store import Store
from slurmkit.cli import cli

HERE = Path(__file__).resolve().parent
#: The period the reports compare: every month of the capture, and the time it was taken.
SPAN = ("--start", "2023-06-01", "--end", "2024-05-01", "--by", "month")
NOW = ("--now", "2024-04-20T00:00:00")


def _period_tests():
    """tests/report/test_report_period.py's comparison helpers (``_same``, ``_shared``)."""
    spec = importlib.util.spec_from_file_location("report_period_tests", HERE / "test_report_period.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _split(habrok: Path, folder: Path) -> tuple[Path, Path]:
    """The capture cut into jobs 1-60 and 41-100 (20 jobs in both), the header in each."""
    lines = habrok.read_text().splitlines(keepends=True)
    jobs: list[list[str]] = []
    for line in lines[1:]:
        if "." in line.split("|", 1)[0]:
            jobs[-1].append(line)       # a step line goes with the job above it
        else:
            jobs.append([line])
    assert len(jobs) == 100
    first, second = folder / "habrok_jobs_1-60.psv", folder / "habrok_jobs_41-100.psv"
    first.write_text(lines[0] + "".join(x for j in jobs[:60] for x in j))
    second.write_text(lines[0] + "".join(x for j in jobs[40:] for x in j))
    return first, second


def _store(capture: Path, root: Path, *more: str) -> dict:
    res = CliRunner().invoke(cli, ["report", "store", "--from-sacct", str(capture), "--store", str(root),
                                   "--cluster", "habrok", "--json", *more])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _period(root: Path, *more: str) -> dict:
    res = CliRunner().invoke(cli, ["report", "period", "--store", str(root), *SPAN, *NOW, "--json",
                                   "-o", str(root.parent / f"out-{root.name}"), "--format", "json", *more])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _figures(rep: dict) -> dict:
    """The report's figures over the period and in each month (not where they were read from)."""
    T = _period_tests()
    return {"period": T._shared(rep), "parts": [(p["label"], T._shared(p)) for p in rep["breakdown"]]}


@pytest.fixture(scope="module")
def stores(habrok, tmp_path_factory):
    """The whole capture stored at once (``whole``); its two overlapping parts stored one after
    the other (``ab``: jobs 1-60 first, ``ba``: jobs 41-100 first); each store run's JSON."""
    tmp = tmp_path_factory.mktemp("merge")
    first, second = _split(habrok, tmp)
    runs = {"whole": [_store(habrok, tmp / "whole")]}
    runs["ab"] = [_store(first, tmp / "ab"), _store(second, tmp / "ab")]
    runs["ba"] = [_store(second, tmp / "ba"), _store(first, tmp / "ba")]
    return tmp, runs, (first, second)


def test_two_overlapping_captures_stored_one_after_the_other_give_the_whole_captures_figures(stores):
    tmp, runs, _ = stores
    whole = _period(tmp / "whole")
    # the whole capture's figures (the period report's engine over the store filled at once)
    q2 = next(p for p in whole["breakdown"] if p["label"] == "2024-04")
    assert (q2["totals"]["jobs"], round(q2["totals"]["gpu_hours"], 4)) == (24, 220.4042)
    # over the span: the 90 jobs and 220.4 GPU-hours the two parts must give too (stored with
    # the old rule, "63 day(s) already final kept", they gave 63 jobs and 71.7 GPU-hours)
    assert (whole["totals"]["jobs"], round(whole["totals"]["gpu_hours"], 1)) == (90, 220.4)
    for name in ("ab", "ba"):
        rep = _period(tmp / name)
        T = _period_tests()
        assert T._same(_figures(rep), _figures(whole)) == [], name
        assert (rep["totals"]["jobs"], rep["totals"]["gpu_hours"]) == (whole["totals"]["jobs"],
                                                                       whole["totals"]["gpu_hours"])
    # the second run of each says what it did, day by day: jobs 41-60 are in both captures
    ab2 = runs["ab"][1]["totals"]
    # jobs 61-100 added; jobs 41-60's rows replaced by the later capture's copies (jobs 41-100
    # were taken at 2024-04-19T13:11:52Z, jobs 1-60 at their latest time, 2024-04-18T04:36:41Z);
    # jobs 1-40's rows in the days of jobs 41-100 kept
    assert (ab2["added"], ab2["replaced"], ab2["kept"], ab2["not_newer"]) == (186, 71, 24, 0)
    ba2 = runs["ba"][1]["totals"]
    # jobs 1-40 added; jobs 41-60's stored copies are the later pull's: kept, this capture's not newer
    assert (ba2["added"], ba2["replaced"], ba2["not_newer"]) == (78, 0, 71)
    assert runs["ab"][0]["as_of"] == "2024-04-18T04:36:41Z" and runs["ab"][1]["as_of"] == "2024-04-19T13:11:52Z"
    # every day of both captures is stored, as the whole capture's store holds them
    days = {n: sorted(Store(tmp / n, "habrok").manifest()) for n in ("whole", "ab", "ba")}
    assert days["ab"] == days["ba"] == days["whole"]


def test_the_store_summary_says_what_each_run_added(stores):
    tmp, _, (first, second) = stores
    root = tmp / "cli"
    CliRunner().invoke(cli, ["report", "store", "--from-sacct", str(first), "--store", str(root), "--cluster", "h"])
    res = CliRunner().invoke(cli, ["report", "store", "--from-sacct", str(second), "--store", str(root),
                                   "--cluster", "h"])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0].startswith(f"{root / 'cluster=h'}: 65 day(s) written (2024-02-15 .. 2024-04-19), 0 final")
    assert lines[1] == f"{root / 'cluster=h'}: job rows added 186, replaced 71, kept 24 (a job counts in each day it ran in)"
    assert lines[2] == f"{root / 'cluster=h'}: 65 day(s): --json lists each day's counts"
    assert "already final" not in res.output
    # a week: a table of the days
    res = CliRunner().invoke(cli, ["report", "store", "--from-sacct", str(first), "--store", str(tmp / "wk"),
                                   "--cluster", "h", "--start", "2024-02-26", "--end", "2024-03-04"])
    res = CliRunner().invoke(cli, ["report", "store", "--from-sacct", str(second), "--store", str(tmp / "wk"),
                                   "--cluster", "h", "--start", "2024-02-26", "--end", "2024-03-04"])
    assert res.exit_code == 0, res.output
    table = res.stdout.splitlines()[2:10]
    assert table[0].split() == ["day", "added", "replaced", "kept", "not_newer", "rows", "final", "written"]
    assert [r.split()[0] for r in table[1:]] == [f"2024-{d}" for d in ("02-26", "02-27", "02-28", "02-29",
                                                                        "03-01", "03-02", "03-03")]
    got = json.loads(CliRunner().invoke(cli, ["report", "store", "--from-sacct", str(second), "--store",
                                              str(tmp / "wk"), "--cluster", "h", "--start", "2024-02-26", "--end",
                                              "2024-03-04", "--json"]).stdout)
    for row in table[1:]:
        day, added, replaced, kept, not_newer, rows, *_ = row.split()
        assert int(rows) == got["days"][day]["rows"] == int(added) + int(replaced) + int(kept)


def test_day_sums_are_rebuilt_for_the_days_a_merge_changes(stores):
    """After the merge the store's day sums are valid (the period report reads them: "used")
    and give the figures of every row read one by one (``--no-day-sums``)."""
    tmp, runs, _ = stores
    assert runs["ab"][1]["day_sums"]["summed"] == len(runs["ab"][1]["written"]) == 65
    fast = _period(tmp / "ab")
    assert fast["store"]["clusters"]["habrok"]["day_sums"] == "used"
    slow = _period(tmp / "ab", "--no-day-sums")
    T = _period_tests()
    assert T._same(_figures(fast), _figures(slow)) == []


def test_another_reader_of_the_dataset_gets_the_engines_totals(stores):
    """The merged store read as a Hive-partitioned Parquet dataset by pyarrow (``day`` from the
    folders, as docs/report.md shows), the period's jobs and GPU-hours computed from it with
    DuckDB by the rules docs/report.md states (the latest copy per key; a running job up to its
    pull, never past now nor Start + Timelimit; ElapsedRaw shared out by the run's part in the
    window): the period report's figures."""
    import duckdb
    import pyarrow as pa
    import pyarrow.dataset as ds

    tmp, _, _ = stores
    root = tmp / "ab"
    files = sorted(str(p) for p in root.glob("cluster=*/day=*/allocs.parquet"))
    assert len(files) == 324
    part = ds.partitioning(pa.schema([("day", pa.string())]), flavor="hive")
    allocs = ds.dataset(files, format="parquet", partitioning=part, partition_base_dir=str(root)).to_table(
        columns=["cluster", "key_id", "state", "submit", "start", "end", "elapsed_s", "timelimit_s", "gpus", "ncpus",
                 "pulled_at", "day"])
    assert allocs.num_rows == 335      # a job over midnight in each day's file
    for start, end in (("2023-06-01", "2024-05-01"), ("2024-04-01", "2024-05-01"), ("2024-03-01", "2024-04-01")):
        ws, we, now = (f"epoch(TIMESTAMPTZ '{t}')" for t in (f"{start}T00:00:00Z", f"{end}T00:00:00Z",
                                                             "2024-04-20T00:00:00Z"))
        got = duckdb.sql(f"""
            WITH latest AS (
              SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY cluster, key_id, submit, start
                                                          ORDER BY pulled_at DESC, day DESC) AS copy FROM allocs)
              WHERE copy = 1),
            runs AS (
              SELECT *, epoch(start) AS s0,
                     CASE WHEN "end" IS NOT NULL THEN epoch("end")
                          ELSE least(epoch(pulled_at), {now},
                                     CASE WHEN isfinite(timelimit_s) THEN epoch(start) + timelimit_s END) END AS s1
              FROM latest WHERE start IS NOT NULL AND state <> 'PENDING' AND NOT coalesce(start > "end", false)),
            w AS (
              SELECT *, greatest(least(s1, {we}) - greatest(s0, {ws}), 0) AS overlap,
                     CASE WHEN "end" IS NOT NULL AND elapsed_s IS NOT NULL THEN elapsed_s ELSE s1 - s0 END AS run_s
              FROM runs WHERE s0 < {we} AND s1 >= {ws})
            SELECT count(DISTINCT key_id),
                   sum(gpus * CASE WHEN s1 > s0 THEN run_s * overlap / (s1 - s0) ELSE 0 END) / 3600,
                   sum(ncpus * CASE WHEN s1 > s0 THEN run_s * overlap / (s1 - s0) ELSE 0 END) / 3600
            FROM w""").fetchall()[0]
        res = CliRunner().invoke(cli, ["report", "period", "--store", str(root), "--start", start, "--end", end,
                                       *NOW, "--json", "-o", str(tmp / "out-ds"), "--format", "json"])
        t = json.loads(res.stdout)["totals"]
        assert got[0] == t["jobs"] and got[1] == pytest.approx(t["gpu_hours"], rel=1e-9, abs=1e-9), (start, got, t)
        assert got[2] == pytest.approx(t["cpu_hours"], rel=1e-9)
        if start == "2024-04-01":
            assert (got[0], round(got[1], 4)) == (24, 220.4042)     # 3 jobs running at the capture time


def _pending_copy(habrok: Path, dst: Path, job: str) -> Path:
    """A labelled edit of the real capture: its header and job ``job``'s allocation line as
    sacct printed it while the job waited (State PENDING, no node, Start / End Unknown,
    Elapsed / TotalCPU / CPUTime 0, no AllocTRES), as a capture taken before it started holds it."""
    lines = habrok.read_text().splitlines()
    head = lines[0].split("|")
    row = next(ln.split("|") for ln in lines[1:] if ln.split("|", 1)[0] == job)
    for name, value in (("State", "PENDING"), ("NodeList", "None assigned"), ("Start", "Unknown"),
                        ("End", "Unknown"), ("Elapsed", "00:00:00"), ("TotalCPU", "00:00:00"),
                        ("CPUTime", "00:00:00"), ("AllocTRES", "")):
        row[head.index(name)] = value
    dst.write_text(lines[0] + "\n" + "|".join(row) + "\n")
    return dst


def test_a_job_stored_pending_then_started_counts_as_the_started_job(habrok, tmp_path):
    # job 8069225 (user28, 1 V100, submitted 2024-04-09 16:58, ran 02:32-11:18 local on 04-10,
    # COMPLETED) stored first from a capture taken while it waited, then the whole capture
    early = _pending_copy(habrok, tmp_path / "habrok_8069225_pending.psv", "8069225")
    root = tmp_path / "st"
    _store(early, root, "--tz", "Europe/Amsterdam", "--as-of", "2024-04-09T20:00:00Z")
    _store(habrok, root, "--tz", "Europe/Amsterdam")
    whole = tmp_path / "whole"
    _store(habrok, whole, "--tz", "Europe/Amsterdam")
    full, ref = _period(root, "--capacity-gpus", "144"), _period(whole, "--capacity-gpus", "144")
    rep = next(p for p in full["breakdown"] if p["label"] == "2024-04")
    t = rep["totals"]
    # as the whole capture alone: no requeued attempt, 0.0011 GPU-h wasted (two FAILED jobs of
    # 2 s each), 13 COMPLETED (before: 1 requeued attempt, 8.76 GPU-h wasted, 12 COMPLETED)
    assert (t["requeued_attempts"], round(t["wasted_gpu_hours"], 5)) == (0, 0.00111)
    completed = next(o for o in rep["outcomes"] if o["state"] == "COMPLETED")
    assert completed["jobs"] == 13
    assert T_same(full, ref) == []
    # the store's pandas reader (the weekly report from the store) keeps the started copy only
    rows, dq = Store(root, "habrok").load([__import__("datetime").datetime(2024, 4, d) for d in range(9, 12)])
    mine = rows.allocs[rows.allocs["key_id"] == "8069225"]
    assert mine["state"].astype(str).tolist() == ["COMPLETED"]
    assert dq.skipped["pending in an earlier capture, started in a later one"] == 1


def T_same(rep: dict, ref: dict) -> list:
    T = _period_tests()
    return T._same(_figures(rep), _figures(ref))
