"""Energy provenance, capacity / down time, sreport parsing, the window and the Parquet store."""

from __future__ import annotations

import datetime as dt
import json

import pandas as pd
import pytest

from slurmkit.accounting.frame import jobs_frame
from slurmkit.accounting.read import read_sacct_bytes
from slurmkit.accounting.store import Store
from slurmkit.report import capacity as C
from slurmkit.report import sreport as S
from slurmkit.report.energy import Assumptions, read_spool
from slurmkit.report.weekly import build_report
from slurmkit.report.window import WindowError, make_window, parse_when, parse_week

from sacct_rows import T0, WEEK, row, text

NOW = pd.Timestamp(T0 + 30 * 86400, unit="s", tz="UTC")


def _frame(rows):
    table, dq = read_sacct_bytes(text(rows), "t.psv")
    return jobs_frame(table, dq, "t.psv"), dq


def _spool(tmp_path, records, name="energy.jsonl"):
    d = tmp_path / "spool"
    d.mkdir(exist_ok=True)
    with open(d / name, "a") as fh:
        for r in records:
            fh.write(json.dumps(r) + "\n")
    return d


def test_measured_beats_slurm_beats_modelled(tmp_path):
    rows = [row(JobID="1", ConsumedEnergyRaw="3600000"),     # measured wins over Slurm's 1 kWh
            row(JobID="2", ConsumedEnergyRaw="3600000"),     # Slurm: 1 kWh
            row(JobID="3"),                                  # modelled: 2 GPU x 1 h x 700 W
            row(JobID="4", AllocTRES="cpu=4")]               # CPU only, no source
    spool = _spool(tmp_path, [
        {"v": 1, "job_id": "1", "node": "n1", "source": "measured", "energy_mj_total": 1_800_000_000},
        {"v": 1, "job_id": "1", "node": "n2", "source": "measured", "energy_mj_total": 1_800_000_000}])
    sp, problems = read_spool(str(spool))
    assert problems == []
    f, dq = _frame(rows)
    rep, allocs = build_report(f, dq, WEEK, Assumptions(default_tdp_w=700.0), spool=sp, now=NOW)
    src = dict(zip(allocs["key_id"], allocs["energy_source"]))
    assert src == {"1": "measured", "2": "slurm", "3": "modelled", "4": "none"}
    by = rep["totals"]["energy_kwh_by_source"]
    assert by["measured"] == pytest.approx(1.0)   # 3.6e9 mJ
    assert by["slurm"] == pytest.approx(1.0)
    assert by["modelled"] == pytest.approx(1.4)
    assert rep["energy_sources"]["jobs"] == {"measured": 1, "prometheus": 0, "slurm": 1, "slurm_tres": 0, "slurm_usage": 0,
                                                 "modelled": 1, "none": 1}


def test_modelled_energy_uses_the_tdp_of_each_gpu_type_whatever_its_case():
    rows = [row(JobID="5", AllocTRES="cpu=4,gres/gpu:A100=1"),       # 1 x 400 W x 1 h
            row(JobID="6", AllocTRES="cpu=4,gres/gpu:h100=2"),       # 2 x 700 W x 1 h
            row(JobID="7", AllocTRES="cpu=4,gres/gpu:l4=1"),         # no TDP, no default
            row(JobID="8", AllocTRES="cpu=4,gres/gpu=1")]            # untyped: no TDP
    f, dq = _frame(rows)
    _, allocs = build_report(f, dq, WEEK, Assumptions(gpu_tdp_w={"a100": 400.0, "h100": 700.0}), now=NOW)
    kwh = dict(zip(allocs["key_id"], allocs["energy_kwh"]))
    src = dict(zip(allocs["key_id"], allocs["energy_source"]))
    assert kwh["5"] == pytest.approx(0.4) and kwh["6"] == pytest.approx(1.4)
    assert src == {"5": "modelled", "6": "modelled", "7": "none", "8": "none"}


def test_partly_unavailable_spool_falls_back_and_bad_lines_are_listed(tmp_path):
    spool = _spool(tmp_path, [
        {"v": 1, "job_id": "3", "node": "n1", "source": "measured", "energy_mj_total": 5},
        {"v": 1, "job_id": "3", "node": "n2", "source": "unavailable", "energy_mj_total": None}])
    with open(spool / "energy.jsonl", "a") as fh:
        fh.write("{not json\n")
    sp, problems = read_spool(str(spool))
    assert len(problems) == 1 and problems[0].endswith("energy.jsonl:3: " + problems[0].split(":3: ")[1])
    f, dq = _frame([row(JobID="3")])
    _, allocs = build_report(f, dq, WEEK, Assumptions(default_tdp_w=300.0), spool=sp, now=NOW)
    assert allocs.loc[0, "energy_source"] == "modelled"
    assert allocs.loc[0, "energy_kwh"] == pytest.approx(2 * 0.3)


