"""Node types as real nodes are (GPU groups: mixed, untyped, MIG, shards, MPS; CPU-only;
AutoDetect), the gres.conf / slurm.conf written from them, and `site check --slurm-conf`
on real sites' files (../shared/corpus/sites/: ocotillo, dgx1x4, genomedk, magic_castle-27,
slinky-101; the profiles under tests/topology/kinds/ say what each is edited from)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from slurmkit.profile import ProfileError, load_profile, shipped_names
from slurmkit.profile.model import slurm_gpu_type, slurm_mig_type
from slurmkit.slurm.conf import load_tree, parse
from slurmkit.slurm.gres import parse as parse_gres
from slurmkit.profile.confcheck import crosscheck, gres_records, slurm_nodes
from slurmkit.profile.slurmconf import node_gres, render_gres_conf, render_slurm_conf

KINDS = Path(__file__).resolve().parent / "kinds"


def _load(tmp_path, text: str, name: str = "p.toml"):
    path = tmp_path / name
    path.write_text(text)
    return load_profile(path)


BASE = """[cluster]
name = "t"
[partitions.p]
nodes = "n[1-2]"
node_type = "x"
[node_types.x]
sockets = 2
cores_per_socket = 4
"""


# -------------------------------------------------------------- Slurm's NVML type names

def test_slurm_type_names_follow_gpu_nvml_c():
    # gpu_common_underscorify_tolower: lower case, spaces -> "_"
    assert slurm_gpu_type("NVIDIA H100 80GB HBM3") == "nvidia_h100_80gb_hbm3"
    assert slurm_gpu_type("NVIDIA A100-SXM4-40GB") == "nvidia_a100-sxm4-40gb"
    # MIG: the parent's name cut at its first '-', then "_" + the profile
    assert slurm_mig_type("NVIDIA A100-SXM4-40GB", "3g.20gb") == "nvidia_a100_3g.20gb"
    assert slurm_mig_type("NVIDIA H100 80GB HBM3", "1g.10gb") == "nvidia_h100_80gb_hbm3_1g.10gb"


# -------------------------------------------------------------- the model

def test_every_kind_loads_with_its_groups():
    p = load_profile(KINDS / "kinds.toml")
    vis = p.node_types["ocotillo-vis"]
    assert [(g.model, g.count, g.indexes) for g in vis.gpu_groups] == [("gtx970", 1, (0,)), ("gtx1060", 1, (1,))]
    assert vis.gpu_count == 2 and vis.gpu_model is None and vis.group_of(1).model == "gtx1060"
    dgx = p.node_types["dgx1-untyped"]
    assert dgx.gpu_model is None and dgx.gpu_count == 8 and dgx.gpu_groups[0].model is None
    mig = p.node_types["a100-mig"]
    assert mig.gpu_groups[0].gres_types() == (("nvidia_a100_3g.20gb", 2),) and mig.gpu_count == 1
    assert mig.gpu(0).mig_caps == ((21, 22), (30, 31))
    cpu = p.node_types["genomedk-cpu"]
    assert cpu.cpu_only and cpu.gpu_count == 0 and cpu.features == ("s01",)
    assert p.node_types["h100-auto"].autodetect == "nvml"


def test_the_one_group_form_is_the_old_keys():
    nt = load_profile("sandbox").node_type_for()
    assert [(g.model, g.count) for g in nt.gpu_groups] == [("h100", 4)] and nt.gpu_model == "h100"
    assert nt.gpu_tdp_w == nt.gpu_groups[0].tdp_w


@pytest.mark.parametrize("extra, key, words", [
    ('gpu_model = "a"\ngpu_count = 1\n[[node_types.x.gpu_groups]]\nmodel = "b"\ncount = 1\n',
     "node_types.x.gpu_model", "not both"),
    ('gpu_groups = [{model = "a", count = 1, indexes = [0]}, {model = "b", count = 1, indexes = [0]}]\n',
     "node_types.x.gpu_groups", "GPU0 is in two groups"),
    ('gpu_groups = [{model = "a", count = 1}, {model = "a", count = 1}]\n', "node_types.x.gpu_groups[1].model",
     "two GPU groups give gres type 'a'"),
    ('gpu_groups = [{model = "a", count = 1, mig = {"3g.20gb" = 2}}]\n', "node_types.x.gpu_groups[0].nvml_name",
     "Slurm names MIG types from it"),
    ('gpu_groups = [{model = "a", count = 1, nvml_name = "NVIDIA A100-SXM4-40GB", mig = {"3g" = 2}}]\n',
     "node_types.x.gpu_groups[0].mig.3g", "not a MIG profile"),
    ('gpu_groups = [{model = "a", count = 1, nvml_name = "N", mig = {"1g.5gb" = 1}, shards = 2}]\n',
     "node_types.x.gpu_groups[0].shards", "MIG instances"),
    ('gpu_groups = [{model = "a", count = 1, nvml_name = "N", mig = {"1g.5gb" = 2}}]\n'
     'gpus = [{mig_caps = [[1, 2]]}]\n', "node_types.x.gpus[0].mig_caps", "expected 2 [GI minor, CI minor] pairs"),
    ('autodetect = "nvml"\ngpu_groups = [{model = "v100", count = 8, nvml_name = "NVIDIA H100 80GB HBM3"}]\n',
     "node_types.x.gpu_groups[0].model", "part of the name it detects ('nvidia_h100_80gb_hbm3'"),
    ('gpu_count = 0\ngpu_model = "a"\n', "node_types.x.gpu_count", "CPU-only"),
    ('autodetect = "yes"\n', "node_types.x.autodetect", "not one of: off, nvml, nvidia"),
    ('gres_flags = ["CountOnly"]\n', "node_types.x.gres_flags", "not a gres.conf Flags= value"),
])
def test_bad_groups_name_the_key(tmp_path, extra, key, words):
    with pytest.raises(ProfileError) as err:
        _load(tmp_path, BASE + extra)
    assert err.value.key == key and words in str(err.value), str(err.value)


# -------------------------------------------------------------- gres.conf and slurm.conf

def test_gres_conf_of_each_kind(tmp_path):
    warns: list[str] = []
    text = render_gres_conf(load_profile(KINDS / "kinds.toml"), device_dir="/dev", warn=warns.append)
    lines = text.splitlines()
    assert lines[2] == "AutoDetect=off"
    assert "NodeName=visualizacion1 Name=gpu Type=gtx970 File=/dev/nvidia0 Cores=0-3" in lines
    assert "NodeName=visualizacion1 Name=gpu Type=gtx1060 File=/dev/nvidia1 Cores=4-7" in lines
    # untyped: no Type=; its own cores 30-39 are part of socket 1 (20-39): gres.conf gives the socket
    assert "NodeName=dgx1 Name=gpu File=/dev/nvidia7 Cores=20-39" in lines
    assert ("NodeName=mig1 Name=gpu Type=nvidia_a100_3g.20gb MultipleFiles=/dev/nvidia0,"
            "/dev/nvidia-caps/nvidia-cap30,/dev/nvidia-caps/nvidia-cap31 Cores=0-1") in lines
    assert "NodeName=shard1 Name=shard Count=4 File=/dev/nvidia1 Flags=one_sharing" in lines
    assert "NodeName=mps1 Name=mps Count=100 File=/dev/nvidia0" in lines
    assert not [l for l in lines if "s01n31" in l]  # CPU-only: nothing
    auto = [l for l in lines if l.startswith("NodeName=auto1")]
    assert auto[0] == "NodeName=auto1 AutoDetect=nvml" and len(auto) == 9
    # no Cores/Links (NVML's); the environment flag needs a GPU line to sit on
    assert auto[1] == "NodeName=auto1 Name=gpu Type=h100 File=/dev/nvidia0 Flags=nvidia_gpu_env"
    # a MIG group without its caps' minors: only NVML can find the instances
    p = load_profile(KINDS / "kinds.toml", overrides=({"node_types": {"a100-mig": {"gpus": [{"cpus": [0, 1]}]}}},))
    lines = render_gres_conf(p, warn=warns.append).splitlines()
    assert [l for l in lines if "mig1" in l] == ["NodeName=mig1 AutoDetect=nvml"]
    assert any("mig_caps" in w for w in warns)


def test_slurm_conf_of_each_kind():
    lines = render_slurm_conf(load_profile(KINDS / "kinds.toml")).splitlines()
    assert "GresTypes=gpu,shard,mps" in lines
    assert ("NodeName=visualizacion1 CPUs=8 Boards=1 SocketsPerBoard=2 CoresPerSocket=4 ThreadsPerCore=1 "
            "RealMemory=80385 Gres=gpu:gtx970:1,gpu:gtx1060:1 State=UNKNOWN") in lines
    assert any(l.startswith("NodeName=dgx1 ") and " Gres=gpu:8 " in l for l in lines)
    assert any(l.startswith("NodeName=mig1 ") and " Gres=gpu:nvidia_a100_3g.20gb:2 " in l for l in lines)
    assert any(l.startswith("NodeName=shard1 ") and " Gres=gpu:rtx3090:2,shard:8 " in l for l in lines)
    assert ("NodeName=s01n31 CPUs=16 Boards=1 SocketsPerBoard=2 CoresPerSocket=8 ThreadsPerCore=1 "
            "RealMemory=65536 Features=s01 State=UNKNOWN") in lines
    assert "PartitionName=vis Nodes=visualizacion1 Default=YES MaxTime=INFINITE State=UP" in lines


@pytest.mark.parametrize("profile", [str(KINDS / "kinds.toml"), str(KINDS / "ocotillo.toml"), *shipped_names()])
def test_generated_slurm_conf_and_gres_conf_agree(tmp_path, profile):
    """The two files written from one profile: site check finds nothing between them and it."""
    p = load_profile(profile)
    (tmp_path / "slurm.conf").write_text(render_slurm_conf(p))
    (tmp_path / "gres.conf").write_text(render_gres_conf(p, warn=lambda m: None))
    assert crosscheck(p, load_tree(tmp_path / "slurm.conf"), load_tree(tmp_path / "gres.conf")) == []
    nodes, dups = slurm_nodes(load_tree(tmp_path / "slurm.conf"))
    assert not dups and set(nodes) == set(p.nodes())
    for n, node in nodes.items():
        assert parse_gres(node.keys.get("gres", "")) == parse_gres(node_gres(p.node_type_of(n)))


# -------------------------------------------------------------- site check on real sites

def test_parse_gres_forms():
    assert parse_gres("gpu:h100:8,gpu:2(S:0-1),shard:16,mps:1K") == {
        ("gpu", "h100"): 8, ("gpu", None): 2, ("shard", None): 16, ("mps", None): 1024}
    assert parse_gres("(null)") == {} and parse_gres("gpu") == {("gpu", None): 1}


def test_ocotillo_agrees_with_its_profile_but_for_partitions(corpus):
    """Tabs, quoted Features, lower-case `Nodename=`, `File=/dev/nvidia[0-3]`, a mixed node."""
    sites = corpus / "sites"
    p = load_profile(KINDS / "ocotillo.toml")
    found = crosscheck(p, load_tree(sites / "ocotillo_slurm.conf"), load_tree(sites / "ocotillo_gres.conf"))
    assert [(d.line, d.what) for d in found] == [(0, "partition vis-mixed is not in slurm.conf"),
                                                 (0, "partition gpu-ib is not in slurm.conf")]
    records, auto = gres_records(load_tree(sites / "ocotillo_gres.conf"))
    assert records[0].nodes == ("ibnodo1", "ibnodo2") and len(records[0].files) == 4 and auto == {}


def test_ocotillo_with_a_one_model_profile_is_invalid_reg(corpus):
    """The issue's case: the best one-model profile lists one of visualizacion1's two GPUs."""
    sites = corpus / "sites"
    p = load_profile(KINDS / "ocotillo.toml",
                     overrides=('node_types.vis-mixed.gpu_groups=[{model="gtx970", count=1}]',))
    found = crosscheck(p, load_tree(sites / "ocotillo_slurm.conf"), load_tree(sites / "ocotillo_gres.conf"))
    conf = next(d for d in found if d.file.endswith("ocotillo_slurm.conf") and d.line == 107)
    assert conf.nodes == "visualizacion1"
    assert "'gres/gpu count reported lower than configured (1 < 2)'" in conf.slurm and "INVALID_REG" in conf.slurm
    gres = next(d for d in found if d.file.endswith("ocotillo_gres.conf"))
    assert gres.line == 2 and "gres.conf gives gpu:gtx1060:1,gpu:gtx970:1, the profile gpu:gtx970:1" == gres.what


DGX1X4 = """[cluster]
name = "dgx1x4"
[partitions.gpus]
nodes = "dgx[1-4]"
node_type = "dgx1"
[partitions.control]
nodes = "master"
node_type = "head"
[node_types.dgx1]
gpu_model = "v100"
gpu_count = 8
sockets = 2
cores_per_socket = 20
threads_per_core = 2
memory_mib = 512000
[node_types.head]
sockets = 2
cores_per_socket = 12
threads_per_core = 2
memory_mib = 256000
"""


def test_dgx1x4_typed_profile_against_untyped_site(corpus, tmp_path):
    """dgx1x4: slurm.conf `Gres=gpu:8` (untyped), gres.conf with deprecated `CPUs=`."""
    sites = corpus / "sites"
    p = _load(tmp_path, DGX1X4)
    found = crosscheck(p, load_tree(sites / "dgx1x4_slurm.conf"), load_tree(sites / "dgx1x4_gres.conf"))
    untyped = next(d for d in found if d.line == 100)
    assert untyped.nodes == "dgx[1-4]" and "Gres=gpu:8 is untyped" in untyped.what
    assert "Ignoring extra GRES" in untyped.slurm and "Requested node configuration is not available" in untyped.slurm
    cpus = [d for d in found if "deprecated" in d.what]
    assert [d.line for d in cpus] == list(range(1, 9)) and cpus[0].what.startswith("CPUs=0-9 is deprecated")
    # half a socket per GPU (CPUs=0-9 of socket 0's 0-19): what Slurm 24.11 and later refuse
    half = [d for d in found if "covers part of socket" in d.what and d.nodes.startswith("dgx")]
    assert [(d.line, d.nodes) for d in half] == [(i, "dgx[1-4]") for i in range(1, 9)]
    assert half[0].what == "CPUs=0-9 covers part of socket 0 (Slurm cores 0-19)"
    assert half[0].slurm.startswith("Slurm 24.11 and 26.05 (24.11.5 and 26.05.5 seen; 23.02 to 24.05 not tested) set the node INVALID_REG and drain it: 'gres/gpu GRES core "
                                    "specification 0-9 for node <node> doesn't match socket boundaries. (Socket 0 "
                                    "is cores 0-19)'")
    # the untyped profile (gpu_model absent) agrees with slurm.conf's Gres
    p = _load(tmp_path, DGX1X4.replace('gpu_model = "v100"\n', ""), "untyped.toml")
    found = crosscheck(p, load_tree(sites / "dgx1x4_slurm.conf"), load_tree(sites / "dgx1x4_gres.conf"))
    assert not [d for d in found if "dgx" in d.nodes and "deprecated" not in d.what and "part of socket" not in d.what]


def test_magic_castle_duplicate_records_are_slurmds_fatal(corpus, tmp_path):
    found = crosscheck(_load(tmp_path, DGX1X4), None,
                       load_tree(corpus / "sites" / "magic_castle-27_gres.conf_autodetect-nvml_duplicate-Name-gpu.conf"))
    assert len(found) == 1 and found[0].line == 8
    assert found[0].slurm == "slurmd stops: 'fatal: gres.conf duplicate records for gpu'"
    # the log the site reported says the same
    log = (corpus / "sites" / "magic_castle-27_slurmd_fatal_duplicate-records.log").read_text()
    assert "fatal: gres.conf duplicate records for gpu" in log


def test_slinky_mixed_indentation_reads_as_eight_h100(corpus, tmp_path):
    tree = load_tree(corpus / "sites" / "slinky-101_gres.conf_8xh100_explicit_mixed-indent.conf")
    p = _load(tmp_path, DGX1X4.replace('"v100"', '"h100"').replace('nodes = "master"', 'nodes = "dgx5"'))
    found = crosscheck(p, None, tree)
    assert [d.nodes for d in found] == ["dgx5"]  # the head node type has no GPU; the dgx nodes agree
    records, _ = gres_records(tree)
    assert [(r.type, r.files) for r in records][7] == ("h100", ("/dev/nvidia7",))


def test_config_only_typed_gpu_under_autodetect(tmp_path):
    """slinky-57's case (its log: 'Discarding the following config-only GPU due to lack of File
    specification'), as a gres.conf line edited from slinky-101's: Type= without File=."""
    (tmp_path / "gres.conf").write_text("AutoDetect=rsmi\nName=gpu Type=mi300x Count=8\n")
    p = _load(tmp_path, DGX1X4.replace('"v100"', '"mi300x"'))
    found = crosscheck(p, None, load_tree(tmp_path / "gres.conf"))
    d = next(d for d in found if "config-only" in d.slurm)
    assert d.nodes == "dgx[1-4],master"  # no NodeName=: every node reading the file
    assert d.line == 2 and "Discarding the following config-only GPU due to lack of File" in d.slurm


def test_genomedk_defaults_and_cpu_layout(corpus, tmp_path):
    """genomedk: `NodeName=DEFAULT` values, `Feature=`, CPU-only partitions."""
    text = """[cluster]
