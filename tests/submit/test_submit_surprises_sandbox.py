"""No surprise submissions on the real sandbox: a trailing ``--dry-run`` warns and reaches the
program of a job that runs in a ``-D`` directory slurmkit created; a 2-node srun job's ranks get
the job's ``MASTER_PORT``; a 2-node torchrun job labels its ranks' lines by node."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from slurmkit.submit.api import Job
from slurmkit.submit.backend import CliBackend

from sandbox_jobs import submit

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(300)]


def test_trailing_dry_run_warns_and_a_missing_workdir_is_created(sandbox, tmp_path):
    env = {**os.environ, **sandbox.env()}
    workdir = tmp_path / "new" / "run"
    r = subprocess.run([sys.executable, "-m", "slurmkit", "submit", "single-gpu", "-D", str(workdir), "-o",
                        "out-%j.out", "-t", "5", sys.executable, "-c", "import os, sys; print(os.getcwd(), sys.argv)",
                        "--dry-run"], capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr.startswith("slurmkit: warning: --dry-run comes after the program"), r.stderr
    job = Job(r.stdout.strip(), CliBackend(sandbox.env()))
    assert job.wait(timeout=90, poll_s=1) == "COMPLETED"
    assert (workdir / f"out-{job.id}.out").read_text() == f"{workdir} ['-c', '--dry-run']\n"


def test_the_jobs_master_port_is_kept_and_torchrun_labels_ranks_by_node(sandbox, tmp_path):
    with socket.socket() as s:
        s.bind(("", 0))
        port = s.getsockname()[1]
    backend = CliBackend(sandbox.env())
    prog = "import os; print('port', os.environ['MASTER_PORT'], 'rank', os.environ['RANK'], flush=True)"
    # srun's ranks read MASTER_PORT as the script exports it: the job's own
    job = submit(sandbox, backend, tmp_path, "srun", [sys.executable, "-c", prog], nodes=2, gpus_per_node=1,
                 time="5", job_env={"MASTER_PORT": str(port)}, switches=False)
    assert job.wait(timeout=150, poll_s=1) == "COMPLETED"
    out = (tmp_path / f"job-{job.id}.out").read_text()
    assert f"port {port} rank 0" in out, out[-3000:]
    # torchrun: rendezvous at the job's port (its workers' MASTER_PORT is torchrun's own store's)
    job = submit(sandbox, backend, tmp_path, "torchrun", [sys.executable, "-c", prog], nodes=2, gpus_per_node=1,
                 time="5", job_env={"MASTER_PORT": str(port)}, sets={"node_prefix": "true"}, switches=False)
    out_path = tmp_path / f"job-{job.id}.out"
    assert job.wait(timeout=150, poll_s=1) == "COMPLETED", out_path.read_text()[-3000:]
    nodes = backend.run(["sacct", "-X", "-n", "-P", "-j", job.id, "-o", "NodeList"]).stdout.strip()
    names = backend.run(["scontrol", "show", "hostnames", nodes]).stdout.split()
    out = out_path.read_text()
    for rank, node in enumerate(names):
        assert f"[{node}:0]:port " in out and f" rank {rank}\n" in out, out[-3000:]
    assert "[default0]" not in out
