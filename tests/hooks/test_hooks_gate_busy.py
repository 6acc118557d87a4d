"""The resume gate on a busy node, and what the healthcheck logs while the node stays drained
(no Slurm: show_node / resume / drain stubbed; NVML not read). dcgmi is a script that records
that it ran."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from slurmkit.hooks import drain as hdrain
from slurmkit.hooks import flows, nodestate
from slurmkit.hooks.config import HookConfig
from slurmkit.profile.health import Health

PASS = Path(__file__).resolve().parent.parent / "health" / "dcgmi" / "dcgm3-pass.txt"


class _Gpu:
    def __init__(self, index, processes=()):
        self.index, self._p = index, list(processes)

    def get(self, key, default=None):
        return self._p if key == "processes" else default


class _State:
    def __init__(self, gpus):
        self.gpus = gpus


@pytest.fixture
def hc(tmp_path, monkeypatch, caplog):
    ran = tmp_path / "dcgmi-ran"
    exe = tmp_path / "dcgmi"
    exe.write_text(f"#!/bin/sh\necho ran >> {ran}\ncat {PASS}\n")
    exe.chmod(0o755)
    cfg = HookConfig(path=tmp_path / "h.toml", slurm_conf=tmp_path / "slurm.conf", mode="enforce",
                     deadline_s=8.0, resume_after=2, dcgmi=str(exe), state_dir=tmp_path / "state")
    resumed = []
    monkeypatch.setattr(hdrain, "show_node", lambda *a, **k: {"state": "IDLE+DRAIN", "reason": "slurmkit: ib_port: mlx5_2"})
    monkeypatch.setattr(hdrain, "resume", lambda node, *a, **k: resumed.append(node) or "resumed")
    gpus = {"list": [_Gpu(0), _Gpu(1)]}

    def setup(self):
        self.judging.health = Health()
        return True

    def read(self, before_job, job_minors=None):
        self.state = _State(gpus["list"])
        return True

    monkeypatch.setattr(flows.Run, "setup", setup)
    monkeypatch.setattr(flows.Run, "read", read)
    h = nodestate.load_health(cfg.state_dir, "n1")
    h.drained_reason = "slurmkit: ib_port: mlx5_2 port 1: DOWN/Polling"
    nodestate.save_health(cfg.state_dir, "n1", h)
    caplog.set_level(logging.INFO)

    def run_once():
        caplog.clear()
        r = flows.Run(flows.HEALTHCHECK, "n1", {}, cfg, logging.getLogger("test-gate"))
        assert flows.healthcheck(r) == 0
        return caplog.text

    return {"run": run_once, "ran": ran, "resumed": resumed, "gpus": gpus, "cfg": cfg}


def test_no_diag_while_a_job_is_recorded_on_the_node(hc):
    d = Path(nodestate.node_dir(hc["cfg"].state_dir, "n1"))
    (d / "job-778.json").write_text('{"gpus": []}')
    hc["run"]()
    text = hc["run"]()
    assert "resume waits for the node to be idle (job 778" in text
    assert "stays drained for the earlier reason: slurmkit: ib_port: mlx5_2" in text
    assert not hc["ran"].exists() and hc["resumed"] == []
    text = hc["run"]()  # still busy: the count stays at its bound
    assert "clean run 2 of 2" in text and "clean run 3" not in text
    (d / "job-778.json").unlink()
    text = hc["run"]()
    assert hc["ran"].read_text() == "ran\n" and hc["resumed"] == ["n1"]
    assert "active check passed" in text


def test_no_diag_while_a_gpu_has_a_compute_process(hc):
    hc["gpus"]["list"] = [_Gpu(0), _Gpu(1, [{"pid": 4242}])]
    hc["run"]()
    text = hc["run"]()
    assert "resume waits for the node to be idle (compute processes on GPU 1)" in text
    assert not hc["ran"].exists() and hc["resumed"] == []
    hc["gpus"]["list"] = [_Gpu(0), _Gpu(1)]
    hc["run"]()
    assert hc["ran"].exists() and hc["resumed"] == ["n1"]


def test_host_engine_down_keeps_the_earlier_reason_and_says_so(hc):
    exe = Path(hc["cfg"].dcgmi)
    exe.write_text("#!/bin/sh\necho 'Error: unable to connect to host engine'\nexit 1\n")
    hc["run"]()
    text = hc["run"]()
    assert "own trouble" in text
    assert "n1 stays drained for the earlier reason: slurmkit: ib_port: mlx5_2 port 1: DOWN/Polling" in text
    text = hc["run"]()
    assert "clean run 2 of 2" in text and "clean run 3" not in text
    assert hc["resumed"] == []
