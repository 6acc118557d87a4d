"""What Linux sysfs says about CPUs, PCI devices and RDMA NICs (readers over a sysfs root, so a
captured tree reads the same as ``/sys``), and the nvidia-smi PCIe distance between two devices.

Files read: ``devices/system/cpu/cpu*/topology/{physical_package_id,core_id}``,
``bus/pci/devices/<bdf>/{numa_node,local_cpulist}`` (and the device's real path for its
bridges), ``class/infiniband/<dev>/{device,ports/1/link_layer,ports/1/rate}``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from slurmkit.topology.cores import parse_ranges

_BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def cpu_topology(root="/sys") -> tuple[dict[int, tuple[int, int]], int, int, int] | None:
    """(OS CPU -> (socket, core) map, sockets, cores_per_socket, threads_per_core) from
    ``cpu*/topology``; socket and core ids are ranked (firmware ids need not be contiguous).
    None when the files are absent or the sockets are uneven."""
    base = Path(root) / "devices/system/cpu"
    raw: dict[int, tuple[int, int]] = {}
    for d in base.glob("cpu[0-9]*"):
        pkg, core = _read(d / "topology/physical_package_id"), _read(d / "topology/core_id")
        if pkg is None or core is None:
            continue
        raw[int(d.name[3:])] = (int(pkg), int(core))
    if not raw:
        return None
    sockets = sorted({p for p, _ in raw.values()})
    cores = {p: sorted({c for q, c in raw.values() if q == p}) for p in sockets}
    per_socket = {len(v) for v in cores.values()}
    if len(per_socket) != 1:
        return None
    cmap = {cpu: (sockets.index(p), cores[p].index(c)) for cpu, (p, c) in raw.items()}
    ncores = len(sockets) * per_socket.pop()
    threads = len(raw) // ncores if len(raw) % ncores == 0 else 1
    return cmap, len(sockets), ncores // len(sockets), threads


def pci_path(root, bdf: str) -> list[str]:
    """The device's chain from its root complex: ``["pci0000:00", "0000:00:01.0", bdf]``
    (the real path of ``bus/pci/devices/<bdf>``); [] when absent."""
    p = Path(root) / "bus/pci/devices" / bdf
    try:
        real = os.path.realpath(p)
    except OSError:
        return []
    if not os.path.exists(real):
        return []
    parts = Path(real).parts
    for i, part in enumerate(parts):
        if part.startswith("pci") and ":" in part:
            return [x for x in parts[i:] if x.startswith("pci") or _BDF.match(x)]
    return []


def pci_numa(root, bdf: str) -> int | None:
    """``numa_node`` of PCI device ``bdf`` (None when absent or -1)."""
    v = _read(Path(root) / "bus/pci/devices" / bdf / "numa_node")
    if v is None or not v.lstrip("-").isdigit() or int(v) < 0:
        return None
    return int(v)


def pci_cpus(root, bdf: str) -> list[int]:
    """``local_cpulist`` of PCI device ``bdf`` as OS CPU ids ([] when absent)."""
    v = _read(Path(root) / "bus/pci/devices" / bdf / "local_cpulist")
    try:
        return parse_ranges(v) if v else []
    except ValueError:
        return []


def pcie_distance(a: list[str], b: list[str], numa_a: int | None, numa_b: int | None) -> str:
    """nvidia-smi's token for two PCI paths from :func:`pci_path`: PIX (behind one PCIe
    switch or root port), PXB (several switches, no host bridge), PHB (through the host
    bridge), NODE (different host bridges of one NUMA node), SYS (across NUMA nodes, or
    unknown)."""
    if not a or not b:
        return "SYS"
    if a[0] != b[0]:
        return "NODE" if numa_a is not None and numa_a == numa_b else "SYS"
    k = 0
    while k < min(len(a), len(b)) and a[k] == b[k]:
        k += 1
    if k <= 1:
        return "PHB"  # only the root complex (host bridge) in common
    # A PCIe switch shows as an upstream port with downstream ports under it; each further
    # switch below the common one adds two path components (its up and down port).
    extra = sum(max(0, len(p) - k - 2) // 2 for p in (a, b))
    return "PIX" if extra == 0 else "PXB"


def class_device_pci(root, cls: str, name: str) -> str:
    """PCI address (``0000:0c:00.0``) of device ``name`` of sysfs class ``cls`` (``infiniband``,
    ``net``): the target of ``class/<cls>/<name>/device``; "" when there is no such link or it
    is not a PCI function (a virtual device)."""
    link = Path(root) / "class" / cls / name / "device"
    try:
        bdf = os.path.basename(os.path.realpath(link)) if link.exists() else ""
    except OSError:
        return ""
    return bdf if _BDF.match(bdf) else ""


def rdma_nics(root="/sys") -> list[dict]:
    """RDMA devices of ``class/infiniband`` in name order: ``{"device", "bdf", "link_layer"
    (InfiniBand | RoCE | EFA | Ethernet), "rate_gbps" (port 1; 0 when unknown), "numa_node",
    "netdev" (the first of ``<device>/device/net/*`` in name order: the PCI function's network
    interface, e.g. ``ibp24s0``; "" when it has none, as EFA devices)}``."""
    base = Path(root) / "class/infiniband"
    out = []
    for d in sorted(base.glob("*"), key=lambda p: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", p.name)]):
        dev_link = d / "device"
        bdf = class_device_pci(root, "infiniband", d.name)
        driver = os.path.basename(os.path.realpath(dev_link / "driver")) if (dev_link / "driver").exists() else ""
        ll = _read(d / "ports/1/link_layer") or ""
        if driver == "efa" or d.name.startswith("efa"):
            layer = "EFA"
        elif ll == "InfiniBand":
            layer = "InfiniBand"
        elif ll == "Ethernet":
            layer = "RoCE"
        else:
            layer = "Ethernet"
        rate = _read(d / "ports/1/rate") or ""
        m = re.match(r"^\s*([\d.]+)\s*Gb/sec", rate)
        net = dev_link / "net"
        netdevs = sorted(p.name for p in net.iterdir()) if net.is_dir() else []
        out.append({"device": d.name, "bdf": bdf, "link_layer": layer,
                    "rate_gbps": float(m.group(1)) if m else 0.0,
                    "numa_node": pci_numa(root, bdf) if bdf else None,
                    "netdev": netdevs[0] if netdevs else ""})
    return out
