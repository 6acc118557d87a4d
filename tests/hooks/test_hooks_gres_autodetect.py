"""gres.conf read as slurmd reads it (one tokenizer: slurmkit.slurm.syntax) and AutoDetect sites
checked: expected GPUs from the node's slurm.conf ``Gres=`` when gres.conf leaves the count to
NVML, files slurmd refuses refused with its reason.

Inputs: ../shared/corpus/sites/magic_castle-27_* (a gres.conf slurmd refused and slurmd's log
line), dgx1x4_slurm.conf and ocotillo_slurm.conf / ocotillo_gres.conf (real sites' NodeName ...
Gres= lines; ocotillo's visualizacion1 has two GPU types). The order slurmd numbers GPUs in is
read from Slurm 22.05.8's source: src/common/gres.c ``_merge_config`` (types in slurm.conf's
order, gres.conf lines within a type) and src/plugins/gres/gpu/gres_gpu.c
``_merge_system_gres_conf`` (AutoDetect: File, then NVML's NVLink self position)."""

from __future__ import annotations

import pytest

from slurmkit.hooks import gres
from slurmkit.slurm import gres_conf as gres_records

SITES = "sites"


def test_autodetect_only_gres_conf_takes_the_count_from_slurm_conf(corpus):
    slurm_conf = corpus / SITES / "dgx1x4_slurm.conf"
    lines = gres_records.parse("AutoDetect=nvml\n")
    assert gres.autodetect(lines, "dgx2") == "nvml"
    assert gres.slurm_conf_gres(slurm_conf, "dgx2") == [(None, 8)]
    files = gres.node_gpu_files(lines, "dgx2", slurm_gres=lambda: gres.slurm_conf_gres(slurm_conf, "dgx2"))
    assert files == [None] * 8
    # a node slurm.conf does not name cannot be expected: own trouble, said so
    with pytest.raises(gres.GresError, match="names no such node"):
        gres.node_gpu_files(lines, "gpu99", slurm_gres=lambda: gres.slurm_conf_gres(slurm_conf, "gpu99"))


def test_typed_line_without_count_takes_that_types_count(corpus):
    slurm_conf = corpus / SITES / "ocotillo_slurm.conf"
    assert gres.slurm_conf_gres(slurm_conf, "visualizacion1") == [("gtx970", 1), ("gtx1060", 1)]
    assert gres.slurm_conf_gres(slurm_conf, "ibtesla") == [("v100", 4)]
    lines = gres_records.parse("AutoDetect=nvml\nName=gpu Type=v100\n")
    assert gres.node_gpu_files(lines, "ibtesla", slurm_gres=lambda: gres.slurm_conf_gres(slurm_conf, "ibtesla")) \
        == [None] * 4  # not 1: the count is slurm.conf's
    lines = gres_records.parse("AutoDetect=nvml\nName=gpu Type=gtx970\nName=gpu Type=gtx1060\n")
    assert gres.node_gpu_files(lines, "visualizacion1",
                               slurm_gres=lambda: gres.slurm_conf_gres(slurm_conf, "visualizacion1")) == [None, None]


def test_a_gres_conf_slurmd_refuses_is_refused_with_its_reason(corpus):
    path = corpus / SITES / "magic_castle-27_gres.conf_autodetect-nvml_duplicate-Name-gpu.conf"
    slurmd_log = (corpus / SITES / "magic_castle-27_slurmd_fatal_duplicate-records.log").read_text()
    assert "fatal: gres.conf duplicate records for gpu" in slurmd_log
    lines = gres.load_gres_conf(path)
    with pytest.raises(gres.GresError) as info:
        gres.node_gpu_files(lines, "node2", str(path), slurm_gres=lambda: [(None, 1)])
    assert info.value.line == 8 and "fatal: gres.conf duplicate records for gpu" in str(info.value)
    assert str(info.value).startswith(f"{path}:8:")


