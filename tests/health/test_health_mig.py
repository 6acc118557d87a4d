"""MIG nodes: a GPU's instances are read beside it (never as GPUs), gres.conf's MIG records are
instances of a parent GPU, and the ``mig_instances`` check judges them.

Input: ../shared/corpus/nvidia-smi-q/a100-sxm4-v12.xml, a real ``nvidia-smi -q -x`` capture
(telegraf's test data, driver 535.54.03): one A100-SXM4-80GB (minor number 1, bus
00000000:01:00.0) in MIG mode with four MIG devices, each 14 SMs, 1 copy engine and 19968 MiB of
the GPU's 81920 MiB: four 1g.20gb instances (GPU instance ids 3-6). Its ``attached_gpus`` says 4
for its one ``<gpu>`` section (taken with ``nvidia-smi -i``): it is read through a copy that says
1, as tests/health/test_health_corpus.py does. Expected values are read off the XML here with
ElementTree, independently of the importer.

The gres.conf texts are the three ways sites list MIG instances: Magic Castle's Puppet template
(../shared/corpus/sites/turn4/gres.conf.epp.TEMPLATE: ``Type=<profile> Count=N
File=/dev/nvidia-mig-<profile>-<i>,...``), ``AutoDetect=nvml`` with the typed count in slurm.conf's
``Gres=``, and the ``MultipleFiles=/dev/nvidiaN,<GI cap>,<CI cap>`` lines Slurm's NVML
AutoDetect and slurmkit's gres.conf writer give each instance.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest

from slurmkit.health.checks import evaluate
from slurmkit.health.config import load_config
from slurmkit.health.mig import instance_profile, physical_gpu_count, place_instances
from slurmkit.health.source import load_capture
from slurmkit.health.state import NodeState
from slurmkit.hooks import gres
from slurmkit.mig import model_for
from slurmkit.slurm import gres_conf

pytestmark = pytest.mark.corpus

CAPTURE = "a100-sxm4-v12.xml"

#: gres.conf styles for the capture's node ``n1`` (slurm.conf ``Gres=`` beside each): its four
#: 1g.20gb instances on the GPU of minor 1.
STYLES = {
    "magic_castle": ("AutoDetect=off\nNodeName=n1 Name=gpu Type=a100_1g.20gb Count=4 "
                     "File=/dev/nvidia-mig-a100_1g.20gb-0,/dev/nvidia-mig-a100_1g.20gb-1,"
                     "/dev/nvidia-mig-a100_1g.20gb-2,/dev/nvidia-mig-a100_1g.20gb-3\n",
                     "NodeName=n1 CPUs=2 Gres=gpu:a100_1g.20gb:4\n"),
    "autodetect_nvml": ("AutoDetect=nvml\n", "NodeName=n1 CPUs=2 Gres=gpu:a100_1g.20gb:4\n"),
    "multiple_files": ("".join(f"NodeName=n1 Name=gpu Type=nvidia_a100_1g.20gb MultipleFiles=/dev/nvidia1,"
                               f"/dev/nvidia-caps/nvidia-cap{c},/dev/nvidia-caps/nvidia-cap{c + 1}\n"
                               for c in (165, 174, 183, 192)),
                       "NodeName=n1 CPUs=2 Gres=gpu:nvidia_a100_1g.20gb:4\n"),
}


def _capture_text(corpus) -> str:
    text = (corpus / "nvidia-smi-q" / CAPTURE).read_text()
    assert text.count("<attached_gpus>4</attached_gpus>") == 1 and text.count("<gpu id=") == 1
    return text.replace("<attached_gpus>4</attached_gpus>", "<attached_gpus>1</attached_gpus>")


def _write(tmp_path, text: str, name: str = "a100-mig.xml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def _without_last_mig_device(text: str) -> str:
    """An EDIT of the real capture (not a capture itself): its last <mig_device> (index 3, GPU
    instance 6) removed, as a node whose instance was destroyed would show it."""
    start = text.rindex("<mig_device>")
    end = text.index("</mig_device>", start) + len("</mig_device>")
    return text[:start] + text[end:]


def _expect(gres_text: str, slurm_conf_text: str, tmp_path):
    """The hooks' reading of a gres.conf for n1: (physical GPUs expected, expected instances)."""
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=t\n" + slurm_conf_text)
    lines = gres_conf.parse(gres_text)
    whole, inst = gres.node_mig_instances(lines, "n1", slurm_gres=lambda: gres.slurm_conf_gres(conf, "n1"))
    return physical_gpu_count(whole, inst), inst