def test_energy_is_scaled_to_the_share_inside_the_window():
    # 4 h job, 1 h of it before the window; Slurm says 4 kWh -> 3 kWh inside
    f, dq = _frame([row(Start=T0 - 3600, End=T0 + 3 * 3600, ElapsedRaw=4 * 3600, Submit=T0 - 7200,
                        Eligible=T0 - 7200, ConsumedEnergyRaw=str(4 * 3_600_000))])
    rep, _ = build_report(f, dq, WEEK, Assumptions(), now=NOW)
    assert rep["totals"]["energy_kwh_by_source"]["slurm"] == pytest.approx(3.0)


def test_down_time_of_a_drained_node_counts_once():
    ev = ("n1|%d|%d|DRAIN\nn1|%d|%d|DOWN\nn[2-3]|%d|Unknown|DOWN\n|%d|%d|cluster\n"
          % (T0, T0 + 7200, T0 + 3600, T0 + 3 * 3600, T0 + 6 * 86400, T0, T0 + 60))
    events = C.node_events(ev)
    assert list(events["node"]) == ["n1", "n1", "n[2-3]"]
    down = C.down_gpu_hours(events, {"n1": 4, "n2": 4, "n3": 2}, WEEK.start, WEEK.end, now=WEEK.end)
    # n1: union of [0,2h) and [1h,3h) = 3 h x 4 GPUs; n2/n3: last day x (4 + 2) GPUs
    assert down == pytest.approx(3 * 4 + 24 * 6)


def test_scontrol_nodes_gpu_counts():
    text_ = ("NodeName=n1 Arch=x86_64 CoresPerSocket=4 Gres=gpu:h100:4(S:0-1) State=IDLE\n"
             "NodeName=n2 Gres=gpu:a100:2,gpu:v100:1 State=MIXED\n"
             "NodeName=c1 Gres=(null) State=IDLE\n")
    assert C.gpus_per_node_scontrol(text_) == {"n1": 4, "n2": 3, "c1": 0}


def test_scontrol_corpus_capture(corpus):
    text_ = (corpus / "slurm" / "habrok_scontrol_show_nodes.txt").read_text()
    nodes = C.gpus_per_node_scontrol(text_)
    lines = [ln for ln in text_.splitlines() if ln.startswith("NodeName=")]
    assert len(nodes) == len(lines)
    by_hand = 0
    for ln in lines:
        tres = ln.split("CfgTRES=", 1)[1].split()[0] if "CfgTRES=" in ln else ""
        for entry in tres.split(","):
            if entry.startswith("gres/gpu="):
                by_hand += int(entry.split("=")[1])
    assert by_hand > 0 and sum(nodes.values()) == by_hand
    assert nodes["a100gpu1"] == 4


def test_sreport_sums_user_rows_only():
    out = "c|root||12.00\nc|phys||10.00\nc|phys|alice|6.50\nc|phys|bob|3.50\nc|bio|carol|2.00\n"
    assert S.gpu_hours(out, "hours") == pytest.approx(12.0)


def test_reconciliation_flags_over_one_percent():
    f, dq = _frame([row()])
    rep, _ = build_report(f, dq, WEEK, Assumptions(), sreport_gpu_hours=2.0, now=NOW)
    assert rep["reconciliation"]["flagged"] is False
    f, dq = _frame([row()])
    rep, _ = build_report(f, dq, WEEK, Assumptions(), sreport_gpu_hours=1.9, now=NOW)
    assert rep["reconciliation"]["flagged"] is True


def test_window_parsing():
    w = parse_week("2026-W48")
    assert (w.start.isoformat(), w.end.isoformat()) == ("2026-11-23T00:00:00+00:00", "2026-11-30T00:00:00+00:00")
    assert parse_when("2026-11-23T08:00+01:00").hour == 7
    assert parse_when("2026-11-23").tzinfo is not None
    w = make_window(None, "2026-11-23T00:00Z", None)
    assert w.hours == 168 and w.as_dict()["end"] == "2026-11-30T00:00:00Z"
    assert len(w.days()) == 7
    with pytest.raises(WindowError):
        make_window("2026-W48", "2026-11-23", None)


