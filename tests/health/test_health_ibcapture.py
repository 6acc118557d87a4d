"""Fabric captures (ibstat, ibv_devinfo [-v], ibdev2netdev) imported into a snapshot and replayed
by ``health check --from``: real captures (../shared/corpus/fabric: leptonai/gpud's ibstat test
data; tests/health/fabric: public ibv_devinfo / ibdev2netdev outputs, README there)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from slurmkit.cli import cli
from slurmkit.health.ibcapture import (STOPPED, CaptureFormatError, capture_ports, kind_of, parse_ibdev2netdev,
                                       parse_ibstat, parse_ibv_devinfo, read_captures)
from slurmkit.health.state import NodeState

DATA = Path(__file__).with_name("fabric")


@pytest.fixture
def fabric(corpus) -> Path:
    """../shared/corpus/fabric (leptonai/gpud's ibstat captures; skips as ``corpus`` does when the
    shared corpus is absent)."""
    return corpus / "fabric"


def test_ibstat_with_tabs_and_with_spaces_and_a_partial_output_ending_in_ibpanic(fabric):
    tabs = (fabric / "ibstat.47.0.a100.all.active.0").read_text()
    assert "\t" in tabs
    devices, notes = parse_ibstat(tabs)
    assert sorted(devices) == [f"mlx5_{i}" for i in range(9)] and notes == []
    assert devices["mlx5_0"][1] == {"state": (4, "ACTIVE"), "phys_state": (5, "LinkUp"), "rate_gbps": 200.0,
                                    "link_layer": "Ethernet"}  # a RoCE node
    spaces = (fabric / "ibstat.39.0.a100.failed.ibpanic.exit-255.0").read_text()
    assert "\t" not in spaces
    devices, notes = parse_ibstat(spaces)
    assert sorted(devices) == sorted([f"mlx5_{i}" for i in range(8)] + [STOPPED]) and devices[STOPPED] == "mlx5_8"
    assert "stat of IB device 'mlx5_8' failed: No such file or directory" in notes[0]
    down, _ = parse_ibstat((fabric / "ibstat.47.0.h100.some.down.0").read_text())
    assert {h for h, ports in down.items() if ports[1]["state"][1] != "ACTIVE"} == {"mlx5_2", "mlx5_7", "mlx5_8"}
    assert down["mlx5_2"][1]["phys_state"] == (3, "Disabled") and down["mlx5_2"][1]["rate_gbps"] == 40.0


def test_ibv_devinfo_plain_and_verbose_and_ibdev2netdev():
    devices, _ = parse_ibv_devinfo((DATA / "ibv_devinfo.mlx4-dualport.txt").read_text())
    assert devices == {"mlx4_1": {1: {"state": (4, "ACTIVE"), "link_layer": "InfiniBand"},
                                  2: {"state": (1, "DOWN"), "link_layer": "InfiniBand"}}}
    devices, _ = parse_ibv_devinfo((DATA / "ibv_devinfo-v.roce-port.txt").read_text())
    assert devices["mlx5_0"][1] == {"state": (4, "ACTIVE"), "link_layer": "Ethernet", "phys_state": (5, "LinkUp"),
                                    "rate_gbps": 100.0}  # 2X at 50.0 Gbps
    nd, _ = parse_ibdev2netdev((DATA / "ibdev2netdev.dgx-h100.txt").read_text())
    assert nd["mlx5_10"][1] == {"netdev": "ibp220s0", "netdev_up": True, "carrier_state": (4, "ACTIVE")} and len(nd) == 11
    assert [kind_of(p.read_text()) for p in sorted(DATA.glob("*.txt"))] == [
        "ibdev2netdev", "ibdev2netdev", "ibdev2netdev", "ibstat", "ibv_devinfo", "ibv_devinfo"]
    with pytest.raises(CaptureFormatError, match=r"x.txt:2: want '<hca> port <n> ==> <netdev>"):
        parse_ibdev2netdev("mlx5_0 port 1 ==> ibp24s0 (Up)\nmlx5_1 port one\n", "x.txt")


def test_a_capture_gives_the_port_records_a_sysfs_read_gives(fabric, tmp_path):
    from fake_sysfs import healthy_tree
    from slurmkit.health.fabric import read_ib_ports

    hcas = [{"device": h, "link_layer": "RoCE", "rate_gbps": 200, "role": "compute", "pci": None}
            for h in ("mlx5_0",)]  # this capture's mlx5_0 is a RoCE port at 200 Gb/s
    devices, _ = read_captures({"ibstat": (fabric / "ibstat.47.0.a100.all.active.0").read_text()})
    got, notes = capture_ports(devices, hcas)
    root = healthy_tree(tmp_path / "sys", hcas=("mlx5_0",), rate=200, link_layer="Ethernet")
    live, _ = read_ib_ports(root, hcas)
    keys = ("hca", "port", "state", "phys_state", "rate_gbps", "link_layer", "expected_link_layer",
            "expected_rate_gbps", "role")
    assert [{k: p[k] for k in keys} for p in got] == [{k: p[k] for k in keys} for p in live]
    assert notes == [] and all(p["counters"] == {} for p in got)  # ibstat prints no error counters


def _empty_snapshot(tmp_path) -> Path:
    p = tmp_path / "empty.json"
    p.write_text(json.dumps(NodeState(node="x", source="live", init_rc="SUCCESS", gpu_count=0).to_json()))
    return p


def test_import_and_replay_judge_the_captured_fabric_against_the_snapshots_node(fabric, tmp_path):
    snap = tmp_path / "a100.json"
    r = CliRunner().invoke(cli, ["health", "import", str(_empty_snapshot(tmp_path)), "-o", str(snap), "--node",
                                 "dgx001", "--site", "dgx-a100", "--fabric",
                                 str(fabric / "ibstat.39.0.a100.failed.ibpanic.exit-255.0")])
    assert r.exit_code == 0, r.output
    ports = json.loads(snap.read_text())["ib_ports"]
    # ibstat could not stat mlx5_8; it lists HCAs in alphasort order (mlx5_1, mlx5_10, mlx5_11,
    # mlx5_2, ... as gpud's H100 captures show), so the profile's storage NICs mlx5_10 and mlx5_11,
    # which would come before mlx5_2, are not on this node
    assert [p["hca"] for p in ports if p.get("missing")] == ["mlx5_8", "mlx5_10", "mlx5_11"]
    # no --node: the snapshot's node (dgx001, a DGX A100 in the profile), not this host
    r = CliRunner().invoke(cli, ["health", "check", "--from", str(snap), "--site", "dgx-a100", "--json"])
    assert r.exit_code == 1, r.output
    rep = json.loads(r.output)
    fails = [(x["check"], x["place"], x["value"]) for x in rep["results"] if x["status"] == "fail"]
    assert fails == [("ib_port", "mlx5_8", "missing")]
    # the storage NICs (role other) warn: said, never a drain
    warns = [(x["check"], x["place"], x["value"]) for x in rep["results"] if x["status"] == "warn" and
             x["check"].startswith("ib_")]
    # (this node runs its storage cards mlx5_4/5 on InfiniBand where the shipped profile says Ethernet)
    assert warns == [("ib_port", "mlx5_4/1", "link layer InfiniBand, not Ethernet"),
                     ("ib_port", "mlx5_5/1", "link layer InfiniBand, not Ethernet"),
                     ("ib_port", "mlx5_10", "missing"), ("ib_port", "mlx5_11", "missing")], warns
    assert any("mlx5_9 not reported (ibstat stopped at mlx5_8): not judged" in e for e in rep["errors"])
    # ibv_devinfo: the down port of the dual-port card fails, named by HCA and port
    snap2 = tmp_path / "mlx4.json"
    r = CliRunner().invoke(cli, ["health", "import", str(_empty_snapshot(tmp_path)), "-o", str(snap2), "--fabric",
                                 str(DATA / "ibv_devinfo.mlx4-dualport.txt")])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(cli, ["health", "check", "--from", str(snap2)])
    assert r.exit_code == 1 and "ib_port                      mlx4_1/2" in r.output, r.output
    assert "down (DOWN/not in the capture)" in r.output


def test_a_file_that_is_no_fabric_capture_is_a_clear_error(tmp_path):
    bad = tmp_path / "notes.txt"
    bad.write_text("hello\n")
    r = CliRunner().invoke(cli, ["health", "import", str(_empty_snapshot(tmp_path)), "-o", str(tmp_path / "o.json"),
                                 "--fabric", str(bad)])
    assert r.exit_code == 2 and f"{bad}:1: not ibstat, ibv_devinfo or ibdev2netdev output" in r.output, r.output
    assert "Traceback" not in r.output


def _import(tmp_path, *captures, site=None):
    snap = tmp_path / "paste.json"
    args = ["health", "import", str(_empty_snapshot(tmp_path)), "-o", str(snap)]
    for c in captures:
        args += ["--fabric", str(c)]
    r = CliRunner().invoke(cli, args + (["--site", site] if site else []))
    assert "Traceback" not in r.output, r.output
    return r, snap


def _check(snap) -> tuple[int, dict]:
    r = CliRunner().invoke(cli, ["health", "check", "--from", str(snap), "--json"])
    return r.exit_code, json.loads(r.output)


def _ports(rep) -> list[tuple]:
    return [(x["place"], x["status"], x["value"]) for x in rep["results"] if x["check"] == "ib_port"]


def test_pasted_captures_parse_with_a_note_of_what_was_skipped(corpus, tmp_path):
    pastes = corpus / "fabric" / "pastes"
    # '# ibstat' (a root prompt's command) before a healthy NDR400 capture
    r, snap = _import(tmp_path, pastes / "DeepEP-303_ibstat_H20_healthy-NDR400.TRUNCATED.txt")
    assert r.exit_code == 0, r.output
    code, rep = _check(snap)
    assert code == 0 and _ports(rep) == [("mlx5_0/1", "pass", "ACTIVE/LinkUp"), ("mlx5_1/1", "pass", "ACTIVE/LinkUp")]
    assert rep["notes"] == [f"{pastes}/DeepEP-303_ibstat_H20_healthy-NDR400.TRUNCATED.txt: skipped 1 line that is "
                            "not the tool's output: 1 (command or comment '# ibstat')"] and rep["errors"] == []
    # a 'root@host:~# ibv_devinfo' prompt; the down port fails, named
    r, snap = _import(tmp_path, pastes / "DeepEP-38_ibv_devinfo_mlx5_0_PORT_DOWN.TRUNCATED.txt")
    code, rep = _check(snap)
    assert code == 1 and _ports(rep) == [("mlx5_0/1", "fail", "down (DOWN/not in the capture)")]
    assert "1 (shell prompt 'root@f51fec68bf55:~# ibv_devinfo')" in rep["notes"][0]
    # a leading '...' elision before a partial output that ends in ibpanic: the HCA it names fails
    r, snap = _import(tmp_path, pastes / "gpud-pr752_ibstat_partial-output_tabs_ibpanic-mlx5_8.txt")
    code, rep = _check(snap)
    assert code == 1 and _ports(rep) == [("mlx5_7/1", "pass", "ACTIVE/LinkUp"), ("mlx5_8", "fail", "missing")]
    assert "1 ('...' elision)" in rep["notes"][0]
    # no paste decoration: no note
    r, snap = _import(tmp_path, pastes / "sglang-6823_ibstat_Ethernet-Down-Disabled-Rate40.TRUNCATED.txt")
    code, rep = _check(snap)
    assert code == 1 and "notes" not in rep and [p[:2] for p in _ports(rep)] == [("mlx5_0/1", "fail"),
                                                                                 ("mlx5_1/1", "fail")]
    r, snap = _import(tmp_path, pastes / "gpud-pr482_ibstat_mlx5_10_State-Down_Phys-Polling_Rate10_guids-elided.txt")
    code, rep = _check(snap)
    assert code == 1 and _ports(rep) == [("mlx5_10/1", "fail", "down (DOWN/Polling)")]


def test_ibdev2netdev_up_and_down_are_states_except_an_ipoib_carrier(corpus, tmp_path):
    paste = corpus / "fabric" / "pastes" / "imbue-cluster-health-4_ibdev2netdev_H100_CX7-IB_CX6-ETH_annotated.txt"
    devices, notes = parse_ibdev2netdev(paste.read_text(), "p")
    # '$ ibdev2netdev | column -t' and the maintainer's twelve '# CX-7 ...' comments
    assert notes[0].startswith("p: skipped 13 lines that are not the tool's output: 1 (shell prompt "
                               "'$ ibdev2netdev | column -t'), 2 (comment '# CX-7 1/8 infiniband')")
    assert devices["mlx5_1"][1]["carrier_state"] == (4, "ACTIVE")   # enp27s0f0np0 (Up)
    assert devices["mlx5_2"][1]["carrier_state"] == (1, "DOWN")     # a RoCE netdev without carrier
    assert "carrier_state" not in devices["mlx5_0"][1]              # ibp26s0 (Down): IPoIB, says nothing
    assert "mlx5_0/1, mlx5_10/1" in notes[1] and "not the InfiniBand port's state" in notes[1]
    r, snap = _import(tmp_path, paste)
    code, rep = _check(snap)
    assert code == 1 and [p for p in _ports(rep) if p[1] != "pass"] == [
        ("mlx5_2/1 enp27s0f1np1", "fail", "down (DOWN/not in the capture)"),
        ("mlx5_8/1 enp157s0f1np1", "fail", "down (DOWN/not in the capture)")]
    assert ("mlx5_1/1 enp27s0f0np0", "pass", "ACTIVE/LinkUp") in _ports(rep)


def test_a_capture_cut_inside_a_port_or_an_hca_is_unreadable(corpus, tmp_path):
    # a real paste (set -x trace and ibwarn lines before it) that ends inside port 2
    r, _ = _import(tmp_path, DATA / "ibstat.mlx4-xtrace-ibwarn.cut-in-port2.txt")
    assert r.exit_code == 2 and ("ibstat.mlx4-xtrace-ibwarn.cut-in-port2.txt:28: mlx4_0 port 2 has no 'Link layer' "
                                 "line: the ibstat capture is cut (or elided) inside the port") in r.output
    devices, notes = parse_ibstat("".join((DATA / "ibstat.mlx4-xtrace-ibwarn.cut-in-port2.txt").open().readlines()[:23])
                                  .replace("Number of ports: 2", "Number of ports: 1"), "x")
    assert devices["mlx4_0"][1]["state"] == (1, "DOWN") and "1 (shell trace '+ sleep 10')" in notes[0]
    # edits of DeepEP-303's real paste: cut inside mlx5_1's port, and inside the HCA before its port
    lines = (corpus / "fabric" / "pastes" / "DeepEP-303_ibstat_H20_healthy-NDR400.TRUNCATED.txt").read_text().splitlines()
    for keep, want in ((28, "x.txt:28: mlx5_1 port 1 has no 'Rate' line"),
                       (23, "x.txt:23: mlx5_1 has 0 of its 1 ports: the ibstat capture is cut (or elided) inside "
                            "the HCA")):
        with pytest.raises(CaptureFormatError, match=re.escape(want)):
            parse_ibstat("\n".join(lines[:keep]) + "\n", "x.txt")
    # an edit of DeepEP-38's ibv_devinfo paste cut before its port's link_layer
    cut = tmp_path / "devinfo-cut.txt"
    cut.write_text("\n".join((corpus / "fabric" / "pastes" / "DeepEP-38_ibv_devinfo_mlx5_0_PORT_DOWN.TRUNCATED.txt")
                             .read_text().splitlines()[:14]) + "\n")
    r, _ = _import(tmp_path, cut)
    assert r.exit_code == 2 and f"{cut}:14: mlx5_0 port 1 has no 'link_layer' line" in r.output, r.output


def test_an_ibpanic_stop_names_its_hca_without_a_site(corpus, tmp_path):
    r, snap = _import(tmp_path, corpus / "fabric" / "ibstat.39.0.a100.failed.ibpanic.exit-255.0")
    assert r.exit_code == 0 and "(ibstat stopped at)" not in r.output + snap.read_text()
    code, rep = _check(snap)
    assert code == 1 and [p for p in _ports(rep) if p[1] != "pass"] == [("mlx5_8", "fail", "missing")]


def test_check_sysfs_without_a_site_judges_every_port_on_its_state(tmp_path):
    from fake_sysfs import healthy_tree, set_port

    root = healthy_tree(tmp_path / "sys", hcas=("mlx5_0", "mlx5_1"))
    set_port(root, "mlx5_1", state="DOWN", phys="Disabled")
    r = CliRunner().invoke(cli, ["health", "check", "--from", str(_empty_snapshot(tmp_path)), "--sysfs", str(root),
                                 "--json"])
    rep = json.loads(r.output)
    assert r.exit_code == 1 and _ports(rep) == [("mlx5_0/1", "pass", "ACTIVE/LinkUp"),
                                                ("mlx5_1/1", "fail", "down (DOWN/Disabled)")]


def test_ibdev2netdev_verbose_gives_the_port_s_own_state_and_shows_an_ipoib_carrier_down_over_active(tmp_path):
    # the same node's plain and -v outputs (tests/health/fabric/README.md): ib1 reads (Down) while its
    # port is ACTIVE, so the plain (Down) of an IPoIB netdev is not judged as the port's state
    plain, notes = parse_ibdev2netdev((DATA / "ibdev2netdev.ib-sriov-cni.txt").read_text(), "p")
    assert plain["mlx5_1"][1] == {"netdev": "ib1", "netdev_up": False} and "p: mlx5_1/1: (Down)" in notes[1]
    verbose, notes = parse_ibdev2netdev((DATA / "ibdev2netdev-v.ib-sriov-cni.txt").read_text(), "v")
    assert verbose["mlx5_1"][1] == {"netdev": "ib1", "netdev_up": False, "state": (4, "ACTIVE")}
    assert {h: p[1]["state"][1] for h, p in verbose.items()} == {"mlx5_0": "ACTIVE", "mlx5_1": "ACTIVE",
                                                                "mlx5_2": "DOWN", "mlx5_3": "DOWN",
                                                                "mlx5_4": "DOWN", "mlx5_5": "DOWN"}
    assert notes == ["v: skipped 1 line that is not the tool's output: 1 (command or comment '# ibdev2netdev -v')"]
    r, snap = _import(tmp_path, DATA / "ibdev2netdev-v.ib-sriov-cni.txt")
    code, rep = _check(snap)
    # the VFs' ports are DOWN; no site expects a link layer, so its absence from ibdev2netdev is not own trouble
    assert code == 1 and rep["errors"] == [] and [p[:2] for p in _ports(rep)] == [
        ("mlx5_0/1 ib0", "pass"), ("mlx5_1/1 ib1", "pass"), *[(f"mlx5_{i}/1 ib{i}", "fail") for i in range(2, 6)]]
