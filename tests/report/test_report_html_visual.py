"""The HTML report's details, on real captures
(tests/report/data/README.md, ../shared/corpus): the geometry of matplotlib's own artists for
the plots (pure, no browser), the page's text, and a headless Chromium screenshot that the page
renders (tests/report/chromium_shot.py).

- a week without GPU jobs (CSCS: one CPU job): the GPUs-in-use y axis starts at 0, not below;
- the top-users legend (Habrok, 2020-2030) covers no bar;
- queue waits from 0 s (the Oxford capture: Start = Submit) to 101 min are drawn in minutes
  with plain tick labels, not ``3x10^-4`` hours;
- the CPU-efficiency sentence never reads "over 100 % of the CPU-hours";
- a trend table without rows says so instead of showing headers only;
- a window that is not a week is not titled "weekly report"."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from slurmkit.cli import cli
from slurmkit.report import plots

from chromium_shot import screenshot

OXFORD = Path(__file__).parent / "data" / "safe_oxford_allocgres.psv"


@pytest.fixture(autouse=True)
def _no_site_from_the_shell(monkeypatch):
    monkeypatch.delenv("SLURMKIT_SITE", raising=False)


def _report(out, src, *args, fmt="json,html"):
    res = CliRunner().invoke(cli, ["report", "weekly", "--from-sacct", str(src), "-o", str(out), "--format", fmt,
                                   "--allow-skipped", *args], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return json.loads((out / "weekly.json").read_text())


def _close(plt, fig):
    plt.close(fig)


def test_a_week_without_gpu_jobs_has_no_negative_gpus(tmp_path, corpus):
    rep = _report(tmp_path / "o", corpus / "sacct" / "cscs_energy_parsable2.psv", "--week", "2024-W11",
                  "--trend-weeks", "0", "--tz", "Europe/Zurich")
    assert rep["totals"]["jobs"] == 1 and rep["totals"]["gpu_hours"] == 0.0
    assert rep["hourly"]["gpus_in_use"] and set(rep["hourly"]["gpus_in_use"]) == {0.0}
    plt, fig, ax = plots.hourly_fig(rep)
    lo, hi = ax.get_ylim()
    _close(plt, fig)
    assert lo == 0.0 and hi >= 1.0


def _legend_and_bars(rep):
    """The top-users legend's and the bars' display boxes, as matplotlib lays them out."""
    plt, fig, ax = plots.top_users_fig(rep)
    fig.tight_layout()
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legend = ax.get_legend().get_window_extent(renderer)
    bars = [(p.get_window_extent(renderer), p.get_facecolor()[:3]) for p in ax.patches if p.get_width() > 0]
    _close(plt, fig)
    return legend, bars


WASTED_RED = pytest.approx((0xd6 / 255, 0x27 / 255, 0x28 / 255))


def test_legend_is_not_over_a_single_users_wasted_bar(tmp_path):
    """One user whose GPU-hours are all wasted (a labelled edit of the Oxford capture: its rows
    of user mengel only, a FAILED 2-GPU job): one red bar the width of the axes, where a legend
    in the axes' corner used to sit."""
    edit = tmp_path / "oxford_mengel_only.psv"
    lines = OXFORD.read_text().splitlines()
    edit.write_text("\n".join([lines[0], *[ln for ln in lines[1:] if "|mengel|" in ln]]) + "\n")
    rep = _report(tmp_path / "o", edit, "--start", "2017-01-02", "--end", "2017-01-16", "--trend-weeks", "0",
                  "--tz", "Europe/London")
    assert [(u["user"], u["gpu_hours"], u["wasted_gpu_hours"]) for u in rep["by_user"]] == [
        ("mengel", pytest.approx(50.0017, abs=1e-4), pytest.approx(50.0017, abs=1e-4))]
    legend, bars = _legend_and_bars(rep)
    assert [c for _, c in bars] == [WASTED_RED]
    assert not legend.overlaps(bars[0][0])


