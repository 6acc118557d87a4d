"""gres.conf, slurm.conf (nodes, partitions) and topology.conf generated from a site profile
(byte-stable text).

Debian's Slurm is built without NVML autodetect, so gres.conf must spell out every GPU:
``AutoDetect=off`` then one line per GPU per node type::

    NodeName=n[1-4] Name=gpu Type=h100 File=/dev/nvidia0 Cores=0 Links=-1,18,0,0

``Cores=`` are Slurm logical core indexes (socket-major, SMT collapsed) computed from the node
type's OS-CPU -> (socket, core) map (:mod:`slurmkit.topology.cores`); ``Links=`` counts NVLinks
to every GPU of the node (-1 self, ``NV<n>`` -> n, anything else 0). topology.conf describes
the fabric for topology/tree (``SwitchName=`` leaves with ``Nodes=``, spines with
``Switches=``) or topology/block (``BlockName=``).
"""

from __future__ import annotations

import logging
from typing import Callable

from slurmkit.hostlist import collect_hostlist
from slurmkit.profile.model import GPU_ENV_FLAGS, SHARING_FLAGS, slurm_gpu_type
from slurmkit.topology.cores import format_ranges, logical_cores

log = logging.getLogger(__name__)


def node_type_nodes(profile) -> dict[str, tuple[str, ...]]:
    """Node type name -> its nodes (every partition naming it, in profile order, each once);
    node types no partition names are left out."""
    out: dict[str, dict[str, None]] = {}
    for p in profile.partitions.values():
        names = out.setdefault(p.node_type, {})
        for n in p.node_names:
            names.setdefault(n, None)
    return {name: tuple(out[name]) for name in profile.node_types if name in out}


def autodetect_of(nt, warn: Callable[[str], None] | None = None) -> str:
    """gres.conf ``AutoDetect=`` for node type ``nt``: its ``autodetect``, or ``nvml`` when a MIG
    group's instances lack their ``/dev/nvidia-caps`` minors (``gpus[].mig_caps``): only Slurm's
    NVML plugin can then find them (``warn`` is told)."""
    if nt.autodetect != "off":
        return nt.autodetect
    caps = {g.index: g.mig_caps for g in nt.gpus}
    for grp in nt.gpu_groups:
        if grp.mig and not grp.mig_files and not all(caps.get(i) for i in grp.indexes):
            if warn:
                warn(f"node type {nt.name}: MIG instances without gpus[].mig_caps "
                     f"(/proc/driver/nvidia-caps/mig-minors): gres.conf says AutoDetect=nvml for its nodes")
            return "nvml"
    return "off"


