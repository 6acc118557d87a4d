"""Every shipped profile in site/ is internally consistent and says where its facts come from.

These are the checks a reviewer would do by hand on a new profile: NCCL_IB_HCA names the node
type's own compute HCAs, the socket interfaces are ones the node type has, each GPU's nearest
NIC really is the nearest in its own link matrix and on its NUMA node, the leaf switches cover
every node once, the generated NCCL variables follow the fabric's rules, and the header's
source block cites exactly the URLs of ``cluster.sources``. Each check is also run against a
profile broken on purpose (``test_the_checks_catch_...``), so none of them can pass vacuously.
"""

from __future__ import annotations

import copy
import re
import tomllib
from pathlib import Path

import pytest

from slurmkit.profile import load_profile, load_profile_data, shipped_names
from slurmkit.profile.nccl import IfnameRule
from slurmkit.submit import nccl, site
from slurmkit.submit.check import check

SITE = Path(__file__).resolve().parents[2] / "site"
#: nvidia-smi topo -m path tokens, nearest first
RANK = {"PIX": 0, "PXB": 1, "PHB": 2, "NODE": 3, "SYS": 4}
URL = re.compile(r"https?://[^\s\"'<>)\]]+")


def _raw(name: str) -> dict:
    return tomllib.loads((SITE / f"{name}.toml").read_text())


def _header(text: str) -> str:
    """The comment block a profile file opens with."""
    lines = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        lines.append(line)
    return "\n".join(lines)


# -- the checks (each returns the problems it finds; [] = consistent) --------------------------

def hca_problems(p) -> list[str]:
    """NCCL_IB_HCA (as slurmkit generates it) is exactly the partition node type's compute
    InfiniBand/RoCE NICs, each nearest to some GPU; EFA and TCP profiles export no NCCL_IB_HCA."""
    out = []
    facts = site.site_facts(p)
    nt = p.node_type_for()
    env = {v.name: v.value for v in nccl.nccl_env(facts)}
    rdma = [n.device for n in nt.nics if n.role == "compute" and n.link_layer in ("InfiniBand", "RoCE")]
    if p.nccl.fabric in ("infiniband", "roce"):
        named = env.get("NCCL_IB_HCA", "").lstrip("=").split(",")
        for dev in named:
            nic = next((n for n in nt.nics if n.device == dev), None)
            if nic is None:
                out.append(f"NCCL_IB_HCA names {dev!r}, not a NIC of node type {nt.name}")
            elif nic.role != "compute" or nic.link_layer not in ("InfiniBand", "RoCE"):
                out.append(f"NCCL_IB_HCA names {dev!r}: {nic.link_layer} NIC with role {nic.role}")
        if sorted(named) != sorted(rdma):
            out.append(f"NCCL_IB_HCA {named} is not the compute HCAs {rdma}")
    elif "NCCL_IB_HCA" in env:
        out.append(f"fabric {p.nccl.fabric} exports NCCL_IB_HCA={env['NCCL_IB_HCA']}")
    nearest = {d for g in nt.gpus for d in g.nearest_nics}
    for n in nt.compute_nics():
        if nt.gpus and n.device not in nearest:
            out.append(f"compute NIC {n.device} is the nearest NIC of no GPU")
    for g in nt.gpus:
        for d in g.nearest_nics:
            if nt.nic(d).role != "compute":
                out.append(f"GPU{g.index}'s nearest NIC {d} has role {nt.nic(d).role}")
    return out


def ifname_problems(p) -> list[str]:
    """NCCL_SOCKET_IFNAME, read as NCCL reads it, allows an interface the node type has (a NIC's
    netdev, a plain Ethernet NIC's device, or the loopback); exact names are all such interfaces."""
    if not p.nccl.socket_ifname:
        return []
    nt = p.node_type_for()
    have = {"lo"} | {n.device for n in nt.nics if n.link_layer == "Ethernet"} | {n.netdev for n in nt.nics if n.netdev}
    rule = IfnameRule.parse(p.nccl.socket_ifname)
    if rule.exact and not rule.exclude:
        return [f"socket_ifname {i!r} is no interface of node type {nt.name} (has {sorted(have)})"
                for i in rule.names if i not in have]
    if not any(rule.allows(i) for i in have):
        return [f"socket_ifname {rule.text!r} allows no interface of node type {nt.name} (has {sorted(have)})"]
    return []


