"""Turn a merged profile dict (TOML tables) into the :class:`~slurmkit.profile.model.Profile`
tree, checking every key: types, allowed values, cross references (partition -> node type,
nearest NIC -> NIC, spine -> leaf), hostlists, CPU ids within the node. The first problem
raises :class:`ProfileError` naming the file, dotted key and (best effort) line.
"""

from __future__ import annotations

import re

from slurmkit.profile.clock_policy import SETTINGS as CLOCK_POLICY_SETTINGS
from slurmkit.profile.clock_policy import ClockPolicy
from slurmkit.pci import normalise_bus_id
from slurmkit import mig as mig_geometry
from slurmkit.profile.errors import ProfileError
from slurmkit.profile.health import EXPECT_KEYS, check_defaults
from slurmkit.profile.lines import key_line
from slurmkit.profile.model import (AUTODETECT, GPU_ENV_FLAGS, SHARING_FLAGS, Block, Cluster, Fabric, Gpu, GpuGroup,
                                    Health, Leaf, Nccl, Nic, NodeType, Partition, Profile, Report, SlurmNode, Spine,
                                    Submit, slurm_gpu_type)
from slurmkit.profile.nccl import KNOWN_NETS, IfnameRule, socket_ifname_text

LINK_LAYERS = ("InfiniBand", "RoCE", "Ethernet", "EFA")
NIC_ROLES = ("compute", "other")
NCCL_FABRICS = ("infiniband", "roce", "efa", "tcp", "pcie")
HEALTH_MODES = ("enforce", "observe")
BASELINE_XIDS = ("log", "drain")
#: PCIe link widths (lanes) the specification defines; generations NVML reports.
PCIE_WIDTHS = (1, 2, 4, 8, 12, 16, 32)
PCIE_GENS = (1, 2, 3, 4, 5, 6, 7)
CPU_NUMBERINGS = ("linear", "interleaved", "unknown")
TOP_LEVEL = ("cluster", "partitions", "node_types", "fabric", "nccl", "submit", "health", "report",
             "clock_policies", "extends")
_MISSING = object()


#: slurmd kills HealthCheckProgram after this many seconds (a fixed limit in slurmd).
SLURM_HEALTHCHECK_KILL_S = 60


class _Ctx:
    """Where errors point: the file whose text is searched for the key's line."""

    def __init__(self, file: str, text: str):
        self.file, self.text = file, text

    def fail(self, key: str, message: str):
        raise ProfileError(self.file, key_line(self.text, key), message, key)

    def table(self, data, key: str) -> dict:
        if data is None:
            return {}
        if not isinstance(data, dict):
            self.fail(key, f"expected a table, got {_tname(data)}")
        return data

    def tables(self, raw, key: str, shown: str, allowed) -> list[tuple[int, str, dict]]:
        """The entries of the array of tables ``raw`` at ``key`` (``[[shown]]`` in the message
        when it is not an array), each a table with only ``allowed`` keys: ``[(i, its key, table)]``."""
        if not isinstance(raw, list):
            self.fail(key, f"expected an array of tables [[{shown}]]")
        out = []
        for i, item in enumerate(raw):
            k = f"{key}[{i}]"
            item = self.table(item, k)
            self.known(item, k, allowed)
            out.append((i, k, item))
        return out

    def known(self, data: dict, key: str, allowed) -> None:
        for k in data:
            if k not in allowed:
                self.fail(f"{key}.{k}" if key else k,
                          f"unknown key (expected one of: {', '.join(allowed)})")

    def get(self, data: dict, key: str, name: str, kind, default=_MISSING, choices=None,
            minimum=None):
        full = f"{key}.{name}" if key else name
        value = data.get(name, _MISSING)
        if value is _MISSING or value is None and default is not _MISSING:
            if default is _MISSING:
                self.fail(full, "required key is missing")
            return default
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if kind is int and isinstance(value, bool) or not isinstance(value, kind):
            want = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
            self.fail(full, f"expected {_TYPE_WORDS.get(want, want)}, got {_tname(value)} {value!r}")
        if choices is not None and value not in choices:
            self.fail(full, f"{value!r} is not one of: {', '.join(map(str, choices))}")
        if minimum is not None and value < minimum:
            self.fail(full, f"must be >= {minimum}, got {value!r}")
        return value

    def str_list(self, data: dict, key: str, name: str) -> tuple[str, ...]:
        value = data.get(name, [])
        full = f"{key}.{name}"
        if isinstance(value, str):
            return (value,)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.fail(full, f"expected a list of strings, got {value!r}")
        return tuple(value)

    def hostlist(self, expr, key: str) -> tuple[str, ...]:
        from slurmkit import hostlist

        if isinstance(expr, list) and all(isinstance(v, str) for v in expr):
            expr = ",".join(expr)
        if not isinstance(expr, str) or not expr.strip():
            self.fail(key, f"expected a Slurm hostlist expression such as \"n[1-4]\", got {expr!r}")
        try:
            names = hostlist.expand_hostlist(expr)
        except hostlist.BadHostlist as exc:
            self.fail(key, f"bad hostlist {expr!r}: {exc}")
        if not names:
            self.fail(key, f"hostlist {expr!r} names no node")
        return tuple(names)


def _default(cls, name: str):
    """The model's default of field ``name`` of ``cls`` (its one home): a dataclass of the model,
    or a :func:`slurmkit.records.record` such as :class:`~slurmkit.profile.health.Health`."""
    import dataclasses

    from slurmkit import records

    if records.is_record(cls):
        f, missing = next(f for f in records.fields(cls) if f.name == name), records.MISSING
    else:
        f, missing = cls.__dataclass_fields__[name], dataclasses.MISSING
    return f.default_factory() if f.default is missing else f.default


_TYPE_WORDS = {"str": "a string", "int": "an integer", "float": "a number", "bool": "true/false",
               "dict": "a table", "list": "an array"}


