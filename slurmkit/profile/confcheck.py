"""A cluster's own slurm.conf / gres.conf checked against its site profile (``slurmkit site check
--slurm-conf FILE [--gres-conf FILE]``).

Pure functions over files parsed by :mod:`slurmkit.slurm.conf` (the one Slurm config parser:
``Include``, keys in any case such as ``Nodename=``, tabs, continuation lines); hostlists
(``n[1-4]``, ``/dev/nvidia[0-3]``) are expanded with :mod:`slurmkit.hostlist`. Each
:class:`Disagreement` names the file and line, the nodes, what differs and what Slurm does
about it, quoting the message Slurm prints (SchedMD/slurm, commit 284c3b95f08a):

- ``fatal: Duplicated NodeName %s in the config file`` (src/common/read_config.c);
- ``fatal: gres.conf duplicate records for %s`` and ``some records have "File" / "Type="
  specification while others do not`` (src/interfaces/gres.c);
- ``A line in gres.conf for GRES %s has %d more configured than expected in slurm.conf.
  Ignoring extra GRES.`` (src/interfaces/gres.c): gres.conf types beside an untyped slurm.conf;
- ``%s count reported lower than configured (%d < %d)`` (src/interfaces/gres.c): slurmctld
  sets the node INVALID_REG / drained;
- ``Discarding the following config-only GPU due to lack of File specification``
  (src/plugins/gres/gpu/gres_gpu.c);
- ``Low socket*core*thread count`` / ``Low RealMemory`` (src/slurmctld/node_mgr.c).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from slurmkit.hostlist import BadHostlist, collect_hostlist, expand_hostlist
from slurmkit.profile.slurmconf import gres_lines, node_gres, node_type_nodes, slurm_node_layout
from slurmkit.slurm.conf import ConfError, entries_in_order, find_effective, key_value_lines, parse
from slurmkit.slurm.gres_conf import GresConfRecord
from slurmkit.slurm import gres as gres_spec
from slurmkit.slurm import gres_conf
from slurmkit.topology.cores import format_ranges, parse_ranges


@dataclass(frozen=True)
class Disagreement:
    """One disagreement: ``file`` and ``line`` (1-based; 0 when the file lacks something),
    ``nodes`` (hostlist expression of the nodes concerned; "" for the whole file), ``what``
    (the difference, with both values), ``slurm`` (what Slurm does about it)."""

    file: str
    line: int
    nodes: str
    what: str
    slurm: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.nodes + ': ' if self.nodes else ''}{self.what} -> {self.slurm}"

    def to_json(self) -> dict:
        return {"file": self.file, "line": self.line, "nodes": self.nodes, "what": self.what,
                "slurm": self.slurm}


@dataclass
class SlurmNode:
    """A node as slurm.conf defines it: ``keys`` (lower-cased key -> value, ``NodeName=DEFAULT``
    values filled in), ``file``, ``line``."""

    name: str
    keys: dict
    file: str
    line: int


#: The gres names a site profile describes; a slurm.conf's other gres are not compared with it.
PROFILE_GRES = ("gpu", "shard", "mps")

def _expand(expr: str, file: str, line: int, what: str) -> list[str]:
    try:
        return expand_hostlist(expr)
    except BadHostlist as exc:
        raise ConfError(file, line, f"bad {what} {expr!r}: {exc}") from None


def _entries(tree):
    """``(file, entry)`` of every Key=Value line of a :func:`slurmkit.slurm.conf.load_tree`
    result, in Slurm's reading order (``Include`` expanded in place)."""
    for conf, e in entries_in_order(tree):
        yield str(conf.path), e


def slurm_nodes(tree) -> tuple[dict[str, SlurmNode], list[Disagreement]]:
    """The nodes of a slurm.conf tree, by name, and its duplicate ``NodeName=`` definitions
    (``fatal: Duplicated NodeName``). ``NodeName=DEFAULT`` values apply to the lines after
    them. Raises :class:`~slurmkit.slurm.conf.ConfError` for a hostlist that does not parse."""
    nodes: dict[str, SlurmNode] = {}
    dups: list[Disagreement] = []
    defaults: dict = {}
    for file, e in _entries(tree):
        if e.first_key != "nodename":
            continue
        keys = {k.lower(): v for k, v in e.pairs}
        expr = keys.pop("nodename")
        if expr.upper() == "DEFAULT":
            defaults.update(keys)
            continue
        for n in _expand(expr, file, e.lineno, "NodeName"):
            if n in nodes:
                first = nodes[n]
                dups.append(Disagreement(file, e.lineno, n, f"NodeName {n} is defined again (first at "
                                         f"{first.file}:{first.line})",
                                         f"slurmctld and slurmd stop: 'fatal: Duplicated NodeName {n} in the config file'"))
                continue
            nodes[n] = SlurmNode(n, {**defaults, **keys}, file, e.lineno)
    return nodes, dups


