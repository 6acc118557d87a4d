"""InfiniBand / RoCE port checks over fake sysfs trees (tests/fake_sysfs.py): healthy, port
down, rate 200 of 400 Gb/s, rising counters, HCA absent, sysfs unreadable; read live
by the NVML worker (real pynvml on the fake libnvidia-ml) and from a replay with a sysfs root."""

from __future__ import annotations

import json

import pytest

from fake_sysfs import healthy_tree, lose_card, sandbox_tree, set_identity, set_netdev, set_port
from slurmkit.health import checks as C
from slurmkit.health.config import judged_hcas, load_config
from slurmkit.health.fabric import COUNTERS, parse_rate, read_ib_ports
from slurmkit.health.runner import read_state
from slurmkit.health.state import NodeState
from slurmkit.profile.health import Health
from slurmkit.profile.load import load_profile

NICS = [{"device": "mlx5_0", "link_layer": "InfiniBand", "rate_gbps": 400, "role": "compute"},
        {"device": "mlx5_1", "link_layer": "InfiniBand", "rate_gbps": 400, "role": "compute"},
        {"device": "mlx5_4", "link_layer": "RoCE", "rate_gbps": 200, "role": "other"}]


def node_tree(root):
    """A healthy tree for :data:`NICS`: the compute HCAs at 400 Gb/s and the storage NIC mlx5_4, a
    RoCE port (link layer Ethernet) at 200 Gb/s, as the profile lists it."""
    healthy_tree(root)
    set_port(root, "mlx5_4", rate=200, link_layer="Ethernet")
    return root


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
    return [(r["status"], r["place"], r["value"]) for r in report["results"] if r["check"] == check]


def test_rate_text_as_the_kernel_prints_it():
    assert parse_rate("400 Gb/sec (4X NDR)") == 400.0
    assert parse_rate("2.5 Gb/sec (1X SDR)") == 2.5
    with pytest.raises(ValueError):
        parse_rate("fast")


def test_healthy_ports_pass_the_storage_nic_included(tmp_path):
    root = node_tree(tmp_path / "sys")
    state, rep = judge(root)
    assert rep["status"] == "pass", rep
    assert results(rep, "ib_port") == [("pass", "mlx5_0/1", "ACTIVE/LinkUp"), ("pass", "mlx5_1/1", "ACTIVE/LinkUp"),
                                       ("pass", "mlx5_4/1", "ACTIVE/LinkUp")]
    assert results(rep, "ib_rate") == [("pass", "mlx5_0/1", "400 Gb/s"), ("pass", "mlx5_1/1", "400 Gb/s"),
                                       ("pass", "mlx5_4/1", "200 Gb/s")]
    assert [(p["hca"], p["role"], p["tier"]) for p in state.ib_ports] == [
        ("mlx5_0", "compute", "fail"), ("mlx5_1", "compute", "fail"), ("mlx5_4", "other", "warn")]


def test_storage_nic_down_slow_or_missing_warns_by_default(tmp_path):
    root = node_tree(tmp_path / "sys")
    set_port(root, "mlx5_4", rate=200, link_layer="Ethernet", state="DOWN", phys="Disabled")
    _, rep = judge(root)
    assert rep["status"] == "warn", rep  # a storage port down is said, the node is not drained
    assert ("warn", "mlx5_4/1", "down (DOWN/Disabled)") in results(rep, "ib_port")
    msg = next(r["message"] for r in rep["results"] if r["check"] == "ib_port" and r["status"] == "warn")
    assert "role other: warns, never drains; drains with [health] ib_judge_other_nics = true" in msg
    set_port(root, "mlx5_4", rate=100, link_layer="Ethernet")
    _, rep = judge(root)
    assert rep["status"] == "warn" and results(rep, "ib_rate")[2] == ("warn", "mlx5_4/1", "100 of 200 Gb/s")
    import shutil

    shutil.rmtree(root / "class" / "infiniband" / "mlx5_4")
    _, rep = judge(root)
    assert rep["status"] == "warn" and ("warn", "mlx5_4", "missing") in results(rep, "ib_port")
    # a compute port down still fails beside it
    set_port(root, "mlx5_1", state="DOWN", phys="Polling")
    _, rep = judge(root)
    assert rep["status"] == "fail" and ("fail", "mlx5_1/1", "down (DOWN/Polling)") in results(rep, "ib_port")


