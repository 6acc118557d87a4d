"""The real captures in ../shared/corpus/nvidia-smi-q/ and ../shared/corpus/logs/ through the
importers and the checks. Expected values are read off the files here with plain text scans,
independently of the importers."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from slurmkit.health.checks import evaluate
from slurmkit.health.config import load_config
from slurmkit.health.kmsg import parse_log
from slurmkit.health.source import SnapshotSource, load_capture
from slurmkit.health.state import NodeState

pytestmark = pytest.mark.corpus

XMLS = ["dual_a5000-v13.xml", "tesla-t4.xml"]
#: a100-sxm4-v12.xml holds 1 GPU section of its 4 Attached GPUs (taken with nvidia-smi -i): as a
#: node's capture it is unreadable (tests below), its one section is read through a copy that
#: says 1 attached GPU
TEXTS = ["a10_row_remap_pending.txt", "8xH100_hw_slowdown_power_brake.txt"]


def _sections(text: str) -> list[tuple[str, str]]:
    """(bus id, section text) per 'GPU <bus>' section of nvidia-smi -q text."""
    parts = re.split(r"^GPU ([0-9A-Fa-f:.]+)\s*$", text, flags=re.M)
    return [(parts[i], parts[i + 1]) for i in range(1, len(parts), 2)]


def _field(section: str, label: str) -> str:
    m = re.search(rf"^\s*{re.escape(label)}\s+:\s*(.*)$", section, flags=re.M)
    assert m, label
    return m.group(1).strip()


@pytest.mark.parametrize("name", XMLS + TEXTS)
def test_every_capture_imports_with_identity(corpus, name):
    path = corpus / "nvidia-smi-q" / name
    state = load_capture(path)
    raw = path.read_text()
    if name.endswith(".xml"):
        root = ET.fromstring(raw)
        gpus = root.findall("gpu")
        assert [g.uuid for g in state.gpus] == [x.findtext("uuid") for x in gpus]
        assert [g.minor_number for g in state.gpus] == [int(x.findtext("minor_number")) for x in gpus]
        assert state.driver_version == root.findtext("driver_version")
        used = [int(x.findtext("fb_memory_usage/used").split()[0]) for x in gpus]
    else:
        secs = _sections(raw)
        assert [g.uuid for g in state.gpus] == [_field(s, "GPU UUID") for _, s in secs]
        assert len(state.gpus) == int(_field(raw, "Attached GPUs"))
        used = [int(re.search(r"FB Memory Usage\n(?:.*\n)*?\s+Used\s+:\s+(\d+) MiB", s).group(1)) for _, s in secs]
    assert [g.get("memory_used_mib") for g in state.gpus] == used
    for g in state.gpus:  # normalised bus ids: 4-digit domain, lower case
        assert re.fullmatch(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", g.pci_bus_id)
        assert g.values["memory_used_mib"].source.startswith("nvidia-smi:")


@pytest.mark.parametrize("name", XMLS)
def test_healthy_xml_captures_pass(corpus, name):
    rep = evaluate(load_capture(corpus / "nvidia-smi-q" / name), load_config())
    assert rep["status"] in ("pass", "warn"), [r for r in rep["results"] if r["status"] == "fail"]
    assert not rep["errors"]


def _a100_one_gpu(corpus, tmp_path):
    """The A100 capture's one section, in a copy whose Attached GPUs says 1."""
    text = (corpus / "nvidia-smi-q" / "a100-sxm4-v12.xml").read_text()
    assert text.count("<attached_gpus>4</attached_gpus>") == 1 and text.count("<gpu id=") == 1
    path = tmp_path / "a100-one-gpu.xml"
    path.write_text(text.replace("<attached_gpus>4</attached_gpus>", "<attached_gpus>1</attached_gpus>"))
    return path