name = "genomedk"
[partitions.normal]
nodes = "s01n[31-37,51-58,61-68]"
node_type = "s01"
default = true
[partitions.express]
nodes = "s02n[61-63]"
node_type = "s02"
[node_types.s01]
sockets = 2
cores_per_socket = 8
memory_mib = 65536
features = ["s01"]
[node_types.s02]
sockets = 2
cores_per_socket = 8
memory_mib = 65536
features = ["s02"]
"""
    conf = load_tree(corpus / "sites" / "genomedk_slurm.conf")
    assert crosscheck(_load(tmp_path, text), conf) == []
    found = crosscheck(_load(tmp_path, text.replace("cores_per_socket = 8\nmemory_mib = 65536\nfeatures = [\"s02\"]",
                                                    "cores_per_socket = 12\nmemory_mib = 65536\nfeatures = [\"s02\"]"),
                             "g2.toml"), conf)
    assert len(found) == 1 and found[0].line == 115 and found[0].nodes == "s02n[61-63]"
    assert "cores_per_socket 8 (profile 12)" in found[0].what and "Slurm schedules the layout" in found[0].slurm


def test_include_lower_case_keys_tabs_continuation_and_duplicates(corpus, tmp_path):
    """conf.py reads a site's main file that Includes ocotillo's, plus a continued NodeName line."""
    (tmp_path / "slurm.conf").write_text(
        f"include {corpus / 'sites' / 'ocotillo_slurm.conf'}\n"
        "nodename=extra1\tCPUs=8 SocketsPerBoard=2 \\\n  CoresPerSocket=4 ThreadsPerCore=1 Gres=gpu:gtx970:1\n"
        "NodeName=ibtesla CPUs=16\n")
    nodes, dups = slurm_nodes(load_tree(tmp_path / "slurm.conf"))
    assert nodes["extra1"].keys["corespersocket"] == "4" and nodes["extra1"].line == 2
    assert nodes["visualizacion1"].keys["gres"] == "gpu:gtx970:1,gpu:gtx1060:1"
    # read in place of the Include: the second ibtesla is the one in the main file, line 4
    assert len(dups) == 1 and dups[0].line == 4 and dups[0].file.endswith("t0/slurm.conf")
    assert "Duplicated NodeName ibtesla" in dups[0].slurm and "ocotillo_slurm.conf:109" in dups[0].what


def test_cli_slurm_conf_and_check(corpus, tmp_path):
    out = subprocess.run([sys.executable, "-m", "slurmkit", "site", "slurm-conf", str(KINDS / "kinds.toml")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "NodeName=dgx1 CPUs=80 " in out.stdout
    # DGX-1's four EDR InfiniBand ports (DGX-1 user guide): without a compute NIC the default
    # fabric (infiniband) makes the profile invalid for submit, and site check exits 2 for that
    nics = "".join(f'[[node_types.dgx1.nics]]\ndevice = "mlx5_{i}"\nlink_layer = "InfiniBand"\nrate_gbps = 100\n'
                   f'role = "compute"\n' for i in range(4))
    (tmp_path / "p.toml").write_text(DGX1X4 + nics)
    res = subprocess.run([sys.executable, "-m", "slurmkit", "site", "check", str(tmp_path / "p.toml"), "--json",
                          "--slurm-conf", str(corpus / "sites" / "dgx1x4_slurm.conf"),
                          "--gres-conf", str(corpus / "sites" / "dgx1x4_gres.conf")],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 1, res.stderr
    data = json.loads(res.stdout)
    assert any(d["line"] == 100 and d["nodes"] == "dgx[1-4]" for d in data["disagreements"])
    res = subprocess.run([sys.executable, "-m", "slurmkit", "site", "check", str(tmp_path / "p.toml"),
                          "--slurm-conf", str(tmp_path / "missing.conf")], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "missing.conf" in res.stderr and "Traceback" not in res.stderr


def test_bad_line_in_a_site_file_names_file_and_line(tmp_path):
    (tmp_path / "slurm.conf").write_text("NodeName=n[1-\n")
    with pytest.raises(Exception) as err:
        slurm_nodes([parse((tmp_path / "slurm.conf").read_text(), tmp_path / "slurm.conf")])
    assert "slurm.conf:1" in str(err.value) and "NodeName" in str(err.value)


def test_submit_asks_for_the_type_on_a_mixed_node():
    from click.testing import CliRunner

    from slurmkit.cli import cli

    args = ["submit", "srun", "--site", str(KINDS / "kinds.toml"), "-p", "vis", "--dry-run"]
    res = CliRunner().invoke(cli, args + ["--gpu-type", "gtx1060", "--", "hostname"], catch_exceptions=False)
    assert res.exit_code == 0 and "#SBATCH --gpus-per-node=gtx1060:1\n" in res.output
    res = CliRunner().invoke(cli, args + ["--", "hostname"], catch_exceptions=False)
    assert res.exit_code == 0 and "#SBATCH --gpus-per-node=2\n" in res.output  # any GPU: untyped, both
    res = CliRunner().invoke(cli, args + ["--gpu-type", "v100", "--", "hostname"])
    assert res.exit_code == 2 and "no GPU group of type 'v100' (known: gtx970, gtx1060)" in res.output


def test_slurm_docs_mig_example(tmp_path):
    """Slurm's own example (doc/html/gres.shtml, "MIG Management", SchedMD/slurm 284c3b95f08a):
    ``NodeName=tux[1-16] gres=gpu:a100:1,gpu:a100_3g.20gb:2``, one whole A100 and one split in
    two 3g.20gb; its type names a substring of the MIG profile Slurm reports."""
    p = _load(tmp_path, """[cluster]