def _tname(v) -> str:
    return {str: "string", int: "integer", float: "float", bool: "boolean", dict: "table",
            list: "array"}.get(type(v), type(v).__name__)


def build(data: dict, file: str = "", text: str = "", layers: tuple[str, ...] = ()) -> Profile:
    """Validate merged profile ``data`` (dict as from tomllib, layered) into a :class:`Profile`.
    ``file``/``text``: the site file and its text, for error locations."""
    c = _Ctx(file, text)
    c.known(data, "", TOP_LEVEL)
    cluster = _cluster(c, c.table(data.get("cluster"), "cluster"))
    policies = _clock_policies(c, c.table(data.get("clock_policies"), "clock_policies"))
    node_types = _node_types(c, c.table(data.get("node_types"), "node_types"))
    partitions = _partitions(c, c.table(data.get("partitions"), "partitions"), node_types)
    for kind, table in (("node_types", node_types), ("partitions", partitions)):
        for name, item in table.items():
            if item.clock_policy is not None and item.clock_policy not in policies:
                c.fail(f"{kind}.{name}.clock_policy", f"{item.clock_policy!r} is not a clock policy "
                       f"(known: {', '.join(policies) or 'none: add [clock_policies.<name>]'})")
    fabric = _fabric(c, c.table(data.get("fabric"), "fabric"), partitions)
    return Profile(clock_policies=policies,
        source=str(file), cluster=cluster, partitions=partitions, node_types=node_types,
        fabric=fabric, nccl=_nccl(c, c.table(data.get("nccl"), "nccl"), node_types),
        submit=_submit(c, c.table(data.get("submit"), "submit")),
        health=_health(c, c.table(data.get("health"), "health")),
        report=_report(c, c.table(data.get("report"), "report")), layers=tuple(layers))


def _cluster(c: _Ctx, t: dict) -> Cluster:
    if not t:
        c.fail("cluster", "required table [cluster] is missing")
    c.known(t, "cluster", ("name", "device_dir", "sources"))
    name = c.get(t, "cluster", "name", str)
    if not name.strip() or any(ch.isspace() for ch in name):
        c.fail("cluster.name", f"cluster name must be one word, got {name!r}")
    device_dir = c.get(t, "cluster", "device_dir", str, _default(Cluster, "device_dir"))
    if not device_dir.startswith("/"):
        c.fail("cluster.device_dir", f"must be an absolute path, got {device_dir!r}")
    return Cluster(name=name, device_dir=device_dir.rstrip("/") or "/",
                   sources=c.str_list(t, "cluster", "sources"))


def _partitions(c: _Ctx, t: dict, node_types: dict[str, NodeType]) -> dict[str, Partition]:
    if not t:
        c.fail("partitions", "at least one [partitions.<name>] table is required")
    out = {}
    defaults = []
    type_of: dict[str, tuple[str, str]] = {}  # node -> (node type, partition)
    for name, p in t.items():
        key = f"partitions.{name}"
        p = c.table(p, key)
        c.known(p, key, ("nodes", "node_type", "default", "clock_policy"))
        nt = c.get(p, key, "node_type", str)
        if nt not in node_types:
            c.fail(f"{key}.node_type", f"{nt!r} is not a node type (known: {', '.join(node_types) or 'none'})")
        nodes_expr = p.get("nodes")
        names = c.hostlist(nodes_expr, f"{key}.nodes")
        for n in names:
            prev = type_of.setdefault(n, (nt, name))
            if prev[0] != nt:
                c.fail(f"{key}.nodes", f"node {n} is node type {nt!r} here but {prev[0]!r} in "
                       f"partition {prev[1]!r}: a node has one node type")
        default = c.get(p, key, "default", bool, False)
        if default:
            defaults.append(name)
        out[name] = Partition(name=name, nodes=nodes_expr if isinstance(nodes_expr, str) else ",".join(nodes_expr),
                              node_names=names, node_type=nt, default=default,
                              clock_policy=c.get(p, key, "clock_policy", str, None))
    if len(defaults) > 1:
        c.fail(f"partitions.{defaults[1]}.default",
               f"more than one default partition ({', '.join(defaults)})")
    return out


def _node_types(c: _Ctx, t: dict) -> dict[str, NodeType]:
    if not t:
        c.fail("node_types", "at least one [node_types.<name>] table is required")
    return {name: _node_type(c, name, c.table(nt, f"node_types.{name}")) for name, nt in t.items()}