def test_capture_with_fewer_sections_than_attached_gpus_is_unreadable(corpus):
    from slurmkit.health.errors import CaptureError

    path = corpus / "nvidia-smi-q" / "a100-sxm4-v12.xml"
    line = next(i for i, t in enumerate(path.read_text().splitlines(), 1) if "<attached_gpus>" in t)
    with pytest.raises(CaptureError) as ei:
        load_capture(path)
    assert (str(ei.value.file), ei.value.line) == (str(path), line)
    assert "1 GPU section but Attached GPUs is 4" in str(ei.value)


def test_a100_section_imports_with_identity(corpus, tmp_path):
    path = _a100_one_gpu(corpus, tmp_path)
    state = load_capture(path)
    g = ET.parse(path).getroot().find("gpu")
    assert [x.uuid for x in state.gpus] == [g.findtext("uuid")]
    assert evaluate(state, load_config())["status"] in ("pass", "warn")


def test_idle_capture_with_reserved_memory_passes_before_a_job(corpus, tmp_path):
    path = _a100_one_gpu(corpus, tmp_path)
    g0 = ET.parse(path).getroot().find("gpu")
    reserved = int(g0.findtext("fb_memory_usage/reserved").split()[0])
    used = int(g0.findtext("fb_memory_usage/used").split()[0])
    assert reserved > 64 >= used  # the point of the capture: hundreds of MiB reserved, little used
    # in MIG mode, as captured, the parent's memory is every instance's: not judged before a job
    rep = evaluate(SnapshotSource(path).read(before_job=True), load_config(), before_job=True)
    assert not [r for r in rep["results"] if r["check"] == "memory_used"] and rep["status"] != "fail"
    # an EDIT of the real capture: MIG mode off (its MIG devices part as nvidia-smi prints it
    # then), the memory figures as captured
    text = path.read_text()
    start, end = text.index("<mig_devices>"), text.index("</mig_devices>") + len("</mig_devices>")
    path.write_text((text[:start] + "<mig_devices>None</mig_devices>" + text[end:])
                    .replace("<current_mig>Enabled</current_mig>", "<current_mig>Disabled</current_mig>")
                    .replace("<pending_mig>Enabled</pending_mig>", "<pending_mig>Disabled</pending_mig>"))
    state = SnapshotSource(path).read(before_job=True)
    rep = evaluate(state, load_config(), before_job=True)
    mem = [r for r in rep["results"] if r["check"] == "memory_used"]
    assert [(r["status"], r["value"]) for r in mem] == [("pass", used)]
    assert rep["status"] != "fail"


def test_busy_captures_fail_before_a_job_on_their_processes(corpus):
    path = corpus / "nvidia-smi-q" / "tesla-t4.xml"
    pids = [int(p.findtext("pid")) for p in ET.parse(path).getroot().iter("process_info") if "C" in p.findtext("type")]
    state = SnapshotSource(path).read(before_job=True, sleep=lambda s: pytest.fail("replay must not sleep"))
    assert state.gpus[0].get("busy_samples")[-1]["pids"] == pids
    assert len(state.gpus[0].get("busy_samples")) == load_config().t("busy_tries")
    rep = evaluate(state, load_config(), before_job=True)
    left = [r for r in rep["results"] if r["check"] == "leftover_processes"]
    assert left[0]["status"] == "fail" and left[0]["value"] == len(pids)


def test_row_remap_pending_a10_fails(corpus):
    path = corpus / "nvidia-smi-q" / "a10_row_remap_pending.txt"
    raw = path.read_text()
    unc = int(_field(raw.split("Remapped Rows", 1)[1], "Uncorrectable Error"))
    assert _field(raw.split("Remapped Rows", 1)[1], "Pending") == "Yes"
    rep = evaluate(load_capture(path), load_config())
    assert rep["status"] == "fail"
    fails = [r for r in rep["results"] if r["status"] == "fail"]
    assert [r["check"] for r in fails] == ["row_remap_pending"]
    assert f"{unc} uncorrectable rows" in fails[0]["value"]
    assert fails[0]["uuid"] == _field(raw, "GPU UUID")


