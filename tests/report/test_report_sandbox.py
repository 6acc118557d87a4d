"""The weekly report against the real Slurm sandbox: jobs that really ran (GPU and CPU, one
failing, one requeued with ``scontrol requeue``), ingested from the live sacct (one call per
day, through the Parquet store), and reconciled with sreport after ``sacctmgr -i rollup``."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import time

import pandas as pd
import pytest
from click.testing import CliRunner

from slurmkit.waiting import wait_until

pytestmark = pytest.mark.slurm




def _sacct_attempts(run, jid):
    """(State, ElapsedRaw) of each allocation attempt of ``jid`` as sacct prints them."""
    out = run(["sacct", "-j", jid, "-D", "-X", "-n", "-P", "-o", "State,ElapsedRaw"], timeout=30).stdout
    return [tuple(ln.split("|")) for ln in out.splitlines() if ln.strip()]


def test_live_report_matches_the_jobs(slurm_env, tmp_path):
    from slurmkit.cli import cli
    from slurmkit.slurm.commands import run

    def sbatch(*args):
        return run(["sbatch", "--parsable", "-N1", "-o", "/dev/null", *args], timeout=60).stdout.strip().split(";")[0]

    t_begin = dt.datetime.now(dt.timezone.utc)
    gpu = sbatch("--gres=gpu:2", "-c", "2", "--wrap", "sleep 6")
    cpu = sbatch("-c", "1", "--wrap", "sleep 4")
    bad = sbatch("--gres=gpu:1", "--wrap", "sleep 2; exit 3")
    req = sbatch("--gres=gpu:1", "--wrap", "sleep 5")
    wait_until(lambda: run(["squeue", "-h", "-j", req, "-o", "%T"], timeout=30).stdout.strip() == "RUNNING", 60, 0.3, f"job {req} to run")
    time.sleep(2)  # the first attempt runs 2 s before its requeue (a duration in the scenario, not a wait)
    run(["scontrol", "requeue", req], timeout=30)
    expect_gpus = {gpu: 2, cpu: 0, bad: 1, req: 1}

    def finished():
        states = {j: _sacct_attempts(run, j) for j in expect_gpus}
        done = all(a and a[-1][0] in ("COMPLETED", "FAILED") for a in states.values())
        return states if done and len(states[req]) >= 2 else None

    attempts = wait_until(finished, 240, 2.0, "the jobs to finish and reach slurmdbd")
    assert attempts[bad][-1][0] == "FAILED"
    assert [a[0] for a in attempts[req]][:1] == ["REQUEUED"]

    out = tmp_path / "out"
    today = t_begin.date()
    res = CliRunner().invoke(cli, [
        "report", "weekly", "--start", today.isoformat(), "--end", (today + dt.timedelta(days=1)).isoformat(),
        "--store", str(tmp_path / "store"), "--site", str(slurm_env.profile_path),
        "--format", "json,parquet,html", "-o", str(out), "--json", "--no-sreport"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output)
    jobs = pd.read_parquet(out / "jobs.parquet")
    mine = jobs[jobs["key_id"].isin(list(expect_gpus))]

    # one allocation row per attempt, GPUs as requested, hours = GPUs x ElapsedRaw per attempt
    for jid, n in expect_gpus.items():
        rows = mine[mine["key_id"] == jid].sort_values("start")
        assert len(rows) == len(attempts[jid])
        assert list(rows["gpus"]) == [n] * len(rows)
        want = sum(n * float(e) / 3600 for _s, e in attempts[jid])
        assert rows["gpu_hours"].sum() == pytest.approx(want, abs=1e-9)
    assert mine.loc[mine["key_id"] == cpu, "cpu_hours"].sum() == pytest.approx(
        float(attempts[cpu][-1][1]) / 3600)
    assert 6 <= float(attempts[gpu][-1][1]) <= 30   # it slept 6 s
    # waste: the failed job and the requeued attempt
    waste = mine.loc[mine["wasted"], "gpu_hours"].sum()
    assert waste == pytest.approx(float(attempts[bad][-1][1]) / 3600 + float(attempts[req][0][1]) / 3600)
    assert set(mine.loc[mine["wasted"], "state"]) == {"FAILED", "REQUEUED"}
    # the requeued job is one job; totals include ours (other tests may share the sandbox)
    assert rep["totals"]["requeued_attempts"] >= 1
    assert rep["totals"]["jobs"] >= 4 and rep["totals"]["gpu_hours"] >= mine["gpu_hours"].sum() - 1e-9
    # modelled energy from the profile's TDP (700 W for the sandbox's h100)
    gpu_rows = mine[mine["gpus"] > 0]
    assert set(gpu_rows["energy_source"]) == {"modelled"}
    assert gpu_rows["energy_kwh"].sum() == pytest.approx(gpu_rows["gpu_hours"].sum() * 0.7)
    assert rep["utilization"]["capacity_gpus"] == 16
    dq = rep["data_quality"]
    assert dq["rows_read"] == dq["rows_counted"] + dq["rows_skipped"] and dq["rows_read"] >= 8
    assert (out / "weekly.html").stat().st_size > 10_000

    # a second run re-reads only days that are not final (today is never final yet)
    manifest = json.loads((tmp_path / "store" / "cluster=_default" / "_manifest.json").read_text())
    assert manifest[today.isoformat()]["final"] is False


def test_sreport_reconciliation_after_rollup(slurm_env, tmp_path):
    """Per-job GPU-hours vs sreport over the same whole hours, after a rollup. sreport never
    reports the current hour, so it runs under faketime (the recipe's pitfall)."""
    if not shutil.which("faketime"):
        pytest.skip("faketime (Debian package) is not installed")
    from slurmkit.report import live
    from slurmkit.report.energy import Assumptions
    from slurmkit.report.weekly import build_report
    from slurmkit.report.window import Window
    from slurmkit.slurm.commands import run

    jid = run(["sbatch", "--parsable", "-N1", "-o", "/dev/null", "--gres=gpu:3", "--wrap", "sleep 5"], timeout=60).stdout.strip()
    wait_until(lambda: (a := _sacct_attempts(run, jid)) and a[-1][0] == "COMPLETED", 120, 1.0, f"job {jid}")
    wait_until(lambda: run(["squeue", "-h"], timeout=30).stdout.strip() == "", 120, 2.0, "an idle queue")
    now = dt.datetime.now(dt.timezone.utc)
    start = now.replace(hour=0, minute=0, second=0, microsecond=0)
    end = now.replace(minute=0, second=0, microsecond=0) + dt.timedelta(hours=1)
    ahead = int((end - now).total_seconds()) + 120
    sre = live.sreport_gpu_hours(start, end, rollup=True, wrapper=("faketime", "-f", f"+{ahead}s"))
    days = Window(start, end).days()
    rows, dq, _ = live.ingest_window(days, None, None)
    rep, allocs = build_report(rows, dq, Window(start, end), Assumptions(), sreport_gpu_hours=sre)
    rc = rep["reconciliation"]
    assert sre > 0
    assert allocs.loc[allocs["key_id"] == jid, "gpu_hours"].sum() > 0
    assert rc["flagged"] is False, rc
    assert abs(rc["jobs_gpu_hours"] - sre) <= 0.01 * sre


def test_default_window_names_its_week_and_says_which_week_has_data(slurm_env, tmp_path, monkeypatch):
    """``report weekly`` with no window reports the last full ISO week into
    ``./slurmkit-report-<week>``; a week without a job says which ``--week`` holds the week under
    way (the sandbox's jobs run now)."""
    from slurmkit.cli import cli
    from slurmkit.report.pipeline import iso_week
    from slurmkit.report.window import last_full_week

    monkeypatch.chdir(tmp_path)
    week = iso_week(last_full_week().start)
    res = CliRunner().invoke(cli, ["report", "weekly", "--no-store", "--no-sreport", "--format", "json",
                                   "--site", str(slurm_env.profile_path)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rep = json.loads((tmp_path / f"slurmkit-report-{week}" / "weekly.json").read_text())
    assert [p.name for p in tmp_path.iterdir()] == [f"slurmkit-report-{week}"]    # nothing loose
    hint = (f"no job in {week}, the last full ISO week (the default window): for the week under way give "
            f"--week {iso_week(pd.Timestamp.now(tz='UTC'))}")
    assert (hint in res.output) == (rep["totals"]["jobs"] == 0), res.output
