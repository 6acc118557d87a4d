"""The launchers' own parts of the generated scripts, run for real with bash (no Slurm):
deepspeed's GPU assignment through deepspeed's own runner and launch.py. The same path runs
under real Slurm in test_submit_sandbox.py."""

import json
import os
import re
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
    hostfile.write_text("".join(f"10.0.0.{i + 1} slots=4\n" for i in range(nodes)))   # slots: the node type's GPUs
    env = {**os.environ, "SLURM_NODEID": str(node_rank), "SLURMD_NODENAME": f"n{node_rank + 1}",
           "SLURMKIT_LOG_DIR": str(tmp_path), "SLURMKIT_RESTART_COUNT": "0", "SLURMKIT_HOSTFILE": str(hostfile),
           "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "12345", "SLURMKIT_BIND": 'exec "$@"'}
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


def test_deepspeed_refuses_gpu_ids_its_include_cannot_take(tmp_path):
    """A CUDA_VISIBLE_DEVICES deepspeed's --include cannot express (MIG UUIDs, a wrong count) is
    refused with exit 2."""
    proc, reports = run_deepspeed_node(tmp_path, 0, "MIG-5c6f8c8e-0f0a-5b7e-9c1e-3f1b2a4d5e6f,MIG-aa")
    assert proc.returncode == 2 and not reports
    assert "CUDA_VISIBLE_DEVICES=MIG-5c6f8c8e" in proc.stderr and "is not 2 GPU numbers" in proc.stderr
    proc, _ = run_deepspeed_node(tmp_path, 0, "0,1,2")
    assert proc.returncode == 2 and "is not 2 GPU numbers" in proc.stderr
