"""What the weekly report's readers ask for beyond the totals: queue wait as a distribution with
the pending backlog, downtime and drains by node with their reasons, per-account and
per-partition trends over the last weeks. Tiny inputs written here."""

from __future__ import annotations

import csv

import pytest

from slurmkit.report import weekly_report

from sacct_rows import T0, WEEK, row, text


@pytest.fixture(autouse=True)
def _no_site_from_the_shell(monkeypatch):
    monkeypatch.delenv("SLURMKIT_SITE", raising=False)


def _run(tmp_path, rows, name="c.psv", **kw):
    p = tmp_path / name
    p.write_bytes(rows if isinstance(rows, bytes) else text(rows))
    spool = tmp_path / "spool"
    spool.mkdir(exist_ok=True)
    kw.setdefault("window", WEEK)
    kw.setdefault("formats", ["json"])
    kw.setdefault("outdir", tmp_path / "out")
    kw.setdefault("spool", spool)
    return weekly_report(captures=kw.pop("captures", [p]), **kw)


def _csv(path):
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _waits_and_backlog():
    rows = []
    for i, wait in enumerate([30, 120, 600, 7200]):       # gpu partition, 1 GPU
        rows.append(row(JobID=str(10 + i), AllocTRES="cpu=4,gres/gpu=1", Submit=str(T0), Eligible=str(T0),
                        Start=str(T0 + wait), End=str(T0 + wait + 600), ElapsedRaw="600"))
    rows.append(row(JobID="20", Partition="cpu", AllocTRES="cpu=4", Submit=str(T0), Eligible=str(T0),
                    Start=str(T0 + 10), End=str(T0 + 610), ElapsedRaw="600"))
    pending = dict(State="PENDING", Start="Unknown", End="Unknown", ElapsedRaw="0", AllocTRES="", NodeList="None assigned",
                   Submit=str(T0 + 3600), Eligible=str(T0 + 3600))
    rows.append(row(JobID="30", ReqTRES="billing=8,cpu=8,gres/gpu=4,mem=32G,node=1", TimelimitRaw="120", **pending))
    rows.append(row(JobID="31_[1-3]", JobIDRaw="31", ReqTRES="cpu=4,gres/gpu=2,node=1", TimelimitRaw="60", **pending))
    rows.append(row(JobID="32", ReqTRES="cpu=4,gres/gpu=1,node=1", TimelimitRaw="UNLIMITED", **pending))
    rows.append(row(JobID="33", ReqTRES="cpu=4,node=1", TimelimitRaw="600", **pending))       # CPU only
    return rows


def test_queue_wait_is_a_distribution_per_partition_and_gpus_with_the_pending_backlog(tmp_path):
    res = _run(tmp_path, _waits_and_backlog(), formats=["json", "csv", "md"])
    rep = res.report
    qw = rep["queue_wait"]
    groups = {(q["partition"], q["gpu_bucket"]): q for q in qw["by_partition_gpus"]}
    gpu1 = groups[("gpu", "1")]
    assert gpu1["n"] == 4 and gpu1["max_s"] == 7200 and gpu1["p50_s"] == pytest.approx(360.0)
    assert gpu1["p25_s"] == pytest.approx(97.5) and gpu1["p75_s"] == pytest.approx(2250.0)
    assert qw["bins"][:5] == ["<1 min", "1-5 min", "5-15 min", "15 min-1 h", "1-4 h"]
    assert gpu1["histogram"][:5] == [1, 1, 1, 0, 1] and sum(gpu1["histogram"]) == 4
    assert groups[("cpu", "0")]["histogram"][0] == 1 and sum(qw["histogram"]) == 5
    # backlog: 30 asks 4 GPUs x 2 h, 31's 3 pending tasks 2 GPUs x 1 h each, 32 1 GPU unlimited, 33 no GPU
    t = rep["totals"]
    assert (t["pending_jobs"], t["pending_array_tasks"]) == (3, 3)
    assert t["pending_gpus_requested"] == pytest.approx(4 + 6 + 1)
    assert t["pending_gpu_hours_requested"] == pytest.approx(8 + 6)
    assert t["pending_without_time_limit"] == 1
    assert qw["backlog"] == {"jobs": 6, "gpu_jobs": 5, "gpus_requested": 11.0, "gpu_hours_requested": 14.0,
                             "without_time_limit": 1}
    out = tmp_path / "out"
    hist = {(h["partition"], h["gpu_bucket"]): h for h in _csv(out / "queue_wait_hist.csv")}
    assert hist[("gpu", "1")]["1-4 h"] == "1" and hist[("(all)", "(all)")]["<1 min"] == "2"
    qrow = [q for q in _csv(out / "queue_wait.csv") if q["partition"] == "gpu"][0]
    assert qrow["p75_s"] == "2250.0" and "histogram" not in qrow
    assert _csv(out / "backlog.csv")[0]["gpu_hours_requested"] == "14.0"
    md = (out / "weekly.md").read_text()
    assert ("Pending backlog: 6 job(s) waiting (3 of them array tasks), requesting 11.0 GPUs and 14.0 GPU-hours "
            "(requested GPUs × time limit, at most); 1 GPU job(s) without a time limit not in the GPU-hours.") in md
    assert "| partition | GPUs | <1 min | 1-5 min |" in md


def test_no_job_started_draws_no_queue_wait_plot(tmp_path):
    pending = row(JobID="30", State="PENDING", Start="Unknown", End="Unknown", ElapsedRaw="0", AllocTRES="")
    res = _run(tmp_path, [pending], formats=["html", "json"])
    html = (tmp_path / "out" / "weekly.html").read_text()
    assert "Queue wait distribution" not in html and "Pending backlog: 1 job(s) waiting" in html
    assert res.report["totals"]["pending_gpu_hours_requested"] == pytest.approx(2 * 2.0)   # 2 GPUs x 120 min