def test_storage_hca_judged_when_the_profile_says_so(tmp_path):
    root = node_tree(tmp_path / "sys")
    set_port(root, "mlx5_4", rate=200, link_layer="Ethernet", state="DOWN", phys="Disabled")
    _, rep = judge(root, health=Health(ib_judge_other_nics=True))
    assert ("fail", "mlx5_4/1", "down (DOWN/Disabled)") in results(rep, "ib_port")
    assert rep["status"] == "fail"


def test_port_down_fails_naming_hca_and_port(tmp_path):
    root = node_tree(tmp_path / "sys")
    set_port(root, "mlx5_1", state="DOWN", phys="Polling")
    state, rep = judge(root)
    assert rep["status"] == "fail"
    assert results(rep, "ib_port")[1] == ("fail", "mlx5_1/1", "down (DOWN/Polling)")
    fails = [r for r in C.run_checks(state, load_config(nics=NICS)) if r.status is C.FAIL]
    assert fails[0].reason() == "slurmkit: ib mlx5_1/1: down (DOWN/Polling)"
    # a down port has no rate to judge
    assert results(rep, "ib_rate") == [("pass", "mlx5_0/1", "400 Gb/s"), ("pass", "mlx5_4/1", "200 Gb/s")]


def test_rate_200_instead_of_400_fails(tmp_path):
    root = node_tree(tmp_path / "sys")
    set_port(root, "mlx5_0", rate=200)
    _, rep = judge(root)
    assert results(rep, "ib_rate")[0] == ("fail", "mlx5_0/1", "200 of 400 Gb/s")
    assert rep["status"] == "fail"


def test_rate_zero_in_the_profile_is_not_compared(tmp_path):
    root = healthy_tree(tmp_path / "sys", rate=100)
    _, rep = judge(root, nics=[dict(NICS[0], rate_gbps=0)])
    assert results(rep, "ib_rate") == [] and rep["status"] == "pass"


def test_roce_port_must_be_ethernet_link_layer(tmp_path):
    root = healthy_tree(tmp_path / "sys", hcas=("mlx5_2",), rate=200, link_layer="InfiniBand")
    _, rep = judge(root, nics=[{"device": "mlx5_2", "link_layer": "RoCE", "rate_gbps": 200, "role": "compute"}])
    assert results(rep, "ib_port") == [("fail", "mlx5_2/1", "link layer InfiniBand, not Ethernet")]


def test_missing_hca_fails_and_a_named_port_judges_only_that_port(tmp_path):
    root = healthy_tree(tmp_path / "sys", hcas=("mlx5_0",))
    set_port(root, "mlx5_0", 2, state="DOWN", phys="Disabled")  # the unused second port of a dual-port card
    nics = [{"device": "mlx5_0:1", "link_layer": "InfiniBand", "rate_gbps": 400},
            {"device": "mlx5_1", "link_layer": "InfiniBand", "rate_gbps": 400}]
    _, rep = judge(root, nics=nics)
    assert results(rep, "ib_port") == [("pass", "mlx5_0/1", "ACTIVE/LinkUp"), ("fail", "mlx5_1", "missing")]


