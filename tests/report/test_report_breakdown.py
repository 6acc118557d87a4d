"""sreport's breakdown (Allocated / Down / Planned Down / Idle / Planned / Reported per TRES)
and the account tree, computed from a real sandbox hour's captures (tests/report/data/sreport:
sacct, sacctmgr events / reservations / assoc tree, scontrol nodes) and checked against the
sreport output of the same hour, captured after ``sacctmgr -i rollup``."""

from __future__ import annotations

import csv
import datetime as dt
import json
from pathlib import Path

import pandas as pd
import pytest

from slurmkit.accounting.frame import jobs_frame
from slurmkit.accounting.read import read_sacct_bytes
from slurmkit.errors import InputError
from slurmkit.report import breakdown as B
from slurmkit.report import capacity as C
from slurmkit.report import sreport as S
from slurmkit.report.energy import Assumptions
from slurmkit.report.weekly import build_report
from slurmkit.report.window import Window

DATA = Path(__file__).parent / "data" / "sreport"
HOUR = Window(dt.datetime(2026, 12, 2, 13, tzinfo=dt.timezone.utc), dt.datetime(2026, 12, 2, 14, tzinfo=dt.timezone.utc))


def _read(name: str) -> str:
    return (DATA / name).read_text()


def _allocs():
    path = DATA / "sandbox_sacct.psv"
    table, dq = read_sacct_bytes(path.read_bytes(), str(path))
    _, a = build_report(jobs_frame(table, dq, str(path)), dq, HOUR, Assumptions(), now=HOUR.end)
    return a


def _breakdown():
    events = C.node_events(_read("sandbox_events.psv"), cluster_rows=True)
    resv = B.parse_reservations(_read("sandbox_reservations.psv"))
    nodes = C.node_tres_scontrol(_read("sandbox_scontrol_nodes.txt"))
    return B.breakdown(HOUR.start, HOUR.end, _allocs(), events, resv, nodes, now=HOUR.end)


def test_sreport_utilization_parsed_in_every_shape_it_prints():
    sec = S.cluster_utilization(_read("sandbox_utilization_seconds.txt"), "Seconds")
    assert sec["cpu"] == pytest.approx({"cluster": "sandbox", "allocated": 3228 / 3600, "down": 152 / 3600,
                                        "planned_down": 3104 / 3600, "idle": 6208 / 3600, "planned": 12 / 3600,
                                        "reported": 12704 / 3600})
    assert sec["gres/gpu"]["allocated"] == pytest.approx(86 / 3600) and sec["gres/gpu"]["reported"] == pytest.approx(6352 / 3600)
    # format=...,Planned: 22.05 matches "Planned" as a prefix of PlannedDown and prints it twice
    fmt = S.cluster_utilization(_read("sandbox_utilization_format.txt"), "seconds")
    assert fmt["cpu"]["planned_down"] == pytest.approx(3104 / 3600) and "planned" not in fmt["cpu"]
    assert fmt["cpu"]["tres_count"] == 32 and fmt["gres/gpu"]["tres_count"] == 16 and fmt["cpu"]["overcommitted"] == 0
    # -n, minutes (sreport rounds each figure to whole minutes)
    mins = S.cluster_utilization(_read("sandbox_utilization_minutes_n.txt"), "minutes")
    assert mins["cpu"]["allocated"] == pytest.approx(54 / 60) and mins["gres/gpu"]["idle"] == pytest.approx(103 / 60)
    # an older Slurm's header (Reserved, not Planned), another TRES, Minutes; the same row headerless (-n)
    old = S.cluster_utilization(_read("picotte_utilization_billing.txt"))
    assert old == {"billing": pytest.approx({"cluster": "picotte", "allocated": 13033854 / 60, "down": 1879748 / 60,
                                             "planned_down": 0.0, "idle": 227783998 / 60, "planned": 0.0,
                                             "reported": 242697600 / 60})}
    assert S.cluster_utilization(_read("picotte_utilization_billing.txt").splitlines()[1]) == old
    with pytest.raises(InputError, match=":1: 4 columns, expected 7 or 8"):
        S.cluster_utilization("sandbox|cpu|1|2\n")
    with pytest.raises(ValueError, match="Percent"):
        S.cluster_utilization("", "percent")


