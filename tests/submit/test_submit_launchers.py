"""The launchers' own parts of the generated scripts, run for real with bash (no Slurm):
deepspeed's GPU assignment through deepspeed's own runner and launch.py, and the bad-node
records read from srun's messages. The same paths run under real Slurm in
test_submit_sandbox.py / test_submit_production_sandbox.py."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from slurmkit.submit import render, site, templates


def plan_for(name, command=("python3", "train.py"), profile="sandbox", **kw):
    from slurmkit.profile import load_profile

    req = render.SubmitRequest(template=name, command=tuple(command), **kw)
    return render.plan(req, site.site_facts(load_profile(profile)), templates.get(name))


def function(script: str, name: str) -> str:
    """The shell function ``name() { ... }`` exactly as the rendered script defines it."""
    return re.search(rf"^{name}\(\) \{{\n.*?^\}}\n", script, re.M | re.S).group(0)


# -- deepspeed keeps Slurm's GPU assignment ---------------------------------------------------------

#: Each worker writes what deepspeed's launch.py gave it.
WORKER = ("import json, os, sys; keys = ('RANK', 'LOCAL_RANK', 'WORLD_SIZE', 'CUDA_VISIBLE_DEVICES'); "
          "open(os.path.join(sys.argv[1], 'w%s.json' % os.environ['RANK']), 'w')"
          ".write(json.dumps({k: os.environ[k] for k in keys}))")


def run_deepspeed_node(tmp_path, node_rank, visible, gpus_per_node=2, nodes=2):
    """``slurmkit_node`` of the rendered deepspeed script on this machine, as node ``node_rank``
    of ``nodes`` with Slurm's ``CUDA_VISIBLE_DEVICES=visible``, running deepspeed's real launcher;
    returns (completed process, the workers' reports)."""
    deepspeed = Path(sys.executable).with_name("deepspeed")
    text = render.render(plan_for("deepspeed", command=(sys.executable, "-c", WORKER, str(tmp_path)),
                                  nodes=nodes, gpus_per_node=gpus_per_node, params={"deepspeed": str(deepspeed)}))
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("".join(f"127.0.1.{i + 1} slots=4\n" for i in range(nodes)))   # slots: the node type's GPUs
    env = {**os.environ, "SLURM_NODEID": str(node_rank), "SLURMD_NODENAME": f"n{node_rank + 1}",
           "SLURMKIT_LOG_DIR": str(tmp_path), "SLURMKIT_RESTART_COUNT": "0", "SLURMKIT_HOSTFILE": str(hostfile),
           "MASTER_ADDR": "127.0.0.2", "MASTER_PORT": "12345", "SLURMKIT_BIND": 'exec "$@"'}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    proc = subprocess.run(["bash", "-c", function(text, "slurmkit_node") + "slurmkit_node"], env=env,
                          capture_output=True, text=True, timeout=300)
    reports = {int(p.name[1:-5]): json.loads(p.read_text()) for p in tmp_path.glob("w*.json")}
    return proc, reports


def test_deepspeed_script_passes_each_nodes_own_gpus_not_num_gpus():
    text = render.render(plan_for("deepspeed", nodes=2, gpus_per_node=2))
    node = function(text, "slurmkit_node")
    assert '--include="$include"' in node and "--num_gpus" not in node
    assert "slots=4" in text                           # the node type's GPUs, not the job's 2


@pytest.mark.parametrize("node_rank, visible, ranks", [(1, "2,3", [2, 3]), (0, "1,3", [0, 1])])
def test_deepspeeds_own_launcher_gives_each_worker_slurms_gpus(tmp_path, node_rank, visible, ranks):
    """deepspeed's runner parses the --include, launch.py decodes its world_info and sets each
    worker's CUDA_VISIBLE_DEVICES: Slurm's numbers for this node (a shared node's GPUs 2,3; a
    non-contiguous 1,3), ranks numbered after the other node's 2."""
    pytest.importorskip("deepspeed")
    proc, reports = run_deepspeed_node(tmp_path, node_rank, visible)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(reports) == ranks
    for local, rank in enumerate(ranks):
        assert reports[rank] == {"RANK": str(rank), "LOCAL_RANK": str(local), "WORLD_SIZE": "4",
                                 "CUDA_VISIBLE_DEVICES": visible}
    # the workers marked the node as started: a later failure is the program's, not the node's
    assert (tmp_path / f"started-n{node_rank + 1}-restart0").exists()


def test_deepspeed_refuses_gpu_ids_its_include_cannot_take(tmp_path):
    """A CUDA_VISIBLE_DEVICES deepspeed's --include cannot express (MIG UUIDs, a wrong count) is
    refused with exit 2 and a "failed-" record (the job's status, never a bad node)."""
    proc, reports = run_deepspeed_node(tmp_path, 0, "MIG-5c6f8c8e-0f0a-5b7e-9c1e-3f1b2a4d5e6f,MIG-aa")
    assert proc.returncode == 2 and not reports
    assert "CUDA_VISIBLE_DEVICES=MIG-5c6f8c8e" in proc.stderr and "is not 2 GPU numbers" in proc.stderr
    assert (tmp_path / "failed-n1-restart0").read_text() == "2\n"
    proc, _ = run_deepspeed_node(tmp_path, 0, "0,1,2")
    assert proc.returncode == 2 and "is not 2 GPU numbers" in proc.stderr


# -- bad nodes from srun's own messages ---------------------------------------------------------------

def step_failures(tmp_path, template, err_lines, logs=(), nodelist="n[1-4]", per_node="2", started=(), **kw):
    """Run ``slurmkit_step_failures`` of ``template``'s rendered script over srun messages
    (formats: Slurm 22.05 src/api/step_launch.c "task %u launch failed: %s", "Task launch for %ps
    failed on node %s: %m"; src/plugins/launch/slurm/launch_slurm.c "%s: %s %s: Exited with exit
    code %d"); returns {node: why} of the badnode records. ``kw``: more request fields."""
    text = render.render(plan_for(template, nodes=2, **kw))
    body = function(text, "slurmkit_badnode") + function(text, "slurmkit_step_failures")
    call = re.search(r"slurmkit_step_failures \"[^\n]*", function(text, "slurmkit_payload")).group(0)
    err = tmp_path / f"srun-{template}.err"
    err.write_text("".join(line + "\n" for line in err_lines))
    for name, content in logs:
        (tmp_path / name).write_text(content)
    for node in started:
        (tmp_path / f"started-{node}-restart0").touch()
    call = re.sub(r'"\$SLURMKIT_LOG_DIR/srun-[a-z-]+-\$tag.err"', f'"{err}"', call).replace("$tag", "restart0")
    env = {**os.environ, "SLURMKIT_LOG_DIR": str(tmp_path), "SLURMKIT_RESTART_COUNT": "0",
           "SLURM_JOB_NODELIST": nodelist, "SLURM_NTASKS_PER_NODE": per_node}
    if shutil.which("scontrol"):
        conf = tmp_path / "slurm.conf"       # scontrol show hostnames needs a configuration to start
        conf.write_text("ClusterName=t\nSlurmctldHost=localhost\nNodeName=n[1-4]\nPartitionName=p Nodes=ALL\n")
        env["SLURM_CONF"] = str(conf)
    subprocess.run(["bash", "-c", "set -euo pipefail\n" + body + call], env=env, check=True, timeout=60)
    return {p.name[len("badnode-"):-len("-restart0")]: p.read_text().strip() for p in tmp_path.glob("badnode-*")}


def test_srun_messages_name_the_nodes_that_could_not_start_the_program(tmp_path):
    got = step_failures(tmp_path, "srun", [
        "srun: error: n2: tasks 2-3: Exited with exit code 127",
        "srun: launch/slurm: _step_signal: Terminating StepId=4.0",
        "srun: error: n1: tasks 0-1: Terminated",           # killed after n2 failed: not n1's fault
        "srun: error: n3: task 4: Exited with exit code 126",
        "srun: error: n4: task 6: Exited with exit code 1",  # the program's own failure
    ], logs=[("rank-2-restart0.out", "x: error while loading shared libraries: libcuda.so.1\n")])
    assert got == {
        "n2": "could not start python3 there (exit status 127: not found, or a library it needs is missing): "
              "x: error while loading shared libraries: libcuda.so.1",
        "n3": "could not start python3 there (exit status 126: found but not executable)"}


def test_the_quoted_task_line_is_without_sruns_label(tmp_path):
    """--srun-opt=--label: srun puts "<task>: " before each line of a task's output
    ("1: x: error while loading ..."); the reason quotes the line without it."""
    got = step_failures(tmp_path, "srun", ["srun: error: n2: tasks 2-3: Exited with exit code 127"],
                        logs=[("rank-2-restart0.out", "2: x: error while loading shared libraries: libcuda.so.1\n")],
                        srun_opts=("--label",))
    assert got == {"n2": "could not start python3 there (exit status 127: not found, or a library it needs is "
                         "missing): x: error while loading shared libraries: libcuda.so.1"}


@pytest.mark.skipif(shutil.which("scontrol") is None, reason="needs Slurm's scontrol (show hostnames)")
def test_srun_launch_failures_name_the_node(tmp_path):
    got = step_failures(tmp_path, "srun", [
        "srun: error: Task launch for StepId=7.0 failed on node n3: Invalid job credential",
        "srun: error: task 3 launch failed: Slurmd could not execve job",   # task 3: 2nd node (2 per node)
    ])
    assert got == {"n3": "Slurm could not launch its tasks: Invalid job credential",
                   "n2": "Slurm could not launch task 3: Slurmd could not execve job"}


def test_a_deepspeed_launcher_that_exits_before_its_ranks_started_is_the_nodes(tmp_path):
    got = step_failures(tmp_path, "deepspeed", [
        "srun: error: n2: task 1: Exited with exit code 1",
        "srun: error: n1: task 0: Exited with exit code 3",   # n1's ranks had started: the program's
    ], logs=[("node-n2-restart0.out", "Traceback ...\nImportError: libcuda.so.1\n")], per_node="1", started=["n1"])
    assert got == {"n2": "could not start deepspeed (exit status 1, before any rank started): ImportError: libcuda.so.1"}
    # slurmkit's own refusal on the node ("failed-" record) is not a bad node either
    for f in tmp_path.glob("badnode-*"):
        f.unlink()
    (tmp_path / "failed-n2-restart0").write_text("2\n")
    assert step_failures(tmp_path, "deepspeed", ["srun: error: n2: task 1: Exited with exit code 2"],
                         per_node="1") == {}


def test_nccl_tests_names_its_binary(tmp_path):
    got = step_failures(tmp_path, "nccl-tests", ["srun: error: n4: task 7: Exited with exit code 127"])
    assert got == {"n4": "could not start all_reduce_perf there (exit status 127: not found, or a library it "
                         "needs is missing)"}


# -- requeue allowed for the launchers even without preemption handling -------------------------------

@pytest.mark.parametrize("name", ["torchrun", "srun", "deepspeed", "nccl-tests"])
def test_launchers_stay_requeueable_without_preemption_handling(name):
    opts = {o.name: o for o in plan_for(name, nodes=2, signal_s=0).options}
    assert "signal" not in opts
    assert opts["requeue"].source.startswith("slurmkit retry without a bad node (max_restarts = 3")
    assert opts["open-mode"].value == "append"
    opts = {o.name for o in plan_for(name, nodes=2, signal_s=0, max_restarts=0).options}
    assert "requeue" not in opts and "open-mode" not in opts
    assert "requeue" not in {o.name for o in plan_for("single-gpu", signal_s=0).options}


@pytest.mark.parametrize("wait, value, says", [
    ("", "0", "the retry drops --switches=1@5:00: it may start on any free nodes"),
    ("0:30", "1@0:30", "the retry waits at most 0:30 for --switches=1 (was 1@5:00; profile submit.retry_switch_wait)")])
def test_a_retry_without_a_bad_node_drops_or_shortens_switches(wait, value, says):
    from slurmkit.profile import load_profile

    facts = site.site_facts(load_profile("sandbox", overrides=({"submit": {"retry_switch_wait": wait}},)))
    for name in ("srun", "torchrun", "deepspeed", "nccl-tests"):
        text = render.render(render.plan(render.SubmitRequest(template=name, command=("x",), nodes=2), facts,
                                         templates.get(name)))
        assert f'scontrol update JobId="$SLURM_JOB_ID" Switches={value}; then' in text, name
        assert f'echo "slurmkit: {says}" >&2' in text
    # no --switches (a nodelist, --no-switches): nothing to change
    text = render.render(render.plan(render.SubmitRequest(template="srun", command=("x",), nodes=2, switches=False),
                                     facts, templates.get("srun")))
    assert "Switches=" not in text


# -- torchrun: a lost rendezvous store after start is not the node's fault ---------------------------

def run_torchrun_agent(tmp_path, joined, head="n1"):
    """The rendered torchrun script's agent wrapper (SLURMKIT_TORCHRUN) as node n2, with torch's
    real exception types, where torchrun's ``main`` raises what n2's agent raised in a test run
    when n1's torchrun (holding the c10d store) had exited: RendezvousConnectionError. ``joined``:
    whether n2's workers had started (their ``joined-n2-restart0`` marker). Returns (completed
    process, the n2 records written)."""
    text = render.render(plan_for("torchrun", nodes=2, gpus_per_node=1))
    wrapper = re.search(r"^export SLURMKIT_TORCHRUN='(.*?)'\n", text, re.M | re.S).group(1)
    if joined:
        (tmp_path / "joined-n2-restart0").touch()
    stub = ("import torch.distributed.run as run\n"
            "from torch.distributed.elastic.rendezvous.api import RendezvousConnectionError\n"
            "def main(argv):\n"
            "    raise RendezvousConnectionError('The connection to the C10d store has failed.')\n"
            "run.main = main\n")
    env = {**os.environ, "SLURMD_NODENAME": "n2", "SLURMKIT_RESTART_COUNT": "0",
           "SLURMKIT_LOG_DIR": str(tmp_path), "MASTER_ADDR": "127.0.1.1", "SLURMKIT_HEAD_NODE": head}
    proc = subprocess.run([sys.executable, "-c", stub + wrapper], env=env, capture_output=True, text=True,
                          timeout=120)
    records = {p.name: p.read_text().strip() for p in tmp_path.glob("*-n2-restart0") if not p.name.startswith("joined")}
    return proc, records


def test_torchrun_store_lost_after_the_ranks_started_blames_no_node(tmp_path):
    proc, records = run_torchrun_agent(tmp_path, joined=True)
    assert proc.returncode == 1
    assert "badnode-n2-restart0" not in records and "started-n2-restart0" in records
    assert ("slurmkit: n2: the rendezvous at 127.0.1.1 ended after the ranks started "
            "(RendezvousConnectionError: the torchrun holding the store on the first node has exited)") in proc.stderr


def test_torchrun_store_lost_on_the_first_node_itself_says_it_was_its_own(tmp_path):
    """The same error on the node whose own torchrun held the store (the message used to
    name "the first node" to the first node itself)."""
    proc, records = run_torchrun_agent(tmp_path, joined=True, head="n2")
    assert proc.returncode == 1 and "badnode-n2-restart0" not in records
    assert proc.stderr.splitlines()[-1] == (
        "slurmkit: n2: this node holds the rendezvous at 127.0.1.1: its own torchrun held the store, which ended "
        "with the ranks here (RendezvousConnectionError): a consequence of a rank ending, not evidence against "
        "this node")


def test_torchrun_that_cannot_join_before_start_blames_its_node(tmp_path):
    proc, records = run_torchrun_agent(tmp_path, joined=False)
    assert proc.returncode == 1
    assert records["badnode-n2-restart0"] == ("torchrun could not join the rendezvous at 127.0.1.1: "
                                              "RendezvousConnectionError: The connection to the C10d store has failed.")


# -- srun: the job's status is the first failing rank's -----------------------------------------------

def first_failure(tmp_path, err_lines, recorded=None):
    """Run the srun script's ``slurmkit_first_failure`` over srun messages (formats: Slurm 22.05
    src/plugins/launch/slurm/launch_slurm.c "%s: %s %s: Exited with exit code %d" and
    "%s: %s %s: %s" with strsignal(); the lines below are the sandbox's);
    returns {node: status} of the failed- records."""
    text = render.render(plan_for("srun", nodes=2))
    err = tmp_path / "srun-ranks-restart0.err"
    err.write_text("".join(line + "\n" for line in err_lines))
    if recorded:
        (tmp_path / f"failed-{recorded[0]}-restart0").write_text(f"{recorded[1]}\n")
    env = {**os.environ, "SLURMKIT_LOG_DIR": str(tmp_path), "SLURMKIT_RESTART_COUNT": "0"}
    subprocess.run(["bash", "-c", "set -euo pipefail\n" + function(text, "slurmkit_first_failure")
                    + f'slurmkit_first_failure "{err}"\n'], env=env, check=True, timeout=60)
    return {p.name[len("failed-"):-len("-restart0")]: p.read_text().strip() for p in tmp_path.glob("failed-*")}


@pytest.mark.parametrize("lines,want", [
    (["srun: error: n2: task 1: Exited with exit code 3", "srun: launch/slurm: _step_signal: Terminating StepId=4.0",
      "srun: error: n1: task 0: Terminated", "srun: Force Terminated StepId=4.0"], {"n2": "3"}),
    (["srun: error: n1: task 0: Killed", "srun: launch/slurm: _step_signal: Terminating StepId=2.0",
      "srun: error: n2: task 1: Exited with exit code 143"], {"n1": "137"}),
    (["srun: error: n2: tasks 2-3: Exited with exit code 127", "srun: error: n1: tasks 0-1: Terminated"], {"n2": "127"}),
    (["srun: error: n3: task 4: Segmentation fault (core dumped)"], {"n3": "139"}),
    (["srun: Job step aborted: Waiting up to 32 seconds for job step to finish."], {}),
])
def test_srun_jobs_status_is_the_first_failing_ranks(tmp_path, lines, want):
    assert first_failure(tmp_path, lines) == want


def test_a_launchers_own_record_of_the_first_failure_is_kept(tmp_path):
    assert first_failure(tmp_path, ["srun: error: n1: task 0: Exited with exit code 5"], ("n2", "7")) == {"n2": "7"}
