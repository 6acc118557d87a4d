"""A :class:`~slurmkit.topology.matrix.Topology` as a site-profile node-type section.

:func:`node_type_table` builds the ``[node_types.<name>]`` dict (the schema of
``docs/site-profile.md``); :func:`render_node_type` writes it as TOML in the same layout as the
shipped profiles (``gpus``/``nics`` as arrays of tables, ``links`` inline), which tomllib reads
back to the same dict. The layout is fixed, so a small writer is used rather than a generic
TOML dumper (tomllib cannot write, and generic dumpers cannot emit inline tables).
"""

from __future__ import annotations

import json
import re

from slurmkit.topology.errors import TopoError
from slurmkit.topology.matrix import Topology

_LINK_LAYER_GUESS = {"mlx": "InfiniBand", "ib": "InfiniBand", "rdmap": "EFA", "efa": "EFA",
                     "bnxt_re": "RoCE", "irdma": "RoCE", "qedr": "RoCE", "erdma": "RoCE", "rxe": "RoCE"}


def guess_link_layer(device: str) -> str:
    """Link layer from a device name prefix (``mlx5_0`` -> InfiniBand, ``mlx5_bond_0`` -> RoCE,
    ``rdmap*`` -> EFA, ``bnxt_re*`` -> RoCE); Ethernet otherwise. A guess: an mlx5 port may run
    either (sysfs ``ports/1/link_layer`` says which, see ``topo discover``); a bonded mlx5
    device is RoCE (the kernel bonds RDMA devices only over Ethernet: RoCE LAG)."""
    if device.startswith("mlx5_bond"):
        return "RoCE"
    for prefix, layer in _LINK_LAYER_GUESS.items():
        if device.startswith(prefix):
            return layer
    return "Ethernet"


#: gres types / names of GeForce and TITAN boards, on which the driver disables PCIe P2P.
#: GeForce RTX 20xx-50xx (``rtx4090``, ``rtx_3080ti``), any GTX or TITAN; not the workstation RTX
#: boards (``rtx6000``, ``a6000``).
_GEFORCE = re.compile(r"(?i)^(geforce|gtx|titan|rtx[-_ ]?[2-5]0[5-9]0(?!\d))")


def _p2p(topo: Topology, gpu_model: str) -> tuple[bool, str | None]:
    """(p2p, why it is a guess or None): NVLink between every GPU pair is P2P (a fact of the
    matrix); else a GeForce/TITAN model name (``rtx4090``, ``gtx1080``) has P2P off, anything
    else is assumed to have it."""
    pairs = [(g, h) for g in topo.gpus for h in topo.gpus if g.index < h.index]
    if pairs and all(g.links.get(f"GPU{h.index}", "").startswith("NV") for g, h in pairs):
        return True, None
    if len(topo.gpus) < 2:
        return True, None
    if _GEFORCE.match(gpu_model or ""):
        return False, (f"GeForce/TITAN model name {gpu_model!r}: the driver disables P2P over PCIe on "
                       "these boards (check with `nvidia-smi topo -p2p r`)")
    return True, (f"no NVLink between every GPU pair and {gpu_model!r} is not a GeForce name: P2P over "
                  "PCIe assumed (check with `nvidia-smi topo -p2p r`)")


