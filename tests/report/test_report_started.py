"""Jobs that ran, on small captures in sacct's form (tests/sacct_rows.py;
the sandbox test test_report_sandbox_captures.py checks the same on Slurm's own records): a
job counts when it started; a pending cancel (Start None) and a held job's cancel (Start =
End before Eligible) are the "cancelled before start" line, never in the waits; a requeued
job's wait is counted once; the bucket is the GPUs asked for (ReqTRES)."""

from __future__ import annotations

from slurmkit.accounting.frame import load_sacct_bytes
from slurmkit.report.energy import Assumptions
from slurmkit.report.weekly import build_report

from sacct_rows import T0, WEEK, row, text


def _rep(rows):
    jr, dq = load_sacct_bytes(text(rows), "t.psv")
    return build_report(jr, dq, WEEK, Assumptions(), now=WEEK.end)


def test_jobs_that_never_started():
    rows = [row(),
            # cancelled while pending: Start None, asked for a GPU, no AllocTRES GPUs
            row(JobID="201", State="CANCELLED by 0", Start="None", End=str(T0 + 900), ElapsedRaw="0",
                AllocTRES="", ReqTRES="billing=1,cpu=1,gres/gpu=1,node=1"),
            # held with --begin and cancelled: Start = End before Eligible
            row(JobID="202", State="CANCELLED by 0", Eligible=str(T0 + 7200), Start=str(T0 + 1200),
                End=str(T0 + 1200), ElapsedRaw="0", AllocTRES="", ReqTRES="billing=1,cpu=1,gres/gpu=1,node=1")]
    rep, a = _rep(rows)
    assert rep["totals"]["jobs"] == 1
    never = [o for o in rep["outcomes"] if o["state"] == "cancelled before start"]
    assert never == [{"state": "cancelled before start", "jobs": 2, "attempts": 2, "rows": 2, "gpu_hours": 0.0,
                      "wasted_gpu_hours": 0.0, "ran": False, "states": {"CANCELLED": 2}}]
    assert [o["state"] for o in rep["outcomes"] if o.get("ran", True)] == ["COMPLETED"]
    assert rep["queue_wait"]["all"]["n"] == 1
    assert [(q["gpu_bucket"], q["n"]) for q in rep["queue_wait"]["by_partition_gpus"]] == [("2-4", 1)]
    s = a.set_index("job_id")
    assert list(s.loc[["100", "201", "202"], "started"]) == [True, False, False]


def test_requeued_job_waits_once_in_the_bucket_it_asked_for():
    rows = [row(JobID="300", State="REQUEUED", Start=str(T0 + 600), End=str(T0 + 1200), ElapsedRaw="600",
                AllocTRES="cpu=4,gres/gpu=2,node=1", ReqTRES="cpu=4,gres/gpu=8,node=1"),
            row(JobID="300", State="COMPLETED", Eligible=str(T0 + 1300), Start=str(T0 + 5000),
                End=str(T0 + 8600), AllocTRES="cpu=4,gres/gpu=2,node=1", ReqTRES="cpu=4,gres/gpu=8,node=1")]
    rep, a = _rep(rows)
    assert rep["totals"]["jobs"] == 1
    qw = rep["queue_wait"]
    assert qw["all"]["n"] == 1 and qw["all"]["max_s"] == 600.0   # the first attempt's Start - Eligible
    assert [q["gpu_bucket"] for q in qw["by_partition_gpus"]] == ["5-8"]   # asked for 8
