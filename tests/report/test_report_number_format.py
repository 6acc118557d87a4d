"""One number format in every table of the reports: a count of 1,000 or more reads with its
thousands separators in a part's row as in the period's, in HTML and Markdown alike (CSV keeps
plain numbers). Input: the corpus's Habrok capture (sacct/habrok_gpu_cluster_parsable2.psv) with
every job 40 times under new JobIDs (``capture_edit.repeated``, a labelled edit: a site 40
times as busy), March 2024 stored with ``report store``."""

from __future__ import annotations

import json
import re

import pytest
from capture_edit import repeated
from click.testing import CliRunner

from slurmkit.cli import cli


def _sk(*args):
    res = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res


@pytest.fixture(scope="module")
def busy(corpus, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("busy")
    return repeated(corpus / "sacct/habrok_gpu_cluster_parsable2.psv", tmp / "habrok_x40.psv", 40)


@pytest.fixture(scope="module")
def march(busy, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("march")
    _sk("report", "store", "--from-sacct", busy, "--store", tmp / "store", "--start", "2024-03-01", "--end",
        "2024-04-01", "--tz", "UTC")
    out = tmp / "out"
    _sk("report", "period", "--month", "2024-03", "--store", tmp / "store", "--now", "2024-06-01", "--format",
        "json,md,html,csv", "-o", out)
    return json.loads((out / "period.json").read_text()), out


def _cells(html_row: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", html_row)]


def test_period_part_rows_and_period_row_group_thousands_alike(march):
    """The totals per week: the period's 1,520 jobs and week 9's 1,160 both grouped (a part's
    jobs were printed bare, 1160); so are the group tables, the outcomes and the queue-wait
    sentence."""
    rep, out = march
    weeks = {b["label"]: b["totals"]["jobs"] for b in rep["breakdown"]}
    assert rep["totals"]["jobs"] == 1520 and weeks["2024-W09"] == 1160
    html = (out / "period.html").read_text()
    totals = html.split('id="totals">')[1].split("</table>")[0].split("</tr>")
    period_row, w09 = totals[1], next(r for r in totals if ">2024-W09<" in r)
    assert _cells(period_row)[4] == "1,520" and _cells(w09)[4] == "1,160"
    md = (out / "period.md").read_text()
    assert "| (all) | **period** | 31 / 31 | 1,520 |" in md and "| (all) | 2024-W09 | 3 / 3 | 1,160 |" in md
    # the group tables, outcomes, queue wait and job sizes
    acc = rep["by_account"][0]
    assert acc == {**acc, "account": "unknown (no Account field)", "jobs": 1520}
    assert "| unknown (no Account field) | 1,520 |" in md
    assert '<td class="l">unknown (no Account field)</td><td>1,520</td>' in html
    done = next(o for o in rep["outcomes"] if o["state"] == "COMPLETED")
    assert done["jobs"] >= 1000
    assert f"| COMPLETED | {done['jobs']:,} | {done['attempts']:,} |" in md
    assert f'<td class="l">COMPLETED</td><td>{done["jobs"]:,}</td><td>{done["attempts"]:,}</td>' in html
    assert f"{rep['queue_wait']['all']['n']:,} jobs started in the period" in md
    assert f"<p>{rep['queue_wait']['all']['n']:,} jobs; p50" in html
    # CSV: plain numbers, for machines
    assert "\n(all),(period),31,31,,1520,0,1520," in (out / "totals.csv").read_text()


def test_weekly_tables_group_thousands(busy, tmp_path):
    """The weekly report of the same capture over its whole span: jobs, per-account jobs, the
    wait histogram's bins and the job-size cells grouped in HTML and Markdown."""
    out = tmp_path / "out"
    _sk("report", "weekly", "--from-sacct", busy, "--no-store", "--trend-weeks", "0", "--format", "json,md,html",
        "-o", out, "--tz", "UTC")
    rep = json.loads((out / "weekly.json").read_text())
    assert rep["totals"]["jobs"] == 3600
    html = (out / "weekly.html").read_text()
    md = (out / "weekly.md").read_text()
    assert '<th class="l">Jobs</th><td>3,600</td>' in html
    assert rep["by_account"][0]["jobs"] == 3600
    assert '<td class="l">unknown (no Account field)</td><td>3,600</td>' in html
    assert "| unknown (no Account field) | 3,600 |" in md
    assert rep["queue_wait"]["histogram"][0] == 1200 and "| (all) | (all) | 1,200 |" in md
    assert rep["job_sizes"]["jobs"][0][0] == 1120          # no GPU, under an hour
    assert "| 0 | 1,120 / 0 |" in md and '<td class="l">0</td><td>1,120 / 0</td>' in html


def _labels(fig, axis) -> tuple[list[str], str]:
    """The drawn major tick labels of ``axis`` and its offset text (``1e6`` above the axis)."""
    fig.canvas.draw()
    return [t.get_text() for t in axis.get_ticklabels() if t.get_text()], axis.get_offset_text().get_text()


def test_plot_axes_read_plain_grouped_numbers(busy, march, tmp_path):
    """The period's CPU-hours per month by account (March: 1,316,698 CPU-h; January and
    February not stored) and the weekly plots of the same capture: no ``1e6`` offset over an
    axis, ticks from 1,000 on grouped (``1,000,000``, not ``1.0`` under ``1e6``), in every plot of
    both reports (one formatter, :func:`slurmkit.report.plots.plain_axis`)."""
    import matplotlib.pyplot as plt

    from slurmkit.report import period_plots as pp
    from slurmkit.report import plots
    from slurmkit.report.period import parse_period, period_report

    rep, out = march
    store = out.parent / "store"
    q1 = period_report(store, parse_period(quarter="2024-Q1"), None, now="2024-06-01")
    assert q1["by_account"][0]["cpu_hours"] > 1e6
    _plt, fig, axes = pp.series_fig(pp.panels(q1, "by_account"), "per month by account", "month")
    cpu = next(ax for ax in axes if ax.get_ylabel() == "CPU-hours")
    labels, offset = _labels(fig, cpu.yaxis)
    plt.close(fig)
    assert offset == "" and "1,000,000" in labels
    assert all(re.fullmatch(r"\d{1,3}(,\d{3})*|\d+\.\d+", s) for s in labels), labels
    # the weekly report's plots of the whole capture
    wk = tmp_path / "wk"
    _sk("report", "weekly", "--from-sacct", busy, "--no-store", "--trend-weeks", "0", "--format", "json", "-o", wk,
        "--tz", "UTC", "--capacity-gpus", "2000")
    wrep = json.loads((wk / "weekly.json").read_text())
    assert wrep["by_user"][0]["gpu_hours"] > 1000
    for make, axis in ((plots.top_users_fig, "xaxis"), (plots.hourly_fig, "yaxis")):
        _plt, fig, ax = make(wrep)
        labels, offset = _labels(fig, getattr(ax, axis))
        plt.close(fig)
        assert offset == "" and labels, make.__name__
        assert all(re.fullmatch(r"\d{1,3}(,\d{3})*|\d+\.\d+", s) for s in labels), (make.__name__, labels)
        assert any("," in s for s in labels), (make.__name__, labels)
