"""Days stored in the wrong zone replaced on purpose (``report store --replace``), and ``--now``
pinning the time of ``report store`` and ``report period``.

Data: Habrok's real capture (the ``habrok`` fixture: ../shared/corpus/sacct/habrok_gpu_cluster_parsable2.psv,
real ``sacct -P`` output of a cluster in the Netherlands, local times without a zone, June 2023 to
April 2024; see the corpus README).
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from slurmkit.accounting.store import Store
from slurmkit.cli import cli

SPAN = ("--start", "2023-05-01", "--end", "2024-05-01", "--by", "month")


def _run(*args: str):
    return CliRunner().invoke(cli, ["report", *args])


def _store(capture: Path, root: Path, *more: str) -> dict:
    res = _run("store", "--from-sacct", str(capture), "--store", str(root), "--cluster", "habrok", "--json", *more)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _period(root: Path, *more: str, span=SPAN) -> dict:
    res = _run("period", "--store", str(root), *span, "--json", "-o", str(root.parent / f"out-{root.name}"),
               "--format", "json", *more)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _figures(rep: dict) -> dict:
    keep = ("totals", "by_user", "by_partition", "outcomes", "queue_wait")
    return {"period": {k: rep[k] for k in keep},
            "parts": [(p["label"], {k: p[k] for k in keep}) for p in rep["breakdown"]]}


def test_days_stored_in_the_wrong_zone_are_replaced_with_replace(habrok, tmp_path):
    root = tmp_path / "s"
    wrong = _store(habrok, root)                      # no --tz: UTC assumed, an hour or two off
    assert (wrong["time_zone"], wrong["time_zone_given"]) == ("UTC", False)
    now = ("--now", "2024-04-20T00:00:00")
    before = _period(root, *now)
    man = Store(root, "habrok").manifest()
    # stored again in the right zone without --replace: refused, nothing written (merged, each
    # job would be there twice: its Submit and Start read in two zones are two keys)
    res = _run("store", "--from-sacct", str(habrok), "--store", str(root), "--cluster", "habrok",
               "--tz", "Europe/Amsterdam")
    assert res.exit_code == 2
    assert (f"{root / 'cluster=habrok' / '_manifest.json'}: 88 day(s) (2023-06-01 .. 2024-04-19) hold rows stored "
            "with times read in UTC, and this capture's are read in Europe/Amsterdam") in res.output
    assert "add --replace" in res.output and "give --tz UTC" in res.output
    assert Store(root, "habrok").manifest() == man
    # with --replace: the days hold the right zone's rows only, as a store filled in that zone
    fixed = _store(habrok, root, "--tz", "Europe/Amsterdam", "--replace")
    assert fixed["replace"] and fixed["totals"]["removed"] == wrong["totals"]["added"] == 335
    assert fixed["totals"]["added"] == 334 and fixed["totals"]["kept"] == 0
    assert fixed["as_of"] == "2024-04-19T11:11:52Z"          # 13:11:52 in Amsterdam (CEST)
    right = tmp_path / "right"
    _store(habrok, right, "--tz", "Europe/Amsterdam")
    got, want = _period(root, *now), _period(right, *now)
    assert _figures(got) == _figures(want)
    assert _figures(before) != _figures(want)     # (the zone moves CPU-hours between February and March)
    assert got["totals"]["jobs"] == before["totals"]["jobs"] == 90
    assert {e["time_zone"] for e in Store(root, "habrok").manifest().values()} == {"Europe/Amsterdam"}
    assert sorted(Store(root, "habrok").manifest()) == sorted(Store(right, "habrok").manifest())
    months = {p["label"]: p["totals"]["jobs"] for p in got["breakdown"]}
    assert months == {p["label"]: p["totals"]["jobs"] for p in want["breakdown"]}


def test_replace_over_a_span_removes_the_days_after_the_capture_time(habrok, tmp_path):
    """``--replace --start/--end``: the span's days hold the capture's rows only; its days after
    the capture time (stored by a later capture) are removed, said so, and then missing."""
    root = tmp_path / "s"
    _store(habrok, root, "--tz", "Europe/Amsterdam")
    res = _run("store", "--from-sacct", str(habrok), "--store", str(root), "--cluster", "habrok", "--tz",
               "Europe/Amsterdam", "--replace", "--start", "2024-04-01", "--end", "2024-05-01", "--as-of",
               "2024-04-10T00:00:00Z")
    assert res.exit_code == 0, res.output
    out = res.stdout.splitlines()
    assert out[0].startswith(f"{root / 'cluster=habrok'}: 10 day(s) written (2024-04-01 .. 2024-04-10)")
    assert (f"{root / 'cluster=habrok'}: 9 day(s) after the capture time removed (--replace): 2024-04-11 .. "
            "2024-04-19") in out
    man = Store(root, "habrok").manifest()
    assert "2024-04-10" in man and "2024-04-11" not in man and "2024-03-31" in man
    assert not (root / "cluster=habrok" / "day=2024-04-11").exists()
    rep = _period(root, "--now", "2024-04-20T00:00:00", span=("--month", "2024-04"))
    assert rep["store"]["days_missing"][:9] == [f"2024-04-{d}" for d in range(11, 20)]
    assert rep["store"]["clusters"]["habrok"]["day_sums"] == "used"


def test_now_pins_the_store_and_the_period_report(habrok, tmp_path):
    """``report store --now``: days starting at or after it are not stored, said so; ``report
    period --now``: the store's days after it are not read (said so), and two runs give the
    same figures, whatever the store gained after it."""
    root = tmp_path / "s"
    res = _run("store", "--from-sacct", str(habrok), "--store", str(root), "--cluster", "habrok", "--tz",
               "Europe/Amsterdam", "--now", "2024-04-10T00:00:00")
    assert res.exit_code == 0, res.output
    assert ("warning: the capture time 2024-04-19T11:11:52Z is after now (2024-04-10T00:00:00Z, --now): times read "
            "in the wrong zone (--tz)?; days starting at or after now are not stored") in res.stderr
    assert (f"{root / 'cluster=habrok'}: 10 day(s) after now (2024-04-10T00:00:00Z) not stored: 2024-04-10 .. "
            "2024-04-19") in res.stdout
    assert max(Store(root, "habrok").manifest()) == "2024-04-09"
    # the rest of the capture stored; a report pinned before it reads the same days as before
    args = ("--month", "2024-04", "--now", "2024-04-10T00:00:00")
    first = _period(root, span=args)
    _store(habrok, root, "--tz", "Europe/Amsterdam")
    res = _run("period", "--store", str(root), *args, "-o", str(tmp_path / "o"), "--format", "json")
    assert res.exit_code == 0, res.output
    assert ", 21 not yet (after 2024-04-10T00:00:00Z) (10 of them stored and not read: give a later --now to " \
           "read them)" in res.stdout
    again = json.loads((tmp_path / "o" / "period.json").read_text())
    assert again["store"]["days_after_now"] == [f"2024-04-{d}" for d in range(10, 20)]
    assert first["store"]["days_after_now"] == []
    for k in ("totals", "by_user", "by_partition", "outcomes", "queue_wait", "breakdown"):
        assert again[k] == first[k], k
    assert again["as_of"] == first["as_of"] == "2024-04-10T00:00:00Z"
    # and unpinned, the days after it count
    later = _period(root, span=("--month", "2024-04", "--now", "2024-04-20T00:00:00"))
    assert later["store"]["days_after_now"] == [] and later["totals"]["jobs"] > first["totals"]["jobs"]