def link_problems(p) -> list[str]:
    """Each GPU's link matrix: a token for every other GPU (and none for itself), NIC columns
    naming NICs of the node type (by device, or NIC<k> legend labels), every compute NIC present,
    the nearest NICs ranked best among the GPU's NIC columns; a SYS token exactly where GPU and
    NIC sit on different NUMA nodes; GPUs of one NUMA node have the same CPUs; the matrix is symmetric between GPUs."""
    out = []
    nt = p.node_type_for()
    devices = [n.device for n in nt.nics]
    for g in nt.gpus:
        gpu_cols = {k for k in g.links if re.fullmatch(r"GPU\d+", k)}
        want = {f"GPU{h.index}" for h in nt.gpus if h is not g}
        if gpu_cols != want:
            out.append(f"GPU{g.index} links to GPUs {sorted(gpu_cols)}, expected {sorted(want)}")
        nic_cols = {}
        for k, tok in g.links.items():
            if k in gpu_cols:
                continue
            m = re.fullmatch(r"NIC(\d+)", k)
            dev = devices[int(m.group(1))] if m and int(m.group(1)) < len(devices) else k
            if dev not in devices:
                out.append(f"GPU{g.index} links to {k!r}, not a NIC of node type {nt.name}")
                continue
            if tok not in RANK:
                out.append(f"GPU{g.index} -> {k}: {tok!r} is not a PCIe path token")
                continue
            nic_cols[dev] = RANK[tok]
        if nic_cols:
            for n in nt.compute_nics():
                if n.device not in nic_cols:
                    out.append(f"GPU{g.index} has no link token for compute NIC {n.device}")
            best = min(nic_cols.values())
            for d in g.nearest_nics:
                if d in nic_cols and nic_cols[d] != best:
                    out.append(f"GPU{g.index}'s nearest NIC {d} is not among its nearest links")
        for n in nt.nics:
            tok = g.links.get(n.device)
            if tok in RANK and n.numa_node is not None and g.numa_node is not None \
                    and (tok == "SYS") != (n.numa_node != g.numa_node):
                out.append(f"GPU{g.index} (NUMA {g.numa_node}) is {tok} to {n.device} on NUMA {n.numa_node}")
        for h in nt.gpus:
            if h.index > g.index and g.links.get(f"GPU{h.index}") != h.links.get(f"GPU{g.index}"):
                out.append(f"GPU{g.index}-GPU{h.index} link is not symmetric")
            if h.numa_node == g.numa_node and h.cpus != g.cpus and g.numa_node is not None:
                out.append(f"GPU{g.index} and GPU{h.index} share NUMA {g.numa_node} but not their CPUs")
    return out


def fabric_problems(p) -> list[str]:
    """Leaves cover every node of every partition exactly once (the validator already refuses
    overlaps and unknown nodes), spines hold every leaf, and one spine is the root."""
    out = []
    f = p.fabric
    nodes = {n for part in p.partitions.values() for n in part.node_names}
    if f.leaves:
        under = [n for leaf in f.leaves for n in leaf.node_names]
        missing = sorted(nodes - set(under))
        if missing:
            out.append(f"{len(missing)} nodes under no leaf switch (first {missing[0]})")
    if f.spines:
        children = {c for s in f.spines for c in s.switches}
        for leaf in f.leaves:
            if leaf.name not in children:
                out.append(f"leaf {leaf.name} is under no spine")
        roots = [s.name for s in f.spines if s.name not in children]
        if len(roots) != 1:
            out.append(f"the spines have {len(roots)} roots ({roots}), not one")
    return out