name = "tux"
[partitions.p]
nodes = "tux[1-16]"
node_type = "a100-half-mig"
[node_types.a100-half-mig]
autodetect = "nvml"
gpu_groups = [{ model = "a100", count = 1, nvml_name = "NVIDIA A100-SXM4-40GB" },
              { model = "a100", count = 1, nvml_name = "NVIDIA A100-SXM4-40GB", mig = { "3g.20gb" = 2 } }]
""")
    assert node_gres(p.node_type_for()) == "gpu:a100:1,gpu:nvidia_a100_3g.20gb:2"
    (tmp_path / "slurm.conf").write_text("AccountingStorageTRES=gres/gpu,gres/gpu:a100,gres/gpu:a100_3g.20gb\n"
                                         "GresTypes=gpu\nNodeName=tux[1-16] gres=gpu:a100:1,gpu:a100_3g.20gb:2\n"
                                         "PartitionName=p Nodes=tux[1-16]\n")
    assert crosscheck(p, load_tree(tmp_path / "slurm.conf")) == []
    (tmp_path / "slurm.conf").write_text("GresTypes=gpu\nNodeName=tux[1-16] gres=gpu:a100:1,gpu:a100_1g.5gb:2\n"
                                         "PartitionName=p Nodes=ALL\n")
    [d] = crosscheck(p, load_tree(tmp_path / "slurm.conf"))
    assert d.nodes == "tux[1-16]" and "types differ" in d.what
    gres = render_gres_conf(p).splitlines()
    assert gres[3:] == ["NodeName=tux[1-16] AutoDetect=nvml", "NodeName=tux[1-16] Name=gpu Type=a100 File=/dev/nvidia0"]
    from slurmkit.submit import site

    facts = site.site_facts(p, gpu_type="nvidia_a100_3g.20gb")
    assert (facts.gpu_model, facts.gpu_count) == ("nvidia_a100_3g.20gb", 2)
    assert (site.site_facts(p, gpu_type="a100").gpu_model, site.site_facts(p).gpu_model) == ("a100", "")


def test_hooks_node_facts_say_each_kind(tmp_path):
    """What the hooks' cached node facts tell the checks: the node type's GPUs (0 on a CPU-only
    node), and whether MIG is on (cache shape 5)."""
    from slurmkit.profile.cache import load_for_node

    prof = KINDS / "kinds.toml"
    for node, count, mig in (("s01n31", 0, False), ("mig1", 1, True), ("visualizacion1", 2, False)):
        _, facts = load_for_node(prof, tmp_path, node)
        assert (facts["node_type"], facts["gpu_count"], facts["mig"]) == (
            load_profile(prof).node_type_of(node).name, count, mig)


def test_submit_cpu_map_and_refusal_for_each_kind():
    """The CPU map submit exports is per Slurm GPU index of the node: a MIG instance has its
    GPU's CPUs; an AutoDetect node type without [[gpus]] has none (the bind wrapper then keeps the
    task's CPUs and says so); a CPU-only partition is refused with the node type named."""
    from slurmkit.errors import InputError
    from slurmkit.submit import render, site, templates

    p = load_profile(KINDS / "kinds.toml")

    def script(partition, template="srun", **kw):
        req = render.SubmitRequest(template=template, command=("hostname",), nodes=1, **kw)
        return render.render(render.plan(req, site.site_facts(p, partition), templates.get(template)))

    # on MIG one process per instance (srun's ranks are refused there: tests/submit/test_submit_shared_gpus.py)
    assert "export SLURMKIT_GPU_CPUS='0-1 0-1'\n" in script("mig", "single-gpu")
    assert "export SLURMKIT_GPU_CPUS=''\n" in script("auto")
    assert "#SBATCH --gpus-per-node=h100:8\n" in script("auto")
    with pytest.raises(InputError) as err:
        script("normal")
    assert "node type genomedk-cpu has 0 GPUs" in str(err.value)


