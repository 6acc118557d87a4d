"""``slurmkit cancel`` on the real Slurm sandbox: a job, one array task and the whole array,
a signal to the batch shell (``--signal USR1 --full``), an ended job and an unknown id."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from slurmkit.slurm.commands import run
from slurmkit.waiting import wait_until

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(120)]


def _cancel(sandbox, *args):
    return subprocess.run([sys.executable, "-m", "slurmkit", "cancel", *args], capture_output=True, text=True,
                          env={**os.environ, **sandbox.env()}, timeout=60)


def _sbatch(sandbox, tmp_path, *args):
    return run(["sbatch", "--parsable", "-N1", "-t", "2", "-o", str(tmp_path / "%A_%a.out"), *args],
               env=sandbox.env()).stdout.strip().split(";")[0]


def _states(sandbox, job):
    """JobID -> State from sacct (``CANCELLED by 0`` -> ``CANCELLED``)."""
    out = run(["sacct", "-X", "-n", "-P", "-j", job, "-o", "JobID,State"], env=sandbox.env()).stdout
    return {jid: state.split()[0] for jid, state in (line.split("|") for line in out.splitlines() if "|" in line)}


def _running(sandbox, job):
    out = run(["squeue", "-h", "-j", job, "-o", "%T"], env=sandbox.env(), check=False).stdout.split()
    return bool(out) and all(s == "RUNNING" for s in out)


def test_cancel_job_and_array_tasks(sandbox, tmp_path):
    job = _sbatch(sandbox, tmp_path, "--wrap", "sleep 100")
    array = _sbatch(sandbox, tmp_path, "--array=1-3", "--wrap", "sleep 100")
    wait_until(lambda: _running(sandbox, job) and _running(sandbox, array), 30, 0.2, "the jobs to run")

    r = _cancel(sandbox, job, f"{array}_2")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [f"job {job}: cancelled", f"job {array}_2: cancelled"]
    wait_until(lambda: _states(sandbox, job).get(job) == "CANCELLED"
               and _states(sandbox, array).get(f"{array}_2") == "CANCELLED", 30, 0.2, "the cancels")
    assert _states(sandbox, array)[f"{array}_1"] == "RUNNING"

    r = _cancel(sandbox, array)
    assert r.returncode == 0, r.stderr
    wait_until(lambda: set(_states(sandbox, array).values()) == {"CANCELLED"}, 30, 0.2, "the array to end")
    assert set(_states(sandbox, array)) == {f"{array}_1", f"{array}_2", f"{array}_3"}

    r = _cancel(sandbox, job)      # ended: said, and left alone
    assert (r.returncode, r.stdout.strip()) == (0, f"job {job}: already ended (CANCELLED)")


def test_signal_reaches_the_batch_shell(sandbox, tmp_path):
    job = _sbatch(sandbox, tmp_path, "--wrap", "trap 'echo got USR1; exit 3' USR1; sleep 100 & wait")
    wait_until(lambda: _running(sandbox, job), 30, 0.2, "the job to run")
    r = _cancel(sandbox, "--signal", "sigusr1", "--full", job)
    assert (r.returncode, r.stdout.strip()) == (0, f"job {job}: sent USR1")
    wait_until(lambda: _states(sandbox, job).get(job) == "FAILED", 30, 0.2, "the trap's exit 3")
    assert (tmp_path / f"{job}_4294967294.out").read_text().strip() == "got USR1"


def test_unknown_and_bad_ids(sandbox):
    r = _cancel(sandbox, "999999")
    assert (r.returncode, r.stderr.strip()) == (1, "slurmkit: error: unknown job id(s): 999999 (not in squeue or sacct)")
    r = _cancel(sandbox, "12x")
    assert r.returncode == 2
    assert r.stderr.strip() == "slurmkit: error: JOBID: '12x' is not a job id (123, an array task 123_4, or 123_[1-3])"
    r = _cancel(sandbox, "--signal", "NOPE", "1")
    assert r.stderr.strip() == "slurmkit: error: --signal: 'NOPE' is not a signal name or number (e.g. USR1, SIGTERM, 10)"
