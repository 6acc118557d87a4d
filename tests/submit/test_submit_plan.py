"""Placement and NCCL presets, computed from the shipped sandbox profile (site/sandbox.toml)."""

import copy
import tomllib
from pathlib import Path

import pytest

from slurmkit.profile import ProfileError, load_profile_data
from slurmkit.submit import nccl, placement
from slurmkit.submit.check import checked_facts
from slurmkit.submit.site import SiteError
from slurmkit.submit.site import site_facts as _site_facts

SANDBOX = Path(__file__).resolve().parents[2] / "site" / "sandbox.toml"


@pytest.fixture(scope="module")
def raw():
    with open(SANDBOX, "rb") as fh:
        return tomllib.load(fh)


def site_facts(raw, *args, source=str(SANDBOX)):
    """The facts of the sandbox profile's TOML ``raw`` as edited by a test, through the loader
    (the one reader of a profile: it validates the edit)."""
    return _site_facts(load_profile_data(raw, source), *args)


def facts_with(raw, **nccl_table):
    prof = copy.deepcopy(raw)
    prof["nccl"] = {**prof["nccl"], **nccl_table}
    return site_facts(prof, source=str(SANDBOX))


def env_of(facts, debug=None):
    return {v.name: v.value for v in nccl.nccl_env(facts, debug)}


def test_facts_follow_the_profile(raw):
    f = site_facts(raw, source=str(SANDBOX))
    nt = raw["node_types"][raw["partitions"]["gpu"]["node_type"]]
    assert f.partition == "gpu"
    assert f.gpu_count == nt["gpu_count"]
    assert [g.cpus for g in f.gpus] == [tuple(g["cpus"]) for g in nt["gpus"]]
    assert f.compute_hcas == tuple(n["device"] for n in nt["nics"] if n["role"] == "compute")
    assert dict(f.leaves)["leaf2"] == ("n3", "n4")


def test_unknown_partition_names_the_known_ones(raw):
    with pytest.raises(SiteError, match="known: gpu"):
        site_facts(raw, "nope", source="x.toml")


def test_infiniband_hca_list_is_exact_compute_only_and_same_for_all(raw):
    f = facts_with(raw)
    env = env_of(f)
    nics = raw["node_types"]["sandbox-h100x4"]["nics"]
    compute = [n["device"] for n in nics if n["role"] == "compute"]
    other = [n["device"] for n in nics if n["role"] != "compute"]
    assert env["NCCL_IB_HCA"] == "=" + ",".join(compute)
    assert not any(o in env["NCCL_IB_HCA"] for o in other)
    # shipped profiles leave NCCL_NET_GDR_LEVEL to NCCL (a debugging variable in NCCL's docs)
    assert "NCCL_NET_GDR_LEVEL" not in env
    assert env_of(facts_with(raw, gdr_level="PHB"))["NCCL_NET_GDR_LEVEL"] == "PHB"
    assert env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1"
    assert env["NCCL_SOCKET_IFNAME"] == ",".join(raw["nccl"]["socket_ifname"])   # NCCL's syntax, unchanged
    assert "NCCL_NET" not in env              # no plugin named: NCCL picks (never IB by default)
    assert env[nccl.GLOO_RULE] == env["NCCL_SOCKET_IFNAME"] and "GLOO_SOCKET_IFNAME" not in env
    assert "NCCL_DEBUG" not in env
    assert env_of(f, "INFO")["NCCL_DEBUG"] == "INFO"


@pytest.mark.parametrize("version,expect", [("2.18.3", True), ("2.20.5", True), ("2.21.5", False),
                                            ("2.23.4", False), ("", True)])
def test_roce_gid_index_unless_nccl_is_known_to_pick_it(raw, version, expect):
    f = facts_with(raw, fabric="roce", version=version, gid_index=3)
    env = env_of(f)
    assert ("NCCL_IB_GID_INDEX" in env) is expect
    if expect:
        assert env["NCCL_IB_GID_INDEX"] == "3"
        source = {v.name: v.source for v in nccl.nccl_env(f)}["NCCL_IB_GID_INDEX"]
        assert "rule: set unless NCCL >= 2.21" in source
        assert ("nccl.version unknown" in source) is (version == "")


