"""With no GPU field nothing GPU-derived
reads 0; GPU-hours from ReqTRES are marked "requested" wherever they appear; a capture without
an Account / QOS field, and untyped GPUs, group under names that say so. Inputs: the corpus's
Habrok capture with fields taken out (labelled edits of a real capture, as an analyst's
hab_nogpu.psv / hab_noalloc.psv), the corpus's pcluster capture (no GPU field at all), gcm's
sacct test data (tests/accounting/data/README.md: untyped ``gres/gpu=1024``)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from capture_edit import without_fields
from click.testing import CliRunner

from slurmkit.cli import cli

HABROK = "sacct/habrok_gpu_cluster_parsable2.psv"
GCM = Path(__file__).parents[1] / "accounting" / "data" / "gcm_sample-sacct-one-multiline.txt"
ALL_TIME = ("--start", "2020-01-01", "--end", "2030-01-01", "--as-of", "2030-01-01")


@pytest.fixture(autouse=True)
def _no_site_from_the_shell(monkeypatch):
    monkeypatch.delenv("SLURMKIT_SITE", raising=False)


def _report(out: Path, src, *args):
    res = CliRunner().invoke(cli, ["report", "weekly", "--from-sacct", str(src), "-o", str(out),
                                   "--format", "json,md,csv,html", "--trend-weeks", "0", "--allow-skipped",
                                   *ALL_TIME, *args], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return json.loads((out / "weekly.json").read_text()), res.output


def _csv(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_no_gpu_field_nothing_gpu_derived_reads_zero(tmp_path, corpus):
    """Habrok without AllocTRES and ReqTRES (its jobs held 1-4 GPUs): queue waits in
    the GPU bucket "unknown", not "0"; each user's GPU-hours, the pending GPUs / GPU-hours and
    the jobs without a time limit unknown; By GPU type holds every job (unknown), no empty
    GPUs-in-use or GPU-hours-by-user chart."""
    src = without_fields(corpus / HABROK, tmp_path / "habrok_no_gpu_fields.psv", {"AllocTRES", "ReqTRES"})
    rep, _ = _report(tmp_path / "out", src)
    out = tmp_path / "out"
    t = rep["totals"]
    assert t["jobs"] == 90 and t["gpu_hours"] is None and t["pending_jobs"] == 7
    assert t["physical_gpu_hours"] is None
    for k in ("pending_gpus_requested", "pending_gpu_hours_requested", "pending_without_time_limit"):
        assert t[k] is None, k
    buckets = {q["gpu_bucket"] for q in rep["queue_wait"]["by_partition_gpus"]}
    assert buckets == {"unknown"}
    assert sum(q["n"] for q in rep["queue_wait"]["by_partition_gpus"]) == rep["queue_wait"]["all"]["n"] == 90
    assert rep["efficiency"]["by_user"] and all(u["gpu_hours"] is None for u in rep["efficiency"]["by_user"])
    assert rep["by_gpu_type"] == [{"gpu_type": "unknown (no GPU field)", "jobs": 90, "gpu_hours": None,
                                   "cpu_hours": t["cpu_hours"], "energy_kwh": None, "energy_jobs_unknown": 90,
                                   "wasted_gpu_hours": None,
                                   "provisional_gpu_hours": None, "physical_gpu_hours": None}]
    assert rep["hourly"]["gpus_in_use"] == [] and rep["hourly"]["peak_at_once"] is None
    # job sizes: only the unknown row (no "0 jobs with 1 GPU" read off an absent field)
    js = rep["job_sizes"]
    assert js["gpu_buckets"] == ["unknown"] and sum(js["jobs"][0]) == 90 and js["gpu_hours"] == [[None] * 5]
    assert {r["gpus"] for r in _csv(out / "job_sizes.csv")} == {"unknown"}
    assert "unknown: gpu_hours" in {p["reason"] for p in rep["data_quality"]["notes"]}
    # CSV: null is an empty cell; the why is in data_quality.csv
    assert {r["gpu_bucket"] for r in _csv(out / "queue_wait.csv")} == {"unknown"}
    assert {r["gpu_hours"] for r in _csv(out / "efficiency_by_user.csv")} == {""}
    assert _csv(out / "backlog.csv") == [{"jobs": "7", "gpu_jobs": "", "gpus_requested": "", "gpu_hours_requested": "",
                                          "without_time_limit": ""}]
    assert _csv(out / "by_gpu_type.csv")[0]["gpu_type"] == "unknown (no GPU field)"
    assert "unknown: gpu_hours" in (out / "data_quality.csv").read_text()
    md = (out / "weekly.md").read_text()
    assert "requesting unknown GPUs and unknown GPU-hours" in md
    assert "| gpulong | unknown | 9 |" in md and "| gpulong | 0 |" not in md
    assert "GPUs in use: most at once unknown; hourly mean peak unknown, p95 unknown." in md
    assert "| unknown (no GPU field) | 90 | unknown |" in md
    sizes = md.split("## Job sizes")[1].split("##")[0]
    assert "| unknown | 31 / unknown |" in sizes and "| 1 |" not in sizes and "| 0 |" not in sizes
    eff = md.split("### Efficiency by user")[1].split("###")[0]
    assert "| user48 | unknown |" in eff and "| 0.00 |" not in eff
    html = (out / "weekly.html").read_text()
    assert '<td class="l">gpulong</td><td class="l">unknown</td>' in html
    assert "Pending GPU-hours requested</th><td>unknown" in html
    assert "Pending GPU jobs without a time limit</th><td>unknown</td>" in html
    assert "GPUs in use unknown: no GPU count in the input" in html
    assert 'alt="GPUs in use' not in html and 'alt="GPU-hours by user"' not in html
    assert "No jobs in the window." not in html
    sizes = html.split("Job sizes (GPUs x duration)")[1].split("<h2>")[0]
    assert "unknown" in sizes and "0 / 0" not in sizes
    assert '<td class="l">unknown (no GPU field)</td><td>90</td><td>unknown</td>' in html
    assert '<td class="l">user48</td><td>unknown</td>' in html


def test_pcluster_capture_without_gpu_field(tmp_path, corpus):
    """A real capture with no GPU field at all (AWS ParallelCluster's sacct)."""
    rep, _ = _report(tmp_path / "out", corpus / "sacct" / "pcluster_issue59_node_fail.psv",
                     "--sacct-fields", str(corpus / "sacct" / "pcluster_header_fields.txt"))
    assert rep["totals"]["gpu_hours"] is None and rep["totals"]["jobs"] > 0
    assert [(q["gpu_bucket"], q["n"]) for q in rep["queue_wait"]["by_partition_gpus"]] == [("unknown", 1)]
    assert all(u["gpu_hours"] is None for u in rep["efficiency"]["by_user"])
    assert [g["gpu_type"] for g in rep["by_gpu_type"]] == ["unknown (no GPU field)"]
    assert rep["by_gpu_type"][0]["jobs"] == rep["totals"]["jobs"]
    html = (tmp_path / "out" / "weekly.html").read_text()
    assert 'alt="GPUs in use' not in html and 'alt="GPU-hours by user"' not in html


def test_reqtres_gpu_hours_marked_requested_everywhere(tmp_path, corpus):
    """Habrok without AllocTRES: every GPU-hour is ReqTRES's; the summary line, the
    totals, every GPU-hours table header, the About block (and inputs.csv) say "requested".
    The unedited capture (AllocTRES) says it nowhere."""
    src = without_fields(corpus / HABROK, tmp_path / "habrok_no_alloctres.psv", {"AllocTRES"})
    rep, text = _report(tmp_path / "b", src)
    out = tmp_path / "b"
    gh = rep["totals"]["gpu_hours"]
    assert gh > 0 and rep["totals"]["gpu_hours_from_request"] == gh
    note = "requested: no AllocTRES/AllocGRES in the capture"
    assert f"GPU-h ({note})" in text
    md = (out / "weekly.md").read_text()
    assert f"({note})." in md
    totals_head = md.split("## Totals")[1].splitlines()[2]
    assert "| GPU-hours (requested) |" in totals_head and "| wasted GPU-h (requested) |" in totals_head
    for section in ("## By user", "## By account", "## By GPU type", "## Outcomes", "### Efficiency by user"):
        assert "GPU-hours (requested)" in md.split(section)[1].split("\n\n")[1].splitlines()[0], section
    about = md.split("## About this report")[1]
    assert f"| GPU-hours | {rep['totals']['gpu_hours']:,.0f} GPU-h ({note}: ReqTRES GPUs × elapsed) |" in about
    html = (out / "weekly.html").read_text()
    assert '<th class="l">GPU-hours (requested)</th>' in html and f'<span class="flag">({note})</span>' in html
    assert "<th>GPU-hours (requested)</th><th>CPU-hours</th>" in html
    assert html.split('id="about"')[1].count(note) == 1
    assert any(r["item"] == "GPU-hours" and note in r["value"] for r in _csv(out / "inputs.csv"))
    # with AllocTRES: nothing is requested, nothing is marked
    full, text2 = _report(tmp_path / "a", corpus / HABROK)
    assert full["totals"]["gpu_hours_from_request"] == 0 and "requested:" not in text2
    assert "(requested)" not in (tmp_path / "a" / "weekly.md").read_text()
    assert "(requested)" not in (tmp_path / "a" / "weekly.html").read_text()


def test_missing_account_qos_and_untyped_gpus_are_named(tmp_path, corpus):
    """Habrok has no Account or QOS field: its jobs group under "unknown (no Account
    field)" / "unknown (no QOS field)", not "(none)"; gcm's ``gres/gpu=1024`` (no type) groups
    as "untyped"."""
    rep, _ = _report(tmp_path / "h", corpus / HABROK)
    out = tmp_path / "h"
    assert [(g["account"], g["jobs"]) for g in rep["by_account"]] == [("unknown (no Account field)", 90)]
    assert [(g["qos"], g["jobs"]) for g in rep["by_qos"]] == [("unknown (no QOS field)", 90)]
    assert rep["by_account"][0]["gpu_hours"] == pytest.approx(rep["totals"]["gpu_hours"])
    assert _csv(out / "by_account.csv")[0]["account"] == "unknown (no Account field)"
    assert _csv(out / "by_qos.csv")[0]["qos"] == "unknown (no QOS field)"
    md = (out / "weekly.md").read_text()
    assert "| unknown (no Account field) | 90 |" in md and "| unknown (no QOS field) | 90 |" in md
    assert "| (none) |" not in md.split("## By account")[1].split("## By partition")[0]
    html = (out / "weekly.html").read_text()
    assert '<td class="l">unknown (no Account field)</td><td>90</td>' in html
    assert '<td class="l">unknown (no QOS field)</td><td>90</td>' in html

    rep, _ = _report(tmp_path / "g", GCM)
    out = tmp_path / "g"
    # AllocTRES of its two jobs: gres/gpu=1024 and gres/gpu=256, no type
    assert [(g["gpu_type"], g["jobs"]) for g in rep["by_gpu_type"]] == [("untyped", 2)]
    assert rep["by_gpu_type"][0]["gpu_hours"] == pytest.approx(rep["totals"]["gpu_hours"])
    assert rep["by_account"][0]["account"] == "project"   # an Account field: its value
    assert _csv(out / "by_gpu_type.csv")[0]["gpu_type"] == "untyped"
    assert "| untyped | 2 |" in (out / "weekly.md").read_text()
    assert '<td class="l">untyped</td><td>2</td>' in (out / "weekly.html").read_text()


def test_cpu_only_week_gpu_type_table_says_why_it_is_empty(tmp_path, corpus):
    """On the weekly report: Habrok's 2024-W10 (Europe/Amsterdam)
    holds 10 jobs, none with a GPU (AllocTRES without gres/gpu): the GPU-type table (GPU jobs
    only) says they ran without GPUs, never "No jobs in the window."; a week without jobs
    still says no jobs."""
    out = tmp_path / "w10"
    res = CliRunner().invoke(cli, ["report", "weekly", "--from-sacct", str(corpus / HABROK), "--tz", "Europe/Amsterdam",
                                   "--week", "2024-W10", "--no-store", "-o", str(out), "--format", "json,md,html"],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rep = json.loads((out / "weekly.json").read_text())
    assert rep["totals"]["jobs"] == 10 and rep["totals"]["gpu_hours"] == 0 and rep["by_gpu_type"] == []
    why = "No GPU job in the window: its 10 job(s) ran without GPUs"
    md = (out / "weekly.md").read_text()
    assert md.split("## By GPU type", 1)[1].lstrip().startswith(why)
    html = (out / "weekly.html").read_text()
    assert why in html and html.count("No jobs in the window.") == 0
    # GPU utilization: no GPU job to measure ("– %")
    assert "GPU utilization – (no GPU job with a measurement)" in md and "– %" not in md
    assert "(GPU-hour weighted, where known) – (no GPU job with a measurement);" in html


def test_skipped_share_names_its_base(tmp_path):
    """On gcm's multiple-multiline capture (facebookresearch/gcm's
    test data, tests/accounting/data/README): "1 of 6 rows skipped (25 %)" read as wrong
    arithmetic; the share is of the 4 rows the window had to count (two repeats of record
    201844 are not its to count), and the message now says so."""
    src = Path(__file__).parents[1] / "accounting" / "data" / "gcm_sample-sacct-multiple-multiline.txt"
    res = CliRunner().invoke(cli, ["report", "weekly", "--from-sacct", str(src), "-o", str(tmp_path / "o"),
                                   "--format", "json,md", "--no-store", *ALL_TIME])
    assert res.exit_code == 1
    assert ("1 of 6 input rows were skipped for a problem (25 % of the 4 rows the window had to count; the 2 "
            "other(s) were not its to count: repeats, outside the window ...), over the 1 % allowed") in res.output
    dq = json.loads((tmp_path / "o" / "weekly.json").read_text())["data_quality"]
    assert (dq["rows_read"], dq["rows_skipped"], dq["rows_rejected"]) == (6, 3, 1)
