"""``slurmkit logs`` / ``status`` / ``Job.stdout()`` on the real sandbox after slurmctld forgot
the jobs (MinJobAge lowered to 2 s for the test, restored after; slurmctld purges old jobs once a
minute): the ``-o`` file of a finished job and of each array task comes from the job's record,
written at submit, not from Slurm's default ``slurm-<id>.out``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from slurmkit.submit.api import Job
from slurmkit.submit.backend import CliBackend
from slurmkit.waiting import wait_until

from sandbox_jobs import submit
from sandbox_reconfigure import reconfigure

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(400)]


@pytest.fixture
def short_min_job_age(sandbox):
    """The sandbox's slurm.conf with ``MinJobAge=2`` while the test runs."""
    conf = sandbox.slurm_conf
    before = conf.read_text()
    assert "MinJobAge=300\n" in before
    conf.write_text(before.replace("MinJobAge=300\n", "MinJobAge=2\n"))
    try:
        reconfigure(sandbox)
        yield
    finally:
        conf.write_text(before)
        reconfigure(sandbox)


def test_logs_after_min_job_age(sandbox, short_min_job_age, tmp_path, monkeypatch):
    monkeypatch.setenv("SLURMKIT_JOBS_DIR", str(tmp_path / "jobs"))
    backend = CliBackend(sandbox.env())
    job = submit(sandbox, backend, tmp_path, "single-gpu", ["bash", "-c", "echo trained; echo warned >&2"],
                 output="train-%j.out", error="train-%j.err", signal_s=0)
    sets = [{"lr": 0.1}, {"lr": 0.01}]
    array = submit(sandbox, backend, tmp_path, "array", ["bash", "-c", "echo task $SLURM_ARRAY_TASK_ID lr={lr}"],
                   output="arr-%j.out", sets={"sets": json.dumps(sets)}, signal_s=0)
    assert job.wait(timeout=90, poll_s=1) == "COMPLETED"
    assert array.wait(timeout=90, poll_s=1) == "COMPLETED"

    def forgotten():
        known = [j for j in (job.id, f"{array.id}_0", f"{array.id}_1")
                 if backend.run(["scontrol", "show", "job", j], check=False).returncode == 0]
        return not known
    wait_until(forgotten, 200, 2, "slurmctld to purge the finished jobs")
    # Slurm's own answer names the default file, which does not exist
    assert not list(tmp_path.glob("slurm-*.out"))

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "slurmkit", *args], capture_output=True, text=True,
                              env={**os.environ, **sandbox.env()}, cwd="/", timeout=60)

    r = cli("logs", job.id)
    # the template sends the program's stderr to its output (and its task log); -e has the batch shell's
    assert (r.returncode, r.stdout, r.stderr) == (0, "trained\nwarned\n", "")
    err = (tmp_path / f"train-{job.id}.err").read_text()
    assert (Job(job.id, backend).stdout(), Job(job.id, backend).stderr()) == ("trained\nwarned\n", err)
    r = cli("logs", f"{array.id}_1")
    assert (r.returncode, r.stdout) == (0, "task 1 lr=0.01\n"), r.stderr
    r = cli("logs", array.id)
    assert (r.returncode, r.stdout) == (0, "task 0 lr=0.1\ntask 1 lr=0.01\n"), r.stderr
    assert r.stderr.count("==> ") == 2
    r = cli("status", array.id)
    assert r.returncode == 0 and " COMPLETED " in r.stdout and "  restarts=0  excluded=-  " in r.stdout, r.stderr
    r = cli("status", job.id, "--json")
    got = json.loads(r.stdout)
    assert (got["state"], got["restarts"], got["excluded_nodes"]) == ("COMPLETED", 0, []), r.stdout + r.stderr
