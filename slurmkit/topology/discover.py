"""Live topology of this node: GPUs from NVML (:mod:`slurmkit.topology.nvml`), NICs, NUMA and
CPUs from sysfs (:mod:`slurmkit.topology.sysfs`), combined by the pure :func:`build_topology`
into the same :class:`~slurmkit.topology.matrix.Topology` the ``topo -m`` parser returns."""

from __future__ import annotations

import os
import re

from slurmkit.topology.matrix import Topology, TopoGpu, TopoNic, assign_nearest

_VENDOR = {"nvidia", "geforce", "tesla", "quadro"}


def gres_type_from_name(name: str) -> str:
    """A gres type from an NVML product name: ``NVIDIA H100 80GB HBM3`` -> ``h100``,
    ``NVIDIA A100-SXM4-80GB`` -> ``a100``, ``NVIDIA GeForce RTX 4090`` -> ``rtx4090``,
    ``NVIDIA RTX 6000 Ada Generation`` -> ``rtx6000``."""
    words = [w for w in re.split(r"[\s]+", name.lower().strip()) if w and w not in _VENDOR]
    out = ""
    for w in words:
        w = w.split("-")[0]
        out += w
        if any(c.isdigit() for c in w):
            break
    return re.sub(r"[^a-z0-9_]", "", out) or "gpu"


def build_topology(gpus: list[dict], nics: list[dict], paths: dict[str, list[str]],
                   numa: dict[str, int | None], cpu_info=None, source: str = "live") -> Topology:
    """Combine plain records into a :class:`Topology`.

    ``gpus``: :func:`slurmkit.topology.nvml.read_gpus` records; ``nics``:
    :func:`slurmkit.topology.sysfs.rdma_nics` records; ``paths``/``numa``: bus id -> PCI path /
    NUMA node (sysfs); ``cpu_info``: :func:`slurmkit.topology.sysfs.cpu_topology` or None.
    GPU pairs: ``NV<n>`` with n direct NVLinks, or with NVSwitch (links whose far end is not a
    GPU) ``NV<switch links>`` to every other switch-attached GPU; else the NVML common
    ancestor token. GPU-NIC: the sysfs PCIe distance.
    """
    from slurmkit.topology.sysfs import pcie_distance

    by_bdf = {g["bdf"]: g["index"] for g in gpus}
    topo = Topology(source=source)
    switch_links = {g["index"]: sum(1 for r in g["nvlink_remote"] if r not in by_bdf) for g in gpus}
    nic_objs = [TopoNic(name=n["device"], device=n["device"], numa_node=n.get("numa_node"),
                        netdev=n.get("netdev") or "", link_layer=n.get("link_layer"),
                        rate_gbps=n.get("rate_gbps"), pci=n.get("bdf") or "") for n in nics]
    for g in gpus:
        i = g["index"]
        t = TopoGpu(name=f"GPU{i}", index=i, cpus=sorted(g.get("cpus") or []), numa_node=numa.get(g["bdf"]),
                    minor=g.get("minor"))
        for h in gpus:
            j = h["index"]
            if j == i:
                continue
            direct = sum(1 for r in g["nvlink_remote"] if by_bdf.get(r) == j)
            via_switch = switch_links[i] if switch_links[i] and switch_links[j] else 0
            n = direct + via_switch
            t.links[f"GPU{j}"] = f"NV{n}" if n else g["ancestor"].get(j, "SYS")
        for nic, rec in zip(nic_objs, nics):
            t.links[nic.name] = pcie_distance(paths.get(g["bdf"], []), paths.get(rec["bdf"], []),
                                              numa.get(g["bdf"]), rec.get("numa_node"))
        topo.gpus.append(t)
    for nic in nic_objs:
        nic.links = {f"GPU{g.index}": g.links[nic.name] for g in topo.gpus}
    topo.nics = nic_objs
    if cpu_info:
        topo.cpu_map, topo.sockets, topo.cores_per_socket, topo.threads_per_core = cpu_info
    assign_nearest(topo)
    return topo


def discover(sysfs_root: str = "/sys") -> tuple[Topology, str]:
    """(topology of this node, gres type of GPU0) read live from NVML and ``sysfs_root``.
    TopoError (with a clear message) when NVML or the GPUs are not there."""
    from slurmkit.topology import sysfs
    from slurmkit.topology.nvml import read_gpus

    cpu_info = sysfs.cpu_topology(sysfs_root)
    ncpus = len(cpu_info[0]) if cpu_info else (os.cpu_count() or 1)
    gpus = read_gpus(ncpus)
    nics = sysfs.rdma_nics(sysfs_root)
    bdfs = [g["bdf"] for g in gpus] + [n["bdf"] for n in nics if n["bdf"]]
    paths = {b: sysfs.pci_path(sysfs_root, b) for b in bdfs}
    numa = {b: sysfs.pci_numa(sysfs_root, b) for b in bdfs}
    for g in gpus:
        if not g["cpus"]:
            g["cpus"] = sysfs.pci_cpus(sysfs_root, g["bdf"])
    return build_topology(gpus, nics, paths, numa, cpu_info), gres_type_from_name(gpus[0]["name"])
