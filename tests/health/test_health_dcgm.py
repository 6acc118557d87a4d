"""DCGM's outputs replayed by ``slurmkit health diag --from`` (slurmkit.health.dcgm): the
``dcgmi diag -r N`` tables of DCGM 3 and 4, ``dcgmi diag -j``, ``dcgmi health -c -j`` and ``dcgmi
nvlink --link-status``, each from a real output (../shared/corpus/fabric, tests/health/dcgmi: the
sources in their READMEs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from slurmkit.cli import cli
from slurmkit.health.active import verdict
from slurmkit.health.dcgm import DcgmFormatError, kind_of, read_dcgm, read_diag_table

DATA = Path(__file__).with_name("dcgmi")


def _diag(path, *extra):
    r = CliRunner().invoke(cli, ["health", "diag", "--from", str(path), *extra])
    assert "Traceback" not in r.output, r.output
    return r


def _json(path) -> tuple[int, dict]:
    r = _diag(path, "--json")
    return r.exit_code, json.loads(r.output)


@pytest.fixture
def fabric(corpus) -> Path:
    return corpus / "fabric"


def test_dcgm3_tables_a_deployment_pass_and_a_metadata_header(fabric):
    code, rep = _json(fabric / "DCGM-55_diag-r3_deployment-all-Pass_v3.0.4.TRUNCATED.txt")
    assert code == 0 and rep["status"] == "pass" and rep["kind"] == "diag-table"
    assert [(x["test"], x["entity"], x["status"]) for x in rep["results"]][:2] == [("Denylist", "*", "pass"),
                                                                                  ("NVML Library", "*", "pass")]
    assert len(rep["results"]) == 9
    # the paste stops at the Integration section's border: said, judged on what it holds
    assert rep["notes"] and "the table stops without its closing border" in rep["notes"][0]
    code, rep = _json(fabric / "dcgmi" / "IBM-autopilot-68_diag-r3_header_A100-20b5_v3.3.5.TRUNCATED.txt")
    assert code == 0 and rep["dcgm_version"] == "3.3.5" and rep["driver_version"] == "550.54.15"
    assert [x["test"] for x in rep["results"]] == ["Denylist", "NVML Library", "CUDA Main Library",
                                                   "Permissions and OS Blocks"]


def test_dcgm3_tables_name_the_failing_gpu_and_join_the_wrapped_warning(fabric):
    code, rep = _json(fabric / "dcgmi" / "mlengineering_diag-r2_fail_GPU0-memory-thermal_L225-232.txt")
    assert code == 1 and rep["status"] == "fail"
    mem = {x["entity"]: x["status"] for x in rep["results"] if x["test"] == "GPU Memory"}
    assert mem == {"GPU0": "fail", **{f"GPU{i}": "pass" for i in range(1, 8)}}
    gpu0 = [x for x in rep["results"] if x["entity"] == "GPU0"][0]
    # 45-character pieces joined where DCGM cut them ("second" + "s started")
    assert gpu0["warnings"][0].startswith("GPU 0 Thermal violations totaling 13.3 seconds started at 9.7 seconds "
                                          "into the test for GPU 0 Verify that the cooling")
    # a Deployment error with no test row before it: the GPU its words name, a fail
    code, rep = _json(fabric / "mlengineering_diag-r3_fail_row-remap-pending_L212-217.txt")
    assert code == 1 and [(x["test"], x["entity"], x["status"], x["warnings"]) for x in rep["results"]] == [
        ("Deployment", "GPU3", "fail", ["GPU 3 has uncorrectable memory errors and row remappings are pending"])]
    run = read_diag_table((DATA / "dcgm3-r2-table-gpu0-cuda-busy.excerpt.txt").read_text())
    assert [(t.entity, t.status) for t in run.tests] == [("GPU1", "pass"), ("GPU0", "fail")]
    assert run.tests[1].warnings == ["GPU 0 Error using CUDA API cuCtxCreate Check DCGM and system logs for errors. "
                                     "Reset GPU. Restart DCGM. Rerun diagnostics. Unable to create CUDA context: "
                                     "'CUDA-capable device(s) is/are busy or unavailable'."]


def test_dcgm4_tables_per_gpu_rows_give_the_json_s_verdicts(fabric):
    code, rep = _json(fabric / "DCGM-253_diag_v4.2.3-format_software-per-GPU-Pass.TRUNCATED.txt")
    assert code == 0 and rep["dcgm_version"] == "4.2.3"
    assert [(x["test"], x["entity"]) for x in rep["results"]] == [("software", f"GPU{i}") for i in range(4)]
    table = read_dcgm((DATA / "dcgm4-h100x8-r3-fail-memory.table.txt").read_text())
    js = read_dcgm((DATA / "dcgm4-h100x8-r3-fail-memory.json").read_text())
    assert (table.kind, js.kind) == ("diag-table", "diag-json") and table.notes == []
    judged = lambda run: sorted((t.name, t.entity, t.status, t.warnings) for t in run.tests if t.status != "skip")  # noqa: E731
    assert judged(table) == judged(js)  # the persistence-mode setting warns in both, the memory fault fails
    r = _diag(DATA / "dcgm4-h100x8-r3-fail-memory.table.txt")
    assert r.exit_code == 1
    assert "FAIL  dcgm_diag    GPU1       memory                        Found 2 faulty memory elements on GPU 1" in r.output
    assert "WARN  dcgm_diag    GPU3       software" in r.output


def test_dcgm_json_outputs_replay_as_the_active_check_reads_them():
    for name, code, status in (("dcgm4-h100x8-r3-pass.json", 0, "pass"), ("dcgm3-fail-memory.json", 1, "fail"),
                               ("dcgm4-gb10-r1-persistence-off.json", 0, "warn")):
        got, rep = _json(DATA / name)
        assert (got, rep["status"], rep["kind"]) == (code, status, "diag-json"), name


def test_dcgmi_health_healthy_and_failing(fabric):
    code, rep = _json(fabric / "dcgmi" / "DCGM-263_health-c-j_output_Overall-Healthy.json.txt")
    assert code == 0 and rep["check"] == "dcgm_health"
    assert [(x["test"], x["entity"], x["status"]) for x in rep["results"]] == [("Overall Health", "*", "pass")]
    code, rep = _json(DATA / "dcgm4-health-c-j_gpu1-failure.json")
    assert code == 1 and [(x["test"], x["entity"], x["status"], x["warnings"]) for x in rep["results"]] == [
        ("Memory system", "GPU1", "fail", ["Detected 2 volatile double-bit ECC error(s) in GPU 1."]),
        ("PCIe system", "GPU1", "warn", ["Detected more than 8 PCIe replays per minute for GPU 1 : 24"])]


def test_dcgmi_nvlink_link_status(fabric):
    code, rep = _json(fabric / "dcgmi" / "DCGM-198_nvlink-link-status_all-Down_2xH100-2321.txt")
    assert code == 1 and [(x["entity"], x["status"], x["warnings"]) for x in rep["results"]] == [
        ("GPU0", "fail", ["links 0-17 down"]), ("GPU1", "fail", ["links 0-17 down"])]
    code, rep = _json(DATA / "dcgm-nvlink-link-status_8xH100-all-Up.txt")
    assert code == 0 and len(rep["results"]) == 8 and rep["results"][0]["dcgm_status"] == "18/18 up"


def test_dcgmi_errors_and_other_files_are_unreadable_naming_file_and_line(fabric, tmp_path):
    r = _diag(fabric / "dcgmi" / "DCGM-176_health-check_error_watches-not-enabled.txt")
    assert r.exit_code == 2 and ("DCGM-176_health-check_error_watches-not-enabled.txt:2: dcgmi reported an error, "
                                 "no result: Error: Health watches not enabled.") in r.output
    r = _diag(DATA / "no-hostengine.txt")
    assert r.exit_code == 2 and "no-hostengine.txt:1: dcgmi reported an error" in r.output
    # nvidia-smi and dcgmi dmon beside the health output: not a DCGM output this reads
    r = _diag(fabric / "dcgmi" / "DCGM-263_health-c-j_Healthy_while-GPU1-recovery-action-Reset_dmon-xid120.txt")
    assert r.exit_code == 2 and "xid120.txt:1: not dcgmi diag" in r.output
    bad = tmp_path / "bad.txt"
    bad.write_text((DATA / "dcgm4-h100x8-r3-fail-memory.table.txt").read_text().replace("GPU1: Fail", "GPU1: Broken"))
    r = _diag(bad)
    assert r.exit_code == 2 and f"{bad}:25: test 'memory': want 'GPU<n>: <status>'" in r.output
    r = _diag(tmp_path / "absent.txt")
    assert r.exit_code == 2 and "absent.txt" in r.output
    with pytest.raises(DcgmFormatError):
        read_dcgm("hello\n", "x")
    assert kind_of("{}") == "diag-json"


def test_verdict_counts_skips_apart():
    run = read_dcgm((DATA / "dcgm4-h100x8-r3-fail-memory.table.txt").read_text())
    rep = verdict(run.tests, "t")
    assert rep.status == "fail" and rep.reason() == "slurmkit: dcgm_diag: GPU1 memory: fail (Found 2 faulty memory elements on GPU 1)"


def test_dcgm3_rows_every_status_and_the_diagnostic_code_row():
    # the rows DCGM 3.3.9's HelperDisplayGpuResults writes for each outcome (dcgmi/Diag.cpp at
    # v3.3.9): "Warn - All" then, for the Diagnostic test, its "  Code: (...)" row; "Skip - All"
    rows = ["|-----  Deployment  --------+------------------------------------------------|",
            "| Persistence Mode          | Fail                                           |",
            "| Error                     | Persistence mode for GPU 1 is disabled. Enabl  |",
            "|                           | e persistence mode by running \"nvidia-smi -i   |",
            "|                           | <gpuId> -pm 1 \" as root.                       |",
            "+-----  Hardware  ----------+------------------------------------------------+",
            "| Diagnostic                | Warn - All                                     |",
            "|                           |   Code: (000000000000)                         |",
            "| GPU Memory                | Skip - All                                     |",
            "+---------------------------+------------------------------------------------+"]
    run = read_diag_table("\n".join(rows) + "\n", "t")
    assert [(t.name, t.entity, t.status) for t in run.tests] == [
        ("Persistence Mode", "GPU1", "warn"), ("Diagnostic", "*", "warn"), ("GPU Memory", "*", "skip")]
    assert run.tests[0].warnings == ['Persistence mode for GPU 1 is disabled. Enable persistence mode by running '
                                     '"nvidia-smi -i <gpuId> -pm 1 " as root.'] and run.notes == []


def test_dcgm2_table_fail_all_with_a_warning_cut_by_the_reporter():
    run = read_diag_table((DATA / "dcgm2-r2-table-pcie-fail-all-nvlink-down.excerpt.txt").read_text(), "p")
    assert [(t.name, t.entity, t.status) for t in run.tests] == [("PCIe", "GPU0", "fail")]
    assert run.tests[0].warnings[0].startswith("GPU 0GPU 0's NvLink link 0 is currently down Run a field diagnostic on "
                                               "the GPU., GPU 0GPU 0's NvLink link 1 is currently down Run a field")
    assert run.notes == ["p:11: the table stops without its closing border (the output is cut): judged on the rows "
                         "it holds"]
