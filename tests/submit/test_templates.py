"""The job template catalog, parameter validation and the submit/templates CLI (no Slurm needed)."""

import subprocess
import sys

import pytest
from click.testing import CliRunner

from slurmkit.cli import cli
from slurmkit.submit import render, site, templates
from slurmkit.submit.templates import TemplateError, parse_header

EXPECTED = {"torchrun", "srun", "deepspeed", "nccl-tests", "single-gpu", "array"}


def run_cli(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def plan_for(name, command=("python3", "train.py"), **kw):
    facts = site.site_facts(site.load("sandbox"), source="sandbox")
    return render.plan(render.SubmitRequest(template=name, command=command, **kw), facts, templates.get(name))


def test_catalog_has_every_launcher_with_declared_params():
    assert EXPECTED <= set(templates.names())
    for name in EXPECTED:
        t = templates.get(name)
        assert t.description and t.tasks in templates.TASK_SHAPES
        assert "log_dir" in t.params and "container_image" in t.params


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_template_renders_valid_bash_with_the_invariants(name):
    kw = {"sets": {"sets": '[{"lr": 0.1}, {"lr": 0.2}]'}} if name == "array" else {}
    nodes = 1 if templates.get(name).tasks == "single" else 2
    text = render.render(plan_for(name, nodes=nodes, checkpoint_signal="USR1", **kw))
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0
    assert "set -euo pipefail" in text
    assert "export CUDA_DEVICE_ORDER=PCI_BUS_ID" in text
    assert "export SLURMKIT_RESTART_COUNT=${SLURM_RESTART_COUNT:-0}" in text
    assert "#SBATCH --signal=B:USR2@120" in text and "#SBATCH --requeue" in text
    assert "slurmkit_payload &" in text and 'wait "$slurmkit_pid"' in text
    assert 'scancel --signal=USR1 "$SLURM_JOB_ID"' in text and "--signal=USR2 " not in text
    # GPUs are chosen by Slurm's own index (SLURM_STEP_GPUS); only deepspeed's node function reads
    # CUDA_VISIBLE_DEVICES, to hand Slurm's assignment to deepspeed's --include
    import re

    rest = re.sub(r"^slurmkit_node\(\) \{\n.*?^\}\n", "", text, flags=re.M | re.S) if name == "deepspeed" else text
    assert "$CUDA_VISIBLE_DEVICES" not in rest and "${CUDA_VISIBLE_DEVICES" not in rest
    assert "NCCL_DEBUG" not in text
    assert "localhost" not in text and "127.0.0.1" not in text


def test_torchrun_one_task_per_node_and_c10d_at_first_node_addr():
    text = render.render(plan_for("torchrun", nodes=2))
    assert "#SBATCH --ntasks-per-node=1" in text
    assert "--rdzv-backend=c10d" in text and '--local-addr="$addr"' in text
    # the agent neither forwards nor dies of TERM (Slurm signals every worker itself)
    assert "--signals-to-handle=SIGINT,SIGHUP,SIGQUIT " in text and "trap '' TERM\n" in text
    assert "--no-python" in text
    assert "MASTER_PORT=$(( 12000 + SLURM_JOB_ID % 20000 ))" in text
    assert "#SBATCH --switches=1@5:00" in text


def test_srun_one_task_per_gpu_seeing_all_node_gpus():
    p = plan_for("srun", nodes=2, gpus_per_node=3)
    text = render.render(p)
    assert "#SBATCH --ntasks-per-node=3" in text and "#SBATCH --gpu-bind" not in text
    assert "RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID WORLD_SIZE=$SLURM_NTASKS" in text


@pytest.mark.parametrize("kw", [{}, {"signal_s": 0, "checkpoint_signal": "USR1"}, {"checkpoint_signal": "none"}])
def test_without_a_checkpoint_signal_no_signal_trap_nor_requeue(kw):
    # the default, --preempt-warning 0, or 'none': Slurm's own time limit, as plain sbatch
    text = render.render(plan_for("single-gpu", **kw))
    assert "--signal" not in text and "trap slurmkit_on" not in text and "--requeue" not in text
    assert "slurmkit_payload || slurmkit_rc=$?" in text
    assert 'grep -q "PreemptTime=[0-9]"' in text     # Slurm's preemption still requeues


def test_array_sets_become_array_with_throttle_and_filled_commands():
    p = plan_for("array", command=("python3", "t.py", "--lr={lr}"),
                 sets={"sets": '[{"lr": 0.1}, {"lr": 0.01}, {"lr": 0.001}]', "throttle": "2"})
    text = render.render(p)
    assert "#SBATCH --array=0-2%2" in text
    assert "SLURMKIT_CMD=(python3 t.py --lr=0.01)" in text
    assert "export SLURMKIT_PARAM_LR=0.001" in text


def test_set_validation_names_valid_params_and_converts_types():
    t = templates.get("torchrun")
    with pytest.raises(TemplateError, match="valid: .*python"):
        t.resolve({"pyhton": "x"})
    assert t.param_names() == ["container_image", "container_mounts", "log_dir", "max_restarts", "node_prefix",
                               "python", "shutdown_timeout"]
    with pytest.raises(TemplateError) as err:
        t.resolve({"max_restart": "2"})
    assert str(err.value) == ("--set: max_restart: template 'torchrun' has no such parameter (did you mean "
                              "max_restarts?); valid: container_image, container_mounts, log_dir, max_restarts, "
                              "node_prefix, python, shutdown_timeout")
    with pytest.raises(TemplateError) as err:
        t.resolve(values={"max_restarts": 2})
    assert str(err.value) == "params: max_restarts: max_restarts is not a template parameter: give it as the keyword max_restarts="
    assert t.resolve({"shutdown_timeout": "90"})["shutdown_timeout"] == 90
    with pytest.raises(TemplateError, match="shutdown_timeout"):
        t.resolve({"shutdown_timeout": "soon"})
    with pytest.raises(TemplateError, match="JSON list"):
        templates.get("array").resolve({"sets": '{"lr": 1}'})


def test_container_refused_when_site_disables_it():
    with pytest.raises(TemplateError, match="submit.container"):
        plan_for("torchrun", sets={"container_image": "nvcr.io/nvidia/pytorch:24.01-py3"})


def test_header_errors_name_the_file():
    with pytest.raises(TemplateError, match="x.j2:1"):
        parse_header("x", "#!/bin/bash\n", "x.j2")
    with pytest.raises(TemplateError, match="tasks"):
        parse_header("x", '{#- slurmkit\ntasks = "many"\n-#}\n', "x.j2")


def test_unknown_template_lists_known():
    with pytest.raises(TemplateError, match="known: .*torchrun"):
        templates.get("tourchrun")


def test_cli_dry_run_prints_script_and_explain_names_sources():
    res = run_cli("submit", "torchrun", "-N", "2", "--name", 'my "job" #1', "--dry-run", "--", "python3", "t.py")
    assert res.exit_code == 0
    assert res.output.startswith("#!/bin/bash\n")
    assert '#SBATCH --job-name="my \\"job\\" #1"' in res.output
    res = run_cli("submit", "torchrun", "-N", "2", "--explain", "--", "python3", "t.py")
    assert res.exit_code == 0
    assert "profile submit.cpus_per_gpu" in res.output and "NCCL_IB_HCA" in res.output
    assert "CLI --nodes" in res.output and "MASTER_ADDR" in res.output


@pytest.mark.parametrize("args,needle", [
    (["submit", "torchrun", "--set", "bogus=1", "--", "x"], "valid: "),
    (["submit", "torchrun", "--set", "novalue", "--", "x"], "key=value"),
    (["submit", "torchrun", "--name", "a\nb", "--dry-run", "--", "x"], "newline"),
    (["submit", "nosuch", "--", "x"], "unknown template"),
    (["submit", "single-gpu", "-N", "2", "--", "x"], "one node"),
    (["submit", "torchrun", "--gpus-per-node", "9", "--", "x"], "has 4 GPUs"),
    (["submit", "torchrun", "--partition", "cpu", "--", "x"], "partition 'cpu'"),
    (["submit", "torchrun", "--dry-run"], "needs a command"),
    (["templates", "show", "nosuch"], "unknown template"),
    (["submit", "torchrun", "--site", "/nonexistent/x.toml", "--dry-run", "--", "x"], "/nonexistent/x.toml"),
    (["status", "abc"], "not a job id"),
])
def test_cli_bad_input_exits_2_with_message(args, needle):
    proc = subprocess.run([sys.executable, "-m", "slurmkit", *args], capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr
    assert needle in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("slurmkit: error: ") and proc.stderr.count("\n") == 1, proc.stderr


def test_cli_slurm_trouble_exits_1_with_one_line():
    # no Slurm here: squeue fails; with one, the id is unknown: either way exit 1, one line
    proc = subprocess.run([sys.executable, "-m", "slurmkit", "status", "999999999"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("slurmkit: error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stdout == ""


def test_templates_list_and_show():
    res = run_cli("templates", "list")
    assert all(name in res.output for name in EXPECTED)
    res = run_cli("templates", "show", "torchrun")
    assert "shutdown_timeout = 60" in res.output and "MASTER_ADDR" in res.output


def test_container_and_rendezvous_interface_when_the_site_sets_them():
    import tomllib
    from pathlib import Path

    with open(Path(__file__).resolve().parents[2] / "site" / "sandbox.toml", "rb") as fh:
        prof = tomllib.load(fh)
    prof["submit"] = {**prof.get("submit", {}), "container": True, "rendezvous_interface": "ib0"}
    from slurmkit.profile import load_profile_data

    facts = site.site_facts(load_profile_data(prof, "sandbox"))
    req = render.SubmitRequest(template="torchrun", command=("python3", "t.py"), nodes=2,
                               sets={"container_image": "nvcr.io#nvidia/pytorch:24.01-py3",
                                     "container_mounts": "/data:/data"})
    text = render.render(render.plan(req, facts, templates.get("torchrun")))
    # the job's directory is mounted and is the container's working directory
    assert ("srun --job-name=torchrun --ntasks-per-node=1 --kill-on-bad-exit=1 '--container-image=nvcr.io#nvidia/pytorch:24.01-py3'"
            ' --container-mounts=/data:/data,"$PWD:$PWD" --container-workdir="$PWD" bash -c \'eval "$SLURMKIT_FUNCS"; slurmkit_node\'') in text
    assert "ip -4 -o addr show dev ib0" in text


def test_cli_broken_profile_names_the_file(tmp_path):
    bad = tmp_path / "broken.toml"
    bad.write_text('[cluster]\nname = "x"\n[partitions.gpu\n')
    proc = subprocess.run([sys.executable, "-m", "slurmkit", "submit", "torchrun", "--site", str(bad),
                           "--dry-run", "--", "x"], capture_output=True, text=True)
    assert proc.returncode == 2 and str(bad) in proc.stderr and "Traceback" not in proc.stderr


def test_torchrun_runs_in_the_commands_python_unless_told():
    text = render.render(plan_for("torchrun", command=("/opt/venv/bin/python3.11", "t.py"), nodes=2))
    assert '  /opt/venv/bin/python3.11 -c "$SLURMKIT_TORCHRUN"' in text
    text = render.render(plan_for("torchrun", command=("./train.sh",), nodes=2))
    assert '  python3 -c "$SLURMKIT_TORCHRUN"' in text
    text = render.render(plan_for("torchrun", nodes=2, sets={"python": "/usr/bin/python3"}))
    assert '  /usr/bin/python3 -c "$SLURMKIT_TORCHRUN"' in text
    assert "from torch.distributed.run import main" in text


def _listen_on_two_ports_in_range():
    """Two listening sockets on consecutive ports in slurmkit's range (12000-31999), as other
    jobs' rendezvous stores would hold them: (first port, [sockets])."""
    import socket

    for cand in range(25000, 31000, 7):
        socks = []
        try:
            for port in (cand, cand + 1):
                s = socket.socket(socket.AF_INET)
                socks.append(s)
                s.bind(("0.0.0.0", port))
                s.listen()
            return cand, socks
        except OSError:
            for s in socks:
                s.close()
    raise AssertionError("no two free ports in 25000-31000")


def test_two_jobs_with_ids_equal_modulo_the_span_do_not_share_a_master_port():
    """Jobs holding 12000 + id % 20000 and the next port on the head node (real listening
    sockets here): a job whose id is 20000 higher takes the first free port after them; the
    rendered script's function run by bash."""
    text = render.render(plan_for("torchrun", nodes=2))
    start = text.index("slurmkit_free_port() {")
    func = text[start:text.index("\n}\n", start) + 3]
    port, socks = _listen_on_two_ports_in_range()
    try:
        job_id = 20000 * 7 + (port - 12000)
        assert 12000 + job_id % 20000 == port and 12000 + (job_id + 20000) % 20000 == port   # the formula collides
        script = f"{func}slurmkit_free_port $(( 12000 + {job_id + 20000} % 20000 )) 12000 20000\n"
        got = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout.strip()
    finally:
        for s in socks:
            s.close()
    assert got == str(port + 2)
    assert 'MASTER_PORT=$(slurmkit_free_port "$MASTER_PORT" 12000 20000)' in text
