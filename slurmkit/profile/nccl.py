"""The ``[nccl]`` section of a site profile (:class:`Nccl`) and NCCL's interface rule
(:class:`IfnameRule`), read as NCCL reads ``NCCL_SOCKET_IFNAME``.

NCCL's syntax (NCCL user guide, "Environment Variables", NCCL_SOCKET_IFNAME:
https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html): a comma-separated list of
interface-name *prefixes* (``eth`` allows ``eth0``, ``eth1``...); a leading ``^`` turns the list
into exclusions (``^docker``); a leading ``=`` (after the ``^`` if any) makes the names exact
(``=eth0``, ``^=docker0``). Both marks apply to the whole list: NCCL reads them once, at the
start (src/misc/socket.cc ``ncclFindInterfaces``: ``searchNot``, then ``searchExact``), so a
mark inside the list is part of a name. An entry may end in ``:<port>``, which the socket
interface match ignores. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: The network plugins whose NCCL_NET names slurmkit knows, with where the name comes from.
#: HPC-X's nccl-rdma-sharp-plugins registers "IBext" (NCCL logs "Using network IBext",
#: NVIDIA/nccl#1357); NCCL's own verbs transport is "IB", its sockets "Socket"; aws-ofi-nccl is
#: "AWS Libfabric" up to 1.11.0 and "Libfabric" after, which still accepts "AWS Libfabric"
#: (aws/aws-ofi-nccl, the NVIDIA interface's ``nvidia_plugin_name_fixup``).
KNOWN_NETS = {"IB": "NCCL's InfiniBand/RoCE verbs transport",
              "IBext": "HPC-X nccl-rdma-sharp-plugins (SHARP/CollNet)",
              "Socket": "NCCL's TCP sockets",
              "AWS Libfabric": "aws-ofi-nccl (all versions)", "Libfabric": "aws-ofi-nccl > 1.11.0"}


@dataclass(frozen=True)
class Nccl:
    """``[nccl]``: ``fabric`` (infiniband | roce | efa | tcp | pcie; unset in the profile: the
    link layer of its compute NICs, else ``pcie``: :func:`slurmkit.profile.validate.default_fabric`); ``version`` of NCCL on
    the nodes ("" unknown); ``gdr_level`` (NCCL_NET_GDR_LEVEL); ``gid_index`` (RoCE, NCCL <
    2.21; None when unset); ``socket_ifname``: NCCL_SOCKET_IFNAME in NCCL's own syntax, passed
    through unchanged ("" = NCCL chooses; :class:`IfnameRule`); ``gloo_socket_ifname``: the exact
    interface name(s) for GLOO_SOCKET_IFNAME ("" = resolved on each node at job start from
    ``socket_ifname``'s rule); ``net_plugin``: the NCCL_NET name of a network plugin the nodes
    load ("" = NCCL_NET unset: NCCL picks; efa: aws-ofi-nccl's "AWS Libfabric"); ``collnet``:
    SHARP in-network reductions through HPC-X's plugin (NCCL_COLLNET_ENABLE=1); ``ib_tc`` /
    ``ib_sl``: InfiniBand traffic class (0-255) / service level (0-15) of NCCL's queue pairs
    (NCCL_IB_TC / NCCL_IB_SL: a RoCE fabric's lossless class; None: NCCL's default 0);
    ``efa_plugin_version`` (aws-ofi-nccl; "" unknown); ``extra`` (further variables exported
    verbatim)."""

    fabric: str = "infiniband"
    version: str = ""
    gdr_level: str = ""
    gid_index: int | None = None
    socket_ifname: str = ""
    gloo_socket_ifname: str = ""
    net_plugin: str = ""
    collnet: bool = False
    ib_tc: int | None = None
    ib_sl: int | None = None
    efa_plugin_version: str = ""
    extra: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class IfnameRule:
    """A parsed NCCL_SOCKET_IFNAME: ``names`` (prefixes, or exact names when ``exact``; any
    ``:port`` kept as written), ``exclude`` (the list says which interfaces NOT to use).
    ``text`` is the value as NCCL gets it."""

    text: str
    names: tuple[str, ...]
    exclude: bool = False
    exact: bool = False

    @classmethod
    def parse(cls, text: str) -> "IfnameRule":
        """Parse ``text``; raises ValueError with what is wrong: an empty entry (``eth0,,ib``),
        whitespace, or a ``^`` / ``=`` mark that is not at the start of the list (NCCL would
        read it as part of an interface name, which no interface has)."""
        body = text
        exclude = body.startswith("^")
        body = body[1:] if exclude else body
        exact = body.startswith("=")
        body = body[1:] if exact else body
        names = tuple(body.split(","))
        for n in names:
            if not n:
                raise ValueError(f"{text!r} has an empty entry (NCCL's list is comma-separated names)")
            if any(ch.isspace() for ch in n):
                raise ValueError(f"{text!r}: entry {n!r} contains whitespace")
            if n[0] in "^=":
                raise ValueError(f"{text!r}: {n[0]!r} is read by NCCL only at the start of the whole list "
                                 f"(e.g. \"^=docker0,lo\"); here it would be part of the name {n!r}")
        return cls(text=text, names=names, exclude=exclude, exact=exact)

    def _hits(self, ifname: str) -> bool:
        for n in self.names:
            name = n.split(":", 1)[0]
            if (ifname == name) if self.exact else ifname.startswith(name):
                return True
        return False

    def allows(self, ifname: str) -> bool:
        """Whether NCCL may use interface ``ifname`` under this rule."""
        return self._hits(ifname) != self.exclude

    def describe(self) -> str:
        """The rule in words, e.g. ``interfaces not starting with docker, lo or veth``."""
        names = ", ".join(n.split(":", 1)[0] for n in self.names)
        what = "named exactly" if self.exact else "starting with"
        return f"interfaces {'not ' if self.exclude else ''}{what} {names}"


def socket_ifname_text(value) -> str:
    """The NCCL_SOCKET_IFNAME text of a profile value: a string as written, or a TOML list
    joined with ``,`` (``["^docker", "lo", "veth"]`` -> ``^docker,lo,veth``)."""
    if isinstance(value, (list, tuple)):
        return ",".join(value)
    return str(value)
