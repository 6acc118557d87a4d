"""The site profile as a frozen dataclass tree (schema: ``docs/site-profile.md``).

Built by :func:`slurmkit.profile.validate.build` from layered TOML; read by ``submit`` (placement,
NCCL presets), the hooks (expected GPUs, health thresholds), ``report`` (TDP, PUE, prices) and
the gres.conf / topology.conf generators. Hostlist expressions are kept as written
(``nodes``) and also expanded with python-hostlist (``node_names``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from slurmkit.profile.clock_policy import ClockPolicy  # also re-exported: [clock_policies.*]
from slurmkit.profile.health import Health  # also re-exported: the [health] section
from slurmkit.profile.nccl import Nccl  # also re-exported: the [nccl] section


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
    (e.g. 8 for a GPU in a x8 slot; None: the node type's). ``mig_caps``: for a GPU of a MIG
    group, the ``(GI, CI)`` minor numbers of each MIG instance's ``/dev/nvidia-caps/nvidia-cap<N>``
    files (``/proc/driver/nvidia-caps/mig-minors``), one pair per instance in the order of the
    group's ``mig`` table; () when not known (then gres.conf lets Slurm's NVML find them).
    """

    index: int
    cpus: tuple[int, ...] = ()
    numa_node: int | None = None
    nearest_nics: tuple[str, ...] = ()
    links: dict[str, str] = field(default_factory=dict)
    gpu_numa_id: int | None = None
    minor: int | None = None
    pcie_width: int | None = None
    mig_caps: tuple[tuple[int, int], ...] = ()

    def nvlinks_to(self, other: int) -> int:
        """Number of NVLinks to GPU ``other`` (``NV<n>`` -> n, anything else -> 0)."""
        tok = self.links.get(f"GPU{other}", "")
        if tok.startswith("NV") and tok[2:].isdigit():
            return int(tok[2:])
        return 0


#: ``node_types.<t>.autodetect``: Slurm's gres.conf ``AutoDetect=`` (``off``: every GPU spelled
#: out; ``nvml``: Slurm's NVML plugin, gpu_nvml.so; ``nvidia``: /proc/driver/nvidia + /dev, Slurm
#: 24.11 and later).
AUTODETECT = ("off", "nvml", "nvidia")
#: gres.conf ``Flags=`` a node type may set (gres.conf(5), Slurm 22.05): the GPU environment
#: flags go on its ``Name=gpu`` lines, the sharing ones on its ``Name=shard`` / ``Name=mps`` lines.
GPU_ENV_FLAGS = ("nvidia_gpu_env", "amd_gpu_env", "intel_gpu_env", "opencl_env", "no_gpu_env")
SHARING_FLAGS = ("one_sharing", "all_sharing")


def slurm_gpu_type(nvml_name: str) -> str:
    """The gres type Slurm's NVML autodetect gives a GPU: NVML's device name
    (``nvmlDeviceGetName``) lower-cased with spaces as ``_`` (``"NVIDIA A100-SXM4-80GB"`` ->
    ``"nvidia_a100-sxm4-80gb"``). Source: SchedMD/slurm ``src/plugins/gpu/nvml/gpu_nvml.c``
    ``_nvml_get_device_name`` -> ``gpu_common_underscorify_tolower``
    (``src/plugins/gpu/common/gpu_common.c``), commit 284c3b95f08a."""
    return "".join("_" if ch == " " else ch.lower() for ch in nvml_name)


def slurm_mig_type(nvml_name: str, mig_profile: str) -> str:
    """The gres type Slurm's NVML autodetect gives a MIG instance of profile ``mig_profile``
    (``"1g.10gb"``) on a GPU named ``nvml_name``: :func:`slurm_gpu_type` cut at its first ``-``,
    ``_``, the profile (``"NVIDIA A100-SXM4-80GB"``, ``"1g.10gb"`` -> ``"nvidia_a100_1g.10gb"``).
    Source: gpu_nvml.c (commit 284c3b95f08a) ``_get_system_gpu_list_nvml`` (MIG mode: the parent's
    name is cut at the first '-') and ``_handle_mig`` (the MIG device's name from its ``mig_``
    on, less ``mig``: ``_1g.10gb``)."""
    return slurm_gpu_type(nvml_name).split("-", 1)[0] + "_" + mig_profile.lower()