def test_counters_rising_between_runs_warn_then_fail(tmp_path):
    root = node_tree(tmp_path / "sys")
    counters = tmp_path / "state" / "counters.json"
    _, rep = judge(root, counters_file=counters)
    assert results(rep, "ib_counters") == []  # first run: nothing to compare with
    assert json.loads(counters.read_text())["ib"]["mlx5_0/1"]["symbol_error"] == 0
    _, rep = judge(root, counters_file=counters)
    assert results(rep, "ib_counters") == [("pass", "mlx5_0/1", "no new errors"), ("pass", "mlx5_1/1", "no new errors")]
    set_port(root, "mlx5_0", counters={"symbol_error": 7, "link_downed": 1})
    _, rep = judge(root, counters_file=counters)
    assert results(rep, "ib_counters")[0] == ("warn", "mlx5_0/1", "link_downed +1, symbol_error +7")
    assert rep["status"] == "warn"
    set_port(root, "mlx5_0", counters={"symbol_error": 107, "link_downed": 1})
    _, rep = judge(root, counters_file=counters)
    assert results(rep, "ib_counters")[0] == ("fail", "mlx5_0/1", "symbol_error +100")
    set_port(root, "mlx5_0", counters={"symbol_error": 107, "link_downed": 3})
    _, rep = judge(root, counters_file=counters)
    assert results(rep, "ib_counters")[0] == ("fail", "mlx5_0/1", "link_downed +2")  # flapping
    set_port(root, "mlx5_0", counters={"symbol_error": 4, "link_downed": 0})  # reboot: counters reset
    _, rep = judge(root, counters_file=counters)
    assert results(rep, "ib_counters")[0] == ("warn", "mlx5_0/1", "symbol_error +4")


def test_counter_thresholds_come_from_the_profile(tmp_path):
    root = node_tree(tmp_path / "sys")
    set_port(root, "mlx5_0", counters={"port_rcv_errors": 12})
    base = {"ib": {"mlx5_0/1": {"port_rcv_errors": 2}, "mlx5_1/1": {}}}
    _, rep = judge(root, baseline=base)
    assert results(rep, "ib_counters")[0][0] == "warn"
    _, rep = judge(root, baseline=base, health=Health(thresholds={"ib_counter_rise_fail": 10}))
    assert results(rep, "ib_counters")[0] == ("fail", "mlx5_0/1", "port_rcv_errors +10")


def test_sysfs_unreadable_is_own_trouble_never_a_fail(tmp_path):
    _, rep = judge(tmp_path / "not-a-sysfs")
    assert rep["status"] == "error" and [r for r in rep["results"] if r["check"].startswith("ib_")] == []
    assert "is not readable" in rep["errors"][0]
    root = node_tree(tmp_path / "sys")
    state_file = root / "class" / "infiniband" / "mlx5_0" / "ports" / "1" / "state"
    state_file.unlink()
    state_file.mkdir()  # a file that cannot be read (even by root)
    _, rep = judge(root)
    assert rep["status"] == "error"
    assert results(rep, "ib_port") == [("pass", "mlx5_1/1", "ACTIVE/LinkUp"), ("pass", "mlx5_4/1", "ACTIVE/LinkUp")]
    assert any("mlx5_0/ports/1/state" in e for e in rep["errors"])


def test_a_corrupt_counters_file_means_no_previous_run(tmp_path):
    root = node_tree(tmp_path / "sys")
    counters = tmp_path / "counters.json"
    counters.write_text("{not json")
    _, rep = judge(root, counters_file=counters)
    assert results(rep, "ib_counters") == [] and rep["status"] == "pass"
    assert json.loads(counters.read_text())["slurmkit_counters"] == 1


def test_profile_nics_select_the_hcas(tmp_path):
    prof = load_profile("dgx-h100")
    hcas = judged_hcas(next(iter(prof.node_types.values())).nics)
    assert hcas and all(h["link_layer"] in ("InfiniBand", "RoCE") for h in hcas)
    # compute HCAs drain; the storage ones (role other) are judged too, at the warn tier
    assert {h["tier"] for h in hcas if h["role"] == "compute"} == {"fail"}
    assert {h["tier"] for h in hcas if h["role"] != "compute"} == {"warn"}
    assert [h for h in hcas if h["role"] != "compute"]  # dgx-h100 lists its storage NICs


