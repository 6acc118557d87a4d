"""``slurmkit logs JOBID --rank N`` on the real sandbox: a 2-node torchrun job's ranks link their
torchrun logs (``<log_dir>/<job>/torchrun-<node>-restart0/<run>/attempt_0/<local rank>/stdout.log``)
as ``rank<N>.out`` / ``.err``, and the command prints one rank's."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from slurmkit.submit.backend import CliBackend

from sandbox_jobs import submit

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(180)]

PROGRAM = """
import os, sys
print("out of rank", os.environ["RANK"], flush=True)
print("err of rank", os.environ["RANK"], file=sys.stderr)
"""


def test_one_rank_in_one_step(sandbox, tmp_path):
    prog = tmp_path / "ranks.py"
    prog.write_text(PROGRAM)
    backend = CliBackend(sandbox.env())
    job = submit(sandbox, backend, tmp_path, "torchrun", [sys.executable, prog], nodes=2, gpus_per_node=2,
                 time="5")
    assert job.wait(timeout=120) == "COMPLETED"
    folder = tmp_path / "slurmkit-logs" / job.id
    assert sorted(p.name for p in folder.glob("rank*")) == [f"rank{r}.{e}" for r in range(4) for e in ("err", "out")]
    link = os.readlink(folder / "rank3.out")
    assert link.startswith("torchrun-n") and link.endswith("/attempt_0/1/stdout.log")

    def logs(*args):
        return subprocess.run([sys.executable, "-m", "slurmkit", "logs", job.id, *args], capture_output=True,
                              text=True, env={**os.environ, **sandbox.env()}, cwd="/", timeout=60)

    r = logs("--rank", "3")
    assert (r.returncode, r.stdout, r.stderr) == (0, "out of rank 3\n", "err of rank 3\n")
    r = logs("--rank", "4")
    assert r.returncode == 1
    assert r.stderr.strip() == f"slurmkit: error: job {job.id}: no log of rank 4 in {folder}; ranks with logs: 0, 1, 2, 3"
    r = logs("--rank", "0", "--log-dir", str(tmp_path / "elsewhere"))
    assert r.stderr.strip() == (f"slurmkit: error: job {job.id}: no log folder {tmp_path}/elsewhere/{job.id} "
                                "(a template's log_dir elsewhere? give --log-dir)")
