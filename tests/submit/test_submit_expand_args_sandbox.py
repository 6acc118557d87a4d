"""``--expand-args`` on the real sandbox: a 2-node torchrun job's ranks get ``run-$SLURM_JOB_ID``,
``${RANK}`` and an env-file variable holding spaces and quotes expanded, each rank its own,
and torchrun's agent runs under the program's Python (not python3)."""

from __future__ import annotations

import json
import sys

import pytest

from slurmkit.submit.backend import CliBackend

from sandbox_jobs import submit

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(240)]

PROGRAM = """
import json, os, sys
with open(os.path.join(os.environ["OUT"], "args-%s.json" % os.environ["RANK"]), "w") as fh:
    json.dump(sys.argv[1:], fh)
"""


def test_job_time_values_reach_the_program_expanded(sandbox, tmp_path):
    backend = CliBackend(sandbox.env())
    env_file = tmp_path / "job.env"
    env_file.write_text("export CONFIG_FILE=\"/cfg dir/it's \\\"x\\\".yaml\"\n")
    prog = tmp_path / "args.py"
    prog.write_text(PROGRAM)
    job = submit(sandbox, backend, tmp_path, "torchrun",
                 [sys.executable, prog, "--run_name=run-$SLURM_JOB_ID", "--rank=${RANK}", "--config-file",
                  "$CONFIG_FILE", "*", "$(id)"],
                 nodes=2, gpus_per_node=1, time="5", expand_args=True, env_file=str(env_file),
                 job_env={"OUT": str(tmp_path)}, switches=False)
    assert job.wait(timeout=150, poll_s=1) == "COMPLETED", (tmp_path / f"job-{job.id}.out").read_text()[-3000:]
    for rank in (0, 1):
        got = json.loads((tmp_path / f"args-{rank}.json").read_text())
        assert got == [f"--run_name=run-{job.id}", f"--rank={rank}", "--config-file", "/cfg dir/it's \"x\".yaml",
                       "*", "$(id)"]
    script = backend.run(["scontrol", "write", "batch_script", job.id, "-"]).stdout
    assert f"{sys.executable} -c \"$SLURMKIT_TORCHRUN\"" in script.replace("'", "")
