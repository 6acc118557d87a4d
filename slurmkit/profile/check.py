"""What a valid profile still gets wrong or leaves to a guess: :func:`profile_findings`.

The loader (:mod:`slurmkit.profile.validate`) refuses what cannot be read; these checks judge a
loaded :class:`~slurmkit.profile.model.Profile` as a whole, per node type of a partition, and
name each problem with its dotted key. ``error``: something ``submit`` refuses (a job would
fail or NCCL would find nothing); ``warning``: something the generators or jobs will guess.
:func:`slurmkit.submit.check.check` adds submit's own refusals and is the one validation that
``slurmkit site check`` and ``slurmkit submit`` both run. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from slurmkit.profile.nccl import IfnameRule

#: The link layer each RDMA fabric's compute NICs run (``nics[].link_layer``).
FABRIC_LINK_LAYER = {"infiniband": "InfiniBand", "roce": "RoCE", "efa": "EFA"}
RDMA_LINK_LAYERS = ("InfiniBand", "RoCE", "EFA")
#: NCCL_NET names by the fabrics they drive (see slurmkit.profile.nccl.KNOWN_NETS).
NET_FABRICS = {"IB": ("infiniband", "roce"), "IBext": ("infiniband", "roce"), "Socket": ("tcp",),
               "AWS Libfabric": ("efa",), "Libfabric": ("efa",)}


@dataclass(frozen=True)
class Finding:
    """One problem: ``level`` ("error" | "warning"), ``key`` (the dotted profile key it is
    about, "" for the profile as a whole), ``message`` (what is wrong and what it causes)."""

    level: str
    key: str
    message: str

    def __str__(self) -> str:
        return f"{self.key}: {self.message}" if self.key else self.message


def interfaces(nt) -> set[str]:
    """The network interfaces node type ``nt`` is known to have: the loopback, each NIC's
    ``netdev``, and the ``device`` of each plain Ethernet NIC (whose device is its interface).
    An RDMA device name (``mlx5_0``) is not an interface."""
    have = {"lo"} | {n.netdev for n in nt.nics if n.netdev}
    return have | {n.device for n in nt.nics if n.link_layer == "Ethernet"}


def _used_node_types(p, partition: str | None):
    names = [p.partition(partition).node_type] if partition is not None else \
        list(dict.fromkeys(part.node_type for part in p.partitions.values()))
    return [p.node_types[n] for n in names]


def profile_findings(p, partition: str | None = None) -> list[Finding]:
    """The findings about profile ``p`` for the node types of ``partition`` (None: of every
    partition), errors first within each node type. See the module docstring for levels;
    the rules are listed in ``docs/site-profile.md`` ("Checks shared by site check and submit")."""
    out: list[Finding] = []
    n = p.nccl
    fabric = n.fabric
    rule = IfnameRule.parse(n.socket_ifname) if n.socket_ifname else None
    if fabric == "tcp" and (rule is None or rule.exclude):
        out.append(Finding("error", "nccl.socket_ifname",
                           "nccl.fabric = 'tcp' needs an include list of interfaces (NCCL's syntax: "
                           "\"eth\", \"=eth0\"): an exclusion list or none leaves docker and virtual "
                           "bridges eligible"))
    if n.collnet and fabric != "infiniband":
        out.append(Finding("error", "nccl.collnet", f"SHARP (CollNet) reduces in InfiniBand switches; "
                           f"nccl.fabric is {fabric!r}"))
    elif n.collnet and n.net_plugin != "IBext":
        out.append(Finding("warning", "nccl.collnet", "CollNet needs HPC-X's nccl-rdma-sharp-plugins loaded; "
                           "set nccl.net_plugin = \"IBext\" so a node without it fails at NCCL init"))
    if n.net_plugin and fabric not in NET_FABRICS.get(n.net_plugin, (fabric,)):
        out.append(Finding("error", "nccl.net_plugin", f"NCCL_NET={n.net_plugin!r} drives "
                           f"{' / '.join(NET_FABRICS[n.net_plugin])}, not nccl.fabric = {fabric!r}"))
    for name in ("ib_tc", "ib_sl"):
        if getattr(n, name) is not None and fabric not in ("infiniband", "roce"):
            out.append(Finding("warning", f"nccl.{name}", f"NCCL_{name.upper()} is a verbs queue-pair "
                               f"setting: NCCL ignores it on fabric {fabric!r}"))
    if fabric == "efa" and not n.efa_plugin_version:
        out.append(Finding("warning", "nccl.efa_plugin_version",
                           "aws-ofi-nccl version unknown: only FI_PROVIDER=efa is exported; a plugin "
                           "<= 1.5.0 also needs NCCL_PROTO=simple and, below 1.7.0 on p4/p5, "
                           "FI_EFA_USE_DEVICE_RDMA=1 (aws-ofi-nccl doc/efa-env-var.md)"))
    for nt in _used_node_types(p, partition):
        out += _node_type_findings(p, nt, rule)
    return out


def _node_type_findings(p, nt, rule: IfnameRule | None) -> list[Finding]:
    out: list[Finding] = []
    n, key = p.nccl, f"node_types.{nt.name}"
    want = FABRIC_LINK_LAYER.get(n.fabric)
    if want is not None and nt.gpu_count:             # NCCL runs only where there are GPUs
        compute = [(i, nic) for i, nic in enumerate(nt.nics) if nic.role == "compute"]
        for i, nic in compute:
            if nic.link_layer in RDMA_LINK_LAYERS and nic.link_layer != want:
                out.append(Finding("error", f"{key}.nics[{i}].link_layer",
                                   f"compute NIC {nic.device} is {nic.link_layer}, but nccl.fabric = "
                                   f"{n.fabric!r} runs over {want} ports: one of them is wrong "
                                   f"(sysfs ports/1/link_layer says which)"))
        if not any(nic.link_layer == want for _, nic in compute):
            out.append(Finding("error", f"{key}.nics", f"nccl.fabric = {n.fabric!r} but node type {nt.name} "
                               f"has no compute NIC with link_layer = {want!r}"))
    have = interfaces(nt)
    if rule is not None and not rule.exclude:
        names = [x.split(":", 1)[0] for x in rule.names]
        if rule.exact:
            missing = [x for x in names if x not in have]
            if missing:
                out.append(Finding("error", "nccl.socket_ifname",
                                   f"NCCL_SOCKET_IFNAME={rule.text} names {', '.join(missing)}, which node type "
                                   f"{nt.name} does not have (known interfaces: {', '.join(sorted(have))}; "
                                   f"a NIC's netdev, or a plain Ethernet NIC's device)"))
        elif not any(rule.allows(i) for i in have):
            out.append(Finding("error", "nccl.socket_ifname",
                               f"NCCL_SOCKET_IFNAME={rule.text} ({rule.describe()}) matches no interface of "
                               f"node type {nt.name} (known: {', '.join(sorted(have))}): list the interface "
                               f"as a NIC (its netdev, or role = \"other\" with device = the interface)"))
    for name in filter(None, n.gloo_socket_ifname.split(",")):
        if name not in have:
            out.append(Finding("error", "nccl.gloo_socket_ifname",
                               f"{name!r} is no interface of node type {nt.name} (known: {', '.join(sorted(have))})"))
        elif rule is not None and not rule.allows(name):
            out.append(Finding("error", "nccl.gloo_socket_ifname",
                               f"{name!r} is not allowed by NCCL_SOCKET_IFNAME={rule.text} ({rule.describe()}): "
                               f"gloo and NCCL's bootstrap would use different networks"))
    gpu_numa = {g.numa_node for g in nt.gpus if g.numa_node is not None}
    if nt.gpus and all(g.minor is None for g in nt.gpus) and (len(gpu_numa) > 1 or nt.sockets > 1):
        out.append(Finding("warning", f"{key}.gpus",
                           f"GPU minor numbers unknown on a node type with {max(len(gpu_numa), nt.sockets)} "
                           f"NUMA nodes / sockets: gres.conf then assumes /dev/nvidia<index> is GPU<index> "
                           f"(false on many AMD hosts, where minors follow another order); record them with "
                           f"`slurmkit topo import --smi-q` or `topo discover`"))
    return out
