"""``report jobs`` on a requeued job's attempts (``sacct -D`` prints a row per attempt, each with
its steps). Input: the corpus's Habrok capture (sacct/habrok_gpu_cluster_parsable2.psv) with an
earlier attempt of GPU job 7946767 printed before it (``capture_edit.with_earlier_attempt``, a
labelled edit: REQUEUED after an hour, its steps with 10 minutes of CPU and 1 GiB of GPU memory),
once as captured and once without the Submit and Start fields (``capture_edit.without_fields``:
a capture taken with ``sacct -o`` lacking them)."""

from __future__ import annotations

import json

import pytest
from capture_edit import with_earlier_attempt, without_fields
from click.testing import CliRunner

from slurmkit.cli import cli

EARLIER = {"Start": "2024-04-04T22:18:37", "End": "2024-04-04T23:18:37", "Elapsed": "01:00:00",
           "TotalCPU": "00:10:00",
           "TRESUsageInMax": "cpu=00:10:00,energy=0,fs/disk=1,gres/gpumem=1048576K,gres/gpuutil=5,mem=1024K,pages=0,vmem=1024K"}


@pytest.fixture()
def requeued(corpus, tmp_path):
    return with_earlier_attempt(corpus / "sacct/habrok_gpu_cluster_parsable2.psv", tmp_path / "habrok_requeued.psv",
                                "7946767", edits=EARLIER)


def _jobs(capture, *args):
    res = CliRunner().invoke(cli, ["report", "jobs", "--from-sacct", str(capture), "--tz", "UTC", *args])
    assert res.exit_code == 0, res.output
    return res


def test_attempts_told_apart_by_their_start_are_listed_each(requeued):
    res = _jobs(requeued, "7946767", "--format", "json")
    rows = json.loads(res.stdout)["jobs"]
    assert [(r["state"], r["elapsed_s"]) for r in rows] == [("REQUEUED", 3600.0), ("COMPLETED", 41_003.0)]
    assert "attempt" not in res.stderr


def test_without_submit_and_start_the_last_attempt_is_the_job_and_a_warning_says_so(requeued, tmp_path):
    """The two rows of 7946767 have one key and no time to tell them apart: the job is its last
    row (COMPLETED, 11:23:23, its own steps' 7.6 GiB of GPU memory, not the earlier attempt's
    1 GiB), as sacct without -D prints it, and stderr and data_quality say which rows were left
    out; the first row (REQUEUED) was kept before, with the wrong state, and said only as "a
    repeated JobID/Submit/Start"."""
    src = without_fields(requeued, tmp_path / "habrok_requeued_no_submit_start.psv", {"Submit", "Start"})
    res = _jobs(src, "7946767", "--format", "json")
    out = json.loads(res.stdout)
    rows = out["jobs"]
    assert [(r["state"], r["elapsed_s"]) for r in rows] == [("COMPLETED", 41_003.0)]
    assert rows[0]["gpu_mem_mib"] == pytest.approx(7954688 / 1024)
    assert ("3 row(s) of requeued jobs' earlier attempts (allocation and step rows) not listed: the capture has no "
            "Submit or Start to tell a job's attempts apart, so each job is its last row, as sacct without -D prints it (JobID 7946767: 2 rows "
            "(REQUEUED, COMPLETED), the last kept)") in res.stderr
    dq = out["data_quality"]
    why = ("earlier attempt of a requeued job, not told apart (no Submit or Start in the capture; the job's last row "
           "kept)")
    assert dq["skipped_reasons"][why] == 3          # the attempt's row and its .batch and .extern
    assert [p["detail"] for p in dq["problems"] if p["reason"] == why] == [
        "JobID 7946767: 2 rows (REQUEUED, COMPLETED), the last kept"]
    # every other job as before (the 7 rows without any time are not listed either way)
    every = json.loads(_jobs(src, "--format", "json").stdout)["jobs"]
    assert len(every) == 93 and sum(r["job_id"] == "7946767" for r in every) == 1
