"""Filling the store from captures and the period report's store errors.

Data: Habrok's real capture (the ``habrok`` fixture: ../shared/corpus/sacct/habrok_gpu_cluster_parsable2.psv, real
`sacct -P` output of its GPU partitions, June 2023 to April 2024; see the corpus README).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
from click.testing import CliRunner

from slurmkit.accounting.frame import load_sacct
from slurmkit.accounting.store import OPEN_STATES, SETTLE_S, Store
from slurmkit.cli import cli
from slurmkit.report.energy import Assumptions
from slurmkit.report.period import parse_period, period_report
from slurmkit.report.weekly import build_report

HERE = Path(__file__).resolve().parent


def _period_tests():
    """tests/report/test_report_period.py's comparison helpers (``_same``, ``_shared``)."""
    spec = importlib.util.spec_from_file_location("report_period_tests", HERE / "test_report_period.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _day(ts) -> str:
    return f"{pd.Timestamp(ts):%Y-%m-%d}"


def test_report_store_fills_the_days_of_a_capture_as_daily_pulls_would(habrok, tmp_path):
    root = tmp_path / "store"
    res = CliRunner().invoke(cli, ["report", "store", "--from-sacct", str(habrok), "--store", str(root),
                                   "--cluster", "habrok", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    # no --tz: UTC assumed, said as report weekly says it, and recorded with the fill
    assert res.stderr.startswith("slurmkit: warning: time zone UTC assumed: the captures' times carry no zone")
    assert (out["time_zone"], out["time_zone_given"]) == ("UTC", False)
    rows, dq = load_sacct(habrok)
    a = rows.allocs
    as_of = pd.Timestamp(out["as_of"])
    # the capture's latest time (a running job's Start + ElapsedRaw at most): 2024-04-19
    assert _day(as_of) == "2024-04-19"
    # a job's first day is its Start's (Submit's when it never started), as by_day lists it
    first = a["start"].fillna(a["submit"]).fillna(a["end"]).min()
    days = pd.date_range(_day(first), "2024-04-19", freq="D", tz="UTC")
    assert out["written"] == [_day(d) for d in days]      # every covered day, empty ones too
    assert out["unchanged"] == [] and out["totals"]["replaced"] == out["totals"]["kept"] == 0
    man = Store(root, "habrok").manifest()
    assert sorted(man) == out["written"]
    # a job is in every UTC day it overlaps (as sacct -S day -E day+1 lists it), and in no other
    done = a[a["end"].notna() & a["start"].notna()]
    long = done.loc[(done["end"] - done["start"]).idxmax()]
    spans = pd.date_range(long["start"].floor("D"), long["end"].floor("D"), freq="D")
    assert len(spans) >= 2
    holding = [n for n in man if long["key_id"] in set(pq.read_table(
        root / "cluster=habrok" / f"day={n}" / "allocs.parquet", columns=["key_id"]).column("key_id").to_pylist())]
    assert holding == [_day(d) for d in spans]
    # final: the capture ended more than SETTLE_S after the day and none of its rows is open
    is_open = a["state"].isin(OPEN_STATES) | a["end"].isna()
    lo = a["start"].fillna(a["submit"])
    open_days = set()
    for s in lo[is_open]:
        open_days |= {_day(d) for d in pd.date_range(s.floor("D"), as_of.floor("D"), freq="D")}
    expect_final = sorted(n for n in man if n not in open_days
                          and as_of.timestamp() - (pd.Timestamp(n, tz="UTC").timestamp() + 86400) > SETTLE_S)
    assert out["final"] == expect_final and len(expect_final) > 200
    assert [n for n in man if man[n]["final"]] == expect_final
    assert "2024-04-19" not in expect_final

    # the period report from the filled store: the weekly model over the capture itself
    per = parse_period(quarter="2024-Q1")
    rep = period_report(root, per, "habrok", now=as_of)
    assert rep["store"]["days_missing"] == [] and rep["store"]["days"] == 91
    direct, _ = build_report(rows, dq, per.window, Assumptions(), now=as_of, horizon=as_of)
    T = _period_tests()
    assert T._same(T._shared(rep), T._shared(direct)) == []
    assert rep["totals"]["jobs"] == 40

    # stored again: every row is the store's already, from the same pull: nothing written,
    # every day's rows kept, the day sums left as they were
    sums = (root / "cluster=habrok" / "_sums.json").read_text()
    again = CliRunner().invoke(cli, ["report", "store", "--from-sacct", str(habrok), "--store", str(root),
                                     "--cluster", "habrok", "--json"])
    second = json.loads(again.stdout)
    assert second["written"] == [] and second["unchanged"] == out["written"]
    assert second["totals"]["kept"] == second["totals"]["not_newer"] == out["totals"]["added"] > 300
    assert second["totals"]["added"] == second["totals"]["replaced"] == 0
    assert second["day_sums"]["summed"] == 0 and (root / "cluster=habrok" / "_sums.json").read_text() == sums
    assert Store(root, "habrok").manifest() == man


def test_report_store_writes_only_the_days_asked_for(habrok, tmp_path):
    root = tmp_path / "store"
    res = CliRunner().invoke(cli, ["report", "store", "--from-sacct", str(habrok), "--store", str(root),
                                   "--week", "2024-W02"])
    assert res.exit_code == 0, res.output
    assert "7 day(s) written (2024-01-08 .. 2024-01-14), 7 final" in res.output
    assert sorted(Store(root, "").manifest()) == [f"2024-01-{d:02d}" for d in range(8, 15)]


def test_report_store_and_period_errors_name_the_path(tmp_path):
    res = CliRunner().invoke(cli, ["report", "period", "--quarter", "2024-Q1", "--store", str(tmp_path / "nope"),
                                   "-o", str(tmp_path / "out")])
    assert res.exit_code == 2
    assert f"{tmp_path / 'nope'}: no store there" in res.output
    bad = tmp_path / "bad.psv"
    bad.write_text("")
    res = CliRunner().invoke(cli, ["report", "store", "--from-sacct", str(bad), "--store", str(tmp_path / "s")])
    assert res.exit_code == 2 and str(bad) in res.output
    assert not (tmp_path / "s").exists()


def test_report_store_says_a_capture_of_a_step_row_alone_has_nothing_to_store(corpus, tmp_path):
    # a capture of a step row alone (../shared/corpus/sacct, ParallelCluster issue 63: an
    # interactive step, no allocation row): nothing to store, said so, nothing written
    step = corpus / "sacct" / "pcluster_issue63_interactive_step.psv"
    fields = (step.parent / "pcluster_header_fields.txt").read_text().strip().replace("|", ",")
    res = CliRunner().invoke(cli, ["report", "store", "--from-sacct", str(step), "--sacct-fields",
                                   fields.removesuffix(",Partition"), "--store", str(tmp_path / "s"),
                                   "--start", "2022-06-01", "--end", "2022-06-30"])
    assert res.exit_code == 2 and "no allocation row in the captures (1 step row(s) without" in res.output
    assert not (tmp_path / "s").exists()



def test_report_jobs_reads_every_cluster_of_the_store_and_says_unknown(habrok, tmp_path):
    """``report jobs --store S`` without ``--cluster`` reads every cluster of
    the store (as ``report period``); nothing matched is a warning; the CSV writes "unknown"
    for a field the capture does not give (Habrok's has no Account and no Cluster)."""
    for cluster in ("habrok", None):
        args = ["report", "store", "--from-sacct", str(habrok), "--store", str(tmp_path / "s"),
                "--start", "2024-04-05", "--end", "2024-04-06"] + (["--cluster", cluster] if cluster else [])
        assert CliRunner().invoke(cli, args).exit_code == 0
    rows, _ = load_sacct(habrok)
    a = rows.allocs
    ran = a[(a["user"] == "user427") & (a["start"] < pd.Timestamp("2024-04-06", tz="UTC"))
            & (a["end"].isna() | (a["end"] >= pd.Timestamp("2024-04-05", tz="UTC")))]
    assert len(ran) >= 1
    res = CliRunner().invoke(cli, ["report", "jobs", "--store", str(tmp_path / "s"), "--user", "user427",
                                   "--start", "2024-04-05", "--end", "2024-04-06", "--format", "csv",
                                   "--now", "2024-04-20T00:00:00"])
    assert res.exit_code == 0, res.output
    import csv
    import io

    got = list(csv.DictReader(io.StringIO(res.stdout)))
    # each job once per store cluster: the habrok folder's (its rows named habrok) and _default's
    assert sorted((r["job_id"], r["cluster"]) for r in got) == sorted(
        [(j, "habrok") for j in ran["job_id"]] + [(j, "unknown") for j in ran["job_id"]])
    assert {r["account"] for r in got} <= {"unknown", "unknown (no Account field)"}
    none = CliRunner().invoke(cli, ["report", "jobs", "--store", str(tmp_path / "s"), "--user", "nobody",
                                    "--start", "2024-04-05", "--end", "2024-04-06", "--now", "2024-04-20T00:00:00"])
    assert none.exit_code == 0 and "warning: no job matched (" in none.stderr
    assert f"read from the store {tmp_path / 's'}" in none.stderr
    missing = CliRunner().invoke(cli, ["report", "jobs", "--store", str(tmp_path / "nope"), "--start", "2024-04-05"])
    assert missing.exit_code == 2 and str(tmp_path / "nope") in missing.output


def test_parts_with_no_stored_day_are_null_and_future_days_are_not_yet(habrok, tmp_path):
    """The analyst's year 2024 with only Q1 in the store: the parts with no
    day stored have null figures ("not in the store" in Markdown and CSV, never 0), every part
    says how many of its days are stored; days after --now are "not yet", not missing."""
    import csv
    import io

    root = tmp_path / "s"
    assert CliRunner().invoke(cli, ["report", "store", "--from-sacct", str(habrok), "--store", str(root),
                                    "--start", "2024-01-01", "--end", "2024-04-01"]).exit_code == 0
    res = CliRunner().invoke(cli, ["report", "period", "--year", "2024", "--store", str(root), "--now",
                                   "2025-02-01T00:00:00", "-o", str(tmp_path / "late"), "--format", "json,csv,md"])
    assert res.exit_code == 0, res.output
    rep = json.loads((tmp_path / "late" / "period.json").read_text())
    parts = {p["label"]: p for p in rep["breakdown"]}
    assert [(parts[m]["days_stored"], parts[m]["days_in_part"]) for m in ("2024-01", "2024-02", "2024-03")] == \
        [(31, 31), (29, 29), (31, 31)]
    assert (rep["days_stored"], rep["days_in_part"]) == (91, 366)
    for m in [f"2024-{k:02d}" for k in range(4, 13)]:
        p = parts[m]
        assert p["days_stored"] == 0 and p["not_in_store"] == "not in the store", m
        assert set(p["totals"].values()) == {None} and p["by_account"] == [] and p["outcomes"] == []
    assert parts["2024-03"]["totals"]["jobs"] == 38 and "not_in_store" not in parts["2024-03"]
    assert rep["store"]["days_future"] == [] and len(rep["store"]["days_missing"]) == 366 - 91
    rows = {r["part"]: r for r in csv.DictReader(io.StringIO((tmp_path / "late" / "totals.csv").read_text()))}
    assert rows["2024-05"]["jobs"] == "" and rows["2024-05"]["not_in_store"] == "not in the store"
    assert (rows["2024-05"]["days_stored"], rows["2024-05"]["days_in_part"]) == ("0", "31")
    assert rows["2024-03"]["jobs"] == "38"
    md = (tmp_path / "late" / "period.md").read_text()
    assert "| (all) | 2024-05 | 0 / 31 | not in the store | — |" in md
    assert "| (all) | 2024-03 | 31 / 31 | 38 |" in md
    # taken on 2024-04-19 13:00: April's first 19 days are missing, the rest of the year is not yet
    res = CliRunner().invoke(cli, ["report", "period", "--year", "2024", "--store", str(root), "--now",
                                   "2024-04-19T13:00:00", "-o", str(tmp_path / "early"), "--format", "json,md"])
    assert res.exit_code == 0, res.output
    assert "275 missing" not in res.output and ", 19 missing, 256 not yet (after 2024-04-19T13:00:00Z)" in res.output
    rep = json.loads((tmp_path / "early" / "period.json").read_text())
    parts = {p["label"]: p for p in rep["breakdown"]}
    assert parts["2024-04"]["not_in_store"] == "not in the store" and parts["2024-04"]["days_future"] == 11
    assert parts["2024-05"]["not_in_store"] == "not yet (after --now)" and parts["2024-05"]["days_future"] == 31
    assert rep["store"]["days_missing"] == [f"2024-04-{d:02d}" for d in range(1, 20)]
    assert len(rep["store"]["days_future"]) == 256
    assert "256 day(s) not yet (after 2024-04-19T13:00:00Z)" in (tmp_path / "early" / "period.md").read_text()


def test_queue_wait_axis_is_plain_numbers_on_habrok(habrok, tmp_path):
    """The queue-wait plot (the weekly report's, reused by the period page) labels
    its log axis in plain numbers; Habrok's February 2024 waits run to hundreds of hours, whose
    1000 tick read "1e+03"."""
    from slurmkit.report import plots

    assert [plots.plain_tick(v) for v in (0.0001, 0.5, 20, 100, 1000, 10000)] == \
        ["0.0001", "0.5", "20", "100", "1,000", "10,000"]
    root = tmp_path / "s"
    assert CliRunner().invoke(cli, ["report", "store", "--from-sacct", str(habrok), "--store", str(root),
                                    "--start", "2024-02-01", "--end", "2024-03-01"]).exit_code == 0
    rep = period_report(root, parse_period(month="2024-02"), None, now=pd.Timestamp("2024-04-19T13:00:00Z"))
    plt, fig, ax = plots.queue_wait_fig(rep)
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_xticklabels() + ax.get_xticklabels(minor=True) if t.get_text()]
    plt.close(fig)
    assert ax.get_xlabel().startswith("wait, hours") and "1,000" in labels
    assert not any("e+" in x or "e-" in x for x in labels), labels


def test_report_store_says_where_a_named_clusters_capture_goes_without_cluster(tmp_path):
    """A capture whose Cluster column names its cluster (the sandbox's real ``sacct -P``,
    tests/report/data/sreport) stored without ``--cluster``: the days go under
    ``cluster=_default`` as before (a store filled so keeps its folder), with a warning that
    names the cluster and ``--cluster``; with ``--cluster sandbox`` no warning."""
    cap = HERE / "data" / "sreport" / "sandbox_sacct.psv"
    res = CliRunner().invoke(cli, ["report", "store", "--from-sacct", str(cap), "--store", str(tmp_path / "s"),
                                   "--tz", "UTC"])
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith(f"{tmp_path / 's' / 'cluster=_default'}: 1 day(s) written (2026-12-02 .. 2026-12-02)")
    assert res.stderr == ("slurmkit: warning: the captures' Cluster column names sandbox, and no --cluster was given: "
                          "the days go under cluster=_default; give --cluster sandbox to file them under the cluster's "
                          "name (report period --cluster reads a store cluster by its folder)\n")
    named = CliRunner().invoke(cli, ["report", "store", "--from-sacct", str(cap), "--store", str(tmp_path / "n"),
                                     "--tz", "UTC", "--cluster", "sandbox"])
    assert named.exit_code == 0 and named.stderr == ""
    assert (tmp_path / "n" / "cluster=sandbox" / "day=2026-12-02" / "allocs.parquet").exists()


def test_store_warnings_for_two_clusters_and_two_zones(habrok, tmp_path):
    """A capture naming two clusters stored without --cluster used to be told to use the
    first one's name; now it is told to store each cluster's capture with its own --cluster.
    And a store whose days record two zones (``report store --tz``) names no zone for the
    period's captured events: UTC is assumed and the warning says which zones the days hold.
    Real captures: the sandbox's (cluster sandbox) and CSCS Santis' (../shared/corpus/sacct)."""
    from slurmkit.report import period_breakdown as PB
    from slurmkit.report.window import Window

    sandbox = HERE / "data" / "sreport" / "sandbox_sacct.psv"
    santis = habrok.parent / "cscs_energy_parsable2.psv"
    res = CliRunner().invoke(cli, ["report", "store", "--from-sacct", str(sandbox), "--from-sacct", str(santis),
                                   "--store", str(tmp_path / "s"), "--tz", "UTC"])
    assert res.exit_code == 0, res.output
    assert ("the captures' Cluster column names sandbox, santis, and no --cluster was given: the days go under "
            "cluster=_default; store each cluster's capture with its own --cluster") in res.stderr
    for cap, tz in ((sandbox, "Europe/Amsterdam"), (santis, "Europe/Zurich")):
        res = CliRunner().invoke(cli, ["report", "store", "--from-sacct", str(cap), "--store", str(tmp_path / "z"),
                                       "--cluster", "x", "--tz", tz])
        assert res.exit_code == 0, res.output
    w = Window(pd.Timestamp("2024-03-01T00:00Z").to_pydatetime(), pd.Timestamp("2026-12-31T00:00Z").to_pydatetime())
    assert PB.capture_zone(tmp_path / "z", "x", w) == ("UTC", "assumed: the store's days record Europe/Amsterdam, "
                                                              "Europe/Zurich")
    assert PB.capture_zone(tmp_path / "z", "x", w, "Europe/Zurich") == ("Europe/Zurich", "--tz")
    one = Window(pd.Timestamp("2024-03-15T00:00Z").to_pydatetime(), pd.Timestamp("2024-03-16T00:00Z").to_pydatetime())
    assert PB.capture_zone(tmp_path / "z", "x", one) == ("Europe/Zurich", "the store's")