def _judge(state: NodeState, gres_text: str, slurm_conf_text: str, tmp_path) -> dict:
    gpus, inst = _expect(gres_text, slurm_conf_text, tmp_path)
    cfg = load_config(gpu_count=gpus)
    cfg.expect["mig_instances"] = inst
    return evaluate(state, cfg)


def test_the_capture_reads_one_gpu_carrying_its_four_instances(corpus, tmp_path):
    path = _write(tmp_path, _capture_text(corpus))
    state = load_capture(path)
    gpu = ET.parse(path).getroot().find("gpu")
    devs = gpu.findall("mig_devices/mig_device")
    assert len(state.gpus) == 1 and len(devs) == 4  # one GPU, its instances are not GPUs
    g = state.gpus[0]
    assert (g.minor_number, g.pci_bus_id, g.get("mig_current")) == (int(gpu.findtext("minor_number")), "0000:01:00.0",
                                                                    True)
    got = g.get("mig_devices")
    assert [(d["index"], d["gpu_instance_id"], d["compute_instance_id"], d["sm_count"], d["memory_mib"])
            for d in got] == [(int(x.findtext("index")), int(x.findtext("gpu_instance_id")),
                               int(x.findtext("compute_instance_id")),
                               int(x.findtext("device_attributes/shared/multiprocessor_count")),
                               int(x.findtext("fb_memory_usage/total").split()[0])) for x in devs]
    assert [d["gpu_instance_id"] for d in got] == [3, 4, 5, 6]
    # 19968 of 81920 MiB on the 8-slot A100 80GB = 2 memory slots, 1 copy engine = 1 slice: 1g.20gb
    assert [d["profile"] for d in got] == ["1g.20gb"] * 4
    assert g.values["mig_devices"].source == "nvidia-smi:mig_devices"
    # a snapshot keeps them as they are
    again = NodeState.from_json(json.loads(json.dumps(state.to_json())), "snapshot:x")
    assert again.gpus[0].get("mig_devices") == got


def test_instance_profiles_from_slices_and_memory():
    a100, a30 = model_for("NVIDIA A100-SXM4-80GB"), model_for("NVIDIA A30")
    # the capture's instance, and the other A100 80GB profiles by their guide memory sizes
    assert instance_profile(a100, 1, 19968, 81920) == "1g.20gb"
    assert instance_profile(a100, 1, 9856, 81920) == "1g.10gb"
    assert instance_profile(a100, 3, 40192, 81920) == "3g.40gb"
    assert instance_profile(a100, 4, 40192, 81920) == "4g.40gb"
    # the whole-GPU profile whatever its copy engines say
    assert instance_profile(a100, 8, 80896, 81920) == "7g.80gb"
    assert instance_profile(a30, 2, 11968, 24576) == "2g.12gb"
    assert instance_profile(a100, 5, 40192, 81920) is None  # no such profile
    assert instance_profile(None, 1, 19968, 81920) is None


@pytest.mark.parametrize("style", sorted(STYLES))
def test_the_capture_with_its_nodes_mig_gres_conf_passes_healthy(corpus, tmp_path, style):
    gres_text, slurm_text = STYLES[style]
    gpus, inst = _expect(gres_text, slurm_text, tmp_path)
    assert gpus == 1 and [e["profile"] for e in inst] == ["1g.20gb"] * 4  # 1 GPU carrying 4 instances
    rep = _judge(load_capture(_write(tmp_path, _capture_text(corpus))), gres_text, slurm_text, tmp_path)
    assert rep["status"] in ("pass", "warn"), [r for r in rep["results"] if r["status"] == "fail"]
    count = [(r["status"], r["value"], r["limit"]) for r in rep["results"] if r["check"] == "gpu_count"]
    assert count == [("pass", 1, 1)]
    mig = [(r["status"], r["gpu_index"], r["pci_bus_id"], r["value"]) for r in rep["results"]
           if r["check"] == "mig_instances"]
    assert mig == [("pass", 0, "0000:01:00.0", "4 of 4")]


