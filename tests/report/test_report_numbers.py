"""The weekly report's headline numbers on the inputs real captures bring: local time zones,
running jobs as of the capture, overlapping captures, sacct's own headers, bad values, and
never losing last week's report. Tiny inputs written here."""

from __future__ import annotations

import datetime as dt
import json

import pandas as pd
import pytest
from click.testing import CliRunner

from slurmkit.cli import cli
from slurmkit.errors import UsageError
from slurmkit.report import weekly_report
from slurmkit.report.window import Window

from sacct_rows import FIELDS, T0, WEEK, row, text


@pytest.fixture(autouse=True)
def _no_site_from_the_shell(monkeypatch):
    monkeypatch.delenv("SLURMKIT_SITE", raising=False)


def _iso(epoch: int, tz: str) -> str:
    """Epoch seconds as sacct prints them with TZ=tz (no zone)."""
    return pd.Timestamp(epoch, unit="s", tz="UTC").tz_convert(tz).strftime("%Y-%m-%dT%H:%M:%S")


def _spool(tmp_path):
    """An empty spool folder (no energy records, no warning)."""
    d = tmp_path / "spool"
    d.mkdir(exist_ok=True)
    return d


def _run(tmp_path, rows, name="c.psv", **kw):
    p = tmp_path / name
    p.write_bytes(rows if isinstance(rows, bytes) else text(rows))
    kw.setdefault("window", WEEK)
    kw.setdefault("formats", ["json"])
    kw.setdefault("outdir", tmp_path / "out")
    kw.setdefault("spool", _spool(tmp_path))
    return weekly_report(captures=[p], **kw)


# --- time zones ----------------------------------------------------------------------------

@pytest.mark.parametrize("tz", ["Europe/Zurich", "America/New_York", "Asia/Kolkata"])
def test_local_times_give_the_same_jobs_as_utc(tmp_path, tz):
    def rows(zone):
        out = []
        for i, (sub, st, en) in enumerate([(T0, T0 + 600, T0 + 4200), (T0 + 86400, T0 + 90000, T0 + 97200)]):
            out.append(row(JobID=str(100 + i), Submit=_iso(sub, zone), Eligible=_iso(sub, zone),
                           Start=_iso(st, zone), End=_iso(en, zone), ElapsedRaw=str(en - st)))
        return out

    utc = _run(tmp_path, rows("UTC"), "utc.psv", outdir=tmp_path / "u").report
    local = _run(tmp_path, rows(tz), "local.psv", tz=tz, outdir=tmp_path / "l").report
    assert utc["totals"]["jobs"] == local["totals"]["jobs"] == 2
    assert local["totals"]["gpu_hours"] == pytest.approx(utc["totals"]["gpu_hours"]) == pytest.approx(2 * 1 + 2 * 2)
    assert local["queue_wait"]["all"] == utc["queue_wait"]["all"]
    assert local["data_quality"]["rows_skipped"] == 0


def test_times_in_a_dst_fold_and_gap_get_a_reading_and_a_data_quality_line(tmp_path):
    # Europe/Zurich: 2026-03-29 02:00-03:00 does not exist, 2026-10-25 02:00-03:00 happens twice
    window = Window(dt.datetime(2026, 3, 1, tzinfo=dt.timezone.utc), dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc))
    rows = [row(JobID="1", Submit="2026-03-29T01:50:00", Eligible="2026-03-29T01:50:00",
                Start="2026-03-29T02:30:00", End="2026-03-29T04:00:00", ElapsedRaw="3600"),
            row(JobID="2", Submit="2026-10-25T01:00:00", Eligible="2026-10-25T01:00:00",
                Start="2026-10-25T02:30:00", End="2026-10-25T03:30:00", ElapsedRaw="7200")]
    rep = _run(tmp_path, rows, tz="Europe/Zurich", window=window).report
    assert rep["totals"]["jobs"] == 2
    a = rep["data_quality"]["repaired_reasons"]
    assert a == {"local time in a DST gap (read as the first instant after the gap) (Europe/Zurich)": 1,
                 "local time in a DST fold (read as the first, summer-time occurrence) (Europe/Zurich)": 1}
    # the gap's 02:30 reads as 03:00 CEST = 01:00Z; job 2's fold 02:30 as 02:30 CEST = 00:30Z
    assert rep["queue_wait"]["all"]["n"] == 2
    from slurmkit.accounting.parse import parse_times
    counts = {"fold": 0, "gap": 0}
    t = parse_times(pd.Series(["2026-03-29T02:30:00", "2026-10-25T02:30:00", "2026-10-25T03:30:00"]),
                    "Europe/Zurich", counts)
    assert list(t.dt.strftime("%H:%M")) == ["01:00", "00:30", "02:30"] and counts == {"fold": 1, "gap": 1}


