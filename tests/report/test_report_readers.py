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
        # (the queue-wait bucket is of the GPUs asked for: ReqTRES as AllocTRES here)
        rows.append(row(JobID=str(10 + i), AllocTRES="cpu=4,gres/gpu=1", ReqTRES="cpu=4,gres/gpu=1",
                        Submit=str(T0), Eligible=str(T0),
                        Start=str(T0 + wait), End=str(T0 + wait + 600), ElapsedRaw="600"))
    rows.append(row(JobID="20", Partition="cpu", AllocTRES="cpu=4", ReqTRES="cpu=4", Submit=str(T0), Eligible=str(T0),
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


# --- trends over the last weeks --------------------------------------------------------------

def _week_rows(week_start: int, gpus_a1: int, gpus_a2: int, running=False):
    """Two 1-hour jobs in the ISO week starting at ``week_start`` (epoch s): account a1 on
    partition gpu, account a2 on partition big (its job still running when ``running``)."""
    t = week_start + 86400
    a2 = dict(State="RUNNING", End="Unknown", ElapsedRaw="0") if running else dict(End=str(t + 3600), ElapsedRaw="3600")
    return [row(JobID=str(week_start // 1000), Account="a1", Partition="gpu", AllocTRES=f"cpu=4,gres/gpu={gpus_a1}",
                Submit=str(t), Eligible=str(t), Start=str(t), End=str(t + 3600)),
            row(JobID=str(week_start // 1000 + 1), Account="a2", Partition="big", AllocTRES=f"cpu=4,gres/gpu={gpus_a2}",
                Submit=str(t), Eligible=str(t), Start=str(t), **a2)]


def test_trends_over_the_last_weeks_come_from_the_weekly_aggregates_in_the_store(tmp_path):
    from slurmkit.accounting.store import Store
    from slurmkit.report.window import parse_week

    store = tmp_path / "store"
    w01 = int(parse_week("2026-W01").start.timestamp())
    wk = 7 * 86400
    for k, (g1, g2) in {0: (1, 2), 1: (2, 2), 3: (4, 1)}.items():       # W03 is never built
        res = _run(tmp_path, _week_rows(w01 + k * wk, g1, g2), name=f"w{k}.psv", window=parse_week(f"2026-W{k + 1:02d}"),
                   store_dir=store, trend_weeks=4, outdir=tmp_path / f"out{k}", formats=["json", "csv", "md", "html"],
                   as_of=pd_ts(w01 + (k + 1) * wk))   # captured after the week ended: not partial
    t = res.report["trends"]
    assert t["weeks"] == ["2026-W01", "2026-W02", "2026-W03", "2026-W04"]
    assert t["weeks_known"] == ["2026-W01", "2026-W02", "2026-W04"] and t["provisional_weeks"] == []
    acc = {r["account"]: r["gpu_hours"] for r in t["by_account"]}
    assert acc == {"a1": [1.0, 2.0, None, 4.0], "a2": [2.0, 2.0, None, 1.0]}
    part = {r["partition"]: (r["jobs"], r["total_gpu_hours"]) for r in t["by_partition"]}
    assert part == {"gpu": ([1, 1, None, 1], 7.0), "big": ([1, 1, None, 1], 5.0)}
    # one small table per week, nothing else: the trends read these, not the rows
    weeks_dir = store / "cluster=_default" / "_weeks"
    assert sorted(p.name for p in weeks_dir.iterdir()) == ["2026-W01.parquet", "2026-W02.parquet", "2026-W04.parquet"]
    assert len(Store(store).load_weeks(["2026-W02"])) == 5          # the week + 2 accounts + 2 partitions
    out = tmp_path / "out3"
    rows = [r for r in _csv(out / "trends.csv") if r["kind"] == "account" and r["name"] == "a1"]
    assert [(r["week"], r["gpu_hours"]) for r in rows] == [("2026-W01", "1.0"), ("2026-W02", "2.0"),
                                                            ("2026-W03", ""), ("2026-W04", "4.0")]
    md = (out / "weekly.md").read_text()
    assert "## Trends over the last 4 weeks" in md and "| a1 | 1.00 | 2.00 | – | 4.00 | 7.00 |" in md
    assert "1 week(s) not in the store (–; a stored week with no job reads 0)" in md
    # W02 built again from a capture taken while a job still ran: its table is replaced, marked provisional
    res = _run(tmp_path, _week_rows(w01 + wk, 3, 2, running=True), name="w1b.psv", window=parse_week("2026-W02"),
               store_dir=store, trend_weeks=2, outdir=tmp_path / "again", as_of=pd_ts(w01 + wk + 86400 + 3600))
    t = res.report["trends"]
    assert t["weeks"] == ["2026-W01", "2026-W02"] and t["provisional_weeks"] == ["2026-W02"]
    # taken as a1's job ended (an --as-of before it would rewind the capture: a1 running then)
    assert {r["account"]: r["gpu_hours"] for r in t["by_account"]} == {"a1": [1.0, 3.0], "a2": [2.0, 2.0]}


def pd_ts(epoch):
    import pandas as pd

    return pd.Timestamp(epoch, unit="s", tz="UTC")


def test_no_store_no_trends_and_a_window_that_is_not_an_iso_week_stores_nothing(tmp_path):
    res = _run(tmp_path, [row()])
    assert res.report["trends"] is None
    res = _run(tmp_path, [row()], store_dir=tmp_path / "store", outdir=tmp_path / "o2")   # Thursday to Thursday
    assert not (tmp_path / "store" / "cluster=_default" / "_weeks").exists()
    assert res.report["trends"]["weeks"][-1] == "2026-W02" and res.report["trends"]["weeks_known"] == []


# --- the HTML, as a browser shows it -------------------------------------------------------------

def test_html_shows_queue_wait_backlog_downtime_and_trends_in_chromium_and_each_image_decodes(tmp_path):
    import base64
    import io
    import re
    import shutil
    import subprocess

    from PIL import Image

    from slurmkit.profile import load_profile
    from slurmkit.report.window import parse_week

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        pytest.skip("Debian package chromium is not installed (.ci/apt-packages.txt lists it)")
    site = tmp_path / "site.toml"
    site.write_text(PROFILE)
    w01 = int(parse_week("2026-W01").start.timestamp())
    _run(tmp_path, _week_rows(w01, 1, 2), name="w0.psv", window=parse_week("2026-W01"), store_dir=tmp_path / "store",
         outdir=tmp_path / "o0")
    rows = _week_rows(w01 + 7 * 86400, 2, 2) + _waits_and_backlog()
    _run(tmp_path, rows, name="w1.psv", window=parse_week("2026-W02"), store_dir=tmp_path / "store",
         events=_events(tmp_path), profile=load_profile(str(site)), formats=["html"], as_of="2026-01-07T12:00:00Z")
    page = tmp_path / "out" / "weekly.html"
    html = page.read_text()
    alts = re.findall(r'<img alt="([^"]+)" src="data:image/png;base64,([^"]+)"', html)
    names = [a for a, _ in alts]
    for want in ("Queue wait distribution by partition and GPUs", "Downtime and drains by node",
                 "GPU-hours per week by partition and account"):
        assert want in names
    for _, b64 in alts:
        img = Image.open(io.BytesIO(base64.b64decode(b64)))
        img.load()
        assert img.size[0] > 300 and img.size[1] > 100
    proc = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                           "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    dom = proc.stdout
    assert "Downtime and drains" in dom, proc.stderr[-2000:]
    for needle in ("Pending GPU-hours requested", "Pending backlog: 6 job(s) waiting", "longest",
                   "Down GPU-hours by reason", "psu failed | replaced Monday", "still down", "Timeline by node",
                   "Trends over the last 8 weeks", "GPU-hours by account", "2026-W01"):
        assert needle in dom, needle


# --- a job name with a newline, as the last field -----------------------------------------------

def test_a_trailing_jobname_with_newlines_is_rejoined_and_lines_stay_the_real_lines(tmp_path):
    fields = ["JobID", "State", "Start", "End", "ElapsedRaw", "AllocTRES", "NCPUS", "JobName"]
    lines = ["|".join(fields),
             f"200|COMPLETED|{T0}|{T0 + 3600}|3600|gres/gpu=1|2|train",
             f"201|COMPLETED|{T0}|{T0 + 3600}|3600|gres/gpu=1|2|first part",        # line 3
             "second part",                                                          # its continuation
             f"202|COMPLETED|{T0}|{T0 + 7200}|7200|gres/gpu=2|2|three",              # line 5
             "line",
             "name",
             f"203|COMPLETED|{T0}|{T0 + 3600}|3600|gres/gpu=1|2|ok",
             "orphan text",                                                          # line 9: rest of 203's name
             f"204|COMPLETED|{T0}",                                                  # line 10: short by 5
             "not a continuation"]                                                   # after a skipped row
    res = _run(tmp_path, ("\n".join(lines) + "\n").encode(), formats=["json", "csv"], allow_rejected=True)
    names = dict(zip(res.allocations["job_id"], res.allocations["job_name"]))
    assert names == {"200": "train", "201": "first part\nsecond part", "202": "three\nline\nname",
                     "203": "ok\norphan text"}
    dq = res.report["data_quality"]
    joined = [p["line"] for p in dq["problems"] if p["reason"] == "newline inside JobName (two lines joined)"]
    assert joined == [3, 5, 8]
    short = [(p["line"], p["reason"]) for p in dq["problems"] if p["reason"].startswith("too few fields")]
    assert short == [(10, "too few fields (short by its last 5: End,ElapsedRaw,AllocTRES,...)"),
                     (11, "too few fields (continuation of a field with a newline?)")]
    # 6 rows (200-204 and the stray line), every one either counted or skipped
    assert dq["rows_read"] == 6 and dq["rows_counted"] == 4 and dq["rows_skipped"] == 2
    assert res.report["totals"]["gpu_hours"] == pytest.approx(1 + 1 + 4 + 1)


def test_a_slurm_message_after_a_row_is_not_taken_for_the_rest_of_its_job_name(tmp_path):
    fields = ["JobID", "State", "Start", "End", "ElapsedRaw", "AllocTRES", "NCPUS", "JobName"]
    lines = ["|".join(fields), f"200|COMPLETED|{T0}|{T0 + 3600}|3600|gres/gpu=1|2|train",
             "sacct: error: slurmdbd: Connection refused"]
    res = _run(tmp_path, ("\n".join(lines) + "\n").encode(), formats=["csv"], allow_rejected=True)
    assert list(res.allocations["job_name"]) == ["train"]
    assert [(p["line"], p["reason"]) for p in res.report["data_quality"]["problems"]] == [
        (3, "too few fields (continuation of a field with a newline?)")]
