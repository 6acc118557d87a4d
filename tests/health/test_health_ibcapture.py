"""Fabric captures (ibstat, ibv_devinfo [-v], ibdev2netdev) imported into a snapshot and replayed
by ``health check --from``: real captures (../shared/corpus/fabric: leptonai/gpud's ibstat test
data; tests/health/fabric: public ibv_devinfo / ibdev2netdev outputs, README there)."""

from __future__ import annotations

import json
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
    assert nd["mlx5_10"][1] == {"netdev": "ibp220s0", "netdev_up": True} and len(nd) == 11
    assert [kind_of(p.read_text()) for p in sorted(DATA.glob("*.txt"))] == ["ibdev2netdev", "ibv_devinfo",
                                                                             "ibv_devinfo"]
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
