"""Captures as nvidia-smi prints them: an error text on a field the checks do not judge is no
fault; nvidia-smi's whole-output error lines are a node whose GPUs are lost (exit 1 where GPUs
are expected), not unreadable input; section and key names as nvidia-smi's versions spell them.

Inputs: ../shared/corpus/nvidia-smi-q/8xH100_hw_slowdown_power_brake.txt (8 x H100, driver
535.161.08, real) and edits of it, each labelled; tests/health/nvsmi_errors/ (README there);
../shared/corpus/gpu-logs/nvidia-docker-1553_* (NVIDIA/nvidia-docker#1553)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from slurmkit.health.checks import evaluate
from slurmkit.health.config import load_config
from slurmkit.health.source import load_capture

H100 = "8xH100_hw_slowdown_power_brake.txt"
ERRORS = Path(__file__).parent / "nvsmi_errors"


def _fails(state, gpus=None):
    rep = evaluate(state, load_config(gpu_count=gpus))
    return sorted({(r["check"], r["gpu_index"]) for r in rep["results"] if str(r["status"]) == "fail"})


def _cli(path, *args):
    return subprocess.run([sys.executable, "-m", "slurmkit", "health", "check", "--from", str(path), *args],
                          capture_output=True, text=True, timeout=120)


def test_unknown_error_on_an_unjudged_field_is_no_fault(corpus, tmp_path):
    real = (corpus / "nvidia-smi-q" / H100).read_text()
    assert real.count("Addressing Mode                       : None") == 8
    # edit of the real capture (labelled): driver 535's "Addressing Mode : Unknown Error" on all 8
    edited = real.replace("Addressing Mode                       : None",
                          "Addressing Mode                       : Unknown Error")
    (tmp_path / "a.txt").write_text(edited)
    (tmp_path / "real.txt").write_text(real)
    assert _fails(load_capture(tmp_path / "a.txt"), 8) == _fails(load_capture(tmp_path / "real.txt"), 8)
    assert not [f for f in _fails(load_capture(tmp_path / "a.txt"), 8) if f[0] == "nvsmi_error"]
    # the same text on a judged field (an ECC counter) is still that GPU's fault
    first = edited.index("DRAM Uncorrectable")
    line_end = edited.index("\n", first)
    judged = edited[:first] + "DRAM Uncorrectable                : Unknown Error" + edited[line_end:]
    (tmp_path / "b.txt").write_text(judged)
    assert ("nvsmi_error", 0) in _fails(load_capture(tmp_path / "b.txt"), 8)


@pytest.mark.parametrize("name", ["no-devices.txt", "driver-failed.txt"])
def test_whole_output_errors_are_lost_gpus_not_unreadable(name):
    r = _cli(ERRORS / name, "--expect-gpus", "2")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "gpu_count" in r.stdout and "0 (limit 2)" in r.stdout
    r = _cli(ERRORS / name)  # nothing expected: read, not refused
    assert r.returncode != 2, r.stderr


def test_device_handle_line_alone_fails_that_gpu(corpus):
    path = corpus / "gpu-logs" / "nvidia-docker-1553_nvidia-smi-a-i0_unknown-error.txt"
    state = load_capture(path)
    assert [(g.pci_bus_id, g.get("nvsmi_error")) for g in state.gpus] == [
        ("0000:09:00.0", "Unable to determine the device handle: Unknown Error")]
    r = _cli(path, "--expect-gpus", "1")
    assert r.returncode == 1 and "0000:09:00.0" in r.stdout


def test_other_text_is_still_refused(tmp_path):
    p = tmp_path / "x.txt"
    p.write_text("No devices were found\nsomething else\n")
    r = _cli(p)
    assert r.returncode == 2 and f"{p}:1:" in r.stderr


def test_section_names_match_whatever_their_case(corpus, tmp_path):
    real = (corpus / "nvidia-smi-q" / H100).read_text()
    # edit of the real capture (labelled): GPU0's pending page blacklist set to Yes, then the
    # section title in the older lower-case spelling "Retired pages"
    yes = real.replace("Pending Page Blacklist            : N/A", "Pending Page Blacklist            : Yes", 1)
    (tmp_path / "upper.txt").write_text(yes)
    (tmp_path / "lower.txt").write_text(yes.replace("    Retired Pages\n", "    Retired pages\n", 1))
    upper, lower = load_capture(tmp_path / "upper.txt"), load_capture(tmp_path / "lower.txt")
    assert upper.gpus[0].get("retired_pages_pending") is True
    assert lower.gpus[0].get("retired_pages_pending") is True
    assert _fails(lower, 8) == _fails(upper, 8) and any(c.startswith("retired_pages") for c, _ in _fails(lower, 8))