def gres_lines(profile, device_dir: str | None = None,
               warn: Callable[[str], None] | None = None) -> list[str]:
    """The gres.conf lines (no header), node types in profile order, GPUs in Slurm's gres order
    (:meth:`~slurmkit.profile.model.NodeType.gres_units`: by group, then device minor).

    AutoDetect off (every GPU spelled out): one line per GPU, ``Type=`` its group's model (none
    for an untyped group), ``File=<device_dir>/nvidia<minor>`` (nvidia<index> when the profile
    records no minors), that GPU's ``Cores=`` and ``Links=`` (NVLinks to every GPU of the node,
    columns in the same order); a MIG GPU gives one line per instance, ``Type=`` as Slurm's NVML
    names it and ``MultipleFiles=`` the GPU's device and its GI / CI ``nvidia-caps`` files;
    ``shards`` / ``mps`` give ``Name=shard`` / ``Name=mps`` lines with ``Count=`` per GPU and the
    same ``File=``. AutoDetect nvml / nvidia (or a MIG group without caps): ``NodeName=..
    AutoDetect=<x>``, then only what Slurm does not detect: ``Type=`` overrides for a typed group
    whose model is not Slurm's name for it (``File=`` lines for every GPU when ``gres_flags``
    names a GPU environment flag, which needs a line to sit on), and the shard / MPS counts.
    ``gres_flags`` become ``Flags=`` on the GPU lines (environment flags) and on the shard / MPS
    lines (sharing flags). A CPU-only node type
    gives no line.

    ``device_dir``: directory of the ``nvidiaN`` files (None: ``[cluster].device_dir``).
    ``warn``: called with a message when ``Cores=`` must be omitted (default: logging warning).
    """
    warn = warn or log.warning
    ddir = (device_dir or profile.cluster.device_dir or "/dev").rstrip("/") or ""
    lines: list[str] = []
    for name, nodes in node_type_nodes(profile).items():
        nt = profile.node_types[name]
        if nt.cpu_only:
            continue
        host = f"NodeName={collect_hostlist(nodes)}"
        auto = autodetect_of(nt, warn)

        def dev(i: int) -> str:
            return f"{ddir}/nvidia{nt.device_number(i)}"

        env = [f for f in nt.gres_flags if f in GPU_ENV_FLAGS]
        flags = [f"Flags={','.join(env)}"] if env else []
        if auto != "off":
            lines.append(f"{host} AutoDetect={auto}")
            for grp in nt.gpu_groups:
                typed = grp.model and grp.model != slurm_gpu_type(grp.nvml_name or "")
                if not grp.mig and (typed or env):
                    lines += [" ".join([host, "Name=gpu"] + ([f"Type={grp.model}"] if grp.model else [])
                                       + [f"File={dev(i)}"] + flags)
                              for i in sorted(grp.indexes, key=nt.device_number)]
            lines += _shared_lines(nt, host, dev)
            continue
        cmap = nt.cpu_map()
        if cmap is None and any(g.cpus for g in nt.gpus):
            warn(f"node type {nt.name}: CPU numbering unknown, Cores= omitted")
        units = nt.gres_units()
        listed = {g.index: g for g in nt.gpus}
        have_links = any(g.links for g in nt.gpus)
        link_cols = [i for i, _ in units if not nt.group_of(i).mig]
        instance: dict[int, int] = {}
        per_type: dict[str | None, int] = {}
        for i, kind in units:
            g = listed.get(i)
            grp = nt.group_of(i)
            fields = [host, "Name=gpu"] + ([f"Type={kind}"] if kind else [])
            if grp.mig and grp.mig_files:
                # the site's own device file per instance (Magic Castle: /dev/nvidia-mig-<profile>-<i>)
                k = per_type[kind] = per_type.get(kind, -1) + 1
                instance[i] = instance.get(i, -1) + 1
                prof = next(p for p in grp.mig if grp.instance_type(p) == kind)
                fields.append("File=" + grp.mig_files.format(profile=prof, i=k))
            elif grp.mig:
                k = instance[i] = instance.get(i, -1) + 1
                gi, ci = g.mig_caps[k]
                fields.append(f"MultipleFiles={dev(i)},{ddir}/nvidia-caps/nvidia-cap{gi},{ddir}/nvidia-caps/nvidia-cap{ci}")
            else:
                fields.append(f"File={dev(i)}")
            if g is not None and g.cpus and cmap is not None:
                try:
                    # Slurm numbers cores socket-major by the CoresPerSocket slurm.conf gives it
                    # (slurm_node, when it differs from the hardware as in the sandbox)
                    per_socket = nt.slurm_node.cores_per_socket if nt.slurm_node else nt.cores_per_socket
                    cores = socket_cores(logical_cores(g.cpus, cmap, per_socket), per_socket)
                except KeyError as exc:
                    warn(f"node type {nt.name} GPU{i}: {exc.args[0]}; Cores= omitted")
                else:
                    fields.append(f"Cores={format_ranges(cores)}")
            elif g is None or not g.cpus:
                if instance.get(i, 0) == 0:
                    warn(f"node type {nt.name} GPU{i}: no CPU affinity known, Cores= omitted")
            if g is not None and have_links and not grp.mig:
                # MIG instances have no NVLinks (gpu_nvml.c: "MIG does not support NVLinks")
                links = [-1 if h == i else (g.nvlinks_to(h) if h in listed else 0) for h in link_cols]
                fields.append("Links=" + ",".join(map(str, links)))
            lines.append(" ".join(fields + flags))
        lines += _shared_lines(nt, host, dev)
    return lines


