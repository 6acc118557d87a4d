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


# --- downtime and drains ---------------------------------------------------------------------

PROFILE = ('[cluster]\nname = "t"\n[partitions.gpu]\nnodes = "n[1-3]"\nnode_type = "x"\n'
           '[node_types.x]\ngpu_model = "h100"\ngpu_count = 4\ngpu_tdp_w = 500\n')


def _iso(epoch):
    import datetime as dt

    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


def _events(tmp_path, header=True):
    """sacctmgr -P show event as it prints by default (local time; here UTC): n1 drained 2 h
    for a row remap, then down 1 h overlapping its last hour; n[2-3] down since day 6 with a
    reason holding the delimiter, still ongoing; a cluster event."""
    lines = (["Cluster|NodeName|TimeStart|TimeEnd|State|Reason|User"] if header else []) + [
        f"c1|n1|{_iso(T0)}|{_iso(T0 + 7200)}|DRAIN|slurmkit: row_remap_pending GPU1|root(0)",
        f"c1|n1|{_iso(T0 + 3600)}|{_iso(T0 + 3 * 3600)}|DOWN|Not responding|slurm(64030)",
        f"c1|n[2-3]|{_iso(T0 + 6 * 86400)}|Unknown|DOWN*|psu failed | replaced Monday|root(0)",
        f"c1||{_iso(T0)}|{_iso(T0 + 60)}||Cluster Registered TRES|"]
    p = tmp_path / "events.txt"
    p.write_text("\n".join(lines) + "\n")
    return p


def test_downtime_is_a_timeline_by_node_with_reasons_and_down_gpu_hours_by_reason(tmp_path):
    from slurmkit.profile import load_profile

    site = tmp_path / "site.toml"
    site.write_text(PROFILE)
    res = _run(tmp_path, [row(NodeList="n1")], events=_events(tmp_path), profile=load_profile(str(site)),
               formats=["json", "csv", "md"], as_of="2026-01-07T12:00:00Z")
    d = res.report["downtime"]
    assert d["source"] == str(tmp_path / "events.txt")
    ev = [(e["node"], e["state"], e["reason"], e["hours"], e["gpu_hours"], e["ongoing"]) for e in d["events"]]
    assert ev == [("n1", "DRAIN", "slurmkit: row_remap_pending GPU1", 2.0, 8.0, False),
                  ("n1", "DOWN", "Not responding", 2.0, 4.0, False),           # its first hour overlaps the drain
                  ("n2", "DOWN*", "psu failed | replaced Monday", 12.0, 48.0, True),
                  ("n3", "DOWN*", "psu failed | replaced Monday", 12.0, 48.0, True)]
    assert [(b["reason"], b["events"], b["nodes"], b["gpu_hours"]) for b in d["by_reason"]] == [
        ("psu failed | replaced Monday", 2, 2, 96.0), ("slurmkit: row_remap_pending GPU1", 1, 1, 8.0),
        ("Not responding", 1, 1, 4.0)]
    # overlapping events count once: the down GPU-hours are the union, and utilization uses them
    assert d["down_gpu_hours"] == pytest.approx(108.0) == res.report["utilization"]["down_gpu_hours"]
    assert res.report["utilization"]["available_gpu_hours"] == pytest.approx(12 * (6 * 24 + 12) - 108.0)
    out = tmp_path / "out"
    assert [r["reason"] for r in _csv(out / "down_by_reason.csv")][0] == "psu failed | replaced Monday"
    assert len(_csv(out / "downtime.csv")) == 4
    md = (out / "weekly.md").read_text()
    assert "3 node(s) down or drained for 27.0 node-hours, 108 GPU-hours" in md
    assert "| n2 | 2026-01-07T00:00:00Z | still down | DOWN* | psu failed \\| replaced Monday |" in md


def test_events_without_a_profile_give_node_hours_and_a_bad_events_file_is_a_one_line_error(tmp_path):
    from slurmkit.errors import InputError

    res = _run(tmp_path, [row()], events=_events(tmp_path, header=False), as_of="2026-01-07T12:00:00Z")
    d = res.report["downtime"]
    assert d["node_hours"] == pytest.approx(3 + 12 + 12) and d["down_gpu_hours"] is None
    assert d["by_reason"][0]["gpu_hours"] is None
    bad = tmp_path / "bad.txt"
    bad.write_text("n1|2026-01-01T00:00:00|DOWN\n")
    with pytest.raises(InputError) as exc:
        _run(tmp_path, [row()], events=bad, outdir=tmp_path / "o2")
    assert str(exc.value).startswith(f"{bad}:1: 3 columns: not sacctmgr -P show event output")
