"""The active check (DCGM ``dcgmi diag -r 1 -j``) over recorded outputs (tests/health/dcgmi/):
pass, warn, fail, skip when DCGM is absent, own trouble when dcgmi cannot reach its host engine,
a diag that overruns its deadline."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from slurmkit.health.active import dcgm_diag, parse_diag, read_diag
from slurmkit.health.result import REASON_MAX

DATA = Path(__file__).with_name("dcgmi")


def test_dcgm3_level1_pass():
    tests = parse_diag((DATA / "dcgm3-pass.txt").read_text())
    assert len(tests) == 9 and tests[0].name == "Blacklist" and tests[0].entity == "*"
    rep = dcgm_diag(capture=DATA / "dcgm3-pass.txt")
    assert rep.status == "pass" and rep.message == "9 results passed"


def test_dcgm3_fail_names_the_gpu_and_the_test_and_a_setting_only_warns():
    run = read_diag((DATA / "dcgm3-fail-memory.json").read_text())
    assert (run.version, run.driver_version) == ("3.3.9", "550.90.07")
    pm = [t for t in run.tests if t.name == "Persistence Mode"][0]
    # 3.x's Deployment result: the GPU from its error, the text under "warnings", CONFIG severity
    assert (pm.entity, pm.dcgm_status, pm.status, pm.severities, pm.error_ids) == ("GPU2", "Fail", "warn", [5], [29])
    assert pm.warnings[0].startswith("Persistence mode for GPU 2 is disabled.")
    mem = [(t.entity, t.status) for t in run.tests if t.name == "GPU Memory"]
    assert mem == [("GPU0", "pass"), ("GPU1", "fail"), ("GPU2", "pass"), ("GPU3", "pass")]
    rep = dcgm_diag(capture=DATA / "dcgm3-fail-memory.json")
    assert rep.status == "fail" and rep.dcgm_version == "3.3.9"
    assert rep.reason() == "slurmkit: dcgm_diag: GPU1 GPU Memory: fail (Found 2 faulty memory elements on GPU 1)"
    assert len(rep.reason()) <= REASON_MAX


def test_dcgm3_every_plugin_skipped_judges_the_deployment_tests():
    tests = parse_diag((DATA / "dcgm3-t400-r3-skip.json").read_text())
    assert [(t.name, t.entity, t.status) for t in tests if t.name == "PCIe"] == [("PCIe", "GPU0", "skip")]
    assert sum(t.status == "skip" for t in tests) == 6
    rep = dcgm_diag(capture=DATA / "dcgm3-t400-r3-skip.json")
    assert rep.status == "pass" and rep.message == "9 results passed"


def test_dcgm4_per_entity_results_metadata_and_entities():
    run = read_diag((DATA / "dcgm4-h100x8-r3-pass.json").read_text())
    assert (run.version, run.driver_version) == ("4.1.1", "570.86.15")
    assert run.entities["GPU7"] == {"device_id": "2330", "serial_num": "1652322000007"}
    diag = [t for t in run.tests if t.name == "diagnostic"]
    assert [t.gpu_index for t in diag] == list(range(8)) and {t.status for t in diag} == {"pass"}
    rep = dcgm_diag(capture=DATA / "dcgm4-h100x8-r3-pass.json")
    assert rep.status == "pass" and rep.message == "16 results passed" and rep.dcgm_version == "4.1.1"


def test_dcgm4_persistence_mode_off_warns_naming_the_setting():
    # DCGM 4 fails its software test on every GPU whose persistence mode is off, severity CONFIG:
    # a fleet-wide drain for a setting; slurmkit warns and names it
    rep = dcgm_diag(capture=DATA / "dcgm4-gb10-r1-persistence-off.json")
    assert rep.status == "warn" and rep.dcgm_version == "4.2.3"
    assert rep.message == ("GPU0 software: warn (setting, DCGM severity CONFIG: Persistence Mode: Persistence mode "
                           'for GPU 0 is disabled. Enable persistence mode by running "nvidia-smi -i <gpuId> -pm 1 " '
                           "as root.)")
    assert rep.tests[0].dcgm_status == "Fail"


def test_dcgm4_without_a_severity_or_with_isolate_stays_a_fail():
    doc = json.loads((DATA / "dcgm4-gb10-r1-persistence-off.json").read_text())
    warning = doc["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["results"][0]["warnings"][0]
    del warning["error_severity"]  # edit: a warning without a severity is not known to be a setting
    assert [t.status for t in parse_diag(json.dumps(doc))] == ["fail"]
    for sev in (2, 6, 1):  # ISOLATE, RESET, MONITOR
        warning["error_severity"] = sev
        assert [t.status for t in parse_diag(json.dumps(doc))] == ["fail"]


def test_dcgm4_fail_memory_with_a_setting_a_skip_and_a_test_not_run():
    rep = dcgm_diag(capture=DATA / "dcgm4-h100x8-r3-fail-memory.json")
    assert rep.status == "fail"
    assert rep.reason() == "slurmkit: dcgm_diag: GPU1 memory: fail (Found 2 faulty memory elements on GPU 1)"
    by = {(t.name, t.entity): t.status for t in rep.tests}
    assert by[("software", "GPU3")] == "warn" and by[("memory", "GPU1")] == "fail" and by[("memtest", "GPU5")] == "skip"
    assert not any(t.name == "pcie" for t in rep.tests)  # not run: no result at all


def test_dcgm4_runtime_error_and_iterations():
    with pytest.raises(ValueError, match="could not run: The GPU list is empty"):
        read_diag('{"DCGM Diagnostic": {"runtime_error": "The GPU list is empty", "version": "4.2.3"}}')
    one = (DATA / "dcgm4-gb10-r1-persistence-off.json").read_text()
    run = read_diag('{"Overall Result": "Pass", "iterations": [%s, %s]}' % (one, one))  # dcgmi diag -n 2
    assert [t.status for t in run.tests] == ["warn", "warn"] and run.version == "4.2.3"


def test_dcgm_absent_is_a_documented_skip(tmp_path):
    rep = dcgm_diag(dcgmi=tmp_path / "dcgmi")
    assert rep.status == "skip" and "not installed" in rep.message


def test_no_host_engine_is_own_trouble():
    rep = dcgm_diag(capture=DATA / "no-hostengine.txt")
    assert rep.status == "error" and "Unable to connect to host engine" in rep.message
    rep = dcgm_diag(capture=DATA / "missing.json")
    assert rep.status == "error" and "missing.json" in rep.message


def test_unknown_status_and_empty_results_are_own_trouble():
    doc = json.loads((DATA / "dcgm4-gb10-r1-persistence-off.json").read_text())
    doc["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["results"][0]["status"] = ""  # the writer's default
    with pytest.raises(ValueError, match="unknown status ''"):
        parse_diag(json.dumps(doc))
    with pytest.raises(ValueError, match="not dcgmi diag output"):
        parse_diag('{"something": 1}')
    with pytest.raises(ValueError, match="not dcgmi diag output"):  # the shape slurmkit once read as DCGM 4's
        parse_diag('{"tests": [{"name": "x", "results": [{"entity_id": 0, "status": "pass"}]}]}')


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


def test_a_recorded_diag_table_replays_as_the_json_does():
    # the hooks' [nodes.<n>] dcgm_diag may name a saved `dcgmi diag -r N` table (tests/health/dcgmi/README.md)
    table = dcgm_diag(capture=DATA / "dcgm4-h100x8-r3-fail-memory.table.txt")
    js = dcgm_diag(capture=DATA / "dcgm4-h100x8-r3-fail-memory.json")
    assert (table.status, table.reason(), table.dcgm_version) == (js.status, js.reason(), "4.1.1")