@pytest.mark.parametrize("style", sorted(STYLES))
def test_a_missing_instance_fails_naming_it_and_its_parent_gpu(corpus, tmp_path, style):
    gres_text, slurm_text = STYLES[style]
    edited = _without_last_mig_device(_capture_text(corpus))
    state = load_capture(_write(tmp_path, edited, "a100-mig-one-instance-removed.xml"))
    assert [d["gpu_instance_id"] for d in state.gpus[0].get("mig_devices")] == [3, 4, 5]
    rep = _judge(state, gres_text, slurm_text, tmp_path)
    assert rep["status"] == "fail"
    fails = [r for r in rep["results"] if r["status"] == "fail"]
    assert [(r["check"], r["gpu_index"], r["pci_bus_id"], r["value"]) for r in fails] == \
        [("mig_instances", 0, "0000:01:00.0", "1g.20gb missing")]
    assert "3 of 4 expected instances seen" in fails[0]["message"]
    from slurmkit.health.result import CheckResult

    assert CheckResult(**fails[0]).reason() == "slurmkit: mig_instances GPU0 0000:01:00.0: 1g.20gb missing (3 of 4 seen)"
    # which of the four records lost its instance a capture does not say: all four are named
    where = {"multiple_files": "gres.conf:1, gres.conf:2, gres.conf:3, gres.conf:4",
             "magic_castle": "gres.conf:2", "autodetect_nvml": "slurm.conf Gres="}[style]
    assert f"1g.20gb instance (one of 4: {where}) missing on GPU0 0000:01:00.0" in fails[0]["message"]
    # the GPU is still counted once: no gpu_count failure beside it
    assert [r["status"] for r in rep["results"] if r["check"] == "gpu_count"] == ["pass"]


def test_a_gpu_that_should_carry_instances_but_is_not_in_mig_mode_fails_on_its_own(corpus, tmp_path):
    text = _capture_text(corpus)
    start, end = text.index("<mig_devices>"), text.index("</mig_devices>") + len("</mig_devices>")
    # an EDIT of the real capture: MIG mode off, no MIG devices (as nvidia-smi prints such a GPU)
    edited = (text[:start] + "<mig_devices>\n\t\t\tNone\n\t\t</mig_devices>" + text[end:]) \
        .replace("<current_mig>Enabled</current_mig>", "<current_mig>Disabled</current_mig>") \
        .replace("<pending_mig>Enabled</pending_mig>", "<pending_mig>Disabled</pending_mig>")
    state = load_capture(_write(tmp_path, edited, "a100-mig-off.xml"))
    assert state.gpus[0].get("mig_devices") is None
    gres_text, slurm_text = STYLES["multiple_files"]
    rep = _judge(state, gres_text, slurm_text, tmp_path)
    fails = [r for r in rep["results"] if r["status"] == "fail"]
    assert [(r["check"], r["gpu_index"], r["value"]) for r in fails] == [("mig_instances", 0, "MIG off")]
    from slurmkit.health.result import CheckResult

    assert CheckResult(**fails[0]).reason() == \
        "slurmkit: mig_instances GPU0 0000:01:00.0: not in MIG mode (4 instances expected)"
    # the AutoDetect form names no GPU: no GPU in MIG mode carries them
    gres_text, slurm_text = STYLES["autodetect_nvml"]
    fails = [r for r in _judge(state, gres_text, slurm_text, tmp_path)["results"] if r["status"] == "fail"]
    assert {(r["check"], r["value"]) for r in fails} == {("mig_instances", "1g.20gb missing")}
    assert all("no GPU is in MIG mode" in r["message"] for r in fails) and len(fails) == 4