def _efa(raw, **nccl_table):
    """The sandbox profile as an EFA cluster: its compute NICs made EFA devices."""
    prof = copy.deepcopy(raw)
    for nic in prof["node_types"]["sandbox-h100x4"]["nics"]:
        if nic["role"] == "compute":
            nic["link_layer"] = "EFA"
    prof["nccl"] = {**prof["nccl"], "fabric": "efa", **nccl_table}
    return site_facts(prof)


# aws-ofi-nccl's EFA cheatsheet (doc/efa-env-var.md): FI_PROVIDER=efa and NCCL_PROTO=simple for
# <= 1.5.0; FI_EFA_USE_DEVICE_RDMA=1 for 1.6.x (and <= 1.5.0) on p4/p5; nothing from 1.7.0 on
@pytest.mark.parametrize("plugin,provider,proto,rdma", [
    ("1.5.0", True, True, True), ("1.6.0", False, False, True), ("1.7.4", False, False, False),
    ("1.11.0", False, False, False), ("", True, False, False)])
def test_efa_variables_follow_the_plugins_cheatsheet(raw, plugin, provider, proto, rdma):
    env = env_of(_efa(raw, efa_plugin_version=plugin))
    assert ("FI_PROVIDER" in env) is provider and env.get("FI_PROVIDER", "efa") == "efa"
    assert ("NCCL_PROTO" in env) is proto and env.get("NCCL_PROTO", "simple") == "simple"
    assert ("FI_EFA_USE_DEVICE_RDMA" in env) is rdma
    assert env["NCCL_NET"] == "AWS Libfabric"      # every aws-ofi-nccl version answers to it
    assert "NCCL_IB_HCA" not in env


def test_tcp_passes_the_include_list_through_and_the_check_refuses_none(raw):
    env = env_of(facts_with(raw, fabric="tcp", socket_ifname=["eth0", "eth1"]))
    assert env["NCCL_SOCKET_IFNAME"] == "eth0,eth1"          # prefixes, as NCCL reads them
    assert env["NCCL_IB_DISABLE"] == "1"
    for bad in ([], "^docker,lo"):
        prof = copy.deepcopy(raw)
        prof["nccl"] = {**prof["nccl"], "fabric": "tcp", "socket_ifname": bad}
        with pytest.raises(SiteError, match="include list") as ei:
            checked_facts(load_profile_data(prof, str(SANDBOX)))
        assert ei.value.key == "nccl.socket_ifname" and ei.value.file == str(SANDBOX)


def test_pcie_box_without_p2p_disables_p2p(raw):
    prof = copy.deepcopy(raw)
    prof["node_types"]["sandbox-h100x4"]["p2p"] = False
    prof["nccl"]["fabric"] = "pcie"
    env = env_of(site_facts(prof))
    assert env["NCCL_P2P_DISABLE"] == "1"
    assert "NCCL_P2P_DISABLE" not in env_of(facts_with(raw))


def test_extra_is_verbatim_and_bad_fabric_is_named(raw):
    assert env_of(facts_with(raw, extra={"NCCL_CROSS_NIC": "1"}))["NCCL_CROSS_NIC"] == "1"
    efa = nccl.nccl_env(_efa(raw, extra={"FI_PROVIDER": "efa"}))
    assert [v.name for v in efa].count("FI_PROVIDER") == 1
    assert next(v for v in efa if v.name == "FI_PROVIDER").source == "profile nccl.extra.FI_PROVIDER"
    with pytest.raises(ProfileError, match="nccl.fabric") as ei:  # refused by the loader already
        facts_with(raw, fabric="myrinet")
    assert ei.value.key == "nccl.fabric" and ei.value.file == str(SANDBOX)


def test_version_parse():
    assert nccl.parse_version("2.21.5") == (2, 21, 5)
    assert nccl.parse_version("v2.18.1-1") == (2, 18, 1)
    assert nccl.parse_version("") is None


def test_cpu_map_per_gpu_from_profile(raw):
    f = site_facts(raw)
    want = [",".join(str(c) for c in g["cpus"]) for g in raw["node_types"]["sandbox-h100x4"]["gpus"]]
    assert placement.gpu_cpu_map(f, 4) == want
    assert placement.cpu_list([3, 0, 1, 2, 8, 10, 11]) == "0-3,8,10-11"
    with pytest.raises(SiteError):
        placement.gpu_cpu_map(f, 5)


