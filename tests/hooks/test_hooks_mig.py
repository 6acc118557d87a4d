"""MIG nodes through the real hook shims: the expected GPUs are physical GPUs, the instances
gres.conf lists are judged by ``mig_instances``.

Inputs: the real A100 MIG capture ../shared/corpus/nvidia-smi-q/a100-sxm4-v12.xml (one
A100-SXM4-80GB, minor 1, four 1g.20gb instances; read through a copy whose Attached GPUs says 1,
see tests/health/test_health_mig.py), and the fake NVML (tests/fake_nvml) with MIG devices, read
live through the real pynvml and replayed from its snapshot.
"""

from __future__ import annotations

import json

import pytest

from nodeenv import Node, record_snapshot

pytestmark = pytest.mark.corpus


def _a100(corpus, tmp_path, drop_last: bool = False):
    text = (corpus / "nvidia-smi-q" / "a100-sxm4-v12.xml").read_text()
    text = text.replace("<attached_gpus>4</attached_gpus>", "<attached_gpus>1</attached_gpus>")
    if drop_last:  # an EDIT of the real capture: its last <mig_device> (GPU instance 6) removed
        start = text.rindex("<mig_device>")
        text = text[:start] + text[text.index("</mig_device>", start) + len("</mig_device>"):]
    path = tmp_path / ("a100-mig-edited.xml" if drop_last else "a100-mig.xml")
    path.write_text(text)
    return path


GRES = {
    "magic_castle": ("AutoDetect=off\nNodeName=n1 Name=gpu Type=a100_1g.20gb Count=4 "
                     "File=/dev/nvidia-mig-a100_1g.20gb-[0-3]\n", "a100_1g.20gb"),
    "autodetect_nvml": ("AutoDetect=nvml\n", "a100_1g.20gb"),
    "multiple_files": ("".join(f"NodeName=n1 Name=gpu Type=nvidia_a100_1g.20gb MultipleFiles=/dev/nvidia1,"
                               f"/dev/nvidia-caps/nvidia-cap{c},/dev/nvidia-caps/nvidia-cap{c + 1}\n"
                               for c in (165, 174, 183, 192)), "nvidia_a100_1g.20gb"),
}


@pytest.mark.parametrize("style", sorted(GRES))
def test_health_check_on_the_a100_mig_capture(corpus, tmp_path, style):
    gres_text, gtype = GRES[style]
    node = Node(tmp_path / "node", slurm_conf_text=f"ClusterName=t\nNodeName=n1 CPUs=2 Gres=gpu:{gtype}:4\n", gpus=1)
    node.gres_conf.write_text(gres_text)
    node.write_config({"n1": _a100(corpus, tmp_path)}, mode="observe")
    r = node.run(node.healthcheck, job_id=None, gpus=None)
    assert r.returncode == 0 and "would drain" not in r.stderr and "own trouble" not in r.stderr, r.stderr
    assert "gpu_count" not in r.stderr
    node.write_config({"n1": _a100(corpus, tmp_path, drop_last=True)}, mode="observe")
    r = node.run(node.healthcheck, job_id=None, gpus=None)
    assert "would drain n1: slurmkit: mig_instances GPU0 0000:01:00.0: 1g.20gb missing (3 of 4 seen)" in r.stderr, \
        r.stderr
    assert "gpu_count" not in r.stderr


def test_live_mig_devices_replay_as_read_and_are_judged(fake_nvml, tmp_path):
    """Two fake H100s (NVML GPU0 minor 1, GPU1 minor 0) in MIG mode: 2x 3g.40gb and 2x 1g.10gb +
    2g.20gb; the live read and its snapshot give the same instances, and a gres.conf naming
    them by /dev/nvidiaN passes until one is gone."""
    from slurmkit.health.source import SnapshotSource

    mig = "0:1:3:40320,0:2:3:40320,1:9:1:9984,1:10:1:9984,1:3:2:20096"
    snap = record_snapshot(fake_nvml, tmp_path / "mig.json", gpus=2, mig=mig)
    got = {g["index"]: g["values"]["mig_devices"]["value"] for g in snap["gpus"]}
    assert [(d["gpu_instance_id"], d["profile"], d["slices"], d["memory_mib"]) for d in got[0]] == \
        [(1, "3g.40gb", 3, 40320), (2, "3g.40gb", 3, 40320)]
    assert [(d["gpu_instance_id"], d["profile"]) for d in got[1]] == [(9, "1g.10gb"), (10, "1g.10gb"), (3, "2g.20gb")]
    assert got[1][0]["uuid"].startswith("MIG-")
    replayed = SnapshotSource(tmp_path / "mig.json").read()
    assert {g.index: g.get("mig_devices") for g in replayed.gpus} == got
    minor = {g["index"]: g["minor_number"] for g in snap["gpus"]}
    lines = [("nvidia_h100_3g.40gb", minor[0]), ("nvidia_h100_3g.40gb", minor[0]), ("nvidia_h100_1g.10gb", minor[1]),
             ("nvidia_h100_1g.10gb", minor[1]), ("nvidia_h100_2g.20gb", minor[1])]
    node = Node(tmp_path / "node", slurm_conf_text="ClusterName=t\nNodeName=n1 CPUs=2 Gres=gpu:nvidia_h100_3g.40gb:2,"
                "gpu:nvidia_h100_1g.10gb:2,gpu:nvidia_h100_2g.20gb:1\n", gpus=2)
    node.gres_conf.write_text("".join(f"NodeName=n1 Name=gpu Type={t} MultipleFiles=/dev/nvidia{m},"
                                      f"/dev/nvidia-caps/nvidia-cap{100 + k}\n" for k, (t, m) in enumerate(lines)))
    node.write_config({"n1": tmp_path / "mig.json"}, mode="observe")
    r = node.run(node.healthcheck, job_id=None, gpus=None)
    assert r.returncode == 0 and "would drain" not in r.stderr and "own trouble" not in r.stderr, r.stderr
    gone = json.loads(json.dumps(snap))
    g1 = next(g for g in gone["gpus"] if g["index"] == 1)
    g1["values"]["mig_devices"]["value"] = g1["values"]["mig_devices"]["value"][:2]  # the 2g.20gb destroyed
    (tmp_path / "gone.json").write_text(json.dumps(gone))
    node.write_config({"n1": tmp_path / "gone.json"}, mode="observe")
    r = node.run(node.healthcheck, job_id=None, gpus=None)
    assert f"would drain n1: slurmkit: mig_instances GPU1 {g1['pci_bus_id']}: 2g.20gb missing (2 of 3 seen)" \
        in r.stderr, r.stderr
