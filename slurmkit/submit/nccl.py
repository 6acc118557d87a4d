"""NCCL and network environment presets per fabric, from a site's ``[nccl]`` table.

:func:`nccl_env` returns the variables every rank exports, each with the profile key or preset
it came from (shown by ``slurmkit submit --explain``). Rules:

* every fabric: ``TORCH_NCCL_ASYNC_ERROR_HANDLING=1`` (a failed collective aborts the rank
  instead of hanging until the time limit); ``NCCL_DEBUG`` only when asked for;
* ``socket_ifname`` -> ``NCCL_SOCKET_IFNAME`` as an *include* list of exact names (``=lo,ib0``)
  and ``GLOO_SOCKET_IFNAME`` (bootstrap and gloo traffic stay on those interfaces);
* infiniband / roce: ``NCCL_IB_HCA`` = ``=`` + the node type's compute HCAs (exact names, never
  storage or management ports), the same for every rank so NCCL pairs each GPU with its
  nearest NIC itself; ``NCCL_NET_GDR_LEVEL`` from ``gdr_level``;
* roce: ``NCCL_IB_GID_INDEX`` from ``gid_index`` unless ``nccl.version`` says NCCL 2.21 or
  later (which picks the RoCE v2 GID itself): when the version is unknown it is set, since an
  older NCCL would otherwise use GID 0 (RoCE v1 / link-local) and a newer one accepts the index;
* efa: ``FI_PROVIDER=efa``; ``FI_EFA_USE_DEVICE_RDMA=1`` only for aws-ofi-nccl older than
  1.7 (later plugins set it themselves), left out when the plugin version is unknown;
  ``NCCL_IB_DISABLE`` is not touched (EFA goes through the net plugin);
* ``NCCL_NET`` names the network the fabric means, so a node whose HCA or plugin is missing
  fails at NCCL init instead of silently falling back to TCP sockets: ``IB`` for infiniband /
  roce, ``AWS Libfabric`` for efa (aws-ofi-nccl's name up to 1.11.0; later versions call
  themselves ``Libfabric`` and accept ``AWS Libfabric`` through NCCL_NET, so it works for all);
* tcp: ``NCCL_IB_DISABLE=1`` and an include list of interfaces (an empty list is an error:
  an exclusion-only list would leave docker/virtual bridges eligible);
* node types without GPU peer-to-peer (``p2p = false``, PCIe boxes): ``NCCL_P2P_DISABLE=1``;
* ``nccl.extra``: exported verbatim, replacing a preset variable of the same name.
"""

from __future__ import annotations

from dataclasses import dataclass

from slurmkit.submit.site import SiteError, SiteFacts

FABRICS = ("infiniband", "roce", "efa", "tcp", "pcie")


@dataclass(frozen=True)
class EnvVar:
    """One exported variable: ``name``, ``value`` (str) and ``source`` (where it came from)."""

    name: str
    value: str
    source: str


def parse_version(text: str | None) -> tuple[int, ...] | None:
    """``"2.21.5"`` -> ``(2, 21, 5)``; ``""``/None/unparsable -> None (version unknown)."""
    import re

    m = re.match(r"\D*(\d+(?:\.\d+)*)", str(text or "").strip())
    return tuple(int(x) for x in m.group(1).split(".")) if m else None


def nccl_env(facts: SiteFacts, debug: str | None = None) -> list[EnvVar]:
    """The NCCL / network variables for ``facts`` (see the module docstring for the rules).

    ``debug``: a ``NCCL_DEBUG`` level (``INFO``, ``WARN``...) or None for none.
    """
    n = facts.nccl
    fabric = n.fabric.lower()
    if fabric not in FABRICS:
        raise SiteError(facts.source, None, f"nccl.fabric = {fabric!r}; expected one of {', '.join(FABRICS)}")
    out = [EnvVar("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1", "slurmkit preset (all fabrics)")]
    ifnames = list(n.socket_ifname)
    if ifnames:
        out.append(EnvVar("NCCL_SOCKET_IFNAME", "=" + ",".join(ifnames), "profile nccl.socket_ifname"))
        out.append(EnvVar("GLOO_SOCKET_IFNAME", ",".join(ifnames), "profile nccl.socket_ifname"))
    version = parse_version(n.version)
    if fabric in ("infiniband", "roce"):
        hcas = facts.compute_hcas
        if not hcas:
            raise SiteError(facts.source, None, f"nccl.fabric = {fabric!r} but node_types.{facts.node_type}"
                            f".nics has no compute InfiniBand/RoCE NIC")
        out.append(EnvVar("NCCL_IB_HCA", "=" + ",".join(hcas),
                          f"profile node_types.{facts.node_type}.nics (role=compute)"))
        out.append(EnvVar("NCCL_NET", "IB", f"slurmkit preset ({fabric}: fail at init, never fall back to sockets)"))
        if n.gdr_level:
            out.append(EnvVar("NCCL_NET_GDR_LEVEL", n.gdr_level, "profile nccl.gdr_level"))
        if fabric == "roce" and n.gid_index is not None and (version is None or version < (2, 21)):
            why = "nccl.version unknown" if version is None else "NCCL < 2.21 per nccl.version"
            out.append(EnvVar("NCCL_IB_GID_INDEX", str(n.gid_index),
                              f"profile nccl.gid_index ({why}; rule: set unless NCCL >= 2.21, which picks the GID itself)"))
    elif fabric == "efa":
        out.append(EnvVar("FI_PROVIDER", "efa", "slurmkit preset (efa)"))
        out.append(EnvVar("NCCL_NET", "AWS Libfabric", "slurmkit preset (efa: the aws-ofi-nccl plugin or fail at "
                          "init, never fall back to sockets)"))
        plugin = parse_version(n.efa_plugin_version)
        if plugin is not None and plugin < (1, 7):
            out.append(EnvVar("FI_EFA_USE_DEVICE_RDMA", "1",
                              "slurmkit preset (efa, aws-ofi-nccl < 1.7 per nccl.efa_plugin_version)"))
    elif fabric == "tcp":
        if not ifnames:
            raise SiteError(facts.source, None, "nccl.fabric = 'tcp' needs nccl.socket_ifname "
                            "(an include list of interfaces)")
        out.append(EnvVar("NCCL_IB_DISABLE", "1", "slurmkit preset (tcp)"))
    if not facts.p2p:
        out.append(EnvVar("NCCL_P2P_DISABLE", "1", f"profile node_types.{facts.node_type}.p2p = false"))
    for key, value in n.extra.items():
        # the profile's word wins over a preset of the same name (one export per variable)
        out = [v for v in out if v.name != str(key)]
        out.append(EnvVar(str(key), str(value), f"profile nccl.extra.{key}"))
    if debug:
        out.append(EnvVar("NCCL_DEBUG", str(debug), "CLI --nccl-debug"))
    return out
