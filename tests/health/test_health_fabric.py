"""InfiniBand / RoCE port checks over fake sysfs trees (tests/fake_sysfs.py): healthy, port
down, rate 200 instead of 400 Gb/s, rising counters, HCA absent, sysfs unreadable; read live
by the NVML worker (real pynvml on the fake libnvidia-ml) and from a replay with a sysfs root."""

from __future__ import annotations

import json

import pytest

from fake_sysfs import healthy_tree, set_port
from slurmkit.health import checks as C
from slurmkit.health.config import judged_hcas, load_config
from slurmkit.health.fabric import parse_rate, read_ib_ports
from slurmkit.health.runner import read_state
from slurmkit.health.state import NodeState
from slurmkit.profile.health import Health
from slurmkit.profile.load import load_profile

NICS = [{"device": "mlx5_0", "link_layer": "InfiniBand", "rate_gbps": 400, "role": "compute"},
        {"device": "mlx5_1", "link_layer": "InfiniBand", "rate_gbps": 400, "role": "compute"},
        {"device": "mlx5_4", "link_layer": "RoCE", "rate_gbps": 200, "role": "other"}]


def judge(root, nics=NICS, health=None, baseline=None, counters_file=None):
    cfg = load_config(health, nics=nics)
    state = NodeState(node="n1", source="test")
    state.ib_ports, state.errors = read_ib_ports(root, cfg.expect["hcas"])
    if counters_file is not None:
        from slurmkit.health.baseline import swap

        assert swap(counters_file, state) is None
    elif baseline is not None:
        state.baseline = baseline
    return state, C.evaluate(state, cfg)


def results(report, check):
    return [(r["status"], r["value"]) for r in report["results"] if r["check"] == check]


def test_rate_text_as_the_kernel_prints_it():
    assert parse_rate("400 Gb/sec (4X NDR)") == 400.0
    assert parse_rate("2.5 Gb/sec (1X SDR)") == 2.5
    with pytest.raises(ValueError):
        parse_rate("fast")


def test_healthy_ports_pass_and_only_compute_hcas_are_judged(tmp_path):
    root = healthy_tree(tmp_path / "sys")
    state, rep = judge(root)
    assert rep["status"] == "pass", rep
    assert results(rep, "ib_port") == [("pass", "mlx5_0 port 1: ACTIVE/LinkUp"), ("pass", "mlx5_1 port 1: ACTIVE/LinkUp")]
    assert results(rep, "ib_rate") == [("pass", "mlx5_0 port 1: 400 Gb/s"), ("pass", "mlx5_1 port 1: 400 Gb/s")]
    assert [p["hca"] for p in state.ib_ports] == ["mlx5_0", "mlx5_1"]  # the storage HCA is not read


def test_storage_hca_judged_when_the_profile_says_so(tmp_path):
    root = healthy_tree(tmp_path / "sys")
    set_port(root, "mlx5_4", rate=200, link_layer="Ethernet", state="DOWN", phys="Disabled")
    _, rep = judge(root, health=Health(ib_judge_other_nics=True))
    assert ("fail", "mlx5_4 port 1: DOWN/Disabled") in results(rep, "ib_port")
    assert rep["status"] == "fail"


def test_port_down_fails_naming_hca_and_port(tmp_path):
    root = healthy_tree(tmp_path / "sys")
    set_port(root, "mlx5_1", state="DOWN", phys="Polling")
    state, rep = judge(root)
    assert rep["status"] == "fail"
    assert results(rep, "ib_port")[1] == ("fail", "mlx5_1 port 1: DOWN/Polling")
    fails = [r for r in C.run_checks(state, load_config(nics=NICS)) if r.status is C.FAIL]
    assert fails[0].reason() == "slurmkit: ib_port: mlx5_1 port 1: DOWN/Polling"
    assert results(rep, "ib_rate") == [("pass", "mlx5_0 port 1: 400 Gb/s")]  # a down port has no rate to judge


def test_rate_200_instead_of_400_fails(tmp_path):
    root = healthy_tree(tmp_path / "sys")
    set_port(root, "mlx5_0", rate=200)
    _, rep = judge(root)
    assert results(rep, "ib_rate")[0] == ("fail", "mlx5_0 port 1: 200 Gb/s instead of 400 Gb/s")
    assert rep["status"] == "fail"


