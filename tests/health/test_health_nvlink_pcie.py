"""NVLink error counters (NVML, through the snapshot format) and PCIe AER / replay counters
(sysfs and NVML) rising between runs; the expected NVLink count from the node type's matrix."""

from __future__ import annotations

import json

from fake_sysfs import set_aer
from nodeenv import set_value
from slurmkit.health import checks as C
from slurmkit.health.baseline import swap
from slurmkit.health.config import load_config
from slurmkit.health.runner import read_state
from slurmkit.health.state import NodeState
from slurmkit.profile.health import Health


def _with(snap, **values):
    for k, v in values.items():
        snap = set_value(snap, 1, k, v)
    return snap


def _run(tmp_path, snap, counters, cfg=None):
    p = tmp_path / "snap.json"
    p.write_text(json.dumps(snap))
    state = read_state(p, counters_file=counters)
    rep = C.evaluate(state, cfg or load_config())
    return {c: [(r["gpu_index"], r["status"], r["value"]) for r in rep["results"] if r["check"] == c]
            for c in ("nvlink_errors", "pcie_errors")}, rep


def errs(crc=0, replay=0, recovery=0):
    return {"0": {"replay": 0, "recovery": 0, "crc_flit": 0, "crc_data": 0},
            "3": {"replay": replay, "recovery": recovery, "crc_flit": crc, "crc_data": 0}}


def test_nvlink_counters_rising_warn_then_fail(healthy, tmp_path):
    _, base = healthy
    counters = tmp_path / "port-counters.json"
    got, _ = _run(tmp_path, _with(base, nvlink_errors=errs()), counters)
    assert got["nvlink_errors"] == []  # first run: no previous values
    got, _ = _run(tmp_path, _with(base, nvlink_errors=errs()), counters)
    assert got["nvlink_errors"] == [(1, "pass", "no new errors")]
    got, rep = _run(tmp_path, _with(base, nvlink_errors=errs(crc=40, replay=3)), counters)
    assert got["nvlink_errors"] == [(1, "warn", "link 3 crc_flit +40, link 3 replay +3")] and rep["status"] == "warn"
    got, rep = _run(tmp_path, _with(base, nvlink_errors=errs(crc=140, replay=3)), counters)
    assert got["nvlink_errors"] == [(1, "fail", "link 3 crc_flit +100")]
    fails = [r for r in C.run_checks(read_state(tmp_path / "snap.json"), load_config()) if r.status is C.FAIL]
    assert fails == []  # without the previous run's counters nothing is judged
    got, _ = _run(tmp_path, _with(base, nvlink_errors=errs(crc=140, replay=3, recovery=2)), counters)
    assert got["nvlink_errors"] == [(1, "fail", "link 3 recovery +2")]
    got, _ = _run(tmp_path, _with(base, nvlink_errors=errs(crc=150, replay=200, recovery=2)), counters)
    assert got["nvlink_errors"] == [(1, "fail", "link 3 replay +197, link 3 crc_flit +10")]  # the deciding rise first
    fails = [r for r in C.run_checks(read_state(tmp_path / "snap.json", counters_file=tmp_path / "again.json"),
                                     load_config()) if r.status is C.FAIL]
    assert fails == []
    state = read_state(tmp_path / "snap.json")
    state.baseline = {"gpu": {state.gpus[1].uuid: {"nvlink:3:crc_flit": 140, "nvlink:3:replay": 3}}}
    r = next(r for r in C.run_checks(state, load_config()) if r.check == "nvlink_errors" and r.gpu_index == 1)
    assert r.reason() == f"slurmkit: nvlink GPU1 {state.gpus[1].pci_bus_id}: link 3 replay +197 and 1 more"


def test_pcie_aer_and_replay(healthy, tmp_path):
    _, base = healthy
    counters = tmp_path / "c.json"
    start = dict(pcie_replay_counter=5, pcie_aer_correctable=10, pcie_aer_nonfatal=0, pcie_aer_fatal=0)
    _run(tmp_path, _with(base, **start), counters)
    got, _ = _run(tmp_path, _with(base, **dict(start, pcie_aer_correctable=30)), counters)
    assert got["pcie_errors"] == [(1, "warn", "aer_correctable +20")]
    got, _ = _run(tmp_path, _with(base, **dict(start, pcie_aer_correctable=1030)), counters)
    assert got["pcie_errors"] == [(1, "fail", "aer_correctable +1000")]  # a correctable-error storm
    got, _ = _run(tmp_path, _with(base, **dict(start, pcie_aer_correctable=1030, pcie_aer_nonfatal=1)), counters)
    assert got["pcie_errors"] == [(1, "fail", "aer_nonfatal +1")]
    cfg = load_config(Health(thresholds={"pcie_replay_rise_fail": 10}))
    got, _ = _run(tmp_path, _with(base, **dict(start, pcie_aer_correctable=1030, pcie_aer_nonfatal=1,
                                               pcie_replay_counter=15)), counters, cfg)
    assert got["pcie_errors"] == [(1, "fail", "pcie_replay +10")]


