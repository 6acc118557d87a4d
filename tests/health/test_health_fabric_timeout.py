"""Reads beside NVML that block (a counter file or a process's ``comm`` that is a FIFO in the fake
tree: ``open()`` waits for a writer, as a hung driver's read would) are bounded by the hook's
deadline in the one reader thread: an HCA in flight fails naming the HCA (not an NVML timeout), a
service in flight is slurmkit's own trouble, what was read before is kept and what was never
reached is said; live, the NVML worker still returns its GPU state."""

from __future__ import annotations

import os
import time

import pytest

from fake_sysfs import healthy_tree, start_process
from slurmkit.health.fabric import check_ib_port, read_node_fabric, read_timeout_s
from slurmkit.health.runner import read_state
from slurmkit.health.state import NodeState


@pytest.fixture
def fifos():
    made = []
    yield made
    for f in made:  # the writer end releases the abandoned reader threads
        try:
            os.close(os.open(f, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass


def _fifo(path, made):
    if path.exists():
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    made.append(path)


def test_a_blocking_counter_file_times_out_naming_the_hca(tmp_path, fifos):
    root = healthy_tree(tmp_path / "sys", hcas=("mlx5_0", "mlx5_5", "mlx5_6"))
    _fifo(root / "class" / "infiniband" / "mlx5_5" / "ports" / "1" / "counters" / "symbol_error", fifos)
    state = NodeState(node="n1", source="test", gpus=[])
    spec = {"hcas": [{"device": "mlx5_0"}, {"device": "mlx5_5"}, {"device": "mlx5_6"}], "timeout_s": 0.5,
            "gpudirect_rdma": True}
    t0 = time.monotonic()
    read_node_fabric(state, root, spec)
    assert time.monotonic() - t0 < 5
    assert [p["hca"] for p in state.ib_ports] == ["mlx5_0", "mlx5_5"]
    assert state.ib_ports[1]["timed_out"]
    res = check_ib_port(state, None)
    assert [r.status.name for r in res] == ["PASS", "FAIL"]
    assert res[1].reason() == "slurmkit: ib mlx5_5: sysfs read timed out"
    assert "nvml" not in res[1].reason()
    # the parts never reached are said (own trouble), not judged
    assert any(e.startswith("HCA mlx5_6 not read: the sysfs read of mlx5_5 ran past the deadline (0.5 s)")
               for e in state.errors)
    assert any(e.startswith("GPUDirect RDMA module state not read") for e in state.errors)
    assert state.services == {}


def _fm_tree(tmp_path, fifos):
    root = healthy_tree(tmp_path / "sys", hcas=("mlx5_0",))
    (root / "module" / "nvidia_peermem").mkdir(parents=True)
    start_process(root, 1, "systemd")
    _fifo(tmp_path / "proc" / "4242" / "comm", fifos)  # a /proc entry whose read blocks
    return root


def test_a_blocking_proc_read_is_own_trouble_within_the_deadline(tmp_path, fifos):
    root = _fm_tree(tmp_path, fifos)
    state = NodeState(node="n1", source="test", gpus=[])
    spec = {"hcas": [{"device": "mlx5_0"}], "fabric_manager": True, "gpudirect_rdma": True, "timeout_s": 0.4}
    t0 = time.monotonic()
    read_node_fabric(state, root, spec)
    assert time.monotonic() - t0 < 3
    assert state.services == {"peermem": {"module": "nvidia_peermem"}}  # read before it: kept
    assert "fabric_manager" not in state.services  # not judged: no result, never a drain
    assert [e for e in state.errors if "fabric manager state not read" in e] == [
        "fabric manager state not read: the /proc scan for nv-fabricmanager took longer than 0.4 s "
        "(the hook's deadline)"]
    assert [p["hca"] for p in state.ib_ports] == ["mlx5_0"] and not state.ib_ports[0].get("timed_out")


def test_the_bound_comes_from_the_hooks_deadline(healthy, tmp_path, fifos):
    path, _ = healthy
    root = _fm_tree(tmp_path, fifos)
    assert read_timeout_s(3.0) == 2.25
    t0 = time.monotonic()
    s = read_state(path, per_call_deadline_s=0.4, total_deadline_s=8, sysfs=root,
                   fabric={"hcas": [], "fabric_manager": True, "gpudirect_rdma": False})
    assert time.monotonic() - t0 < 3
    assert any("took longer than 0.3 s" in e for e in s.errors), s.errors


def test_live_the_nvml_worker_returns_the_gpus_with_the_service_timeout(fake_nvml, tmp_path, fifos):
    root = _fm_tree(tmp_path, fifos)
    # a per-call deadline of 4 s bounds the blocked read at 3 s (DEADLINE_SHARE): the 1 s between
    # the two is what the worker has left for its NVML calls, room enough on a loaded 2-core
    # machine (with 1 s, 0.25 s was not); the reads are bounded by the share, not by the margin
    t0 = time.monotonic()
    s = read_state("live", env=fake_nvml.env("healthy", gpus=2), sysfs=root, per_call_deadline_s=4.0,
                   total_deadline_s=12, fabric={"hcas": [], "fabric_manager": True, "gpudirect_rdma": True})
    assert time.monotonic() - t0 < 12  # within the hook's total deadline, however loaded
    assert len(s.gpus) == 2  # no NvmlTimeout: the blocked read was bounded before the worker's per-call deadline
    assert s.services == {"peermem": {"module": "nvidia_peermem"}}
    assert any("took longer than 3 s" in e for e in s.errors), s.errors