def test_switches_one_leaf_when_it_fits_else_fewest(raw):
    f = site_facts(raw)
    leaf = max(len(m) for _, m in f.leaves)
    wait = raw["submit"]["switch_wait"]
    assert placement.switches_option(f, leaf) == f"1@{wait}"
    assert placement.switches_option(f, leaf + 1) == f"2@{wait}"
    assert placement.switches_option(f, 1) is None
    assert placement.switches_option(f, 2, "1:00") == "1@1:00"
    assert placement.switches_option(f, 99) is None


def test_pick_nodelist_best_fit_under_one_leaf(raw):
    f = site_facts(raw)
    # leaf1 has 2 idle, leaf2 has 1: a 2-node job goes under leaf1
    assert placement.pick_nodelist(f, 2, ["n1", "n2", "n4"]) == ("leaf1", ["n1", "n2"])
    # both leaves fully idle: best fit is either; a 1-node job takes the leaf with fewer idle
    assert placement.pick_nodelist(f, 1, ["n1", "n3", "n4"]) == ("leaf1", ["n1"])
    assert placement.pick_nodelist(f, 2, ["n1", "n3"]) is None
    assert placement.parse_sinfo_nodes("n1\nn3\nn3\n\n") == ["n1", "n3"]


def _explained(raw, template, facts_edit=None, **req):
    """{#SBATCH option or parameter name: its explained source} from render.explain
    (``facts_edit``: fields of the facts replaced, for what no valid profile says)."""
    import dataclasses

    from slurmkit.submit import render, templates

    facts = dataclasses.replace(site_facts(copy.deepcopy(raw), source=str(SANDBOX)), **(facts_edit or {}))
    text = render.explain(render.plan(render.SubmitRequest(template=template, command=("x",), **req),
                                      facts, templates.get(template)))
    out = {}
    for line in text.splitlines():
        if "  <- " in line:
            left, src = line.split("  <- ", 1)
            key = left.strip().removeprefix("#SBATCH --").split("=", 1)[0]
            out[key] = (left.strip(), src)
    return out


def test_explain_credits_the_real_source_of_the_gpu_count(raw):
    nt_name = raw["partitions"]["gpu"]["node_type"]
    gpu_count = raw["node_types"][nt_name]["gpu_count"]
    assert gpu_count > 1
    # single-GPU template: the 1 is the template's default, not the profile's gpu_count
    line, src = _explained(raw, "single-gpu")["gpus-per-node"]
    assert line.endswith(":1") and src.startswith("template single-gpu") and "gpu_count" not in src
    # multi-GPU template: all GPUs of the node type, from the profile
    line, src = _explained(raw, "torchrun", nodes=2)["gpus-per-node"]
    assert line.endswith(f":{gpu_count}") and src.startswith(f"profile node_types.{nt_name}.gpu_count")
    line, src = _explained(raw, "single-gpu", gpus_per_node=2)["gpus-per-node"]
    assert line.endswith(":2") and src.startswith("CLI --gpus-per-node")
    # no gpu_model (the loader requires one; facts built otherwise): no gres type, and no
    # claim that one came from the profile
    line, src = _explained(raw, "torchrun", facts_edit={"gpu_model": ""})["gpus-per-node"]
    assert line.endswith(f"={gpu_count}") and "gpu_model" not in src


def test_explain_credits_partition_name_and_parameters(raw):
    got = _explained(raw, "single-gpu")
    assert got["partition"][1] == "profile partitions.gpu (default = true)"
    nodefault = copy.deepcopy(raw)
    for p in nodefault["partitions"].values():
        p.pop("default", None)
    first = next(iter(nodefault["partitions"]))
    assert _explained(nodefault, "single-gpu")["partition"][1] == \
        f"profile partitions.{first} (first listed; none has default = true)"
    assert _explained(raw, "single-gpu", name="")["job-name"] == ("#SBATCH --job-name=single-gpu", "template name")
    # a parameter given with --set or by the API is credited so, even when it equals the default
    got = _explained(raw, "single-gpu", sets={"log_dir": "slurmkit-logs"}, params={"container_mounts": ""})
    assert got["log_dir"][1] == "--set" and got["container_mounts"][1] == "API params"
    assert got["container_image"][1] == "template default"
