"""sreport's breakdown and the account tree in the period report, from the
real sandbox hour's captures of tests/report/data/sreport (sacct stored one file per day, as
the daily pulls store it; sacctmgr events / reservations / assoc tree; scontrol nodes) and
checked against the sreport output of the same hour (README.md there)."""

from __future__ import annotations

import csv
import datetime as dt
import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from slurmkit.accounting.frame import load_sacct
from slurmkit.accounting.quality import DataQuality
from slurmkit.accounting.store import Store
from slurmkit.report import period_breakdown as PB
from slurmkit.report import sreport as S
from slurmkit.report.period import parse_period, period_report

DATA = Path(__file__).parent / "data" / "sreport"
BENCH = Path(__file__).resolve().parents[2] / "bench" / "report_period.py"    # its by_day: a day's pull
NOW = pd.Timestamp("2026-12-02T14:00:00Z")     # the capture's end: the hour 13:00-14:00 has ended


@pytest.fixture
def store(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("report_period_bench", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rows, _ = load_sacct(DATA / "sandbox_sacct.psv")
    st = Store(tmp_path / "store", "sandbox")
    until = int(NOW.timestamp())
    for day, part in bench.by_day(rows, until):
        st.save_day(dt.datetime.fromtimestamp(day, dt.timezone.utc), part, DataQuality(rows_read=len(part)),
                    now=until + 86400)
    return tmp_path / "store"


def _habrok_store(corpus, st: Path) -> Path:
    """A store of Habrok's real captures (corpus/sacct: both, cluster habrok), filled as
    ``report store`` fills it; returns ``st``."""
    from slurmkit.cli import cli

    c = corpus / "sacct"
    res = CliRunner().invoke(cli, ["report", "store", "--from-sacct", str(c / "habrok_gpu_cluster_parsable2.psv"),
                                   "--from-sacct", str(c / "habrok_gpu_cluster_snowman_delim.txt"),
                                   "--sacct-fields", str(c / "habrok_format_fields.txt"), "--store", str(st),
                                   "--cluster", "habrok", "--tz", "Europe/Amsterdam"])
    assert res.exit_code == 0, res.output
    return st


def _inputs():
    return PB.captured_inputs(DATA / "sandbox_events.psv", DATA / "sandbox_reservations.psv",
                              DATA / "sandbox_scontrol_nodes.txt", DATA / "sandbox_assoc_tree.psv")


def _captured_sreport(kind, w):
    name = "sandbox_utilization_seconds.txt" if kind == "utilization" else "sandbox_account_users_seconds.txt"
    return (DATA / name).read_text()


def test_period_breakdown_and_account_tree_equal_sreport(store):
    per = parse_period(start="2026-11-30", end="2026-12-07", by="week")
    rep = period_report(store, per, now=NOW,
                        sections=PB.breakdown_sections(store, _inputs(), now=NOW, sreport=_captured_sreport))
    sb = rep["sreport_breakdown"]
    assert [w["label"] for w in sb["windows"]] == ["(period)", "2026-W49"]
    assert sb["windows"][0]["start"] == "2026-11-30T00:00:00Z" and sb["windows"][0]["end"] == "2026-12-02T14:00:00Z"
    sre = S.cluster_utilization(_captured_sreport("utilization", None), "seconds")
    for w in sb["windows"]:
        assert len(w["differences"]) == 12 and all(d["within"] for d in w["differences"]), w["differences"]
        assert w["ours"]["cpu"]["planned_down"] == pytest.approx(3104 / 3600)
        assert w["ours"]["gres/gpu"]["allocated"] == pytest.approx(sre["gres/gpu"]["allocated"], abs=1e-9)
    # the jobs' hours are the period report's own rows: no reservation holds a GPU job here, so
    # Allocated GPU-hours are the period's GPU-hours
    assert sb["windows"][0]["ours"]["gres/gpu"]["allocated"] == pytest.approx(rep["totals"]["gpu_hours"])
    acc = rep["accounts"]["windows"][0]
    assert len(acc["differences"]) == 18 and all(d["within"] for d in acc["differences"]), acc["differences"]
    rows = {(r["account"], r["user"]): r for r in acc["rows"]}
    assert rows[("physics", "nobody")]["gpu_hours"] == pytest.approx(30 / 3600)
    assert rows[("root", "")]["gpu_hours"] == pytest.approx(86 / 3600)


def test_period_sums_its_parts_and_unknown_stays_null(store):
    """A period over two weeks: the period's figures are its parts' sums (the second week has
    no jobs, no capacity registered, its own zeros); without events and reservations Down,
    Planned Down and Idle are null (never 0), in JSON, CSV and Markdown."""
    per = parse_period(start="2026-11-30", end="2026-12-14", by="week")
    now = pd.Timestamp("2026-12-14T00:00:00Z")
    rep = period_report(store, per, now=now, sections=PB.breakdown_sections(store, _inputs(), now=now))
    w = rep["sreport_breakdown"]["windows"]
    assert [x["label"] for x in w] == ["(period)", "2026-W49", "2026-W50"]
    for k in ("cpu", "gres/gpu"):
        for f in ("allocated", "down", "planned_down", "idle", "planned", "reported"):
            assert w[0]["ours"][k][f] == pytest.approx(w[1]["ours"][k][f] + w[2]["ours"][k][f])
    assert w[2]["ours"]["gres/gpu"]["allocated"] == 0.0 and w[0]["sreport"] is None
    nodes_only = PB.captured_inputs(nodes=DATA / "sandbox_scontrol_nodes.txt")
    rep = period_report(store, per, now=now, sections=PB.breakdown_sections(store, nodes_only, now=now))
    g = rep["sreport_breakdown"]["windows"][0]["ours"]["gres/gpu"]
    assert g["down"] is None and g["idle"] is None and g["allocated"] == pytest.approx(86 / 3600)
    assert rep["accounts"] is None


def test_cli_period_with_captures_writes_the_breakdown_in_every_format(store, tmp_path):
    from slurmkit.cli import cli

    out = tmp_path / "out"
    res = CliRunner().invoke(cli, ["report", "period", "--start", "2026-12-01", "--end", "2026-12-03",
                                   "--store", str(store), "--now", "2026-12-02T14:00:00Z", "-o", str(out),
                                   "--format", "json,csv,md,html",
                                   "--events", str(DATA / "sandbox_events.psv"),
                                   "--reservations", str(DATA / "sandbox_reservations.psv"),
                                   "--nodes", str(DATA / "sandbox_scontrol_nodes.txt"),
                                   "--assoc-tree", str(DATA / "sandbox_assoc_tree.psv")])
    assert res.exit_code == 0, res.output
    rep = json.loads((out / "period.json").read_text())
    cpu = rep["sreport_breakdown"]["windows"][0]["ours"]["cpu"]
    assert cpu["planned_down"] == pytest.approx(3104 / 3600) and cpu["down"] == pytest.approx(152 / 3600)
    with open(out / "breakdown_sreport.csv") as fh:
        got = {(r["part"], r["tres"], r["figure"]): r for r in csv.DictReader(fh)}
    assert float(got[("(period)", "cpu", "Planned Down")]["hours"]) == pytest.approx(3104 / 3600)
    with open(out / "accounts.csv") as fh:
        acc = list(csv.DictReader(fh))
    assert acc[0]["part"] == "(period)" and acc[0]["account"] == "root" and acc[0]["depth"] == "0"
    md = (out / "period.md").read_text()
    assert "## Denominators: sreport's breakdown" in md and "| **period** | cpu | " in md and "## Accounts" in md
    html = (out / "period.html").read_text()
    assert "<h2 id=\"sreport-breakdown\">Denominators: sreport's breakdown</h2>" in html
    assert "<td class=\"l\">period</td><td class=\"l\">cpu</td>" in html and "<h2 id=\"accounts\">" in html
    bad = CliRunner().invoke(cli, ["report", "period", "--start", "2026-12-01", "--end", "2026-12-03",
                                   "--store", str(store), "-o", str(out), "--sreport",
                                   "--nodes", str(DATA / "sandbox_scontrol_nodes.txt")])
    assert bad.exit_code == 2 and "--live-breakdown" in bad.output
    # --sreport alone (no breakdown input at all) is refused the same way, not dropped
    alone = CliRunner().invoke(cli, ["report", "period", "--start", "2026-12-01", "--end", "2026-12-03",
                                     "--store", str(store), "-o", str(tmp_path / "alone"), "--sreport"])
    assert alone.exit_code == 2, alone.output
    assert "--sreport: compares with sreport live: give --live-breakdown too" in alone.output
    assert not (tmp_path / "alone").exists()


def test_breakdown_inputs_of_one_cluster_are_refused_for_a_report_over_several(store, tmp_path):
    """The breakdown's inputs (the sandbox's captured nodes, events, ...) describe one cluster: a
    report over a store that also holds another cluster would set both clusters' jobs against
    the sandbox's nodes. Refused (exit 2, the output folder not written), naming the clusters
    and --cluster; with --cluster sandbox the report is the one-cluster store's."""
    from slurmkit.cli import cli

    rows, _ = load_sacct(DATA / "sandbox_sacct.psv")
    other = Store(store, "other")    # the same rows under a second cluster name
    other.save_day(dt.datetime(2026, 12, 2, tzinfo=dt.timezone.utc), rows, DataQuality(rows_read=len(rows)),
                   now=NOW.timestamp() + 86400)
    args = ["report", "period", "--start", "2026-12-01", "--end", "2026-12-03", "--store", str(store),
            "--now", "2026-12-02T14:00:00Z", "--format", "json"]
    res = CliRunner().invoke(cli, args + ["-o", str(tmp_path / "no"), "--nodes", str(DATA / "sandbox_scontrol_nodes.txt")])
    assert res.exit_code == 2, res.output
    assert ("--nodes: the breakdown's inputs describe one cluster, and this report covers 2 (other, sandbox): "
            "give --cluster NAME for the cluster they come from (one report per cluster)") in res.output
    assert not (tmp_path / "no").exists()
    res = CliRunner().invoke(cli, args + ["-o", str(tmp_path / "no"), "--cluster", "sandbox,other", "--live-breakdown"])
    assert res.exit_code == 2 and "--live-breakdown: the breakdown's inputs describe one cluster" in res.output
    # each name once, an empty item is no cluster ("sandbox," and "sandbox,sandbox")
    for names in ("sandbox,", "sandbox,sandbox", " sandbox , "):
        res = CliRunner().invoke(cli, args + ["-o", str(tmp_path / "one"), "--cluster", names,
                                              "--nodes", str(DATA / "sandbox_scontrol_nodes.txt")])
        assert res.exit_code == 0, (names, res.output)
    res = CliRunner().invoke(cli, args + ["-o", str(tmp_path / "no"), "--cluster", " , "])
    assert res.exit_code == 2 and "--cluster: no cluster name in ' , '" in res.output, res.output
    rep = json.loads((tmp_path / "one" / "period.json").read_text())
    assert list(rep["store"]["clusters"]) == ["sandbox"]
    # only the sandbox's jobs against its nodes: GPU-hours allocated as sreport counts them
    sre = S.cluster_utilization(_captured_sreport("utilization", None), "seconds")
    ours = rep["sreport_breakdown"]["windows"][0]["ours"]["gres/gpu"]
    assert ours["allocated"] == pytest.approx(sre["gres/gpu"]["allocated"], abs=1e-9) == pytest.approx(86 / 3600)


def test_another_clusters_inputs_are_refused_and_the_jobs_own_nodes_are_taken(corpus, tmp_path):
    """A Habrok store (the corpus' real ``sacct -P`` captures, stored as ``report store``
    stores them) reported against the sandbox's captured nodes, events and assoc tree gave
    sreport's breakdown as all zeros and every user under root, without a word. Refused now, exit 2, nothing written: each input that cannot be the jobs'
    cluster's is named (the tree's Cluster, the nodes the jobs ran on, the events'
    registration). Habrok's own ``scontrol show nodes`` (corpus/slurm) is taken: its Reported
    is Habrok's CPUs x the month's hours."""
    from slurmkit.cli import cli

    st = _habrok_store(corpus, tmp_path / "s")
    period = ["report", "period", "--month", "2024-03", "--store", str(st), "--cluster", "habrok", "--format", "json"]
    out = tmp_path / "o"
    bad = CliRunner().invoke(cli, period + ["-o", str(out), "--events", str(DATA / "sandbox_events.psv"),
                                            "--nodes", str(DATA / "sandbox_scontrol_nodes.txt"),
                                            "--assoc-tree", str(DATA / "sandbox_assoc_tree.psv")])
    assert bad.exit_code == 2, bad.output
    assert not out.exists()
    msg = " ".join(bad.output.split())
    assert msg.startswith("slurmkit: error: breakdown inputs: ")
    assert ("the account tree (--assoc-tree / sacctmgr show assoc tree) is of cluster sandbox, and the jobs are of "
            "cluster habrok") in msg
    assert ("none of the 21 nodes the jobs ran on (memory1,node[2,5-6,11,20,22,26,32,38,40,51,67,82,91,94,96,98-99,"
            "103-104]) is a node of the capacity input (--nodes / scontrol show nodes, or the site profile: "
            "n[1-4])") in msg
    assert ("registering with slurmdbd at 2026-12-02T13:53:23Z, after the last job started (2024-03-21T12:40:23Z): "
            "they are of another cluster or of later dates: sreport") in msg     # (epoch times: no zone to blame)
    assert "Traceback" not in bad.output
    # one input alone is enough to refuse: the tree of another cluster
    tree = CliRunner().invoke(cli, period + ["-o", str(out), "--assoc-tree", str(DATA / "sandbox_assoc_tree.psv")])
    assert tree.exit_code == 2 and "is of cluster sandbox" in tree.output and "nodes the jobs ran on" not in tree.output
    # Habrok's own nodes: taken
    good = CliRunner().invoke(cli, period + ["-o", str(out), "--nodes",
                                             str(corpus / "slurm" / "habrok_scontrol_show_nodes.txt")])
    assert good.exit_code == 0, good.output
    rep = json.loads((out / "period.json").read_text())
    cpu = rep["sreport_breakdown"]["windows"][0]["ours"]["cpu"]
    from slurmkit.report.capacity import node_tres_scontrol

    cpus = sum(t["cpu"] for t in node_tres_scontrol(
        (corpus / "slurm" / "habrok_scontrol_show_nodes.txt").read_text()).values())
    assert cpu["reported"] == pytest.approx(cpus * 31 * 24)


def test_captured_events_are_read_in_the_zone_given_or_the_stores_else_utc_with_a_warning(store, tmp_path):
    """sacctmgr prints the local time of its host: ``report period`` read ``--events`` and
    ``--reservations`` as UTC whatever the site. Now: ``--tz``, else the zone ``report store
    --tz`` recorded for the cluster's days, else UTC with a warning; the zone and how it was
    chosen are in the breakdown's source. Captures in epoch seconds (``SLURM_TIME_FORMAT=%s``,
    the sandbox's real ones) need no zone: no warning. ``local.psv`` is a labelled edit of the
    real sandbox_events.psv: each epoch time printed as sacctmgr prints it with its default
    time format on a UTC host (``%Y-%m-%dT%H:%M:%S``); read in Europe/Amsterdam (CET in
    December) every event starts one hour earlier."""
    import time

    from slurmkit.cli import cli

    local = tmp_path / "local.psv"
    local.write_text("\n".join("|".join(time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(int(f))) if f.isdigit() else f
                                         for f in line.split("|"))
                               for line in (DATA / "sandbox_events.psv").read_text().splitlines()) + "\n")
    assert "|2026-12-02T13:53:23|Unknown||" in local.read_text()
    assert PB.local_times(local) and not PB.local_times(DATA / "sandbox_events.psv", None)
    utc = PB.captured_inputs(local, tz="UTC")["events"]
    ams = PB.captured_inputs(local, tz="Europe/Amsterdam")["events"]
    assert len(utc) == len(ams) == 3
    assert list(utc["start"]) == list(PB.captured_inputs(DATA / "sandbox_events.psv")["events"]["start"])
    assert ((utc["start"] - ams["start"]).dt.total_seconds() == 3600).all()
    args = ["report", "period", "--start", "2026-12-01", "--end", "2026-12-03", "--now", "2026-12-02T14:00:00Z",
            "--format", "json", "--nodes", str(DATA / "sandbox_scontrol_nodes.txt")]

    def run(st, events, *extra):
        out = tmp_path / f"o{len(list(tmp_path.iterdir()))}"
        res = CliRunner().invoke(cli, args + ["--store", str(st), "-o", str(out), "--events", str(events), *extra])
        assert res.exit_code == 0, res.output
        return res, json.loads((out / "period.json").read_text())["sreport_breakdown"]["source"]

    res, source = run(store, DATA / "sandbox_events.psv")    # epoch seconds: no zone needed
    assert res.stderr == "" and "times read in" not in source
    res, source = run(store, local)       # days saved with no zone recorded (as daily live pulls)
    assert res.stderr == ("slurmkit: warning: time zone UTC assumed for --events / --reservations / --sreport-*: "
                          "sacctmgr and sreport print the local time of the host they ran on, and neither --tz nor "
                          "the store (report store --tz) names it\n")
    assert source.endswith("; times read in UTC (assumed)")
    res, source = run(store, local, "--tz", "UTC")
    assert res.stderr == "" and source.endswith("; times read in UTC (--tz)")
    filled = tmp_path / "filled"
    res = CliRunner().invoke(cli, ["report", "store", "--from-sacct", str(DATA / "sandbox_sacct.psv"), "--store",
                                   str(filled), "--cluster", "sandbox", "--tz", "UTC"])
    assert res.exit_code == 0, res.output
    res, source = run(filled, local)
    assert res.stderr == "" and source.endswith("; times read in UTC (the store's)")
    bad = CliRunner().invoke(cli, args + ["--store", str(store), "-o", str(tmp_path / "bad"), "--events", str(local),
                                          "--tz", "Mars/Base"])
    assert bad.exit_code == 2 and "--tz: unknown time zone 'Mars/Base'" in bad.output


def test_captured_sreport_is_compared_with_the_window_its_banner_names(store, tmp_path):
    """``--sreport-utilization`` / ``--sreport-accounts`` (sreport's own output captured, as
    ``report weekly`` takes them): each compared with the window whose whole hours its banner
    names. The sandbox's real captures of the hour 13:00-14:00 (README there) against a period
    of that hour: every figure and every account row within rounding, for the period and its
    one part. A capture naming another window is refused (exit 2, its path, the windows); one
    without a banner (``sreport -n``) is the period's."""
    from slurmkit.cli import cli

    base = ["report", "period", "--store", str(store), "--now", "2026-12-02T14:00:00Z", "--format", "json,md",
            "--events", str(DATA / "sandbox_events.psv"), "--reservations", str(DATA / "sandbox_reservations.psv"),
            "--nodes", str(DATA / "sandbox_scontrol_nodes.txt"), "--assoc-tree", str(DATA / "sandbox_assoc_tree.psv"),
            "--sreport-utilization", str(DATA / "sandbox_utilization_seconds.txt"),
            "--sreport-accounts", str(DATA / "sandbox_account_users_seconds.txt"), "--tz", "UTC"]
    out = tmp_path / "hour"
    res = CliRunner().invoke(cli, base + ["--start", "2026-12-02T13:00:00Z", "--end", "2026-12-02T14:00:00Z",
                                          "-o", str(out)])
    assert res.exit_code == 0, res.output
    rep = json.loads((out / "period.json").read_text())
    wins = rep["sreport_breakdown"]["windows"]
    assert [w["label"] for w in wins] == ["(period)", "2026-W49"]
    for w in wins:
        assert w["start"] == "2026-12-02T13:00:00Z" and w["end"] == "2026-12-02T14:00:00Z"
        assert len(w["differences"]) == 12 and all(d["within"] for d in w["differences"]), w["differences"]
        assert w["sreport"]["gres/gpu"]["allocated"] == pytest.approx(86 / 3600)
    acc = rep["accounts"]["windows"]
    assert all(len(w["differences"]) == 18 and all(d["within"] for d in w["differences"]) for w in acc)
    # a two-day period: the captured hour is none of its windows
    bad = CliRunner().invoke(cli, base + ["--start", "2026-12-01", "--end", "2026-12-03", "-o", str(tmp_path / "b")])
    assert bad.exit_code == 2, bad.output
    msg = " ".join(bad.output.split())
    assert (f"{DATA / 'sandbox_utilization_seconds.txt'}: its banner names 2026-12-02T13:00:00Z - "
            "2026-12-02T14:00:00Z (read in UTC), none of this report's windows (whole hours: (period) "
            "2026-12-01T00:00:00Z - 2026-12-02T14:00:00Z") in msg
    assert not (tmp_path / "b").exists() and "Traceback" not in msg
    # sreport -n prints no banner: taken as the period's (its unit: sreport's default, minutes)
    n = ["--sreport-utilization", str(DATA / "sandbox_utilization_minutes_n.txt")]
    res = CliRunner().invoke(cli, base[:-6] + n + ["--tz", "UTC", "--start", "2026-12-02T13:00:00Z", "--end",
                                                   "2026-12-02T14:00:00Z", "-o", str(tmp_path / "n")])
    assert res.exit_code == 0, res.output
    wins = json.loads((tmp_path / "n" / "period.json").read_text())["sreport_breakdown"]["windows"]
    assert wins[0]["sreport"]["cpu"]["allocated"] == pytest.approx(54 / 60) and wins[1]["sreport"] is None
    # a capture needs the input it is compared with
    alone = CliRunner().invoke(cli, ["report", "period", "--store", str(store), "--month", "2026-12", "-o",
                                     str(tmp_path / "a"), "--sreport-accounts",
                                     str(DATA / "sandbox_account_users_seconds.txt")])
    assert alone.exit_code == 2
    assert "--sreport-accounts: compares sreport's capture with the breakdown of captures: give --assoc-tree" in alone.output


def test_a_part_is_the_sum_of_its_tiles(corpus, tmp_path):
    """A month's breakdown is computed one tile (at most a week) at a time so that memory holds
    a week's rows, not a month's: the figures must not depend on the tiling. Habrok's real
    captures (corpus/sacct, stored as ``report store`` stores them) against Habrok's real
    ``scontrol show nodes`` (corpus/slurm), March 2024 by week and by month: tiles of one day
    give what one tile per part gives, for every window and figure."""

    st = _habrok_store(corpus, tmp_path / "s")
    inputs = PB.captured_inputs(nodes=corpus / "slurm" / "habrok_scontrol_show_nodes.txt")
    now = pd.Timestamp("2024-04-19T12:00:00Z")
    assert PB.tiles(parse_period(month="2024-03").window, 7)[-1].start.isoformat() == "2024-03-29T00:00:00+00:00"
    for by in ("week", "month"):
        per = parse_period(month="2024-03", by=by)
        got = {}
        for tile_days in (1, 31):
            rep = period_report(st, per, ["habrok"], now=now,
                                sections=PB.breakdown_sections(st, inputs, now=now, tile_days=tile_days))
            got[tile_days] = rep["sreport_breakdown"]["windows"]
        assert [w["label"] for w in got[1]] == [w["label"] for w in got[31]]
        assert len(got[1]) == (6 if by == "week" else 2)
        for a, b in zip(got[1], got[31]):
            assert (a["start"], a["end"]) == (b["start"], b["end"])
            for tres, figs in b["ours"].items():
                for f, v in figs.items():
                    assert a["ours"][tres][f] == (None if v is None else pytest.approx(v, rel=1e-12)), (a["label"], f)
        cpu = got[1][0]["ours"]["cpu"]
        assert cpu["reported"] > cpu["allocated"] > 0


def test_breakdown_inputs_of_a_captured_store(corpus, store, tmp_path):
    """The breakdown's inputs against a store filled from captures, each once wrong:

    1. on a store filled from a capture the breakdown ran past the capture time (running jobs
       to Start + Timelimit, capacity to the window's end): now it stops at the store's latest
       pull, as the weekly report of the same capture does (Habrok's real capture, 2024-W16);
    2. an assoc tree of two clusters (sacctmgr without cluster=: a labelled edit, the sandbox's
       real tree followed by itself renamed ``other``) was merged: the jobs' cluster's kept;
    3. slurm.conf given as --nodes (corpus/sites: NodeName=dgx[1-4]) ended in a traceback, and
    4. a file with no node in it (corpus/slurm/sinfo_gres.txt) was taken: both refused, exit 2;
    5. a node retired since (n4 left out of the real --nodes: a labelled edit) lost its down
       time: its events' TRES count it, as sreport does (76 GPU-s, 152 CPU-s)."""
    from slurmkit.cli import cli

    # 1
    c = corpus / "sacct"
    hab = tmp_path / "H"
    res = CliRunner().invoke(cli, ["report", "store", "--from-sacct", str(c / "habrok_gpu_cluster_parsable2.psv"),
                                   "--store", str(hab), "--cluster", "habrok", "--tz", "Europe/Amsterdam"])
    assert res.exit_code == 0, res.output
    nodes = corpus / "slurm" / "habrok_scontrol_show_nodes.txt"
    res = CliRunner().invoke(cli, ["report", "period", "--store", str(hab), "--start", "2024-04-15", "--end",
                                   "2024-04-22", "--nodes", str(nodes), "--format", "json", "-o", str(tmp_path / "p")])
    assert res.exit_code == 0, res.output
    pw = json.loads((tmp_path / "p" / "period.json").read_text())["sreport_breakdown"]["windows"][0]
    res = CliRunner().invoke(cli, ["report", "weekly", "--from-sacct", str(c / "habrok_gpu_cluster_parsable2.psv"),
                                   "--tz", "Europe/Amsterdam", "--week", "2024-W16", "--no-store", "--trend-weeks", "0",
                                   "--spool", str(tmp_path / "none.jsonl"), "--nodes", str(nodes), "--format", "json",
                                   "-o", str(tmp_path / "w")])
    assert res.exit_code == 0, res.output
    wb = json.loads((tmp_path / "w" / "weekly.json").read_text())["utilization"]["breakdown"]
    assert pw["end"] == wb["window"]["end"] == "2024-04-19T11:00:00Z"
    for tres in ("gres/gpu", "cpu"):
        for f in ("allocated", "reported"):
            assert pw["ours"][tres][f] == pytest.approx(wb["ours"][tres][f], rel=1e-12), (tres, f)
    assert pw["ours"]["gres/gpu"]["allocated"] == pytest.approx(123.89861111, rel=1e-9)
    # 2
    tree = (DATA / "sandbox_assoc_tree.psv").read_text()
    both = tmp_path / "both.psv"
    both.write_text(tree + "".join(line.replace("sandbox|", "other|", 1) + "\n" for line in tree.splitlines()[1:]))
    args = ["report", "period", "--store", str(store), "--start", "2026-12-02T13:00:00Z", "--end",
            "2026-12-02T14:00:00Z", "--now", "2026-12-02T14:00:00Z", "--format", "json",
            "--nodes", str(DATA / "sandbox_scontrol_nodes.txt")]

    def tree_of(path, out):
        res = CliRunner().invoke(cli, args + ["--assoc-tree", str(path), "-o", str(tmp_path / out),
                                              "--reservations", str(DATA / "sandbox_reservations.psv")])
        assert res.exit_code == 0, res.output
        return json.loads((tmp_path / out / "period.json").read_text())["accounts"]["windows"][0]["tree"]

    one = tree_of(DATA / "sandbox_assoc_tree.psv", "t1")
    assert tree_of(both, "t2") == one and one["cpu_hours"] == pytest.approx(6360 / 3600)    # sreport's root
    two = tmp_path / "two.psv"
    two.write_text(tree.replace("sandbox|", "x|") + "".join(line.replace("sandbox|", "y|", 1) + "\n"
                                                            for line in tree.splitlines()[1:]))
    res = CliRunner().invoke(cli, args + ["--assoc-tree", str(two), "-o", str(tmp_path / "t3")])
    assert res.exit_code == 2 and "the account tree holds the associations of clusters x, y" in " ".join(res.output.split())
    # 3, 4
    for bad, words in ((corpus / "sites" / "dgx1x4_slurm.conf", ":11: ClusterName=...: slurm.conf's words, not "
                        "'scontrol show -o nodes' output"),
                       (corpus / "sites" / "genomedk_slurm.conf", ":59: ClusterName=...: slurm.conf's words"),
                       (corpus / "slurm" / "gres.conf.dgx1", ": no node (NodeName=...) in it"),
                       (corpus / "slurm" / "sinfo_gres.txt", ": no node (NodeName=...) in it")):
        res = CliRunner().invoke(cli, args[:-2] + ["--nodes", str(bad), "-o", str(tmp_path / "bad")])
        assert res.exit_code == 2, res.output
        assert res.output.startswith(f"slurmkit: error: {bad}") and words in res.output and "Traceback" not in res.output
        assert not (tmp_path / "bad").exists()
    # 5
    kept = tmp_path / "no_n4.txt"
    kept.write_text("".join(ln + "\n" for ln in (DATA / "sandbox_scontrol_nodes.txt").read_text().splitlines()
                            if not ln.startswith("NodeName=n4 ")))
    res = CliRunner().invoke(cli, args[:-2] + ["--nodes", str(kept), "--events", str(DATA / "sandbox_events.psv"),
                                               "--reservations", str(DATA / "sandbox_reservations.psv"),
                                               "-o", str(tmp_path / "n4")])
    assert res.exit_code == 0, res.output
    ours = json.loads((tmp_path / "n4" / "period.json").read_text())["sreport_breakdown"]["windows"][0]["ours"]
    assert ours["gres/gpu"]["down"] == pytest.approx(76 / 3600) and ours["cpu"]["down"] == pytest.approx(152 / 3600)