def nccl_problems(p) -> list[str]:
    """The fabric's NCCL rules: no debugging variable, NCCL_NET names the network (no silent
    fall back to sockets), the RoCE GID index only when NCCL may not pick it, EFA's plugin rule."""
    out = []
    env = {v.name: v.value for v in nccl.nccl_env(site.site_facts(p))}
    for var in ("NCCL_NET_GDR_LEVEL", "NCCL_DEBUG"):
        if var in env:
            out.append(f"{var} is a debugging variable, exported as {env[var]!r}")
    # NCCL_NET only names a plugin the profile says the nodes load (never IB by default: HPC-X's
    # plugin registers as IBext, which IB would exclude); efa means aws-ofi-nccl
    want_net = p.nccl.net_plugin or {"efa": "AWS Libfabric"}.get(p.nccl.fabric)
    if env.get("NCCL_NET") != want_net:
        out.append(f"NCCL_NET = {env.get('NCCL_NET')!r} for fabric {p.nccl.fabric}, expected {want_net!r}")
    version = nccl.parse_version(p.nccl.version)
    gid_wanted = (p.nccl.fabric == "roce" and p.nccl.gid_index is not None
                  and (version is None or version < (2, 21)))
    if ("NCCL_IB_GID_INDEX" in env) != gid_wanted:
        out.append(f"NCCL_IB_GID_INDEX {'exported' if 'NCCL_IB_GID_INDEX' in env else 'missing'} "
                   f"with NCCL {p.nccl.version or 'unknown'} and gid_index {p.nccl.gid_index}")
    if p.nccl.fabric == "efa":
        # aws-ofi-nccl doc/efa-env-var.md: FI_PROVIDER and NCCL_PROTO=simple for <= 1.5.0,
        # FI_EFA_USE_DEVICE_RDMA below 1.7.0 (p4/p5), nothing from 1.7.0 on
        plugin = nccl.parse_version(p.nccl.efa_plugin_version)
        if ("FI_EFA_USE_DEVICE_RDMA" in env) != (plugin is not None and plugin < (1, 7)):
            out.append(f"FI_EFA_USE_DEVICE_RDMA against the plugin rule (aws-ofi-nccl {plugin})")
        if ("NCCL_PROTO" in env) != (plugin is not None and plugin <= (1, 5, 0)):
            out.append(f"NCCL_PROTO against the plugin rule (aws-ofi-nccl {plugin})")
        if ("FI_PROVIDER" in env) != (plugin is None or plugin <= (1, 5, 0)):
            out.append(f"FI_PROVIDER against the plugin rule (aws-ofi-nccl {plugin})")
    if not p.node_type_for().p2p and env.get("NCCL_P2P_DISABLE") != "1":
        out.append("p2p = false but NCCL_P2P_DISABLE is not 1")
    return out


def source_problems(text: str) -> list[str]:
    """For a profile's file ``text``: the header comment has a source block whose URLs are
    exactly ``cluster.sources``, and it says what is not known (the GPUs' minor numbers when
    none are declared)."""
    out = []
    head = _header(text)
    raw = tomllib.loads(text)
    if "Sources" not in head:
        out.append("no 'Sources' block in the header comment")
    cited = {u.rstrip(".,;") for u in URL.findall(head)}
    listed = set(raw["cluster"].get("sources", []))
    for u in sorted(cited - listed):
        out.append(f"header cites {u} but cluster.sources does not list it")
    for u in sorted(listed - cited):
        out.append(f"cluster.sources lists {u} but the header does not say what it supports")
    for t, nt in raw["node_types"].items():
        if not any("minor" in g for g in nt.get("gpus", [])) and "minor numbers" not in head:
            out.append(f"node type {t} declares no GPU minor numbers and the header does not say why")
    return out


HARDWARE = [n for n in shipped_names() if n != "sandbox"]


@pytest.mark.parametrize("name", shipped_names())
def test_shipped_profile_is_consistent(name):
    p = load_profile(name)
    assert hca_problems(p) == []
    assert ifname_problems(p) == []
    assert link_problems(p) == []
    assert fabric_problems(p) == []
    assert nccl_problems(p) == []
    # and slurmkit's own validation (site check and submit) refuses none of them
    assert [str(f) for f in check(p) if f.level == "error"] == []


