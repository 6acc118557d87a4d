"""CPUs per job: ``--cpus-per-gpu`` / ``--cpus-per-task`` replace the profile's CPUs per GPU in
the script, and the bind wrapper (the prelude's ``SLURMKIT_BIND``) gives each rank that many CPUs,
its GPU's own first, with ``SLURM_CPUS_PER_TASK`` and (unless the job sets it) ``OMP_NUM_THREADS``
set to the count. The wrapper runs here under bash with the GPU/CPU maps a profile gives and
this process's own CPUs as the task's (taskset reads them back from /proc/self/status)."""

from __future__ import annotations

import os
import subprocess

import pytest

from slurmkit.errors import UsageError
from slurmkit.submit import render

from test_submit_options import cli, options, plan_for


def test_profile_cpus_per_gpu_by_default_and_the_cli_overrides_it():
    p = plan_for("torchrun")
    assert options(p)["cpus-per-gpu"] == "1"                     # site/sandbox.toml submit.cpus_per_gpu
    assert {v.name: v.value for v in p.env}["SLURMKIT_CPUS_PER_RANK"] == "1"
    p = plan_for("torchrun", cpus_per_gpu=2)
    assert options(p)["cpus-per-gpu"] == "2"
    assert [(v.value, v.source) for v in p.env if v.name == "SLURMKIT_CPUS_PER_RANK"] == \
        [("2", "CLI --cpus-per-gpu (one GPU per rank)")]


def test_cpus_per_task_replaces_cpus_per_gpu_and_is_shared_by_a_launchers_ranks():
    p = plan_for("torchrun", gpus_per_node=4, cpus_per_task=8)
    assert "cpus-per-gpu" not in options(p) and options(p)["cpus-per-task"] == "8"
    assert [(v.value, v.source) for v in p.env if v.name == "SLURMKIT_CPUS_PER_RANK"] == \
        [("2", "CLI --cpus-per-task 8 / 4 ranks per task")]
    p = plan_for("srun", gpus_per_node=4, cpus_per_task=3)           # a task per GPU: per rank
    assert {v.name: v.value for v in p.env}["SLURMKIT_CPUS_PER_RANK"] == "3"


@pytest.mark.parametrize("kw, needle", [
    ({"cpus_per_gpu": 2, "cpus_per_task": 4}, "give --cpus-per-gpu or --cpus-per-task, not both"),
    ({"cpus_per_gpu": 0}, "give at least 1 CPU"),
    ({"cpus_per_task": 2, "gpus_per_node": 4}, "template torchrun runs 4 ranks in each node's task"),
])
def test_bad_cpu_counts_are_refused(kw, needle):
    with pytest.raises(UsageError, match=needle):
        plan_for("torchrun", **kw)


def test_sbatch_pass_through_of_cpu_options_names_the_flag():
    r = cli("submit", "torchrun", "--dry-run", "--sbatch=--cpus-per-task=4", "--", "python", "t.py")
    assert r.returncode == 2
    assert "slurmkit sets --cpus-per-task itself; use --cpus-per-task" in r.stderr
    r = cli("submit", "torchrun", "--dry-run", "--cpus-per-gpu", "2", "--", "python", "t.py")
    assert r.returncode == 0 and "#SBATCH --cpus-per-gpu=2\n" in r.stdout and "export SLURMKIT_CPUS_PER_RANK=2\n" in r.stdout


def _bind_wrapper() -> str:
    p = plan_for("torchrun", cpus_per_gpu=2)
    script = render.render(p)
    start = script.index("export SLURMKIT_BIND=")
    end = script.index('"$@"\'\n', script.index("exec taskset -c", start)) + 5
    return script[start:end]


@pytest.mark.parametrize("gpu_cpus, local_rank, per_rank, omp_user, want", [
    ("{a} {b}", 0, "2", "", ("2", "2", "{a},{b}")),        # one CPU by its GPU, filled up from the task's
    ("{a},{b} {a},{b}", 1, "1", "", ("1", "1", "{b}")),    # two GPUs share CPUs: each its own slice
    ("{a},{b} {a},{b}", 0, "1", "", ("1", "1", "{a}")),
    ("{a} {b}", 1, "", "", ("1", "1", "{b}")),               # no count: the GPU's CPUs, as before
    ("{a} {b}", 0, "2", "set", ("", "2", "{a},{b}")),        # the job's OMP_NUM_THREADS is kept
])
def test_each_rank_gets_its_cpus(gpu_cpus, local_rank, per_rank, omp_user, want):
    a, b = sorted(os.sched_getaffinity(0))[:2]
    env = {"PATH": os.environ["PATH"], "SLURMKIT_GPU_CPUS": gpu_cpus.format(a=a, b=b), "SLURM_STEP_GPUS": "0,1",
           "LOCAL_RANK": str(local_rank), "SLURMKIT_CPUS_PER_RANK": per_rank, "SLURMKIT_OMP_USER": omp_user}
    probe = 'echo "${OMP_NUM_THREADS:-}|$SLURM_CPUS_PER_TASK|$(taskset -cp $$ | sed "s/.*: //")"'
    script = _bind_wrapper() + '\nbash -c "$SLURMKIT_BIND" slurmkit-bind bash -c \'' + probe + "'\n"
    out = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=30,
                         preexec_fn=lambda: os.sched_setaffinity(0, {a, b}))
    omp, count, cpus = out.stdout.strip().split("|")
    assert (omp, count, cpus.replace("-", ",")) == tuple(w.format(a=a, b=b) for w in want), out.stderr