def test_live_worker_reads_the_ports_and_the_snapshot_keeps_them(fake_nvml, tmp_path):
    root = node_tree(tmp_path / "sys")
    set_port(root, "mlx5_1", rate=200)
    hcas = judged_hcas(NICS)
    s = read_state("live", env=fake_nvml.env("healthy", gpus=2), sysfs=root, fabric={"hcas": hcas})
    assert [(p["hca"], p["rate_gbps"]) for p in s.ib_ports] == [("mlx5_0", 400.0), ("mlx5_1", 200.0),
                                                                ("mlx5_4", 200.0)]
    snap = tmp_path / "n1.json"
    snap.write_text(json.dumps(s.to_json()))
    replay = read_state(snap)
    assert replay.ib_ports == s.ib_ports
    rep = C.evaluate(replay, load_config(nics=NICS))
    assert ("fail", "mlx5_1/1", "200 of 400 Gb/s") in results(rep, "ib_rate")


def test_replay_with_a_sysfs_root_reads_the_ports_there(healthy, tmp_path):
    path, _ = healthy
    root = node_tree(tmp_path / "sys")
    set_port(root, "mlx5_0", state="DOWN", phys="Polling")
    s = read_state(path, sysfs=root, fabric={"hcas": judged_hcas(NICS)})
    assert s.ib_ports[0]["state"] == "DOWN"
    assert read_state(path, fabric={"hcas": judged_hcas(NICS)}).ib_ports is None  # no root: the capture's (none)


def test_health_check_cli_judges_the_ports_of_the_nodes_type(healthy, tmp_path):
    from click.testing import CliRunner

    from slurmkit.cli import cli as cli_main

    path, _ = healthy
    root = sandbox_tree(tmp_path / "sys")  # the sandbox node type's NICs: 4 compute, 1 storage
    args = ["--json", "health", "check", "--from", str(path), "--site", "sandbox", "--node", "n2", "--sysfs", str(root)]
    res = CliRunner().invoke(cli_main, args)
    rep = json.loads(res.output)
    assert res.exit_code == 0 and len(results(rep, "ib_port")) == 5, res.output
    assert rep["status"] == "pass", res.output
    set_port(root, "mlx5_3", rate=100)
    res = CliRunner().invoke(cli_main, args)
    assert res.exit_code == 1
    assert results(json.loads(res.output), "ib_rate")[3] == ("fail", "mlx5_3/1", "100 of 400 Gb/s")
    other = args[:-4] + ["--node", "not-in-the-profile", "--sysfs", str(root)]
    res = CliRunner().invoke(cli_main, other)
    rep = json.loads(res.output)
    # no node type: every port the kernel lists must be ACTIVE/LinkUp; no rate is expected of it
    assert res.exit_code == 0 and rep["status"] == "warn"
    assert results(rep, "ib_port") == [("pass", f"mlx5_{i}/1", "ACTIVE/LinkUp") for i in range(5)]
    assert results(rep, "ib_rate") == []
    # said, not passed in silence: the node has no node type, so only the kernel's list is judged
    assert results(rep, "node_type") == [
        ("warn", "", "no node type for this node: fabric judged by what the kernel lists")]
    assert "not-in-the-profile" in next(r["message"] for r in rep["results"] if r["check"] == "node_type")
    set_port(root, "mlx5_2", state="DOWN", phys="Polling")
    res = CliRunner().invoke(cli_main, other)
    rep = json.loads(res.output)
    assert res.exit_code == 0 and rep["status"] == "warn", res.output  # warns, never drains
    assert ("warn", "mlx5_2/1", "down (DOWN/Polling)") in results(rep, "ib_port")
    msg = next(r["message"] for r in rep["results"] if r["check"] == "ib_port" and r["status"] == "warn")
    assert "no node type for this node" in msg and "never drains" in msg
    set_port(root, "mlx5_2")
    res = CliRunner().invoke(cli_main, args)
    assert results(json.loads(res.output), "node_type") == [("pass", "", "sandbox-h100x4")]


# ---- identity: PCI address and netdev, the kernel renumbering HCAs -----------------------------

PCIS = {"mlx5_0": "0000:18:00.0", "mlx5_1": "0000:40:00.0", "mlx5_2": "0000:4f:00.0", "mlx5_3": "0000:5e:00.0"}