def test_top_users_legend_covers_no_bar_and_the_page_renders(tmp_path, corpus):
    out = tmp_path / "o"
    rep = _report(out, corpus / "sacct" / "habrok_gpu_cluster_parsable2.psv", "--start", "2020-01-01",
                  "--end", "2030-01-01", "--as-of", "2030-01-01", "--trend-weeks", "0", "--tz", "Europe/Amsterdam")
    assert any(u["wasted_gpu_hours"] for u in rep["by_user"][:10])
    legend, bars = _legend_and_bars(rep)
    assert len(bars) >= 5 and WASTED_RED in [c for _, c in bars]
    assert not any(legend.overlaps(b) for b, _ in bars)
    html = (out / "weekly.html").read_text()
    text = re.sub(r"<[^>]+>", " ", html)
    # not a week: not titled weekly
    assert "<title>GPU cluster report over 3653 days: 2020-01-01 to 2030-01-01" in html
    assert "weekly report" not in text
    # the CPU-efficiency sentence: the share of the CPU-hours it is measured on, never "over N %"
    e = rep["efficiency"]
    assert e["cpu_efficiency"] is not None and e["cpu_hours_share"] is not None
    assert "of the CPU-hours" in text and "(over " not in text
    assert re.search(r"CPU efficiency [0-9.]+ % \(TotalCPU / NCPUS x run time, measured on "
                     r"(all of the CPU-hours|[0-9.]+ % of the CPU-hours)", text)
    screenshot(out / "weekly.html", tmp_path / "shot.png", tmp_path / "profile")


def test_queue_waits_get_a_unit_of_their_range_and_plain_ticks(tmp_path):
    rep = _report(tmp_path / "o", OXFORD, "--start", "2017-01-02", "--end", "2017-01-16", "--trend-weeks", "0",
                  "--tz", "Europe/London")
    waits = [q for q in rep["queue_wait"]["by_partition_gpus"] if q["n"]]
    longest = max(q["max_s"] for q in waits)
    # jobs that started at their Submit (0 s: 1 s on the log axis) and one that waited 1:41:17
    assert min(q["p50_s"] for q in waits) < 1 and longest == 6077.0
    assert plots.wait_unit(0.0) == ("seconds", 1.0) and plots.wait_unit(600.0) == ("minutes", 60.0)
    assert plots.wait_unit(4 * 3600.0) == ("hours", 3600.0)
    plt, fig, ax = plots.queue_wait_fig(rep)
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_xticklabels(minor=False) + ax.get_xticklabels(minor=True)
              if t.get_text() and ax.get_xlim()[0] <= t.get_position()[0] <= ax.get_xlim()[1]]
    xlabel = ax.get_xlabel()
    _close(plt, fig)
    assert xlabel.startswith("wait, minutes")   # 1 s to 101 min, not 3x10^-4 to 1.7 hours
    assert labels and all(re.fullmatch(r"[0-9.]+", s) for s in labels), labels


def test_trend_tables_without_rows_say_so(tmp_path):
    """A week stored with no job (the Oxford capture has rows, none in 2018-W02, stored with
    --allow-empty): the trend tables by account and partition have no row: the page says there
    are no jobs in the stored weeks; with no week in the store: "No stored weeks"."""
    from slurmkit.report.render import no_trend_rows_text

    out = tmp_path / "o"
    rep = _report(out, OXFORD, "--week", "2018-W02", "--allow-empty", "--store", str(tmp_path / "store"),
                  "--trend-weeks", "3", "--tz", "Europe/London", fmt="json,md,html")
    t = rep["trends"]
    assert t["weeks_known"] == ["2018-W02"] and t["by_account"] == [] and t["by_partition"] == []
    html = (out / "weekly.html").read_text()
    assert html.count("No jobs in the stored weeks (2018-W02): 0 GPU-hours.") == 2
    trends = html.split("<h2>Trends over the last 3 weeks</h2>")[1].split("<h2>")[0]
    assert "No jobs in the stored weeks (2018-W02): 0 CPU-hours." in trends and "<img" not in trends
    # no headers-only table, no empty chart; the cluster's own row per week is the one table:
    # the stored week reads 0, the weeks not in the store "–"; the capture ends before W02 does
    # (2017): the week is provisional, and its cell says so
    assert trends.count("<table") == 1
    assert '<td class="l">GPU-hours</td><td>–</td><td>–</td><td>0 (provisional)</td>' in trends
    # the window's own tables by user / account / partition: no headers-only table either
    assert html.count("<p class=\"note\">No jobs in the window.</p>") >= 3
    assert (out / "weekly.md").read_text().count("No jobs in the stored weeks (2018-W02)") == 4  # GPU-, CPU-hours x account, partition
    assert no_trend_rows_text({"weeks": ["2018-W01", "2018-W02"], "weeks_known": []}) == \
        "No stored weeks: none of 2018-W01 to 2018-W02 is in the store."
    screenshot(out / "weekly.html", tmp_path / "shot.png", tmp_path / "profile")