def _node_type(c: _Ctx, name: str, t: dict) -> NodeType:
    """Node type ``name`` from its table ``t`` (``[node_types.<name>]``); fails (``c.fail``) on
    the first key that is unknown, of the wrong type or out of range, or that contradicts
    another (CPUs, GPU counts, NICs, the model under AutoDetect)."""
    key = f"node_types.{name}"
    c.known(t, key, ("gpu_groups", "gpu_model", "gpu_count", "sockets", "cores_per_socket", "threads_per_core",
                     "cpu_numbering", "memory_mib", "gpu_tdp_w", "p2p", "slurm_node", "gpus", "nics",
                     "pcie_width", "pcie_gen", "sources", "clock_policy", "autodetect", "features",
                     "gres_flags", "cpus_per_gpu", "mem_per_gpu"))
    groups = _gpu_groups(c, key, t)
    sockets = c.get(t, key, "sockets", int, _default(NodeType, "sockets"), minimum=1)
    cores = c.get(t, key, "cores_per_socket", int, _default(NodeType, "cores_per_socket"), minimum=1)
    threads = c.get(t, key, "threads_per_core", int, _default(NodeType, "threads_per_core"), minimum=1)
    numbering = c.get(t, key, "cpu_numbering", str, _default(NodeType, "cpu_numbering"), choices=CPU_NUMBERINGS)
    slurm_node = _slurm_node(c, key, t)
    nics = _nics(c, key, t)
    nic_names = {n.device for n in nics}
    gpus = _gpus(c, key, t, groups, (sockets, cores, threads), nic_names)
    autodetect = c.get(t, key, "autodetect", str, _default(NodeType, "autodetect"), choices=AUTODETECT)
    for i, grp in enumerate(groups):
        if autodetect != "off" and grp.model and grp.nvml_name and not grp.mig \
                and grp.model.lower() not in slurm_gpu_type(grp.nvml_name):
            c.fail(f"{key}.gpu_groups[{i}].model" if "gpu_groups" in t else f"{key}.gpu_model",
                   f"under AutoDetect Slurm keeps a gres.conf Type= only when it is part of the name it "
                   f"detects ({slurm_gpu_type(grp.nvml_name)!r} for {grp.nvml_name!r}; gres_gpu.c "
                   f"_normalize_sys_gres_types), got {grp.model!r}")
    gres_flags = c.str_list(t, key, "gres_flags")
    for f in gres_flags:
        if f not in GPU_ENV_FLAGS + SHARING_FLAGS:
            c.fail(f"{key}.gres_flags", f"{f!r} is not a gres.conf Flags= value slurmkit writes "
                   f"(one of: {', '.join(GPU_ENV_FLAGS + SHARING_FLAGS)})")
    features = c.str_list(t, key, "features")
    for f in features:
        if not f or any(ch.isspace() or ch in ",&|()[]*:" for ch in f):
            c.fail(f"{key}.features", f"{f!r} is not a Slurm node feature (one word, no ',&|()[]*:')")
    return NodeType(name=name, gpu_groups=groups, sockets=sockets,
                    cores_per_socket=cores, threads_per_core=threads, cpu_numbering=numbering,
                    memory_mib=c.get(t, key, "memory_mib", int, None, minimum=0),
                    autodetect=autodetect, gres_flags=gres_flags,
                    features=features,
                    p2p=c.get(t, key, "p2p", bool, _default(NodeType, "p2p")), slurm_node=slurm_node,
                    gpus=tuple(gpus), nics=tuple(nics),
                    pcie_width=c.get(t, key, "pcie_width", int, None, choices=PCIE_WIDTHS),
                    pcie_gen=c.get(t, key, "pcie_gen", int, None, choices=PCIE_GENS),
                    sources=c.str_list(t, key, "sources"),
                    clock_policy=c.get(t, key, "clock_policy", str, None),
                    cpus_per_gpu=c.get(t, key, "cpus_per_gpu", int, None, minimum=1),
                    mem_per_gpu=_slurm_size(c, t, key, "mem_per_gpu"))


#: a Slurm memory size as sbatch's ``--mem`` / ``--mem-per-gpu`` take it: a whole number with an
#: optional unit K, M (the default), G or T (sbatch(1) ``--mem``)
_SLURM_SIZE = re.compile(r"[1-9][0-9]*[KMGT]?")


def _slurm_size(c: _Ctx, t: dict, key: str, name: str) -> str | None:
    """``t[name]`` as a Slurm memory size (``"64G"``; None when absent); fails otherwise."""
    value = c.get(t, key, name, str, None)
    if value is not None and not _SLURM_SIZE.fullmatch(value):
        c.fail(f"{key}.{name}", f"expected a Slurm memory size such as \"64G\" (a whole number > 0 with an "
               f"optional unit K, M, G or T), got {value!r}")
    return value

def _slurm_node(c: _Ctx, key: str, t: dict) -> SlurmNode | None:
    """The node type's ``slurm_node`` table (the CPU layout slurm.conf gives the node), or None;
    its ``cpus`` must be sockets x cores_per_socket x threads_per_core."""
    if "slurm_node" not in t:
        return None
    sk = f"{key}.slurm_node"
    sn = c.table(t["slurm_node"], sk)
    c.known(sn, sk, ("cpus", "sockets", "cores_per_socket", "threads_per_core"))
    slurm_node = SlurmNode(
        cpus=c.get(sn, sk, "cpus", int, minimum=1), sockets=c.get(sn, sk, "sockets", int, minimum=1),
        cores_per_socket=c.get(sn, sk, "cores_per_socket", int, minimum=1),
        threads_per_core=c.get(sn, sk, "threads_per_core", int, 1, minimum=1))
    if slurm_node.sockets * slurm_node.cores_per_socket * slurm_node.threads_per_core != slurm_node.cpus:
        c.fail(f"{sk}.cpus", f"cpus = {slurm_node.cpus} but sockets x cores_per_socket x "
               f"threads_per_core = {slurm_node.sockets * slurm_node.cores_per_socket * slurm_node.threads_per_core}")
    return slurm_node


def _nics(c: _Ctx, key: str, t: dict) -> list[Nic]:
    """The node type's ``[[nics]]``: each device, interface name and PCI address named once."""
    nics = []
    for _, nk, n in c.tables(t.get("nics", []), f"{key}.nics", "...nics",
                             ("device", "link_layer", "rate_gbps", "role", "numa_node", "netdev", "pci")):
        dev = c.get(n, nk, "device", str)
        if any(x.device == dev for x in nics):
            c.fail(f"{nk}.device", f"NIC {dev!r} is listed twice")
        netdev = c.get(n, nk, "netdev", str, _default(Nic, "netdev"))
        if netdev and any(ch.isspace() or ch in "/,:=^" for ch in netdev):
            c.fail(f"{nk}.netdev", f"{netdev!r} is not a Linux interface name")
        if netdev and any(netdev in (x.netdev, x.device) for x in nics):
            c.fail(f"{nk}.netdev", f"interface {netdev!r} is named by two NICs")
        pci = c.get(n, nk, "pci", str, None)
        if pci is not None:
            try:
                pci = normalise_bus_id(pci)
            except ValueError:
                c.fail(f"{nk}.pci", f"expected a PCI address like \"0000:0c:00.0\" "
                       f"(/sys/class/infiniband/<hca>/device), got {pci!r}")
            twin = next((x.device for x in nics if x.pci == pci), None)
            if twin is not None:
                c.fail(f"{nk}.pci", f"PCI address {pci} is also NIC {twin!r}'s")
        nics.append(Nic(device=dev, link_layer=c.get(n, nk, "link_layer", str, choices=LINK_LAYERS),
                        rate_gbps=c.get(n, nk, "rate_gbps", float, _default(Nic, "rate_gbps"), minimum=0),
                        role=c.get(n, nk, "role", str, _default(Nic, "role"), choices=NIC_ROLES),
                        numa_node=c.get(n, nk, "numa_node", int, None, minimum=0), netdev=netdev, pci=pci))
    return nics


