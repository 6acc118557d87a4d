"""No surprise submissions: a slurmkit option after the program warns (the job is the program's
to read it), a missing ``--chdir`` is created (a file in the way is refused), a variable the
script computes is refused when the job sets it (``MASTER_PORT`` is kept), torchrun's rank
prefixes can name the node, and a refusal of sbatch names the numbers the job asked for and where
each came from. sbatch's refusal text is Slurm 24.11's, as the sandbox's sbatch prints it."""

from __future__ import annotations

import pytest

from slurmkit.errors import UsageError
from slurmkit.slurm.commands import SlurmError
from slurmkit.submit import api, render

from test_submit_options import cli, plan_for


def test_a_slurmkit_option_after_the_program_warns_and_names_the_dashdash_form():
    r = cli("submit", "single-gpu", "--dry-run", "python", "train.py", "--dry-run", "--time=5", "-t5", "--lr", "1")
    assert r.returncode == 0 and "python train.py --dry-run --time=5 -t5 --lr 1" in r.stdout
    lines = r.stderr.splitlines()
    assert [ln.split(" comes after")[0] for ln in lines] == ["slurmkit: warning: --dry-run", "slurmkit: warning: --time",
                                                             "slurmkit: warning: -t"]
    assert lines[0] == ("slurmkit: warning: --dry-run comes after the program (python), so it is the program's argument, "
                        "not slurmkit's; put slurmkit's --dry-run before the program, or write 'slurmkit submit "
                        "TEMPLATE [options] -- python ...' to pass it on without this warning")
    r = cli("submit", "single-gpu", "--dry-run", "--", "python", "train.py", "--dry-run")
    assert r.returncode == 0 and r.stderr == ""


class Queue:
    """A backend whose sbatch queues job 42, or refuses as Slurm does (``refuse``)."""

    env: dict = {}

    def __init__(self, refuse=None):
        self.refuse, self.scripts = refuse, []

    def submit(self, script, test_only=False):
        self.scripts.append(script)
        if self.refuse:
            raise SlurmError(f"sbatch failed (exit 1): {self.refuse}", ["sbatch", "--parsable"], returncode=1,
                             stderr=self.refuse)
        return "42"

    def idle_nodes(self, partition):
        return []


def test_a_missing_working_directory_is_created(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    job = api.submit("single-gpu", ["true"], backend=Queue(), chdir="runs/a b", output="logs/%j.out")
    assert job.id == "42" and (tmp_path / "runs" / "a b" / "logs").is_dir()
    (tmp_path / "afile").write_text("")
    with pytest.raises(UsageError, match=f"--chdir afile/x: {tmp_path}/afile is a file, not a directory"):
        api.submit("single-gpu", ["true"], backend=Queue(), chdir="afile/x")


def test_variables_the_script_computes_are_refused_master_port_is_kept(tmp_path):
    with pytest.raises(UsageError, match=r"^RANK \(CLI --env \(expanded on the node\)\): slurmkit computes RANK"):
        plan_for("torchrun", job_env=("RANK=3",))
    env = tmp_path / "job.env"
    env.write_text("export OMP_NUM_THREADS=8\nexport WORLD_SIZE=16\n")
    with pytest.raises(UsageError, match=rf"^WORLD_SIZE \(--env-file {env}:2 \(as written\)\): slurmkit computes"):
        render.plan(render.SubmitRequest(template="torchrun", command=("python", "t.py"), env_file=str(env)),
                    *_facts_and_template("torchrun"), env_file=(str(env), env.read_text()))
    script = render.render(plan_for("torchrun", job_env=("MASTER_PORT=6000",)))
    assert "export MASTER_PORT=6000\n" in script and "# MASTER_PORT: the job's own (--env / --env-file), kept.\n" in script
    assert "MASTER_PORT=$((" not in script and "slurmkit_free_port \"$MASTER_PORT\"" not in script
    assert "MASTER_PORT=$(( 12000 + SLURM_JOB_ID % 20000 ))" in render.render(plan_for("torchrun"))


def _facts_and_template(name):
    from slurmkit.submit import site, templates

    return site.site_facts(site.load("sandbox"), source="sandbox"), templates.get(name)


def test_torchrun_rank_prefixes_can_name_the_node():
    assert '--tee=3 --role="$SLURMD_NODENAME:" \\\n' in render.render(plan_for("torchrun", sets={"node_prefix": "true"}))
    assert "--role" not in render.render(plan_for("torchrun"))


def test_a_refusal_of_sbatch_names_the_numbers_the_job_asked_for():
    said = "sbatch: error: Batch job submission failed: Requested node configuration is not available"
    with pytest.raises(SlurmError) as err:
        api.submit("torchrun", ["python", "t.py"], backend=Queue(refuse=said), nodes=2, site="sandbox")
    msg = str(err.value)
    assert msg.startswith(f"sbatch failed (exit 1): {said}. The job asked for: --partition=gpu (")
    assert "--nodes=2 (CLI --nodes)" in msg
    assert "--gpus-per-node=h100:4 (profile node_types.sandbox-h100x4.gpu_count (all GPUs of the node type)" in msg
    assert "--cpus-per-gpu=1 (profile submit.cpus_per_gpu)" in msg
    assert err.value.returncode == 1