def test_a_job_across_the_autumn_fold_without_elapsed_runs_cputime_over_ncpus(tmp_path, corpus):
    """On a labelled edit of Habrok's real capture (no ElapsedRaw in it):
    job 5919551 (11:04 run, CPUTime 01:28:32 on 8 CPUs) with its Elapsed column taken out and its
    times moved to the night of 2023-10-29 in Europe/Amsterdam, where 02:00-03:00 happens twice:
    Start 02:51:41 (CEST, 00:51:41Z), End 02:02:45 (CET, the second 02:xx, 01:02:45Z). Read as
    the first occurrence, the End is before the Start; the run time comes from CPUTime / NCPUs
    (664 s), not 0 s."""
    src = corpus / "sacct" / "habrok_gpu_cluster_parsable2.psv"
    lines = src.read_text().splitlines()
    head = lines[0].split("|")
    el = head.index("Elapsed")
    mine = [ln.split("|") for ln in lines[1:] if ln.split("|")[0].split(".")[0] == "5919551"]
    job = dict(zip(head, mine[0]))
    assert (job["Elapsed"], job["CPUTime"], job["NCPUs"]) == ("00:11:04", "01:28:32", "8")
    moves = {job["Submit"]: "2023-10-28T19:53:43", job["Start"]: "2023-10-29T02:51:41",
             job["End"]: "2023-10-29T02:02:45"}
    out = ["|".join(n for i, n in enumerate(head) if i != el)]
    for r in mine:
        out.append("|".join(moves.get(v, v) for i, v in enumerate(r) if i != el))
    p = tmp_path / "habrok_5919551_dst_fold_no_elapsed.psv"
    p.write_text("\n".join(out) + "\n")
    window = Window(dt.datetime(2023, 10, 23, tzinfo=dt.timezone.utc), dt.datetime(2023, 10, 30, tzinfo=dt.timezone.utc))
    res = weekly_report(captures=[p], window=window, tz="Europe/Amsterdam", formats=["json", "csv"],
                        outdir=tmp_path / "out", spool=_spool(tmp_path), allow_rejected=True)
    rep = res.report
    jobs = pd.read_csv(tmp_path / "out" / "jobs.csv", dtype={"key_id": str}).set_index("key_id")
    assert jobs.loc["5919551", "run_s"] == 664.0 == 5312 / 8
    assert rep["totals"]["cpu_hours"] == pytest.approx(8 * 664 / 3600)
    assert pd.Timestamp(jobs.loc["5919551", "start"]) == pd.Timestamp("2023-10-29T00:51:41Z")
    assert pd.Timestamp(jobs.loc["5919551", "end"]) == pd.Timestamp("2023-10-29T01:02:45Z")
    reasons = rep["data_quality"]["repaired_reasons"]
    assert reasons["End before Start (End = Start + ElapsedRaw, Elapsed or CPUTime / NCPUS)"] == 1
    assert any(k.startswith("local time in a DST fold") for k in reasons)


def test_unknown_zone_is_a_one_line_error(tmp_path):
    with pytest.raises(UsageError, match="unknown time zone 'Mars/Olympus'"):
        _run(tmp_path, [row()], tz="Mars/Olympus")
    p = tmp_path / "c.psv"
    res = CliRunner().invoke(cli, ["report", "weekly", "--from-sacct", str(p), "--tz", "Mars/Olympus",
                                   "-o", str(tmp_path / "o2")])
    assert res.exit_code == 2 and res.output.strip().count("\n") == 0
    assert "--tz" in res.output and "Mars/Olympus" in res.output


# --- running jobs as of the capture ----------------------------------------------------------

def test_running_job_counts_up_to_the_capture_time_not_today(tmp_path):
    # the capture's latest time: job 101 submitted at T0 + 3 h; job 100 running since T0 + 600 s
    rows = [row(State="RUNNING", End="Unknown", ElapsedRaw="0", TimelimitRaw="UNLIMITED"),
            row(JobID="101", Submit=str(T0 + 3 * 3600), Eligible=str(T0 + 3 * 3600), State="PENDING",
                Start="Unknown", End="Unknown", ElapsedRaw="0")]
    rep = _run(tmp_path, rows, formats=["json", "md"]).report
    t = rep["totals"]
    assert rep["as_of"] == "2026-01-01T03:00:00Z"
    assert t["gpu_hours"] == pytest.approx(2 * (3 * 3600 - 600) / 3600)
    assert t["provisional_jobs"] == 1 and t["provisional_gpu_hours"] == pytest.approx(t["gpu_hours"])
    assert rep["by_user"][0]["provisional_gpu_hours"] == pytest.approx(t["gpu_hours"])
    md = (tmp_path / "out" / "weekly.md").read_text()
    assert "still running as of 2026-01-01T03:00:00Z" in md and "| alice | 1 | 5.67* |" in md
    # --as-of names the capture time
    rep = _run(tmp_path, rows, as_of="2026-01-01T10:00:00Z", outdir=tmp_path / "o2").report
    assert rep["totals"]["gpu_hours"] == pytest.approx(2 * (10 * 3600 - 600) / 3600)
    res = CliRunner().invoke(cli, ["report", "weekly", "--from-sacct", str(tmp_path / "c.psv"), "--week", "2026-W01",
                                   "--as-of", "2026-01-01T02:00", "--format", "json", "-o", str(tmp_path / "o3"),
                                   "--spool", str(_spool(tmp_path))])
    assert res.exit_code == 0, res.output
    rep = json.loads((tmp_path / "o3" / "weekly.json").read_text())
    assert rep["totals"]["gpu_hours"] == pytest.approx(2 * (2 * 3600 - 600) / 3600)