def _nics(with_pci: bool):
    return [{"device": h, "link_layer": "InfiniBand", "rate_gbps": 400, "role": "compute",
             **({"pci": p} if with_pci else {})} for h, p in PCIS.items()]


def test_ports_carry_their_pci_address_and_netdev(tmp_path):
    root = healthy_tree(tmp_path / "sys", hcas=tuple(PCIS), pcis=PCIS)
    state, rep = judge(root, nics=_nics(False))
    assert [(p["hca"], p["pci"], p["netdev"]) for p in state.ib_ports] == [
        ("mlx5_0", "0000:18:00.0", "ibp24s0"), ("mlx5_1", "0000:40:00.0", "ibp64s0"),
        ("mlx5_2", "0000:4f:00.0", "ibp79s0"), ("mlx5_3", "0000:5e:00.0", "ibp94s0")]
    set_port(root, "mlx5_2", state="DOWN", phys="Polling")
    state, rep = judge(root, nics=_nics(False))
    fail = next(r for r in C.run_checks(state, load_config(nics=_nics(False))) if r.status is C.FAIL)
    assert fail.reason() == "slurmkit: ib mlx5_2/1 ibp79s0: down (DOWN/Polling)"


def test_a_lost_card_is_named_by_its_pci_address_not_the_renumbered_name(tmp_path):
    root = healthy_tree(tmp_path / "sys", hcas=tuple(PCIS), pcis=PCIS)
    assert lose_card(root, "mlx5_1") == {"mlx5_2": "mlx5_1", "mlx5_3": "mlx5_2"}
    # by name only, the check judges the wrong cards: the last name is the one "missing"
    _, rep = judge(root, nics=_nics(False))
    assert [x[:2] for x in results(rep, "ib_port")] == [("pass", "mlx5_0/1 ibp24s0"), ("pass", "mlx5_1/1 ibp79s0"),
                                                        ("pass", "mlx5_2/1 ibp94s0"), ("fail", "mlx5_3")]
    # by PCI address: the card that is gone is the one reported, the others are found under their new names
    state, rep = judge(root, nics=_nics(True))
    assert results(rep, "ib_port") == [("pass", "mlx5_0/1 ibp24s0", "ACTIVE/LinkUp"),
                                       ("fail", "mlx5_1 0000:40:00.0", "missing"),
                                       ("pass", "mlx5_1/1 ibp79s0", "ACTIVE/LinkUp"),
                                       ("pass", "mlx5_2/1 ibp94s0", "ACTIVE/LinkUp")]
    fail = next(r for r in C.run_checks(state, load_config(nics=_nics(True))) if r.status is C.FAIL)
    assert fail.reason() == "slurmkit: ib mlx5_1 0000:40:00.0: missing"
    assert "no HCA at PCI 0000:40:00.0" in fail.message
    moved = next(r for r in C.run_checks(state, load_config(nics=_nics(True))) if r.place.startswith("mlx5_2/1"))
    assert "the profile's mlx5_3" in moved.message


def test_counters_follow_the_card_when_the_kernel_renumbers(tmp_path):
    root = healthy_tree(tmp_path / "sys", hcas=tuple(PCIS), pcis=PCIS)
    counters = tmp_path / "counters.json"
    judge(root, nics=_nics(True), counters_file=counters)
    assert set(json.loads(counters.read_text())["ib"]) == {f"{p}/1" for p in PCIS.values()}
    lose_card(root, "mlx5_1")
    set_port(root, "mlx5_2", counters={"symbol_error": 3})  # the profile's mlx5_3, now named mlx5_2
    _, rep = judge(root, nics=_nics(True), counters_file=counters)
    assert results(rep, "ib_counters") == [("pass", "mlx5_0/1 ibp24s0", "no new errors"),
                                           ("pass", "mlx5_1/1 ibp79s0", "no new errors"),
                                           ("warn", "mlx5_2/1 ibp94s0", "symbol_error +3")]


