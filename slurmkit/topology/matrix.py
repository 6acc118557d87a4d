"""The GPU/NIC topology of one node as ``nvidia-smi topo -m`` shows it (plain data).

Produced by :func:`slurmkit.topology.smi.parse_topo` (captured text) and
:mod:`slurmkit.topology.discover` (live NVML + sysfs); turned into a profile node type by
:mod:`slurmkit.topology.nodetype`. Link tokens are kept raw (``NV12``, ``PIX``, ``SYS``, ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field

# PCIe distance, best first (nvidia-smi legend): a single bridge, several bridges, a host
# bridge, between host bridges of one NUMA node, across the SMP interconnect.
PCIE_RANK = {"PIX": 0, "PXB": 1, "PHB": 2, "NODE": 3, "SYS": 4, "SOC": 4}  # SOC: old drivers' name for SYS


@dataclass
class TopoGpu:
    """One GPU row: ``name`` (label as printed, ``GPU3``), ``index`` (3), ``cpus`` (OS CPU ids of
    the ``CPU Affinity`` cell, [] when empty), ``numa_node`` (``NUMA Affinity``; None when absent
    or N/A), ``gpu_numa_id`` (``GPU NUMA ID`` column; None when absent or N/A), ``nearest_nics``
    (NIC devices, else labels, at the best PCIe distance), ``links`` (column label -> raw token,
    self omitted), ``minor`` (device minor number: NVML ``nvmlDeviceGetMinorNumber`` or
    ``nvidia-smi -q`` "Minor Number"; None when unknown, as in a matrix capture)."""

    name: str
    index: int
    cpus: list[int] = field(default_factory=list)
    numa_node: int | None = None
    gpu_numa_id: int | None = None
    nearest_nics: list[str] = field(default_factory=list)
    links: dict[str, str] = field(default_factory=dict)
    minor: int | None = None

    def to_json(self) -> dict:
        """One GPU as ``topo parse --json`` prints it: ``{"name", "index", "cpus", "numa_node",
        "gpu_numa_id", "nearest_nics", "links"}``."""
        out = {"name": self.name, "index": self.index, "cpus": list(self.cpus),
               "numa_node": self.numa_node, "gpu_numa_id": self.gpu_numa_id,
               "nearest_nics": list(self.nearest_nics), "links": dict(self.links)}
        if self.minor is not None:
            out["minor"] = self.minor
        return out


@dataclass
class TopoNic:
    """One NIC column: ``name`` (label as printed: ``NIC0`` or ``mlx5_0``), ``device`` (legend
    name, else the label when it is a device name, else None), ``role`` ("compute", or "other"
    when it is SYS to every GPU or nearest to none), ``links`` (its row's tokens, self omitted;
    {} when the row is missing), ``numa_node`` (None: nvidia-smi does not print it),
    ``netdev`` (its network interface from sysfs; "": unknown, as in a ``topo -m`` capture),
    ``link_layer`` ("InfiniBand" / "RoCE" from sysfs ``ports/1/link_layer``; None: unknown) and
    ``rate_gbps`` (sysfs ``ports/1/rate``, Gb/s; None: unknown) and ``pci`` (its PCI address,
    the target of ``/sys/class/infiniband/<device>/device``; "": unknown), known from live
    discovery only."""

    name: str
    device: str | None = None
    role: str = "compute"
    links: dict[str, str] = field(default_factory=dict)
    numa_node: int | None = None
    netdev: str = ""
    link_layer: str | None = None
    rate_gbps: float | None = None
    pci: str = ""

    @property
    def key(self) -> str:
        """How GPUs refer to this NIC in ``nearest_nics``: the device when known, else the label."""
        return self.device or self.name

    def to_json(self) -> dict:
        """One NIC as ``topo parse --json`` prints it: ``{"name", "device", "role", "links",
        "netdev"}`` (``netdev`` "" when unknown, as from a ``topo -m`` capture)."""
        return {"name": self.name, "device": self.device, "role": self.role, "links": dict(self.links),
                "netdev": self.netdev}


@dataclass
class Topology:
    """A node's matrix: ``gpus`` and ``nics`` in column order, ``missing`` (what the input lacks:
    ``"row GPU3"``, ``"NIC Legend"``, ``"NIC Legend entry NIC2"``, ``"CPU Affinity column"``),
    ``source`` (file name or "live"), and for live discovery the CPU topology when known
    (``sockets``, ``cores_per_socket``, ``threads_per_core``, ``cpu_map`` OS CPU -> (socket,
    core))."""

    gpus: list[TopoGpu] = field(default_factory=list)
    nics: list[TopoNic] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    source: str = ""
    sockets: int | None = None
    cores_per_socket: int | None = None
    threads_per_core: int | None = None
    cpu_map: dict[int, tuple[int, int]] | None = None

    def gpu(self, name_or_index) -> TopoGpu:
        """GPU by label (``"GPU3"``) or index (3); KeyError when absent."""
        for g in self.gpus:
            if g.name == name_or_index or g.index == name_or_index:
                return g
        raise KeyError(name_or_index)

    def nic(self, name: str) -> TopoNic:
        """NIC by label or device; KeyError when absent."""
        for n in self.nics:
            if name in (n.name, n.device):
                return n
        raise KeyError(name)

    def to_json(self) -> dict:
        """``{"gpus": [...], "nics": [...], "missing": [...], "source": ...}`` (what ``topo parse --json`` prints)."""
        return {"source": self.source, "gpus": [g.to_json() for g in self.gpus],
                "nics": [n.to_json() for n in self.nics], "missing": list(self.missing)}


def assign_nearest(topo: Topology) -> None:
    """Fill ``gpu.nearest_nics`` and ``nic.role`` from the GPU rows' link tokens.

    A NIC SYS to every GPU (or with no PCIe token to any) is ``other``; each GPU's nearest NICs
    are the remaining NICs at its best PCIe rank (PIX < PXB < PHB < NODE < SYS), in column
    order; a NIC nearest to no GPU is ``other`` too."""
    eligible = []
    for nic in topo.nics:
        ranks = [PCIE_RANK.get(g.links.get(nic.name, ""), None) for g in topo.gpus]
        known = [r for r in ranks if r is not None]
        if not known or all(r == PCIE_RANK["SYS"] for r in known):
            nic.role = "other"
        else:
            nic.role = "compute"
            eligible.append(nic)
    chosen: set[str] = set()
    for g in topo.gpus:
        ranked = [(PCIE_RANK[g.links[n.name]], n) for n in eligible if g.links.get(n.name) in PCIE_RANK]
        if not ranked:
            g.nearest_nics = []
            continue
        best = min(r for r, _ in ranked)
        g.nearest_nics = [n.key for r, n in ranked if r == best]
        chosen.update(n.name for r, n in ranked if r == best)
    for nic in eligible:
        if nic.name not in chosen:
            nic.role = "other"
