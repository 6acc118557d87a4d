"""The resume gate on a busy node, and what the healthcheck logs while the node stays drained.

The health check runs in this process (``flows.healthcheck``) against the real Slurm sandbox:
node n1 is drained for real with a slurmkit reason, and resumed for real when the gate opens.
The GPUs are a replay source: a snapshot recorded from the fake NVML through the real pynvml
(``healthy``), edited for the busy case to show a compute process on one GPU (an edit of the
recorded snapshot, as ``nodeenv.set_value`` makes it). dcgmi is a script that records that it
ran and prints DCGM 3's recorded pass output (tests/health/dcgmi/dcgm3-pass.txt).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import pytest

from nodeenv import set_value
from sandbox_nodes import show_node
from slurmkit.hooks import config as hconfig
from slurmkit.hooks import flows, nodestate
from slurmkit.slurm.commands import run as slurm_run

pytestmark = pytest.mark.slurm

PASS = Path(__file__).resolve().parent.parent / "health" / "dcgmi" / "dcgm3-pass.txt"
REASON = "slurmkit: ib_port: mlx5_2 port 1: DOWN/Polling"
NODE = "n1"


@pytest.fixture
def hc(sandbox, healthy, tmp_path, caplog):
    conf = Path(sandbox.slurm_conf)
    snap_path, snap = healthy
    ran = tmp_path / "dcgmi-ran"
    exe = tmp_path / "dcgmi"
    exe.write_text(f"#!/bin/sh\necho ran >> {ran}\ncat {PASS}\n")
    exe.chmod(0o755)
    cfg_path = tmp_path / "hooks.toml"
    state_dir = tmp_path / "state"

    def configure(snapshot_path):
        text = hconfig.render(conf, gres_conf=conf.parent / "gres.conf", profile=sandbox.profile_path,
                              mode="enforce", state_dir=state_dir, spool_dir=tmp_path / "spool",
                              textfile_dir=tmp_path / "textfile", resume_after=2, snapshots={NODE: snapshot_path},
                              slurm_bin_dir=os.path.dirname(shutil.which("scontrol")))
        cfg_path.write_text(f'dcgmi = "{exe}"\n' + text)  # top-level keys before the [nodes.*] tables
        return hconfig.load(cfg_path)

    cfgs = {"cfg": configure(snap_path)}
    slurm_run(["scontrol", "update", f"nodename={NODE}", "state=drain", f"reason={REASON}"], slurm_conf=str(conf),
              timeout=30)
    h = nodestate.load_health(state_dir, NODE)
    h.drained_reason = REASON
    nodestate.save_health(state_dir, NODE, h)
    caplog.set_level(logging.INFO)

    def run_once():
        caplog.clear()
        r = flows.Run(flows.HEALTHCHECK, NODE, {}, cfgs["cfg"], logging.getLogger("test-gate"))
        assert flows.healthcheck(r) == 0
        return caplog.text

    def busy_gpu(nvml_index):
        """Replay the recorded snapshot with a compute process on GPU ``nvml_index``."""
        busy = set_value(snap, nvml_index, "processes", [{"pid": 4242, "used_mib": 20480, "uid": 1000}])
        path = tmp_path / f"busy-{nvml_index}.json"
        path.write_text(json.dumps(busy))
        cfgs["cfg"] = configure(path)

    def idle():
        cfgs["cfg"] = configure(snap_path)

    def node():
        return show_node(conf, NODE)

    yield {"run": run_once, "ran": ran, "cfg": cfgs, "busy_gpu": busy_gpu, "idle": idle, "node": node,
           "state_dir": state_dir, "exe": exe}
    slurm_run(["scontrol", "update", f"nodename={NODE}", "state=resume"], slurm_conf=str(conf), timeout=30,
              check=False)


def test_no_diag_while_a_job_is_recorded_on_the_node(hc):
    d = Path(nodestate.node_dir(hc["state_dir"], NODE))
    (d / "job-778.json").write_text('{"gpus": []}')
    hc["run"]()
    text = hc["run"]()
    assert "resume waits for the node to be idle (job 778" in text
    assert f"stays drained for the earlier reason: {REASON}" in text
    assert not hc["ran"].exists()
    assert hc["node"]()["reason"] == REASON and "DRAIN" in hc["node"]()["state"]
    text = hc["run"]()  # still busy: the count stays at its bound
    assert "clean run 2 of 2" in text and "clean run 3" not in text
    (d / "job-778.json").unlink()
    text = hc["run"]()
    assert hc["ran"].read_text() == "ran\n" and "active check passed" in text
    got = hc["node"]()
    assert got["reason"] is None and "DRAIN" not in got["state"], got


def test_no_diag_while_a_gpu_has_a_compute_process(hc):
    hc["busy_gpu"](1)
    hc["run"]()
    text = hc["run"]()
    assert "resume waits for the node to be idle (compute processes on GPU 1)" in text
    assert not hc["ran"].exists() and "DRAIN" in hc["node"]()["state"]
    hc["idle"]()
    hc["run"]()
    assert hc["ran"].exists()
    got = hc["node"]()
    assert got["reason"] is None and "DRAIN" not in got["state"], got


def test_host_engine_down_keeps_the_earlier_reason_and_says_so(hc):
    hc["exe"].write_text("#!/bin/sh\necho 'Error: unable to connect to host engine'\nexit 1\n")
    hc["run"]()
    text = hc["run"]()
    assert "own trouble" in text
    assert f"{NODE} stays drained for the earlier reason: {REASON}" in text
    text = hc["run"]()
    assert "clean run 2 of 2" in text and "clean run 3" not in text
    got = hc["node"]()
    assert got["reason"] == REASON and "DRAIN" in got["state"]