@dataclass(frozen=True)
class GpuGroup:
    """``node_types.<t>.gpu_groups[]`` (or the one group of the older ``gpu_model`` /
    ``gpu_count`` keys): GPUs of one model on a node type.

    ``model``: the gres type (``Gres=gpu:<model>:<count>``; None: untyped, ``Gres=gpu:<count>``);
    ``count``: physical GPUs; ``indexes``: their nvidia-smi indexes (the node type's ``gpus[]``);
    ``tdp_w``: board power (W; None when not given); ``nvml_name``: NVML's device name
    (``nvmlDeviceGetName``, what ``nvidia-smi -L`` prints; "" when not given), from which Slurm
    names MIG types; ``mig``: MIG profile -> instances on each GPU (``{"1g.10gb": 7}``; empty:
    MIG off; a layout one GPU of the model can hold, checked with :mod:`slurmkit.mig`);
    ``mig_type``: the gres type of an instance as the site names it, a pattern with
    ``{profile}`` (``"{profile}"`` gives Magic Castle's ``3g.20gb``; "": Slurm's NVML name,
    :func:`slurm_mig_type`); ``mig_files``: the device file of each instance when the site makes
    its own (Magic Castle's ``"/dev/nvidia-mig-{profile}-{i}"``, ``{i}`` counting a profile's
    instances on the node from 0; "": the GPU's device and its ``nvidia-caps`` files,
    ``gpus[].mig_caps``); ``shards``: Slurm shards per GPU (``Name=shard``; 0: none); ``mps``:
    Slurm MPS share per GPU (``Name=mps Count=``, 100 = a whole GPU; 0: none)."""

    model: str | None
    count: int
    indexes: tuple[int, ...] = ()
    tdp_w: float | None = None
    nvml_name: str = ""
    mig: dict[str, int] = field(default_factory=dict)
    shards: int = 0
    mps: int = 0
    mig_type: str = ""
    mig_files: str = ""

    def instance_type(self, profile: str) -> str:
        """The gres type of an instance of MIG profile ``profile``: ``mig_type`` with the profile
        filled in, else :func:`slurm_mig_type`."""
        return self.mig_type.format(profile=profile) if self.mig_type else slurm_mig_type(self.nvml_name, profile)

    def gres_types(self) -> tuple[tuple[str | None, int], ...]:
        """``((type, count), ...)`` of ``Name=gpu`` gres this group gives one node: its model x
        count, or one entry per MIG profile (:meth:`instance_type`, instances x GPUs)."""
        if self.mig:
            return tuple((self.instance_type(prof), n * self.count) for prof, n in self.mig.items())
        return ((self.model, self.count),)

    @property
    def gres_count(self) -> int:
        """``Name=gpu`` gres units on one node: GPUs, or MIG instances when MIG is on."""
        return sum(n for _, n in self.gres_types())


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
    """``[node_types.<name>]``: one kind of node (a node belongs to one node type).

    ``gpu_groups``: its GPUs, one :class:`GpuGroup` per model (a mixed node has several, an
    untyped one a group with ``model`` None, a CPU-only node none); ``autodetect``: gres.conf
    ``AutoDetect=`` for its nodes (:data:`AUTODETECT`); ``features``: slurm.conf ``Features=``;
    ``gres_flags``: gres.conf ``Flags=`` (:data:`GPU_ENV_FLAGS` on its GPU lines, e.g. to keep
    CUDA_VISIBLE_DEVICES under AutoDetect=off; :data:`SHARING_FLAGS` on its shard / MPS lines);
    ``sockets``,
    ``cores_per_socket``, ``threads_per_core``: the hardware; ``cpu_numbering``: how the OS
    numbers CPUs ("linear" | "interleaved" | "unknown"); ``memory_mib``: RealMemory (MiB;
    None when not given); ``p2p``: GPU peer-to-peer works;
    ``slurm_node``: what slurm.conf says when it differs from the hardware (else None);
    ``gpus``: every GPU of the node in nvidia-smi order (node-wide indexes; each group names its
    own by ``indexes``);
    ``pcie_width``: the PCIe link width (lanes) every GPU should train to (None: not judged
    against the profile; a GPU's own ``pcie_width`` wins); ``pcie_gen``: the PCIe generation the
    GPUs and their slots should support (compared with NVML's max link generation; None: not
    judged); ``sources``: where this node type's values come from; ``clock_policy``: key of
    ``clock_policies``, the GPUs' resting state the epilog puts back (None: the site's
    ``[health]`` pins, else the GPU's defaults); ``cpus_per_gpu``: the CPUs ``submit`` asks per
    allocated GPU (a MIG instance on a MIG node type) on this node type's partitions (sbatch
    ``--cpus-per-gpu``; None: ``[submit].cpus_per_gpu``); ``mem_per_gpu``: the memory it asks
    per allocated GPU when the job gives neither ``--mem`` nor ``--mem-per-gpu`` (a Slurm size
    such as ``"64G"``, sbatch ``--mem-per-gpu``; None: Slurm's default).
    """

    name: str
    gpu_groups: tuple[GpuGroup, ...] = ()
    sockets: int = 1
    cores_per_socket: int = 1
    threads_per_core: int = 1
    cpu_numbering: str = "linear"
    memory_mib: int | None = None
    p2p: bool = True
    slurm_node: SlurmNode | None = None
    gpus: tuple[Gpu, ...] = ()
    nics: tuple[Nic, ...] = ()
    pcie_width: int | None = None
    pcie_gen: int | None = None
    sources: tuple[str, ...] = ()
    clock_policy: str | None = None
    autodetect: str = "off"
    features: tuple[str, ...] = ()
    gres_flags: tuple[str, ...] = ()
    cpus_per_gpu: int | None = None
    mem_per_gpu: str | None = None

    @property
    def gpu_count(self) -> int:
        """Physical GPUs of the node (every group's ``count``; 0 for a CPU-only node type)."""
        return sum(g.count for g in self.gpu_groups)

    @property
    def gpu_model(self) -> str | None:
        """The gres type of a node type with one GPU group (None: untyped, CPU-only, or several
        groups: see :attr:`gpu_groups`)."""
        return self.gpu_groups[0].model if len(self.gpu_groups) == 1 else None

    @property
    def gpu_tdp_w(self) -> float | None:
        """Board power (W) of a node type with one GPU group (None when not given or mixed)."""
        return self.gpu_groups[0].tdp_w if len(self.gpu_groups) == 1 else None

    @property
    def cpu_only(self) -> bool:
        """The node type has no GPU."""
        return not self.gpu_groups

    def gpu_group(self, model: str | None) -> GpuGroup:
        """The GPU group whose gres type is ``model`` (None: the untyped group; a MIG group by
        one of its instance types, by its ``model`` when no whole-GPU group has it, or by one of
        its MIG profiles); KeyError naming the known ones."""
        for g in self.gpu_groups:
            if any(kind == model for kind, _ in g.gres_types()):
                return g
        for g in self.gpu_groups:
            if g.model == model:
                return g
        for g in self.gpu_groups:  # a MIG group by one of its profiles (1g.10gb)
            if model in g.mig:
                return g
        raise KeyError(f"node type {self.name!r} has no GPU group of type {model!r} "
                       f"(known: {', '.join(str(k) for g in self.gpu_groups for k, _ in g.gres_types()) or 'none: no GPUs'})")

    def group_of(self, index: int) -> GpuGroup:
        """The GPU group holding nvidia-smi index ``index`` (KeyError when none)."""
        for g in self.gpu_groups:
            if index in g.indexes:
                return g
        raise KeyError(f"node type {self.name!r} has no GPU{index}")

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

    def device_number(self, index: int) -> int:
        """The ``/dev/nvidia<N>`` number of GPU ``index``: its ``minor`` when every GPU records
        one, else the nvidia-smi index (the sandbox's own device files)."""
        if self.gpus and all(g.minor is not None for g in self.gpus):
            return self.gpu(index).minor
        return index

    def gres_units(self) -> tuple[tuple[int, str | None], ...]:
        """``(nvidia-smi index, gres type)`` of each ``Name=gpu`` gres of the node, in Slurm's
        gres order: slurmd groups its GPU records by type (first type first: ``slurmd -G`` on a
        mixed node lists every ``b`` GPU before the ``a`` one whatever the File= order), and
        within a type by device file (:meth:`device_number`); a MIG GPU gives one entry per
        instance (types from :meth:`GpuGroup.gres_types`). gres.conf is written in this order,
        so Slurm's GPU index (``SLURM_STEP_GPUS``, ``IDX:``) is a position in it."""
        out: list[tuple[int, str | None]] = []
        for grp in self.gpu_groups:
            order = sorted(grp.indexes, key=self.device_number)
            if grp.mig:
                for prof, n in grp.mig.items():
                    kind = grp.instance_type(prof)
                    out += [(i, kind) for i in order for _ in range(n)]
            else:
                out += [(i, grp.model) for i in order]
        return tuple(out)

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
class Submit:
    """``[submit]``: ``container`` (pyxis enabled), ``switch_wait`` (max wait for ``--switches``,
    Slurm time string), ``rendezvous_interface`` ("" = NodeAddr), ``cpus_per_gpu``,
    ``max_restarts`` (how many times a job requeues itself before the time limit or after a
    node failure; ``--set max_restarts=N`` per job), ``checkpoint_signal`` (the signal jobs'
    ranks get before the time limit to checkpoint, then requeue; "" = none: Slurm's own time
    limit; ``--checkpoint-signal`` per job), ``retry_switch_wait`` (the ``--switches`` wait of a
    job requeued without a bad node; "" = drop ``--switches`` on such a retry),
    ``node_fault_reasons`` (prefixes of a node's drain/down reason, ``scontrol show node``
    ``Reason=``, that make a rank's mid-run failure that node's, so the job is requeued without
    it; default slurmkit's health check's ``slurmkit:``; e.g. ``["slurmkit:", "NHC:"]`` where
    LBNL NHC drains nodes), ``node_fault_wait_s`` (seconds, 0..3600: how long a job whose
    ranks failed with no node evidence keeps looking, every 5 s, for Slurm's drain evidence
    alone, since a health check on HealthCheckInterval or NHC drains minutes later; 0 = look
    once, right after the ranks fail; every such failure, the program's own included, then ends
    that much later)."""

    container: bool = False
    switch_wait: str = "5:00"
    rendezvous_interface: str = ""
    cpus_per_gpu: int = 1
    max_restarts: int = 3
    checkpoint_signal: str = ""
    retry_switch_wait: str = ""
    node_fault_reasons: tuple[str, ...] = ("slurmkit:",)
    node_fault_wait_s: int = 0


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
