"""Trends that tell 0 from missing: a stored week with no job reads 0, a
week not in the store None ("–", not in the store); a week whose capture ends before the week
does is provisional until a later run covers it. Captures in sacct's form (tests/sacct_rows.py)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from slurmkit.cli import cli

from sacct_rows import row, text


def _week(tmp_path, name, rows, week, *more):
    cap = tmp_path / f"{name}.psv"
    cap.write_bytes(text(rows))
    out = tmp_path / name
    res = CliRunner().invoke(cli, ["report", "weekly", "--from-sacct", str(cap), "--week", week, "-o", str(out),
                                   "--store", str(tmp_path / "store"), "--trend-weeks", "4", "--format", "json,csv,md",
                                   *more], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return json.loads((out / "weekly.json").read_text())


def test_zero_is_not_missing_and_partial_weeks_are_provisional(tmp_path, monkeypatch):
    monkeypatch.delenv("SLURMKIT_SITE", raising=False)
    # 2026-W01 is Dec 29 2025 - Jan 5 2026; the job runs Jan 1, the capture's latest time is then
    w1 = _week(tmp_path, "w1", [row()], "2026-W01")
    assert w1["trends"]["provisional_weeks"] == ["2026-W01"]   # captured before the week ended
    # a later capture covering the whole week: no longer provisional
    w1 = _week(tmp_path, "w1b", [row()], "2026-W01", "--as-of", "2026-01-06T00:00:00")
    assert w1["trends"]["provisional_weeks"] == []
    # W02: the capture has a row, none in the week: an empty week, stored with --allow-empty
    w2 = _week(tmp_path, "w2", [row()], "2026-W02", "--allow-empty", "--as-of", "2026-01-13T00:00:00")
    t = w2["trends"]
    assert t["weeks"] == ["2025-W51", "2025-W52", "2026-W01", "2026-W02"]
    assert t["weeks_known"] == ["2026-W01", "2026-W02"]
    acct = [r for r in t["by_account"] if r["account"] == "acct"][0]
    assert acct["gpu_hours"] == [None, None, 2.0, 0.0]   # 0 for the stored empty week, None not stored
    assert acct["jobs"] == [None, None, 1, 0]
    md = (tmp_path / "w2" / "weekly.md").read_text()
    assert "2 week(s) not in the store (–; a stored week with no job reads 0)" in md