@pytest.mark.parametrize("name", HARDWARE)
def test_shipped_profile_states_its_sources(name):
    assert source_problems((SITE / f"{name}.toml").read_text()) == []


# -- each check fails on a profile broken the way real profiles get broken ---------------------

def _broken(name, edit):
    raw = copy.deepcopy(_raw(name))
    edit(raw)
    return load_profile_data(raw, str(SITE / f"{name}.toml"))


def _nics(raw):
    return next(iter(raw["node_types"].values()))["nics"]


def _gpus(raw):
    return next(iter(raw["node_types"].values()))["gpus"]


def test_the_checks_catch_a_storage_port_in_nccl_ib_hca():
    def edit(raw):
        nic = next(n for n in _nics(raw) if n["device"] == "mlx5_1")
        nic["role"] = "compute"                     # a storage card taken for a rail
    problems = hca_problems(_broken("dgx-h100", edit))
    assert "compute NIC mlx5_1 is the nearest NIC of no GPU" in problems


def test_the_checks_catch_an_invented_interface_name():
    p = _broken("dgx-h100", lambda raw: raw["nccl"].update(socket_ifname="=ib0"))
    assert ifname_problems(p) and "'ib0' is no interface" in ifname_problems(p)[0]
    p = _broken("dgx-h100", lambda raw: raw["nccl"].update(socket_ifname=["ib0"]))   # a prefix: ib0*
    assert ifname_problems(p) and "'ib0' allows no interface" in ifname_problems(p)[0]
    ok = _broken("dgx-h100", lambda raw: raw["nccl"].update(socket_ifname="ibp"))    # prefix of the rails
    assert ifname_problems(ok) == []
    ok = _broken("dgx-h100", lambda raw: raw["nccl"].update(socket_ifname=["enp41s0f1np1"]))
    assert ifname_problems(ok) == []               # a netdev of the node type is fine


def test_the_checks_catch_a_wrong_nearest_nic_and_a_numa_mismatch():
    def edit(raw):
        _gpus(raw)[0]["nearest_nics"] = ["mlx5_6"]  # GPU0's rail is mlx5_0 (PIX); mlx5_6 is SYS
    problems = link_problems(_broken("dgx-h100", edit))
    assert "GPU0's nearest NIC mlx5_6 is not among its nearest links" in problems

    def numa(raw):
        next(n for n in _nics(raw) if n["device"] == "mlx5_6")["numa_node"] = 0  # card moved, matrix not
    problems = link_problems(_broken("dgx-h100", numa))
    assert "GPU0 (NUMA 0) is SYS to mlx5_6 on NUMA 0" in problems
    assert "GPU4 (NUMA 1) is PIX to mlx5_6 on NUMA 0" in problems


def test_the_checks_catch_a_node_under_no_leaf_and_a_second_root():
    def edit(raw):
        raw["fabric"]["leaves"][0]["nodes"] = "dgx[001-030]"
        raw["fabric"]["spines"].append({"name": "spine2", "switches": ["su1"]})
    problems = fabric_problems(_broken("dgx-h100", edit))
    assert "1 nodes under no leaf switch (first dgx031)" in problems
    assert any("2 roots" in x for x in problems)


def test_the_checks_catch_a_debugging_variable_and_the_gid_rule():
    p = _broken("rtx4090-8x", lambda raw: raw["nccl"].update(extra={"NCCL_NET_GDR_LEVEL": "PIX"}))
    assert "NCCL_NET_GDR_LEVEL is a debugging variable, exported as 'PIX'" in nccl_problems(p)
    # NCCL version unknown: the GID index is exported (an older NCCL would use GID 0)
    unknown = _broken("rtx4090-8x", lambda raw: raw["nccl"].update(version="", gid_index=3))
    assert nccl_problems(unknown) == []
    env = {v.name: v.value for v in nccl.nccl_env(site.site_facts(unknown))}
    assert env["NCCL_IB_GID_INDEX"] == "3"