def test_instances_map_to_their_parent_gpu(corpus, tmp_path):
    state = load_capture(_write(tmp_path, _capture_text(corpus)))
    g = state.gpus[0]
    for style in STYLES:
        _, inst = _expect(*STYLES[style], tmp_path)
        placed = place_instances(inst, state)
        assert [(p.index, d["gpu_instance_id"]) for _, p, d in placed] == [(0, 3), (0, 4), (0, 5), (0, 6)], style
        assert all(p is g for _, p, _ in placed)
    # a record naming another GPU's device (/dev/nvidia0: minor 0, not the capture's 1) has no parent here
    lines = gres_conf.parse("NodeName=n1 Name=gpu Type=nvidia_a100_1g.20gb "
                            "MultipleFiles=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap21,/dev/nvidia-caps/nvidia-cap22\n")
    whole, inst = gres.node_mig_instances(lines, "n1")
    assert (whole, physical_gpu_count(whole, inst)) == (0, 1)
    assert [(p, d) for _, p, d in place_instances(inst, state)] == [(None, None)]


def test_whole_gpus_and_instances_are_told_apart():
    lines = gres_conf.parse("NodeName=n1 Name=gpu Type=h100 File=/dev/nvidia[0-1]\n"
                            "NodeName=n1 Name=gpu Type=nvidia_h100_3g.40gb MultipleFiles=/dev/nvidia2,"
                            "/dev/nvidia-caps/nvidia-cap300,/dev/nvidia-caps/nvidia-cap301\n"
                            "NodeName=n1 Name=gpu Type=nvidia_h100_3g.40gb MultipleFiles=/dev/nvidia2,"
                            "/dev/nvidia-caps/nvidia-cap309,/dev/nvidia-caps/nvidia-cap310\n"
                            "NodeName=n1 Name=gpu Type=nvidia_h100_1g.10gb MultipleFiles=/dev/nvidia3,"
                            "/dev/nvidia-caps/nvidia-cap400,/dev/nvidia-caps/nvidia-cap401\n")
    whole, inst = gres.node_mig_instances(lines, "n1")
    assert whole == 2 and [e["profile"] for e in inst] == ["3g.40gb", "3g.40gb", "1g.10gb"]
    assert physical_gpu_count(whole, inst) == 4  # two whole GPUs, two parents
    # no MIG record: the whole count is node_gpu_files' count
    lines = gres_conf.parse("NodeName=n1 Name=gpu Type=h100 File=/dev/nvidia[0-3]\n")
    assert gres.node_mig_instances(lines, "n1") == (4, [])
    # parents not named: at least as many GPUs as their compute slices need (7 a GPU)
    lines = gres_conf.parse("NodeName=n1 Name=gpu Type=1g.10gb Count=14 File=/dev/nvidia-mig-1g.10gb-[0-13]\n")
    whole, inst = gres.node_mig_instances(lines, "n1")
    assert (whole, len(inst), physical_gpu_count(whole, inst)) == (0, 14, 2)


def test_a_capture_without_the_mig_devices_part_is_not_judged_as_missing_instances(corpus, tmp_path):
    text = _capture_text(corpus)
    start, end = text.index("<mig_devices>"), text.index("</mig_devices>") + len("</mig_devices>")
    # an EDIT of the real capture: MIG on, but no <mig_devices> element (a reader that cannot
    # see the instances must not take them for gone)
    state = load_capture(_write(tmp_path, text[:start] + text[end:], "a100-mig-no-devices-part.xml"))
    g = state.gpus[0]
    assert g.get("mig_current") is True and g.rc("mig_devices") == "NOT_AVAILABLE"
    rep = _judge(state, *STYLES["multiple_files"], tmp_path)
    assert rep["status"] == "warn", [r for r in rep["results"] if r["status"] != "pass"]
    assert [(r["status"], r["value"]) for r in rep["results"] if r["check"] == "mig_instances"] == \
        [("warn", "MIG devices not read (NOT_AVAILABLE)")]