def test_account_users_parsed_and_gpu_hours_sum_user_rows_only():
    rows = S.account_users(_read("sandbox_account_users_seconds.txt"), "seconds")
    assert {"cluster": "sandbox", "account": "physics", "login": "nobody", "tres": "gres/gpu",
            "used": pytest.approx(30 / 3600)} in rows
    assert S.gpu_hours(_read("sandbox_account_users_seconds.txt"), "seconds") == pytest.approx(86 / 3600)
    # the 4-column format=Cluster,Account,Login,Used of older calls, -n
    short = "c|root||12.00\nc|phys||10.00\nc|phys|alice|6.50\nc|phys|bob|3.50\nc|bio|carol|2.00\n"
    assert sum(r["used"] for r in S.account_users(short, "hours") if r["login"]) == pytest.approx(12.0)


def test_reservations_from_sacctmgr_and_scontrol():
    r = B.parse_reservations(_read("sandbox_reservations.psv"))
    assert [(x["name"], sorted(x["flags"]), x["nodes"], x["tres"], x["assocs"]) for x in r] == [
        ("maint1", ["IGNORE_JOBS", "MAINT", "SPEC_NODES"], ["n3"], {"cpu": 8.0}, ["2", "4", "7"]),
        ("maint1", ["MAINT", "SPEC_NODES"], ["n3"], {"cpu": 8.0}, ["2", "4", "7"]),
        ("team", ["SPEC_NODES"], ["n2"], {"cpu": 8.0}, ["5"]),
        ("hbrk_maint", ["MAINT", "SPEC_NODES"], ["n3"], {"cpu": 8.0}, ["2", "4", "7"])]
    assert r[1]["start"] == pd.Timestamp(1796219620, unit="s", tz="UTC")
    sc = B.parse_reservations(_read("sandbox_scontrol_reservations.txt"))
    assert [(x["name"], sorted(x["flags"]), x["nodes"]) for x in sc] == [
        ("maint1", ["MAINT", "SPEC_NODES"], ["n3"]), ("team", ["SPEC_NODES"], ["n2"])]
    assert sc[1]["end"] - sc[1]["start"] == pd.Timedelta(hours=1)
    with pytest.raises(InputError, match="no flags"):
        B.parse_reservations("Cluster|Name|TRES|TimeStart|TimeEnd|UnusedWall\nc|r|cpu=8|1|2|0\n")


def test_breakdown_equals_sreport_for_the_sandbox_hour():
    """The hour holds: jobs on n1, n4 down twice (11 s and 8 s; event TRES 8 CPUs, 4 GPUs), MAINT
    reservations on n3 (cpu=8: Planned Down; maint1's first 4 s with IGNORE_JOBS are not
    counted), an account reservation on n2 (Allocated), the cluster registered at 13:53:23
    (Reported from there)."""
    bd = _breakdown()
    assert bd["capacity_source"].startswith("registered TRES")
    sre = S.cluster_utilization(_read("sandbox_utilization_seconds.txt"), "seconds")
    rows = B.compare(bd["tres"], sre, tolerance_h=1 / 3600)
    assert len(rows) == 12 and all(r["within"] for r in rows), rows
    assert bd["tres"]["gres/gpu"]["down"] == pytest.approx(76 / 3600)
    assert bd["tres"]["cpu"]["planned"] == pytest.approx(12 / 3600)


