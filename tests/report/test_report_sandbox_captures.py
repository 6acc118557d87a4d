"""The report on captures of the sandbox's real accounting: sacct
printed with ``TZ=`` another zone, without AllocTRES (and without any GPU field), without
``-D``. Jobs that never started (cancelled while held with ``--begin`` and with ``-H``) are
their own outcomes line and never enter the queue wait; the waits take each job once, in the
bucket of the GPUs it asked for."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess

import pytest
from click.testing import CliRunner
from slurmkit.waiting import wait_until

pytestmark = [pytest.mark.slurm, pytest.mark.versions]

ZONE = "America/Chicago"
NO_ALLOC = "JobID,JobIDRaw,State,User,Account,Partition,QOS,Submit,Eligible,Start,End,ElapsedRaw,NCPUS,ReqTRES,JobName"


def _sacct(fields, *extra, tz=ZONE):
    env = dict(os.environ, TZ=tz)
    since = (dt.datetime.now() - dt.timedelta(days=1)).strftime("%Y-%m-%d")
    # -E past the held job's Eligible (now + 1 h): sacct leaves out a job whose Eligible is
    # after the end of the window it is asked for
    return subprocess.run(["sacct", "-a", "-P", "-X", "-S", since, "-E", "now+1days", "-o", fields, *extra], env=env,
                          capture_output=True, text=True, timeout=60, check=True).stdout


def test_captures_of_real_accounting(slurm_env, tmp_path):
    from slurmkit.cli import cli
    from slurmkit.slurm.commands import run

    def sbatch(*args):
        return run(["sbatch", "--parsable", "-N1", "-o", "/dev/null", *args], timeout=60).stdout.strip().split(";")[0]

    ran = sbatch("--gres=gpu:2", "-c", "2", "--wrap", "sleep 4")
    later = sbatch("--gres=gpu:1", "--begin=now+3600", "--wrap", "sleep 1")     # held by --begin
    held = sbatch("--gres=gpu:1", "-H", "--wrap", "sleep 1")                     # held by the user
    wait_until(lambda: run(["squeue", "-h", "-j", f"{later},{held}", "-o", "%T"], timeout=30).stdout.split()
               == ["PENDING", "PENDING"], 60, 1.0, "the held jobs to be pending")
    run(["scancel", later, held], timeout=30)

    def done():
        out = _sacct("JobIDRaw,State", "-j", f"{ran},{later},{held}")
        st = dict(ln.split("|") for ln in out.splitlines()[1:] if ln.strip())
        return st if st.get(ran) == "COMPLETED" and st.get(later, "").startswith("CANCELLED") \
            and st.get(held, "").startswith("CANCELLED") else None

    wait_until(done, 180, 1.0, "the jobs to reach slurmdbd")
    cap = tmp_path / "no_alloctres_chicago.psv"
    # a job held with -H has no Eligible time: sacct's time window leaves it out, -j does not
    cap.write_text(_sacct(NO_ALLOC) + "".join(ln + "\n" for ln in _sacct(NO_ALLOC, "-j", held).splitlines()[1:]))
    bare = tmp_path / "no_gpu_field_chicago.psv"
    bare.write_text(_sacct(NO_ALLOC.replace(",ReqTRES", "")))
    today = dt.datetime.now(dt.timezone.utc).date()
    args = ["--start", (today - dt.timedelta(days=1)).isoformat(), "--end", (today + dt.timedelta(days=1)).isoformat(),
            "--format", "json,csv,md", "--trend-weeks", "0", "--allow-skipped"]

    def report(src, out, *more):
        res = CliRunner().invoke(cli, ["report", "weekly", "--from-sacct", str(src), "-o", str(out), *args, *more],
                                 catch_exceptions=False)
        assert res.exit_code == 0, res.output
        return json.loads((out / "weekly.json").read_text())

    import pandas as pd

    rep = report(cap, tmp_path / "a", "--tz", ZONE)
    jobs = pd.read_csv(tmp_path / "a" / "jobs.csv", dtype={"key_id": str}).set_index("key_id")
    # (an intermittent failure on loaded CI machines lost these rows: say what the capture and the
    # report's data quality held when it happens)
    assert {ran, later, held} <= set(jobs.index), (
        f"jobs {ran},{later},{held} vs jobs.csv {sorted(jobs.index)[-10:]}\ncapture:\n{cap.read_text()[-3000:]}\n"
        f"data quality: {json.dumps(rep.get('data_quality'))[:3000]}")
    # GPUs from ReqTRES (the capture has no AllocTRES), marked requested
    assert jobs.loc[ran, "gpus"] == 2 and jobs.loc[ran, "gpu_source"] == "ReqTRES (requested)"
    assert rep["totals"]["gpu_hours_from_request"] == rep["totals"]["gpu_hours"] > 0
    assert jobs.loc[ran, "gpu_hours"] == pytest.approx(2 * jobs.loc[ran, "run_s"] / 3600)
    assert 4 <= jobs.loc[ran, "run_s"] <= 60
    # the cancelled-while-held jobs did not start
    assert not jobs.loc[later, "started"] and not jobs.loc[held, "started"], cap.read_text()
    assert pd.isna(jobs.loc[later, "wait_s"]) and pd.isna(jobs.loc[held, "wait_s"])
    assert jobs.loc[ran, "started"] and jobs.loc[ran, "gpu_bucket"] == "2-4"
    never = [o for o in rep["outcomes"] if o["state"] == "cancelled before start"]
    assert never and never[0]["jobs"] >= 2 and never[0]["gpu_hours"] == 0.0
    ran_jobs = int((jobs["started"]).sum())
    assert rep["totals"]["jobs"] == ran_jobs
    assert rep["queue_wait"]["all"]["n"] == jobs["wait_s"].notna().sum() <= ran_jobs
    assert sum(o["jobs"] for o in rep["outcomes"] if o.get("ran", True)) == rep["totals"]["jobs"]
    # the times were read in the zone they were printed in: Start matches the UTC sacct
    utc_start = _sacct("JobIDRaw,Start", "-j", ran, tz="UTC").splitlines()[1].split("|")[1]
    assert pd.Timestamp(jobs.loc[ran, "start"]) == pd.Timestamp(utc_start, tz="UTC")

    # the inputs on record; the zone given
    inp = rep["inputs"]
    assert inp["time_zone"] == ZONE and inp["time_zone_given"] is True
    f0 = inp["files"][0]
    assert f0["fields"] == NO_ALLOC.split(",") and f0["header"] is True and f0["delimiter"] == "|"
    assert f0["duplicates"] is None   # captured without -D: cannot be told
    import hashlib
    assert f0["sha256"] == hashlib.sha256(cap.read_bytes()).hexdigest()
    assert "About this report" in (tmp_path / "a" / "weekly.md").read_text()
    # no --tz: read as UTC, said so (the times are 5-6 h off: the job's Start moves)
    res = CliRunner().invoke(cli, ["report", "weekly", "--from-sacct", str(cap), "-o", str(tmp_path / "c"), *args],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rep_c = json.loads((tmp_path / "c" / "weekly.json").read_text())
    assert rep_c["inputs"]["time_zone_given"] is False and "UTC assumed" in rep_c["inputs"]["time_zone_note"]
    assert "UTC assumed" in res.output and "ASSUMED" in (tmp_path / "c" / "weekly.md").read_text()
    # a window the capture does not cover: an error, the output folder left as it was
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "weekly.md").write_text("last week's")
    res = CliRunner().invoke(cli, ["report", "weekly", "--from-sacct", str(cap), "-o", str(tmp_path / "d"),
                                   "--week", "2020-W01", "--tz", ZONE], catch_exceptions=False)
    assert res.exit_code == 2 and "none of the" in res.output and "--allow-empty" in res.output
    assert [p.name for p in (tmp_path / "d").iterdir()] == ["weekly.md"]
    assert (tmp_path / "d" / "weekly.md").read_text() == "last week's"

    # no GPU field at all -> GPU-hours unknown, said so
    rep2 = report(bare, tmp_path / "b", "--tz", ZONE)
    assert rep2["totals"]["gpu_hours"] is None and "gpu_hours" in rep2["unknown"]
    assert "Unknown: GPU-hours" in (tmp_path / "b" / "weekly.md").read_text()


def _iso_week(d: dt.date) -> str:
    y, w, _ = d.isocalendar()
    return f"{y}-W{w:02d}"


def test_trends_tell_zero_from_missing_on_a_capture_of_real_accounting(slurm_env, tmp_path):
    """Trends on a capture of the sandbox's real accounting (printed with
    ``TZ=America/Chicago``, read with ``--tz``, from the Monday two weeks back): this week's
    report is provisional (the capture ends before the week does); last week, in which the
    fresh cluster ran nothing, is refused without ``--allow-empty`` (nothing stored) and stored
    with 0 jobs with it; the week before is not in the store (None, "–", "not in the store")."""
    from slurmkit.cli import cli
    from slurmkit.slurm.commands import run

    jid = run(["sbatch", "--parsable", "-N1", "-o", "/dev/null", "--gres=gpu:1", "--wrap", "sleep 2"],
              timeout=60).stdout.strip().split(";")[0]

    def done():
        out = _sacct("JobIDRaw,State", "-j", jid)
        return dict(ln.split("|") for ln in out.splitlines()[1:] if ln.strip()).get(jid) == "COMPLETED"

    wait_until(done, 180, 1.0, "the job to reach slurmdbd as COMPLETED")
    today = dt.datetime.now(dt.timezone.utc).date()
    this, last, before = (_iso_week(today - dt.timedelta(days=7 * k)) for k in (0, 1, 2))
    monday = today - dt.timedelta(days=today.weekday() + 14)
    fields = "JobID,JobIDRaw,State,User,Account,Partition,Submit,Eligible,Start,End,ElapsedRaw,NCPUS,AllocTRES,ReqTRES"
    env = dict(os.environ, TZ=ZONE)
    cap = tmp_path / "since_two_weeks_chicago.psv"
    cap.write_text(subprocess.run(["sacct", "-a", "-P", "-X", "-S", monday.isoformat(), "-E", "now", "-o", fields],
                                  env=env, capture_output=True, text=True, timeout=60, check=True).stdout)
    store = tmp_path / "store"

    def week(name, w, *more):
        res = CliRunner().invoke(cli, ["report", "weekly", "--from-sacct", str(cap), "--week", w, "--tz", ZONE,
                                       "-o", str(tmp_path / name), "--store", str(store), "--trend-weeks", "3",
                                       "--format", "json,md,html", *more], catch_exceptions=False)
        return res, (json.loads((tmp_path / name / "weekly.json").read_text()) if res.exit_code == 0 else None)

    def stored(w):
        return sorted(p.name for p in store.rglob(f"{w}.parquet"))

    res, now_rep = week("this", this)
    assert res.exit_code == 0, res.output
    t = now_rep["trends"]
    assert t["weeks"] == [before, last, this] and t["weeks_known"] == [this]
    assert t["provisional_weeks"] == [this]   # the capture ends before the week does
    account = next(r for r in now_rep["by_account"] if r["gpu_hours"])["account"]
    # last week: rows in the capture, none in the week: refused, nothing stored
    res, _ = week("last", last)
    assert res.exit_code == 2 and "none of the" in res.output and "--allow-empty" in res.output
    assert stored(last) == []
    # with --allow-empty: stored, 0 jobs, final (the capture was taken after the week ended)
    res, last_rep = week("last", last, "--allow-empty")
    assert res.exit_code == 0, res.output
    assert last_rep["totals"]["jobs"] == 0 and stored(last) == [f"{last}.parquet"]
    assert last_rep["trends"]["weeks_known"] == [last] and last_rep["trends"]["provisional_weeks"] == []
    # this week again: 0 for the stored empty week, None ("–", not in the store) for the one before
    res, rep = week("this2", this)
    assert res.exit_code == 0, res.output
    t = rep["trends"]
    assert t["weeks_known"] == [last, this] and t["provisional_weeks"] == [this]
    row = next(r for r in t["by_account"] if r["account"] == account)
    assert row["gpu_hours"][:2] == [None, 0.0] and row["gpu_hours"][2] > 0
    assert row["jobs"][:2] == [None, 0] and row["jobs"][2] >= 1
    md = (tmp_path / "this2" / "weekly.md").read_text()
    assert "1 week(s) not in the store (–; a stored week with no job reads 0)" in md
    assert f"provisional (jobs still running, or the capture ends before the week does; a later run replaces it): {this}" in md
    html = (tmp_path / "this2" / "weekly.html").read_text()
    assert "1 week(s) not in the store" in html and "<td>–</td>" in html