def test_h100_hw_slowdown_power_brake_flagged_on_the_right_gpus(corpus):
    path = corpus / "nvidia-smi-q" / "8xH100_hw_slowdown_power_brake.txt"
    secs = _sections(path.read_text())
    want = {bus.lower()[4:] for bus, s in secs if _field(s, "HW Power Brake Slowdown") == "Active"}
    assert want  # the capture's point
    rep = evaluate(load_capture(path), load_config())
    flagged = [r for r in rep["results"] if r["check"] == "clock_events" and r["status"] != "pass"]
    assert {r["pci_bus_id"] for r in flagged} == want
    for r in flagged:  # a single replayed capture: warn, naming the bit
        assert r["status"] == "warn" and "hw_power_brake_slowdown" in r["value"]
    # the T.Limit temperature form gives a margin, not a failure
    margins = [r for r in rep["results"] if r["check"] == "temperature_margin"]
    assert margins and all(r["status"] == "pass" for r in margins)


def test_dmesg_xid_119_fails_on_its_gpu(corpus):
    log = corpus / "logs" / "dmesg_xid119.log"
    text = log.read_text()
    lines = [i for i, line in enumerate(text.splitlines(), 1) if "NVRM: Xid" in line]
    xids = parse_log(text, str(log))
    assert [x.line for x in xids] == lines
    assert {x.xid for x in xids} == {119}
    assert {x.pci_bus_id for x in xids} == {"0000:9b:00.0"}
    h100 = load_capture(corpus / "nvidia-smi-q" / "8xH100_hw_slowdown_power_brake.txt")
    h100.xids = xids
    rep = evaluate(h100, load_config())
    xr = [r for r in rep["results"] if r["check"] == "xid"]
    assert len(xr) == 1 and xr[0]["status"] == "fail" and xr[0]["value"] == 119
    gpu = h100.gpu_by_bus_id("0000:9b:00.0")
    assert (xr[0]["gpu_index"], xr[0]["uuid"]) == (gpu.index, gpu.uuid)
    assert f"x{len(lines)}" in xr[0]["message"]
    assert rep["status"] == "fail"


@pytest.mark.parametrize("name", XMLS + TEXTS)
def test_import_round_trips_through_snapshot_json(corpus, tmp_path, name):
    state = load_capture(corpus / "nvidia-smi-q" / name)
    snap = tmp_path / "s.json"
    import json

    snap.write_text(json.dumps(state.to_json()))
    again = load_capture(snap)
    assert again.to_json()["gpus"] == state.to_json()["gpus"]
    assert evaluate(again, load_config())["results"] == evaluate(state, load_config())["results"]
    assert isinstance(again, NodeState) and again.replay


def test_v13_capture_recovery_action_read_and_judged(corpus, tmp_path):
    """The v13 capture's <gpu_recovery_action>None</...> is NONE (pass); the same capture with the
    driver asking for a reset fails that GPU in words."""
    src = corpus / "nvidia-smi-q" / "dual_a5000-v13.xml"
    state = load_capture(src)
    assert [g.get("gpu_recovery_action") for g in state.gpus] == ["NONE", "NONE"]
    assert [g.rc("reset_required") for g in state.gpus] == ["NOT_AVAILABLE"] * 2  # v13 has no reset status
    text = src.read_text()
    first = text.index("<gpu_recovery_action>None</gpu_recovery_action>")
    sick = tmp_path / "a5000-reset.xml"
    sick.write_text(text[:first] + "<gpu_recovery_action>Reset</gpu_recovery_action>"
                    + text[first + len("<gpu_recovery_action>None</gpu_recovery_action>"):])
    res = [r for r in evaluate(load_capture(sick), load_config())["results"] if r["check"] == "gpu_recovery_action"]
    assert [(r["gpu_index"], r["status"], r["value"]) for r in res] == [(0, "fail", "GPU_RESET"), (1, "pass", "NONE")]
    assert res[0]["message"] == "driver asks for a GPU reset"