def test_gres_conf_syntax_as_slurmd_reads_it(tmp_path):
    # edit (labelled) of the slinky-101 explicit 8 x H100 gres.conf shape: a quoted File=, an
    # escaped \\#, a continuation line and an Include
    (tmp_path / "gres.d").mkdir()
    (tmp_path / "gres.d" / "n2.conf").write_text("NodeName=n2 Name=gpu Type=h100 File=/dev/nvidia[0-1]\n")
    main = tmp_path / "gres.conf"
    main.write_text('# site gres.conf\nNodeName=n1 Name=gpu Type="h100" \\\n  File="/dev/nvidia[0-3]"  # four\n'
                    "NodeName=n1 Name=shard Count=8 Flags=note\\#1\nInclude gres.d/*.conf\n")
    lines = gres.load_gres_conf(main)
    assert gres.node_gpu_files(lines, "n1", str(main)) == [f"/dev/nvidia{i}" for i in range(4)]
    assert gres.node_gpu_files(lines, "n2", str(main)) == ["/dev/nvidia0", "/dev/nvidia1"]
    assert gres.node_shares_gpus(lines, "n1") and not gres.node_shares_gpus(lines, "n2")
    assert [(r.line, r.name, r.type, r.files[-1:], r.count, r.flags) for r in lines] == [
        (2, "gpu", "h100", ("/dev/nvidia3",), None, None), (4, "shard", None, (), 8, "note\\#1"),
        (1, "gpu", "h100", ("/dev/nvidia1",), None, None)]
    assert lines[2].file == str(tmp_path / "gres.d" / "n2.conf") and lines[2].nodes == ("n2",)
    main.write_text('NodeName=n1 Name=gpu File="/dev/nvidia0\n')
    with pytest.raises(gres.GresError, match="unterminated double quote") as info:
        gres.load_gres_conf(main)
    assert info.value.line == 1
    main.write_text("Include missing.conf\n")
    with pytest.raises(gres.GresError, match="does not exist"):
        gres.load_gres_conf(main)


def test_autodetect_node_runs_every_check_in_the_hook(node, healthy):
    """A node whose gres.conf says only AutoDetect=nvml: the prolog expects slurm.conf's count
    and judges (a count slurm.conf raises past what NVML sees fails); the duplicate file is own
    trouble with slurmd's reason, counted, and the GPUs are still judged by slurm.conf's Gres=."""
    path, snap = healthy
    n = len(snap["gpus"])
    node.write_config({"n1": path})
    node.gres_conf.write_text("AutoDetect=nvml\n")
    node.slurm_conf.write_text(f"ClusterName=t\nNodeName=n[1-2] CPUs=2 Gres=gpu:h100:{n}\n")
    r = node.run(node.prolog, gpus="0")
    assert r.returncode == 0, r.stderr
    assert "GPU checks skipped" not in r.stderr
    assert node.textfile("n1", "gpus")[("slurmkit_gpus_expected", (("node", "n1"),))] == n
    assert node.metric("n1", "prolog", "slurmkit_health_check_status", check="gpu_count", gpu="") == 0
    node.slurm_conf.write_text(f"ClusterName=t\nNodeName=n[1-2] CPUs=2 Gres=gpu:h100:{n + 1}\n")
    r = node.run(node.prolog, gpus="0")
    assert r.returncode == 1 and "gpu_count" in r.stderr
    before = node.metric("n1", "prolog", "slurmkit_hook_own_errors_total")
    node.gres_conf.write_text("AutoDetect=nvml\nName=gpu\nName=gpu\n")
    node.slurm_conf.write_text(f"ClusterName=t\nNodeName=n[1-2] CPUs=2 Gres=gpu:h100:{n}\n")
    r = node.run(node.prolog, gpus="0")
    assert r.returncode == 0 and "fatal: gres.conf duplicate records for gpu" in r.stderr
    assert f"gives n1 Gres=gpu:h100:{n}: checking its {n} GPUs against Gres= and NVML" in r.stderr
    assert node.metric("n1", "prolog", "slurmkit_health_check_status", check="gpu_count", gpu="") == 0
    assert node.metric("n1", "prolog", "slurmkit_hook_own_errors_total") == before + 1