def test_rate_zero_in_the_profile_is_not_compared(tmp_path):
    root = healthy_tree(tmp_path / "sys", rate=100)
    _, rep = judge(root, nics=[dict(NICS[0], rate_gbps=0)])
    assert results(rep, "ib_rate") == [] and rep["status"] == "pass"


def test_roce_port_must_be_ethernet_link_layer(tmp_path):
    root = healthy_tree(tmp_path / "sys", hcas=("mlx5_2",), rate=200, link_layer="InfiniBand")
    _, rep = judge(root, nics=[{"device": "mlx5_2", "link_layer": "RoCE", "rate_gbps": 200, "role": "compute"}])
    assert results(rep, "ib_port") == [("fail", "mlx5_2 port 1: link layer InfiniBand, expected Ethernet")]


def test_missing_hca_fails_and_a_named_port_judges_only_that_port(tmp_path):
    root = healthy_tree(tmp_path / "sys", hcas=("mlx5_0",))
    set_port(root, "mlx5_0", 2, state="DOWN", phys="Disabled")  # the unused second port of a dual-port card
    nics = [{"device": "mlx5_0:1", "link_layer": "InfiniBand", "rate_gbps": 400},
            {"device": "mlx5_1", "link_layer": "InfiniBand", "rate_gbps": 400}]
    _, rep = judge(root, nics=nics)
    assert results(rep, "ib_port") == [("pass", "mlx5_0 port 1: ACTIVE/LinkUp"),
                                       ("fail", "mlx5_1: not found in /sys/class/infiniband")]


def test_counters_rising_between_runs_warn_then_fail(tmp_path):
    root = healthy_tree(tmp_path / "sys")
    counters = tmp_path / "state" / "counters.json"
    _, rep = judge(root, counters_file=counters)
    assert results(rep, "ib_counters") == []  # first run: nothing to compare with
    assert json.loads(counters.read_text())["ib"]["mlx5_0/1"]["symbol_error"] == 0
    _, rep = judge(root, counters_file=counters)
    assert results(rep, "ib_counters") == [("pass", "mlx5_0 port 1: no new errors"),
                                           ("pass", "mlx5_1 port 1: no new errors")]
    set_port(root, "mlx5_0", counters={"symbol_error": 7, "link_downed": 1})
    _, rep = judge(root, counters_file=counters)
    assert results(rep, "ib_counters")[0] == ("warn", "mlx5_0 port 1: link_downed +1, symbol_error +7")
    assert rep["status"] == "warn"
    set_port(root, "mlx5_0", counters={"symbol_error": 107, "link_downed": 1})
    _, rep = judge(root, counters_file=counters)
    assert results(rep, "ib_counters")[0] == ("fail", "mlx5_0 port 1: symbol_error +100")
    set_port(root, "mlx5_0", counters={"symbol_error": 107, "link_downed": 3})
    _, rep = judge(root, counters_file=counters)
    assert results(rep, "ib_counters")[0] == ("fail", "mlx5_0 port 1: link_downed +2")  # flapping
    set_port(root, "mlx5_0", counters={"symbol_error": 4, "link_downed": 0})  # reboot: counters reset
    _, rep = judge(root, counters_file=counters)
    assert results(rep, "ib_counters")[0] == ("warn", "mlx5_0 port 1: symbol_error +4")


def test_counter_thresholds_come_from_the_profile(tmp_path):
    root = healthy_tree(tmp_path / "sys")
    set_port(root, "mlx5_0", counters={"port_rcv_errors": 12})
    base = {"ib": {"mlx5_0/1": {"port_rcv_errors": 2}, "mlx5_1/1": {}}}
    _, rep = judge(root, baseline=base)
    assert results(rep, "ib_counters")[0][0] == "warn"
    _, rep = judge(root, baseline=base, health=Health(thresholds={"ib_counter_rise_fail": 10}))
    assert results(rep, "ib_counters")[0] == ("fail", "mlx5_0 port 1: port_rcv_errors +10")