def _gpus(c: _Ctx, key: str, t: dict, groups, layout: tuple[int, int, int], nic_names: set[str]) -> list[Gpu]:
    """The node type's ``[[gpus]]``, in nvidia-smi order: CPUs inside the node's ``layout``
    (sockets, cores per socket, threads per core), nearest NICs among ``nic_names``, minor
    numbers for every GPU or none and distinct, as many as the GPU groups hold."""
    sockets, cores, threads = layout
    ncpu = sockets * cores * threads
    gpu_count = sum(g.count for g in groups)
    gpus = []
    for i, gk, g in c.tables(t.get("gpus", []), f"{key}.gpus", "...gpus",
                             ("index", "cpus", "numa_node", "nearest_nics", "links", "gpu_numa_id", "minor",
                              "pcie_width", "mig_caps")):
        index = c.get(g, gk, "index", int, i, minimum=0)
        if index != i:
            c.fail(f"{gk}.index", f"GPUs must be listed in nvidia-smi order: expected index {i}, got {index}"
                   + (" (a [[gpus]] list replaces the one of the profile it extends whole: list every GPU,"
                      " not only the one that differs)" if "extends" in c.text else ""))
        cpus = g.get("cpus", [])
        if not isinstance(cpus, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in cpus):
            c.fail(f"{gk}.cpus", f"expected a list of OS CPU ids, got {cpus!r}")
        bad = [x for x in cpus if x < 0 or x >= ncpu]
        if bad:
            c.fail(f"{gk}.cpus", f"CPU {bad[0]} is outside the node's {ncpu} CPUs "
                   f"({sockets} sockets x {cores} cores x {threads} threads)")
        nearest = c.str_list(g, gk, "nearest_nics")
        for dev in nearest:
            if dev not in nic_names:
                c.fail(f"{gk}.nearest_nics", f"{dev!r} is not one of the node type's NICs "
                       f"({', '.join(sorted(nic_names)) or 'none'})")
        links = c.table(g.get("links", {}), f"{gk}.links")
        for lk, lv in links.items():
            if not isinstance(lv, str):
                c.fail(f"{gk}.links.{lk}", f"expected a raw nvidia-smi token such as \"NV12\" or \"SYS\", got {lv!r}")
        gpus.append(Gpu(index=index, cpus=tuple(sorted(set(cpus))),
                        numa_node=c.get(g, gk, "numa_node", int, None, minimum=0),
                        nearest_nics=nearest, links=dict(links),
                        gpu_numa_id=c.get(g, gk, "gpu_numa_id", int, None, minimum=0),
                        minor=c.get(g, gk, "minor", int, None, minimum=0),
                        pcie_width=c.get(g, gk, "pcie_width", int, None, choices=PCIE_WIDTHS),
                        mig_caps=_mig_caps(c, gk, g, groups, index)))
    minors = [g.minor for g in gpus if g.minor is not None]
    if len(set(minors)) != len(minors):
        c.fail(f"{key}.gpus", f"two GPUs have the same minor number ({sorted(minors)})")
    if minors and len(minors) != len(gpus):
        c.fail(f"{key}.gpus", "minor is given for some GPUs only: record it for every GPU or none")
    if gpus and len(gpus) != gpu_count:
        c.fail(f"{key}.gpu_count" if "gpu_count" in t else f"{key}.gpus",
               f"gpu_count = {gpu_count} but {len(gpus)} [[gpus]] tables are listed" if "gpu_count" in t else
               f"the GPU groups hold {gpu_count} GPUs but {len(gpus)} [[gpus]] tables are listed")
    for g in gpus:
        for lk in g.links:
            if lk.startswith("GPU") and lk[3:].isdigit() and int(lk[3:]) >= gpu_count:
                c.fail(f"{key}.gpus[{g.index}].links.{lk}", f"there are only {gpu_count} GPUs")
    return gpus



#: A MIG profile as NVML names it (``1g.10gb``, ``1c.2g.20gb``, ``1g.10gb+me``).
_MIG_PROFILE = re.compile(r"(\d+c\.)?\d+g\.\d+gb(\+[a-z]+)?")
_GRES_TYPE_BAD = " :,=\t()"


def _gres_type(c: _Ctx, key: str, value) -> str:
    if not isinstance(value, str) or not value or any(ch in value for ch in _GRES_TYPE_BAD):
        c.fail(key, f"gres type must be one word without ':', ',' or '=', got {value!r}")
    return value