def test_default_as_of_includes_a_running_jobs_start_plus_elapsed(tmp_path):
    # the latest Submit/Eligible/Start is T0 + 600 s; sacct printed 2 h elapsed for the running job
    rows = [row(State="RUNNING", End="Unknown", ElapsedRaw="7200", TimelimitRaw="UNLIMITED")]
    rep = _run(tmp_path, rows).report
    assert rep["as_of"] == "2026-01-01T02:10:00Z"
    assert rep["totals"]["gpu_hours"] == pytest.approx(2 * 2.0)


# --- several captures --------------------------------------------------------------------------

def test_overlapping_daily_captures_count_each_job_once_and_list_conflicts(tmp_path):
    day1 = [row(), row(JobID="101", State="RUNNING", End="Unknown", ElapsedRaw="0"),
            row(JobID="102", State="PENDING", Start="Unknown", End="Unknown", ElapsedRaw="0"),
            row(JobID="103", State="COMPLETED")]
    day2 = [row(), row(JobID="101", End=str(T0 + 600 + 7200), ElapsedRaw="7200"),
            row(JobID="102", Start=str(T0 + 7200), End=str(T0 + 10800), ElapsedRaw="3600"),
            row(JobID="103", State="FAILED", ExitCode="1:0"),
            row(JobID="104", Submit=str(T0 + 86400), Start=str(T0 + 86400), End=str(T0 + 90000))]
    for name, rows in (("d1.psv", day1), ("d2.psv", day2)):
        (tmp_path / name).write_bytes(text(rows))
    res = weekly_report(captures=[tmp_path / "d2.psv", tmp_path / "d1.psv"], window=WEEK, formats=["json", "csv"],
                        outdir=tmp_path / "out", spool=tmp_path / "none")
    t = res.report["totals"]
    assert t["jobs"] == 5 and t["pending_jobs"] == 0 and t["provisional_jobs"] == 0
    # 100: 1 h, 101: 2 h (finished in day 2), 102: 1 h, 103: 1 h, 104: 1 h; 2 GPUs each
    assert t["gpu_hours"] == pytest.approx(2 * 6)
    dq = res.report["data_quality"]
    assert dq["rows_read"] == 9 and dq["rows_counted"] == 5
    assert dq["skipped_reasons"] == {"same row in another capture (the later capture's copy kept)": 3,
                                     "pending in an earlier capture, started in a later one": 1}
    conflict = [p for p in dq["problems"] if p["reason"].startswith("copies of a finished row differ")]
    assert len(conflict) == 1 and "JobID 103" in conflict[0]["detail"]
    assert "COMPLETED vs FAILED" in conflict[0]["detail"]
    assert {o["state"]: o["jobs"] for o in res.report["outcomes"]} == {"COMPLETED": 4, "FAILED": 1}
    assert "JobID 103" in (tmp_path / "out" / "data_quality.csv").read_text()


# --- never lose last week's report -------------------------------------------------------------

def _last_week(tmp_path):
    out = tmp_path / "out"
    _run(tmp_path, [row()], "last.psv", formats=["json", "md", "csv"], outdir=out)
    return out, {p.name: p.read_bytes() for p in out.iterdir()}


@pytest.mark.parametrize("data", [b"", text([]), b"# sacct ran out of disk\n",
                                  text([row(JobID="x!"), row(JobID="y?")])],
                         ids=["empty", "header-only", "comment-only", "all-rejected"])
