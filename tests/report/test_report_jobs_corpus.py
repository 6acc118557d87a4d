"""``report jobs`` on the corpus's real
captures: torchx's (no Elapsed, Start or End: how long a job ran is unknown, not 0 s) and
bcgsc/mavis's (two step rows with a garbled JobIDRaw, matched to their job by JobID, with a
warning and a data-quality line). ``report jobs`` writes a table, CSV or JSON (no Markdown or
HTML): each is checked."""

from __future__ import annotations

import csv
import io
import json

import pytest
from click.testing import CliRunner

from slurmkit.cli import cli

TORCHX = "sacct2/torchx_sacct-parsable2_CANCELLED-by_L1083-1086.psv"
MAVIS = "sacct2/mavis_sacct-long-parsable_trailing-delim_L230-332.psv"


@pytest.fixture(autouse=True)
def _no_site_from_the_shell(monkeypatch):
    monkeypatch.delenv("SLURMKIT_SITE", raising=False)


def _run(*args):
    res = CliRunner().invoke(cli, ["report", "jobs", *args], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res


def _fields(path):
    lines = path.read_text().splitlines()
    head = lines[0].split("|")
    return [dict(zip(head, ln.split("|"))) for ln in lines[1:]]


def test_no_elapsed_start_end_is_unknown_not_zero(corpus):
    """Job 89 has .batch and .0 steps (it ran), but the capture has no Elapsed,
    Start or End: elapsed and time efficiency unknown in JSON, CSV and the table."""
    rows = _fields(corpus / TORCHX)
    assert not {"Elapsed", "ElapsedRaw", "Start", "End"} & set(rows[0])
    assert [r["JobID"] for r in rows] == ["89", "89.batch", "89.0"]
    (j,) = json.loads(_run("--from-sacct", str(corpus / TORCHX), "--format", "json").stdout)["jobs"]
    assert (j["job_id"], j["state"], j["elapsed_s"], j["time_eff"], j["cpu_eff"]) == ("89", "CANCELLED", None, None, None)
    (c,) = list(csv.DictReader(io.StringIO(_run("--from-sacct", str(corpus / TORCHX), "--format", "csv").stdout)))
    assert c["elapsed_s"] == "unknown" and c["time_eff"] == "unknown"
    table = _run("--from-sacct", str(corpus / TORCHX)).stdout.splitlines()
    head = table[0].split()
    cells = table[1].split()
    assert cells[head.index("Elapsed")] == "unknown" and "00:00:00" not in table[1]


def test_garbled_jobidraw_steps_matched_by_jobid_with_a_warning(corpus):
    """Mavis's ``1672269_2.batch`` has JobIDRaw ``1671673291279.batch`` (its
    allocation's is 1672279), ``1672454_2.batch`` ``1671673291454.batch`` (1672454): matched by
    JobID, their memory counted (MaxRSS x NTasks / ReqMem, read off the rows here), a warning
    and a data-quality repair naming each."""
    rows = _fields(corpus / MAVIS)
    alloc_raw = {r["JobIDRaw"] for r in rows if "." not in r["JobID"]}
    garbled = {r["JobID"]: r for r in rows if "." in r["JobID"] and r["JobIDRaw"].split(".")[0] not in alloc_raw}
    assert sorted(garbled) == ["1672269_2.batch", "1672454_2.batch"]
    res = _run("--from-sacct", str(corpus / MAVIS), "--format", "json")
    assert ("2 step row(s) whose JobIDRaw names no allocation row matched to their job by JobID "
            "(JobID 1672269_2.batch: JobIDRaw 1671673291279 is no allocation's; "
            "JobID 1672454_2.batch: JobIDRaw 1671673291454 is no allocation's)") in res.stderr
    rep = json.loads(res.stdout)
    jobs = {j["job_id"]: j for j in rep["jobs"]}
    for jid, step in garbled.items():
        j = jobs[jid.split(".")[0]]
        used = float(step["MaxRSS"].rstrip("K")) / 1024.0 * int(step["NTasks"])
        req = float(step["ReqMem"].rstrip("Mn"))
        assert j["mem_used_mib"] == pytest.approx(used, abs=1e-6)
        assert j["mem_eff"] == pytest.approx(used / req, abs=1e-6)
    fixed = [p for p in rep["data_quality"]["problems"] if p["reason"].startswith("step's JobIDRaw names no allocation")]
    assert [p["detail"] for p in fixed] == ["JobID 1672269_2.batch: JobIDRaw 1671673291279 is no allocation's",
                                           "JobID 1672454_2.batch: JobIDRaw 1671673291454 is no allocation's"]
    assert all(p["counted"] for p in fixed)
    c = {r["job_id"]: r for r in csv.DictReader(io.StringIO(_run("--from-sacct", str(corpus / MAVIS), "--format", "csv").stdout))}
    assert float(c["1672269_2"]["mem_eff"]) == pytest.approx(jobs["1672269_2"]["mem_eff"])
    lines = _run("--from-sacct", str(corpus / MAVIS)).stdout.splitlines()
    head = lines[0].split()
    # (the capture has no User field: the cells from State on are counted from the right)
    mem = head.index("MemEff") - len(head)
    table = {ln.split()[0]: ln.split() for ln in lines[1:]}
    assert table["1672269_2"][mem] == f"{100 * jobs['1672269_2']['mem_eff']:.1f}%" == "0.3%"
    assert table["1672454_2"][mem] == "0.0%"


def test_zero_totalcpu_without_steps_is_unknown_cpu_efficiency(corpus):
    """The rule docs/report.md states: Habrok's jobs that ran (Start set, Elapsed
    above 0, ended) with TotalCPU 00:00:00 on the allocation row and no step rows: CPU
    efficiency unknown (reportseff: 0 %), in JSON and CSV; counted here from the rows."""
    rows = _fields(corpus / "sacct" / "habrok_gpu_cluster_parsable2.psv")
    with_steps = {r["JobID"].split(".")[0] for r in rows if "." in r["JobID"]}
    zero = {r["JobID"] for r in rows if "." not in r["JobID"] and r["TotalCPU"] == "00:00:00"
            and r["JobID"] not in with_steps and r["Start"] not in ("None", "Unknown")
            and r["State"] != "RUNNING" and r["Elapsed"] != "00:00:00"}
    assert len(zero) == 26
    src = str(corpus / "sacct" / "habrok_gpu_cluster_parsable2.psv")
    jobs = {j["job_id"]: j for j in json.loads(_run("--from-sacct", src, "--format", "json").stdout)["jobs"]}
    assert {k for k in zero if jobs[k]["cpu_eff"] is None and jobs[k]["total_cpu_s"] is None} == zero
    c = {r["job_id"]: r for r in csv.DictReader(io.StringIO(_run("--from-sacct", src, "--format", "csv").stdout))}
    assert {c[k]["cpu_eff"] for k in zero} == {"unknown"}
    # a job with TotalCPU above 0 keeps its figure
    some = next(r for r in rows if "." not in r["JobID"] and r["TotalCPU"] not in ("00:00:00", "")
                and r["State"] == "COMPLETED")
    assert jobs[some["JobID"]]["cpu_eff"] is not None
