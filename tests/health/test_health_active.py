"""The active check (DCGM ``dcgmi diag -r 1 -j``) over recorded outputs (tests/health/dcgmi/):
pass, warn, fail, skip when DCGM is absent, own trouble when dcgmi cannot reach its host engine,
a diag that overruns its deadline."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from slurmkit.health.active import dcgm_diag, parse_diag
from slurmkit.health.result import REASON_MAX

DATA = Path(__file__).with_name("dcgmi")


def test_dcgm3_pass_with_the_text_dcgmi_prints_first():
    tests = parse_diag((DATA / "dcgm3-pass.txt").read_text())
    assert len(tests) == 9 and tests[0].name == "Denylist" and tests[0].entity == "*"
    rep = dcgm_diag(capture=DATA / "dcgm3-pass.txt")
    assert rep.status == "pass" and rep.message == "8 results passed"  # Inforom skipped: not counted


def test_dcgm3_fail_names_the_gpu_and_the_test():
    rep = dcgm_diag(capture=DATA / "dcgm3-fail-memory.json")
    assert rep.status == "fail"
    # dcgmi's warning runs long: the reason is cut at a word to the one cap, the test named first
    assert rep.reason() == ("slurmkit: dcgm_diag: GPU1 GPU Memory: fail (Error using CUDA API cudaMalloc: out of "
                            "memory....")
    assert len(rep.reason()) <= REASON_MAX
    assert any("Uncorrectable ECC errors detected." in w for t in rep.tests for w in t.warnings)  # kept in the report


def test_dcgm4_shape_warn_with_entities():
    tests = parse_diag((DATA / "dcgm4-warn.json").read_text())
    assert [(t.name, t.entity, t.status) for t in tests][-2:] == [("pcie", "GPU1", "warn"), ("pcie", "NvSwitch0", "pass")]
    rep = dcgm_diag(capture=DATA / "dcgm4-warn.json")
    assert rep.status == "warn" and rep.message == "GPU1 pcie: warn (PCIe replay count 120 above the limit 80)"


def test_dcgm_absent_is_a_documented_skip(tmp_path):
    rep = dcgm_diag(dcgmi=tmp_path / "dcgmi")
    assert rep.status == "skip" and "not installed" in rep.message


def test_no_host_engine_is_own_trouble():
    rep = dcgm_diag(capture=DATA / "no-hostengine.txt")
    assert rep.status == "error" and "Unable to connect to host engine" in rep.message
    rep = dcgm_diag(capture=DATA / "missing.json")
    assert rep.status == "error" and "missing.json" in rep.message


def test_unknown_status_and_empty_results_are_own_trouble():
    with pytest.raises(ValueError, match="unknown status"):
        parse_diag('{"tests": [{"name": "x", "results": [{"entity_id": 0, "status": "maybe"}]}]}')
    with pytest.raises(ValueError, match="not dcgmi diag output"):
        parse_diag('{"something": 1}')


def test_the_diag_runs_dcgmi_and_a_hang_is_a_fail_within_the_deadline(tmp_path):
    # dcgmi stands in for by a script that replays a recorded output (after a delay for the hang case)
    exe = tmp_path / "dcgmi"
    exe.write_text(f"#!/bin/sh\n[ \"$1 $2 $3 $4\" = \"diag -r 1 -j\" ] || exit 9\nsleep ${{DELAY:-0}}\n"
                   f"cat {DATA / 'dcgm3-fail-memory.json'}\nexit 226\n")
    exe.chmod(0o755)
    rep = dcgm_diag(1, 10, dcgmi=exe)
    assert rep.status == "fail" and rep.source == f"{exe} diag -r 1 -j"  # dcgmi exits non-zero on a fail
    os.environ["DELAY"] = "30"
    try:
        t0 = time.monotonic()
        rep = dcgm_diag(1, 1.0, dcgmi=exe)
    finally:
        del os.environ["DELAY"]
    assert rep.status == "fail" and "did not finish within 1 s" in rep.message
    assert time.monotonic() - t0 < 10


NCCL = Path(__file__).with_name("nccl")


def test_allreduce_floor_pass_slow_and_wrong():
    from slurmkit.health.active import nccl_allreduce

    rep = nccl_allreduce(350, 8, capture=NCCL / "h100x8-ok.txt")
    assert rep.status == "pass" and rep.message == "406.92 GB/s busbw (floor 350 GB/s)"
    rep = nccl_allreduce(350, 8, capture=NCCL / "h100x8-slow.txt")
    assert rep.status == "fail"
    assert rep.reason() == "slurmkit: nccl_allreduce: nccl all_reduce busbw: fail (191.69 GB/s below 350 GB/s)"
    rep = nccl_allreduce(100, 8, capture=NCCL / "h100x8-wrong.txt")
    assert rep.status == "fail" and rep.reason().endswith("(5 wrong results)")  # fast but corrupt


def test_allreduce_absent_skips_and_a_truncated_output_is_own_trouble(tmp_path):
    from slurmkit.health.active import nccl_allreduce, worst

    assert nccl_allreduce(350, 8, exe=tmp_path / "all_reduce_perf").status == "skip"
    cut = tmp_path / "cut.txt"
    cut.write_text("\n".join((NCCL / "h100x8-ok.txt").read_text().splitlines()[:12]))
    rep = nccl_allreduce(350, 8, capture=cut)
    assert rep.status == "error" and "Avg bus bandwidth" in rep.message
    diag = dcgm_diag(capture=DATA / "dcgm3-pass.txt")
    assert worst([diag, nccl_allreduce(350, 8, capture=NCCL / "h100x8-slow.txt")]).check == "nccl_allreduce"
    assert worst([diag, nccl_allreduce(350, 8, exe=tmp_path / "none")]) is diag