def test_empty_or_wholly_rejected_input_exits_non_zero_and_leaves_the_output_as_it_was(tmp_path, data):
    out, before = _last_week(tmp_path)
    bad = tmp_path / "bad.psv"
    bad.write_bytes(data)
    res = CliRunner().invoke(cli, ["report", "weekly", "--from-sacct", str(bad), "--sacct-fields", ",".join(FIELDS),
                                   "--week", "2026-W01", "-o", str(out), "--spool", str(_spool(tmp_path))])
    assert res.exit_code == 2, res.output
    assert res.output.startswith("slurmkit: error: ") and res.output.count("\n") == 1
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_failure_while_writing_leaves_the_output_as_it_was(tmp_path, monkeypatch):
    from slurmkit.report import render

    out, before = _last_week(tmp_path)

    def broken(report, limit=25):
        raise RuntimeError("disk full")

    monkeypatch.setattr(render, "to_markdown", broken)
    with pytest.raises(RuntimeError):
        _run(tmp_path, [row(), row(JobID="101")], formats=["json", "md", "csv"], outdir=out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_skipped_rows_over_the_limit_get_a_banner_and_a_non_zero_exit(tmp_path):
    rows = [row(JobID=str(100 + i)) for i in range(60)] + [row(JobID="bad!")]   # 1 of 61: 1.6 %
    p = tmp_path / "c.psv"
    p.write_bytes(text(rows))
    args = ["report", "weekly", "--from-sacct", str(p), "--week", "2026-W01", "--format", "html,md,csv,json",
            "--spool", str(_spool(tmp_path))]
    res = CliRunner().invoke(cli, args + ["-o", str(tmp_path / "o1")])
    assert res.exit_code == 1
    said = "1 of 61 input rows were skipped for a problem (1.64 % of the 61 rows the window had to count)"
    assert f"{said}, over the 1 % allowed" in res.output and "--allow-skipped" in res.output
    md = (tmp_path / "o1" / "weekly.md").read_text()
    assert md.splitlines()[2].startswith(f"> **Warning:** {said}, over the 1.00 % allowed")
    html = (tmp_path / "o1" / "weekly.html").read_text()
    assert html.index('class="banner"') < html.index("<h2>Totals</h2>")
    assert "bad!" in (tmp_path / "o1" / "data_quality.csv").read_text()
    res = CliRunner().invoke(cli, args + ["-o", str(tmp_path / "o2"), "--allow-skipped"])
    assert res.exit_code == 0, res.output
    assert f"warning: {said}" in res.output
    res = CliRunner().invoke(cli, args + ["-o", str(tmp_path / "o3"), "--max-skipped", "2"])
    assert res.exit_code == 0, res.output
    assert "Warning" not in (tmp_path / "o3" / "weekly.md").read_text()


def test_every_skipped_row_is_listed_in_data_quality_csv(tmp_path):
    rows = [row(JobID=f"bad{i}!") for i in range(300)] + [row()]
    res = _run(tmp_path, rows, formats=["csv"], allow_rejected=True)
    dq = pd.read_csv(tmp_path / "out" / "data_quality.csv")
    assert (dq["reason"] == "bad JobID").sum() == 300 == res.report["data_quality"]["skipped_reasons"]["bad JobID"]


# --- headers as sacct prints them ------------------------------------------------------------------

#: ``sacct -l -P``'s header (Slurm 22.05), then fields slurmkit reads that -l lacks
LONG = ("JobID|JobIDRaw|JobName|Partition|MaxVMSize|MaxVMSizeNode|MaxVMSizeTask|AveVMSize|MaxRSS|MaxRSSNode|"
        "MaxRSSTask|AveRSS|MaxPages|MaxPagesNode|MaxPagesTask|AvePages|MinCPU|MinCPUNode|MinCPUTask|AveCPU|"
        "NTasks|AllocCPUS|Elapsed|State|ExitCode|AveCPUFreq|ReqCPUFreqMin|ReqCPUFreqMax|ReqCPUFreqGov|ReqMem|"
        "ConsumedEnergy|MaxDiskRead|MaxDiskReadNode|MaxDiskReadTask|AveDiskRead|MaxDiskWrite|MaxDiskWriteNode|"
        "MaxDiskWriteTask|AveDiskWrite|ReqTRES|AllocTRES|TRESUsageInAve|TRESUsageInMax|TRESUsageInMaxNode|"
        "TRESUsageInMaxTask|TRESUsageInMin|TRESUsageInMinNode|TRESUsageInMinTask|TRESUsageInTot|TRESUsageOutMax|"
        "TRESUsageOutMaxNode|TRESUsageOutMaxTask|TRESUsageOutAve|TRESUsageOutTot|Submit|Start|End|User|"
        "SomeFieldOfSlurm25").split("|")


def test_sacct_long_header_is_read_and_its_extra_fields_ignored(tmp_path):
    base = row()
    vals = {f: base.get(f, "") for f in LONG}
    vals.update(Elapsed="01:00:00", AllocCPUS="4", AveCPU="00:59:00", MinCPU="00:59:00", NTasks="1",
                SomeFieldOfSlurm25="x|y".replace("|", "/"))
    data = ("|".join(LONG) + "\n" + "|".join(vals[f] for f in LONG) + "\n").encode()
    rep = _run(tmp_path, data).report
    t = rep["totals"]
    assert (t["jobs"], t["gpu_hours"], t["cpu_hours"]) == (1, pytest.approx(2.0), pytest.approx(4.0))
    assert rep["data_quality"]["rows_skipped"] == 0


def test_a_field_listed_twice_is_read_once_and_differing_copies_noted(tmp_path):
    fields = list(FIELDS) + ["State", "User"]
    rows = [row(), row(JobID="101")]
    lines = ["|".join(fields)] + ["|".join([r[f] for f in FIELDS] + [r["State"], "alice" if r["JobID"] == "100" else "eve"])
                                  for r in rows]
    rep = _run(tmp_path, ("\n".join(lines) + "\n").encode()).report
    assert rep["totals"]["jobs"] == 2 and [u["user"] for u in rep["by_user"]] == ["alice"]
    assert rep["data_quality"]["repaired_reasons"] == {"field User listed twice, copies differ (the first read)": 1}


# --- bad values ------------------------------------------------------------------------------------

def _problems(rep, reason):
    return sorted((p["line"], p["detail"]) for p in rep["data_quality"]["problems"] if p["reason"] == reason)


def test_bad_values_are_repaired_with_a_line_naming_file_and_line(tmp_path):
    rows = [row(),                                                          # line 2: fine
            row(JobID="101", NCPUS="-4"),                                   # 3
            row(JobID="102", End=str(T0 + 300), ElapsedRaw="1800"),         # 4: End before Start
            row(JobID="103", Start="2026-13-45T99:00:00", End="Unknown", State="PENDING"),   # 5
            row(JobID="104", ElapsedRaw="1h"),                              # 6
            row(JobID="104.batch", ElapsedRaw="-5", User="")]               # 7
    rep = _run(tmp_path, rows, now=pd.Timestamp(T0 + 86400, unit="s", tz="UTC")).report
    dq = rep["data_quality"]
    assert dq["repaired_reasons"] == {"NCPUS negative (read as unknown)": 1,
                                      "End before Start (End = Start + ElapsedRaw, Elapsed or CPUTime / NCPUS)": 1,
                                      "Start is not a time (read as Unknown)": 1,
                                      "ElapsedRaw not a number (read as unknown)": 1,
                                      "ElapsedRaw negative (read as unknown)": 1}
    assert _problems(rep, "NCPUS negative (read as unknown)") == [(3, "JobID 101")]
    assert _problems(rep, "End before Start (End = Start + ElapsedRaw, Elapsed or CPUTime / NCPUS)") == [(4, "JobID 102")]
    assert _problems(rep, "Start is not a time (read as Unknown)") == [(5, "JobID 103")]
    assert _problems(rep, "ElapsedRaw negative (read as unknown)") == [(7, "JobID 104.batch")]
    assert all(p["source"] == str(tmp_path / "c.psv") for p in dq["problems"])
    t = rep["totals"]
    # 100: 2 GPU x 1 h; 101: 1 h (its CPUs unknown); 102: 30 min from its Start; 104: End - Start
    assert t["gpu_hours"] == pytest.approx(2 * (1 + 1 + 0.5 + 1))
    assert t["cpu_hours"] == pytest.approx(4 * (1 + 0.5 + 1))
    assert t["pending_jobs"] == 1


def test_a_negative_gpu_count_is_unknown_with_a_line_naming_file_and_line(tmp_path):
    rows = [row(),                                                                     # line 2
            row(JobID="101", AllocTRES="billing=4,cpu=4,gres/gpu=-1,mem=8G,node=1"),   # 3
            row(JobID="102", AllocTRES="cpu=4,gres/gpu:a100=-2,mem=8G,node=1")]        # 4
    rep = _run(tmp_path, rows).report
    reason = "AllocTRES GPU count negative (read as unknown)"
    assert rep["data_quality"]["repaired_reasons"] == {reason: 2}
    assert _problems(rep, reason) == [(3, "JobID 101"), (4, "JobID 102")]
    assert all(p["source"] == str(tmp_path / "c.psv") for p in rep["data_quality"]["problems"])
    assert rep["totals"]["gpu_hours"] == pytest.approx(2.0)


def test_short_rows_say_which_fields_they_lack_and_a_split_jobname_is_rejoined(tmp_path):
    fields = ["JobID", "JobName", "State", "Start", "End", "ElapsedRaw", "AllocTRES", "NCPUS"]
    lines = ["|".join(fields),
             f"200|train|COMPLETED|{T0}|{T0 + 3600}|3600|gres/gpu=1|2",
             f"201|two-line|COMPLETED|{T0}",                                           # short by 4
             "202|first part",                                                        # JobName with a newline
             f"second part|COMPLETED|{T0}|{T0 + 7200}|7200|gres/gpu=1|2"]
    rep = _run(tmp_path, ("\n".join(lines) + "\n").encode(), allow_rejected=True).report
    dq = rep["data_quality"]
    assert dq["skipped_reasons"] == {"too few fields (short by its last 4: End,ElapsedRaw,AllocTRES,...)": 1}
    assert _problems(rep, "too few fields (short by its last 4: End,ElapsedRaw,AllocTRES,...)")[0][0] == 3
    assert [p["line"] for p in dq["problems"] if p["reason"] == "newline inside JobName (two lines joined)"] == [4]
    assert dq["rows_read"] == 3 and rep["totals"]["jobs"] == 2 and rep["totals"]["gpu_hours"] == pytest.approx(3.0)
    res = _run(tmp_path, ("\n".join(lines) + "\n").encode(), formats=["csv"], outdir=tmp_path / "o2",
               allow_rejected=True)
    assert "first part\nsecond part" in set(res.allocations["job_name"])


def test_steps_without_their_allocation_row_show_the_gpu_hours_at_stake(tmp_path):
    rows = [row(),
            row(JobID="300.batch", User="", AllocTRES="cpu=4,gres/gpu=4,mem=8G", ElapsedRaw="7200"),
            row(JobID="300.0", User="", AllocTRES="cpu=4,gres/gpu=4,mem=8G", ElapsedRaw="3600")]
    rep = _run(tmp_path, rows, formats=["json", "md"], allow_rejected=True).report
    dq = rep["data_quality"]
    assert dq["gpu_hours_at_stake"] == pytest.approx(8.0)
    assert any("its job's 8 GPU-hours not counted" in p["detail"] for p in dq["problems"])
    assert "8.00 GPU-hours at stake" in (tmp_path / "out" / "weekly.md").read_text()


# --- GPU utilization within 0-100 % ----------------------------------------------------------------

def test_gpu_utilization_is_per_task_weighted_by_gpus_and_time_and_never_over_100(tmp_path):
    fields = ["JobID", "State", "Submit", "Start", "End", "ElapsedRaw", "AllocTRES", "NCPUS", "NTasks",
              "TRESUsageInTot"]

    def line(jid, elapsed, tres, tasks, usage):
        return "|".join([jid, "COMPLETED", str(T0), str(T0), str(T0 + 3600), str(elapsed), tres, "8", str(tasks), usage])

    four, none_ = "cpu=8,gres/gpu=4", "cpu=8"
    lines = ["|".join(fields),
             line("400", 3600, four, "", ""),
             line("400.batch", 3600, "cpu=1,gres/gpu=4", 1, "gres/gpuutil=10"),
             line("400.extern", 3600, four, 1, "gres/gpuutil=0"),
             # 4 tasks on 4 GPUs, each 80 %: TRESUsageInTot sums them to 320
             line("400.0", 1800, four, 4, "gres/gpuutil=320"),
             line("400.1", 1800, none_, 1, "gres/gpuutil=0"),           # a CPU-only step: not weighed
             line("401", 3600, "cpu=8,gres/gpu=1", "", ""),
             line("401.0", 3600, "cpu=8,gres/gpu=1", 1, "gres/gpuutil=250")]   # impossible: capped
    res = _run(tmp_path, ("\n".join(lines) + "\n").encode(), formats=["csv"])
    a = res.allocations.set_index("job_id")
    # 400: batch 10 % x 4 GPUs x 3600 s and step 0 80 % x 4 GPUs x 1800 s
    assert a.loc["400", "step_gpu_util_pct"] == pytest.approx((10 * 3600 + 80 * 1800) / (3600 + 1800))
    assert a.loc["401", "step_gpu_util_pct"] == 100.0
    assert (a["step_gpu_util_pct"] <= 100).all()
    dq = res.report["data_quality"]
    assert dq["repaired_reasons"] == {"GPU utilization over 100 % (capped at 100 %)": 1}
    assert [(p["line"], p["detail"]) for p in dq["problems"]] == [(8, "JobID 401.0: gres/gpuutil 250")]
    e = res.report["efficiency"]
    assert 0 <= e["gpu_util_pct_weighted"] <= 100


# --- what the readers ask for ------------------------------------------------------------------------

def test_most_gpus_at_once_is_the_instant_peak_not_a_peak_of_hourly_means(tmp_path):
    # two 4-GPU jobs of 30 min in the same hour, back to back, and one overlapping both halves
    rows = [row(JobID="1", AllocTRES="gres/gpu=4", Start=str(T0), End=str(T0 + 1800), ElapsedRaw="1800"),
            row(JobID="2", AllocTRES="gres/gpu=4", Start=str(T0 + 1800), End=str(T0 + 3600), ElapsedRaw="1800"),
            row(JobID="3", AllocTRES="gres/gpu=2", Start=str(T0 + 900), End=str(T0 + 2700), ElapsedRaw="1800")]
    rep = _run(tmp_path, rows, formats=["json", "md"]).report
    h = rep["hourly"]
    assert h["bucket"] == "hour" and h["peak"] == pytest.approx(5.0)   # (4 + 4 + 2) / 2 in hour 0
    assert h["peak_at_once"] == 6.0                                    # job 1 or 2 with job 3
    assert "most at once 6.00" in (tmp_path / "out" / "weekly.md").read_text()


def test_long_windows_get_daily_buckets(tmp_path):
    window = Window(dt.datetime(2025, 1, 1, tzinfo=dt.timezone.utc), dt.datetime(2026, 1, 8, tzinfo=dt.timezone.utc))
    rep = _run(tmp_path, [row()], window=window, formats=["json", "csv"]).report
    h = rep["hourly"]
    # the capture's latest time (the job's End, 2026-01-01 01:10) is when it was taken: the
    # curve stops there (after it nothing is known, not 0 GPUs): 366 days, the last one's mean
    # over its 70 minutes covered (2 GPUs x 60 min)
    assert rep["coverage"]["covered_until"] == "2026-01-01T01:10:00Z"
    assert h["bucket"] == "day" and len(h["hours"]) == 366
    assert h["hours"][-1] == "2026-01-01T00:00:00Z" and h["gpus_in_use"][-1] == pytest.approx(2 * 60 / 70, abs=1e-6)
    assert h["gpus_in_use"][-2] == 0.0
    assert len((tmp_path / "out" / "hourly.csv").read_text().splitlines()) == 367
    # with --as-of at the window's end the curve runs to it: the job's day is a 24-hour mean
    rep = _run(tmp_path, [row()], window=window, formats=["json"], as_of="2026-01-08T00:00:00Z",
               outdir=tmp_path / "asof").report
    h = rep["hourly"]
    assert len(h["hours"]) == 372 and h["hours"][-7] == "2026-01-01T00:00:00Z"
    assert h["gpus_in_use"][-7] == pytest.approx(2 / 24, abs=1e-6) and h["gpus_in_use"][-1] == 0.0


def test_queue_wait_says_submit_when_the_capture_has_no_eligible(tmp_path):
    fields = [f for f in FIELDS if f != "Eligible"]
    r = row(Submit=str(T0), Start=str(T0 + 120))
    data = ("|".join(fields) + "\n" + "|".join(r[f] for f in fields) + "\n").encode()
    rep = _run(tmp_path, data, formats=["json", "md"]).report
    assert rep["queue_wait"]["from"] == "Submit" and rep["queue_wait"]["all"]["p50_s"] == 120
    assert "## Queue wait (Start − Submit)" in (tmp_path / "out" / "weekly.md").read_text()
    rep = _run(tmp_path, [row()], formats=["json"], outdir=tmp_path / "o2").report
    assert rep["queue_wait"]["from"] == "Eligible"


def test_efficiency_by_user_worst_first_and_idle_jobs_listed(tmp_path):
    rows = [row(JobID="1", User="alice", AllocTRES="cpu=4,gres/gpu=2"),
            row(JobID="1.0", User="", AllocTRES="cpu=4,gres/gpu=2", TRESUsageInAve="gres/gpuutil=90"),
            row(JobID="2", User="bob", AllocTRES="cpu=4,gres/gpu=4", TotalCPU="00:10:00"),
            row(JobID="2.0", User="", AllocTRES="cpu=4,gres/gpu=4", TRESUsageInAve="gres/gpuutil=0"),
            row(JobID="3", User="carol", AllocTRES="cpu=4,gres/gpu=1"),
            row(JobID="3.0", User="", AllocTRES="cpu=4,gres/gpu=1", TRESUsageInAve="gres/gpuutil=3")]
    rep = _run(tmp_path, rows, formats=["json", "csv", "md"]).report
    e = rep["efficiency"]
    assert [u["user"] for u in e["by_user"]] == ["bob", "carol", "alice"]
    assert e["by_user"][0]["gpu_hours_near_zero_util"] == pytest.approx(4.0)
    assert e["by_user"][2]["gpu_util_pct"] == pytest.approx(90.0)
    assert [(j["job_id"], j["user"], j["gpus"], j["gpu_hours"]) for j in e["idle_jobs"]] == [
        ("2", "bob", 4.0, pytest.approx(4.0)), ("3", "carol", 1.0, pytest.approx(1.0))]
    assert e["cpu_hours_share"] == pytest.approx(1.0)
    idle = pd.read_csv(tmp_path / "out" / "idle_jobs.csv")
    assert list(idle["job_id"]) == [2, 3]
    assert "### Jobs that held GPUs idle" in (tmp_path / "out" / "weekly.md").read_text()


def test_energy_no_source_knows_is_blank_per_job_and_user_and_the_md_has_the_provenance(tmp_path):
    rows = [row(ConsumedEnergyRaw="3600000"),                       # alice: 1 kWh from Slurm
            row(JobID="101", User="bob")]                           # bob: no source, 2 GPU-h
    rep = _run(tmp_path, rows, formats=["md", "html", "csv"]).report
    t = rep["totals"]
    assert t["energy_kwh"] == pytest.approx(1.0) and t["gpu_hours_without_energy"] == pytest.approx(2.0)
    assert {u["user"]: u["energy_kwh"] for u in rep["by_user"]} == {"alice": pytest.approx(1.0), "bob": None}
    out = tmp_path / "out"
    jobs = pd.read_csv(out / "jobs.csv", dtype={"job_id": str})
    kwh = dict(zip(jobs["job_id"], jobs["energy_kwh"]))
    assert kwh["100"] == pytest.approx(1.0) and pd.isna(kwh["101"])
    assert pd.isna(pd.read_csv(out / "by_user.csv").set_index("user").loc["bob", "energy_kwh"])
    md = (out / "weekly.md").read_text()
    assert "## Energy and its provenance" in md and "| source | kWh | jobs |" in md
    assert "| slurm | 1.00 | 1 |" in md and "| none | – | 1 |" in md
    assert "2.00 of the 4.00 GPU-hours have no energy figure" in md
    assert "2.00 of the 4.00 GPU-hours have no energy figure" in (out / "weekly.html").read_text()
    md2 = (_run(tmp_path, [row()], formats=["md"], outdir=tmp_path / "o2", gpu_tdp_w=500.0), tmp_path / "o2" / "weekly.md")[1]
    assert "Energy: 100 % modelled from TDP" in md2.read_text()
    assert "have no energy figure" not in md2.read_text()


def test_energy_totals_name_prometheus_and_modelled_and_unknown_energy_draws_no_chart(tmp_path):
    _run(tmp_path, [row()], formats=["md", "html"], gpu_tdp_w=500.0)
    md = (tmp_path / "out" / "weekly.md").read_text()
    # the energy with its coverage, beside it only the sources that hold some (no 0 kWh column per source)
    assert "| energy | energy by source |" in md and "| 1.00 kWh | modelled 1.00 kWh |" in md
    assert "Energy: 1.00 kWh from all 1 job." in md and "| measured (spool) |" not in md
    html = (tmp_path / "out" / "weekly.html").read_text()
    assert "100 % modelled from TDP" in html and "<td class=\"l\">prometheus</td>" in html
    _run(tmp_path, [row()], formats=["html"], outdir=tmp_path / "o2")
    html = (tmp_path / "o2" / "weekly.html").read_text()
    assert 'alt="Energy by source"' not in html and html.count("<img") == 3   # GPUs in use, users, queue wait


def test_html_shows_the_new_sections_in_chromium_and_each_image_decodes(tmp_path):
    import base64
    import io
    import re
    import shutil
    import subprocess

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        pytest.skip("Debian package chromium is not installed (.ci/apt-packages.txt lists it)")
    rows = [row(JobID="1", State="RUNNING", End="Unknown", ElapsedRaw="0"),
            row(JobID="1.0", User="", TRESUsageInAve="gres/gpuutil=0", End="Unknown"),
            row(JobID="2", Submit=str(T0 + 7200), Start=str(T0 + 7200), End=str(T0 + 10800)),
            row(JobID="bad!")]
    _run(tmp_path, rows, formats=["html"], gpu_tdp_w=400.0, allow_rejected=True)
    page = tmp_path / "out" / "weekly.html"
    html = page.read_text()
    from PIL import Image

    srcs = re.findall(r'<img[^>]*src="([^"]+)"', html)
    assert len(srcs) == 4
    for src in srcs:
        Image.open(io.BytesIO(base64.b64decode(src.split(",", 1)[1]))).load()
    proc = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                           "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    dom = proc.stdout
    assert "Warning: 1 of 4 input rows" in dom, proc.stderr[-2000:]
    for needle in ("Provisional: 1 job(s) still running as of 2026-01-01T03:00:00Z", "Most GPUs in use at once",
                   "Efficiency by user", "Jobs that held GPUs idle", "of the CPU-hours", "Queue wait (Start − Eligible)", "prometheus"):
        assert needle in dom, needle


# --- a delimiter inside a free-text field ------------------------------------------------------

def test_a_delimiter_in_submitline_of_an_o_all_capture_is_joined_or_the_row_skipped(tmp_path):
    from slurmkit.accounting.fields import SACCT_FIELDS

    fields = list(SACCT_FIELDS)   # sacct -o ALL: SubmitLine mid-row, WorkDir (empty here) last

    def line(**kw):
        r = row(**kw)
        return "|".join(r.get(f, "") for f in fields)

    lines = ["|".join(fields),
             line(JobID="101", SubmitLine="sbatch --wrap=python x.py | tee log", TotalCPU="02:00:00"),  # 2
             line(JobID="100", SubmitLine="sbatch a.sh", TotalCPU="02:00:00"),                          # 3
             line(JobID="102", SubmitLine="sbatch b.sh", TotalCPU="02:00:00")]                          # 4
    res = _run(tmp_path, ("\n".join(lines) + "\n").encode(), formats=["csv"])
    dq = res.report["data_quality"]
    assert dq["rows_skipped"] == 0 and res.report["totals"]["jobs"] == 3
    assert _problems(res.report, "delimiter inside SubmitLine (joined)")[0][0] == 2
    assert set(res.allocations["cpu_eff"].round(3)) == {0.5}   # 2 h CPU / (1 h x 4 CPUs)

    # two free-text fields side by side: the extra delimiter could be in either -> skipped
    f2 = ["JobID", "JobName", "Comment", "State", "Submit", "Start", "End", "ElapsedRaw", "AllocTRES", "NCPUS"]
    good = f"200|train|c|COMPLETED|{T0}|{T0}|{T0 + 3600}|3600|gres/gpu=1|2"
    lines = ["|".join(f2), good, f"201|a|b|c|COMPLETED|{T0}|{T0}|{T0 + 3600}|3600|gres/gpu=1|2",
             # the extra delimiter in no free-text field: the typed fields would be shifted
             f"202|train|c|COMPLETED|{T0}|{T0}|{T0 + 3600}|3600|gres/gpu=1|2|9"]
    rep = _run(tmp_path, ("\n".join(lines) + "\n").encode(), outdir=tmp_path / "o2", allow_rejected=True).report
    assert rep["totals"]["jobs"] == 1
    assert [p["line"] for p in rep["data_quality"]["problems"]
            if p["reason"].startswith("wrong number of fields")] == [3, 4]


def test_a_header_without_times_or_rows_all_without_times_are_refused_leaving_the_output(tmp_path):
    out, before = _last_week(tmp_path)
    no_times = [f for f in LONG if f not in ("Submit", "Start", "End")]   # what sacct -l -P prints
    base = row()
    bad = tmp_path / "l.psv"
    args = ["report", "weekly", "--from-sacct", str(bad), "--week", "2026-W01", "-o", str(out),
            "--spool", str(_spool(tmp_path)), "--format", "json,md,csv"]
    bad.write_bytes(("|".join(no_times) + "\n" + "\n".join("|".join(base.get(f, "") for f in no_times)
                                                            for _ in range(3)) + "\n").encode())
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2, res.output
    assert res.output.count("\n") == 1 and "no Submit,Start,End" in res.output and "-o" in res.output
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    # the fields are there but no row has a time: refused as well, the folder untouched
    bad.write_bytes(text([row(JobID=str(100 + i), Submit="Unknown", Eligible="Unknown", Start="Unknown",
                              End="Unknown") for i in range(3)]))
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2, res.output
    assert res.output.startswith("slurmkit: error: ") and res.output.count("\n") == 1
    assert "every one of the 3 rows was rejected: no Submit/Start/End time (3)" in res.output
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
