"""Fabric manager and GPUDirect RDMA checks over fake trees (``module/`` in sysfs, ``proc``
beside it): pass, fail, not expected, unreadable; the node types that need a fabric manager."""

from __future__ import annotations

import shutil

from fake_sysfs import healthy_tree, load_module, start_process
from slurmkit.health import checks as C
from slurmkit.health.config import load_config
from slurmkit.health.fabric import read_node_fabric, spec_of
from slurmkit.health.runner import read_state
from slurmkit.health.state import NodeState
from slurmkit.profile.health import Health


def judge(root, health=None, nvswitch=None):
    cfg = load_config(health, nvswitch=nvswitch)
    state = NodeState(node="n1", source="test")
    read_node_fabric(state, root, spec_of(cfg.expect))
    rep = C.evaluate(state, cfg)
    return [(r["check"], r["status"], r["value"]) for r in rep["results"] if r["check"] in
            ("fabric_manager", "gpudirect_rdma")], rep


def tree(tmp_path):
    root = healthy_tree(tmp_path / "sys", hcas=())
    (root / "module" / "nvidia").mkdir(parents=True)
    (tmp_path / "proc" / "1").mkdir(parents=True)
    (tmp_path / "proc" / "1" / "comm").write_text("systemd\n")
    return root


def test_fabric_manager_running_passes_stopped_fails(tmp_path):
    root = tree(tmp_path)
    start_process(root, 2310, "nv-fabricmanager")
    res, rep = judge(root, nvswitch=True)
    assert res == [("fabric_manager", "pass", "nv-fabricmanager running (pid 2310)")]
    shutil.rmtree(tmp_path / "proc" / "2310")
    res, rep = judge(root, nvswitch=True)
    assert res == [("fabric_manager", "fail", "nv-fabricmanager not running")]
    fails = [r for r in C.run_checks(*_state(root, True)) if r.status is C.FAIL]
    assert fails[0].reason() == "slurmkit: fabricmgr: nv-fabricmanager not running"


def _state(root, nvswitch, health=None):
    cfg = load_config(health, nvswitch=nvswitch)
    s = NodeState(node="n1", source="test")
    read_node_fabric(s, root, spec_of(cfg.expect))
    return s, cfg


def test_no_nvswitch_no_fabric_manager_check_and_the_profile_can_force_it(tmp_path):
    root = tree(tmp_path)
    assert judge(root, nvswitch=False)[0] == []
    assert judge(root)[0] == []
    res, _ = judge(root, Health(fabric_manager=True), nvswitch=False)
    assert res == [("fabric_manager", "fail", "nv-fabricmanager not running")]
    assert judge(root, Health(fabric_manager=False), nvswitch=True)[0] == []  # the profile wins


def test_gpudirect_module_loaded_or_not(tmp_path):
    root = tree(tmp_path)
    assert judge(root)[0] == []  # not asked for: not judged
    res, rep = judge(root, Health(gpudirect_rdma=True))
    assert res == [("gpudirect_rdma", "fail", "nvidia_peermem not loaded")] and rep["status"] == "fail"
    fails = [r for r in C.run_checks(*_state(root, False, Health(gpudirect_rdma=True))) if r.status is C.FAIL]
    assert fails[0].reason() == "slurmkit: peermem: nvidia_peermem not loaded"
    load_module(root, "nv_peer_mem")  # the older Mellanox module also enables GPUDirect RDMA
    assert judge(root, Health(gpudirect_rdma=True))[0] == [("gpudirect_rdma", "pass", "nv_peer_mem loaded")]
    load_module(root, "nvidia_peermem")
    assert judge(root, Health(gpudirect_rdma=True))[0] == [("gpudirect_rdma", "pass", "nvidia_peermem loaded")]


def test_unreadable_roots_are_own_trouble(tmp_path):
    res, rep = judge(tmp_path / "nothing" / "sys", Health(gpudirect_rdma=True, fabric_manager=True))
    assert res == [] and rep["status"] == "error"
    assert any("module is not readable" in e for e in rep["errors"])
    assert any("proc" in e for e in rep["errors"])


def test_live_worker_and_replay_read_the_services(fake_nvml, tmp_path):
    root = tree(tmp_path)
    start_process(root, 77, "nv-fabricmanager")
    spec = {"hcas": [], "fabric_manager": True, "gpudirect_rdma": True}
    s = read_state("live", env=fake_nvml.env("healthy", gpus=1), sysfs=root, fabric=spec)
    assert s.services == {"peermem": {"module": None}, "fabric_manager": {"running": True, "pids": [77]}}
    snap = tmp_path / "n1.json"
    import json

    snap.write_text(json.dumps(s.to_json()))
    assert read_state(snap).services == s.services


def test_which_shipped_node_types_need_a_fabric_manager():
    from slurmkit.profile.health import has_nvswitch
    from slurmkit.profile.load import load_profile

    got = {name: has_nvswitch(nt) for p in ("dgx-a100", "dgx-h100", "rtx4090-8x", "sandbox")
           for name, nt in load_profile(p).node_types.items()}
    assert got == {"dgx-a100": True, "dgx-h100": True, "rtx4090-8x": False, "sandbox-h100x4": False}


def test_new_health_keys_are_validated_with_file_and_key(tmp_path):
    import pytest

    from slurmkit.errors import InputError
    from slurmkit.profile.load import load_profile

    site = tmp_path / "site.toml"
    site.write_text('extends = "dgx-h100"\n[health]\ngpudirect_rdma = true\nfabric_manager = false\n'
                    'active_timeout_s = 30\n[health.thresholds]\nib_counter_rise_fail = 5\n')
    h = load_profile(site).health
    assert (h.gpudirect_rdma, h.fabric_manager, h.active_timeout_s, h.dcgm_diag_level) == (True, False, 30.0, 1)
    assert load_config(h).t("ib_counter_rise_fail") == 5
    for bad, key in (('gpudirect_rdma = "yes"', "health.gpudirect_rdma"), ("dcgm_diag_level = 7", "health.dcgm_diag_level"),
                     ("ib_judge_other_nics = 1", "health.ib_judge_other_nics")):
        site.write_text(f'extends = "dgx-h100"\n[health]\n{bad}\n')
        with pytest.raises(InputError) as exc:
            load_profile(site)
        assert key in str(exc.value) and str(site) in str(exc.value)
