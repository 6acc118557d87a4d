"""The README's main job: `slurmkit sandbox demo` end to end on its own sandbox."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(1800)]


def test_demo_end_to_end(free_sandbox_ports):
    # its own sandbox (the demo installs hooks into its slurm.conf), on free ports
    root = Path(tempfile.mkdtemp(prefix="slurmkit-demo-"))
    cli = [sys.executable, "-m", "slurmkit", "sandbox"]
    try:
        res = subprocess.run(cli + ["demo", "--dir", str(root), "--no-install",
                                    "--port-base", str(free_sandbox_ports)],
                             capture_output=True, text=True, timeout=1700)
        out = res.stdout
        assert res.returncode == 0, out[-3000:] + res.stderr[-3000:]
        # the sick node is drained with slurmkit's reason
        assert re.search(r"n2 drained, reason: slurmkit: row_remap_pending GPU1 \(gres index 0, "
                         r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d\): 4 uncorrectable rows pending", out)
        # training preempted, requeued, resumed from its checkpoint, finished
        assert "slurmkit: time limit near: SIGUSR2 to the ranks to checkpoint, then requeue (restart 1 of at most 3)" in out
        step = int(re.search(r"preempted \(SIGUSR2\) at step (\d+)", out).group(1))
        assert f"restart 1: resumed from checkpoint at step {step}" in out
        assert "training done: 60 steps" in out
        assert "all_reduce_perf not found" in out
        # placement: never on n2; the 2-node jobs under one leaf
        rows = re.findall(r"^\s+(\S+)\s+job (\S+)\s+(\S+)\s+on (\S+)\s+leaf switch\(es\): (.+)$", out, re.M)
        assert {r[0] for r in rows} == {"nccl-tests", "tiny-train", "sweep", "will-fail"}
        for name, _job, state, nodes, leaves in rows:
            assert "n2" not in nodes and "," not in leaves, (name, nodes, leaves)
        assert dict((r[0], r[2]) for r in rows)["will-fail"] == "FAILED"
        # the report: real accounting, measured energy from the hooks' spool
        report = json.loads((root / "demo" / "report" / "weekly.json").read_text())
        totals = report["totals"]
        assert totals["jobs"] >= 6 and totals["gpu_hours"] > 0
        assert totals["energy_kwh_by_source"]["measured"] > 0
        users = {u["user"] for u in report["by_user"]}
        assert "root" in users
        assert (root / "demo" / "report" / "weekly.html").stat().st_size > 10_000
    finally:
        subprocess.run(cli + ["down", "--dir", str(root), "--purge"], capture_output=True, timeout=120)


def test_job_story_says_state_reason_drains_and_the_output_tail(sandbox, tmp_path):
    # what the demo prints when its training job is stuck: a held job, a drained node, its output
    from slurmkit.sandbox.demo import Demo

    demo = Demo(sandbox)
    script = tmp_path / "held.sh"
    script.write_text("#!/bin/bash\ntrue\n")
    job = demo.slurm("sbatch", "--parsable", "--hold", "-o", tmp_path / "held.out", script).stdout.strip().split(";")[0]
    out = tmp_path / "held.out"
    out.write_text("W1206 06:01:07.591000 23471 torch/distributed/run.py:874] noise\n"
                   + "".join(f"line {i}\n" for i in range(20)))
    demo.slurm("scontrol", "update", "nodename=n3", "state=drain", "reason=test: story")
    try:
        story = demo.job_story(job, out, lines=3)
    finally:
        demo.slurm("scancel", job, check=False)
        demo.slurm("scontrol", "update", "nodename=n3", "state=resume", check=False)
    assert "JobState=PENDING" in story and "Reason=JobHeldUser" in story, story
    assert "n3 drained test: story" in story, story
    assert story.endswith("(last 3 lines):\n      line 17\n      line 18\n      line 19"), story
    # no output yet, and a job slurmctld no longer knows
    assert story.count("torch/distributed") == 0
    gone = demo.job_story("999999", tmp_path / "none.out")
    assert "job unknown to slurmctld" in gone or "Invalid job id" in gone, gone
    assert gone.endswith("none.out: no output yet"), gone