def _gpu_groups(c: _Ctx, key: str, t: dict) -> tuple[GpuGroup, ...]:
    """The node type's GPU groups: ``[[gpu_groups]]``, or the one group of the older
    ``gpu_model`` / ``gpu_count`` / ``gpu_tdp_w`` keys (``gpu_model`` absent: untyped), or none
    (CPU-only: no GPU key, or ``gpu_count = 0``). Group ``indexes`` default to consecutive
    nvidia-smi indexes in group order; together they must be 0..N-1, each once."""
    old = [k for k in ("gpu_model", "gpu_count", "gpu_tdp_w") if k in t]
    if "gpu_groups" in t:
        if old:
            c.fail(f"{key}.{old[0]}", "give either [[gpu_groups]] or gpu_model / gpu_count / gpu_tdp_w "
                   "(the one-group form), not both")
        groups = c.tables(t["gpu_groups"], f"{key}.gpu_groups", "...gpu_groups",
                          ("model", "count", "indexes", "tdp_w", "nvml_name", "mig", "shards", "mps",
                           "mig_type", "mig_files"))
    elif old:
        count = c.get(t, key, "gpu_count", int, minimum=0)
        if count == 0:
            if "gpu_model" in t or "gpu_tdp_w" in t:
                c.fail(f"{key}.gpu_count", "gpu_count = 0 (CPU-only) but gpu_model / gpu_tdp_w is given")
            return ()
        model = _gres_type(c, f"{key}.gpu_model", t["gpu_model"]) if "gpu_model" in t else None
        return (GpuGroup(model=model, count=count, indexes=tuple(range(count)),
                         tdp_w=c.get(t, key, "gpu_tdp_w", float, None, minimum=0)),)
    else:
        return ()
    out: list[GpuGroup] = []
    start = 0
    for i, gk, g in groups:
        model = _gres_type(c, f"{gk}.model", g["model"]) if "model" in g else None
        count = c.get(g, gk, "count", int, minimum=1)
        indexes = g.get("indexes", list(range(start, start + count)))
        if (not isinstance(indexes, list) or len(indexes) != count
                or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in indexes)):
            c.fail(f"{gk}.indexes", f"expected {count} nvidia-smi GPU indexes (count = {count}), got {indexes!r}")
        start += count
        mig = c.table(g.get("mig", {}), f"{gk}.mig")
        for prof, n in mig.items():
            if not _MIG_PROFILE.fullmatch(prof):
                c.fail(f"{gk}.mig.{prof}", f"{prof!r} is not a MIG profile as NVML names it (e.g. \"1g.10gb\", "
                       "\"3g.40gb\"; nvidia-smi mig -lgip)")
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                c.fail(f"{gk}.mig.{prof}", f"expected the number of {prof} instances on each GPU (>= 1), got {n!r}")
        nvml_name = c.get(g, gk, "nvml_name", str, "")
        if mig and not nvml_name:
            c.fail(f"{gk}.nvml_name", "a MIG group needs the GPU's NVML name (nvidia-smi -L, e.g. "
                   "\"NVIDIA A100-SXM4-80GB\"): Slurm names MIG types from it (nvidia_a100_1g.10gb)")
        layout = {k: int(v) for k, v in mig.items()}
        geometry = mig_geometry.model_for(nvml_name) if mig else None
        if geometry is not None:
            try:
                geometry.check(layout)
            except mig_geometry.MigLayoutError as exc:
                c.fail(f"{gk}.mig", f"{nvml_name}: {exc} (NVIDIA MIG user guide, nvidia-smi mig -lgip / -lgipp)")
        mig_type = c.get(g, gk, "mig_type", str, "")
        mig_files = c.get(g, gk, "mig_files", str, "")
        for k, v, keys in (("mig_type", mig_type, ("profile",)), ("mig_files", mig_files, ("profile", "i"))):
            if v and not mig:
                c.fail(f"{gk}.{k}", f"{k} is for a MIG group (a [[gpu_groups]] with mig = {{...}})")
            if v:
                try:
                    v.format(**{x: "x" for x in keys})
                except (KeyError, IndexError, ValueError) as exc:
                    c.fail(f"{gk}.{k}", f"{v!r}: a pattern with {' and '.join('{' + x + '}' for x in keys)} only "
                           f"({exc!r})")
                if k == "mig_type" and "{profile}" not in v:
                    c.fail(f"{gk}.{k}", f"{v!r} must name {{profile}}: each MIG profile is its own gres type")
        if mig_files and "{i}" not in mig_files:
            c.fail(f"{gk}.mig_files", f"{mig_files!r} must name {{i}}: each instance is its own device file")
        if mig_files and len(mig) > 1 and "{profile}" not in mig_files:
            c.fail(f"{gk}.mig_files", f"{mig_files!r} must name {{profile}}: with {len(mig)} profiles, "
                   "instances of each would get the same device files")
        if mig_files and not mig_files.startswith("/"):
            c.fail(f"{gk}.mig_files", f"{mig_files!r}: gres.conf File= is an absolute path (/dev/...)")
        if mig_files and t.get("autodetect", "off") != "off":
            c.fail(f"{gk}.mig_files", f"mig_files spells out each instance's File=, autodetect = "
                   f"{t.get('autodetect')!r} lets Slurm find them: give one of the two")
        shards = c.get(g, gk, "shards", int, 0, minimum=0)
        mps = c.get(g, gk, "mps", int, 0, minimum=0)
        if mig and (shards or mps):
            c.fail(f"{gk}.{'shards' if shards else 'mps'}", "Slurm does not share MIG instances as shards or MPS")
        group = GpuGroup(model=model, count=count, indexes=tuple(indexes),
                         tdp_w=c.get(g, gk, "tdp_w", float, None, minimum=0), nvml_name=nvml_name,
                         mig=layout, shards=shards, mps=mps, mig_type=mig_type, mig_files=mig_files)
        kinds = {k for k, _ in group.gres_types()}
        twin = next((x for x in out if kinds & {k for k, _ in x.gres_types()}), None)
        if twin is not None:
            kind = next(iter(kinds & {k for k, _ in twin.gres_types()}))
            c.fail(f"{gk}.model" if not mig else f"{gk}.mig", f"two GPU groups give gres type {kind!r}: a node's "
                   "GPUs of one type are one group" if kind else "two untyped GPU groups: give their count as one group")
        out.append(group)
    total = sum(g.count for g in out)
    seen = sorted(x for g in out for x in g.indexes)
    if seen != list(range(total)):
        dup = next((x for x in seen if seen.count(x) > 1), None)
        c.fail(f"{key}.gpu_groups", f"GPU{dup} is in two groups" if dup is not None else
               f"the groups' indexes {seen} are not 0..{total - 1} (nvidia-smi indexes of the node's {total} GPUs)")
    return tuple(out)