def test_report_capacity_and_tdp_by_group(tmp_path):
    """report's readers of a node type: capacity in Name=gpu gres units (MIG instances, 0 on a
    CPU-only node), modelled energy's TDP per GPU group's type."""
    from slurmkit.report.capacity import gpus_per_node_profile
    from slurmkit.report.energy import assumptions_from_profile

    cap = gpus_per_node_profile(load_profile(KINDS / "kinds.toml"))
    assert (cap["mig1"], cap["s01n31"], cap["visualizacion1"], cap["dgx1"]) == (2, 0, 2, 8)
    p = _load(tmp_path, BASE + 'gpu_groups = [{model = "gtx970", count = 1, tdp_w = 145},'
                               ' {model = "GTX1060", count = 1, tdp_w = 120}, {count = 2, tdp_w = 300}]\n')
    a = assumptions_from_profile(p)
    assert a.gpu_tdp_w == {"gtx970": 145.0, "gtx1060": 120.0} and a.default_tdp_w == 300.0


def test_nccl_fabric_unset_follows_the_compute_nics(tmp_path):
    """``[nccl] fabric`` left out: a profile without NICs (the dgx1x4 site's, written from its
    slurm.conf alone) is valid for submit with no fabric variables (NCCL picks), and the same
    profile with DGX-1's four EDR InfiniBand ports gets the InfiniBand fabric and its NCCL_IB_HCA."""
    from slurmkit.submit.check import check
    from slurmkit.submit.nccl import nccl_env
    from slurmkit.submit.site import site_facts

    bare = _load(tmp_path, DGX1X4)
    assert bare.nccl.fabric == "pcie"
    assert [f.message for f in check(bare) if f.level == "error"] == []
    assert not any(v.name.startswith("NCCL_IB") for v in nccl_env(site_facts(bare, "gpus")))
    nics = "".join(f'[[node_types.dgx1.nics]]\ndevice = "mlx5_{i}"\nlink_layer = "InfiniBand"\nrate_gbps = 100\n'
                   f'role = "compute"\n' for i in range(4))
    ib = _load(tmp_path, DGX1X4 + nics, "ib.toml")
    assert ib.nccl.fabric == "infiniband"
    env = {v.name: v.value for v in nccl_env(site_facts(ib, "gpus"))}
    assert env["NCCL_IB_HCA"] == "=mlx5_0,mlx5_1,mlx5_2,mlx5_3"
    said = _load(tmp_path, DGX1X4 + '[nccl]\nfabric = "roce"\n', "roce.toml")
    assert said.nccl.fabric == "roce" and any(f.level == "error" for f in check(said))