def gres_records(tree) -> tuple[list[GresConfRecord], dict[str | None, str]]:
    """The ``Name=`` lines of a gres.conf tree (:func:`slurmkit.slurm.gres_conf.records` over
    :func:`slurmkit.slurm.conf.key_value_lines`: ``File=`` ranges and ``NodeName=`` hostlists
    expanded) and its ``AutoDetect=`` settings (``{None: global value, node: node-specific
    value}``). Raises :class:`~slurmkit.slurm.gres_conf.GresConfError` for a hostlist, range or
    count that does not parse."""
    records: list[GresConfRecord] = []
    auto: dict[str | None, str] = {}
    for r in gres_conf.records(key_value_lines(tree)):
        if r.autodetect is not None:
            for n in r.nodes or (None,):
                auto[n] = r.autodetect
        if r.name is not None:
            records.append(r)
    return records, auto


def _gres_text(counts: dict) -> str:
    return ",".join(f"{n}:{t}:{c}" if t else f"{n}:{c}" for (n, t), c in sorted(counts.items(), key=str)) or "(none)"


def _layout(node: SlurmNode) -> dict:
    """Sockets / CoresPerSocket / ThreadsPerCore / CPUs / RealMemory slurm.conf gives (ints;
    absent keys left out). ``Sockets`` is Boards x SocketsPerBoard when given that way."""
    k = node.keys

    def num(key: str) -> int:
        try:
            return int(k[key])
        except ValueError:
            raise ConfError(node.file, node.line, f"NodeName={node.name}: {_KEY_NAMES[key]}: expected a whole "
                            f"number, found {k[key]!r}") from None

    out = {}
    if "socketsperboard" in k:
        out["sockets"] = num("socketsperboard") * (num("boards") if "boards" in k else 1)
    elif "sockets" in k:
        out["sockets"] = num("sockets")
    for key, name in (("corespersocket", "cores_per_socket"), ("threadspercore", "threads_per_core"),
                      ("cpus", "cpus"), ("procs", "cpus"), ("realmemory", "memory_mib")):
        if key in k:
            out.setdefault(name, num(key))
    return out


#: slurm.conf(5)'s spelling of the node keys :func:`_layout` reads (for error messages).
_KEY_NAMES = {"socketsperboard": "SocketsPerBoard", "boards": "Boards", "sockets": "Sockets",
              "corespersocket": "CoresPerSocket", "threadspercore": "ThreadsPerCore", "cpus": "CPUs",
              "procs": "Procs", "realmemory": "RealMemory"}


def crosscheck(profile, slurm_tree=None, gres_tree=None) -> list[Disagreement]:
    """Every disagreement between ``profile`` (a loaded Profile) and a cluster's slurm.conf
    (``slurm_tree``) and/or gres.conf (``gres_tree``), each a :func:`~slurmkit.slurm.conf.load_tree` result or None.
    Nodes with the same disagreement on the same line are reported once, as a hostlist.
    Raises :class:`~slurmkit.slurm.conf.ConfError` for a line that cannot be read."""
    out: list[Disagreement] = []
    want = {n: profile.node_types[t] for t, names in node_type_nodes(profile).items() for n in names}
    conf_nodes: dict[str, SlurmNode] = {}
    if slurm_tree is not None:
        conf_nodes, dups = slurm_nodes(slurm_tree)
        out += dups
        out += _check_slurm_conf(profile, want, conf_nodes, str(slurm_tree[0].path))
        out += _check_partitions(profile, slurm_tree, conf_nodes)
    if gres_tree is not None:
        out += _check_gres_conf(want, conf_nodes if slurm_tree is not None else None, gres_tree)
        out += _check_gpu_cores(profile, want, gres_tree)
    if slurm_tree is not None:
        out += _check_gres_types(slurm_tree, want, conf_nodes, gres_records(gres_tree)[0] if gres_tree else [])
    return _merge(out)


