"""The weekly report's charts that a reader could not read: the downtime timeline's short events
(the sandbox's real ``sacctmgr show event`` capture, tests/report/data/sreport/sandbox_events.psv:
n4 down 11 s and 8 s, in a one-day window) and the energy chart's source names."""

from __future__ import annotations

import json

from click.testing import CliRunner

from slurmkit.report import plots

DATA = __import__("pathlib").Path(__file__).parent / "data" / "sreport"


def _figures(monkeypatch):
    """Each figure a chart function draws, kept (its PNG still written)."""
    figs = []
    real = plots._png

    def keep(plt, fig):
        figs.append(fig)
        return real(plt, fig)
    monkeypatch.setattr(plots, "_png", keep)
    return figs


def test_a_seconds_long_downtime_is_a_visible_bar(tmp_path, monkeypatch):
    from slurmkit.cli import cli

    res = CliRunner().invoke(cli, [
        "report", "weekly", "--from-sacct", str(DATA / "sandbox_sacct.psv"), "--start", "2026-12-02", "--end",
        "2026-12-03", "--tz", "UTC", "--as-of", "2026-12-02T14:05:00", "--no-store", "--trend-weeks", "0",
        "--spool", str(tmp_path / "nospool.jsonl"), "--events", str(DATA / "sandbox_events.psv"),
        "--format", "json", "-o", str(tmp_path / "o")], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rep = json.loads((tmp_path / "o" / "weekly.json").read_text())
    assert sorted(round(e["hours"] * 3600) for e in rep["downtime"]["events"]) == [8, 11]
    figs = _figures(monkeypatch)
    assert plots.downtime_png(rep)
    ax = figs[0].axes[0]
    widths = sorted(c.get_datalim(ax.transData).width for c in ax.collections)   # (one broken_barh per event)
    # two bars, each at least MIN_BAR_SHARE of the one-day window (in days: matplotlib's date unit)
    assert len(widths) == 2 and all(w >= plots.MIN_BAR_SHARE * 1.0 - 1e-9 for w in widths), widths
    assert "an event shorter than 8.6 min is drawn that wide" in ax.get_title()


def test_energy_sources_are_named_one_per_line(monkeypatch):
    rep = json.loads((DATA.parents[2] / "fixtures" / "report_goldens" / "weekly_cscs_energy.json").read_text())
    figs = _figures(monkeypatch)
    assert plots.energy_png(rep)
    ax = figs[0].axes[0]
    names = [t.get_text() for t in ax.get_yticklabels()]
    assert names == list(plots.ENERGY_SOURCES)[::-1] and ax.get_xlabel() == "kWh"