def test_breakdown_caps_each_hour_as_slurmdbd_does():
    """A node down while a job runs on it: Allocated and Down both count until they would pass
    Reported; then Down gives way (as_mysql_rollup.c), and Idle is 0, never negative."""
    a = pd.DataFrame({"start": [pd.Timestamp("2026-01-01T00:00Z")], "end": [pd.Timestamp("2026-01-01T02:00Z")],
                      "gpus": [4.0], "ncpus": [8.0]})
    ev = C.node_events("n1|2026-01-01T00:00:00|2026-01-01T01:00:00|DRAIN|fan")
    bd = B.breakdown("2026-01-01T00:00Z", "2026-01-01T02:00Z", a, ev, [], {"n1": {"cpu": 8, "gres/gpu": 4}},
                     now="2026-01-02T00:00Z")
    g = bd["tres"]["gres/gpu"]
    assert (g["reported"], g["allocated"], g["down"], g["idle"]) == (8.0, 8.0, 0.0, 0.0)
    assert bd["capacity_source"].startswith("node TRES")
    # unknown GPU counts: Allocated and Idle unknown, never 0
    bd = B.breakdown("2026-01-01T00:00Z", "2026-01-01T02:00Z", a.assign(gpus=[float("nan")]), None, None,
                     {"n1": {"cpu": 8, "gres/gpu": 4}}, now="2026-01-02T00:00Z")
    assert bd["tres"]["gres/gpu"]["allocated"] is None and bd["tres"]["gres/gpu"]["idle"] is None
    assert bd["tres"]["cpu"]["allocated"] == 16.0


def test_account_tree_equals_account_utilization_by_user():
    assocs = B.parse_assoc_tree(_read("sandbox_assoc_tree.psv"))
    assert [(a["account"], a["user"], a["parent"], a["depth"], a["id"]) for a in assocs] == [
        ("root", "", "", 0, "1"), ("root", "root", "root", 1, "2"), ("hbrkphys", "", "root", 1, "8"),
        ("hbrkphys", "nobody", "hbrkphys", 2, "9"), ("research", "", "root", 1, "3"),
        ("research", "root", "research", 2, "4"), ("physics", "", "research", 2, "5"),
        ("physics", "nobody", "physics", 3, "6"), ("physics", "root", "physics", 3, "7")]
    a = _allocs()
    theirs = S.account_users(_read("sandbox_account_users_seconds.txt"), "seconds")
    # jobs only: GPU rows equal sreport's (no reservation holds GPUs), CPU rows not where a
    # reservation's idle time is shared out
    tree = B.account_tree(assocs, a, HOUR.start, HOUR.end, now=HOUR.end)
    assert [c["account"] for c in tree["children"]] == ["hbrkphys", "research"]
    assert tree["children"][1]["children"][0]["account"] == "physics"
    rows = B.compare_accounts(tree, theirs, tolerance_h=1 / 3600)
    assert all(r["within"] for r in rows if r["tres"] == "gres/gpu") and len(rows) == 18
    cpu = {(r["account"], r["user"]): r for r in rows if r["tres"] == "cpu"}
    assert cpu[("physics", "nobody")]["within"] is True and cpu[("physics", "root")]["within"] is False
    # with the reservations' idle shares: every row, both TRES, equal to the second. root's three
    # associations (2, 4, 7: maint1 and hbrk_maint, Users=root) get a third each, physics's own
    # association (5: team, Accounts=physics) all of team's
    resv = B.parse_reservations(_read("sandbox_reservations.psv"))
    events = C.node_events(_read("sandbox_events.psv"), cluster_rows=True)
    nodes = C.node_tres_scontrol(_read("sandbox_scontrol_nodes.txt"))
    shares = B.reservation_shares(resv, a, events, nodes, HOUR.start, HOUR.end, now=HOUR.end)
    assert shares["5"]["cpu_hours"] == pytest.approx(3040 / 3600) and shares["5"]["gpu_hours"] == 0
    tree = B.account_tree(assocs, a, HOUR.start, HOUR.end, now=HOUR.end, shares=shares)
    rows = B.compare_accounts(tree, theirs, tolerance_h=1 / 3600)
    assert len(rows) == 18 and all(r["within"] for r in rows), [r for r in rows if not r["within"]]
    assert B.tree_rows(tree)[-1] == {"depth": 3, "account": "physics", "user": "root", "gpu_hours": 0.0,
                                     "cpu_hours": pytest.approx(1044 / 3600, abs=1 / 3600)}