def test_the_checks_catch_an_uncited_source_and_an_unlisted_one():
    text = (SITE / "aws-p5.toml").read_text()
    listed = text.replace('  "https://github.com/aws/aws-ofi-nccl",\n',
                          '  "https://github.com/aws/aws-ofi-nccl",\n  "https://example.org/p5-specs",\n')
    assert source_problems(listed) == [
        "cluster.sources lists https://example.org/p5-specs but the header does not say what it supports"]
    cited = "# [X] https://example.org/more\n" + text
    assert source_problems(cited) == [
        "header cites https://example.org/more but cluster.sources does not list it"]
    silent = text.replace("minor numbers", "minors")
    assert source_problems(silent) == [
        "node type p5-48xlarge declares no GPU minor numbers and the header does not say why"]


# -- facts specific to the cited hardware -----------------------------------------------------

def test_dgx_h100_rails_and_interfaces_are_the_user_guides():
    nt = load_profile("dgx-h100").node_type_for()
    # User guide Table 6: the GPU each compute card serves, and its default interface (Table 5)
    rails = {g.index: (g.nearest_nics[0], nt.nic(g.nearest_nics[0]).netdev) for g in nt.gpus}
    assert rails == {0: ("mlx5_0", "ibp24s0"), 1: ("mlx5_3", "ibp64s0"), 2: ("mlx5_4", "ibp79s0"),
                     3: ("mlx5_5", "ibp94s0"), 4: ("mlx5_6", "ibp154s0"), 5: ("mlx5_9", "ibp192s0"),
                     6: ("mlx5_10", "ibp206s0"), 7: ("mlx5_11", "ibp220s0")}
    other = {n.device: (n.link_layer, n.netdev) for n in nt.nics if n.role == "other"}
    assert other == {"mlx5_1": ("InfiniBand", "ibp41s0f0"), "mlx5_2": ("RoCE", "enp41s0f1np1"),
                     "mlx5_7": ("InfiniBand", "ibp170s0f0"), "mlx5_8": ("RoCE", "enp170s0f1np1")}


def test_dgx_scalable_units_are_the_reference_architectures():
    # H100 RA Table 4: one SU holds 31 DGX H100 (the 32nd position carries the UFM), one hop per rail
    h100 = load_profile("dgx-h100")
    assert [(leaf.name, len(leaf.node_names)) for leaf in h100.fabric.leaves] == [("su1", 31)]
    assert len(h100.partition().node_names) == 31
    # A100 RA: SUs of 20 DGX A100
    a100 = load_profile("dgx-a100")
    assert [len(leaf.node_names) for leaf in a100.fabric.leaves] == [20, 20]


def test_p5_efa_devices_are_the_instances_own_names():
    nt = load_profile("aws-p5").node_type_for()
    efa = [n.device for n in nt.nics]
    assert all(n.link_layer == "EFA" and n.rate_gbps == 100 for n in nt.nics)
    assert sum(n.rate_gbps for n in nt.nics) == 3200          # p5.48xlarge: 3200 Gbps EFA
    # four per GPU on its PCIe switch: rdmap<79+17i .. 82+17i>s0 (the device plugin's list)
    for g in nt.gpus:
        base = 79 + 17 * g.index
        assert g.nearest_nics == tuple(f"rdmap{base + j}s0" for j in range(4))
    assert efa[0] == "rdmap79s0" and efa[-1] == "rdmap201s0" and len(set(efa)) == 32


def test_azure_names_come_from_azures_own_image():
    p = load_profile("azure-ndh100v5")
    nt = p.node_type_for()
    assert [g.nearest_nics for g in nt.gpus] == [(f"mlx5_ib{i}",) for i in range(8)]
    assert p.nccl.socket_ifname == "eth0" and nt.nic("eth0").role == "other"
    # the accelerated-networking VF's NUMA node and GPU links are not in Azure's topology file
    assert nt.nic("mlx5_an0").numa_node is None
    assert all("mlx5_an0" not in g.links for g in nt.gpus)