# -------------------------------------------------------------- MIG layouts a GPU can hold

H100_MIG = BASE + """gpu_groups = [{{ count = 1, nvml_name = "NVIDIA H100 80GB HBM3", mig = {{ {mig} }} }}]
"""
VALID_H100 = "1g.10gb (x7), 1g.10gb+me (x1), 1g.20gb (x4), 2g.20gb (x3), 3g.40gb (x2), 4g.40gb (x1), 7g.80gb (x1)"


@pytest.mark.parametrize("mig, why", [
    ('"7g.80gb" = 2', "2x 7g.80gb: one A100 80GB / H100 80GB GPU holds at most 1"),
    ('"3g.40gb" = 3', "3x 3g.40gb: one A100 80GB / H100 80GB GPU holds at most 2"),
    ('"3g.40gb" = 2, "1g.10gb" = 1', "2x 3g.40gb + 1x 1g.10gb takes 9 of 8 memory slices"),
])
def test_site_check_refuses_layouts_no_gpu_holds(tmp_path, mig, why):
    from click.testing import CliRunner

    from slurmkit.cli import cli

    path = tmp_path / "p.toml"
    path.write_text(H100_MIG.format(mig=mig))
    with pytest.raises(ProfileError) as err:
        load_profile(path)
    assert why in str(err.value) and VALID_H100 in str(err.value)
    assert f"{path}:9:" in str(err.value)  # the gpu_groups line
    res = CliRunner().invoke(cli, ["site", "check", str(path)])
    assert res.exit_code == 2 and why in res.output and "Traceback" not in res.output


