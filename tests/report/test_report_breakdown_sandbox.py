"""sreport's breakdown and the account tree in the live weekly report, on the sandbox's real
slurmctld/slurmdbd: a workload under two accounts, a node set down, a node in a MAINT
reservation, then ``sacctmgr -i rollup`` and sreport (under faketime: it never reports the
current hour). The report's own Allocated / Down / Planned Down / Idle / Planned / Reported
must equal sreport's within rounding, and its account tree AccountUtilizationByUser's."""

from __future__ import annotations

import csv
import datetime as dt
import json
import shutil

import pytest

from slurmkit.waiting import wait_until

pytestmark = pytest.mark.slurm

ACCOUNT = "hbrkphys"
RESV = "hbrk_maint"


def _done(run, jid) -> bool:
    out = run(["sacct", "-j", jid, "-X", "-n", "-P", "-o", "State"], timeout=30).stdout.split()
    return bool(out) and out[-1] == "COMPLETED"


def test_breakdown_and_account_tree_equal_sreport(own_slurm_env, tmp_path):
    if not shutil.which("faketime"):
        pytest.skip("faketime (Debian package) is not installed")
    from slurmkit.report import weekly_report
    from slurmkit.report.window import Window
    from slurmkit.slurm.commands import run

    run(["sacctmgr", "-i", "add", "account", ACCOUNT, "parent=root", "Description=hbrk", "Organization=hbrk"], timeout=30,
        check=False)
    run(["sacctmgr", "-i", "add", "user", "root", f"account={ACCOUNT}"], timeout=30, check=False)
    run(["scontrol", "create", "reservation", f"ReservationName={RESV}", "StartTime=now", "Duration=30",
         "Nodes=n3", "Users=root", "Flags=MAINT"], timeout=30)
    run(["scontrol", "update", "NodeName=n4", "State=DOWN", "Reason=slurmkit-test: breakdown"], timeout=30)
    try:
        # one CPU each: the test sandbox's nodes have as many CPUs as this host (2 on CI)
        j1 = run(["sbatch", "--parsable", "-o", "/dev/null", "-w", "n1", "--gres=gpu:2", "-c", "1", "--wrap", "sleep 6"],
                 timeout=60).stdout.strip()
        j2 = run(["sbatch", "--parsable", "-o", "/dev/null", "-w", "n2", "-A", ACCOUNT, "--gres=gpu:1",
                  "-c", "1", "--wrap", "sleep 4"], timeout=60).stdout.strip()
        wait_until(lambda: _done(run, j1) and _done(run, j2), 120, 1.0, f"jobs {j1} and {j2}",
                   lambda: run(["squeue", "-o", "%i %T %r %a %u"], timeout=30, check=False).stdout
                   + run(["sacct", "-X", "-P", "-o", "JobID,State,Account,User"], timeout=30, check=False).stdout)
    finally:
        run(["scontrol", "update", "NodeName=n4", "State=RESUME"], timeout=30, check=False)
        run(["scontrol", "delete", f"ReservationName={RESV}"], timeout=30, check=False)
    now = dt.datetime.now(dt.timezone.utc)
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    hour_end = now.replace(minute=0, second=0, microsecond=0) + dt.timedelta(hours=1)
    ahead = int((hour_end - now).total_seconds()) + 120
    fake_now = now + dt.timedelta(seconds=ahead)
    out = tmp_path / "out"
    res = weekly_report(window=Window(day, day + dt.timedelta(days=1)), store_dir=tmp_path / "store", now=fake_now,
                        use_sreport=True, rollup=True, sreport_wrapper=("faketime", "-f", f"+{ahead}s"),
                        formats=["json", "md", "csv", "html"], outdir=out, spool=tmp_path / "nospool.jsonl")
    u = res.report["utilization"]
    assert u["capacity_source"] == "scontrol show nodes (each node's Gres GPUs)"
    b = u["breakdown"]
    assert b["window"] == {"start": day.strftime("%Y-%m-%dT%H:%M:%SZ"), "end": hour_end.strftime("%Y-%m-%dT%H:%M:%SZ")}
    assert b["sreport"] is not None, res.warnings
    assert len(b["differences"]) == 12
    assert all(d["within"] for d in b["differences"]), [d for d in b["differences"] if not d["within"]]
    gpu, cpu = b["ours"]["gres/gpu"], b["ours"]["cpu"]
    assert gpu["allocated"] > 0 and gpu["down"] > 0 and cpu["down"] > 0
    assert cpu["planned_down"] > 0          # the MAINT reservation: its TRES is cpu=8 (no GPU), as slurmctld records it
    assert gpu["reported"] == pytest.approx(b["sreport"]["gres/gpu"]["reported"], abs=0.02)
    assert "Every figure equals sreport's within rounding." in b["notes"]
    # the account tree: every row, both TRES, equals sreport's (jobs' usage plus the reservations'
    # idle time shared among the associations allowed in them)
    acc = res.report["accounts"]
    rows = {(d["account"], d["user"], d["tres"]): d for d in acc["differences"]}
    assert rows[(ACCOUNT, "root", "gres/gpu")]["ours"] > 0
    assert rows[("root", "root", "cpu")]["ours"] > 0       # its share of the MAINT reservation (Users=root)
    assert all(d["within"] for d in acc["differences"]), [d for d in acc["differences"] if not d["within"]]
    assert rows[(ACCOUNT, "", "gres/gpu")]["sreport"] == pytest.approx(rows[(ACCOUNT, "root", "gres/gpu")]["sreport"])
    # every format shows it
    md = (out / "weekly.md").read_text()
    assert "## Reconciliation and denominators" in md and "Utilization's capacity source: scontrol show nodes" in md and "## Accounts" in md
    html = (out / "weekly.html").read_text()
    assert "<h3>Denominators</h3>" in html and "Planned Down" in html
    # a reader's order: the summary, the totals and the tables first; sreport's reconciliation,
    # the denominators and the account tree last, collapsed
    assert (html.index('<div class="summary">') < html.index("<h2>Totals</h2>") < html.index("<h2>By account</h2>")
            < html.index('<details class="recon">') < html.index("<h3>Denominators</h3>"))
    assert md.index("## Summary") < md.index("## Totals") < md.index("## By account") < md.index(
        "## Reconciliation and denominators")
    with open(out / "breakdown.csv") as fh:
        got = list(csv.DictReader(fh))
    assert {(r["tres"], r["figure"]) for r in got} >= {("gres/gpu", "Allocated"), ("cpu", "Planned Down")}
    assert json.loads((out / "weekly.json").read_text())["utilization"]["breakdown"]["ours"]["gres/gpu"]["down"] == gpu["down"]