def test_store_keeps_latest_pull_and_final_days(tmp_path):
    store = Store(tmp_path / "store", "c1")
    day = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    running, dq1 = _frame([row(State="RUNNING", End="Unknown")])
    store.save_day(day, running, dq1, now=T0 + 86400 + 7200)
    assert store.needs_pull(day)                       # a running job: provisional
    done, dq2 = _frame([row(), row(JobID="100.batch", TRESUsageInTot="cpu=00:50:00,mem=6G,gres/gpuutil=40")])
    store.save_day(day, done, dq2, now=T0 + 86400 + 7300)
    assert not store.needs_pull(day)                   # settled and closed: final
    day2 = day + dt.timedelta(days=1)
    store.save_day(day2, done, dq2, now=T0 + 2 * 86400 + 100)   # same job in the next day's pull
    assert store.needs_pull(day2)                      # pulled too soon after the day ended
    rows, dq = store.load([day, day2])
    assert len(rows.allocs) == 1 and rows.allocs.loc[0, "state"] == "COMPLETED"
    assert len(rows.steps) == 1 and rows.steps.loc[0, "mem_used_mib"] == 6 * 1024   # steps kept too
    assert dq.rows_read == 4 and dq.skipped == {"same row in another day's pull": 2}
    rep, allocs = build_report(rows, dq, WEEK, Assumptions(), now=NOW)
    assert rep["totals"]["jobs"] == 1 and rep["totals"]["gpu_hours"] == pytest.approx(2.0)
    assert allocs.loc[0, "step_mem_mib"] == 6 * 1024 and allocs.loc[0, "step_gpu_util_pct"] == 40


def test_spool_records_go_to_the_requeued_attempt_that_holds_them(tmp_path):
    # attempt 1 (REQUEUED) [T0+100, T0+1900], attempt 2 back to back [T0+1902, T0+5502]
    first = row(JobID="300", State="REQUEUED", Start=T0 + 100, End=T0 + 1900, ElapsedRaw=1800)
    final = row(JobID="300", Submit=T0 + 1901, Eligible=T0 + 1901, Start=T0 + 1902,
                End=T0 + 5502, ElapsedRaw=3600)
    spool = _spool(tmp_path, [
        # attempt 1 on two nodes: 0.05 + 0.05 kWh
        {"v": 1, "job_id": "300", "node": "n1", "start_s": T0 + 101, "end_s": T0 + 1901,
         "source": "measured", "energy_mj_total": 180_000_000},
        {"v": 1, "job_id": "300", "node": "n2", "start_s": T0 + 102, "end_s": T0 + 1901,
         "source": "measured", "energy_mj_total": 180_000_000},
        # attempt 2: its prolog read lies within a few seconds of attempt 1's End too
        {"v": 1, "job_id": "300", "node": "n3", "start_s": T0 + 1903, "end_s": T0 + 5503,
         "source": "measured", "energy_mj_total": 720_000_000},
        # another job's record never matches
        {"v": 1, "job_id": "999", "node": "n1", "start_s": T0 + 101, "end_s": T0 + 200,
         "source": "measured", "energy_mj_total": 3_600_000_000}])
    sp, _ = read_spool(str(spool))
    f, dq = _frame([first, final])
    rep, allocs = build_report(f, dq, WEEK, Assumptions(default_tdp_w=700.0), spool=sp, now=NOW)
    by_state = allocs.set_index("state")
    assert by_state.loc["REQUEUED", "energy_source"] == "measured"
    assert by_state.loc["REQUEUED", "energy_kwh"] == pytest.approx(0.1)
    assert by_state.loc["COMPLETED", "energy_source"] == "measured"
    assert by_state.loc["COMPLETED", "energy_kwh"] == pytest.approx(0.2)
    by = rep["totals"]["energy_kwh_by_source"]
    assert by["measured"] == pytest.approx(0.3) and by["modelled"] == 0.0
    assert rep["totals"]["energy_kwh"] == pytest.approx(0.3)


def test_spool_record_outside_every_attempt_is_not_measured(tmp_path):
    spool = _spool(tmp_path, [{"v": 1, "job_id": "100", "node": "n1", "start_s": T0 + 9000,
                               "end_s": T0 + 9900, "source": "measured", "energy_mj_total": 1}])
    sp, _ = read_spool(str(spool))
    f, dq = _frame([row()])   # ran [T0+600, T0+4200]: the record is a different (older id) job
    rep, allocs = build_report(f, dq, WEEK, Assumptions(default_tdp_w=700.0), spool=sp, now=NOW)
    assert allocs.loc[0, "energy_source"] == "modelled"
    # not silently: the report says a record of a job in the window was not used, and why
    assert rep["totals"]["spool_records_unmatched"] == 1
    (p,) = [p for p in rep["data_quality"]["problems"] if p["source"] == "spool"]
    assert p["reason"] == "spool record outside its job's sacct Start..End" and p["counted"] is False
    assert p["detail"].startswith("job 100 node n1: prolog at 2026-01-01T02:30:00+00:00, outside every attempt's")
    assert rep["data_quality"]["rows_skipped"] == 0  # the sacct rows' counts are untouched