def test_the_netdev_of_each_port_of_a_dual_port_function(tmp_path):
    root = healthy_tree(tmp_path / "sys", hcas=("mlx5_bond_0",), link_layer="Ethernet", rate=100)
    set_port(root, "mlx5_bond_0", 2, link_layer="Ethernet", rate=100)
    set_identity(root, "mlx5_bond_0", "0000:81:00.0", netdevs=["enp129s0f0np0", "enp129s0f0np1"])
    nics = [{"device": "mlx5_bond_0", "link_layer": "RoCE", "rate_gbps": 100, "role": "compute"}]
    state, _ = judge(root, nics=nics)
    assert [(p["port"], p["netdev"]) for p in state.ib_ports] == [(1, "enp129s0f0np0"), (2, "enp129s0f0np1")]
    # no net/ directory (a VF, a container): the RoCE GID table names the netdev
    root2 = healthy_tree(tmp_path / "sys2", hcas=("rocep1s0",), link_layer="Ethernet", rate=100)
    nd = root2 / "class" / "infiniband" / "rocep1s0" / "ports" / "1" / "gid_attrs" / "ndevs"
    nd.mkdir(parents=True)
    (nd / "0").write_text("eth4\n")
    state, _ = judge(root2, nics=[dict(nics[0], device="rocep1s0")])
    assert state.ib_ports[0]["netdev"] == "eth4" and state.ib_ports[0]["pci"] is None


def test_profile_pci_is_validated_and_normalised(tmp_path):
    from slurmkit.errors import InputError

    site = tmp_path / "site.toml"
    body = ('[cluster]\nname = "c"\n[partitions.p]\nnodes = "n[1-2]"\nnode_type = "t"\n'
            '[node_types.t]\ngpu_model = "h100"\ngpu_count = 1\n'
            '[[node_types.t.nics]]\ndevice = "mlx5_0"\nlink_layer = "InfiniBand"\npci = "{}"\n'
            '[[node_types.t.nics]]\ndevice = "mlx5_1"\nlink_layer = "InfiniBand"\npci = "{}"\n')
    site.write_text(body.format("0000:9B:00.0", "1c:00.0"))
    nt = load_profile(site).node_types["t"]
    assert [n.pci for n in nt.nics] == ["0000:9b:00.0", "0000:1c:00.0"]  # the form sysfs writes
    for bad, key in ((("slot 3", "0000:1c:00.0"), "nics[0].pci"), (("0000:1c:00.0", "0000:1C:00.0"), "nics[1].pci")):
        site.write_text(body.format(*bad))
        with pytest.raises(InputError) as exc:
            load_profile(site)
        assert f"node_types.t.{key}" in str(exc.value) and str(site) in str(exc.value)


def test_the_dgx_h100_profile_finds_its_compute_hcas_by_pci(tmp_path):
    prof = load_profile("dgx-h100")
    nt = prof.node_types["dgx-h100"]
    hcas = [h for h in judged_hcas(nt.nics) if h["role"] == "compute"]
    assert [(h["device"], h["pci"]) for h in hcas][:2] == [("mlx5_0", "0000:18:00.0"), ("mlx5_3", "0000:40:00.0")]
    assert all(h["pci"] for h in hcas) and len(hcas) == 8 and {h["tier"] for h in hcas} == {"fail"}


# ---- saturated counters --------------------------------------------------------------------------

def test_counter_widths_are_the_kernels():
    from slurmkit.health.fabric import COUNTER_BITS, counter_max

    assert set(COUNTER_BITS) == set(COUNTERS)
    assert (counter_max("symbol_error"), counter_max("port_rcv_errors"), counter_max("link_downed"),
            counter_max("link_error_recovery"), counter_max("local_link_integrity_errors"),
            counter_max("excessive_buffer_overrun_errors")) == (65535, 65535, 255, 255, 15, 15)