def node_type_table(topo: Topology, gpu_model: str, *, sockets: int | None = None,
                    cores_per_socket: int | None = None, threads_per_core: int | None = None,
                    cpu_numbering: str | None = None, link_layers: dict[str, str] | None = None,
                    rates_gbps: dict[str, float] | None = None, guessed: list | None = None) -> dict:
    """The ``[node_types.<name>]`` table for ``topo``.

    CPU topology: the arguments, else the topology's own (live discovery), else
    ``cpu_numbering = "unknown"`` with one socket and as many cores as CPUs seen (gres.conf
    ``Cores=`` is then omitted). NICs: ``device`` (legend name or label), ``role`` from the
    matrix, ``link_layer`` from ``link_layers``, else the NIC's own (live discovery
    reads sysfs), else :func:`guess_link_layer`; ``rate_gbps`` from ``rates_gbps``, else the NIC's
    own, else 0 (unknown), ``netdev`` and ``pci`` when discovery read them. GPU links keep the raw
    tokens, self omitted. ``p2p``: true when NVLink joins every GPU pair, else guessed from
    ``gpu_model`` (GeForce/TITAN boards print PIX/PHB yet have P2P disabled).

    ``guessed``: when given, each value that is a guess rather than read from the input is
    appended as ``(key, why)``, ``key`` relative to the section (``p2p``, ``nics[0].link_layer``):
    :func:`render_node_type` marks those lines, and the CLI says them on stderr.
    """
    guessed = guessed if guessed is not None else []
    link_layers, rates_gbps = link_layers or {}, rates_gbps or {}
    sockets = sockets or topo.sockets
    cores = cores_per_socket or topo.cores_per_socket
    threads = threads_per_core or topo.threads_per_core
    numbering = cpu_numbering or ("linear" if sockets and cores and threads else "unknown")
    if not (sockets and cores and threads):
        ncpu = max((max(g.cpus) + 1 for g in topo.gpus if g.cpus), default=1)
        sockets, cores, threads = 1, ncpu, 1
        numbering = cpu_numbering or "unknown"
    table: dict = {"gpu_model": gpu_model, "gpu_count": len(topo.gpus), "sockets": sockets,
                   "cores_per_socket": cores, "threads_per_core": threads, "cpu_numbering": numbering}
    gpus = []
    for g in topo.gpus:
        row: dict = {"index": g.index, "cpus": list(g.cpus)}
        if all(h.minor is not None for h in topo.gpus):
            row["minor"] = g.minor                 # gres.conf File=/dev/nvidia<minor>
        if g.numa_node is not None:
            row["numa_node"] = g.numa_node
        if g.gpu_numa_id is not None:
            row["gpu_numa_id"] = g.gpu_numa_id
        row["nearest_nics"] = list(g.nearest_nics)
        row["links"] = dict(g.links)
        gpus.append(row)
    p2p, why = _p2p(topo, gpu_model)
    table["p2p"] = p2p
    if why:
        guessed.append(("p2p", why))
    nics = []
    for n in topo.nics:
        dev = n.device or n.name
        layer = link_layers.get(dev) or n.link_layer
        if not layer:
            layer = guess_link_layer(dev)
            guessed.append((f"nics[{len(nics)}].link_layer",
                            f"{dev}: {layer} from its name only (not in the matrix; sysfs "
                            f"/sys/class/infiniband/{dev}/ports/1/link_layer says, or `topo discover`)"))
        rate = rates_gbps.get(dev, n.rate_gbps if n.rate_gbps is not None else 0)
        row = {"device": dev, "link_layer": layer, "rate_gbps": rate, "role": n.role}
        if n.numa_node is not None:
            row["numa_node"] = n.numa_node
        if n.netdev:
            row["netdev"] = n.netdev               # what NCCL_SOCKET_IFNAME can name
        if n.pci:
            row["pci"] = n.pci                     # the health checks find the card by it
        nics.append(row)
    table["gpus"] = gpus
    table["nics"] = nics
    return table


def add_minors(topo: Topology, capture: str, state) -> None:
    """Set each GPU's ``minor`` from ``state``, an ``nvidia-smi -q`` capture (text or ``-x``
    XML) of the same node read by the caller (``slurmkit.health.source.load_capture(capture)``:
    a ``NodeState``; ``capture``, its path, names it in errors): its GPUs are listed in
    nvidia-smi order (PCI bus id), GPU ``i`` of the matrix is the capture's ``i``-th GPU, whose
    "Minor Number" (``minor_number``) is the device file's minor. Raises
    :class:`~slurmkit.topology.errors.TopoError` when the GPU counts differ or a minor is
    missing."""
    if len(state.gpus) != len(topo.gpus):
        raise TopoError(capture, None, f"{len(state.gpus)} GPUs, but the matrix has {len(topo.gpus)}: "
                        "capture both on the same node")
    for g, s in zip(sorted(topo.gpus, key=lambda g: g.index), state.gpus):
        if s.minor_number is None:
            raise TopoError(capture, None, f"GPU {s.pci_bus_id or g.index} has no Minor Number")
        g.minor = int(s.minor_number)


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a JSON string is a valid TOML basic string
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + " }" if v else "{}"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


def _key(k: str) -> str:
    return k if k and all(c.isalnum() or c in "-_" for c in k) else json.dumps(k)


def render_node_type(name: str, table: dict, comments: list[str] = (), guessed=()) -> str:
    """TOML text of ``[node_types.<name>]`` from :func:`node_type_table` (``comments``: lines
    written above it, e.g. where it came from; ``guessed``: its ``(key, why)`` list: each such
    line ends in ``# GUESSED: why``, and a header line lists them, so a reviewer sees what to check)."""
    marks = dict(guessed)
    out = [f"# {c}" for c in comments]
    if marks:
        out.append(f"# GUESSED (not in the input; check before use): {', '.join(marks)}")
    head = f"node_types.{_key(name)}"
    out.append(f"[{head}]")

    def line(indent: str, path: str, k: str, v) -> str:
        text = f"{indent}{_key(k)} = {_value(v)}"
        return f"{text}  # GUESSED: {marks[path]}" if path in marks else text

    for k, v in table.items():
        if k not in ("gpus", "nics"):
            out.append(line("", k, k, v))
    for arr in ("gpus", "nics"):
        for i, row in enumerate(table.get(arr, [])):
            out.append("")
            out.append(f"  [[{head}.{arr}]]")
            out += [line("  ", f"{arr}[{i}].{k}", k, v) for k, v in row.items()]
    return "\n".join(out) + "\n"
