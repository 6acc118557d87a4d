"""NCCL and network environment presets per fabric, from a site's ``[nccl]`` table.

:func:`nccl_env` returns the variables every rank exports, each with the profile key or preset
it came from (shown by ``slurmkit submit --explain``). The profile has passed
:func:`slurmkit.submit.check.check` (fabric vs NIC link layers, interface rules), so nothing here
refuses. Rules:

* every fabric: ``TORCH_NCCL_ASYNC_ERROR_HANDLING=1`` (a failed collective aborts the rank
  instead of hanging until the time limit); ``NCCL_DEBUG`` only when asked for;
* ``socket_ifname`` -> ``NCCL_SOCKET_IFNAME`` unchanged (NCCL's own syntax: prefixes, ``=``
  exact, ``^`` exclusion; :class:`slurmkit.profile.nccl.IfnameRule`);
* ``GLOO_SOCKET_IFNAME`` takes exact interface names only (torch's ProcessGroupGloo makes one
  gloo device per comma-separated name): ``gloo_socket_ifname`` when the profile names one,
  else ``SLURMKIT_GLOO_IFNAME_RULE`` = the NCCL rule, which the bind wrapper resolves on each
  node at job start to the first interface the rule allows (``slurmkit_ifname``,
  job_templates/_ifname.sh.j2) and exports as GLOO_SOCKET_IFNAME;
* ``NCCL_NET`` only when the profile names a network plugin (``net_plugin``: e.g. ``IBext``,
  HPC-X's SHARP plugin, which ``IB`` would exclude), and for efa aws-ofi-nccl's
  ``AWS Libfabric`` (every plugin version answers to it): a node without the plugin then fails
  at NCCL init instead of falling back to TCP sockets. Never ``IB`` by default;
* ``collnet``: ``NCCL_COLLNET_ENABLE=1`` (SHARP in-network reductions);
* infiniband / roce: ``NCCL_IB_HCA`` = ``=`` + the node type's compute HCAs (exact names, never
  storage or management ports), the same for every rank so NCCL pairs each GPU with its
  nearest NIC itself; ``NCCL_NET_GDR_LEVEL`` from ``gdr_level``; ``NCCL_IB_TC`` /
  ``NCCL_IB_SL`` from ``ib_tc`` / ``ib_sl`` (the traffic class / service level of the
  fabric's lossless queue, which RoCE switches are configured for);
* roce: ``NCCL_IB_GID_INDEX`` from ``gid_index`` unless ``nccl.version`` says NCCL 2.21 or
  later (which picks the RoCE v2 GID itself): when the version is unknown it is set, since an
  older NCCL would otherwise use GID 0 (RoCE v1 / link-local) and a newer one accepts the index;
* efa, per aws-ofi-nccl's EFA cheatsheet (doc/efa-env-var.md,
  https://github.com/aws/aws-ofi-nccl/blob/master/doc/efa-env-var.md): ``FI_PROVIDER=efa`` and
  ``NCCL_PROTO=simple`` for plugins <= 1.5.0 (``FI_PROVIDER`` also when the version is
  unknown: harmless on later plugins), ``FI_EFA_USE_DEVICE_RDMA=1`` below 1.7.0 (p4/p5; later
  plugins with libfabric >= 1.18 set it themselves), nothing version-specific from 1.7.0 on;
  ``NCCL_IB_DISABLE`` is not touched (EFA goes through the net plugin);
* tcp: ``NCCL_IB_DISABLE=1`` (the include list of interfaces is required by the check);
* node types without GPU peer-to-peer (``p2p = false``, PCIe boxes): ``NCCL_P2P_DISABLE=1``;
* ``nccl.extra``: exported verbatim, replacing a preset variable of the same name.
"""

from __future__ import annotations

from dataclasses import dataclass

from slurmkit.submit.site import SiteError, SiteFacts

FABRICS = ("infiniband", "roce", "efa", "tcp", "pcie")
#: What the bind wrapper resolves GLOO_SOCKET_IFNAME from on each node (job_templates/_ifname.sh.j2).
GLOO_RULE = "SLURMKIT_GLOO_IFNAME_RULE"


