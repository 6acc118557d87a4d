"""The per-user job record (slurmkit.submit.jobrecord): Slurm's file name patterns expanded as
sbatch(1) "filename pattern" describes them, the record written and read back per cluster, and
``Job.stdout()`` / ``slurmkit logs`` reading the recorded file without asking Slurm (a backend that
knows no job: slurmctld past MinJobAge, sacct without the -o path)."""

from __future__ import annotations

import getpass
import os
import subprocess
import sys

import pytest

from slurmkit.submit import jobrecord
from slurmkit.submit.api import Job
from slurmkit.submit.jobrecord import JobRecord, expand
from slurmkit.submit.render import Option


@pytest.mark.parametrize(("pattern", "task", "raw", "want"), [
    ("train-%j.out", None, None, "train-417.out"),
    ("%x-%A_%a.out", 3, None, "demo-417_3.out"),
    ("%x-%A_%4a.out", 3, None, "demo-417_0003.out"),
    ("t-%j.out", 3, "420", "t-420.out"),
    ("100%%-%j-%s-%n-%t.out", None, None, "100%-417-batch-0-0.out"),
    ("%u.out", None, None, f"{getpass.getuser()}.out"),
    (r"keep\%j.out", None, None, "keep%j.out"),
])
def test_patterns_expand(pattern, task, raw, want):
    assert expand(pattern, "417", task, raw_id=raw, name="demo") == want


def test_unknown_until_the_job_runs():
    assert expand("%N.out", "417") is None
    assert expand("t-%j.out", "417", 3) is None      # an array task's own id: given when it starts


def test_record_from_plan_and_back(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURMKIT_JOBS_DIR", str(tmp_path / "jobs"))
    monkeypatch.setenv("SLURM_CONF", "/etc/slurm/a.conf")
    opts = [Option("job-name", "demo", "t"), Option("output", "logs/%x-%A_%a.out", "t"),
            Option("chdir", "run dir", "t"), Option("array", "0-2%1", "t")]
    rec = jobrecord.from_plan("417", opts, {"log_dir": "slurmkit-logs"}, "single-gpu", str(tmp_path))
    assert (rec.workdir, rec.tasks, rec.log_dir) == (f"{tmp_path}/run dir", (0, 1, 2),
                                                     f"{tmp_path}/run dir/slurmkit-logs/417")
    where = jobrecord.write(rec)
    assert where.startswith(f"{tmp_path}/jobs/") and where.endswith("/417.json")
    assert oct(os.stat(where).st_mode & 0o777) == "0o600"
    back = jobrecord.read("417_2")
    assert back == rec
    assert back.output_path(2) == f"{tmp_path}/run dir/logs/demo-417_2.out"
    assert back.error_path(2) == back.output_path(2)
    monkeypatch.setenv("SLURM_CONF", "/etc/slurm/b.conf")        # another cluster's job 417
    assert jobrecord.read("417") is None


def test_defaults_and_damaged_records(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURMKIT_JOBS_DIR", str(tmp_path))
    rec = JobRecord("9", "/w", error="/e/%j.err")
    assert (rec.output_path(), rec.error_path()) == ("/w/slurm-9.out", "/e/9.err")
    assert JobRecord("9", "/w", tasks=(0, 1)).output_path(1) == "/w/slurm-9_1.out"
    where = jobrecord.path("9")
    os.makedirs(os.path.dirname(where))
    for text in ("{", '{"slurmkit_job": 99, "job_id": "9"}', '{"slurmkit_job": 1, "nope": 1}'):
        with open(where, "w") as fh:
            fh.write(text)
        assert jobrecord.read("9") is None


class Forgetful:
    """A backend whose Slurm knows no job (scontrol: "Invalid job id specified", exit 1; sacct
    prints nothing)."""

    env: dict = {}

    def run(self, argv, check=True, input=None):
        return subprocess.CompletedProcess(argv, 1 if argv[0] == "scontrol" else 0, "", "")

    def states(self, ids):
        return {}


def test_stdout_from_the_record_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURMKIT_JOBS_DIR", str(tmp_path / "jobs"))
    (tmp_path / "train-417.out").write_text("step 1\n")
    (tmp_path / "train-417.err").write_text("warn\n")
    jobrecord.write(JobRecord("417", str(tmp_path), output="train-%j.out", error="train-%j.err"))
    job = Job("417", Forgetful())
    assert (job.stdout(), job.stderr()) == ("step 1\n", "warn\n")
    assert Job("418", Forgetful()).stdout() is None


def test_logs_of_an_array_from_the_record(tmp_path):
    env = {**os.environ, "SLURMKIT_JOBS_DIR": str(tmp_path / "jobs"), "SLURM_CONF": str(tmp_path / "none.conf"),
           "PATH": f"{tmp_path}/bin:{os.environ['PATH']}"}
    (tmp_path / "none.conf").write_text("")
    backend = type("B", (), {"env": {"SLURM_CONF": env["SLURM_CONF"]}})()     # the cluster `logs` asks
    jobrecord.write(JobRecord("417", str(tmp_path), output="a-%A_%a.out", tasks=(0, 1)), backend, env)
    (tmp_path / "a-417_0.out").write_text("task 0\n")
    (tmp_path / "a-417_1.out").write_text("task 1\n")
    # Slurm's commands that know no job: slurmctld and slurmdbd forgot it
    (tmp_path / "bin").mkdir()
    for tool, code in (("scontrol", 1), ("sacct", 0), ("squeue", 0)):
        (tmp_path / "bin" / tool).write_text(f"#!/bin/sh\nexit {code}\n")
        (tmp_path / "bin" / tool).chmod(0o755)

    def logs(job_id):
        return subprocess.run([sys.executable, "-m", "slurmkit", "logs", job_id], capture_output=True, text=True,
                              env=env, cwd="/", timeout=60)

    r = logs("417_1")
    assert (r.returncode, r.stdout, r.stderr) == (0, "task 1\n", "")
    r = logs("417")
    assert (r.returncode, r.stdout) == (0, "task 0\ntask 1\n")
    assert r.stderr == f"==> {tmp_path}/a-417_0.out <==\n==> {tmp_path}/a-417_1.out <==\n"

