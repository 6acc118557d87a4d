"""`site slurm-conf` / `site gres-conf` / `site check --slurm-conf --gres-conf` on more real sites'
files (tests/topology/sites/README.md says where each comes from), and the slurm.conf forms they
and slurm.conf(5) use: NodeName=DEFAULT Gres, Sockets left for Slurm to infer, NodeSet names in a
partition's Nodes=, a no_consume gres, gres the profile does not describe (Biowulf's lscratch)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from slurmkit.profile import load_profile
from slurmkit.slurm.conf import ConfError, load_tree
from slurmkit.slurm.gres import parse as parse_gres
from slurmkit.profile.confcheck import crosscheck, slurm_nodes, slurm_partitions
from slurmkit.profile.slurmconf import render_gres_conf, render_slurm_conf

SITES = Path(__file__).resolve().parent / "sites"


def _check(name: str, slurm_conf: Path | None = None, gres: bool = False):
    p = load_profile(SITES / f"{name}.toml")
    return crosscheck(p, load_tree(slurm_conf or SITES / f"{name}_slurm.conf"),
                      load_tree(SITES / f"{name}_gres.conf") if gres else None)


def test_titan_node_default_gres_and_inferred_sockets():
    """NodeName=DEFAULT Gres=gpu:titan:1 reaches every node; titan1/titan5 give no Sockets (Slurm infers
    CPUs / (cores x threads) = 1): only the real differences are reported."""
    nodes, dups = slurm_nodes(load_tree(SITES / "titan_slurm.conf"))
    assert sorted(nodes) == ["titan1", "titan3", "titan4", "titan5", "titan7"] and not dups
    assert all(parse_gres(n.keys["gres"]) == {("gpu", "titan"): 1} for n in nodes.values())
    got = [str(d) for d in sorted(_check("titan"), key=lambda d: (-d.line, d.what))]
    assert len(got) == 4, got
    assert "titan_slurm.conf:31: titan5: RealMemory 31821 MiB" in got[0] and "Low RealMemory" in got[0]
    assert "titan_slurm.conf:27: titan1: RealMemory 32066 MiB is above the node type's memory_mib 31819" in got[1]
    assert "partition main-3 is not in slurm.conf" in got[2] and "partition main-4" in got[3]


def test_titan_generated_files_agree_with_the_site_on_gres():
    p = load_profile(SITES / "titan.toml")
    conf = render_slurm_conf(p)
    assert "NodeName=titan[1,5,7] CPUs=8 Boards=1 SocketsPerBoard=1 CoresPerSocket=4 ThreadsPerCore=2" in conf
    assert "NodeName=titan4 Name=gpu Type=titan File=/dev/nvidia0" in render_gres_conf(p, warn=lambda m: None)


def test_partition_missing_several_nodes_is_one_hostlist(tmp_path):
    """A partition lacking several of the profile's nodes: one line naming them as a hostlist
    (this raised BadHostlist from the merge before)."""
    text = (SITES / "titan_slurm.conf").read_text().replace("Nodes=titan[1,3,4,5,7]", "Nodes=titan3")
    (tmp_path / "slurm.conf").write_text(text)
    got = [d for d in _check("titan", tmp_path / "slurm.conf") if "lacks nodes" in d.what]
    assert [(d.nodes, d.line) for d in got] == [("titan[1,5,7]", 33)]


def test_nodeset_names_in_a_partition(tmp_path):
    """slurm.conf(5) NodeSet: by Nodes= and by Feature=, named in PartitionName Nodes= beside hostlists."""
    text = (SITES / "titan_slurm.conf").read_text()
    text = text.replace("NodeName=titan4 ", "NodeName=titan4 Features=wide ").replace(
        "PartitionName=main Nodes=titan[1,3,4,5,7]",
        "NodeSet=ht Nodes=titan[1,5]\nNodeSet=wide Feature=wide\nPartitionName=main Nodes=ht,titan7,wide,titan3")
    (tmp_path / "slurm.conf").write_text(text)
    tree = load_tree(tmp_path / "slurm.conf")
    nodes, _ = slurm_nodes(tree)
    parts = slurm_partitions(tree, nodes)
    assert sorted(parts["main"][2]) == ["titan1", "titan3", "titan4", "titan5", "titan7"]
    assert not [d for d in _check("titan", tmp_path / "slurm.conf") if "lacks nodes" in d.what]


def test_gres_the_profile_does_not_describe_and_no_consume(tmp_path):
    """slurm.conf(5)'s `bandwidth:lustre:no_consume:4G` parses; gres other than gpu/shard/mps
    (Biowulf's `lscratch:3570` beside `gpu:A100:4(S:0-1)`) are the site's own and not compared."""
    assert parse_gres("gpu:A100:4(S:0-1),lscratch:3570") == {("gpu", "A100"): 4, ("lscratch", None): 3570}
    assert parse_gres("gpu:tesla:2,gpu:k80:1,bandwidth:lustre:no_consume:4G") == {
        ("gpu", "tesla"): 2, ("gpu", "k80"): 1, ("bandwidth", "lustre"): 4 * 1024 ** 3}
    assert parse_gres("gpu:no_consume:2") == {("gpu", None): 2}
    text = (SITES / "titan_slurm.conf").read_text().replace(
        "NodeName=DEFAULT Gres=gpu:titan:1", "NodeName=DEFAULT Gres=gpu:titan:1,bandwidth:lustre:no_consume:4G").replace(
        "GresTypes=gpu", "GresTypes=gpu,bandwidth")
    (tmp_path / "slurm.conf").write_text(text)
    assert sorted((d.line, d.nodes, d.what) for d in _check("titan", tmp_path / "slurm.conf")) == \
        sorted((d.line, d.nodes, d.what) for d in _check("titan"))


def test_a_count_that_is_not_a_number_names_the_key(tmp_path):
    (tmp_path / "slurm.conf").write_text("NodeName=titan1 CPUs=eight Gres=gpu:titan:1\n")
    with pytest.raises(ConfError) as err:
        crosscheck(load_profile(SITES / "titan.toml"), load_tree(tmp_path / "slurm.conf"))
    assert str(err.value).endswith("slurm.conf:1: NodeName=titan1: CPUs: expected a whole number, found 'eight'")


def test_shard_guide_types_gres_conf_beside_an_untyped_slurm_conf():
    """The sharding guide: gres.conf Type=A100 File=/dev/nvidia[0-3] + a node-wide Name=shard Count=32,
    slurm.conf Gres=gpu:4,shard:32: Slurm drops the type (both files say so); the shard count agrees."""
    got = _check("shard_a100", gres=True)
    lines = sorted((Path(d.file).name, d.line, d.nodes) for d in got)
    assert lines == [("shard_a100_gres.conf", 4, "master"), ("shard_a100_slurm.conf", 0, ""),
                     ("shard_a100_slurm.conf", 3, "master")]
    by_line = {d.line: d for d in got}
    assert "Gres=gpu:4,shard:32 is untyped" in by_line[3].what and "Ignoring extra GRES" in by_line[3].slurm
    assert "gres.conf Type=A100 beside slurm.conf Gres=gpu:4,shard:32" in by_line[4].what
    assert not [d for d in got if "shard" in d.what and "untyped" not in d.what and "Type=A100" not in d.what]


def test_rtxpro_autodetect_shards_agree():
    """AutoDetect=nvml with typed File= lines and per-GPU shards: the profile written from the docs
    agrees with both files; its own gres.conf carries the same lines."""
    assert _check("rtxpro", gres=True) == []
    p = load_profile(SITES / "rtxpro.toml")
    gres = render_gres_conf(p, warn=lambda m: None)
    assert "NodeName=gpu-node01 AutoDetect=nvml" in gres
    assert "NodeName=gpu-node01 Name=shard Count=100 File=/dev/nvidia1" in gres
    assert "Gres=gpu:rtx_pro_6000:2,shard:200" in render_slurm_conf(p)


def test_cli_check_on_a_real_site_exits_1_with_lines():
    res = subprocess.run([sys.executable, "-m", "slurmkit", "site", "check", str(SITES / "shard_a100.toml"),
                          "--slurm-conf", str(SITES / "shard_a100_slurm.conf"),
                          "--gres-conf", str(SITES / "shard_a100_gres.conf")],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert "shard_a100_gres.conf:4: master: gres.conf Type=A100" in res.stdout
    assert "3 disagreement(s)" in res.stdout


@pytest.mark.slurm
@pytest.mark.versions
def test_real_slurmd_on_the_shard_guide_says_what_site_check_says(sandbox, tmp_path):
    """The shard guide's own pair through a real `slurmd -G` (Debian's Slurm 22.05; its device
    files faked under tmp_path as the sandbox fakes them): slurmd prints the warning site check quotes,
    with the line's count (4: one File=/dev/nvidia[0-3] line), reports the GPUs untyped, and gives
    each GPU 8 of the node-wide Name=shard Count=32 (which site check therefore accepts)."""
    import os
    import stat

    from slurmkit.sandbox.cluster import NVIDIA_MAJOR

    dev = tmp_path / "dev"
    dev.mkdir()
    for i in range(4):
        os.mknod(dev / f"nvidia{i}", 0o666 | stat.S_IFCHR, os.makedev(NVIDIA_MAJOR, i))
    (tmp_path / "spool").mkdir()
    site_conf = (SITES / "shard_a100_slurm.conf").read_text()
    (tmp_path / "slurm.conf").write_text(
        f"ClusterName=shardguide\nSlurmctldHost=localhost\nSlurmdSpoolDir={tmp_path / 'spool'}\n"
        f"AuthInfo=socket={sandbox.run_dir / 'munge.sock'}\n"
        "SelectType=select/cons_tres\n" + site_conf.replace("Gres=gpu:4,shard:32", "Gres=gpu:4,shard:32 CPUs=1")
        + "PartitionName=gpu Nodes=master\n")
    (tmp_path / "gres.conf").write_text((SITES / "shard_a100_gres.conf").read_text().replace("/dev/", f"{dev}/"))
    res = subprocess.run(["slurmd", "-G", "-N", "master"], env={**os.environ, "SLURM_CONF": str(tmp_path / "slurm.conf")},
                         capture_output=True, text=True, timeout=60)
    out = res.stdout + res.stderr
    [said] = [d for d in crosscheck(load_profile(SITES / "shard_a100.toml"), load_tree(tmp_path / "slurm.conf"),
                                    load_tree(tmp_path / "gres.conf")) if d.line == 4]
    quoted = said.slurm.split("'")[1]
    assert quoted == "A line in gres.conf for GRES gpu:A100 has 4 more configured than expected in slurm.conf. " \
                     "Ignoring extra GRES"
    assert quoted in out, out
    gpus = re.findall(r"Gres Name=gpu Type=(\S+) Count=1 Index=(\d)", out)
    shards = re.findall(r"Gres Name=shard Type=\S+ Count=(\d+) Index=(\d)", out)
    assert gpus == [("(null)", str(i)) for i in range(4)], out
    assert shards == [("8", str(i)) for i in range(4)], out


DOC = Path(__file__).resolve().parents[2] / "docs" / "site-profile.md"


@pytest.mark.parametrize("node_type, node", [("ocotillo-vis", "visualizacion1"), ("a100-mig", "mig1")])
def test_docs_worked_examples_give_the_lines_they_show(tmp_path, node_type, node):
    """docs/site-profile.md's mixed and MIG examples, copied as a user would (plus the [cluster] and
    partition a profile needs), generate exactly the slurm.conf / gres.conf lines printed under them
    (the MIG one lacked its CPU layout: its GPU's cpus = [0, 1] were outside a 1-CPU node)."""
    text = DOC.read_text()
    m = re.search(r"```toml\n(\[node_types\.%s\]\n.*?)```\n```\n(.*?)```" % re.escape(node_type), text, re.S)
    assert m, node_type
    path = tmp_path / "p.toml"
    path.write_text(f'[cluster]\nname = "c"\n[partitions.p]\nnodes = "{node}"\nnode_type = "{node_type}"\n' + m.group(1))
    p = load_profile(path)
    generated = render_slurm_conf(p).splitlines() + render_gres_conf(p, warn=lambda m: None).splitlines()
    for shown in m.group(2).splitlines():
        if " ... " in shown:  # the docs elide the CPU layout: match around it
            head, tail = shown.split(" ... ")
            assert any(g.startswith(head + " ") and g.endswith(" " + tail) for g in generated), shown
        else:
            assert shown in generated, shown


def _slurmd_G(tmp_path: Path, slurm_conf: str, gres_conf: str, node: str, sandbox) -> str:
    """``slurmd -G -N node`` (a real slurmd of the release under test; needs root for the faked
    /dev/nvidia0-3 under tmp_path) on a slurm.conf / gres.conf pair written to tmp_path; its output.
    The sandbox's munged signs for it: slurmd 24.11 and later load auth/munge even for -G."""
    import os
    import stat

    from slurmkit.sandbox.cluster import NVIDIA_MAJOR

    dev = tmp_path / "dev"
    if not dev.exists():
        dev.mkdir()
        for i in range(4):
            os.mknod(dev / f"nvidia{i}", 0o666 | stat.S_IFCHR, os.makedev(NVIDIA_MAJOR, i))
        (tmp_path / "spool").mkdir()
    (tmp_path / "slurm.conf").write_text(f"ClusterName=c\nSlurmctldHost=localhost\nSlurmdSpoolDir={tmp_path / 'spool'}\n"
                                         "SelectType=select/cons_tres\n" + slurm_conf
                                         + f"AuthInfo=socket={sandbox.run_dir / 'munge.sock'}\n")
    (tmp_path / "gres.conf").write_text(gres_conf.replace("/dev/", f"{dev}/"))
    res = subprocess.run(["slurmd", "-G", "-N", node], env={**os.environ, "SLURM_CONF": str(tmp_path / "slurm.conf")},
                         capture_output=True, text=True, timeout=60)
    return res.stdout + res.stderr


@pytest.mark.slurm
@pytest.mark.versions
def test_gres_types_lacking_shard_as_slurmd_says(sandbox, tmp_path):
    """The shard guide's slurm.conf edited to GresTypes=gpu (a hand edit of the real file): site check
    names the node's Gres=shard:32 and the gres.conf Name=shard line, quoting what a real slurmd prints."""
    site = (SITES / "shard_a100_slurm.conf").read_text().replace("GresTypes=gpu,shard", "GresTypes=gpu")
    out = _slurmd_G(tmp_path, site.replace("Gres=gpu:4,shard:32", "Gres=gpu:4,shard:32 CPUs=1"),
                    (SITES / "shard_a100_gres.conf").read_text(), "master", sandbox)
    found = crosscheck(load_profile(SITES / "shard_a100.toml"), load_tree(tmp_path / "slurm.conf"),
                       load_tree(tmp_path / "gres.conf"))
    said = {d.line: d for d in found if "GresTypes" in d.what}
    assert sorted(said) == [6, 7], found  # slurm.conf's node line (after the 4 added), gres.conf's shard line
    assert said[7].file.endswith("slurm.conf") and said[7].what.startswith("Gres=shard:32 but slurm.conf has GresTypes=gpu")
    assert said[6].file.endswith("gres.conf") and said[6].what == "Name=shard but slurm.conf has GresTypes=gpu without it"
    for d in said.values():
        assert d.slurm.split("'")[1] in out, (d.slurm, out)


def test_gpu_cores_against_the_profile_on_two_dgx1_gres_confs(corpus):
    """A DGX-1 profile (GPU0-3 on socket 0, GPU4-7 on socket 1) against two real DGX-1 gres.conf files.
    Slurm reads CPUs= as core indexes, like Cores= (slurmd -G of 22.05.8, 24.11.5 and 26.05.5 prints CPUs=3
    and Cores=3 alike;
    NVIDIA/deepops#1195: OS CPU ids there give 'invalid GRES core specification'): dgx1x4's
    CPUs=0-9 / 10-19 / 20-29 / 30-39, repeated for GPU4-7, put GPUs 2-5 on the other socket's cores;
    mknoxnv's CPUs=0-19,40-59 (OS CPU ids with their SMT siblings) name cores 40-59 a 40-core node lacks."""
    p = load_profile(SITES / "dgx1.toml")
    got = [d for d in crosscheck(p, None, load_tree(corpus / "sites" / "dgx1x4_gres.conf")) if "cores" in d.what]
    # every line names half a socket (refused by Slurm 24.11 and later); GPUs 2-5's are the other socket's
    assert [(d.line, d.nodes, d.what) for d in got if "part of socket" not in d.what] == [
        (3, "dgx[1-4]", "nvidia2: CPUs=20-29, the profile's GPU there is on cores 0-19"),
        (4, "dgx[1-4]", "nvidia3: CPUs=30-39, the profile's GPU there is on cores 0-19"),
        (5, "dgx[1-4]", "nvidia4: CPUs=0-9, the profile's GPU there is on cores 20-39"),
        (6, "dgx[1-4]", "nvidia5: CPUs=10-19, the profile's GPU there is on cores 20-39")]
    assert [d.line for d in got if "part of socket" in d.what] == list(range(1, 9))
    assert "enforce-binding" in next(d for d in got if d.line == 3 and "part of" not in d.what).slurm
    got = [d for d in crosscheck(p, None, load_tree(corpus / "slurm" / "gres.conf.dgx1")) if "cores" in d.what]
    assert [(d.line, d.nodes) for d in got] == [(i, "dgx[1-4]") for i in range(1, 9)]
    assert got[0].what == "CPUs=0-19,40-59 names cores 40-59 beyond the node type's 40 (Slurm core indexes, " \
                          "not OS CPU ids)"
    assert got[7].what.startswith("CPUs=20-39,60-79 names cores 60-79 beyond")
    assert "'invalid GRES core specification (0-19,40-59) on node <node>'" in got[0].slurm


def test_gpu_cores_given_as_cores(tmp_path):
    """Cores= (Slurm logical cores) compared as they are: the profile's own line agrees, one moved to
    the other socket is named."""
    p = load_profile(SITES / "dgx1.toml")
    lines = render_gres_conf(p, warn=lambda m: None)
    assert "NodeName=dgx[1-4] Name=gpu File=/dev/nvidia4 Cores=20-39" in lines
    (tmp_path / "gres.conf").write_text(lines)
    assert crosscheck(p, None, load_tree(tmp_path / "gres.conf")) == []
    (tmp_path / "gres.conf").write_text(lines.replace("nvidia4 Cores=20-39", "nvidia4 Cores=0-19"))
    [d] = crosscheck(p, None, load_tree(tmp_path / "gres.conf"))
    assert d.what == "nvidia4: Cores=0-19, the profile's GPU there is on cores 20-39"


@pytest.mark.slurm
@pytest.mark.versions
def test_real_slurmd_reads_cpus_as_cores(sandbox, tmp_path):
    """What site check assumes of gres.conf's deprecated CPUs=: a real slurmd (22.05) keeps the numbers
    as core indexes, as it does Cores=. On a node slurm.conf gives 1 socket x 2 cores x 2 threads,
    OS CPU 3 would be core 1; slurmd -G reports CPUs=3 as Cores=3, exactly as it reports Cores=3."""
    layout = "NodeName=master Gres=gpu:1 CPUs=4 Sockets=1 CoresPerSocket=2 ThreadsPerCore=2\n"
    seen = {}
    for spec in ("CPUs=3", "Cores=3"):
        out = _slurmd_G(tmp_path, "SlurmdParameters=config_overrides\nGresTypes=gpu\n" + layout,
                        f"Name=gpu File=/dev/nvidia0 {spec}\n", "master", sandbox)
        seen[spec] = re.findall(r"Gres Name=gpu .* (Cores=\S+ CoreCnt=\d+)", out)
    assert seen["CPUs=3"] == seen["Cores=3"] == ["Cores=3 CoreCnt=4"], seen


def test_a_type_spelt_in_another_case(tmp_path):
    """The shard guide's gres.conf writes Type=A100; a profile (and slurm.conf) saying a100: named as a
    case-only difference with what a real Slurm does (test_site_kinds_sandbox: registers, requests
    case-sensitive), not as a count or INVALID_REG problem."""
    text = (SITES / "shard_a100.toml").read_text().replace('model = "A100"', 'model = "a100"')
    (tmp_path / "p.toml").write_text(text)
    (tmp_path / "slurm.conf").write_text((SITES / "shard_a100_slurm.conf").read_text().replace(
        "Gres=gpu:4,shard:32", "Gres=gpu:a100:4,shard:32"))
    got = crosscheck(load_profile(tmp_path / "p.toml"), load_tree(tmp_path / "slurm.conf"),
                     load_tree(SITES / "shard_a100_gres.conf"))
    [d] = [d for d in got if d.file.endswith("gres.conf")]
    assert (d.line, d.what) == (4, "gres.conf gives gpu:A100:4, the profile gpu:a100:4")
    assert "Slurm 24.11 and 26.05 (24.11.5 and 26.05.5 seen; 23.02 to 24.05 not tested) set the node INVALID_REG" in d.slurm and "case-sensitive" in d.slurm
    (tmp_path / "slurm.conf").write_text((SITES / "shard_a100_slurm.conf").read_text().replace(
        "Gres=gpu:4,shard:32", "Gres=gpu:A100:4,shard:32"))
    [d] = [d for d in crosscheck(load_profile(tmp_path / "p.toml"), load_tree(tmp_path / "slurm.conf")) if d.line == 3]
    assert d.what == "slurm.conf Gres=gpu:A100:4,shard:32 spells the gpu types in another case than the profile " \
                     "(gpu:a100:4,shard:32)"
