"""Captures are read strictly: a GPU section that shows an nvidia-smi error fails that GPU with
the text in the reason; a capture with fewer GPU sections than ``Attached GPUs`` is unreadable.
Inputs are the real captures of ../shared/corpus/nvidia-smi-q/ with one line changed the way
nvidia-smi prints these errors."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from slurmkit.cli import cli
from slurmkit.health.checks import evaluate
from slurmkit.health.config import load_config
from slurmkit.health.errors import CaptureError
from slurmkit.health.source import load_capture

pytestmark = pytest.mark.corpus

H100 = "8xH100_hw_slowdown_power_brake.txt"


def _edited(corpus, tmp_path, name, pattern, repl, count=1):
    text = (corpus / "nvidia-smi-q" / name).read_text()
    new, n = re.subn(pattern, repl, text, count=count, flags=re.M)
    assert n == count
    path = tmp_path / name
    path.write_text(new)
    return path


def _gpu_fails(path):
    rep = evaluate(load_capture(path), load_config())
    return rep, [r for r in rep["results"] if r["check"] == "nvsmi_error" and r["status"] == "fail"]


@pytest.mark.parametrize("text", ["Unknown Error", "[Unknown Error]", "ERR!", "GPU requires reset"])
def test_error_text_in_a_gpu_section_fails_that_gpu(corpus, tmp_path, text):
    # the second GPU's power draw (line 376 of the capture) as nvidia-smi prints a failed read
    path = _edited(corpus, tmp_path, H100, r"^(        Power Draw\s+: )69\.52 W$", rf"\g<1>{text}")
    rep, fails = _gpu_fails(path)
    assert [(r["gpu_index"], r["pci_bus_id"]) for r in fails] == [(1, "0000:3b:00.0")]
    assert fails[0]["value"].startswith(text)
    assert "Power Draw" in fails[0]["value"]
    from slurmkit.health.checks import CheckResult

    reason = CheckResult(**fails[0]).reason()
    assert text in reason and reason.startswith("slurmkit: nvsmi_error GPU1 ")
    assert rep["status"] == "fail"
    # the other seven sections are clean
    clean = [r for r in rep["results"] if r["check"] == "nvsmi_error" and r["status"] == "pass"]
    assert sorted(r["gpu_index"] for r in clean) == [0, 2, 3, 4, 5, 6, 7]


def test_unable_to_determine_the_device_handle_fails_that_gpu(corpus, tmp_path):
    # GPU 0000:3B:00.0 replaced by the line nvidia-smi prints when it cannot open the GPU
    text = (corpus / "nvidia-smi-q" / H100).read_text()
    start = text.index("GPU 00000000:3B:00.0\n")
    end = text.index("\nGPU 0000", start + 1) + 1
    path = tmp_path / "lost.txt"
    path.write_text(text[:start] + "Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error\n\n"
                    + text[end:])
    state = load_capture(path)
    assert len(state.gpus) == 8 and state.gpus[1].pci_bus_id == "0000:3b:00.0"
    rep, fails = _gpu_fails(path)
    assert [r["gpu_index"] for r in fails] == [1]
    assert "Unable to determine the device handle: Unknown Error" in fails[0]["value"]
    lost = [r for r in rep["results"] if r["check"] == "gpu_lost" and r["status"] == "fail"]
    assert [r["gpu_index"] for r in lost] == [1]


def test_missing_gpu_section_is_unreadable_exit_2(corpus, tmp_path):
    text = (corpus / "nvidia-smi-q" / H100).read_text()
    cut = text[: text.index("GPU 00000000:3B:00.0\n")]  # a capture cut off after the first GPU
    path = tmp_path / "cut.txt"
    path.write_text(cut)
    with pytest.raises(CaptureError) as ei:
        load_capture(path)
    line = next(i for i, t in enumerate(cut.splitlines(), 1) if t.startswith("Attached GPUs"))
    assert ei.value.line == line and "1 GPU section but Attached GPUs is 8" in str(ei.value)
    r = CliRunner().invoke(cli, ["health", "check", "--from", str(path)])
    assert r.exit_code == 2 and "Attached GPUs is 8" in r.output and "Traceback" not in r.output


def test_gpu_section_cut_before_processes_is_unreadable_exit_2(corpus, tmp_path):
    """A whole capture (it has Attached GPUs) whose last GPU section stops before Processes,
    which nvidia-smi -q prints last: cut off (a short copy), never read as a GPU without the
    fields lost."""
    text = (corpus / "nvidia-smi-q" / "a10_row_remap_pending.txt").read_text()
    cut = text[: text.index("    Processes")]
    path = tmp_path / "cut.txt"
    path.write_text(cut)
    with pytest.raises(CaptureError) as ei:
        load_capture(path)
    assert ei.value.line == len(cut.rstrip("\n").splitlines())   # the section's last line read
    assert "its section ends before Processes" in ei.value.message
    r = CliRunner().invoke(cli, ["health", "check", "--from", str(path)])
    assert r.exit_code == 2 and str(path) in r.output and "Traceback" not in r.output


# edit (labelled): the A10 capture's "Processes : None" replaced by the Processes block of a real
# A100 nvidia-smi -q (stas00/ml-engineering, debug notes; CC-BY-SA-4.0), one compute process
PROCESSES_A100 = """\
    Processes
        GPU instance ID                   : N/A
        Compute instance ID               : N/A
        Process ID                        : 280058
            Type                          : C
            Name                          : /gpfswork/rech/cnw/commun/conda/shared-m4-2023-02-28/bin/python
            Used GPU Memory               : 22374 MiB
"""


def test_every_cut_inside_the_last_gpu_section_is_refused(corpus, tmp_path):
    """Cut at any line inside the last GPU's section (8x H100: GPU 0000:DB:00.0, the one whose
    ECC, row-remap, temperature and clock fields a cut would lose), and inside its Processes list:
    each refused (exit 2, file and line), never judged as a GPU without those fields."""
    lines = (corpus / "nvidia-smi-q" / H100).read_text().splitlines(keepends=True)
    last = max(i for i, t in enumerate(lines) if t.startswith("GPU 0"))
    for cut in range(last + 1, len(lines)):
        with pytest.raises(CaptureError) as ei:
            load_capture(_write(tmp_path, "".join(lines[:cut])))
        assert ei.value.line is not None, cut
    whole = (corpus / "nvidia-smi-q" / "a10_row_remap_pending.txt").read_text()
    text = whole.replace("    Processes                             : None\n", PROCESSES_A100)
    state = load_capture(_write(tmp_path, text))
    assert state.gpus[0].get("processes") == [{"pid": 280058, "used_mib": 22374}]
    block = len(text.splitlines()) - len(PROCESSES_A100.splitlines())
    for keep in range(2, len(PROCESSES_A100.splitlines())):  # cut after "GPU instance ID" ... "Name"
        cut = "".join(text.splitlines(keepends=True)[:block + keep])
        path = _write(tmp_path, cut)
        with pytest.raises(CaptureError) as ei:
            load_capture(path)
        assert ei.value.line == block + keep and "ends inside a process" in ei.value.message, keep
        r = CliRunner().invoke(cli, ["health", "check", "--from", str(path)])
        assert r.exit_code == 2 and f"{path}:{block + keep}" in r.output and "Traceback" not in r.output, r.output


def _write(tmp_path, text):
    path = tmp_path / "cut.txt"
    path.write_text(text)
    return path