def _weekly(tmp_path, *extra):
    from click.testing import CliRunner

    from slurmkit.cli import cli

    out = tmp_path / "out"
    res = CliRunner().invoke(cli, [
        "report", "weekly", "--from-sacct", str(DATA / "sandbox_sacct.psv"), "--start", "2026-12-02", "--end",
        "2026-12-03", "--tz", "UTC", "--as-of", "2026-12-02T14:05:00", "--no-store", "--trend-weeks", "0",
        "--spool", str(tmp_path / "nospool.jsonl"), "--format", "json,md,csv,html", "-o", str(out), *extra],
        catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return json.loads((out / "weekly.json").read_text()), out


def test_captured_report_shows_the_breakdown_beside_sreports(tmp_path):
    """The same hour from captures through the CLI (--events, --reservations, --nodes,
    --assoc-tree, --sreport-utilization, --sreport-accounts): every figure and every account
    row equal sreport's; the unit is read from sreport's banner (Seconds)."""
    rep, out = _weekly(tmp_path, "--events", str(DATA / "sandbox_events.psv"),
                       "--reservations", str(DATA / "sandbox_reservations.psv"),
                       "--nodes", str(DATA / "sandbox_scontrol_nodes.txt"),
                       "--assoc-tree", str(DATA / "sandbox_assoc_tree.psv"),
                       "--sreport-utilization", str(DATA / "sandbox_utilization_seconds.txt"),
                       "--sreport-accounts", str(DATA / "sandbox_account_users_seconds.txt"))
    b = rep["utilization"]["breakdown"]
    assert b["window"] == {"start": "2026-12-02T00:00:00Z", "end": "2026-12-02T14:00:00Z"}
    assert len(b["differences"]) == 12 and all(d["within"] for d in b["differences"]), b["differences"]
    assert b["ours"]["cpu"]["planned_down"] == pytest.approx(3104 / 3600)
    assert rep["utilization"]["capacity_source"] == "unknown"     # no --capacity-gpus, no profile
    assert rep["utilization"]["down_gpu_hours"] == pytest.approx(76 / 3600)   # n4's GPUs from --nodes
    own = [n for n in b["notes"] if n.startswith("Utilization's own denominator")]
    assert len(own) == 1 and "capacity unknown GPU-h (unknown)" in own[0] and "Reported 1.764, Allocated 0.02389" in own[0]
    acc = rep["accounts"]
    assert len(acc["differences"]) == 18 and all(d["within"] for d in acc["differences"])
    md = (out / "weekly.md").read_text()
    assert "| cpu | Planned Down | 0.862 | 0.862 | 0 | yes |" in md
    assert "| \u2003\u2003physics | 0.00833 | 0.00833 |" in md
    with open(out / "accounts.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert rows[0]["account"] == "root" and rows[0]["depth"] == "0" and rows[0]["sreport_cpu_hours"] == "1.77"


def test_captured_breakdown_without_events_or_reservations_says_unknown(tmp_path):
    """Without the events and reservations, Down / Planned Down / Idle are unknown (null,
    "unknown"), never 0; Allocated and Reported are still computed; no sreport: its column empty."""
    rep, out = _weekly(tmp_path, "--nodes", str(DATA / "sandbox_scontrol_nodes.txt"))
    g = rep["utilization"]["breakdown"]["ours"]["gres/gpu"]
    assert g["down"] is None and g["planned_down"] is None and g["idle"] is None
    assert g["allocated"] == pytest.approx(86 / 3600) and g["reported"] == pytest.approx(16 * 14)
    assert rep["utilization"]["breakdown"]["sreport"] is None and rep["accounts"] is None
    md = (out / "weekly.md").read_text()
    assert "| gres/gpu | Down | unknown | – | – |  |" in md and "sreport not reached" in md
    with pytest.raises(InputError, match="Percent"):
        import slurmkit.report.pipeline as P
        bad = tmp_path / "pct.txt"
        bad.write_text("Usage reported in Percentage of Total\nsandbox|cpu|1|2|3|4|5|6\n")
        P.weekly_report(captures=(DATA / "sandbox_sacct.psv",), window=HOUR, sreport_utilization=bad,
                        as_of=HOUR.end, outdir=tmp_path / "o2", use_store=False, trend_weeks=0, formats=["json"],
                        spool=tmp_path / "nospool.jsonl")


def test_sreport_without_rows_is_not_comparable_and_capacity_counts_from_registration(tmp_path):
    """sreport returned no rows (sandbox_utilization_no_rows.txt: the real capture's banner and
    header, its rows removed, as sreport prints a window slurmdbd has not rolled up): the notes
    say "not comparable", never "equals"; the cluster registered at 13:53:23 (sandbox_events.psv),
    so the headline utilization counts its capacity from then to the capture time (14:05)."""
    rep, out = _weekly(tmp_path, "--events", str(DATA / "sandbox_events.psv"),
                       "--reservations", str(DATA / "sandbox_reservations.psv"),
                       "--nodes", str(DATA / "sandbox_scontrol_nodes.txt"), "--capacity-gpus", "16",
                       "--sreport-utilization", str(DATA / "sandbox_utilization_no_rows.txt"))
    b = rep["utilization"]["breakdown"]
    assert b["sreport"] == {} and b["differences"] == []
    assert "sreport returned no rows for this window (cluster registered at 2026-12-02T13:53:23Z; "\
           "rollup not yet run?): not comparable." in b["notes"]
    assert not any("equals sreport" in n for n in b["notes"])
    u = rep["utilization"]
    assert u["capacity_period"]["start"] == "2026-12-02T13:53:23Z" and u["capacity_period"]["end"] == "2026-12-02T14:05:00Z"
    assert u["capacity_gpu_hours"] == pytest.approx(16 * 697 / 3600)
    md = (out / "weekly.md").read_text()
    assert "not comparable" in md and "counted 2026-12-02T13:53:23Z – 2026-12-02T14:05:00Z" in md
    # a 1-day window is "1 day"; no raw True/False, no "{}" among the assumptions
    assert md.startswith("# GPU cluster report over 1 day — sandbox: 2026-12-02 to 2026-12-03")
    assert "| gpu_tdp_w | none given (every GPU at default_tdp_w) |" in md and "| trust_slurm_energy | yes |" in md
    html = (out / "weekly.html").read_text()
    assert "counted 2026-12-02T13:53:23Z" in html
    assert "Capacity 3.10 GPU-hours (16.0 GPUs, 2026-12-02T13:53:23Z – 2026-12-02T14:05:00Z)" in html


def test_cluster_registered_after_the_hours_has_nothing_reported():
    """A labelled edit of sandbox_events.psv: the cluster's registration moved to 14:27:29, after
    the hour (a cluster made after sreport's rolled-up hours): Reported
    and Idle are 0 for the hour (not the nodes' TRES x the hour) and the note says when it
    registered."""
    text = _read("sandbox_events.psv").replace("|1796219603|Unknown|", "|1796221649|Unknown|")
    events = C.node_events(text, cluster_rows=True)
    nodes = C.node_tres_scontrol(_read("sandbox_scontrol_nodes.txt"))
    bd = B.breakdown(HOUR.start, HOUR.end, _allocs(), events, [], nodes, now=HOUR.end)
    assert bd["registered"] == "2026-12-02T14:27:29Z"
    assert bd["tres"]["gres/gpu"]["reported"] == 0 and bd["tres"]["gres/gpu"]["idle"] == 0
    notes = B.explain(bd, {}, [], {"start": "2026-12-02T13:00:00Z", "end": "2026-12-02T14:00:00Z"}, None)
    assert notes[-1] == ("sreport returned no rows for this window (cluster registered at 2026-12-02T14:27:29Z; "
                         "rollup not yet run?): not comparable.")


def test_weekly_refuses_another_clusters_captures(tmp_path, corpus):
    """The weekly report of Habrok's real capture (corpus/sacct, week 2024-W12) with the
    sandbox's captured nodes and assoc tree: refused (exit 2, nothing written), the nodes
    named; Habrok's own ``scontrol show nodes`` (corpus/slurm) is
    taken (the breakdown used to read all zeros without a word)."""
    from click.testing import CliRunner

    from slurmkit.cli import cli

    base = ["report", "weekly", "--from-sacct", str(corpus / "sacct" / "habrok_gpu_cluster_parsable2.psv"),
            "--tz", "Europe/Amsterdam", "--week", "2024-W12", "--no-store", "--trend-weeks", "0",
            "--spool", str(tmp_path / "nospool.jsonl"), "--format", "json"]
    out = tmp_path / "o"
    bad = CliRunner().invoke(cli, base + ["-o", str(out), "--nodes", str(DATA / "sandbox_scontrol_nodes.txt"),
                                          "--assoc-tree", str(DATA / "sandbox_assoc_tree.psv")])
    assert bad.exit_code == 2, bad.output
    msg = " ".join(bad.output.split())
    # (this capture has no Cluster column: the tree's cluster has nothing to be compared with)
    assert ("slurmkit: error: breakdown inputs: none of the 1 nodes the jobs ran on (node5) is a node of the capacity "
            "input (--nodes / scontrol show nodes, or the site profile: n[1-4]): sreport's breakdown") in msg
    assert "account tree" not in msg.split("error:")[1].split(":")[1] and "Traceback" not in msg
    assert not (out / "weekly.json").exists()
    good = CliRunner().invoke(cli, base + ["-o", str(out), "--nodes",
                                           str(corpus / "slurm" / "habrok_scontrol_show_nodes.txt")])
    assert good.exit_code == 0, good.output
    rep = json.loads((out / "weekly.json").read_text())
    assert rep["utilization"]["breakdown"]["ours"]["cpu"]["reported"] > 0


def test_inputs_of_the_jobs_cluster_are_taken_by_slurms_rules_and_a_zone_is_blamed_when_it_can_be(tmp_path):
    """``foreign_inputs`` used to compare cluster names case-sensitively and node names
    with their domain; Slurm lowercases cluster names, and ``scontrol`` may print
    ``NodeName=n1.sb.example`` where sacct's NodeList says ``n1``. Both are the jobs' cluster
    now. Events read in the wrong zone (sacctmgr's local times of an Amsterdam host read as
    UTC: their registration moves after the last job's start) are refused with the zone named.
    Labelled edits of the sandbox's real captures (tests/report/data/sreport)."""
    import re
    import time

    from slurmkit.accounting.frame import load_sacct
    from slurmkit.accounting.quality import DataQuality
    from slurmkit.report import breakdown as BD
    from slurmkit.report import capacity as C
    from slurmkit.report.usage import allocations

    rows, _ = load_sacct(DATA / "sandbox_sacct.psv")
    a = allocations(rows, pd.Timestamp("2026-12-02T13:00Z"), pd.Timestamp("2026-12-02T14:00Z"), DataQuality(),
                    now=pd.Timestamp("2026-12-02T14:00Z"))
    facts = BD.job_facts(a)
    assert facts["clusters"] == {"sandbox"} and facts["nodes"] <= {"n1", "n2", "n3", "n4"} and facts["nodes"]
    text = (DATA / "sandbox_scontrol_nodes.txt").read_text()
    fqdn = C.node_tres_scontrol(re.sub(r"NodeName=(n\d)\b", r"NodeName=\1.sb.example", text), "fqdn")
    assert sorted(fqdn) == ["n1.sb.example", "n2.sb.example", "n3.sb.example", "n4.sb.example"]
    upper = BD.parse_assoc_tree((DATA / "sandbox_assoc_tree.psv").read_text().replace("sandbox|", "SANDBOX|"))
    assert BD.foreign_inputs(facts, {"node_tres": fqdn, "assocs": upper}) == []
    # Amsterdam-local events (CET: UTC+1) read as UTC
    local = "\n".join("|".join(time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(int(f) + 3600)) if f.isdigit() else f
                               for f in line.split("|"))
                      for line in (DATA / "sandbox_events.psv").read_text().splitlines())
    ev = C.node_events(local, "UTC", cluster_rows=True)
    why = BD.foreign_inputs(facts, {"events": ev, "time_zone": "UTC"})
    assert len(why) == 1 and why[0].startswith("the events (--events / sacctmgr show event) have the cluster "
                                               "registering with slurmdbd at 2026-12-02T14:53:23Z, after the last job")
    assert why[0].endswith("or their times are not UTC's (they were read in UTC: give --tz the zone of the host "
                           "sacctmgr ran on)")
    assert BD.foreign_inputs(facts, {"events": C.node_events(local, "Europe/Amsterdam", cluster_rows=True)}) == []


def test_the_sandbox_profiles_node_tres_are_slurms():
    """``--site sandbox`` used to count 2 CPUs a node (sockets x cores x threads of the
    hardware the profile describes) where slurm.conf, and so slurmdbd and sreport, count 8
    (the profile's ``slurm_node.cpus``): CPU Down and Reported were a quarter of sreport's. The
    profile's node TRES now equal the sandbox's real ``scontrol show -o nodes`` capture's."""
    from slurmkit.profile import load_profile

    ours = C.node_tres_profile(load_profile("sandbox"))
    slurm = C.node_tres_scontrol((DATA / "sandbox_scontrol_nodes.txt").read_text(), "sandbox_scontrol_nodes.txt")
    assert ours == slurm == {f"n{i}": {"cpu": 8.0, "gres/gpu": 4.0} for i in range(1, 5)}


def test_a_captures_zone_is_named_only_where_its_times_are_local(tmp_path):
    """``report weekly``'s captured breakdown inputs record the zone their times were read in
    (a registration refusal names it) only where the events or reservations print local ISO
    times: the sandbox's real ``SLURM_TIME_FORMAT=%s`` events need no zone, and a refusal must
    not blame one. The local-time file is a labelled edit of the same capture (each epoch
    field printed as Amsterdam's local time, as sacctmgr prints it there by default)."""
    import time

    from slurmkit.report.pipeline import WeeklyOptions, captured_breakdown_inputs, prints_local_times
    from slurmkit.report.window import Window

    epoch = DATA / "sandbox_events.psv"
    local = tmp_path / "events_local.psv"
    local.write_text("\n".join("|".join(time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(int(f) + 3600))
                                        if f.isdigit() else f for f in line.split("|"))
                               for line in epoch.read_text().splitlines()) + "\n")
    assert not prints_local_times(epoch.read_text()) and prints_local_times(local.read_text())
    w = Window(pd.Timestamp("2026-12-02T13:00Z").to_pydatetime(), pd.Timestamp("2026-12-02T14:00Z").to_pydatetime())
    got = {p.name: captured_breakdown_inputs(WeeklyOptions(events=p, tz="Europe/Amsterdam"), w, None)
           for p in (epoch, local)}
    assert got[epoch.name]["time_zone"] is None and got[local.name]["time_zone"] == "Europe/Amsterdam"
    # the same events either way: the registration at 1796219603 (2026-12-02T12:53:23Z)
    for g in got.values():
        reg = g["events"][g["events"]["node"] == ""]
        assert [t.timestamp() for t in reg["start"]] == [1796219603.0]