def test_a_saturated_counter_warns_even_without_a_previous_run(tmp_path):
    root = node_tree(tmp_path / "sys")
    set_port(root, "mlx5_0", counters={"symbol_error": 65535})
    state, rep = judge(root)
    assert results(rep, "ib_counters") == [("warn", "mlx5_0/1", "symbol_error saturated")]
    r = next(r for r in C.run_checks(state, load_config(nics=NICS)) if r.check == "ib_counters")
    assert "counter saturated (symbol_error at 65535), cannot judge rises" in r.message
    assert "reset with perfquery -C mlx5_0 -P 1 -R" in r.message
    assert rep["status"] == "warn"  # never a drain: the counter cannot say whether errors go on


def test_saturation_then_reset_and_a_rise_into_saturation(tmp_path):
    root = node_tree(tmp_path / "sys")
    counters = tmp_path / "counters.json"
    set_port(root, "mlx5_0", counters={"link_downed": 250})
    judge(root, counters_file=counters)
    set_port(root, "mlx5_0", counters={"link_downed": 255})  # rose by 5 at least, and stuck there now
    _, rep = judge(root, counters_file=counters)
    assert results(rep, "ib_counters")[0] == ("fail", "mlx5_0/1", "link_downed +5")
    _, rep = judge(root, counters_file=counters)
    assert results(rep, "ib_counters")[0] == ("warn", "mlx5_0/1", "link_downed saturated")  # still at 255
    set_port(root, "mlx5_0", counters={"link_downed": 0})  # perfquery -R
    _, rep = judge(root, counters_file=counters)
    assert results(rep, "ib_counters")[0] == ("pass", "mlx5_0/1", "no new errors")
    set_port(root, "mlx5_0", counters={"local_link_integrity_errors": 15})  # a 4-bit counter
    _, rep = judge(root, counters_file=counters)
    assert results(rep, "ib_counters")[0] == ("warn", "mlx5_0/1", "local_link_integrity_errors +15")


def test_a_counter_without_a_pma_is_absent_not_own_trouble(tmp_path):
    root = node_tree(tmp_path / "sys")
    set_port(root, "mlx5_0", counters={c: "N/A (no PMA)" for c in COUNTERS})
    state, rep = judge(root)
    assert state.ib_ports[0]["counters"] == {} and rep["errors"] == [] and rep["status"] == "pass"


# ---- Ethernet ports: the judgement follows the link layer ----------------------------------------

def test_storage_ports_declared_ethernet_drain_with_ib_judge_other_nics(tmp_path):
    root = node_tree(tmp_path / "sys")
    set_port(root, "mlx5_7", rate=200, link_layer="Ethernet", state="DOWN", phys="Disabled")
    nics = NICS[:2] + [{"device": "mlx5_7", "link_layer": "Ethernet", "rate_gbps": 400, "role": "other"}]
    _, rep = judge(root, nics=nics)
    assert results(rep, "ib_port")[2] == ("warn", "mlx5_7/1", "down (DOWN/Disabled)")  # role other: warns
    _, rep = judge(root, nics=nics, health=Health(ib_judge_other_nics=True))
    assert results(rep, "ib_port")[2] == ("fail", "mlx5_7/1", "down (DOWN/Disabled)")
    set_port(root, "mlx5_7", rate=200, link_layer="Ethernet", counters={"symbol_error": 900})
    base = {"ib": {"mlx5_7/1": {"symbol_error": 0}}}
    _, rep = judge(root, nics=nics, health=Health(ib_judge_other_nics=True), baseline=base)
    assert results(rep, "ib_port")[2] == ("pass", "mlx5_7/1", "ACTIVE/LinkUp")
    assert results(rep, "ib_rate")[2] == ("fail", "mlx5_7/1", "200 of 400 Gb/s")
    assert [x[1] for x in results(rep, "ib_counters")] == []  # an Ethernet port's PMA counters are not judged


