"""`slurmkit topo import`: a captured matrix becomes a node-type section that a profile loads and
that the gres.conf generator turns into the right Cores= and Links=."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from slurmkit.profile import load_profile
from slurmkit.topology.cores import parse_ranges
from slurmkit.profile.slurmconf import gres_lines
from slurmkit.topology.smi import read_topo_file

SITE = Path(__file__).resolve().parents[2] / "site"


def _cli(*args):
    return subprocess.run([sys.executable, "-c", "from slurmkit.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=60)


def _profile_with(section: str, name: str, tmp_path: Path) -> Path:
    text = f'''[cluster]
name = "imp"
[partitions.gpu]
nodes = "g[01-02]"
node_type = "{name}"
default = true
''' + section
    p = tmp_path / "imp.toml"
    p.write_text(text)
    return p


@pytest.mark.corpus
def test_import_dgx_a100_round_trip(corpus, tmp_path):
    src = corpus / "topo" / "dgx_a100_12nic.txt"
    r = _cli("topo", "import", str(src), "--name", "a100node", "--gpu-model", "a100",
             "--sockets", "2", "--cores-per-socket", "64", "--threads-per-core", "2")
    assert r.returncode == 0, r.stderr
    nt_raw = tomllib.loads(r.stdout)["node_types"]["a100node"]
    topo = read_topo_file(src)
    assert nt_raw["gpu_count"] == len(topo.gpus)
    assert [n["device"] for n in nt_raw["nics"] if n["role"] == "compute"] == \
        [n.device for n in topo.nics if n.role == "compute"]
    p = load_profile(_profile_with(r.stdout, "a100node", tmp_path))
    nt = p.node_type_for()
    assert nt.gpu(5).numa_node == topo.gpu(5).numa_node
    lines = gres_lines(p)
    f0 = dict(x.split("=", 1) for x in lines[0].split())
    assert f0["NodeName"] == "g[01-02]" and f0["Type"] == "a100"
    assert list(nt.gpu_cpus(0))[:16] == list(range(48, 64))      # 48-63,176-191 on 2 x 64 x 2 ...
    assert parse_ranges(f0["Cores"]) == list(range(0, 64))   # ... socket 0's cores in gres.conf
    assert f0["Links"] == "-1," + ",".join(["12"] * 7)


@pytest.mark.corpus
def test_import_without_cpu_topology_warns_and_omits_cores(corpus, tmp_path):
    out = tmp_path / "nt.toml"
    r = _cli("topo", "import", str(corpus / "topo" / "8xH20_hgx_2nic.txt"), "--name", "h20", "-o", str(out))
    assert r.returncode == 0 and "CPU topology unknown" in r.stderr
    text = out.read_text()
    assert "# missing in the input: NIC Legend" in text
    warns = []
    p = load_profile(_profile_with(text, "h20", tmp_path))
    lines = gres_lines(p, warn=warns.append)
    assert len(lines) == 8 and all("Cores=" not in l for l in lines)
    assert warns == ["node type h20: CPU numbering unknown, Cores= omitted"]
    assert p.node_type_for().gpu(6).nearest_nics == ("NIC0", "NIC1")


def test_import_bad_input_exit_2(tmp_path):
    bad = tmp_path / "x.txt"
    bad.write_text("not a matrix\n")
    r = _cli("topo", "import", str(bad), "--name", "x")
    assert r.returncode == 2 and f"{bad}:1:" in r.stderr and "Traceback" not in r.stderr
    good = tmp_path / "g.txt"
    good.write_text("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV4\t0-3\nGPU1\tNV4\t X \t0-3\n")
    r = _cli("topo", "import", str(good), "--name", "a.b")
    assert r.returncode == 2
    assert r.stderr == "slurmkit: error: --name: 'a.b': use one word without dots or brackets\n"
    r = _cli("topo", "import", str(good), "--name", "ok", "-o", str(tmp_path / "no" / "dir.toml"))
    assert r.returncode == 2
    assert r.stderr.splitlines()[-1] == f"slurmkit: error: {tmp_path / 'no' / 'dir.toml'}: No such file or directory"
    out = tmp_path / "ok.toml"
    r = _cli("topo", "import", str(good), "--name", "ok", "-o", str(out))
    assert r.returncode == 0 and r.stdout == "" and out.read_text().count("[node_types.ok]") == 1
    assert sorted(os.listdir(tmp_path)) == ["g.txt", "ok.toml", "x.txt"]  # no temp file left beside it


# -- what import guesses is marked, in the section and on stderr ------------------------------

@pytest.mark.corpus
def test_import_marks_a_bonded_mlx5_port_as_guessed_roce_and_geforce_p2p_off(corpus, tmp_path):
    # nccl-tests issue 307: 8x RTX 4090 on PCIe, one NIC mlx5_bond_0 (a RoCE LAG: the kernel bonds
    # RDMA devices only over Ethernet); GeForce boards have P2P disabled by the driver
    r = _cli("topo", "import", str(corpus / "topo" / "8xRTX4090_pcie_1nic.txt"), "--name", "rtx",
             "--gpu-model", "rtx4090")
    assert r.returncode == 0, r.stderr
    nt_raw = tomllib.loads(r.stdout)["node_types"]["rtx"]
    assert nt_raw["p2p"] is False and nt_raw["nics"][0]["link_layer"] == "RoCE"
    assert "# GUESSED (not in the input; check before use): p2p, nics[0].link_layer" in r.stdout
    assert 'link_layer = "RoCE"  # GUESSED: mlx5_bond_0: RoCE from its name only' in r.stdout
    assert "p2p = false  # GUESSED: GeForce/TITAN model name 'rtx4090'" in r.stdout
    assert "slurmkit: warning: guessed node_types.rtx.p2p: GeForce" in r.stderr
    assert "slurmkit: warning: guessed node_types.rtx.nics[0].link_layer: mlx5_bond_0: RoCE" in r.stderr
    # the section, in a profile with a RoCE fabric, passes the check site check and submit share
    from slurmkit.submit.check import check

    path = _profile_with(r.stdout + '\n[nccl]\nfabric = "roce"\n', "rtx", tmp_path)
    assert [str(f) for f in check(load_profile(path)) if f.level == "error"] == []


@pytest.mark.corpus
def test_import_says_what_the_matrix_told_and_what_it_guessed(corpus):
    # DGX A100: NVLink (NV12) between every GPU pair is P2P, a fact of the matrix; its 12 mlx5
    # ports' link layer is not in the matrix (InfiniBand from the name: guessed)
    r = _cli("topo", "import", str(corpus / "topo" / "dgx_a100_12nic.txt"), "--name", "a100", "--gpu-model", "a100")
    assert r.returncode == 0, r.stderr
    nt_raw = tomllib.loads(r.stdout)["node_types"]["a100"]
    assert nt_raw["p2p"] is True and "guessed node_types.a100.p2p" not in r.stderr
    guessed = [line for line in r.stderr.splitlines() if "guessed node_types.a100.nics[" in line]
    assert len(guessed) == len(nt_raw["nics"]) == 12
    assert all(n["link_layer"] == "InfiniBand" for n in nt_raw["nics"])
    # a PCIe box with no GeForce name: P2P assumed, and said so
    r = _cli("topo", "import", str(corpus / "topo" / "2gpu_phb_workstation.txt"), "--name", "ws", "--gpu-model", "l40s")
    assert "p2p = true  # GUESSED: no NVLink between every GPU pair and 'l40s'" in r.stdout
    r = _cli("topo", "import", str(corpus / "topo" / "2xRTX5090_workstation.txt"), "--name", "ws",
             "--gpu-model", "rtx5090")       # club-3090 issue 1229: "P2P not supported"
    assert tomllib.loads(r.stdout)["node_types"]["ws"]["p2p"] is False