def _mig_caps(c: _Ctx, gk: str, g: dict, groups, index: int) -> tuple[tuple[int, int], ...]:
    """``gpus[].mig_caps``: ``[[gi_minor, ci_minor], ...]``, one pair per MIG instance of the
    GPU's group (its ``mig`` table's instances, in order); () when absent."""
    raw = g.get("mig_caps")
    if raw is None:
        return ()
    group = next((x for x in groups if index in x.indexes), None)
    if group is None or not group.mig:
        c.fail(f"{gk}.mig_caps", f"GPU{index} is in no MIG group (a [[gpu_groups]] with mig = {{...}})")
    want = sum(group.mig.values())
    if (not isinstance(raw, list) or len(raw) != want
            or not all(isinstance(p, list) and len(p) == 2 and all(isinstance(x, int) and not isinstance(x, bool)
                                                                   and x >= 0 for x in p) for p in raw)):
        c.fail(f"{gk}.mig_caps", f"expected {want} [GI minor, CI minor] pairs (one per MIG instance: "
               f"{', '.join(f'{n}x {p}' for p, n in group.mig.items())}; /proc/driver/nvidia-caps/mig-minors), "
               f"got {raw!r}")
    return tuple((a, b) for a, b in raw)


def _clock_policies(c: _Ctx, t: dict) -> dict[str, ClockPolicy]:
    """``[clock_policies.<name>]`` tables -> {name: ClockPolicy}: known keys only, at least one
    setting, application clocks both or neither, clock ranges ``[min, max]`` of positive MHz with
    min <= max, a power limit of positive watts."""
    out = {}
    for name, p in t.items():
        key = f"clock_policies.{name}"
        p = c.table(p, key)
        c.known(p, key, CLOCK_POLICY_SETTINGS)
        if not p:
            c.fail(key, f"a clock policy sets at least one of: {', '.join(CLOCK_POLICY_SETTINGS)}")
        mem = c.get(p, key, "app_clock_mem_mhz", int, None, minimum=1)
        graphics = c.get(p, key, "app_clock_graphics_mhz", int, None, minimum=1)
        if (mem is None) != (graphics is None):
            missing = "app_clock_graphics_mhz" if graphics is None else "app_clock_mem_mhz"
            c.fail(f"{key}.{'app_clock_mem_mhz' if graphics is None else 'app_clock_graphics_mhz'}",
                   f"{missing} is missing: nvmlDeviceSetApplicationsClocks sets the memory and "
                   f"graphics clocks together, give both")
        power = p.get("power_limit_w")  # kept as written (int or float), as [health] power_limit_w
        if power is not None and (isinstance(power, bool) or not isinstance(power, (int, float)) or power <= 0):
            c.fail(f"{key}.power_limit_w", f"expected a number of watts > 0, got {_tname(power)} {power!r}")
        out[name] = ClockPolicy(name=name, app_clock_mem_mhz=mem, app_clock_graphics_mhz=graphics,
                                locked_clocks_mhz=_mhz_range(c, p, key, "locked_clocks_mhz"),
                                locked_mem_clocks_mhz=_mhz_range(c, p, key, "locked_mem_clocks_mhz"),
                                power_limit_w=power)
    return out


def _mhz_range(c: _Ctx, t: dict, key: str, name: str) -> tuple[int, int] | None:
    """``[min, max]`` (MHz) at ``key.name`` as a tuple; None when absent."""
    v = t.get(name)
    if v is None:
        return None
    full = f"{key}.{name}"
    if (not isinstance(v, list) or len(v) != 2
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in v)):
        c.fail(full, f"expected [min, max] in MHz (two integers, e.g. [1215, 1410]), got {v!r}")
    lo, hi = v
    if lo < 1 or hi < 1:
        c.fail(full, f"clocks must be positive MHz, got {v!r}")
    if lo > hi:
        c.fail(full, f"min {lo} MHz is above max {hi} MHz")
    return (lo, hi)


def _fabric(c: _Ctx, t: dict, partitions: dict[str, Partition]) -> Fabric:
    c.known(t, "fabric", ("leaves", "spines", "blocks"))
    all_nodes = {n for p in partitions.values() for n in p.node_names}

    def node_sets(name: str, cls):
        out = []
        for _, k, s in c.tables(t.get(name, []), f"fabric.{name}", f"fabric.{name}", ("name", "nodes")):
            nm = c.get(s, k, "name", str)
            names = c.hostlist(s.get("nodes"), f"{k}.nodes")
            stray = [n for n in names if n not in all_nodes]
            if stray:
                c.fail(f"{k}.nodes", f"node {stray[0]} is in no partition")
            for prev in out:
                if prev.name == nm:
                    c.fail(f"{k}.name", f"{name[:-1] if name != 'leaves' else 'leaf'} {nm!r} is listed twice")
                both = set(prev.node_names) & set(names)
                if both:
                    c.fail(f"{k}.nodes", f"node {sorted(both)[0]} is also under {prev.name!r}")
            out.append(cls(name=nm, nodes=s["nodes"] if isinstance(s["nodes"], str) else ",".join(s["nodes"]),
                           node_names=names))
        return tuple(out)

    leaves = node_sets("leaves", Leaf)
    blocks = node_sets("blocks", Block)
    if leaves and blocks:
        c.fail("fabric.blocks", "use either a tree (leaves/spines) or blocks, not both")
    spines = []
    known = {leaf.name for leaf in leaves}
    for _, k, s in c.tables(t.get("spines", []), "fabric.spines", "fabric.spines", ("name", "switches")):
        nm = c.get(s, k, "name", str)
        sw = c.str_list(s, k, "switches")
        if not sw:
            c.fail(f"{k}.switches", "a spine needs at least one switch under it")
        for x in sw:
            if x not in known:
                c.fail(f"{k}.switches", f"{x!r} is not a leaf or an earlier spine ({', '.join(sorted(known))})")
        if nm in known:
            c.fail(f"{k}.name", f"switch name {nm!r} is already used")
        known.add(nm)
        spines.append(Spine(name=nm, switches=sw))
    if spines and not leaves:
        c.fail("fabric.spines", "spines need [[fabric.leaves]] under them")
    return Fabric(leaves=leaves, spines=tuple(spines), blocks=blocks)


