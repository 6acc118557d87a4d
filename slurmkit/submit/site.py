"""The facts ``submit`` needs from a site profile, as one flat frozen record.

:func:`site_facts` reads a loaded profile (``slurmkit.profile.load_profile``) for one partition
and returns :class:`SiteFacts`: the partition's node type (GPUs with their NUMA-local CPUs,
compute NICs), the fabric's leaf switches, the ``[nccl]`` and ``[submit]`` tables. Everything
downstream (placement, NCCL presets, rendering) is a pure function of these facts.
"""

from __future__ import annotations

from dataclasses import dataclass

from slurmkit.errors import InputError
from slurmkit.profile import load_profile
from slurmkit.profile.model import Nccl, Submit


class SiteError(InputError):
    """The profile lacks something ``submit`` needs: ``file`` (the profile), ``line`` (None),
    ``message`` (names the profile key), ``key``. CLI exit status 2."""


@dataclass(frozen=True)
class GpuFacts:
    """One GPU of the node type: ``index`` (nvidia-smi order), ``cpus`` (OS CPU ids, from
    ``node_types.<t>.gpus[].cpus``), ``numa_node`` (None when unknown), ``nearest_nics``,
    ``minor`` (device minor number, None when not recorded)."""

    index: int
    cpus: tuple[int, ...]
    numa_node: int | None = None
    nearest_nics: tuple[str, ...] = ()
    minor: int | None = None


@dataclass(frozen=True)
class NicFacts:
    """One NIC of the node type: ``device`` (e.g. ``mlx5_0``), ``link_layer``
    (InfiniBand | RoCE | Ethernet | EFA), ``role`` (compute | other), ``rate_gbps``."""

    device: str
    link_layer: str
    role: str
    rate_gbps: float = 0.0


@dataclass(frozen=True)
class SiteFacts:
    """What placement and the templates need, for one partition of one profile.

    ``source`` is the profile file; ``gpu_model``: the gres type the job asks for ("": untyped,
    ``--gpus-per-node=<n>``); ``gpu_count``: the most of it one node has; ``gpus`` are in Slurm's
    gres order (position = Slurm's GPU index on the node, every GPU of the node); ``leaves`` maps leaf switch name -> node names (from
    ``fabric.leaves``, hostlists expanded); ``nccl`` and ``submit``: the profile's typed ``[nccl]``
    / ``[submit]`` sections (:class:`slurmkit.profile.model.Nccl` / ``Submit``; defaults from
    the profile model).
    """

    source: str
    cluster: str
    partition: str
    node_type: str
    partition_nodes: tuple[str, ...]
    gpu_model: str
    gpu_count: int
    gpus: tuple[GpuFacts, ...]
    nics: tuple[NicFacts, ...]
    p2p: bool
    leaves: tuple[tuple[str, tuple[str, ...]], ...]
    nccl: Nccl = Nccl()
    submit: Submit = Submit()
    #: why this partition: "named", "default = true", or "first listed; none has default = true"
    partition_source: str = "named"
    #: the MIG instances a GPU request may get: ``(gres type, MIG profile, NVML name of the
    #: parent GPU)`` each (from ``gpu_groups[].mig`` / ``nvml_name``); () for whole GPUs
    mig: tuple[tuple[str, str, str], ...] = ()
    #: the shared GPU gres the node type offers: ``(name, per GPU, most one job gets on a node)``
    #: for ``shard`` (``gpu_groups[].shards``) and ``mps`` (``gpu_groups[].mps``), see
    #: :func:`shared_gres`; () when it offers none
    shares: tuple[tuple[str, int, int], ...] = ()
    #: every partition of the profile offering each shared gres: ``(name, partitions)``
    shares_offered: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: ``node_types.<t>.cpus_per_gpu`` / ``mem_per_gpu`` (None: not set for the node type)
    cpus_per_gpu: int | None = None
    mem_per_gpu: str | None = None

    @property
    def compute_hcas(self) -> tuple[str, ...]:
        """RDMA NICs with ``role = "compute"`` (InfiniBand or RoCE), in profile order."""
        return tuple(n.device for n in self.nics
                     if n.role == "compute" and n.link_layer in ("InfiniBand", "RoCE"))


#: Slurm's shared GPU gres (gres.conf ``Name=shard`` / ``Name=mps``) -> the node type's
#: :class:`~slurmkit.profile.model.GpuGroup` field giving its count per GPU
SHARED_GRES = {"shard": "shards", "mps": "mps"}