def test_a_plain_ethernet_nic_is_judged_by_its_netdev(tmp_path):
    root = healthy_tree(tmp_path / "sys", hcas=())
    set_netdev(root, "eth1", operstate="up", speed_mbit=25000, pci="0000:a1:00.1")
    nics = [{"device": "eth1", "link_layer": "Ethernet", "rate_gbps": 100, "role": "other"}]
    _, rep = judge(root, nics=nics, health=Health(ib_judge_other_nics=True))
    assert results(rep, "ib_port") == [("pass", "eth1", "UP")]
    assert results(rep, "ib_rate") == [("fail", "eth1", "25 of 100 Gb/s")]
    set_netdev(root, "eth1", operstate="down", speed_mbit=None)
    state, rep = judge(root, nics=nics, health=Health(ib_judge_other_nics=True))
    assert results(rep, "ib_port") == [("fail", "eth1", "down (DOWN)")] and results(rep, "ib_rate") == []
    # found by PCI address whatever the netdev is called now
    _, rep = judge(root, nics=[dict(nics[0], device="eth9", pci="0000:a1:00.1")], health=Health(ib_judge_other_nics=True))
    assert results(rep, "ib_port") == [("fail", "eth1", "down (DOWN)")]


def test_the_dgx_h100_storage_nics_are_judged_when_asked():
    prof = load_profile("dgx-h100")
    nics = prof.node_types["dgx-h100"].nics
    other = [(h["device"], h["tier"]) for h in judged_hcas(nics, other_roles=True) if h["role"] == "other"]
    assert other == [("mlx5_1", "fail"), ("mlx5_2", "fail"), ("mlx5_7", "fail"), ("mlx5_8", "fail")]
    cfg = load_config(prof.health, nics=nics)  # by default: every NIC judged, the storage ones warn
    assert [h["device"] for h in cfg.expect["hcas"]] == [n.device for n in nics]
    assert [h["device"] for h in cfg.expect["hcas"] if h["tier"] == "warn"] == ["mlx5_1", "mlx5_2", "mlx5_7", "mlx5_8"]


def test_a_node_without_a_node_type_has_every_listed_port_judged_at_the_warn_tier(tmp_path):
    # the ports of gpud's real H100 tree (leptonai/gpud components/accelerator/nvidia/infiniband/
    # class/testdata/sys-class-infiniband-h100.0): eight NDR HCAs (mlx5_0, 1, 4-9: "4: ACTIVE",
    # "5: LinkUp", "400 Gb/sec (4X NDR)", InfiniBand), mlx5_1's link_downed at 255 (saturated), and
    # the storage bond mlx5_bond_0 ("200 Gb/sec (2X NDR)" on the Ethernet link layer)
    hcas = ("mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9")
    root = healthy_tree(tmp_path / "sys", hcas=hcas)
    set_port(root, "mlx5_1", counters={"link_downed": 255})
    bond = set_port(root, "mlx5_bond_0", link_layer="Ethernet")
    (bond / "rate").write_text("200 Gb/sec (2X NDR)\n")
    cfg = load_config(None, no_node_type="gpu01")
    state = NodeState(node="gpu01", source="test")
    state.ib_ports, state.errors = read_ib_ports(root, cfg.expect["hcas"])
    rep = C.evaluate(state, cfg)
    assert state.errors == [] and rep["status"] == "warn"
    assert results(rep, "ib_port") == [("pass", f"{h}/1", "ACTIVE/LinkUp") for h in (*hcas, "mlx5_bond_0")]
    assert results(rep, "ib_rate") == []  # no node type: no rate expected
    assert results(rep, "ib_counters") == [("warn", "mlx5_1/1", "link_downed saturated")]
    assert {(p["role"], p["tier"]) for p in state.ib_ports} == {("unlisted", "warn")}
    # the storage bond goes down: said, never a drain
    set_port(root, "mlx5_bond_0", link_layer="Ethernet", state="DOWN", phys="Disabled")
    state.ib_ports, state.errors = read_ib_ports(root, cfg.expect["hcas"])
    rep = C.evaluate(state, cfg)
    assert rep["status"] == "warn" and results(rep, "ib_port")[-1] == ("warn", "mlx5_bond_0/1", "down (DOWN/Disabled)")
    # a node without an HCA at all: nothing to judge, no trouble
    bare = healthy_tree(tmp_path / "bare", hcas=())
    assert read_ib_ports(bare, cfg.expect["hcas"]) == ([], [])
