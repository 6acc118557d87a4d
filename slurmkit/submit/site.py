"""The facts ``submit`` needs from a site profile, as one flat frozen record.

:func:`site_facts` reads a loaded profile (``slurmkit.profile.load_profile``) for one partition
and returns :class:`SiteFacts`: the partition's node type (GPUs with their NUMA-local CPUs,
compute NICs), the fabric's leaf switches, the ``[nccl]`` and ``[submit]`` tables. Everything
downstream (placement, NCCL presets, rendering) is a pure function of these facts.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class SiteError(ValueError):
    """The profile lacks something ``submit`` needs (message names the profile key)."""


@dataclass(frozen=True)
class GpuFacts:
    """One GPU of the node type: ``index`` (nvidia-smi order), ``cpus`` (OS CPU ids, from
    ``node_types.<t>.gpus[].cpus``), ``numa_node`` (None when unknown), ``nearest_nics``."""

    index: int
    cpus: tuple[int, ...]
    numa_node: int | None = None
    nearest_nics: tuple[str, ...] = ()


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

    ``source`` is the profile file; ``leaves`` maps leaf switch name -> node names (from
    ``fabric.leaves``, hostlists expanded); ``nccl`` and ``submit`` are the raw tables as dicts.
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
    nccl: dict = field(default_factory=dict)
    submit: dict = field(default_factory=dict)
    #: why this partition: "named", "default = true", or "first listed; none has default = true"
    partition_source: str = "named"

    @property
    def compute_hcas(self) -> tuple[str, ...]:
        """RDMA NICs with ``role = "compute"`` (InfiniBand or RoCE), in profile order."""
        return tuple(n.device for n in self.nics
                     if n.role == "compute" and n.link_layer in ("InfiniBand", "RoCE"))

    def submit_setting(self, key: str, default):
        """``[submit].<key>`` from the profile, or ``default`` when absent."""
        value = self.submit.get(key)
        return default if value is None else value


def _get(obj, key, default=None):
    """Attribute or mapping access, so the facts read a dataclass tree or a plain TOML dict."""
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(key, default)
    return getattr(obj, key, default)


def _as_dict(obj) -> dict:
    if obj is None:
        return {}
    if isinstance(obj, dict):
        return dict(obj)
    import dataclasses

    if dataclasses.is_dataclass(obj):
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    return dict(vars(obj))


def _expand(hostlist_expr) -> tuple[str, ...]:
    if not hostlist_expr:
        return ()
    if isinstance(hostlist_expr, (list, tuple)):
        return tuple(hostlist_expr)
    from slurmkit import hostlist

    return tuple(hostlist.expand_hostlist(hostlist_expr))


def load(site: str | None):
    """Load a profile by shipped name or path with ``slurmkit.profile.load_profile``
    (``site`` None: the ``SLURMKIT_SITE`` environment variable, else ``"sandbox"``)."""
    import os

    from slurmkit.profile import load_profile

    return load_profile(site or os.environ.get("SLURMKIT_SITE") or "sandbox")


def site_facts(profile, partition: str | None = None, source: str = "") -> SiteFacts:
    """:class:`SiteFacts` for ``partition`` (None: the profile's default partition).

    ``profile``: a ``slurmkit.profile.Profile`` (or the same tree as plain TOML dicts);
    ``source``: the file name used in messages when the profile does not carry its own.
    """
    source = str(_get(profile, "source", "") or source or "")
    parts = _get(profile, "partitions") or {}
    if not parts:
        raise SiteError(f"{source}: profile has no [partitions.*] table")
    partition_source = "named"
    if partition is None:
        defaults = [name for name, p in parts.items() if _get(p, "default", False)]
        partition = defaults[0] if defaults else next(iter(parts))
        partition_source = "default = true" if defaults else "first listed; none has default = true"
    if partition not in parts:
        raise SiteError(f"{source}: partition {partition!r} is not in the profile "
                        f"(known: {', '.join(sorted(parts))})")
    part = parts[partition]
    nt_name = _get(part, "node_type")
    node_types = _get(profile, "node_types") or {}
    if nt_name not in node_types:
        raise SiteError(f"{source}: partitions.{partition}.node_type = {nt_name!r} is not a node type")
    nt = node_types[nt_name]
    gpus = tuple(GpuFacts(index=int(_get(g, "index")), cpus=tuple(int(c) for c in (_get(g, "cpus") or ())),
                          numa_node=_get(g, "numa_node"),
                          nearest_nics=tuple(_get(g, "nearest_nics") or ()))
                 for g in (_get(nt, "gpus") or ()))
    nics = tuple(NicFacts(device=_get(n, "device"), link_layer=_get(n, "link_layer", ""),
                          role=_get(n, "role", "compute"), rate_gbps=float(_get(n, "rate_gbps", 0) or 0))
                 for n in (_get(nt, "nics") or ()))
    fabric = _get(profile, "fabric")
    leaves = tuple((_get(leaf, "name"), _expand(_get(leaf, "nodes")))
                   for leaf in (_get(fabric, "leaves") or ()))
    cluster = _get(profile, "cluster")
    return SiteFacts(
        source=source,
        cluster=str(_get(cluster, "name", "")),
        partition=partition, node_type=nt_name,
        partition_nodes=_expand(_get(part, "nodes")),
        gpu_model=str(_get(nt, "gpu_model", "")), gpu_count=int(_get(nt, "gpu_count", len(gpus)) or 0),
        gpus=tuple(sorted(gpus, key=lambda g: g.index)), nics=nics,
        p2p=bool(_get(nt, "p2p", True)), leaves=leaves,
        nccl=_as_dict(_get(profile, "nccl")), submit=_as_dict(_get(profile, "submit")),
        partition_source=partition_source,
    )