#: A compute NIC's link layer -> the fabric NCCL runs over it (``nccl.fabric`` left unset).
_FABRIC_OF_LINK_LAYER = {"InfiniBand": "infiniband", "RoCE": "roce", "EFA": "efa"}


def default_fabric(node_types: dict[str, NodeType]) -> str:
    """``nccl.fabric`` when the profile does not set it: the fabric of the RDMA link layer that
    the compute NICs of the GPU node types have (``node_types.<t>.nics[].link_layer``:
    InfiniBand -> ``infiniband``, RoCE -> ``roce``, EFA -> ``efa``); ``pcie`` (no network
    variables: NCCL picks its transport) when they have none, or more than one (say which in
    ``[nccl] fabric``: the one validation then checks it against the NICs)."""
    layers = {_FABRIC_OF_LINK_LAYER[nic.link_layer] for nt in node_types.values() if nt.gpu_count
              for nic in nt.nics if nic.role == "compute" and nic.link_layer in _FABRIC_OF_LINK_LAYER}
    return layers.pop() if len(layers) == 1 else "pcie"


def _nccl(c: _Ctx, t: dict, node_types: dict[str, NodeType]) -> Nccl:
    k = "nccl"
    c.known(t, k, ("fabric", "version", "gdr_level", "gid_index", "socket_ifname", "gloo_socket_ifname",
                   "net_plugin", "collnet", "ib_tc", "ib_sl", "efa_plugin_version", "extra"))
    extra = c.table(t.get("extra", {}), "nccl.extra")
    for ek, ev in extra.items():
        if not isinstance(ev, (str, int, float)) or isinstance(ev, bool):
            c.fail(f"nccl.extra.{ek}", f"expected a string or number, got {ev!r}")
    ifname = t.get("socket_ifname", "")
    if not isinstance(ifname, str):
        ifname = socket_ifname_text(c.str_list(t, k, "socket_ifname"))
    if ifname:
        try:
            IfnameRule.parse(ifname)
        except ValueError as exc:
            c.fail("nccl.socket_ifname", f"not NCCL_SOCKET_IFNAME syntax: {exc}")
    gloo = c.get(t, k, "gloo_socket_ifname", str, _default(Nccl, "gloo_socket_ifname"))
    for name in filter(None, gloo.split(",")) if gloo else ():
        if any(ch.isspace() or ch in "/:=^" for ch in name):
            c.fail("nccl.gloo_socket_ifname", f"{name!r} is not an interface name: gloo takes exact "
                   "names, comma-separated (no NCCL prefixes, '^' or '=')")
    net = c.get(t, k, "net_plugin", str, _default(Nccl, "net_plugin"))
    if net and net not in KNOWN_NETS:
        c.fail("nccl.net_plugin", f"{net!r} is no NCCL network name slurmkit knows (NCCL_NET is matched "
               f"by name: {', '.join(f'{n!r} = {w}' for n, w in KNOWN_NETS.items())})")
    return Nccl(fabric=c.get(t, k, "fabric", str, default_fabric(node_types), choices=NCCL_FABRICS),
                version=c.get(t, k, "version", str, _default(Nccl, "version")),
                gdr_level=c.get(t, k, "gdr_level", str, _default(Nccl, "gdr_level")),
                gid_index=c.get(t, k, "gid_index", int, None, minimum=0),
                socket_ifname=ifname, gloo_socket_ifname=gloo, net_plugin=net,
                collnet=c.get(t, k, "collnet", bool, _default(Nccl, "collnet")),
                ib_tc=_bounded(c, t, k, "ib_tc", 255), ib_sl=_bounded(c, t, k, "ib_sl", 15),
                efa_plugin_version=c.get(t, k, "efa_plugin_version", str, _default(Nccl, "efa_plugin_version")),
                extra={ek: str(ev) for ek, ev in extra.items()})


def _bounded(c: _Ctx, t: dict, key: str, name: str, maximum: int) -> int | None:
    """An integer 0..maximum at ``key.name`` (None when absent)."""
    v = c.get(t, key, name, int, None, minimum=0)
    if v is not None and v > maximum:
        c.fail(f"{key}.{name}", f"must be 0..{maximum}, got {v}")
    return v


