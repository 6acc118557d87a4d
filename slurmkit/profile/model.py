"""The site profile as a frozen dataclass tree (schema: ``docs/site-profile.md``).

Built by :func:`slurmkit.profile.validate.build` from layered TOML; read by ``submit`` (placement,
NCCL presets), the hooks (expected GPUs, health thresholds), ``report`` (TDP, PUE, prices) and
the gres.conf / topology.conf generators. Hostlist expressions are kept as written
(``nodes``) and also expanded with python-hostlist (``node_names``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from slurmkit.profile.clock_policy import ClockPolicy  # noqa: F401  (re-exported: [clock_policies.*])
from slurmkit.profile.health import Health  # noqa: F401  (re-exported: the [health] section)


@dataclass(frozen=True)
class Cluster:
    """``[cluster]``: ``name`` (Slurm ClusterName), ``device_dir`` (where the ``nvidiaN`` device
    files live; gres.conf ``File=``), ``sources`` (where the profile's values come from)."""

    name: str
    device_dir: str = "/dev"
    sources: tuple[str, ...] = ()


@dataclass(frozen=True)
class Partition:
    """``[partitions.<name>]``: ``nodes`` (Slurm hostlist expression as written), ``node_names``
    (expanded, in hostlist order), ``node_type`` (key of ``node_types``), ``default``,
    ``clock_policy`` (key of ``clock_policies`` the prolog applies to the partition's jobs' GPUs;
    None: the jobs run under their node type's resting policy)."""

    name: str
    nodes: str
    node_names: tuple[str, ...]
    node_type: str
    default: bool = False
    clock_policy: str | None = None


@dataclass(frozen=True)
class SlurmNode:
    """What slurm.conf tells Slurm about a node when it differs from the hardware
    (``node_types.<t>.slurm_node``; the sandbox only): CPUs, Sockets, CoresPerSocket, ThreadsPerCore."""

    cpus: int
    sockets: int
    cores_per_socket: int
    threads_per_core: int


@dataclass(frozen=True)
class Gpu:
    """One GPU of a node type, in nvidia-smi order.

    ``index``: GPU<index>; ``cpus``: OS CPU ids local to it (nvidia-smi ``CPU Affinity``,
    expanded; () when unknown); ``numa_node``: nvidia-smi ``NUMA Affinity`` (None when unknown);
    ``nearest_nics``: device names of the nearest compute NIC(s); ``links``: raw nvidia-smi
    matrix tokens by column label (``{"GPU1": "NV12", "NIC0": "PXB"}``), self omitted;
    ``gpu_numa_id``: nvidia-smi ``GPU NUMA ID`` (the GPU memory's own NUMA node on coherent
    systems such as Grace Hopper; None when absent); ``minor``: the device minor number
    (``nvidia-smi -q`` "Minor Number", NVML ``nvmlDeviceGetMinorNumber``; the driver's device
    file is ``/dev/nvidia<minor>``; None when not recorded). nvidia-smi's index is PCI bus
    order; the minor often differs (e.g. on AMD EPYC hosts). ``pcie_width``: the PCIe link width
    (lanes) this GPU's slot gives by design when it differs from the node type's ``pcie_width``
    (e.g. 8 for a GPU in a x8 slot; None: the node type's).
    """

    index: int
    cpus: tuple[int, ...] = ()
    numa_node: int | None = None
    nearest_nics: tuple[str, ...] = ()
    links: dict[str, str] = field(default_factory=dict)
    gpu_numa_id: int | None = None
    minor: int | None = None
    pcie_width: int | None = None

    def nvlinks_to(self, other: int) -> int:
        """Number of NVLinks to GPU ``other`` (``NV<n>`` -> n, anything else -> 0)."""
        tok = self.links.get(f"GPU{other}", "")
        if tok.startswith("NV") and tok[2:].isdigit():
            return int(tok[2:])
        return 0


@dataclass(frozen=True)
class Nic:
    """One NIC of a node type: ``device`` (the RDMA device of ``/sys/class/infiniband``:
    ``mlx5_0``, ``rdmap79s0``; or a plain interface such as ``eth0``), ``link_layer``
    (InfiniBand | RoCE | Ethernet | EFA; RoCE: an RDMA device whose port runs Ethernet, as
    ``topo discover`` writes it), ``rate_gbps`` (Gbit/s), ``role`` (compute | other),
    ``numa_node`` (None when unknown), ``netdev``: the Linux network interface of that device
    (``/sys/class/infiniband/<device>/device/net/``, e.g. ``ibp24s0``; "" when it has none or
    it is not known) - the names NCCL_SOCKET_IFNAME can use; ``pci`` (the NIC's PCI address in
    sysfs form, ``0000:0c:00.0``, the target of ``/sys/class/infiniband/<device>/device``; None:
    found by name only; the health checks find the NIC by it when the kernel renumbers HCAs)."""

    device: str
    link_layer: str
    rate_gbps: float = 0.0
    role: str = "compute"
    numa_node: int | None = None
    netdev: str = ""
    pci: str | None = None


@dataclass(frozen=True)
class NodeType:
    """``[node_types.<name>]``: one kind of GPU node.

    ``gpu_model``: gres type (``Gres=gpu:<gpu_model>:<gpu_count>``); ``sockets``,
    ``cores_per_socket``, ``threads_per_core``: the hardware; ``cpu_numbering``: how the OS
    numbers CPUs ("linear" | "interleaved" | "unknown"); ``memory_mib``: RealMemory (MiB;
    None when not given); ``gpu_tdp_w``: board power (W, reports' modelled energy; None when
    not given); ``p2p``: GPU peer-to-peer works;
    ``slurm_node``: what slurm.conf says when it differs from the hardware (else None);
    ``pcie_width``: the PCIe link width (lanes) every GPU should train to (None: not judged
    against the profile; a GPU's own ``pcie_width`` wins); ``pcie_gen``: the PCIe generation the
    GPUs and their slots should support (compared with NVML's max link generation; None: not
    judged); ``sources``: where this node type's values come from; ``clock_policy``: key of
    ``clock_policies``, the GPUs' resting state the epilog puts back (None: the site's
    ``[health]`` pins, else the GPU's defaults).
    """

    name: str
    gpu_model: str
    gpu_count: int
    sockets: int = 1
    cores_per_socket: int = 1
    threads_per_core: int = 1
    cpu_numbering: str = "linear"
    memory_mib: int | None = None
    gpu_tdp_w: float | None = None
    p2p: bool = True
    slurm_node: SlurmNode | None = None
    gpus: tuple[Gpu, ...] = ()
    nics: tuple[Nic, ...] = ()
    pcie_width: int | None = None
    pcie_gen: int | None = None
    sources: tuple[str, ...] = ()
    clock_policy: str | None = None

    @property
    def cpu_count(self) -> int:
        """OS CPUs of the node: sockets x cores_per_socket x threads_per_core."""
        return self.sockets * self.cores_per_socket * self.threads_per_core

    def gpu(self, index: int) -> Gpu:
        """The GPU with nvidia-smi index ``index`` (KeyError when absent)."""
        for g in self.gpus:
            if g.index == index:
                return g
        raise KeyError(f"node type {self.name!r} has no GPU{index}")

    def gres_order(self) -> tuple[Gpu, ...]:
        """The GPUs in Slurm's gres order: the order of gres.conf's lines, which slurmkit writes
        by device minor number (``File=/dev/nvidia<minor>``) when every GPU records one, else in
        nvidia-smi order. Slurm's GPU index (``SLURM_STEP_GPUS``, ``IDX:``) is a position in it."""
        if self.gpus and all(g.minor is not None for g in self.gpus):
            return tuple(sorted(self.gpus, key=lambda g: g.minor))
        return tuple(sorted(self.gpus, key=lambda g: g.index))

    def gpu_cpus(self, index: int) -> tuple[int, ...]:
        """NUMA-local OS CPU ids of GPU ``index`` (from ``gpus[].cpus``; () when unknown)."""
        return self.gpu(index).cpus

    def pcie_expect(self) -> dict:
        """What the ``pcie_width`` / ``pcie_gen`` checks expect of this node type's GPUs:
        ``{"width": lanes | None, "gen": generation | None, "gpus": {nvidia-smi index: lanes}}``
        (``gpus``: the GPUs whose own ``pcie_width`` differs from the node type's)."""
        return {"width": self.pcie_width, "gen": self.pcie_gen,
                "gpus": {g.index: g.pcie_width for g in self.gpus if g.pcie_width is not None}}

    def compute_nics(self) -> tuple[Nic, ...]:
        """NICs with ``role = "compute"``, in profile order."""
        return tuple(n for n in self.nics if n.role == "compute")

    def nic(self, device: str) -> Nic:
        """The NIC named ``device`` (KeyError when absent)."""
        for n in self.nics:
            if n.device == device:
                return n
        raise KeyError(f"node type {self.name!r} has no NIC {device!r}")

    def cpu_map(self) -> dict[int, tuple[int, int]] | None:
        """OS CPU id -> (socket, core within socket), from sockets / cores / threads and
        ``cpu_numbering``; None when the numbering is "unknown"."""
        from slurmkit.topology.cores import cpu_map

        return cpu_map(self.sockets, self.cores_per_socket, self.threads_per_core, self.cpu_numbering)


@dataclass(frozen=True)
class Leaf:
    """A leaf switch (``[[fabric.leaves]]``): ``name``, ``nodes`` (hostlist as written),
    ``node_names`` (expanded)."""

    name: str
    nodes: str
    node_names: tuple[str, ...]


@dataclass(frozen=True)
class Spine:
    """A spine switch (``[[fabric.spines]]``): ``name`` and the leaf/spine ``switches`` under it."""

    name: str
    switches: tuple[str, ...]


@dataclass(frozen=True)
class Block:
    """A block for Slurm's topology/block (``[[fabric.blocks]]``): ``name``, ``nodes``, ``node_names``."""

    name: str
    nodes: str
    node_names: tuple[str, ...]


@dataclass(frozen=True)
class Fabric:
    """``[fabric]``: a tree (``leaves`` under ``spines``) or ``blocks``; all empty when flat."""

    leaves: tuple[Leaf, ...] = ()
    spines: tuple[Spine, ...] = ()
    blocks: tuple[Block, ...] = ()


@dataclass(frozen=True)
class Nccl:
    """``[nccl]``: ``fabric`` (infiniband | roce | efa | tcp | pcie), ``version`` of NCCL on the
    nodes ("" unknown), ``gdr_level`` (NCCL_NET_GDR_LEVEL), ``gid_index`` (RoCE, NCCL < 2.21;
    None when unset), ``socket_ifname`` (NCCL_SOCKET_IFNAME names), ``efa_plugin_version``
    (aws-ofi-nccl), ``extra`` (further variables exported verbatim)."""

    fabric: str = "infiniband"
    version: str = ""
    gdr_level: str = ""
    gid_index: int | None = None
    socket_ifname: tuple[str, ...] = ()
    efa_plugin_version: str = ""
    extra: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Submit:
    """``[submit]``: ``container`` (pyxis enabled), ``switch_wait`` (max wait for ``--switches``,
    Slurm time string), ``rendezvous_interface`` ("" = NodeAddr), ``cpus_per_gpu``,
    ``max_restarts`` (how many times a job requeues itself before the time limit or after a
    node failure; ``--set max_restarts=N`` per job), ``checkpoint_signal`` (the signal jobs'
    ranks get before the time limit to checkpoint, then requeue; "" = none: Slurm's own time
    limit; ``--checkpoint-signal`` per job), ``retry_switch_wait`` (the ``--switches`` wait of a
    job requeued without a bad node; "" = drop ``--switches`` on such a retry)."""

    container: bool = False
    switch_wait: str = "5:00"
    rendezvous_interface: str = ""
    cpus_per_gpu: int = 1
    max_restarts: int = 3
    checkpoint_signal: str = ""
    retry_switch_wait: str = ""


@dataclass(frozen=True)
class Report:
    """``[report]``: ``pue`` (facility power / IT power), ``carbon_g_per_kwh`` (gCO2e per kWh),
    ``price_per_kwh`` and ``price_per_gpu_hour`` (in ``currency``). Each is None when the
    profile does not give it (no preset invents energy or cost assumptions: reports say so)."""

    pue: float | None = None
    carbon_g_per_kwh: float | None = None
    price_per_kwh: float | None = None
    price_per_gpu_hour: float | None = None
    currency: str | None = None


@dataclass(frozen=True)
class Profile:
    """A validated site profile. ``source``: the profile file (str path, "" for in-memory data);
    ``layers``: every file merged, in order (preset, site file, overrides); ``clock_policies``:
    ``[clock_policies.<name>]`` by name."""

    source: str
    cluster: Cluster
    partitions: dict[str, Partition]
    node_types: dict[str, NodeType]
    fabric: Fabric = Fabric()
    nccl: Nccl = Nccl()
    submit: Submit = Submit()
    health: Health = Health()
    report: Report = Report()
    layers: tuple[str, ...] = ()
    clock_policies: dict[str, ClockPolicy] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The cluster name (``[cluster].name``)."""
        return self.cluster.name

    @property
    def default_partition(self) -> Partition:
        """The partition with ``default = true``, else the first one written."""
        for p in self.partitions.values():
            if p.default:
                return p
        return next(iter(self.partitions.values()))

    def partition(self, name: str | None = None) -> Partition:
        """Partition ``name`` (None: the default partition). KeyError names the known ones."""
        if name is None:
            return self.default_partition
        try:
            return self.partitions[name]
        except KeyError:
            raise KeyError(f"partition {name!r} is not in profile {self.source or self.name} "
                           f"(known: {', '.join(self.partitions)})") from None

    def node_type_for(self, partition: str | None = None) -> NodeType:
        """The node type of partition ``partition`` (None: the default partition)."""
        return self.node_types[self.partition(partition).node_type]

    def nodes(self, partition: str | None = None) -> tuple[str, ...]:
        """Node names of ``partition`` (None: every partition's nodes, deduplicated, in order)."""
        if partition is not None:
            return self.partition(partition).node_names
        seen: dict[str, None] = {}
        for p in self.partitions.values():
            for n in p.node_names:
                seen.setdefault(n, None)
        return tuple(seen)

    def node_type_of(self, node: str) -> NodeType:
        """The node type of node ``node`` (first partition listing it; KeyError when none)."""
        for p in self.partitions.values():
            if node in p.node_names:
                return self.node_types[p.node_type]
        raise KeyError(f"node {node!r} is in no partition of profile {self.source or self.name}")

    def resting_policy(self, node: str) -> ClockPolicy | None:
        """The resting clock policy of node ``node`` (its node type's ``clock_policy``); None
        when its node type names none. KeyError when the node is in no partition."""
        name = self.node_type_of(node).clock_policy
        return self.clock_policies[name] if name else None

    def partition_policy(self, partition: str) -> ClockPolicy | None:
        """The clock policy the prolog applies to jobs of ``partition`` (its ``clock_policy``);
        None when it names none. KeyError (naming the known ones) for an unknown partition."""
        name = self.partition(partition).clock_policy
        return self.clock_policies[name] if name else None

    def leaf_of(self, node: str) -> str | None:
        """Name of the leaf switch above ``node`` (``fabric.leaves``), None when not under one."""
        for leaf in self.fabric.leaves:
            if node in leaf.node_names:
                return leaf.name
        return None

    def leaves(self) -> dict[str, tuple[str, ...]]:
        """Leaf switch name -> node names under it, in profile order."""
        return {leaf.name: leaf.node_names for leaf in self.fabric.leaves}

    def compute_nics(self, node_type: str) -> tuple[Nic, ...]:
        """Compute NICs (``role = "compute"``) of node type ``node_type``."""
        return self.node_types[node_type].compute_nics()

    def gpu_cpus(self, node_type: str, gpu: int) -> tuple[int, ...]:
        """NUMA-local OS CPU ids of GPU ``gpu`` of node type ``node_type``."""
        return self.node_types[node_type].gpu_cpus(gpu)