def test_a_gpu_in_mig_mode_is_not_judged_for_leftovers_before_a_job(corpus, tmp_path):
    """The parent's processes and memory are every instance's: another job's process on a
    sibling instance is no leftover of this job's GPU."""
    text = _capture_text(corpus).replace(  # an EDIT of the real capture: a process on one instance
        "<processes />", "<processes><process_info><gpu_instance_id>3</gpu_instance_id>"
        "<compute_instance_id>0</compute_instance_id><pid>4242</pid><type>C</type>"
        "<process_name>python</process_name><used_memory>9000 MiB</used_memory></process_info></processes>")
    state = load_capture(_write(tmp_path, text.replace("<used>12 MiB</used>", "<used>9012 MiB</used>", 1)))
    assert state.gpus[0].get("processes") == [{"pid": 4242, "used_mib": 9000}]
    gpus, inst = _expect(*STYLES["multiple_files"], tmp_path)
    cfg = load_config(gpu_count=gpus)
    cfg.expect["mig_instances"] = inst
    rep = evaluate(state, cfg, before_job=True)
    assert not [r for r in rep["results"] if r["check"] in ("leftover_processes", "memory_used")]
    assert rep["status"] in ("pass", "warn"), [r for r in rep["results"] if r["status"] == "fail"]


def test_untyped_autodetect_gres_counts_each_instance_as_slurm_does(corpus, tmp_path):
    """DeepOps' MIG nodes (../shared/corpus/sites/turn4/deepops-1214_*: slurmd's NVML AutoDetect
    registers each instance as an untyped gpu, 'Type:(null) Count:1 ... File:/dev/nvidia1,
    /dev/nvidia-caps/...'): gres.conf AutoDetect=nvml, slurm.conf Gres=gpu:4, and the real capture's
    one GPU carrying four instances is the node's 4 gpu gres, not '1 of 4 GPUs'."""
    log = (corpus / "sites" / "turn4" / "deepops-1214_slurmd_autodetect-nvml_A100-MIG_Links.TRUNCATED.log").read_text()
    assert "GRES[gpu] Type:(null) Count:1" in log and "/dev/nvidia-caps/nvidia-cap" in log
    gpus, inst = _expect("AutoDetect=nvml\n", "NodeName=n1 CPUs=2 Gres=gpu:4\n", tmp_path)
    assert (gpus, inst) == (4, [])
    rep = _judge(load_capture(_write(tmp_path, _capture_text(corpus))), "AutoDetect=nvml\n",
                 "NodeName=n1 CPUs=2 Gres=gpu:4\n", tmp_path)
    count = [(r["status"], r["value"], r["limit"]) for r in rep["results"] if r["check"] == "gpu_count"]
    assert count == [("pass", 4, 4)]
    # one instance destroyed: 3 gres of 4, and the message says how they were counted
    state = load_capture(_write(tmp_path, _without_last_mig_device(_capture_text(corpus)), "edit.xml"))
    rep = _judge(state, "AutoDetect=nvml\n", "NodeName=n1 CPUs=2 Gres=gpu:4\n", tmp_path)
    [fail] = [r for r in rep["results"] if r["status"] == "fail"]
    assert (fail["check"], fail["value"], fail["limit"]) == ("gpu_count", 3, 4)
    assert "3 gres: 3 MIG instances on 1 GPU(s) count one each" in fail["message"]


@pytest.mark.parametrize("layout, gpus", [({"1c.7g.80gb": 7}, 1), ({"1c.3g.40gb": 3, "1g.10gb": 4}, 1),
                                          ({"3g.40gb": 4}, 2)])
def test_compute_instance_types_share_their_gpu_instance(tmp_path, layout, gpus):
    """AutoDetect=nvml with compute-instance types in slurm.conf: 7 x 1c.7g.80gb are one GPU
    instance of one GPU, not 7 GPUs."""
    spec = ",".join(f"gpu:nvidia_a100_{p}:{n}" for p, n in layout.items())
    assert _expect("AutoDetect=nvml\n", f"NodeName=n1 CPUs=2 Gres={spec}\n", tmp_path)[0] == gpus


