"""Inputs on record on a real capture (tests/report/data/README.md):
JSON ``inputs`` and the "About this report" block name each file (sha256, rows, delimiter,
header), the capture time and how it was found, the zone and whether it was assumed, the
window and the tool; a non-empty capture with no row in the window is refused unless
``--allow-empty``."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from slurmkit import __version__
from slurmkit.cli import cli

SRC = Path(__file__).parent / "data" / "safe_oxford_allocgres.psv"


@pytest.fixture(autouse=True)
def _no_site_from_the_shell(monkeypatch):
    monkeypatch.delenv("SLURMKIT_SITE", raising=False)


def _run(*args):
    return CliRunner().invoke(cli, ["report", "weekly", "--from-sacct", str(SRC), "--trend-weeks", "0", *args],
                              catch_exceptions=False)


def test_inputs_on_record(tmp_path):
    out = tmp_path / "out"
    res = _run("--start", "2017-01-02", "--end", "2017-01-16", "-o", str(out), "--format", "json,md,html,csv",
               "--tz", "Europe/London", "--as-of", "2017-01-10T00:00:00")
    assert res.exit_code == 0, res.output
    rep = json.loads((out / "weekly.json").read_text())
    inp = rep["inputs"]
    f = inp["files"][0]
    assert f["sha256"] == hashlib.sha256(SRC.read_bytes()).hexdigest()
    assert f["rows"] == 9 and f["delimiter"] == "|" and f["header"] is True
    assert f["fields"][:3] == ["JobID", "JobIDRaw", "User"] and "AllocGRES" in f["fields"]
    assert f["latest_time"] == "2017-01-09T05:58:41Z" and f["duplicates"] is None
    assert inp["as_of"] == "2017-01-10T00:00:00Z" and inp["as_of_from"] == "--as-of"
    assert inp["time_zone"] == "Europe/London" and inp["time_zone_given"] is True
    assert inp["window"] == rep["window"] and inp["tool"] == f"slurmkit {__version__}"
    assert "UTC assumed" not in res.output
    md = (out / "weekly.md").read_text()
    about = md.split("## About this report")[1].split("##")[0]
    assert f["sha256"] in about and "Europe/London (given)" in about and "--as-of" in about
    html = (out / "weekly.html").read_text()
    assert 'id="about"' in html and f["sha256"] in html
    assert f["sha256"] in (out / "inputs.csv").read_text()


def test_no_zone_is_an_assumption_said(tmp_path):
    res = _run("--start", "2017-01-02", "--end", "2017-01-16", "-o", str(tmp_path / "o"), "--format", "json,md")
    assert res.exit_code == 0
    assert "time zone UTC assumed" in res.output
    rep = json.loads((tmp_path / "o" / "weekly.json").read_text())
    assert rep["inputs"]["time_zone_given"] is False
    assert any("UTC assumed" in w for w in rep["data_quality"]["warnings"])
    assert rep["inputs"]["as_of_from"].startswith("the latest")


def test_capture_outside_the_window_is_refused(tmp_path):
    out = tmp_path / "o"
    res = _run("--week", "2018-W02", "-o", str(out), "--tz", "UTC")
    assert res.exit_code == 2 and "none of the 9 rows is in the window" in res.output
    assert not out.exists()
    res = _run("--week", "2018-W02", "-o", str(out), "--tz", "UTC", "--allow-empty", "--format", "json")
    assert res.exit_code == 0 and json.loads((out / "weekly.json").read_text())["totals"]["jobs"] == 0


def test_a_window_that_is_not_a_week_is_not_titled_weekly(tmp_path):
    """The 14-day window of this capture is not a "weekly report";
    a user named like Markdown (``**  USER1``, a labelled edit of the capture) stays text."""
    edit = tmp_path / "edit.psv"
    edit.write_text(SRC.read_text().replace("|dops0572|", "|**  USER1|"))
    out = tmp_path / "o"
    res = CliRunner().invoke(cli, ["report", "weekly", "--from-sacct", str(edit), "--trend-weeks", "0", "--start",
                                   "2017-01-02", "--end", "2017-01-16", "-o", str(out), "--format", "md,html"],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    md = (out / "weekly.md").read_text()
    assert md.startswith("# GPU cluster report over 14 days: 2017-01-02 to 2017-01-16")
    assert "| \\*\\*  USER1 |" in md and "| **  USER1 |" not in md
    assert "<title>GPU cluster report over 14 days" in (out / "weekly.html").read_text()


def test_header_line_is_not_a_row(tmp_path):
    """The header line is not counted among the rows read or
    skipped (10 lines: a header and 9 records, all in the window)."""
    out = tmp_path / "o"
    res = _run("--start", "2017-01-02", "--end", "2017-01-16", "-o", str(out), "--format", "json,md",
               "--tz", "Europe/London")
    assert res.exit_code == 0, res.output
    assert len(SRC.read_text().splitlines()) == 10
    dq = json.loads((out / "weekly.json").read_text())["data_quality"]
    assert (dq["rows_read"], dq["rows_counted"], dq["rows_skipped"]) == (9, 9, 0)
    assert "rows read 9, skipped 0" in res.output


def test_as_of_before_every_submit_is_a_warning_naming_both_times(tmp_path):
    """An --as-of earlier than every job's Submit (the capture
    cannot have been taken then) is said on stderr, in data_quality.warnings and in the
    Markdown, with both times; as of then nothing had been submitted, so without --allow-empty
    it is an error that says so; an --as-of after every time says nothing."""
    submits = [ln.split("|")[10] for ln in SRC.read_text().splitlines()[1:]]
    first = min(submits)
    assert first == "2017-01-04T16:57:11"   # Europe/London in January = UTC
    want = f"--as-of 2016-12-01T00:00:00Z is earlier than every job's Submit in the captures (the earliest: {first}Z)"
    bad = _run("--start", "2017-01-02", "--end", "2017-01-16", "-o", str(tmp_path / "b"), "--format", "json",
               "--tz", "Europe/London", "--as-of", "2016-12-01T00:00:00")
    assert bad.exit_code == 2 and want in bad.output and "no job had been submitted by --as-of" in bad.output
    assert not (tmp_path / "b").exists()
    out = tmp_path / "o"
    res = _run("--start", "2017-01-02", "--end", "2017-01-16", "-o", str(out), "--format", "json,md",
               "--tz", "Europe/London", "--as-of", "2016-12-01T00:00:00", "--allow-empty")
    assert res.exit_code == 0, res.output
    assert want in res.output
    rep = json.loads((out / "weekly.json").read_text())
    assert any(w.startswith(want) for w in rep["data_quality"]["warnings"])
    assert rep["inputs"]["as_of_warning"].startswith(want)
    assert want in (out / "weekly.md").read_text()
    ok = _run("--start", "2017-01-02", "--end", "2017-01-16", "-o", str(tmp_path / "p"), "--format", "json",
              "--tz", "Europe/London", "--as-of", "2017-02-01T00:00:00")
    assert ok.exit_code == 0 and "earlier than every job" not in ok.output
    assert json.loads((tmp_path / "p" / "weekly.json").read_text())["inputs"]["as_of_warning"] is None


def test_as_of_before_starts_and_ends_warns_and_rewinds_the_capture(tmp_path, corpus):
    """On the corpus's Habrok capture (taken 2024-04-19 13:11): with --as-of
    2024-04-17T00:00Z, 8 allocation rows have a Start or End after it; the warning names the
    first (8162707, End 2024-04-17T11:44:39) and the report is as of --as-of: the jobs that
    started later (7951810 at 04-17 14:42, 8202099 at 04-17 22:53: pending then; 8298012 and
    8322514_33, submitted later: left out) are not run jobs, and those that ended later run until
    --as-of (4 of the 11 counted). Counted by hand from the capture: 11 jobs started by 04-17
    00:00 and touch W16 (the analyst's 12 left 7951810, COMPLETED, started 04-17 14:42, in)."""
    out = tmp_path / "o"
    res = CliRunner().invoke(cli, [
        "report", "weekly", "--from-sacct", str(corpus / "sacct/habrok_gpu_cluster_parsable2.psv"), "--tz", "UTC",
        "--week", "2024-W16", "--as-of", "2024-04-17T00:00Z", "--trend-weeks", "0", "--no-store", "-o", str(out),
        "--format", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    want = ("--as-of 2024-04-17T00:00:00Z is earlier than the Start or End of 8 allocation row(s) in the captures "
            "(the first: JobID 8162707 End 2024-04-17T11:44:39Z)")
    assert want in res.output
    rep = json.loads((out / "weekly.json").read_text())
    assert rep["inputs"]["as_of_warning"].startswith(want)
    assert rep["totals"]["jobs"] == 11
    assert rep["data_quality"]["skipped_reasons"][
        "submitted (or a step started) after --as-of: not yet in the capture then"] == 14
    # 8162707, 8163609, 8180204, 8181476_31 started by --as-of and ended after it: running then
    outcome = {o["state"]: o["jobs"] for o in rep["outcomes"]}
    assert outcome == {"CANCELLED": 1, "COMPLETED": 5, "RUNNING": 4, "TIMEOUT": 1}
    assert rep["totals"]["provisional_jobs"] == 4


def test_running_job_runs_what_sacct_measured_at_capture(corpus):
    """On the corpus's Habrok capture: running job 8322514_33 (Start
    09:39:58, Elapsed 03:31:51 = 12711 s when sacct printed it) runs 12711 s, not the capture
    time (the latest Start + Elapsed of any running job, 13:11:52, from 8298012) − Start =
    12714 s; its 8 CPUs give 8 x 12711 s of CPU time."""
    import pandas as pd

    from slurmkit.accounting.frame import load_sacct
    from slurmkit.report.energy import Assumptions
    from slurmkit.report.pipeline import latest_time
    from slurmkit.report.weekly import build_report
    from slurmkit.report.window import Window

    rows, dq = load_sacct(corpus / "sacct/habrok_gpu_cluster_parsable2.psv")
    as_of = latest_time(rows)
    assert str(as_of) == "2024-04-19 13:11:52+00:00"
    w = Window(as_of.floor("D") - pd.Timedelta(days=1), as_of.ceil("D"))
    _, a = build_report(rows, dq, w, Assumptions(), now=as_of, running_elapsed=True)
    j = a.set_index("job_id").loc["8322514_33"]
    assert j["run_s"] == 12711 and j["in_window_s"] == 12711 and j["provisional"]
    assert j["cpu_hours"] == pytest.approx(8 * 12711 / 3600)
    # live rows (a pull made before now): Start -> now
    _, live = build_report(*load_sacct(corpus / "sacct/habrok_gpu_cluster_parsable2.psv"), w, Assumptions(), now=as_of)
    assert live.set_index("job_id").loc["8322514_33", "run_s"] == 12714


def test_partial_week_is_flagged_where_readers_look(tmp_path, corpus):
    """The corpus's Habrok capture (taken 2024-04-19 13:11:52) for W16 (ends
    04-22): JSON ``coverage`` says partial; the Markdown and HTML say so under the totals; the
    GPUs-in-use curve stops at the capture (no 0 GPUs after it) and the plot shades the rest
    "not captured"; the stored week's trend cells read "(provisional)"."""
    from slurmkit.report.plots import hourly_fig

    out = tmp_path / "o"
    res = CliRunner().invoke(cli, [
        "report", "weekly", "--from-sacct", str(corpus / "sacct/habrok_gpu_cluster_parsable2.psv"), "--tz", "UTC",
        "--week", "2024-W16", "--store", str(tmp_path / "store"), "--trend-weeks", "2", "-o", str(out),
        "--format", "json,md,html"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rep = json.loads((out / "weekly.json").read_text())
    cov = rep["coverage"]
    assert cov["partial"] and cov["covered_until"] == "2024-04-19T13:11:52Z" and cov["window_end"] == "2024-04-22T00:00:00Z"
    note = ("Partial window: the captures end at 2024-04-19T13:11:52Z, before the window's end (2024-04-22T00:00:00Z); "
            "every figure covers the window up to then")
    assert f"**{note}" in (out / "weekly.md").read_text()
    assert note.replace("'", "&#39;") in (out / "weekly.html").read_text()
    # the curve's last hour is the capture's (13:00, 52 minutes of it): no hour after it
    assert rep["hourly"]["bucket"] == "hour" and rep["hourly"]["hours"][0] == "2024-04-15T00:00:00Z"
    assert rep["hourly"]["hours"][-1] == "2024-04-19T13:00:00Z" and len(rep["hourly"]["hours"]) == 4 * 24 + 14
    plt, fig, ax = hourly_fig(rep)
    assert "not captured" in [t.get_text() for t in ax.get_legend().get_texts()]
    # the p95 level stops where the capture does (it used to cross the shade)
    import matplotlib.dates as mdates
    p95 = [c for c in ax.collections if c.get_label().startswith("p95")]
    assert len(p95) == 1
    (x0, _), (x1, _) = p95[0].get_segments()[0]
    assert mdates.num2date(x1).isoformat().startswith("2024-04-19T13:11:52")
    plt.close(fig)
    assert rep["trends"]["provisional_weeks"] == ["2024-W16"]
    md = (out / "weekly.md").read_text()
    assert "| GPU-hours | – | 128 (provisional) |" in md, [ln for ln in md.splitlines() if ln.startswith("| GPU-hours")]


def test_live_about_block_says_now_not_none():
    """A live report's inputs (``inputs_record`` without captures: as_of None,
    as_of_from "now (live)") read "now (live)" in the About block, not "None (now (live))"."""
    from slurmkit.report.pipeline import WeeklyOptions, inputs_record
    from slurmkit.report.render import about_rows
    from slurmkit.report.window import parse_week

    w = parse_week("2026-W49")
    rec = inputs_record(WeeklyOptions(window=w), w, None)
    rows = dict((k, v) for k, v in about_rows({"inputs": rec, "window": w.as_dict()}))
    assert rows["capture time (--as-of)"] == "now (live)"


def test_trend_lines_each_have_their_own_colour_marker_and_style(tmp_path, corpus):
    """The corpus's Habrok capture stored for W15 and W16 (its partitions
    gpulong, regularlong, ... over two weeks, W16 provisional): in every panel of the trends
    plot no two series share a colour, a marker or a line style (the provisional open markers
    used to advance the colour cycle, so gpulong and regularlong were both blue)."""
    from slurmkit.report.plots import trends_fig

    src = str(corpus / "sacct/habrok_gpu_cluster_parsable2.psv")
    for week in ("2024-W15", "2024-W16"):
        res = CliRunner().invoke(cli, [
            "report", "weekly", "--from-sacct", src, "--tz", "UTC", "--week", week, "--store", str(tmp_path / "store"),
            "--trend-weeks", "2", "-o", str(tmp_path / week), "--format", "json"], catch_exceptions=False)
        assert res.exit_code == 0, res.output
    rep = json.loads((tmp_path / "2024-W16" / "weekly.json").read_text())
    assert rep["trends"]["provisional_weeks"] == ["2024-W16"] and len(rep["trends"]["by_partition"]) >= 3
    plt, fig, axes = trends_fig(rep)
    for ax in axes.flat:
        series = [ln for ln in ax.get_lines() if not ln.get_label().startswith("_")]
        assert len(series) == len(rep["trends"]["by_partition" if ax in axes[:, 0] else "by_account"][:8])
        colours, markers = [ln.get_color() for ln in series], [ln.get_marker() for ln in series]
        assert len(set(colours)) == len(colours) and len(set(markers)) == len(markers), (colours, markers)
        styles = [ln.get_linestyle() for ln in series[:4]]
        assert len(set(styles)) == len(styles), styles
    plt.close(fig)


def test_as_of_later_than_the_capture_keeps_running_jobs_where_sacct_left_them(tmp_path, corpus):
    """Habrok's capture was printed at 2024-04-19 11:11:52 (its
    running jobs' Start + Elapsed); with ``--as-of 2024-04-21`` the totals stopped the running
    jobs there but the GPUs-in-use curve ran them on to --as-of (181.4 GPU-h in hourly.csv
    against 124.3 in the totals) and nothing was said. Now each running job stops at Start +
    Elapsed everywhere (totals = the curve's hours, the same totals as without --as-of), a
    warning names the capture's own time, and utilization's hours run to --as-of."""
    habrok = corpus / "sacct/habrok_gpu_cluster_parsable2.psv"

    def weekly(out, *extra):
        res = CliRunner().invoke(cli, ["report", "weekly", "--from-sacct", str(habrok), "--tz", "Europe/Amsterdam",
                                       "--week", "2024-W16", "--capacity-gpus", "10", "--no-store", "-o", str(out),
                                       "--format", "json,csv", *extra], catch_exceptions=False)
        assert res.exit_code == 0, res.output
        return json.loads((out / "weekly.json").read_text()), res.output

    plain, _ = weekly(tmp_path / "plain")
    late, said = weekly(tmp_path / "late", "--as-of", "2024-04-21T00:00:00Z")
    warn = late["inputs"]["as_of_warning"]
    assert warn.startswith("--as-of 2024-04-21T00:00:00Z is later than the captures' own time") and \
        "printed by 2024-04-19T11:11:52Z (JobID 8202099" in warn and warn in said
    assert plain["inputs"]["as_of_warning"] is None
    assert late["totals"]["gpu_hours"] == plain["totals"]["gpu_hours"] == pytest.approx(124.293889, abs=1e-6)
    hourly = pd.read_csv(tmp_path / "late" / "hourly.csv")
    assert len(hourly) == 6 * 24 and hourly["gpus_in_use"].sum() == pytest.approx(late["totals"]["gpu_hours"], abs=1e-3)
    # utilization: 10 GPUs x the week's hours up to --as-of (Monday 00:00 UTC to Sunday 00:00)
    assert late["utilization"]["utilization"] == pytest.approx(late["totals"]["gpu_hours"] / (10 * 144), rel=1e-6)


def test_about_block_names_the_field_list_file(tmp_path, corpus):
    """A capture without a header (Habrok's as captured with
    ``--parsable --noheader --delimiter=☃``, its fields in a file beside it) named its field
    list in the About block but not the file it came from."""
    c = corpus / "sacct"
    out = tmp_path / "o"
    res = CliRunner().invoke(cli, ["report", "weekly", "--from-sacct", str(c / "habrok_gpu_cluster_snowman_delim.txt"),
                                   "--sacct-fields", str(c / "habrok_format_fields.txt"), "--tz", "Europe/Amsterdam",
                                   "--week", "2024-W16", "--no-store", "-o", str(out), "--format", "json,md"],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rep = json.loads((out / "weekly.json").read_text())
    assert rep["inputs"]["sacct_fields_file"] == str(c / "habrok_format_fields.txt")
    assert rep["inputs"]["files"][0]["header"] is False and rep["inputs"]["files"][0]["delimiter"] == "☃"
    assert f"field list given (--sacct-fields {c / 'habrok_format_fields.txt'}): JobID," in (out / "weekly.md").read_text()
