"""The period report (totals, sreport's breakdown, the per-job view) against the sandbox's real accounting spread
over several days: a workload run in the module's own sandbox (real slurmctld / slurmdbd /
MariaDB: the edits below stay out of the other tests' accounting), its final records in
slurmdbd (``_settled``), then backdated in slurmdbd's MariaDB (``sandbox_job_table`` /
``_step_table`` times set to chosen hours of a Saturday, Sunday and Monday two to three weeks
ago, a node's DOWN event moved the same way, the cluster's registration copied over those
days), the usage rolled up again (``_last_ran_table`` reset, ``sacctmgr -i rollup``), so that
sacct and sreport both see a three-day history (no faketime: the days are long past). Then the days go into a
store through the weekly report's live pull, and:

1. the period report's totals and per-account / per-user GPU- and CPU-hours equal a
   calculation made here from ``sacct -X -P`` (AllocTRES gres/gpu, NCPUS, Start, End);
4. its breakdown equals ``sreport cluster utilization`` and its account tree ``sreport cluster
   AccountUtilizationByUser``, per part and over the period, within rounding;
5. ``slurmkit report jobs --start --end`` lists each job with sacct's State and ElapsedRaw;
6. ``report period --quarter`` of the quarter holding the workload gives energy with its
   coverage, utilization % (of the available capacity and of sreport's Reported), CO2e and cost
   equal to ``report weekly --start/--end`` over the same quarter (its days pulled into the store
   by that run, the same ``--now`` and assumptions), and its breakdown equals sreport's per month
   and over the quarter (the quarter's hours rolled up first).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
from collections import defaultdict

import pytest
from click.testing import CliRunner

from slurmkit.waiting import wait_until

pytestmark = pytest.mark.slurm

ACCOUNT = "periodchem"
DAY = 86400
# (account or None: root's default, hour of day 1..3 as offset from the first midnight, hours run)
# the days are a Saturday, Sunday and Monday: job 2 runs over the week's end (Sunday to Monday)
PLAN = ((None, 10.0, 3.0), (ACCOUNT, 24 + 22.5, 4.0), (ACCOUNT, 24 + 13.25, 1.5), (None, 48 + 5.0, 2.0))


def _sql(sandbox, sql: str) -> str:
    proc = subprocess.run(["mariadb", "--no-defaults", f"--socket={sandbox.run_dir / 'mysqld.sock'}", "-N", "-B",
                           "slurm_acct_db"], input=sql, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _state(run, jid) -> str:
    out = run(["sacct", "-j", jid, "-X", "-n", "-P", "-o", "State"], timeout=30).stdout.split()
    return out[-1] if out else ""


def _sacct_hours(run, d1: int, d2: int) -> tuple[dict, dict]:
    """Per job: (account, user, State, ElapsedRaw, GPUs, CPUs, start, end) from ``sacct -X -P``
    (epoch times); and per (account, user) the GPU- and CPU-hours inside [d1, d2), computed here."""
    from slurmkit.accounting.ingest import SACCT_ENV

    iso = [f"{dt.datetime.fromtimestamp(t, dt.timezone.utc):%Y-%m-%dT%H:%M:%S}" for t in (d1, d2)]
    out = run(["sacct", "-a", "-X", "-n", "-P", "--noconvert", "-S", iso[0], "-E", iso[1], "-o",
               "JobID,Account,User,State,ElapsedRaw,AllocTRES,NCPUS,Start,End"],
              timeout=60, env=dict(SACCT_ENV)).stdout
    jobs, use = {}, defaultdict(lambda: [0.0, 0.0])
    for ln in out.splitlines():
        jid, acc, user, state, elapsed, tres, ncpus, start, end = ln.split("|")
        gpus = sum(float(v) for k, _, v in (p.partition("=") for p in tres.split(",")) if k == "gres/gpu")
        jobs[jid] = (acc, user, state, int(elapsed), gpus, int(ncpus), int(start), int(end))
        secs = max(0, min(int(end), d2) - max(int(start), d1))
        use[(acc, user)][0] += gpus * secs / 3600
        use[(acc, user)][1] += int(ncpus) * secs / 3600
    return jobs, dict(use)


def _settled(sandbox, run, jobs) -> bool:
    """Whether slurmdbd holds every job's final record and nothing is on its way: one row per
    job with its End and Eligible (slurmctld sends the Eligible record after the job's end:
    found in a CI run, where one arrived after the backdating, keyed by the real Submit, and
    made a second row per job with no End, which sreport counts as running) and slurmctld's
    DBD agent queue empty (``sdiag``)."""
    rows = _sql(sandbox, f"SELECT id_job, count(*), min(time_eligible), min(time_end) FROM sandbox_job_table "
                         f"WHERE id_job IN ({', '.join(jobs)}) GROUP BY id_job")
    got = [ln.split("\t") for ln in rows.splitlines() if ln.strip()]
    queue = re.search(r"DBD Agent queue size:\s*(\d+)", run(["sdiag"], timeout=30).stdout)
    return (len(got) == len(jobs) and all(n == "1" and int(el) > 0 and int(end) > 0 for _, n, el, end in got)
            and queue is not None and queue.group(1) == "0")


def _close(a, b) -> bool:
    """Equal JSON values, floats to 1e-9 relative (sums taken in another order)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return set(a) == set(b) and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and a == pytest.approx(b, rel=1e-9, abs=1e-9)
    return a == b