def test_sysfs_unreadable_is_own_trouble_never_a_fail(tmp_path):
    _, rep = judge(tmp_path / "not-a-sysfs")
    assert rep["status"] == "error" and [r for r in rep["results"] if r["check"].startswith("ib_")] == []
    assert "is not readable" in rep["errors"][0]
    root = healthy_tree(tmp_path / "sys")
    state_file = root / "class" / "infiniband" / "mlx5_0" / "ports" / "1" / "state"
    state_file.unlink()
    state_file.mkdir()  # a file that cannot be read (even by root)
    _, rep = judge(root)
    assert rep["status"] == "error"
    assert results(rep, "ib_port") == [("pass", "mlx5_1 port 1: ACTIVE/LinkUp")]
    assert any("mlx5_0/ports/1/state" in e for e in rep["errors"])


def test_a_corrupt_counters_file_means_no_previous_run(tmp_path):
    root = healthy_tree(tmp_path / "sys")
    counters = tmp_path / "counters.json"
    counters.write_text("{not json")
    _, rep = judge(root, counters_file=counters)
    assert results(rep, "ib_counters") == [] and rep["status"] == "pass"
    assert json.loads(counters.read_text())["slurmkit_counters"] == 1


def test_profile_nics_select_the_hcas(tmp_path):
    prof = load_profile("dgx-h100")
    hcas = judged_hcas(next(iter(prof.node_types.values())).nics)
    assert hcas and all(h["link_layer"] in ("InfiniBand", "RoCE") for h in hcas)
    assert all(h["role"] == "compute" for h in hcas)


def test_live_worker_reads_the_ports_and_the_snapshot_keeps_them(fake_nvml, tmp_path):
    root = healthy_tree(tmp_path / "sys")
    set_port(root, "mlx5_1", rate=200)
    hcas = judged_hcas(NICS)
    s = read_state("live", env=fake_nvml.env("healthy", gpus=2), sysfs=root, fabric={"hcas": hcas})
    assert [(p["hca"], p["rate_gbps"]) for p in s.ib_ports] == [("mlx5_0", 400.0), ("mlx5_1", 200.0)]
    snap = tmp_path / "n1.json"
    snap.write_text(json.dumps(s.to_json()))
    replay = read_state(snap)
    assert replay.ib_ports == s.ib_ports
    rep = C.evaluate(replay, load_config(nics=NICS))
    assert ("fail", "mlx5_1 port 1: 200 Gb/s instead of 400 Gb/s") in results(rep, "ib_rate")


def test_replay_with_a_sysfs_root_reads_the_ports_there(healthy, tmp_path):
    path, _ = healthy
    root = healthy_tree(tmp_path / "sys")
    set_port(root, "mlx5_0", state="DOWN", phys="Polling")
    s = read_state(path, sysfs=root, fabric={"hcas": judged_hcas(NICS)})
    assert s.ib_ports[0]["state"] == "DOWN"
    assert read_state(path, fabric={"hcas": judged_hcas(NICS)}).ib_ports is None  # no root: the capture's (none)


def test_health_check_cli_judges_the_ports_of_the_nodes_type(healthy, tmp_path):
    from click.testing import CliRunner

    from slurmkit.cli import cli as cli_main

    path, _ = healthy
    root = healthy_tree(tmp_path / "sys", hcas=("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"))
    args = ["--json", "health", "check", "--from", str(path), "--site", "sandbox", "--node", "n2", "--sysfs", str(root)]
    res = CliRunner().invoke(cli_main, args)
    rep = json.loads(res.output)
    assert res.exit_code == 0 and len(results(rep, "ib_port")) == 4, res.output
    set_port(root, "mlx5_3", rate=100)
    res = CliRunner().invoke(cli_main, args)
    assert res.exit_code == 1
    assert results(json.loads(res.output), "ib_rate")[3] == ("fail", "mlx5_3 port 1: 100 Gb/s instead of 400 Gb/s")
    res = CliRunner().invoke(cli_main, args[:-4] + ["--node", "not-in-the-profile", "--sysfs", str(root)])
    assert res.exit_code == 0 and results(json.loads(res.output), "ib_port") == []
