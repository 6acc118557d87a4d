"""The weekly report's opening summary (slurmkit/report/render.py ``summary_sentences``): a few
sentences from the report's own figures, on real captures' reports: the goldens of
tests/fixtures/report_goldens/ (``report weekly`` on the shared corpus's captures; SOURCE.md
there names each capture and its options)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurmkit.report import render

GOLDENS = Path(__file__).parents[1] / "fixtures" / "report_goldens"


def _golden(name: str) -> dict:
    return json.loads((GOLDENS / f"{name}.json").read_text())


@pytest.mark.parametrize("name", ["weekly_habrok", "weekly_habrok_snowman"])
def test_summary_says_the_reports_own_figures_and_what_is_unknown(name):
    rep = _golden(name)
    t = rep["totals"]
    s = render.summary_sentences(rep)
    assert s[0] == (f"90 jobs ran, using {render.fmt(t['gpu_hours'])} GPU-hours and "
                    f"{render.fmt(t['cpu_hours'])} CPU-hours.")
    top = max(rep["by_account"], key=lambda g: g["gpu_hours"] or 0)
    assert s[1].startswith(f"The largest: account {top['account']} with {render.fmt(top['gpu_hours'])} GPU-hours "
                           f"({render.pct(top['gpu_hours'] / t['gpu_hours'])}); user ")
    # no capacity known: the allocated share is unknown, with the report's reason
    assert rep["utilization"]["utilization"] is None
    assert f"Allocated share of capacity unknown: {rep['unknown']['utilization']}." in s
    assert f"Energy: {render.energy_coverage_text(t)}." in s and s[-1].startswith("Energy: unknown")
    assert not any(x.startswith("Not known") for x in s)     # (only these two unknown: said once each)


def test_summary_names_the_allocated_share_as_such_and_heads_both_formats():
    rep = _golden("weekly_habrok_2024-W16_partial")
    u = rep["utilization"]
    s = render.summary_sentences(rep)
    assert (f"Allocated share of capacity: {render.pct(u['utilization'])} of the "
            f"{render.fmt(u['available_gpu_hours'])} GPU-hours the GPUs were available (GPU-hours allocated to "
            "jobs, not how busy the GPUs were).") in s
    assert not any(x.startswith("Not known") for x in s)      # (nothing unknown in this report)
    md = render.to_markdown(rep)
    assert md.index("## Summary") < md.index("## Totals") < md.index("## By account") and " ".join(s) in md
    html = render.to_html(rep)
    assert html.index('<div class="summary">') < html.index("<h2>Totals</h2>")
    assert "Allocated share of capacity</th>" in html


def test_summary_of_a_capture_without_gpu_counts_says_unknown_not_zero():
    rep = _golden("weekly_pcluster_array_job")
    s = render.summary_sentences(rep)
    assert s[0].startswith("8 jobs ran, using GPU-hours unknown and ")
    assert "0 GPU-hours" not in " ".join(s)
    why = rep["unknown"]["gpu_utilization"]
    assert s[-1].startswith("Not known: GPU-hours (and GPU jobs, waste, GPUs in use, cost per GPU-hour): ")
    assert s[-1].endswith(f"GPU utilization (and GPU-hours at ~0 %, idle jobs): {why}.")