def test_period_report_on_backdated_accounting_equals_sacct_and_sreport(own_slurm_env, tmp_path):
    from slurmkit.cli import cli
    from slurmkit.report.live import run_rollup
    from slurmkit.report.pipeline import weekly_report
    from slurmkit.report.window import Window
    from slurmkit.slurm.commands import run

    slurm_env = own_slurm_env   # (the module's own sandbox: tests/conftest.py own_sandbox)
    run(["sacctmgr", "-i", "add", "account", ACCOUNT, "parent=root", "Description=period report test", "Organization=slurmkit-test"],
        timeout=30, check=False)
    run(["sacctmgr", "-i", "add", "user", "root", f"account={ACCOUNT}"], timeout=30, check=False)
    today = int(dt.datetime.now(dt.timezone.utc).timestamp()) // DAY * DAY
    monday = today - dt.datetime.fromtimestamp(today, dt.timezone.utc).weekday() * DAY
    d1, d2 = monday - 16 * DAY, monday - 13 * DAY          # Saturday to Tuesday, 2 to 3 weeks ago
    jobs = []
    for i, (acc, _, _) in enumerate(PLAN):
        argv = ["sbatch", "--parsable", "-o", "/dev/null", "-w", f"n{i % 2 + 1}", f"--gres=gpu:{i % 2 + 1}",
                "-c", "1", *(["-A", acc] if acc else []), "--wrap", "sleep 2"]
        jobs.append(run(argv, timeout=60).stdout.strip())
    run(["scontrol", "update", "NodeName=n4", "State=DOWN", "Reason=slurmkit-test: period-report backdated"], timeout=30)
    try:
        wait_until(lambda: all(_state(run, j) == "COMPLETED" for j in jobs), 180, 1.0, f"jobs {jobs}",
                   lambda: run(["squeue", "-o", "%i %T %r"], timeout=30, check=False).stdout)
    finally:
        run(["scontrol", "update", "NodeName=n4", "State=RESUME"], timeout=30, check=False)
    wait_until(lambda: _sql(slurm_env, "SELECT count(*) FROM sandbox_event_table WHERE node_name='n4' AND "
                                       "reason LIKE 'slurmkit-test: period-report%' AND time_end > 0").strip() == "1",
               60, 1.0, "n4's DOWN event to be closed in slurmdbd")
    wait_until(lambda: _settled(slurm_env, run, jobs), 60, 1.0, "slurmdbd to hold the jobs' final records",
               lambda: _sql(slurm_env, "SELECT id_job, time_eligible, time_start, time_end FROM sandbox_job_table "
                                       f"WHERE id_job IN ({', '.join(jobs)})"))
    # backdate: each job to its planned hours (submitted and eligible 10 minutes before), its
    # steps inside it; n4 down 02:00-03:30 on the second day
    sql = []
    for jid, (_, at, hours) in zip(jobs, PLAN):
        s = d1 + int(at * 3600)
        e = s + int(hours * 3600)
        sql.append(f"UPDATE sandbox_job_table SET time_submit={s - 600}, time_eligible={s - 600}, time_start={s}, "
                   f"time_end={e} WHERE id_job={jid};")
        sql.append(f"UPDATE sandbox_step_table t JOIN sandbox_job_table j ON t.job_db_inx=j.job_db_inx "
                   f"SET t.time_start={s}, t.time_end={e} WHERE j.id_job={jid};")
    sql.append(f"UPDATE sandbox_event_table SET time_start={d1 + DAY + 7200}, time_end={d1 + DAY + 12600} "
               "WHERE node_name='n4' AND reason LIKE 'slurmkit-test: period-report%';")
    # a copy of the cluster's open registration (its TRES) over the days, closed after them: the
    # registration of today's hours is left as it is for the other sandbox tests
    sql.append("INSERT IGNORE INTO sandbox_event_table (time_start, time_end, node_name, cluster_nodes, reason, "
               f"reason_uid, state, tres) SELECT {d1 - DAY}, {d2 + DAY}, node_name, cluster_nodes, reason, reason_uid, "
               "state, tres FROM sandbox_event_table WHERE node_name='' AND time_end=0 LIMIT 1;")
    sql.append(f"UPDATE sandbox_last_ran_table SET hourly_rollup={d1 - DAY}, daily_rollup={d1 - DAY}, "
               f"monthly_rollup={d1 - 40 * DAY};")
    _sql(slurm_env, "\n".join(sql))
    t1, t2 = (dt.datetime.fromtimestamp(t, dt.timezone.utc) for t in (d1 - DAY, d2 + DAY))
    run_rollup(t1, t2, timeout=300)
    want_jobs, want_use = _sacct_hours(run, d1, d2)
    assert sorted(want_jobs) == sorted(jobs), want_jobs          # sacct sees the backdated history
    assert {want_jobs[j][7] - want_jobs[j][6] for j in jobs} == {int(h * 3600) for _, _, h in PLAN}

    # the days into the store through the weekly report's live pull (sacct per day)
    start, end = (dt.datetime.fromtimestamp(t, dt.timezone.utc) for t in (d1, d2))
    store = tmp_path / "store"
    weekly_report(window=Window(start, end), store_dir=store, use_sreport=False, formats=["json"],
                  outdir=tmp_path / "weekly", spool=tmp_path / "nospool.jsonl", trend_weeks=0)
    out = tmp_path / "period"
    res = CliRunner().invoke(cli, ["report", "period", "--start", f"{start:%Y-%m-%d}", "--end", f"{end:%Y-%m-%d}",
                                   "--by", "week", "--store", str(store), "-o", str(out), "--format", "json,csv,md",
                                   "--live-breakdown", "--sreport"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rep = json.loads((out / "period.json").read_text())
    assert rep["store"]["days"] == 3 and rep["store"]["days_missing"] == []

    # (1) totals and per account / user equal the calculation from sacct -X -P
    t = rep["totals"]
    assert t["jobs"] == len(jobs)
    assert t["gpu_hours"] == pytest.approx(sum(v[0] for v in want_use.values()), abs=1e-6)
    assert t["cpu_hours"] == pytest.approx(sum(v[1] for v in want_use.values()), abs=1e-6)
    by_acc = defaultdict(lambda: [0.0, 0.0])
    for (acc, _), (g, c) in want_use.items():
        by_acc[acc][0] += g
        by_acc[acc][1] += c
    assert {r["account"]: pytest.approx([r["gpu_hours"], r["cpu_hours"]]) for r in rep["by_account"]} == dict(by_acc)
    assert {r["user"] for r in rep["by_user"]} == {u for _, u in want_use}
    assert t["gpu_hours"] == pytest.approx(3 * 1 + 4 * 2 + 1.5 * 1 + 2 * 2)   # the plan, as a check of the check

    # (4) the breakdown equals sreport's cluster utilization, per part and over the period
    sb = rep["sreport_breakdown"]
    assert [w["label"] for w in sb["windows"]][0] == "(period)" and len(sb["windows"]) == 3   # two ISO weeks
    for w in sb["windows"]:
        assert w["sreport"] is not None, w
        assert len(w["differences"]) == 12 and all(d["within"] for d in w["differences"]), (w["label"], [d for d in w["differences"] if not d["within"]])
    p = sb["windows"][0]["ours"]
    assert p["gres/gpu"]["allocated"] == pytest.approx(t["gpu_hours"])           # the store's own rows
    assert p["gres/gpu"]["down"] == pytest.approx(1.5 * 4) and p["cpu"]["planned"] > 0
    assert p["gres/gpu"]["reported"] == pytest.approx(3 * 24 * 16)
    # the week's end splits job 2: 1.5 h on Sunday, 2.5 h on Monday (2 GPUs)
    assert [w["ours"]["gres/gpu"]["allocated"] for w in sb["windows"][1:]] == pytest.approx([3 + 1.5 + 1.5 * 2, 2.5 * 2 + 2 * 2])
    # ... and the account tree sreport's AccountUtilizationByUser
    for w in rep["accounts"]["windows"]:
        assert w["differences"] and all(d["within"] for d in w["differences"]), \
            (w["label"], [d for d in w["differences"] if not d["within"]])
    rows = {(r["account"], r["user"]): r for r in rep["accounts"]["windows"][0]["rows"]}
    assert rows[(ACCOUNT, "root")]["gpu_hours"] == pytest.approx(by_acc[ACCOUNT][0])
    assert "## Denominators: sreport's breakdown" in (out / "period.md").read_text()

    # the day sums the ingest keeps (report weekly's CLI makes them after its pulls): the same
    # figures from them
    from slurmkit.report.day_sums import summarize

    assert summarize(store, "")["summed"] == 3
    res = CliRunner().invoke(cli, ["report", "period", "--start", f"{start:%Y-%m-%d}", "--end", f"{end:%Y-%m-%d}",
                                   "--by", "week", "--store", str(store), "-o", str(tmp_path / "summed"),
                                   "--format", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    again = json.loads((tmp_path / "summed" / "period.json").read_text())
    assert again["store"]["clusters"]["_default"]["days_from_sums"] == 3
    # (the first run read the node list live: its utilization has a capacity, this one's none)
    for key in ("totals", "by_account", "by_user", "by_partition", "outcomes", "queue_wait", "breakdown"):
        assert _close(_no_util(again[key]), _no_util(rep[key])), key

    # no record of the jobs reached slurmdbd after the backdating (it would be a second row)
    assert _sql(slurm_env, f"SELECT count(*) FROM sandbox_job_table WHERE id_job IN ({', '.join(jobs)})").strip() \
        == str(len(jobs))

    # (5) report jobs over the days: each job with sacct's State and ElapsedRaw
    res = CliRunner().invoke(cli, ["report", "jobs", "--start", f"{start:%Y-%m-%d}", "--end", f"{end:%Y-%m-%d}",
                                   "--format", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    got = {r["key_id"]: r for r in json.loads(res.output[res.output.index("{"):])["jobs"]}
    assert set(got) == set(jobs)
    for j in jobs:
        assert (got[j]["state"], got[j]["elapsed_s"]) == (want_jobs[j][2], float(want_jobs[j][3]))

    _quarter_equals_weekly(run, tmp_path, start, jobs, t["gpu_hours"])


def _no_util(x):
    """``x`` (a section, or a list of parts) without each section's ``utilization``."""
    if isinstance(x, list):
        return [_no_util(v) for v in x]
    return {k: v for k, v in x.items() if k != "utilization"} if isinstance(x, dict) else x


#: The energy and cost assumptions of both reports (every GPU modelled at 300 W: the sandbox has
#: no energy plugin, so its Slurm energy is 0, no figure).
SITE_OPTIONS = ["--gpu-tdp-w", "300", "--pue", "1.2", "--carbon-g-per-kwh", "300", "--price-per-kwh", "0.25",
                "--price-per-gpu-hour", "1.5", "--currency", "EUR"]


def _quarter_equals_weekly(run, tmp_path, start: dt.datetime, jobs: list[str], gpu_hours: float) -> None:
    """(6): ``report weekly --start/--end`` over the quarter holding ``start`` (live: its days
    pulled into a store, the capacity and node events read from scontrol and sacctmgr), then
    ``report period --quarter`` from that store with ``--live-breakdown --sreport``: the same
    energy, coverage, CO2e, cost and utilization, and a breakdown equal to sreport's."""
    from slurmkit.cli import cli
    from slurmkit.report.live import run_rollup

    q = (start.month - 1) // 3
    qs = dt.datetime(start.year, 3 * q + 1, 1, tzinfo=dt.timezone.utc)
    qe = dt.datetime(qs.year + (q == 3), 1 if q == 3 else 3 * q + 4, 1, tzinfo=dt.timezone.utc)
    # one time for both (a quarter reaching today: capacity up to then); the pulls come after it
    now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0) - dt.timedelta(minutes=1)
    at = f"{now:%Y-%m-%dT%H:%M:%SZ}"
    # sreport covers the quarter's whole hours up to now once they are rolled up
    run_rollup(qs, min(qe, now.replace(minute=0, second=0)), timeout=300)
    store = tmp_path / "quarter-store"
    nospool = str(tmp_path / "nospool.jsonl")
    res = CliRunner().invoke(cli, ["report", "weekly", "--start", f"{qs:%Y-%m-%d}", "--end", f"{qe:%Y-%m-%d}",
                                   "--store", str(store), "--now", at, "--spool", nospool, "--trend-weeks", "0",
                                   "-o", str(tmp_path / "quarter-weekly"), "--format", "json,md", *SITE_OPTIONS],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    weekly = json.loads((tmp_path / "quarter-weekly" / "weekly.json").read_text())
    label = f"{qs.year}-Q{q + 1}"
    out = tmp_path / "quarter-period"
    res = CliRunner().invoke(cli, ["report", "period", "--quarter", label, "--store", str(store), "--now", at,
                                   "--spool", nospool, "--live-breakdown", "--sreport", "-o", str(out),
                                   "--format", "json,csv,md,html", *SITE_OPTIONS], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rep = json.loads((out / "period.json").read_text())
    assert rep["period"]["label"] == label and rep["period"]["by"] == "month"
    t, w = rep["totals"], weekly["totals"]
    # (the workload, and what else this sandbox ran today, inside the quarter too)
    assert t["jobs"] >= len(jobs) and t["gpu_hours"] >= gpu_hours - 1e-6
    keys = ("jobs", "gpu_hours", "cpu_hours", "wasted_gpu_hours", "energy_kwh", "energy_kwh_by_source", "energy_known",
            "energy_jobs_by_source", "energy_coverage", "gpu_hours_without_energy", "facility_kwh", "co2e_kg",
            "cost_energy", "cost_gpu_hours", "cost_total", "currency")
    assert _close({k: t[k] for k in keys}, {k: w[k] for k in keys}), [(k, t[k], w[k]) for k in keys if not _close(t[k], w[k])]
    # energy with its coverage (Slurm's where the sandbox records some, else GPUs x hours x 300 W), CO2e, cost
    gh, e = t["gpu_hours"], t["energy_kwh"]
    assert t["energy_known"] and e == pytest.approx(sum(t["energy_kwh_by_source"].values())) and e > 0
    assert t["energy_coverage"]["gpu_hours_share"] == 1.0 and t["energy_coverage"]["jobs"] == t["jobs"]
    assert t["co2e_kg"] == pytest.approx(e * 1.2 * 0.3)
    assert t["cost_total"] == pytest.approx(e * 1.2 * 0.25 + gh * 1.5)
    u, wu = rep["utilization"], weekly["utilization"]
    ukeys = ("utilization", "capacity_gpus", "capacity_gpu_hours", "down_gpu_hours", "available_gpu_hours",
             "capacity_period", "capacity_source", "of_reported")
    assert _close({k: u[k] for k in ukeys}, {k: wu[k] for k in ukeys}), [(k, u[k], wu[k]) for k in ukeys]
    assert u["capacity_gpus"] == 16 and u["down_gpu_hours"] >= 1.5 * 4 and 0 < u["utilization"] < 1
    assert u["of_reported"]["utilization"] is not None and 0 < u["of_reported"]["utilization"] < 1
    # the breakdown equals sreport per month and over the quarter
    sb = rep["sreport_breakdown"]
    assert [x["label"] for x in sb["windows"]] == ["(period)"] + [p["label"] for p in rep["breakdown"]]
    for x in sb["windows"]:
        assert x["sreport"] is not None, x["label"]
        assert all(d["within"] for d in x["differences"]), (x["label"], [d for d in x["differences"] if not d["within"]])
    md = (out / "period.md").read_text()
    from slurmkit.report.render import energy_coverage_text

    assert f"Energy (IT) over the period: {energy_coverage_text(t)}" in md and "Utilization over the period: " in md
    assert "of sreport's Reported" in md