def test_spool_records_of_other_jobs_are_not_data_quality_problems(tmp_path):
    # a skewed node clock (its prolog read 90 s before the job's sacct Start) loses that record;
    # records of jobs outside the window are normal and not listed
    spool = _spool(tmp_path, [
        {"v": 1, "job_id": "100", "node": "n1", "start_s": T0 + 510, "end_s": T0 + 4100,
         "source": "measured", "energy_mj_total": 1},
        {"v": 1, "job_id": "100", "node": "n2", "start_s": T0 + 601, "end_s": T0 + 4201,
         "source": "measured", "energy_mj_total": 3_600_000_000},
        {"v": 1, "job_id": "77", "node": "n1", "start_s": T0 + 100, "end_s": T0 + 200,
         "source": "measured", "energy_mj_total": 1}])
    sp, _ = read_spool(str(spool))
    f, dq = _frame([row()])
    rep, allocs = build_report(f, dq, WEEK, Assumptions(default_tdp_w=700.0), spool=sp, now=NOW)
    assert rep["totals"]["spool_records_unmatched"] == 1
    assert [p["detail"][:15] for p in rep["data_quality"]["problems"] if p["source"] == "spool"] == ["job 100 node n1"]
    assert allocs.loc[0, "energy_source"] == "measured" and allocs.loc[0, "energy_kwh"] == pytest.approx(1.0)


def _html_md(rep):
    from slurmkit.report.render import to_html, to_markdown
    return to_html(rep), to_markdown(rep)


def test_reconciliation_when_the_jobs_ran_after_sreports_last_hour():
    from slurmkit.report.window import Window
    # the job ran [T0+600, T0+4200); sreport covers the whole hours up to T0 (none of it)
    f, dq = _frame([row()])
    span = Window(WEEK.start - dt.timedelta(days=1), WEEK.start)
    rep, _ = build_report(f, dq, WEEK, Assumptions(), sreport_gpu_hours=0.0, recon_window=span, now=NOW)
    rc = rep["reconciliation"]
    assert rc["status"] == "not_reconciled" and rc["flagged"] is False
    assert rc["jobs_gpu_hours"] == 0.0
    assert rc["note"] == "sreport covers up to 2026-01-01 00:00 UTC, the jobs ran after"
    html, md = _html_md(rep)
    for out in (html, md):
        assert "not reconciled: sreport covers up to 2026-01-01 00:00 UTC, the jobs ran after" in out
        assert "check )" not in out and "(– apart" not in out


def test_reconciliation_is_clipped_to_sreports_span_and_names_the_jobs():
    from slurmkit.report.window import Window
    # job 100: 2 GPUs [T0+600, T0+4200); job 101: 1 GPU [T0+7200, T0+10800)
    f, dq = _frame([row(), row(JobID="101", Start=T0 + 7200, End=T0 + 10800,
                               AllocTRES="cpu=4,gres/gpu=1,node=1")])
    span = Window(WEEK.start, WEEK.start + dt.timedelta(hours=2))   # sreport's hours 00:00-02:00
    rep, _ = build_report(f, dq, WEEK, Assumptions(), sreport_gpu_hours=2.0, recon_window=span, now=NOW)
    rc = rep["reconciliation"]
    assert rc["jobs_gpu_hours"] == pytest.approx(2.0) and rc["status"] == "reconciled"
    f, dq = _frame([row(), row(JobID="101", Start=T0 + 3600, End=T0 + 10800,
                               AllocTRES="cpu=4,gres/gpu=1,node=1", ElapsedRaw=7200)])
    rep, _ = build_report(f, dq, WEEK, Assumptions(), sreport_gpu_hours=2.0, recon_window=span, now=NOW)
    rc = rep["reconciliation"]
    assert rc["jobs_gpu_hours"] == pytest.approx(3.0) and rc["flagged"] is True
    assert rc["jobs_to_check"][0].startswith("101 (1 GPU-h, cut by the span")
    html, md = _html_md(rep)
    for out in (html, md):
        assert "over 1 %: check jobs 101 (1 GPU-h, cut by the span), 100 (2 GPU-h)" in out
        assert "(50.0 % apart" in out or "(50 % apart" in out


def test_measured_energy_of_a_job_that_ran_under_a_second_counts(tmp_path):
    # sacct says ElapsedRaw 0 (Start == End); its prolog/epilog still measured 0.5 kWh
    spool = _spool(tmp_path, [{"v": 1, "job_id": "100", "node": "n1", "start_s": T0 + 600.2,
                               "end_s": T0 + 600.6, "source": "measured",
                               "energy_mj_total": 1_800_000_000}])
    sp, _ = read_spool(str(spool))
    f, dq = _frame([row(State="FAILED", End=T0 + 600, ElapsedRaw=0)])
    rep, allocs = build_report(f, dq, WEEK, Assumptions(default_tdp_w=700.0), spool=sp, now=NOW)
    assert allocs.loc[0, "energy_source"] == "measured"
    assert rep["totals"]["energy_kwh_by_source"]["measured"] == pytest.approx(0.5)
