"""An analyst's quarterly reports with ``report period`` / ``report store`` / ``report jobs``,
on stores built from the shared corpus
(../shared/corpus/sacct: Habrok's real ``sacct -P`` captures, June 2023 to April 2024, and
CSCS Santis' one-day ``sacct -P`` capture of 15 March 2024):

- S1: ``report store`` of both Habrok captures (``--tz Europe/Amsterdam``), cluster habrok;
- S3: S1 plus the Santis capture (``--tz Europe/Zurich``), cluster santis.
"""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
from click.testing import CliRunner

from slurmkit.cli import cli
from slurmkit.report.period import HEADERS


def _sk(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture(scope="module")
def stores(corpus, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("stores")
    c = corpus / "sacct"
    s1, s3 = tmp / "S1", tmp / "S3"
    res = _sk("report", "store", "--from-sacct", c / "habrok_gpu_cluster_parsable2.psv", "--from-sacct",
              c / "habrok_gpu_cluster_snowman_delim.txt", "--sacct-fields", c / "habrok_format_fields.txt",
              "--store", s1, "--cluster", "habrok", "--tz", "Europe/Amsterdam")
    assert res.exit_code == 0, res.output
    assert "324 day(s) written (2023-06-01 .. 2024-04-19)" in res.stdout and res.stderr == ""
    shutil.copytree(s1, s3)
    res = _sk("report", "store", "--from-sacct", c / "cscs_energy_parsable2.psv", "--cluster", "santis",
              "--tz", "Europe/Zurich", "--store", s3)
    assert res.exit_code == 0, res.output
    return s1, s3


def _period(tmp_path, *args):
    out = tmp_path / "out"
    res = _sk("report", "period", *args, "--format", "json,csv,md,html", "-o", out)
    assert res.exit_code == 0, res.output
    return res, json.loads((out / "period.json").read_text()), out


def test_a_period_with_no_stored_day_reads_not_in_the_store_everywhere(stores, tmp_path):
    """No stored day: job-size cells null (never 0 jobs / 0 GPU-h), no
    Python ``None`` in Markdown or HTML, every CSV with its header row."""
    s1, _ = stores
    res, rep, out = _period(tmp_path, "--quarter", "2027-Q1", "--store", s1, "--now", "2027-06-01")
    assert rep["not_in_store"] == "not in the store" and rep["store"]["days"] == 0
    for sec in [rep] + rep["breakdown"]:
        assert {c["jobs"] for c in sec["job_sizes"]["cells"]} == {None}
        assert {c["gpu_hours"] for c in sec["job_sizes"]["cells"]} == {None}
    js = pd.read_csv(out / "job_sizes.csv")
    assert len(js) == 4 * 35 and js["jobs"].isna().all() and js["gpu_hours"].isna().all()
    for name, head in HEADERS.items():
        got = pd.read_csv(out / name)       # a 0-byte file raises EmptyDataError
        assert list(got.columns) == head, name
    assert list(pd.read_csv(out / "by_user.csv").columns) == ["cluster", "part", "user", "jobs", "gpu_hours",
                                                             "cpu_hours", "energy_kwh", "energy_jobs_unknown",
                                                             "wasted_gpu_hours", "provisional_gpu_hours",
                                                             "physical_gpu_hours"]
    md = (out / "period.md").read_text()
    html = (out / "period.html").read_text()
    for text in (md, html):
        assert "None" not in text and "0 / 0" not in text and "No jobs in the period." not in text
    assert "## By user\n\nNot in the store: no figures." in md
    assert "## Queue wait\n\nQueue wait: not in the store." in md and "Job sizes: not in the store." in md
    assert html.count("Not in the store: no figures.") == 6          # 5 groups and the outcomes
    period_row = html.split('<table class="kpi" id="totals">')[1].split("</tr>")[1]
    assert period_row.endswith('<td class="missing l" colspan="12">not in the store</td>')


def test_a_part_with_no_stored_day_has_null_job_sizes_beside_stored_parts(stores, tmp_path):
    """``--month 2024-04``: the store ends on 19 April; ISO week 17 has no day."""
    s1, _ = stores
    _, rep, out = _period(tmp_path, "--month", "2024-04", "--store", s1)
    parts = {b["label"]: b for b in rep["breakdown"]}
    assert parts["2024-W17"]["not_in_store"] == "not in the store"
    assert {c["jobs"] for c in parts["2024-W17"]["job_sizes"]["cells"]} == {None}
    w15 = parts["2024-W15"]
    assert sum(c["jobs"] for c in w15["job_sizes"]["cells"]) == w15["totals"]["jobs"] > 0
    js = pd.read_csv(out / "job_sizes.csv")
    assert js[js["part"] == "2024-W17"]["jobs"].isna().all()
    assert js[js["part"] == "2024-W15"]["jobs"].sum() == w15["totals"]["jobs"]


def test_cpu_only_jobs_are_not_read_as_no_jobs_by_gpu_type(stores, tmp_path):
    """2024-Q1 holds 40 CPU-only jobs: by GPU type (GPU jobs only, as the weekly
    report's table) says they ran without GPUs, not "No jobs in the period."; job sizes count
    them in the 0-GPU row."""
    s1, _ = stores
    res, rep, out = _period(tmp_path, "--quarter", "2024-Q1", "--store", s1)
    assert rep["totals"]["jobs"] == 40 and rep["totals"]["gpu_jobs"] == 0 and rep["by_gpu_type"] == []
    zero = [c["jobs"] for c in rep["job_sizes"]["cells"] if c["gpus"] == "0"]
    assert sum(zero) == 40
    text = "No GPU job in the period: its 40 job(s) ran without GPUs"
    md = (out / "period.md").read_text()
    assert md.split("## By GPU type\n\n")[1].startswith(text)
    html = (out / "period.html").read_text()
    assert html.split("By GPU type (the period)</h2>")[1].lstrip().startswith(f'<p class="note">{text}')
    assert "None" not in md and "None" not in html
    # the zone the captures were read in, as report store recorded it
    assert "Times of the captures read in: habrok: Europe/Amsterdam (--tz), 91 day(s)." in md
    assert "habrok: Europe/Amsterdam (--tz), 91 day(s)" in html
    # the job-size label says Elapsed (this capture has Elapsed, not ElapsedRaw)
    assert rep["job_sizes"]["duration_from"].startswith("Elapsed: ")


@pytest.mark.parametrize("opt, value, said", [
    ("--quarter", "0000-Q1", "--quarter: year 0 is out of range (1 to 9998)"),
    ("--year", "0000", "--year: year 0 is out of range (1 to 9998)"),
    ("--year", "9999", "--year: year 9999 is out of range (1 to 9998)"),
    ("--quarter", "9999-Q4", "--quarter: year 9999 is out of range (1 to 9998)"),
    ("--quarter", "", "--quarter: not a quarter: ''"),
])
def test_a_period_out_of_range_or_empty_is_a_one_line_error_naming_the_option(stores, tmp_path, opt, value, said):
    """No traceback, exit 2, the option named."""
    res = _sk("report", "period", opt, value, "--store", stores[0], "-o", tmp_path / "o")
    assert res.exit_code == 2 and res.output == f"slurmkit: error: {said}" + res.output.split(said)[1]
    assert res.output.count("\n") == 1 and "Traceback" not in res.output


def test_period_labels(stores, tmp_path):
    """``2024Q1`` and ``2024-q1`` are 2024-Q1; year 1 zero-padded, a
    ``--start/--end`` span said once."""
    s1, _ = stores
    for q in ("2024Q1", "2024-q1"):
        res = _sk("report", "period", "--quarter", q, "--store", s1, "-o", tmp_path / q, "--format", "json")
        assert res.exit_code == 0 and res.output.startswith("2024-Q1 (2024-01-01T00:00:00Z .. 2024-04-01T00:00:00Z): 40 jobs")
    res, rep, out = _period(tmp_path, "--month", "0001-01", "--store", s1)
    assert rep["period"]["label"] == "0001-01" and res.output.startswith("0001-01 (0001-01-01T00:00:00Z ..")
    assert rep["breakdown"][0]["label"] == "0001-W01"
    res = _sk("report", "period", "--start", "2024-03-01", "--end", "2024-03-10", "--store", s1, "-o", tmp_path / "se")
    assert res.output.startswith("2024-03-01T00:00:00Z..2024-03-10T00:00:00Z: 35 jobs")
    assert (tmp_path / "se" / "period.md").read_text().startswith(
        "# Usage report 2024-03-01T00:00:00Z..2024-03-10T00:00:00Z, by week\n")


def test_two_clusters_name_the_cluster_missing_days_and_empty_account_reads_none(stores, tmp_path):
    """S3, March 2024: the days not in the store per cluster (santis holds
    one day) in the CLI and the Markdown; Santis' job with an empty Account reads (none) in the
    Markdown, as in the HTML and the weekly report, and stays an empty cell in the CSV (as the
    weekly report's by_account.csv)."""
    _, s3 = stores
    res, rep, out = _period(tmp_path, "--month", "2024-03", "--store", s3)
    assert "32 day(s) from the store, missing: habrok 0, santis 30" in res.output.splitlines()[0]
    md = (out / "period.md").read_text()
    assert "**day(s) not in the store: habrok 0 of 31, santis 30 of 31 (0 in no cluster's store)**" in md
    # (Santis' job: its Slurm energy, all of it known)
    assert "| (none) | 1 | 0 | 673 | 5.71 | 0 |" in md.split("## By account")[1]
    acc = pd.read_csv(out / "by_account.csv", keep_default_na=False)
    assert list(acc[acc["cluster"] == "santis"]["account"]) == ["", ""]
    assert "santis: Europe/Zurich (--tz), 1 day(s)" in md


def test_a_fill_without_tz_is_said_in_the_period_report(corpus, tmp_path):
    """``report store`` without --tz warns as ``report weekly`` does and records
    the assumed zone; the period report says so."""
    res = _sk("report", "store", "--from-sacct", corpus / "sacct" / "cscs_energy_parsable2.psv",
              "--cluster", "santis", "--store", tmp_path / "s")
    assert res.exit_code == 0
    assert res.stderr == ("slurmkit: warning: time zone UTC assumed: the captures' times carry no zone and no --tz "
                          "was given (sacct prints the local time of the host it ran on)\n")
    assert "times read in UTC (assumed)" in res.stdout
    _, rep, out = _period(tmp_path, "--month", "2024-03", "--store", tmp_path / "s")
    assert rep["store"]["time_zones"] == [{"cluster": "santis", "time_zone": "UTC", "time_zone_given": False,
                                           "days": 1}]
    assert "santis: UTC (assumed: no --tz given to report store), 1 day(s)" in (out / "period.html").read_text()


def test_a_cluster_folder_or_an_empty_folder_is_not_a_store(stores, tmp_path):
    """No report of every day missing under cluster ``_default``."""
    res = _sk("report", "period", "--month", "2024-03", "--store", stores[0] / "cluster=habrok", "-o", tmp_path / "o")
    assert res.exit_code == 2
    assert f"this looks like a cluster folder of a store (cluster=<name>): give its parent, --store {stores[0]}" \
        in res.output
    (tmp_path / "empty").mkdir()
    res = _sk("report", "period", "--month", "2024-03", "--store", tmp_path / "empty", "-o", tmp_path / "o")
    assert res.exit_code == 2 and f"{tmp_path / 'empty'}: no cluster= folders in it" in res.output
    assert not (tmp_path / "o").exists()


def test_report_jobs_says_which_jobs_never_started(corpus):
    """Jobs read but never started are not "not found"."""
    res = _sk("report", "jobs", "--from-sacct", corpus / "sacct" / "habrok_gpu_cluster_parsable2.psv", "--tz",
              "Europe/Amsterdam", "4047445", "5931946", "7336818", "1", "--start", "2023-01-01", "--end", "2025-01-01")
    assert res.exit_code == 0, res.output
    assert res.stderr.splitlines()[:3] == ["slurmkit: warning: never started (cancelled before start): 4047445, 5931946",
                                           "slurmkit: warning: never started (state NODE_FAIL): 7336818",
                                           "slurmkit: warning: not found: 1"]


def test_running_jobs_count_up_to_their_pull_not_the_wall_clock(stores, corpus, tmp_path):
    """A store filled from captures knows when each row was pulled (the
    capture's time, 2024-04-19 11:11:52 UTC); its running jobs run up to then, not up to the
    wall clock (nor their time limit, which it reached first): April 2024 equals the weekly
    report of the same capture over the same window (user490's job ran 38.3 of its 72
    GPU-hours by then). Running jobs' hours differ by sacct's Elapsed (printed a few seconds
    before the capture's latest time) against capture time - Start: within 1e-4."""
    s1, _ = stores
    res, rep, out = _period(tmp_path, "--month", "2024-04", "--store", s1)
    assert rep["running_up_to"] == "2024-04-19T11:11:52Z"
    assert "their pull, at the latest 2024-04-19T11:11:52Z" in (out / "period.html").read_text()
    wk = tmp_path / "weekly"
    r = _sk("report", "weekly", "--from-sacct", corpus / "sacct" / "habrok_gpu_cluster_parsable2.psv",
            "--tz", "Europe/Amsterdam", "--start", "2024-04-01", "--end", "2024-05-01", "--no-store", "-o", wk,
            "--format", "json")
    assert r.exit_code == 0, r.output
    want = json.loads((wk / "weekly.json").read_text())["totals"]
    got = rep["totals"]
    assert got["jobs"] == want["jobs"] == 24
    for k in ("gpu_hours", "cpu_hours", "provisional_gpu_hours", "wasted_gpu_hours"):
        assert got[k] == pytest.approx(want[k], rel=1e-4), k
    assert got["provisional_gpu_hours"] == pytest.approx(44.867, abs=0.01)
    # an explicit --now before the pull still wins (the hours up to then)
    _, early, _ = _period(tmp_path / "early", "--month", "2024-04", "--store", s1, "--now", "2024-04-10")
    assert early["running_up_to"] == early["as_of"] == "2024-04-10T00:00:00Z" and early["totals"]["gpu_hours"] < got["gpu_hours"]



def test_a_now_in_the_past_counts_the_store_as_it_stood_then(stores, tmp_path):
    """``--now`` before the capture's time: every row's end is min(End, now), a job started
    after now is not counted and one that ended after it was running then (not its later
    outcome). The figures are an independent calculator's (csv module only: hours = CPUs x
    (min(End, now) - max(Start, window start)), End from Habrok's local times): March 2024 at
    2024-03-28 00:00 UTC gives 22,065 CPU-h, week 13 9,216 (job 7195760's 128 CPUs for the
    72 h of 03-25 .. 03-28; it ended 03-31 14:40 local, TIMEOUT: before, 20,055 CPU-h counted
    and its TIMEOUT reported); April at 04-15: 96.1 GPU-h and 6,964 CPU-h (before: 176 and 7,599)."""
    s1, _ = stores
    _, rep, _ = _period(tmp_path / "m", "--month", "2024-03", "--by", "week", "--store", s1,
                        "--now", "2024-03-28T00:00:00Z")
    assert round(rep["totals"]["cpu_hours"]) == 22065
    w13 = next(p for p in rep["breakdown"] if p["label"] == "2024-W13")
    assert round(w13["totals"]["cpu_hours"], 1) == 9216.0
    assert "TIMEOUT" not in {o["state"] for o in w13["outcomes"]}
    assert w13["totals"]["provisional_jobs"] == 1
    _, apr, _ = _period(tmp_path / "a", "--month", "2024-04", "--store", s1, "--now", "2024-04-15T00:00:00Z")
    assert (round(apr["totals"]["gpu_hours"], 1), round(apr["totals"]["cpu_hours"])) == (96.1, 6964)