def test_aer_read_from_sysfs_by_the_live_worker(fake_nvml, tmp_path):
    env = fake_nvml.env("healthy", gpus=2)
    first = read_state("live", env=env)
    bus = first.gpus[1].pci_bus_id
    root = tmp_path / "sys"
    set_aer(root, bus, correctable=7, fatal=1)
    s = read_state("live", env=env, sysfs=root)
    g = s.gpus[1]
    assert (g.get("pcie_aer_correctable"), g.get("pcie_aer_nonfatal"), g.get("pcie_aer_fatal")) == (7, 0, 1)
    assert g.values["pcie_aer_fatal"].source == "sysfs:bus/pci/devices/*/aer_dev_fatal"
    assert s.gpus[0].rc("pcie_aer_correctable") == "NOT_SUPPORTED"  # no AER files: not judged
    # the fake library has no nvmlDeviceGetNvLinkErrorCounter / PcieReplayCounter: absent, not a fail
    assert g.rc("nvlink_errors") == "FUNCTION_NOT_FOUND" and g.rc("pcie_replay_counter") == "FUNCTION_NOT_FOUND"
    counters = tmp_path / "c.json"
    read_state("live", env=env, sysfs=root, counters_file=counters)
    set_aer(root, bus, correctable=9, fatal=1)
    again = read_state("live", env=env, sysfs=root, counters_file=counters)
    res = [r for r in C.run_checks(again, load_config()) if r.check == "pcie_errors"]
    assert [(r.gpu_index, r.status, r.value) for r in res] == [(1, C.WARN, "aer_correctable +2")]
    assert res[0].reason() == f"slurmkit: pcie GPU1 {g.pci_bus_id}: aer_correctable +2"


def test_nvlink_down_against_the_node_types_matrix(healthy):
    from slurmkit.profile.health import expected_nvlinks
    from slurmkit.profile.load import load_profile

    nt = next(iter(load_profile("dgx-h100").node_types.values()))
    assert expected_nvlinks(nt) == 18
    _, base = healthy
    state = NodeState.from_json(set_value(base, 2, "nvlink_active", [True] * 16 + [False] * 2), "t")
    for g in state.gpus:
        if g.index != 2:
            g.put("nvlink_active", [True] * 16 + [False] * 2)  # every GPU lost 2: only the pin can tell
    assert {r.status for r in C.run_checks(state, load_config()) if r.check == "nvlink_down"} == {C.PASS}
    res = [r for r in C.run_checks(state, load_config(nvlinks=expected_nvlinks(nt))) if r.check == "nvlink_down"]
    assert {(r.status, r.value, r.limit) for r in res} == {(C.FAIL, 16, 18)}


def test_a_counters_file_from_before_gpu_counters_still_reads(tmp_path):
    p = tmp_path / "c.json"
    p.write_text(json.dumps({"slurmkit_counters": 1, "ib": {"mlx5_0/1": {"symbol_error": 1}}}))
    s = NodeState(node="n1", source="t")
    assert swap(p, s) is None and s.baseline == {"ib": {"mlx5_0/1": {"symbol_error": 1}}, "gpu": {}}


def test_a_replay_with_a_sysfs_root_reads_the_aer_counters_there(healthy, tmp_path):
    _, base = healthy
    snap = tmp_path / "snap.json"
    snap.write_text(json.dumps(_with(base, pcie_aer_correctable=4)))  # the capture's GPU1 value
    bus1, bus0 = base["gpus"][1]["pci_bus_id"], base["gpus"][0]["pci_bus_id"]
    root = tmp_path / "sys"
    set_aer(root, bus1, correctable=10)
    counters = tmp_path / "c.json"
    s = read_state(snap, sysfs=root, counters_file=counters)
    assert s.gpus[1].get("pcie_aer_correctable") == 10
    assert s.gpus[1].values["pcie_aer_correctable"].source == "sysfs:bus/pci/devices/*/aer_dev_correctable"
    assert s.gpus[0].values == read_state(snap).gpus[0].values  # not in the tree: the capture's values
    set_aer(root, bus1, correctable=25, nonfatal=1)
    s = read_state(snap, sysfs=root, counters_file=counters)
    res = [(r.status, r.value) for r in C.run_checks(s, load_config()) if r.check == "pcie_errors" and r.gpu_index == 1]
    assert res == [(C.FAIL, "aer_nonfatal +1, aer_correctable +15")]
    assert bus0 != bus1