#: The releases a version-specific prediction was seen on, as site check names them.
NEWER = "Slurm 24.11 and 26.05 (24.11.5 and 26.05.5 seen; 23.02 to 24.05 not tested)"
#: What Slurm does with a GPU whose gres.conf Cores= cover part of a socket (a DGX-1's Cores=0-9 of
#: socket 0's cores 0-19, on each release's slurmctld: tests/topology/test_site_kinds_sandbox.py).
PART_SOCKET = (NEWER + " set the node INVALID_REG and drain it: 'gres/gpu GRES core specification "
               "{spec} for node <node> doesn't match socket boundaries. (Socket {socket} is cores {first}-{last})'; "
               "Slurm 22.05 accepts it. `slurmkit site gres-conf` writes each GPU's whole socket")


def _check_gpu_cores(profile, want: dict, tree) -> list[Disagreement]:
    """A GPU line's ``Cores=`` (or deprecated ``CPUs=``, which Slurm reads as the same core indexes:
    ``slurmd -G`` of 22.05.8, 24.11.5 and 26.05.5 prints ``CPUs=3`` and ``Cores=3`` alike) naming
    cores beyond the node's
    (slurmctld: ``invalid GRES core specification (48-63,176-191) on node node01``, NVIDIA/deepops#1195,
    where OS CPU ids were written as CPUs=), part of a socket (:data:`PART_SOCKET`: 24.11 and 26.05
    refuse the node), or other cores than the profile's own gres.conf gives that
    device (its GPU's ``cpus`` as Slurm logical cores); devices matched by file name (``nvidia4``),
    nodes with AutoDetect off on both sides."""
    from pathlib import PurePath

    mine, _ = gres_records([parse("\n".join(gres_lines(profile, warn=lambda m: None)), "profile")])
    site, auto = gres_records(tree)
    out = []
    for n, nt in want.items():
        if nt.autodetect != "off" or auto.get(n, auto.get(None, "off")) != "off":
            continue
        exp = {PurePath(f).name: set(parse_ranges(r.keys["cores"])) for r in mine
               if r.name == "gpu" and "cores" in r.keys and n in (r.nodes or ()) for f in r.files}
        sockets, per_socket, _ = slurm_node_layout(nt)
        for r in site:
            if r.name != "gpu" or (r.nodes is not None and n not in r.nodes):
                continue
            key = "Cores" if "cores" in r.keys else "CPUs" if "cpus" in r.keys else None
            if key is None:
                continue
            spec = r.keys[key.lower()]
            try:
                got = set(parse_ranges(spec))
            except ValueError as exc:
                raise ConfError(r.file, r.line, f"{key}: {exc}") from None
            beyond = sorted(c for c in got if c >= sockets * per_socket)
            if beyond:
                out.append(Disagreement(r.file, r.line, n, f"{key}={spec} names cores {format_ranges(beyond)} beyond the "
                                        f"node type's {sockets * per_socket} (Slurm core indexes, not OS CPU ids)",
                                        f"slurmctld: 'invalid GRES core specification ({spec}) on node <node>'; "
                                        "the GPU's core binding is lost"))
                continue
            partial = sorted({c // per_socket for c in got
                              if not set(range(c // per_socket * per_socket, (c // per_socket + 1) * per_socket)) <= got})
            if partial:
                s = partial[0]
                first, last = s * per_socket, (s + 1) * per_socket - 1
                out.append(Disagreement(r.file, r.line, n, f"{key}={spec} covers part of socket {s} (Slurm cores "
                                        f"{first}-{last})", PART_SOCKET.format(spec=spec, socket=s,
                                                                               first=first, last=last)))
            for f in r.files:
                want_cores = exp.get(PurePath(f).name)
                # the profile's line gives the GPU's whole socket(s): cores outside them are away from it
                if want_cores is not None and not got <= want_cores:
                    out.append(Disagreement(r.file, r.line, n, f"{PurePath(f).name}: {key}={spec}, the profile's GPU "
                                            f"there is on cores {format_ranges(want_cores)}",
                                            "Slurm places the GPU's jobs on the cores gres.conf names (--gres-flags="
                                            "enforce-binding, --gpu-bind=closest): their CPUs are away from the GPU"))
    return out


def _check_gres_types(tree, want: dict, conf_nodes: dict, records: list) -> list[Disagreement]:
    """Gres names of the profile's nodes (slurm.conf ``Gres=``) and of gres.conf lines that
    slurm.conf's ``GresTypes=`` lacks. What Slurm 22.05.8's slurmd prints for them (``slurmd -G`` on
    tests/topology/sites/shard_a100_* without ``shard`` in GresTypes): ``error: Invalid GRES
    configured on node master: shard:32`` and ``error: Ignoring gres.conf record, invalid name: shard``."""
    found = find_effective(tree, "GresTypes")
    types = {t.strip().lower() for t in (found[1].get("GresTypes") if found else "").split(",") if t.strip()}
    where = (str(found[0].path), found[1].lineno) if found else (str(tree[0].path), 0)
    gres_types = f"GresTypes={found[1].get('GresTypes')}" if found else "no GresTypes="
    out = []
    for n in want:
        node = conf_nodes.get(n)
        if node is None:
            continue
        try:
            names = sorted({name for name, _ in gres_spec.parse(node.keys.get("gres", ""))} - types)
        except ValueError:
            continue  # named by the Gres check
        for name in names:
            spec = ",".join(p for p in re.split(r",(?![^(]*\))", node.keys["gres"]) if p.split(":")[0].lower() == name)
            out.append(Disagreement(node.file, node.line, n, f"Gres={spec} but slurm.conf has {gres_types} ({where[0]}"
                                    f"{':' + str(where[1]) if where[1] else ''}) without {name}",
                                    f"slurmd: 'error: Invalid GRES configured on node {n}: {spec}'; the node has no "
                                    f"{name} and jobs asking for it are refused"))
    for r in records:
        if r.name not in types:
            out.append(Disagreement(r.file, r.line, collect_hostlist(r.nodes) if r.nodes else "",
                                    f"Name={r.name} but slurm.conf has {gres_types} without it",
                                    f"slurmd: 'error: Ignoring gres.conf record, invalid name: {r.name}'"))
    return out


def _check_slurm_conf(profile, want: dict, conf_nodes: dict, main: str) -> list[Disagreement]:
    out = []
    for n, nt in want.items():
        node = conf_nodes.get(n)
        if node is None:
            out.append(Disagreement(main, 0, n, f"node of node type {nt.name} is not in slurm.conf",
                                    "slurmctld does not know it: no job runs there"))
            continue
        try:
            have = gres_spec.parse(node.keys.get("gres", ""))
        except ValueError as exc:
            raise ConfError(node.file, node.line, f"Gres: {exc}") from None
        exp = gres_spec.parse(node_gres(nt))
        out += _gres_disagreements(node, nt, exp, have)
        lay = _layout(node)
        sockets, cores, threads = slurm_node_layout(nt)
        exp_lay = {"sockets": sockets, "cores_per_socket": cores, "threads_per_core": threads,
                   "cpus": sockets * cores * threads}
        diff = {k: (lay[k], v) for k, v in exp_lay.items() if k in lay and lay[k] != v}
        if diff:
            text = ", ".join(f"{k} {a} (profile {b})" for k, (a, b) in diff.items())
            more = lay.get("sockets", sockets) * lay.get("cores_per_socket", cores) * lay.get("threads_per_core", threads) \
                > sockets * cores * threads
            out.append(Disagreement(node.file, node.line, n, f"CPU layout differs from node type {nt.name}: {text}",
                                    "slurmd reports the node's real layout: slurmctld drains it 'Low socket*core*thread "
                                    "count' (unless SlurmdParameters=config_overrides)" if more else
                                    "Slurm schedules the layout slurm.conf gives; gres.conf Cores= and CPU binding "
                                    "are computed for the profile's, so GPU-CPU affinity is off"))
        if nt.memory_mib and lay.get("memory_mib", 0) > nt.memory_mib:
            out.append(Disagreement(node.file, node.line, n, f"RealMemory {lay['memory_mib']} MiB is above the node "
                                    f"type's memory_mib {nt.memory_mib}",
                                    "slurmctld drains the node 'Low RealMemory (reported ... < configured)'"))
        feats = _features(node)
        missing = [f for f in nt.features if f not in feats]
        if missing:
            out.append(Disagreement(node.file, node.line, n, f"Features lack {','.join(missing)} (node type {nt.name})",
                                    "jobs asking --constraint for them are not placed there"))
    return out


def _features(node: SlurmNode) -> set[str]:
    """The ``Features=`` (or ``Feature=``) of a slurm.conf node, as a set."""
    return set(filter(None, re.split(r"[,\s]+", node.keys.get("features", node.keys.get("feature", "")))))


def _node_list(expr: str, sets: dict, conf_nodes: dict, file: str, line: int, what: str) -> list[str]:
    """Node names of a slurm.conf node list: comma-separated hostlists, ``ALL`` and NodeSet names
    (slurm.conf(5) ``PartitionName ... Nodes=``)."""
    out: list[str] = []
    for token in re.split(r",(?![^\[]*\])", expr):
        token = token.strip()
        if not token:
            continue
        if token.upper() == "ALL":
            out += list(conf_nodes)
        elif token in sets:
            out += sets[token]
        else:
            out += _expand(token, file, line, what)
    return out


def slurm_nodesets(tree, conf_nodes: dict) -> dict[str, tuple[str, ...]]:
    """``{nodeset: node names}`` of a slurm.conf tree's ``NodeSet=`` lines (slurm.conf(5): ``Nodes=``
    a node list, and/or ``Feature=`` every node of ``conf_nodes`` with that feature)."""
    sets: dict[str, tuple[str, ...]] = {}
    for file, e in _entries(tree):
        if e.first_key != "nodeset":
            continue
        names = _node_list(e.get("Nodes") or "", sets, conf_nodes, file, e.lineno, "Nodes")
        feature = e.get("Feature")
        if feature:
            names += [n for n, node in conf_nodes.items() if feature in _features(node)]
        sets[e.get("NodeSet")] = tuple(dict.fromkeys(names))
    return sets


def slurm_partitions(tree, conf_nodes: dict) -> dict[str, tuple[str, int, tuple[str, ...]]]:
    """``{partition: (file, line, node names)}`` of a slurm.conf tree (``Nodes=`` hostlists,
    ``ALL``: every node of ``conf_nodes``, and NodeSet names; ``PartitionName=DEFAULT`` lines
    skipped)."""
    sets = slurm_nodesets(tree, conf_nodes)
    out = {}
    for file, e in _entries(tree):
        if e.first_key != "partitionname" or e.get("PartitionName").upper() == "DEFAULT":
            continue
        names = _node_list(e.get("Nodes") or "", sets, conf_nodes, file, e.lineno, "Nodes")
        out[e.get("PartitionName")] = (file, e.lineno, tuple(names))
    return out


def _check_partitions(profile, tree, conf_nodes: dict) -> list[Disagreement]:
    out = []
    parts = slurm_partitions(tree, conf_nodes)
    for name, part in profile.partitions.items():
        if name not in parts:
            out.append(Disagreement(str(tree[0].path), 0, "", f"partition {name} is not in slurm.conf",
                                    f"sbatch -p {name} (what submit sends) fails 'invalid partition specified'"))
            continue
        file, line, names = parts[name]
        missing = [n for n in part.node_names if n not in names]
        if missing:
            out.append(Disagreement(file, line, collect_hostlist(missing), f"partition {name} lacks nodes the profile "
                                    "puts in it", "Slurm never places the partition's jobs there; submit's node counts "
                                    "and --switches plans assume them"))
    return out


def _as_profile_types(have: dict, exp: dict) -> dict:
    """slurm.conf's gres counts with each type that is not the profile's but is part of exactly
    one of them renamed to it: Slurm matches a configured type to the one a node reports when it
    is a substring of it (gres.shtml "MIG Management": ``a100_3g.20gb`` for the MIG profile
    ``nvidia_a100_3g.20gb``; gres_gpu.c ``_normalize_sys_gres_types``)."""
    out: dict = {}
    for (name, kind), n in have.items():
        if kind is not None and (name, kind) not in exp:
            # (a type equal but for case is not renamed: Slurm's requests are case-sensitive, see CASE_ONLY)
            hits = [t for (nm, t) in exp if nm == name and t and kind.lower() in t.lower() and kind.lower() != t.lower()]
            if len(hits) == 1:
                kind = hits[0]
        out[(name, kind)] = out.get((name, kind), 0) + n
    return out


def _case_only(a: dict, b: dict) -> bool:
    """Two gres counts (``{(name, type): count}`` or ``{type: count}``; type None when untyped) that
    differ only in the case of their types."""
    def low(d):
        out: dict = {}
        for key, c in d.items():
            k = tuple(x.lower() if x else x for x in key) if isinstance(key, tuple) else key.lower() if key else key
            out[k] = out.get(k, 0) + c
        return out
    return a != b and low(a) == low(b)


#: What Slurm does with a type spelt in another case in slurm.conf and gres.conf (slurm.conf
#: gpu:a100:1 beside gres.conf Type=A100 on each release's slurmctld,
#: tests/topology/test_site_kinds_sandbox.py: 22.05.8, 24.11.5, 26.05.5).
CASE_ONLY = (NEWER + " set the node INVALID_REG and drain it: 'gres/gpu type (<gres.conf's spelling>) "
             "reported but not configured'; Slurm 22.05 registers it with gres.conf's spelling, but requests are "
             "case-sensitive: a job asking for the other spelling (--gpus-per-node=<type>:N as submit writes it from "
             "the profile) is refused 'Requested node configuration is not available'")


#: The releases that count a ``MultipleFiles=`` gres.conf line as one gres (each file counted on 22.05).
MULTIPLE_FILES_ONE = ("24.11", "26.05")


def reported_gpus(nt, release: str = "22.05") -> dict:
    """What slurmd of ``release`` (``"22.05"``, ``"24.11"``, ``"26.05"``) reports for a node of node
    type ``nt`` running the gres.conf `site gres-conf` writes: ``{("gpu", type): count}``.

    The same as the profile's ``Gres=`` but for MIG instances written as ``MultipleFiles=`` (a
    MIG group whose GPUs record ``mig_caps``): Slurm 22.05's slurmd counts each file of such a line
    (the GPU's device and the GI / CI capability files: 3 per instance), 24.11 and 26.05 count the
    line once. Measured on each release's slurmctld with fake capability devices: a node whose 2
    instances are given as ``Gres=gpu:nvidia_a100_3g.20gb:6`` registers idle with 6 on 22.05.8,
    is drained at 7 ("6 < 7"), and is drained at 6 on 24.11.5 and 26.05.5 ("2 < 6")
    (tests/topology/test_site_kinds_sandbox.py)."""
    out = {k: v for k, v in gres_spec.parse(node_gres(nt)).items() if k[0] == "gpu"}
    if release in MULTIPLE_FILES_ONE:
        return out
    caps = {g.index: g.mig_caps for g in nt.gpus}
    for grp in nt.gpu_groups:
        if grp.mig and not grp.mig_files and nt.autodetect == "off" and all(caps.get(i) for i in grp.indexes):
            for kind, n in grp.gres_types():
                out[("gpu", kind)] = out.get(("gpu", kind), 0) - n + 3 * n
    return out


def _mig_over(nt, name: str, te: int, th: int) -> str | None:
    """The prediction for slurm.conf advertising more GPUs (``th``) than the profile (``te``) on a
    node type whose MIG instances are ``MultipleFiles=`` lines: what each release does
    (:func:`reported_gpus`); None when the releases agree (no such line)."""
    if name != "gpu":
        return None
    old = sum(v for k, v in reported_gpus(nt, "22.05").items())
    if old == te:
        return None
    if th <= old:
        said = (f"Slurm 22.05 counts each file of a MultipleFiles= line (GPU and GI / CI capability files) as one GPU: "
                f"slurmd reports {old}, so the node registers with {th} and Slurm schedules {th - te} MIG instances "
                "that do not exist")
    else:
        said = (f"Slurm 22.05 counts each file of a MultipleFiles= line as one GPU: slurmd reports {old}, "
                f"'gres/gpu count reported lower than configured ({old} < {th})', node INVALID_REG, drained")
    return (said + f"; {NEWER} count each line once: 'gres/gpu count reported lower than configured ({te} < {th})', "
            "node INVALID_REG, drained")


def _gres_disagreements(node: SlurmNode, nt, exp: dict, have: dict) -> list[Disagreement]:
    out = []
    have = _as_profile_types(have, exp)
    where = (node.file, node.line, node.name)
    text_have, text_exp = _gres_text(have), _gres_text(exp)
    # gres the profile describes (GPUs and their shard/MPS shares); others (Biowulf's lscratch,
    # slurm.conf(5)'s bandwidth:lustre:no_consume:4G) are the site's own: not compared
    for name in sorted({k[0] for k in exp} | {k[0] for k in have if k[0] in PROFILE_GRES}):
        e = {t: c for (nm, t), c in exp.items() if nm == name}
        h = {t: c for (nm, t), c in have.items() if nm == name}
        if e == h:
            continue
        te, th = sum(e.values()), sum(h.values())
        if _case_only(e, h):
            out.append(Disagreement(*where, f"slurm.conf Gres={text_have} spells the {name} types in another case "
                                    f"than the profile ({text_exp})", CASE_ONLY))
        elif h and set(h) == {None} and any(t for t in e) and te == th:
            out.append(Disagreement(*where, f"slurm.conf Gres={text_have} is untyped, the profile's {name} are typed "
                                    f"({text_exp})", "a gres.conf with Type= gives slurmd 'A line in gres.conf for GRES "
                                    f"{name}:<type> has 1 more configured than expected in slurm.conf. Ignoring extra "
                                    "GRES' per line, the type is dropped and typed requests (--gpus-per-node=<type>:N) "
                                    "fail 'Requested node configuration is not available'"))
        elif th > te:
            over = _mig_over(nt, name, te, th)
            out.append(Disagreement(*where, f"slurm.conf Gres={text_have} has more {name} than the profile's {text_exp}",
                                    over or f"with the profile's gres.conf slurmd reports {te}: slurmctld sets the node "
                                    "INVALID_REG and drains it "
                                    f"'gres/{name} count reported lower than configured ({te} < {th})'"))
        elif th < te:
            out.append(Disagreement(*where, f"slurm.conf Gres={text_have or '(none)'} has fewer {name} than the "
                                    f"profile's {text_exp}",
                                    f"Slurm schedules {th} of the node's {te} {name}; slurmd ignores the rest "
                                    "('... more configured than expected in slurm.conf. Ignoring extra GRES')"))
        else:
            out.append(Disagreement(*where, f"slurm.conf Gres={text_have} types differ from the profile's {text_exp}",
                                    f"slurmd reports the gres.conf types: each slurm.conf type it lacks is 'gres/{name} "
                                    "count reported lower than configured', the node INVALID_REG and drained; "
                                    "requests for the profile's types are refused"))
    return out


def _check_gres_conf(want: dict, conf_nodes: dict | None, tree) -> list[Disagreement]:
    out = []
    records, auto = gres_records(tree)
    main = str(tree[0].path)
    for r in records:
        if "cpus" in r.keys:
            out.append(Disagreement(r.file, r.line, collect_hostlist(r.nodes) if r.nodes else "",
                                    f"CPUs={r.keys['cpus']} is deprecated (gres.conf(5): use Cores=)",
                                    "Slurm reads it exactly as Cores= (Slurm's logical core indexes, not OS CPU ids: "
                                    "slurmd -G of 22.05.8, 24.11.5 and 26.05.5 prints CPUs=3 and Cores=3 alike), so OS CPU ids written there "
                                    "name the wrong cores or none (NVIDIA/deepops#1195: 'invalid GRES core "
                                    "specification'); `slurmkit site gres-conf` writes Cores="))
    nodes = list(want) or sorted({n for r in records for n in (r.nodes or ())})
    for n in nodes:
        mine = [r for r in records if r.nodes is None or n in r.nodes]
        node_auto = auto.get(n, auto.get(None, "off"))
        for name in sorted({r.name for r in mine}):
            recs = [r for r in mine if r.name == name]
            has_file = [bool(r.files) for r in recs]
            has_type = [r.type is not None for r in recs]
            first = recs[0]
            if len(recs) > 1 and not any(has_file) and not any(has_type):
                out.append(Disagreement(recs[1].file, recs[1].line, n, f"{len(recs)} {name} records without File= or "
                                        f"Type= (first at line {first.line})",
                                        f"slurmd stops: 'fatal: gres.conf duplicate records for {name}'"))
            elif len(set(has_file)) > 1:
                r = recs[has_file.index(not has_file[0])]
                out.append(Disagreement(r.file, r.line, n, f"some {name} records have File= and others not",
                                        f"slurmd stops: 'fatal: gres.conf for {name}, some records have \"File\" "
                                        "specification while others do not'"))
            elif len(set(has_type)) > 1:
                r = recs[has_type.index(not has_type[0])]
                out.append(Disagreement(r.file, r.line, n, f"some {name} records have Type= and others not",
                                        f"slurmd stops: 'fatal: gres.conf for {name}, some records have \"Type=\" "
                                        "specification while others do not'"))
            if name == "gpu":
                for r in recs:
                    if r.type is not None and not r.files and node_auto != "off":
                        out.append(Disagreement(r.file, r.line, n, f"typed GPU Type={r.type} without File= under "
                                                f"AutoDetect={node_auto}",
                                                "slurmd: 'Discarding the following config-only GPU due to lack of File "
                                                "specification'; the GPU is matched to no detected device"))
        have: dict = {}
        for r in mine:
            have[(r.name, r.type)] = have.get((r.name, r.type), 0) + r.units()
        if node_auto != "off":
            have = {k: v for k, v in have.items() if k[0] != "gpu"}  # Slurm detects the GPUs
        nt = want.get(n)
        if nt is not None and node_auto == "off":
            exp = {k: v for k, v in gres_spec.parse(node_gres(nt)).items() if k[0] == "gpu"}
            got = {k: v for k, v in have.items() if k[0] == "gpu"}
            if exp != got:
                line = next((r.line for r in mine if r.name == "gpu"), 0)
                te, tg = sum(exp.values()), sum(got.values())
                if _case_only(exp, got):
                    why = CASE_ONLY
                elif tg < te:
                    why = (f"beside the profile's slurm.conf (Gres={_gres_text(exp)}) slurmd reports {tg}: "
                           f"'gres/gpu count reported lower than configured ({tg} < {te})', node INVALID_REG, drained")
                elif tg > te:
                    why = (f"beside the profile's slurm.conf (Gres={_gres_text(exp) if exp else '(none)'}) slurmd "
                           "warns '... more configured than expected in slurm.conf. Ignoring extra GRES': "
                           "the extra GPUs are never scheduled")
                else:
                    why = ("beside the profile's slurm.conf the types slurmd reports are not the configured ones: "
                           "'gres/gpu:<type> count too low' or the type dropped; typed requests are refused")
                out.append(Disagreement(next((r.file for r in mine), main), line, n,
                                        f"gres.conf gives {_gres_text(got)}, the profile {_gres_text(exp)}", why))
        if conf_nodes is not None and n in conf_nodes:
            node = conf_nodes[n]
            try:
                conf = gres_spec.parse(node.keys.get("gres", ""))
            except ValueError as exc:
                raise ConfError(node.file, node.line, f"Gres: {exc}") from None
            for (name, kind), cnt in sorted(have.items(), key=str):
                if kind is None or node_auto != "off":
                    continue
                if (name, kind) not in conf and conf.get((name, None)):
                    typed = [r for r in mine if (r.name, r.type) == (name, kind)]
                    r = typed[0]
                    # slurmd warns once per line, with that line's count (a File=/dev/nvidia[0-3] line:
                    # 'has 4 more', Slurm 22.05.8 slurmd -G on tests/topology/sites/shard_a100_*)
                    each = "" if len(typed) == 1 else f" (and likewise for each of its {len(typed)} lines)"
                    out.append(Disagreement(r.file, r.line, n, f"gres.conf Type={kind} beside slurm.conf "
                                            f"Gres={_gres_text(conf)} ({node.file}:{node.line}) without the type",
                                            f"slurmd: 'A line in gres.conf for GRES {name}:{kind} has {r.units()} more "
                                            "configured than expected in slurm.conf. Ignoring extra GRES'"
                                            f"{each}; the GPUs count untyped, the type is dropped "
                                            f"and a request for {name}:{kind} is refused"))
    return out


def _merge(items: list[Disagreement]) -> list[Disagreement]:
    """One disagreement per (file, line, what, slurm) with its nodes as one hostlist."""
    groups: dict[tuple, list[str]] = {}
    for d in items:
        groups.setdefault((d.file, d.line, d.what.replace(d.nodes, "{node}") if d.nodes else d.what, d.slurm), []) \
            .append(d.nodes)
    out = []
    for (file, line, what, slurm), nodes in groups.items():
        names = [n for expr in nodes if expr for n in expand_hostlist(expr)]  # each is a hostlist already
        expr = collect_hostlist(names) if names else ""
        out.append(Disagreement(file, line, expr, what.replace("{node}", expr), slurm))
    return out