def shared_gres(nt) -> tuple[tuple[str, int, int], ...]:
    """``(name, per GPU, most one job gets on a node)`` of each shared gres node type ``nt``
    offers (its groups' ``shards`` / ``mps``; per GPU: the largest group's). The most a job gets
    on a node: under gres.conf ``Flags=one_sharing`` (MPS's default) its count comes from one
    GPU, so per GPU; under ``all_sharing`` (the shards' default) from every GPU of the node
    (gres.conf(5) ``Flags``)."""
    out = []
    for name, attr in SHARED_GRES.items():
        groups = [g for g in nt.gpu_groups if getattr(g, attr)]
        if not groups:
            continue
        per_gpu = max(getattr(g, attr) for g in groups)
        one = "one_sharing" in nt.gres_flags or (name == "mps" and "all_sharing" not in nt.gres_flags)
        out.append((name, per_gpu, per_gpu if one else sum(getattr(g, attr) * g.count for g in groups)))
    return tuple(out)


def load(site: str | None):
    """Load a profile by shipped name or path with ``slurmkit.profile.load_profile``
    (``site`` None: the ``SLURMKIT_SITE`` environment variable, else ``"sandbox"``)."""
    import os

    return load_profile(site or os.environ.get("SLURMKIT_SITE") or "sandbox")


def site_facts(profile, partition: str | None = None, source: str = "", gpu_type: str | None = None) -> SiteFacts:
    """:class:`SiteFacts` for ``partition`` (None: the profile's default partition).

    ``profile``: a loaded ``slurmkit.profile.Profile`` (validated: partitions name node types,
    hostlists expanded); ``source``: the file name used in messages when the profile carries
    none; ``gpu_type``: on a node type with several GPU groups (a mixed node), the gres type
    the job asks for (``gpu_model`` / ``gpu_count`` are then that group's; None: the node type's
    one group, or on a mixed node an untyped request for any of its GPUs). ``gpus`` is every
    ``Name=gpu`` gres of the node in Slurm's gres order (a MIG instance gives its GPU's facts),
    so the CPU map covers whichever GPUs Slurm gives. Raises :class:`SiteError` for a partition
    the profile does not have or a type its node type lacks.
    """
    source = str(profile.source or source or "")
    parts = profile.partitions
    partition_source = "named"
    if partition is None:
        defaults = [name for name, p in parts.items() if p.default]
        partition = defaults[0] if defaults else next(iter(parts))
        partition_source = "default = true" if defaults else "first listed; none has default = true"
    if partition not in parts:
        raise SiteError(source, None, f"partition {partition!r} is not in the profile "
                        f"(known: {', '.join(sorted(parts))})")
    part = parts[partition]
    nt = profile.node_types[part.node_type]
    # in Slurm's gres order (gres.conf lines; by minor number when recorded): the bind wrapper
    # indexes this list by Slurm's GPU index (SLURM_STEP_GPUS)
    listed = {g.index: g for g in nt.gpus}
    gpus = tuple(GpuFacts(index=i, cpus=tuple(listed[i].cpus), numa_node=listed[i].numa_node,
                          nearest_nics=tuple(listed[i].nearest_nics), minor=listed[i].minor)
                 for i, _ in nt.gres_units() if i in listed)
    if gpu_type is not None or len(nt.gpu_groups) == 1:
        try:
            group = nt.gpu_group(gpu_type) if gpu_type is not None else nt.gpu_groups[0]
        except KeyError as exc:
            raise SiteError(source, None, exc.args[0]) from None
        # a MIG group: the request is for one of its instance types (the first, unless named)
        # (named by its gres type, or by its MIG profile: --gpu-type 1g.10gb)
        gpu_model, gpu_count = next(((k, n) for k, n in group.gres_types()
                                     if gpu_type in (None, k, group.model)
                                     or (gpu_type in group.mig and group.instance_type(gpu_type) == k)))
        mig_groups = [group] if group.mig else []
    else:  # CPU-only (no group) or a mixed node asked for any GPU: untyped, all of them
        gpu_model, gpu_count = "", sum(grp.gres_count for grp in nt.gpu_groups)
        mig_groups = [grp for grp in nt.gpu_groups if grp.mig]
    mig = tuple((kind, prof, grp.nvml_name) for grp in mig_groups for prof in grp.mig
                for kind in (grp.instance_type(prof),) if gpu_model in ("", kind))
    nics = tuple(NicFacts(device=n.device, link_layer=n.link_layer, role=n.role, rate_gbps=float(n.rate_gbps))
                 for n in nt.nics)
    leaves = tuple((leaf.name, leaf.node_names) for leaf in profile.fabric.leaves)
    return SiteFacts(
        source=source, cluster=profile.cluster.name,
        partition=partition, node_type=nt.name, partition_nodes=part.node_names,
        gpu_model=gpu_model or "", gpu_count=gpu_count,
        gpus=gpus, nics=nics, p2p=nt.p2p, leaves=leaves,
        nccl=profile.nccl, submit=profile.submit,
        partition_source=partition_source,
        mig=mig, shares=shared_gres(nt),
        shares_offered=tuple((name, tuple(p for p, pt in parts.items()
                                          if any(n == name for n, _, _ in shared_gres(profile.node_types[pt.node_type]))))
                             for name in SHARED_GRES),
        cpus_per_gpu=nt.cpus_per_gpu, mem_per_gpu=nt.mem_per_gpu,
    )