def test_gpus_of_several_types_are_numbered_in_slurm_confs_type_order(corpus, tmp_path):
    """slurmd numbers a node's GPUs per type in the order its slurm.conf ``Gres=`` names the
    types, not in gres.conf line order (gres.c ``_merge_config``): a real job on interleaved
    lines ``b, a, b`` got index 2 for the ``a`` GPU on Slurm 22.05."""
    gres_conf, slurm_conf = corpus / SITES / "ocotillo_gres.conf", corpus / SITES / "ocotillo_slurm.conf"
    lines = gres.load_gres_conf(gres_conf)
    as_site = gres.node_gpu_files(lines, "visualizacion1", str(gres_conf),
                                  slurm_gres=lambda: gres.slurm_conf_gres(slurm_conf, "visualizacion1"))
    assert as_site == ["/dev/nvidia0", "/dev/nvidia1"]  # Gres=gpu:gtx970:1,gpu:gtx1060:1: line order
    # edit (labelled) of ocotillo's visualizacion1: slurm.conf names gtx1060 first
    assert gres.node_gpu_files(lines, "visualizacion1", str(gres_conf),
                               slurm_gres=lambda: [("gtx1060", 1), ("gtx970", 1)]) == ["/dev/nvidia1", "/dev/nvidia0"]
    # edit (labelled) of the same node: interleaved b, a, b lines, slurm.conf b first
    lines = gres_records.parse("NodeName=v1 Name=gpu Type=b File=/dev/nvidia0\n"
                                 "NodeName=v1 Name=gpu Type=a File=/dev/nvidia1\n"
                                 "NodeName=v1 Name=gpu Type=B File=/dev/nvidia2\n")
    files = gres.node_gpu_files(lines, "v1", slurm_gres=lambda: [("b", 2), ("a", 1)])
    assert files == ["/dev/nvidia0", "/dev/nvidia2", "/dev/nvidia1"]  # the a GPU is index 2
    # a type slurm.conf names twice counts once, in its first place; counts cut what gres.conf has
    assert gres.node_gpu_files(lines, "v1", slurm_gres=lambda: [("a", 1), ("b", 1), ("b", 0)]) \
        == ["/dev/nvidia1", "/dev/nvidia0"]
    # untyped Gres=gpu:3 takes the lines in order
    assert gres.node_gpu_files(lines, "v1", slurm_gres=lambda: [(None, 3)]) == [f"/dev/nvidia{i}" for i in range(3)]
    # several types and a slurm.conf that does not name the node: the order is unknown, said so
    with pytest.raises(gres.GresError, match="order of v1's GPUs of several types"):
        gres.node_gpu_files(lines, "v1", slurm_gres=lambda: None)
    # AutoDetect=nvml: every GPU slurmd keeps is ordered by NVML, whatever the File= lines
    auto = gres_records.parse("AutoDetect=nvml\n" + "".join(f"{gl}\n" for gl in (
        "NodeName=v1 Name=gpu Type=b File=/dev/nvidia0", "NodeName=v1 Name=gpu Type=a File=/dev/nvidia1")))
    assert gres.node_gpu_files(auto, "v1", slurm_gres=lambda: [("b", 1), ("a", 1)]) == [None, None]


def test_a_mig_instance_of_multiple_files_is_one_gres_on_its_gpu(tmp_path):
    """slurmkit's own MIG gres.conf (tests/topology/kinds/kinds.toml's mig1: two 3g.20gb instances
    on GPU0, each ``MultipleFiles=<GPU>,<GI cap>,<CI cap>``): Slurm's GPU index k is the k-th
    instance, and its GPU is the line's first file, never a capability file."""
    from pathlib import Path

    from slurmkit.profile import load_profile
    from slurmkit.profile.slurmconf import render_gres_conf

    kinds = load_profile(Path(__file__).resolve().parents[1] / "topology" / "kinds" / "kinds.toml")
    path = tmp_path / "gres.conf"
    path.write_text(render_gres_conf(kinds, device_dir="/dev", warn=lambda m: None))
    assert "MultipleFiles=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap21,/dev/nvidia-caps/nvidia-cap22" in path.read_text()
    assert gres.node_gpu_files(gres.load_gres_conf(path), "mig1") == ["/dev/nvidia0", "/dev/nvidia0"]
