"""``--cpus-per-gpu 2`` on the real sandbox: a torchrun job's ranks each run on 2 CPUs, with
``SLURM_CPUS_PER_TASK=2`` and ``OMP_NUM_THREADS=2`` (torchrun would set 1); a job whose
environment sets ``OMP_NUM_THREADS`` keeps it."""

from __future__ import annotations

import json
import sys

import pytest

from slurmkit.submit.backend import CliBackend

from sandbox_jobs import submit

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(240)]

PROGRAM = """
import json, os, sys
rank = os.environ["RANK"]
with open(os.path.join(sys.argv[1], f"cpus-{rank}.json"), "w") as fh:
    json.dump({"cpus": sorted(os.sched_getaffinity(0)), "omp": os.environ.get("OMP_NUM_THREADS"),
               "per_task": os.environ.get("SLURM_CPUS_PER_TASK")}, fh)
"""


def test_cpus_per_gpu_reaches_every_rank(sandbox, tmp_path):
    backend = CliBackend(sandbox.env())
    prog = tmp_path / "cpus.py"
    prog.write_text(PROGRAM)
    job = submit(sandbox, backend, tmp_path, "torchrun", [sys.executable, prog, tmp_path], gpus_per_node=2,
                 cpus_per_gpu=2, time="5")
    assert job.wait(timeout=120, poll_s=1) == "COMPLETED", (tmp_path / f"job-{job.id}.out").read_text()
    assert "CpusPerTres=gres:gpu:2" in backend.run(["scontrol", "show", "job", job.id]).stdout
    ranks = [json.loads((tmp_path / f"cpus-{r}.json").read_text()) for r in range(2)]
    for got in ranks:
        assert (len(got["cpus"]), got["omp"], got["per_task"]) == (2, "2", "2"), ranks
    # the job's own OMP_NUM_THREADS is kept
    kept = tmp_path / "kept"
    kept.mkdir()
    job = submit(sandbox, backend, kept, "torchrun", [sys.executable, prog, kept], gpus_per_node=2,
                 cpus_per_gpu=2, time="5", job_env={"OMP_NUM_THREADS": "3"})
    assert job.wait(timeout=120, poll_s=1) == "COMPLETED"
    assert [json.loads((kept / f"cpus-{r}.json").read_text())["omp"] for r in range(2)] == ["3", "3"]