def test_a_media_extension_instance_reads_as_its_plain_twin(corpus, tmp_path):
    """mig-parted's all-1g.10gb.me layout on the capture's A100 80GB: an EDIT of the real capture
    whose first instance is a 1g.10gb+me (9856 MiB, its media engines: 1 JPEG, 1 OFA) beside six
    1g.10gb; gres.conf types it nvidia_a100_1g.10gb+me. The capture cannot tell +me apart: it
    matches."""
    text = _capture_text(corpus).replace("<total>19968 MiB</total>", "<total>9856 MiB</total>")
    start = text.index("<mig_device>")
    block = text[start:text.index("</mig_device>", start) + len("</mig_device>")]
    text = text.replace(block, block + block * 2, 1)  # 6 instances of 1g.10gb... plus the +me below
    text = text.replace("<jpg_count>0</jpg_count>", "<jpg_count>1</jpg_count>", 1).replace(
        "<ofa_count>0</ofa_count>", "<ofa_count>1</ofa_count>", 1)
    n = text.count("<mig_device>")
    parts = text.split("<mig_device>")  # each instance its own MIG device index and GPU instance id
    for k in range(1, len(parts)):
        parts[k] = re.sub(r"<index>\d+</index>", f"<index>{k - 1}</index>", parts[k], count=1)
        parts[k] = re.sub(r"<gpu_instance_id>\d+</gpu_instance_id>", f"<gpu_instance_id>{k + 6}</gpu_instance_id>",
                          parts[k], count=1)
    text = "<mig_device>".join(parts)
    gres_text = ("NodeName=n1 Name=gpu Type=nvidia_a100_1g.10gb+me MultipleFiles=/dev/nvidia1,"
                 "/dev/nvidia-caps/nvidia-cap12,/dev/nvidia-caps/nvidia-cap13\n"
                 + "".join(f"NodeName=n1 Name=gpu Type=nvidia_a100_1g.10gb MultipleFiles=/dev/nvidia1,"
                           f"/dev/nvidia-caps/nvidia-cap{c},/dev/nvidia-caps/nvidia-cap{c + 1}\n"
                           for c in range(21, 21 + 9 * (n - 1), 9)))
    slurm_text = f"NodeName=n1 CPUs=2 Gres=gpu:nvidia_a100_1g.10gb+me:1,gpu:nvidia_a100_1g.10gb:{n - 1}\n"
    rep = _judge(load_capture(_write(tmp_path, text)), gres_text, slurm_text, tmp_path)
    mig = [(r["status"], r["value"]) for r in rep["results"] if r["check"] == "mig_instances"]
    assert mig == [("pass", f"{n} of {n}")], [r for r in rep["results"] if r["status"] == "fail"]


def test_health_check_cli_judges_the_node_types_instances(corpus, tmp_path):
    """`slurmkit health check --from CAPTURE --site PROFILE --node N`: the node type's MIG layout is
    what the instances are judged against (the real capture passes, its labelled edit with one
    instance removed fails mig_instances)."""
    from click.testing import CliRunner

    from slurmkit.cli import cli

    (tmp_path / "p.toml").write_text('[cluster]\nname = "t"\n[partitions.p]\nnodes = "n1"\nnode_type = "m"\n'
                                     '[node_types.m]\nsockets = 1\ncores_per_socket = 2\n'
                                     'gpu_groups = [{ count = 1, nvml_name = "NVIDIA A100-SXM4-80GB", '
                                     'mig = { "1g.20gb" = 4 } }]\n')
    ok = _write(tmp_path, _capture_text(corpus))
    bad = _write(tmp_path, _without_last_mig_device(_capture_text(corpus)), "edit.xml")
    args = ["health", "check", "--site", str(tmp_path / "p.toml"), "--node", "n1", "--expect-gpus", "1", "--json"]
    res = CliRunner().invoke(cli, args + ["--from", str(ok)])
    rep = json.loads(res.output)
    assert [(r["status"], r["value"]) for r in rep["results"] if r["check"] == "mig_instances"] == [("pass", "4 of 4")]
    res = CliRunner().invoke(cli, args + ["--from", str(bad)])
    rep = json.loads(res.output)
    assert [(r["status"], r["value"]) for r in rep["results"] if r["check"] == "mig_instances"] == \
        [("fail", "1g.20gb missing")]