def _submit(c: _Ctx, t: dict) -> Submit:
    k = "submit"
    c.known(t, k, ("container", "switch_wait", "rendezvous_interface", "cpus_per_gpu", "max_restarts",
                   "checkpoint_signal", "retry_switch_wait", "node_fault_reasons", "node_fault_wait_s"))
    reasons = c.str_list(t, k, "node_fault_reasons") if "node_fault_reasons" in t else \
        _default(Submit, "node_fault_reasons")
    for r in reasons:
        if not r.strip() or any(ch in r for ch in "\n\r\0"):
            c.fail(f"{k}.node_fault_reasons", f"expected non-empty one-line reason prefixes such as \"NHC:\", got {r!r}")
    return Submit(container=c.get(t, k, "container", bool, _default(Submit, "container")),
                  switch_wait=c.get(t, k, "switch_wait", str, _default(Submit, "switch_wait")),
                  rendezvous_interface=c.get(t, k, "rendezvous_interface", str, _default(Submit, "rendezvous_interface")),
                  cpus_per_gpu=c.get(t, k, "cpus_per_gpu", int, _default(Submit, "cpus_per_gpu"), minimum=0),
                  max_restarts=c.get(t, k, "max_restarts", int, _default(Submit, "max_restarts"), minimum=0),
                  checkpoint_signal=c.get(t, k, "checkpoint_signal", str, _default(Submit, "checkpoint_signal")),
                  retry_switch_wait=c.get(t, k, "retry_switch_wait", str, _default(Submit, "retry_switch_wait")),
                  node_fault_reasons=tuple(reasons),
                  node_fault_wait_s=_bounded(c, t, k, "node_fault_wait_s", 3600) or 0)


def _health(c: _Ctx, t: dict) -> Health:
    k = "health"
    c.known(t, k, ("mode", "deadline_s", "per_call_deadline_s", *EXPECT_KEYS, "ib_judge_other_nics",
                   "active_check", "dcgm_diag_level", "active_timeout_s", "active_interval_s",
                   "nccl_busbw_min_gbps", "baseline_xids", "thresholds",
                   "checks"))
    known = check_defaults()  # checks.toml: check ids, thresholds
    thresholds = c.table(t.get("thresholds"), "health.thresholds")
    for name, v in thresholds.items():
        if name not in known["thresholds"]:
            c.fail(f"health.thresholds.{name}", f"unknown threshold (known: {', '.join(known['thresholds'])})")
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            c.fail(f"health.thresholds.{name}", f"expected a number, got {_tname(v)} {v!r}")
    checks = c.table(t.get("checks"), "health.checks")
    for cid, on in checks.items():
        if cid not in known["checks"]:
            c.fail(f"health.checks.{cid}", f"unknown check id (known: {', '.join(known['checks'])})")
        if not isinstance(on, bool):
            c.fail(f"health.checks.{cid}", f"expected true/false, got {_tname(on)} {on!r}")
    power = t.get("power_limit_w")  # kept as written (int or float): messages show it so
    if power is not None and (isinstance(power, bool) or not isinstance(power, (int, float)) or power < 0):
        c.fail("health.power_limit_w", f"expected a number of watts >= 0, got {_tname(power)} {power!r}")
    active_timeout = c.get(t, k, "active_timeout_s", float, _default(Health, "active_timeout_s"), minimum=1)
    if active_timeout >= SLURM_HEALTHCHECK_KILL_S:
        c.fail("health.active_timeout_s",
               f"must be below {SLURM_HEALTHCHECK_KILL_S} s, got {active_timeout!r}: slurmd kills "
               f"HealthCheckProgram after {SLURM_HEALTHCHECK_KILL_S} s, and the diag must finish (or be "
               f"killed by slurmkit) before that")
    return Health(mode=c.get(t, k, "mode", str, _default(Health, "mode"), choices=HEALTH_MODES),
                  deadline_s=c.get(t, k, "deadline_s", float, _default(Health, "deadline_s"), minimum=0),
                  per_call_deadline_s=c.get(t, k, "per_call_deadline_s", float,
                                            _default(Health, "per_call_deadline_s"), minimum=0),
                  expected_gpu_count=c.get(t, k, "expected_gpu_count", int, None, minimum=0),
                  driver_version=c.get(t, k, "driver_version", str, None),
                  vbios_version=c.get(t, k, "vbios_version", str, None),
                  app_clock_graphics_mhz=c.get(t, k, "app_clock_graphics_mhz", int, None, minimum=0),
                  app_clock_mem_mhz=c.get(t, k, "app_clock_mem_mhz", int, None, minimum=0),
                  power_limit_w=power, mig=c.get(t, k, "mig", bool, None),
                  nvlink_active_links=c.get(t, k, "nvlink_active_links", int, None, minimum=0),
                  fabric_manager=c.get(t, k, "fabric_manager", bool, None),
                  gpudirect_rdma=c.get(t, k, "gpudirect_rdma", bool, None),
                  ib_judge_other_nics=c.get(t, k, "ib_judge_other_nics", bool,
                                            _default(Health, "ib_judge_other_nics")),
                  active_check=c.get(t, k, "active_check", bool, _default(Health, "active_check")),
                  dcgm_diag_level=c.get(t, k, "dcgm_diag_level", int, _default(Health, "dcgm_diag_level"),
                                        choices=(1, 2, 3, 4)),
                  active_timeout_s=active_timeout,
                  nccl_busbw_min_gbps=c.get(t, k, "nccl_busbw_min_gbps", float, None, minimum=0),
                  active_interval_s=c.get(t, k, "active_interval_s", float, _default(Health, "active_interval_s"),
                                          minimum=0),
                  baseline_xids=c.get(t, k, "baseline_xids", str, _default(Health, "baseline_xids"),
                                      choices=BASELINE_XIDS),
                  thresholds=dict(thresholds), checks=dict(checks))


def _report(c: _Ctx, t: dict) -> Report:
    k = "report"
    c.known(t, k, ("pue", "carbon_g_per_kwh", "price_per_kwh", "price_per_gpu_hour", "currency"))
    pue = c.get(t, k, "pue", float, None)
    if pue is not None and pue < 1.0:
        c.fail("report.pue", f"PUE is facility power / IT power and cannot be below 1.0, got {pue}")
    return Report(pue=pue, carbon_g_per_kwh=c.get(t, k, "carbon_g_per_kwh", float, None, minimum=0),
                  price_per_kwh=c.get(t, k, "price_per_kwh", float, None, minimum=0),
                  price_per_gpu_hour=c.get(t, k, "price_per_gpu_hour", float, None, minimum=0),
                  currency=c.get(t, k, "currency", str, None))