def test_layouts_a_gpu_holds_load(tmp_path):
    for mig in ('"3g.40gb" = 2', '"4g.40gb" = 1, "3g.40gb" = 1', '"2g.20gb" = 3, "1g.10gb" = 1', '"1g.10gb" = 7'):
        p = _load(tmp_path, H100_MIG.format(mig=mig))
        assert p.node_types["x"].gpu_groups[0].mig


#: A Magic Castle MIG node as the profile says it: two A100-40GB, each 3g.20gb + 2g.10gb + 2x 1g.5gb,
#: typed by profile name, with the site's own device files.
MAGIC_CASTLE_MIG = """[cluster]
name = "mc"
[partitions.gpu]
nodes = "gpu[1-2]"
node_type = "a100-mig"
[node_types.a100-mig]
sockets = 1
cores_per_socket = 8
[[node_types.a100-mig.gpu_groups]]
count = 2
nvml_name = "NVIDIA A100-SXM4-40GB"
mig = { "3g.20gb" = 1, "2g.10gb" = 1, "1g.5gb" = 2 }
mig_type = "{profile}"
mig_files = "/dev/nvidia-mig-{profile}-{i}"
"""


def test_magic_castle_mig_names_and_device_files(tmp_path, corpus):
    """Magic Castle's gres.conf template (../shared/corpus/sites/turn4/gres.conf.epp.TEMPLATE, real,
    ComputeCanada/puppet-magic_castle): MIG instances typed by their profile name (``Type=3g.20gb``)
    with the site's own device files ``/dev/nvidia-mig-<profile>-<i>``, i counting the node's
    instances of that profile. The profile's ``mig_type`` / ``mig_files`` write the same
    gres (per instance rather than one ``Count=`` line: slurmd reads both as the same files)."""
    template = (corpus / "sites" / "turn4" / "gres.conf.epp.TEMPLATE").read_text()
    assert "Type=<%= $key %>" in template and '"/dev/nvidia-mig-${key}-${i}"' in template
    assert "Count=<%= $value * $attr['specs']['gpus'] %>" in template
    p = _load(tmp_path, MAGIC_CASTLE_MIG)
    nt = p.node_types["a100-mig"]
    assert node_gres(nt) == "gpu:3g.20gb:2,gpu:2g.10gb:2,gpu:1g.5gb:4"
    # the template rendered by hand for this node (specs: gpus = 2, mig = {3g.20gb: 1, 2g.10gb: 1, 1g.5gb: 2})
    rendered = ("AutoDetect=off\n"
                "NodeName=gpu[1-2] Name=gpu Type=3g.20gb Count=2 File=/dev/nvidia-mig-3g.20gb-0,/dev/nvidia-mig-3g.20gb-1\n"
                "NodeName=gpu[1-2] Name=gpu Type=2g.10gb Count=2 File=/dev/nvidia-mig-2g.10gb-0,/dev/nvidia-mig-2g.10gb-1\n"
                "NodeName=gpu[1-2] Name=gpu Type=1g.5gb Count=4 File=/dev/nvidia-mig-1g.5gb-0,/dev/nvidia-mig-1g.5gb-1,"
                "/dev/nvidia-mig-1g.5gb-2,/dev/nvidia-mig-1g.5gb-3\n")
    (tmp_path / "mc.conf").write_text(rendered)
    (tmp_path / "ours.conf").write_text(render_gres_conf(p))

    def files(name):
        recs, _ = gres_records(load_tree(tmp_path / name))
        return sorted((r.type, f) for r in recs if r.name == "gpu" for f in r.files)

    assert files("ours.conf") == files("mc.conf")
    assert "MultipleFiles" not in render_gres_conf(p) and "AutoDetect=nvml" not in render_gres_conf(p)
    # the layout is still checked: 3 + 2 + 1 + 1 slices fill an A100 40GB; a third 1g.5gb does not fit
    with pytest.raises(ProfileError, match="takes 8 compute slices; one A100 40GB GPU has 7"):
        _load(tmp_path, (tmp_path / "p.toml").read_text().replace('"1g.5gb" = 2', '"1g.5gb" = 3'))


@pytest.mark.parametrize("edit, why", [
    (('"/dev/nvidia-mig-{profile}-{i}"', '"/dev/nvidia-mig-{i}"'), "must name {profile}: with 3 profiles"),
    (('"/dev/nvidia-mig-{profile}-{i}"', '"nvidia-mig-{profile}-{i}"'), "gres.conf File= is an absolute path"),
    (('[node_types.a100-mig]\n', '[node_types.a100-mig]\nautodetect = "nvml"\n'), "give one of the two"),
])
def test_mig_files_that_cannot_be_right_are_refused(tmp_path, edit, why):
    text = MAGIC_CASTLE_MIG
    _load(tmp_path, text)
    with pytest.raises(ProfileError, match=re.escape(why)):
        _load(tmp_path, text.replace(*edit))