@dataclass(frozen=True)
class EnvVar:
    """One exported variable: ``name``, ``value`` (str) and ``source`` (where it came from);
    ``word``: the bash word the script exports, when the value is not read as
    :func:`slurmkit.submit.escape.shell_expand_word` reads it (an env file's quoting)."""

    name: str
    value: str
    source: str
    word: str | None = None


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
    if n.socket_ifname:
        out.append(EnvVar("NCCL_SOCKET_IFNAME", n.socket_ifname,
                          "profile nccl.socket_ifname (NCCL's syntax, unchanged)"))
    if n.gloo_socket_ifname:
        out.append(EnvVar("GLOO_SOCKET_IFNAME", n.gloo_socket_ifname, "profile nccl.gloo_socket_ifname"))
    elif n.socket_ifname:
        out.append(EnvVar(GLOO_RULE, n.socket_ifname, "profile nccl.socket_ifname: GLOO_SOCKET_IFNAME = the "
                          "first interface of the node this rule allows, resolved on each node at job start"))
    net, net_src = n.net_plugin, "profile nccl.net_plugin"
    if not net and fabric == "efa":
        net, net_src = "AWS Libfabric", "slurmkit preset (efa: aws-ofi-nccl, every version answers to this name)"
    if net:
        out.append(EnvVar("NCCL_NET", net,
                          net_src + ": fail at NCCL init without the plugin, never fall back to sockets"))
    if n.collnet:
        out.append(EnvVar("NCCL_COLLNET_ENABLE", "1", "profile nccl.collnet (SHARP in-network reductions)"))
    version = parse_version(n.version)
    if fabric in ("infiniband", "roce"):
        hcas = facts.compute_hcas
        if not hcas:
            raise SiteError(facts.source, None, f"nccl.fabric = {fabric!r} but node_types.{facts.node_type}"
                            f".nics has no compute InfiniBand/RoCE NIC", f"node_types.{facts.node_type}.nics")
        out.append(EnvVar("NCCL_IB_HCA", "=" + ",".join(hcas),
                          f"profile node_types.{facts.node_type}.nics (role=compute)"))
        if n.gdr_level:
            out.append(EnvVar("NCCL_NET_GDR_LEVEL", n.gdr_level, "profile nccl.gdr_level"))
        if n.ib_tc is not None:
            out.append(EnvVar("NCCL_IB_TC", str(n.ib_tc), "profile nccl.ib_tc"))
        if n.ib_sl is not None:
            out.append(EnvVar("NCCL_IB_SL", str(n.ib_sl), "profile nccl.ib_sl"))
        if fabric == "roce" and n.gid_index is not None and (version is None or version < (2, 21)):
            why = "nccl.version unknown" if version is None else "NCCL < 2.21 per nccl.version"
            out.append(EnvVar("NCCL_IB_GID_INDEX", str(n.gid_index),
                              f"profile nccl.gid_index ({why}; rule: set unless NCCL >= 2.21, which picks the GID itself)"))
    elif fabric == "efa":
        plugin = parse_version(n.efa_plugin_version)
        cheat = "aws-ofi-nccl doc/efa-env-var.md"
        if plugin is None or plugin <= (1, 5, 0):
            why = "version unknown: harmless on later plugins" if plugin is None else "aws-ofi-nccl <= 1.5.0"
            out.append(EnvVar("FI_PROVIDER", "efa", f"slurmkit preset (efa, {why}; {cheat})"))
        if plugin is not None and plugin <= (1, 5, 0):
            out.append(EnvVar("NCCL_PROTO", "simple", f"slurmkit preset (efa, aws-ofi-nccl <= 1.5.0; {cheat})"))
        if plugin is not None and plugin < (1, 7):
            out.append(EnvVar("FI_EFA_USE_DEVICE_RDMA", "1",
                              f"slurmkit preset (efa, aws-ofi-nccl < 1.7 per nccl.efa_plugin_version; {cheat})"))
    elif fabric == "tcp":
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