def _shared_lines(nt, host: str, dev) -> list[str]:
    """``Name=shard`` / ``Name=mps`` lines: ``Count=`` per GPU with its ``File=`` (gres.conf(5):
    MPS and shards are tied to a GPU's device file)."""
    out = []
    sharing = [f for f in nt.gres_flags if f in SHARING_FLAGS]
    flags = f" Flags={','.join(sharing)}" if sharing else ""
    for name, attr in (("shard", "shards"), ("mps", "mps")):
        for grp in nt.gpu_groups:
            if getattr(grp, attr):
                out += [f"{host} Name={name} Count={getattr(grp, attr)} File={dev(i)}{flags}"
                        for i in sorted(grp.indexes, key=nt.device_number)]
    return out


def socket_cores(cores: list[int], cores_per_socket: int) -> list[int]:
    """Every Slurm core of the sockets that ``cores`` (Slurm logical core indexes) touch: a GPU's
    ``Cores=`` as gres.conf must give it. slurmctld 24.11 and 26.05 set a node INVALID_REG when a
    GPU's cores cover part of a socket ("gres/gpu GRES core specification 0-9 for node dgx1
    doesn't match socket boundaries. (Socket 0 is cores 0-19)", 24.11.5 and 26.05.5 on
    tests/topology/test_site_kinds_sandbox.py; 22.05 accepts it); Slurm places GPUs by socket in
    any case (``scontrol show node`` ``Gres=gpu:4(S:0-1)``). [0, 1] with 4 per socket -> [0..3]."""
    sockets = sorted({c // cores_per_socket for c in cores})
    return [s * cores_per_socket + k for s in sockets for k in range(cores_per_socket)]


def render_gres_conf(profile, device_dir: str | None = None,
                     warn: Callable[[str], None] | None = None) -> str:
    """gres.conf text for ``profile`` (a :class:`slurmkit.profile.model.Profile`): a header comment,
    ``AutoDetect=off``, then :func:`gres_lines`. Same profile -> same bytes."""
    head = [f"# gres.conf for cluster {profile.cluster.name}, generated by slurmkit from its site profile.",
            "# Do not edit: change the profile and run `slurmkit site gres-conf` again.",
            "AutoDetect=off"]
    lines = gres_lines(profile, device_dir, warn)
    if any(" Cores=" in line for line in lines):
        lines.append("# Cores= name each GPU's whole socket(s), on purpose wider than its NUMA-local cores: Slurm 24.11 "
                     "and 26.05 set a node INVALID_REG and drain it when a GPU's Cores= cover part of a socket (22.05 "
                     "accepts it). The GPUs' own CPUs stay in the site profile: submit binds each rank to them.")
    return "\n".join(head + lines) + "\n"


def node_gres(nt) -> str:
    """slurm.conf ``Gres=`` of node type ``nt``, the same types and counts gres.conf gives:
    ``gpu:<type>:<n>`` per group (``gpu:<n>`` untyped; one entry per MIG type), then
    ``shard:<n>`` / ``mps:<n>`` (per-GPU count x GPUs); "" for a CPU-only node type."""
    parts = [f"gpu:{kind}:{n}" if kind else f"gpu:{n}" for grp in nt.gpu_groups for kind, n in grp.gres_types()]
    for name, attr in (("shard", "shards"), ("mps", "mps")):
        total = sum(getattr(g, attr) * g.count for g in nt.gpu_groups)
        if total:
            parts.append(f"{name}:{total}")
    return ",".join(parts)


def gres_type_names(profile) -> tuple[str, ...]:
    """slurm.conf ``GresTypes=``: the gres names the profile's node types use (gpu, shard, mps)."""
    used = {part.split(":", 1)[0] for nt in profile.node_types.values() for part in node_gres(nt).split(",") if part}
    return tuple(n for n in ("gpu", "shard", "mps") if n in used)


def slurm_node_layout(nt) -> tuple[int, int, int]:
    """``(SocketsPerBoard, CoresPerSocket, ThreadsPerCore)`` slurm.conf gives node type ``nt``:
    its ``slurm_node`` when set (what Slurm is told differs from the hardware), else the
    hardware."""
    sn = nt.slurm_node
    return (sn.sockets, sn.cores_per_socket, sn.threads_per_core) if sn else \
        (nt.sockets, nt.cores_per_socket, nt.threads_per_core)


def slurm_conf_lines(profile) -> list[str]:
    """The slurm.conf lines the profile determines: ``GresTypes=`` (when any node has a gres),
    one ``NodeName=`` line per node type (its nodes as a hostlist; ``CPUs``, ``Boards=1``,
    ``SocketsPerBoard``, ``CoresPerSocket``, ``ThreadsPerCore``, ``RealMemory`` when known,
    ``Gres=`` as :func:`node_gres`, ``Features=``, ``State=UNKNOWN``) and one ``PartitionName=``
    line per partition (``Nodes=`` as written, ``Default=YES`` for the default, ``MaxTime=INFINITE
    State=UP``). Site-specific keys (NodeAddr, limits, accounting) are the site's to add."""
    types = gres_type_names(profile)
    out = [f"GresTypes={','.join(types)}"] if types else []
    for name, nodes in node_type_nodes(profile).items():
        nt = profile.node_types[name]
        sockets, cores, threads = slurm_node_layout(nt)
        fields = [f"NodeName={collect_hostlist(nodes)}", f"CPUs={sockets * cores * threads}", "Boards=1",
                  f"SocketsPerBoard={sockets}", f"CoresPerSocket={cores}", f"ThreadsPerCore={threads}"]
        if nt.memory_mib:
            fields.append(f"RealMemory={nt.memory_mib}")
        gres = node_gres(nt)
        if gres:
            fields.append(f"Gres={gres}")
        if nt.features:
            fields.append(f"Features={','.join(nt.features)}")
        out.append(" ".join(fields + ["State=UNKNOWN"]))
    default = profile.default_partition.name
    for part in profile.partitions.values():
        out.append(" ".join([f"PartitionName={part.name}", f"Nodes={part.nodes}"]
                            + (["Default=YES"] if part.name == default else []) + ["MaxTime=INFINITE", "State=UP"]))
    return out


def render_slurm_conf(profile) -> str:
    """The slurm.conf fragment for ``profile``: a header comment, then :func:`slurm_conf_lines`.
    Same profile -> same bytes; written from the same node types as :func:`render_gres_conf`,
    so the two files agree on every node's gres types and counts."""
    head = [f"# slurm.conf nodes and partitions of cluster {profile.cluster.name}, generated by slurmkit from its site profile.",
            "# Do not edit: change the profile and run `slurmkit site slurm-conf` again; add site keys",
            "# (NodeAddr, limits) in the including slurm.conf. gres.conf: `slurmkit site gres-conf`."]
    return "\n".join(head + slurm_conf_lines(profile)) + "\n"


def topology_lines(profile) -> list[str]:
    """topology.conf lines: tree (leaves then spines, profile order) or blocks; [] when flat."""
    f = profile.fabric
    out = [f"SwitchName={leaf.name} Nodes={collect_hostlist(leaf.node_names)}" for leaf in f.leaves]
    out += [f"SwitchName={s.name} Switches={','.join(s.switches)}" for s in f.spines]
    out += [f"BlockName={b.name} Nodes={collect_hostlist(b.node_names)}" for b in f.blocks]
    return out


def topology_plugin(profile) -> str | None:
    """The slurm.conf TopologyPlugin the profile's fabric needs: ``topology/tree``,
    ``topology/block`` or None (flat)."""
    if profile.fabric.leaves:
        return "topology/tree"
    if profile.fabric.blocks:
        return "topology/block"
    return None


def render_topology_conf(profile) -> str:
    """topology.conf text for ``profile``: a header comment naming the plugin, then
    :func:`topology_lines`. Same profile -> same bytes."""
    plugin = topology_plugin(profile)
    head = [f"# topology.conf for cluster {profile.cluster.name}, generated by slurmkit from its site profile.",
            f"# slurm.conf: TopologyPlugin={plugin}" if plugin else
            "# The profile has no [fabric] leaves or blocks: flat network, no TopologyPlugin needed."]
    return "\n".join(head + topology_lines(profile)) + "\n"
