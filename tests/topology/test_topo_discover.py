"""Live discovery: sysfs readers over a sysfs tree built here, the pure combination of NVML
and sysfs records, and `slurmkit topo discover` on a machine without NVML (exit 2)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib

import pytest

from slurmkit.topology import sysfs
from slurmkit.topology.discover import build_topology, gres_type_from_name
from slurmkit.topology.nodetype import node_type_table, render_node_type
from slurmkit.topology.nvml import sysfs_bdf


def _cpu_tree(root, sockets, cores, threads, interleaved, core_ids):
    n = 0
    per = sockets * cores
    for t in range(threads):
        for k in range(per):
            s, c = (k % sockets, k // sockets) if interleaved else (k // cores, k % cores)
            d = root / "devices/system/cpu" / f"cpu{t * per + k}" / "topology"
            d.mkdir(parents=True)
            (d / "physical_package_id").write_text(f"{s * 2}\n")  # firmware ids 0, 2: not contiguous
            (d / "core_id").write_text(f"{core_ids[c]}\n")
            n += 1
    return n


def test_cpu_topology_ranks_ids(tmp_path):
    _cpu_tree(tmp_path, 2, 3, 2, True, [0, 4, 9])
    cmap, s, c, t = sysfs.cpu_topology(tmp_path)
    assert (s, c, t) == (2, 3, 2)
    assert cmap[0] == (0, 0) and cmap[1] == (1, 0) and cmap[2] == (0, 1) and cmap[6] == (0, 0)
    assert sysfs.cpu_topology(tmp_path / "none") is None


def _pci(root, chain, numa=None, cpulist=None):
    """Make /sys/devices/<chain...> and the bus/pci/devices/<bdf> link; returns the bdf."""
    d = root / "devices" / "/".join(chain)
    d.mkdir(parents=True, exist_ok=True)
    if numa is not None:
        (d / "numa_node").write_text(f"{numa}\n")
    if cpulist is not None:
        (d / "local_cpulist").write_text(cpulist + "\n")
    link = root / "bus/pci/devices" / chain[-1]
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.exists():
        link.symlink_to(d)
    return chain[-1]


def _ib(root, name, bdf, link_layer, rate, driver=None, netdevs=()):
    d = root / "class/infiniband" / name
    (d / "ports/1").mkdir(parents=True)
    (d / "device").symlink_to(root / "bus/pci/devices" / bdf)
    for nd in netdevs:  # the PCI function's network interfaces: <pci device>/net/<name>
        (root / "bus/pci/devices" / bdf / "net" / nd).mkdir(parents=True)
    (d / "ports/1/link_layer").write_text(link_layer + "\n")
    (d / "ports/1/rate").write_text(rate + "\n")
    if driver:
        drv = root / "bus/pci/drivers" / driver
        drv.mkdir(parents=True, exist_ok=True)
        (root / "bus/pci/devices" / bdf / "driver").symlink_to(drv)


@pytest.fixture
def tree(tmp_path):
    r0, r1 = "pci0000:00", "pci0000:80"
    sw0 = [r0, "0000:00:01.0", "0000:01:00.0"]
    gpu0 = _pci(tmp_path, sw0 + ["0000:02:00.0", "0000:03:00.0"], 0, "0-3,8-11")
    nic0 = _pci(tmp_path, sw0 + ["0000:02:01.0", "0000:04:00.0"], 0)
    gpu1 = _pci(tmp_path, sw0 + ["0000:02:02.0", "0000:05:00.0", "0000:06:00.0", "0000:07:00.0"], 0, "0-3,8-11")
    gpu2 = _pci(tmp_path, [r1, "0000:80:01.0", "0000:81:00.0"], 1, "4-7,12-15")
    nic1 = _pci(tmp_path, [r1, "0000:80:02.0", "0000:82:00.0"], 1)
    nic2 = _pci(tmp_path, ["pci0000:40", "0000:40:01.0", "0000:41:00.0"], 0)
    _ib(tmp_path, "mlx5_0", nic0, "InfiniBand", "400 Gb/sec (4X NDR)", netdevs=["ibp4s0"])
    _ib(tmp_path, "mlx5_1", nic1, "Ethernet", "200 Gb/sec (4X HDR)", netdevs=["enp130s0np0", "enp130s0v0"])
    _ib(tmp_path, "mlx5_10", nic2, "Ethernet", "25 Gb/sec (1X EDR)")
    _cpu_tree(tmp_path, 2, 4, 2, False, [0, 1, 2, 3])
    return tmp_path, dict(gpu0=gpu0, gpu1=gpu1, gpu2=gpu2, nic0=nic0, nic1=nic1, nic2=nic2)


def test_sysfs_pci_and_rdma(tree):
    root, b = tree
    nics = sysfs.rdma_nics(root)
    assert [n["device"] for n in nics] == ["mlx5_0", "mlx5_1", "mlx5_10"]  # natural order
    assert nics[0] == {"device": "mlx5_0", "bdf": b["nic0"], "link_layer": "InfiniBand", "rate_gbps": 400.0,
                       "numa_node": 0, "netdev": "ibp4s0"}
    assert nics[1]["link_layer"] == "RoCE" and nics[1]["rate_gbps"] == 200.0 and nics[1]["numa_node"] == 1
    # the first interface of the PCI function (a VF representor sorts after it); none: ""
    assert nics[1]["netdev"] == "enp130s0np0" and nics[2]["netdev"] == ""
    p = {k: sysfs.pci_path(root, v) for k, v in b.items()}
    assert p["gpu0"][0] == "pci0000:00" and p["gpu0"][-1] == b["gpu0"]
    d = sysfs.pcie_distance
    assert d(p["gpu0"], p["nic0"], 0, 0) == "PIX"   # one switch between them
    assert d(p["gpu1"], p["nic0"], 0, 0) == "PXB"   # a second switch under the first
    assert d(p["gpu2"], p["nic1"], 1, 1) == "PHB"   # different root ports of one host bridge
    assert d(p["gpu0"], p["nic2"], 0, 0) == "NODE"  # another host bridge, same NUMA node
    assert d(p["gpu0"], p["nic1"], 0, 1) == "SYS"
    assert sysfs.pci_cpus(root, b["gpu2"]) == [4, 5, 6, 7, 12, 13, 14, 15]
    assert sysfs.pci_numa(root, "0000:ff:00.0") is None


def test_build_topology_from_records(tree):
    root, b = tree
    nics = sysfs.rdma_nics(root)
    bdfs = [b["gpu0"], b["gpu1"], b["gpu2"]] + [n["bdf"] for n in nics]
    paths = {x: sysfs.pci_path(root, x) for x in bdfs}
    numa = {x: sysfs.pci_numa(root, x) for x in bdfs}
    gpus = [
        {"index": 0, "name": "NVIDIA H100 80GB HBM3", "bdf": b["gpu0"], "cpus": [0, 1, 2, 3, 8, 9, 10, 11],
         "nvlink_remote": [b["gpu1"]] * 4, "ancestor": {1: "PXB", 2: "SYS"}},
        {"index": 1, "name": "NVIDIA H100 80GB HBM3", "bdf": b["gpu1"], "cpus": [0, 1, 2, 3, 8, 9, 10, 11],
         "nvlink_remote": [b["gpu0"]] * 4, "ancestor": {0: "PXB", 2: "SYS"}},
        {"index": 2, "name": "NVIDIA H100 80GB HBM3", "bdf": b["gpu2"], "cpus": [4, 5, 6, 7, 12, 13, 14, 15],
         "nvlink_remote": [], "ancestor": {0: "SYS", 1: "SYS"}},
    ]
    t = build_topology(gpus, nics, paths, numa, sysfs.cpu_topology(root))
    assert t.gpu(0).links == {"GPU1": "NV4", "GPU2": "SYS", "mlx5_0": "PIX", "mlx5_1": "SYS", "mlx5_10": "NODE"}
    assert t.gpu(0).nearest_nics == ["mlx5_0"] and t.gpu(1).nearest_nics == ["mlx5_0"]
    assert t.gpu(2).nearest_nics == ["mlx5_1"] and t.gpu(2).numa_node == 1
    assert t.nic("mlx5_10").role == "other"  # nearest to no GPU
    table = node_type_table(t, gres_type_from_name(gpus[0]["name"]),
                            link_layers={n["device"]: n["link_layer"] for n in nics})
    assert (table["sockets"], table["cores_per_socket"], table["threads_per_core"]) == (2, 4, 2)
    assert table["cpu_numbering"] == "linear" and table["gpu_model"] == "h100"
    parsed = tomllib.loads(render_node_type("live", table))["node_types"]["live"]
    assert parsed == table
    # each NIC's network interface from sysfs goes into the section (what NCCL_SOCKET_IFNAME names)
    assert [n.get("netdev") for n in table["nics"]] == ["ibp4s0", "enp130s0np0", None]
    # live discovery (topo discover passes no link_layers/rates): each NIC's own sysfs link layer
    # and rate, not a guess from its name (a RoCE mlx5 port is not InfiniBand, nor 0 Gb/s)
    bare = node_type_table(t, "h100")
    assert [(n["device"], n["link_layer"], n["rate_gbps"]) for n in bare["nics"]] == [
        ("mlx5_0", "InfiniBand", 400.0), ("mlx5_1", "RoCE", 200.0), ("mlx5_10", "RoCE", 25.0)]
    assert t.nic("mlx5_1").to_json()["netdev"] == "enp130s0np0"
    # and each card's PCI address, by which the fabric checks find it after a renumbering
    assert [n.get("pci") for n in bare["nics"]] == [b["nic0"], b["nic1"], b["nic2"]]
    # NVSwitch: links to a non-GPU far end count towards every switch-attached GPU
    sw = "0000:c0:00.0"
    for g in gpus:
        g["nvlink_remote"] = [sw] * 18
    t = build_topology(gpus, nics, paths, numa)
    assert t.gpu(2).links["GPU0"] == "NV18" and t.gpu(0).links["GPU1"] == "NV18"


def test_gres_type_and_bus_id():
    assert gres_type_from_name("NVIDIA H100 80GB HBM3") == "h100"
    assert gres_type_from_name("NVIDIA A100-SXM4-80GB") == "a100"
    assert gres_type_from_name("NVIDIA GeForce RTX 4090") == "rtx4090"
    assert gres_type_from_name("NVIDIA RTX 6000 Ada Generation") == "rtx6000"
    assert sysfs_bdf("00000000:18:00.0") == "0000:18:00.0"
    assert sysfs_bdf(b"00000001:AB:00.1") == "0001:ab:00.1"


def _nvml_works() -> bool:
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        return True
    except Exception:
        return False


def test_discover_without_nvml_exits_2():
    if _nvml_works():
        pytest.skip("NVML works here: discovery is checked by test_discover_live")
    env = dict(os.environ, LD_LIBRARY_PATH="")
    r = subprocess.run([sys.executable, "-c", "from slurmkit.cli import main; main()", "topo", "discover"],
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "no NVIDIA driver or GPU" in r.stderr


def test_discover_live():
    if not _nvml_works():
        pytest.skip("no NVML on this machine")
    import json

    from slurmkit.topology.discover import discover

    t, model = discover()
    r = subprocess.run([sys.executable, "-c", "from slurmkit.cli import main; main()", "topo", "discover", "--json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert [g["name"] for g in data["gpus"]] == [g.name for g in t.gpus] and data["gpu_model"] == model
    for g in t.gpus:
        assert g.cpus, "NVML gives every GPU a CPU affinity"
        assert set(g.links) >= {f"GPU{h.index}" for h in t.gpus if h.index != g.index}
