"""Shipped profiles load and validate; gres.conf / topology.conf generated from each agree with
the profile's own values; logical core mapping; the `slurmkit site` CLI."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import hostlist
import pytest

from slurmkit.profile import load_profile, shipped_names
from slurmkit.topology.cores import cpu_map, format_ranges, logical_cores, parse_ranges
from slurmkit.profile.slurmconf import render_gres_conf, render_topology_conf

SITE = Path(__file__).resolve().parents[2] / "site"
SHIPPED = ["aws-p5", "azure-ndh100v5", "dgx-a100", "dgx-h100", "rtx4090-8x", "sandbox", "workstation-2gpu"]


def test_shipped_profiles_are_the_expected_set():
    assert shipped_names() == SHIPPED


def _fields(line: str) -> dict:
    return dict(f.split("=", 1) for f in line.split())


def _expected_cores(cpu: int, nt: dict) -> set[int]:
    """Slurm logical cores gres.conf gives for OS CPU ``cpu``, computed here from the raw TOML node
    type: every core of its socket, numbered socket-major by the CoresPerSocket Slurm is given
    (``slurm_node`` when it differs from the hardware)."""
    s, c = nt["sockets"], nt["cores_per_socket"]
    k = cpu % (s * c)
    socket, core = (k // c, k % c) if nt.get("cpu_numbering", "linear") == "linear" else (k % s, k // s)
    per_socket = nt.get("slurm_node", {}).get("cores_per_socket", c)
    return {socket * per_socket + j for j in range(per_socket)}    # the whole socket


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_profile_gres_conf_matches_profile(name):
    raw = tomllib.loads((SITE / f"{name}.toml").read_text())
    assert raw["cluster"]["sources"], "shipped profiles cite their sources"
    p = load_profile(name)
    text = render_gres_conf(p)
    assert text == render_gres_conf(load_profile(name))  # byte-stable
    lines = [l for l in text.splitlines() if l and not l.startswith("#")]
    assert lines[0] == "AutoDetect=off"
    gpu_lines = lines[1:]
    expected_count = sum(nt["gpu_count"] for t, nt in raw["node_types"].items()
                         if any(pt["node_type"] == t for pt in raw["partitions"].values()))
    assert len(gpu_lines) == expected_count
    for line in gpu_lines:
        f = _fields(line)
        t = next(pt["node_type"] for pt in raw["partitions"].values()
                 if set(hostlist.expand_hostlist(f["NodeName"])) >= set(hostlist.expand_hostlist(pt["nodes"])))
        nt = raw["node_types"][t]
        idx = int(re.fullmatch(r".*/nvidia(\d+)", f["File"]).group(1))
        g = nt["gpus"][idx]
        assert f["Name"] == "gpu" and f["Type"] == nt["gpu_model"]
        assert f["File"] == f"{raw['cluster'].get('device_dir', '/dev')}/nvidia{idx}"
        want = sorted(set().union(*(_expected_cores(c, nt) for c in g["cpus"])))
        assert parse_ranges(f["Cores"]) == want
        slurm = nt.get("slurm_node", {})
        assert all(0 <= c < slurm.get("sockets", nt["sockets"]) * slurm.get("cores_per_socket", nt["cores_per_socket"])
                   for c in want)
        links = [int(x) for x in f["Links"].split(",")]
        assert len(links) == nt["gpu_count"] and links[idx] == -1
        for j, n in enumerate(links):
            if j != idx:
                tok = g["links"][f"GPU{j}"]
                assert n == (int(tok[2:]) if tok.startswith("NV") else 0)


def test_dgx_a100_gpu0_cores_48_63():
    p = load_profile("dgx-a100")
    nt = p.node_type_for()
    assert format_ranges(nt.gpu_cpus(0)) == "48-63,176-191"
    assert (nt.sockets, nt.cores_per_socket, nt.threads_per_core) == (2, 64, 2)
    text = render_gres_conf(p)
    line = text.splitlines()[3]
    # GPU0's own cores 48-63 are part of socket 0 (cores 0-63): gres.conf gives the whole
    # socket, which slurmctld 24.11 and later require (test_site_kinds_sandbox); the profile keeps 48-63
    assert "File=/dev/nvidia0 Cores=0-63 " in line
    assert text.splitlines()[-1].startswith("# Cores= name each GPU's whole socket(s)")


def test_cores_are_logical_for_both_numberings():
    lin = cpu_map(2, 4, 2, "linear")
    assert logical_cores([0, 8], lin, 4) == [0]          # cpu 8 is cpu 0's SMT sibling
    assert logical_cores([4, 5, 12], lin, 4) == [4, 5]   # socket 1 starts at cpu 4
    inter = cpu_map(2, 4, 2, "interleaved")
    assert logical_cores([0, 2, 4, 6], inter, 4) == [0, 1, 2, 3]  # even cpus: socket 0
    assert logical_cores([1, 9], inter, 4) == [4]        # socket 1 core 0 and its sibling
    assert cpu_map(2, 4, 2, "unknown") is None
    with pytest.raises(KeyError, match="CPU 16"):
        logical_cores([16], lin, 4)


def test_unknown_numbering_omits_cores_with_warning(tmp_path):
    text = (SITE / "sandbox.toml").read_text().replace('cpu_numbering = "linear"', 'cpu_numbering = "unknown"')
    (tmp_path / "p.toml").write_text(text)
    warns = []
    out = render_gres_conf(load_profile(tmp_path / "p.toml"), warn=warns.append)
    assert "Cores=" not in out and "Links=-1," in out
    assert warns == ["node type sandbox-h100x4: CPU numbering unknown, Cores= omitted"]


def test_sandbox_gres_uses_device_dir_and_real_map(tmp_path):
    p = load_profile("sandbox")
    nt = p.node_type_for()
    out = render_gres_conf(p, device_dir=str(tmp_path / "dev"))
    gl = [l for l in out.splitlines() if l.startswith("NodeName=")]
    for g, line in zip(nt.gpus, gl):
        f = _fields(line)
        assert f["File"] == f"{tmp_path}/dev/nvidia{g.index}"
        # the real map places cpu c on socket c (2 sockets x 1 core); Slurm is told 4 cores per
        # socket (slurm_node): gres.conf gives the GPU's whole socket, Slurm cores 4s..4s+3
        # (GPUs of NUMA 1 -> Cores=4-7; Slurm 24.11 refuses part of a socket)
        assert parse_ranges(f["Cores"]) == [4 * c + k for c in g.cpus for k in range(4)]
        assert f["Cores"] in ("0-3", "4-7")
        assert max(parse_ranges(f["Cores"])) < nt.slurm_node.cpus
    assert f["NodeName"] == p.partition().nodes


def test_topology_conf_matches_fabric():
    for name in SHIPPED:
        raw = tomllib.loads((SITE / f"{name}.toml").read_text())
        text = render_topology_conf(load_profile(name))
        fab = raw.get("fabric", {})
        want = [f"SwitchName={l['name']} Nodes={hostlist.collect_hostlist(hostlist.expand_hostlist(l['nodes']))}"
                for l in fab.get("leaves", [])]
        want += [f"SwitchName={s['name']} Switches={','.join(s['switches'])}" for s in fab.get("spines", [])]
        assert [l for l in text.splitlines() if not l.startswith("#")] == want
        assert ("TopologyPlugin=topology/tree" in text) == bool(fab.get("leaves"))


def _cli(*args):
    return subprocess.run([sys.executable, "-c", "from slurmkit.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=60)


def test_cli_site_commands(tmp_path):
    out = tmp_path / "gres.conf"
    r = _cli("site", "gres-conf", "dgx-a100", "--device-dir", "/devx", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert out.read_text() == render_gres_conf(load_profile("dgx-a100"), device_dir="/devx")
    r = _cli("site", "topology-conf", "sandbox")
    assert r.returncode == 0 and r.stdout == render_topology_conf(load_profile("sandbox"))
    r = _cli("site", "check", "dgx-a100", "--json")
    data = json.loads(r.stdout)
    assert r.returncode == 0 and data["node_types"]["dgx-a100"]["cpus"] == 256
    # a DGX A100 (AMD EPYC, NPS4) whose profile records no GPU minors: gres.conf assumes minor = index
    assert data["partitions"]["gpu"]["nodes"] == 40 and data["errors"] == []
    assert [w.split(":")[0] for w in data["warnings"]] == ["node_types.dgx-a100.gpus"]
    assert "GPU minor numbers unknown on a node type with 4 NUMA nodes" in data["warnings"][0]
    r = _cli("site", "check", "sandbox", "--set", "nccl.fabric=efa", "--json")
    data = json.loads(r.stdout)
    assert data["layers"][-1] == "<override nccl.fabric=efa>"
    # what submit would refuse: an EFA fabric over InfiniBand NICs
    assert r.returncode == 2 and any("compute NIC mlx5_0 is InfiniBand" in e for e in data["errors"])


def test_cli_site_bad_profile_exit_2(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text((SITE / "sandbox.toml").read_text().replace("gpu_count = 4", "gpu_count = four"))
    for cmd in ("check", "gres-conf", "topology-conf"):
        r = _cli("site", cmd, str(bad))
        assert r.returncode == 2 and "Traceback" not in r.stderr
        line = next(i for i, l in enumerate(bad.read_text().splitlines(), 1) if "gpu_count = four" in l)
        assert r.stderr.startswith(f"slurmkit: error: {bad}:{line}: TOML syntax error") and r.stderr.count("\n") == 1
    bad.write_text((SITE / "sandbox.toml").read_text().replace('role = "other"', 'role = "storage"'))
    r = _cli("site", "check", str(bad))
    assert r.returncode == 2 and "node_types.sandbox-h100x4.nics[4].role" in r.stderr


def test_cli_site_check_strict_warns(tmp_path):
    text = (SITE / "sandbox.toml").read_text()
    text = text.replace('nodes = "n[3-4]"', 'nodes = "n3"')
    (tmp_path / "p.toml").write_text(text)
    r = _cli("site", "check", str(tmp_path / "p.toml"), "--strict")
    assert r.returncode == 1 and "node n4 is under no leaf switch" in r.stderr
