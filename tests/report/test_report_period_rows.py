"""The period report's SQL over a capture's rows (``rows_figures``: the rows registered in DuckDB
as Arrow tables, read by the store's own loaders): the weekly report's shared figures.

The captures here are written in the test, in the layout of ``sacct -P -o
JobID,JobIDRaw,Cluster,User,Account,Partition,State,Submit,Start,End,ElapsedRaw,NCPUS,AllocTRES,Timelimit``
(the fields of the corpus's habrok capture, sacct/habrok_gpu_cluster_parsable2.psv, fewer of
them); their values are chosen so that each figure can be worked out by hand."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest

from slurmkit.accounting.frame import load_sacct
from slurmkit.report.period import rows_figures
from slurmkit.report.window import Window

HEADER = "JobID|JobIDRaw|Cluster|User|Account|Partition|State|Submit|Start|End|ElapsedRaw|NCPUS|AllocTRES|Timelimit"
WEEK = Window(dt.datetime(2024, 3, 11, tzinfo=dt.timezone.utc), dt.datetime(2024, 3, 18, tzinfo=dt.timezone.utc))
NOW = pd.Timestamp("2024-03-13T10:00:00Z").timestamp()


def _rows(tmp_path, lines, header=HEADER):
    path = tmp_path / "capture.psv"
    path.write_text("\n".join([header, *lines]) + "\n")
    rows, _ = load_sacct(path, None, None, None)
    return rows


def test_a_running_job_in_a_capture_runs_its_elapsed(tmp_path):
    # job 11 started 2024-03-12 00:00, printed running with ElapsedRaw 3600 (1 h), 2 GPUs;
    # job 12 finished: 2 h on 1 GPU, waited 600 s
    rows = _rows(tmp_path, [
        "11|11|c|u1|a1|gpu|RUNNING|2024-03-11T23:50:00|2024-03-12T00:00:00|Unknown|3600|8|cpu=8,gres/gpu=2|1-00:00:00",
        "12|12|c|u2|a1|gpu|COMPLETED|2024-03-12T01:50:00|2024-03-12T02:00:00|2024-03-12T04:00:00|7200|4|"
        "cpu=4,gres/gpu=1|1-00:00:00"])
    got = rows_figures(rows, WEEK, NOW, running_elapsed=True)
    t = got["totals"]
    # 2 GPUs x 1 h (its Elapsed when the capture was taken, not up to now) + 1 GPU x 2 h
    assert t["gpu_hours"] == pytest.approx(4.0) and t["jobs"] == 2 and t["provisional_jobs"] == 1
    assert t["provisional_gpu_hours"] == pytest.approx(2.0) and t["cpu_hours"] == pytest.approx(8 + 8)
    assert got["queue_wait"]["all"]["n"] == 2 and got["queue_wait"]["all"]["max_s"] == 600.0
    # a live pull's running job runs up to now (34 h after its Start), never past its Timelimit (24 h)
    live = rows_figures(rows, WEEK, NOW)["totals"]
    assert live["gpu_hours"] == pytest.approx(2 * 24 + 2)


def test_waits_of_a_capture_without_submit_are_unknown_not_zero(tmp_path):
    header = HEADER.replace("|Submit", "")
    rows = _rows(tmp_path, ["12|12|c|u2|a1|gpu|COMPLETED|2024-03-12T02:00:00|2024-03-12T04:00:00|7200|4|"
                            "cpu=4,gres/gpu=1|1-00:00:00"], header)
    got = rows_figures(rows, WEEK, NOW, running_elapsed=True)
    assert got["totals"]["jobs"] == 1 and got["totals"]["gpu_hours"] == pytest.approx(2.0)
    qw = got["queue_wait"]
    assert qw["histogram"] is None and qw["all"]["n"] is None and qw["all"]["p50_s"] is None
    assert "no Submit or Eligible" in qw["unknown"]


def test_an_empty_capture_window_reads_zeros(tmp_path):
    rows = _rows(tmp_path, ["12|12|c|u2|a1|gpu|COMPLETED|2024-01-12T01:50:00|2024-01-12T02:00:00|2024-01-12T04:00:00|"
                            "7200|4|cpu=4,gres/gpu=1|1-00:00:00"])
    got = rows_figures(rows, WEEK, NOW, running_elapsed=True)
    assert got["totals"]["jobs"] == 0 and got["queue_wait"]["histogram"] == [0] * 9
    assert "unknown" not in got["queue_wait"]
