"""The records the hooks write and others read (energy spool line, health.json, the prolog's job
state), the check-status and drain-outcome enums, and the spool's hand-off into the report."""

from __future__ import annotations

import datetime as dt
import json
import os
import time

import pandas as pd
import pytest

from sacct_rows import T0, row, text
from nodeenv import record_snapshot

from slurmkit.accounting.frame import jobs_frame
from slurmkit.accounting.read import read_sacct_bytes
from slurmkit.health.checks import CheckResult, CheckStatus, overall
from slurmkit.hooks import nodestate, spool
from slurmkit.hooks.drain import DrainOutcome, DrainResult
from slurmkit.report.energy import Assumptions, read_spool
from slurmkit.report.weekly import build_report
from slurmkit.report.window import Window

# A line exactly as the previous version's epilog wrote it (spool.record + json.dumps, compact,
# sorted keys): accounting keyed by the Slurm GPU index, utilization in gpu_util_pct.
OLD_LINE = (
    '{"accounting":{"0":{"gpu_util_pct":90.0,"max_memory_mib":30000,"processes":1},'
    '"1":{"gpu_util_pct":70.0,"max_memory_mib":29000,"processes":2}},"accounting_reason":null,'
    '"end_s":1767232800.5,"energy_mj_total":3600000000,"events":[{"check":"xid","gpu_index":1,'
    '"status":"warn","value":31}],"gpus":[{"counter_reset":false,"end_energy_mj":1800001000,'
    '"energy_mj":1800000000,"index":0,"minor":0,"nvml_index":1,"pci_bus_id":"0000:1b:00.0",'
    '"start_energy_mj":1000,"uuid":"GPU-aaaa"},{"counter_reset":false,"end_energy_mj":1800000500,'
    '"energy_mj":1800000000,"index":1,"minor":1,"nvml_index":0,"pci_bus_id":"0000:1c:00.0",'
    '"start_energy_mj":500,"uuid":"GPU-bbbb"}],"job_id":"7001","node":"n2","reason":null,'
    '"source":"measured","start_s":1767229200.25,"state_source":"live","uid":1001,"user":"bob","v":1}')


def _through_json(obj):
    """``obj.to_json()`` through real JSON text and back through ``type(obj).from_json``."""
    return type(obj).from_json(json.loads(json.dumps(obj.to_json())))


# --- round trips ---------------------------------------------------------------------------

def test_spool_record_round_trips():
    rec = spool.record("42_3", "n1", "alice", 1000, 10.5, 70.25,
                       [spool.GpuEnergy(0, 2, 2, "GPU-a", "0000:9b:00.0", 100, 61828),
                        spool.GpuEnergy(1, 0, 3, "GPU-b", "0000:1b:00.0", 5000, 1200)], "snapshot:/x.json",
                       accounting={0: spool.GpuAccounting(87.5, 30000, 1), 1: spool.GpuAccounting(None, None, 0)},
                       accounting_reason="GPU1: no process",
                       events=[spool.SpoolEvent("xid", CheckStatus.FAIL, 2, 79)])
    assert rec.source is spool.EnergySource.MEASURED
    assert [g.energy_mj for g in rec.gpus] == [61728, 1200] and rec.gpus[1].counter_reset is True
    assert rec.energy_mj_total == 62928 and "lower bound" in rec.reason
    back = _through_json(rec)
    assert back == rec
    assert back.accounting[0].gpu_util_pct == 87.5 and back.events[0].status == "fail"
    assert back.gpu_util_pct == 87.5   # GPU1 has no figure: not counted as 0


def test_unavailable_spool_record_round_trips():
    rec = spool.record(7, "n1", None, None, None, 9.0, [spool.GpuEnergy(0, start_energy_mj=None, end_energy_mj=5)],
                       "live")
    assert rec.source == "unavailable" and rec.energy_mj_total is None and rec.reason.endswith("GPU0")
    assert not rec.measured and rec.gpu_util_pct is None
    assert _through_json(rec) == rec


def test_node_health_round_trips_and_reads_bad_files_as_defaults(tmp_path):
    hold = {"since_s": 1767229200.25, "since_seq": 812, "reason": "slurmkit: xid GPU1 0000:3b:00.0: Xid 79"}
    h = nodestate.NodeHealth("slurmkit: xid GPU1 GPU-b: 79", 2, {"prolog": 3, "epilog": 1}, "b00t",
                             {"0000:3b:00.0": hold}, {"prolog": 1767229100.5})
    assert _through_json(h) == h
    nodestate.save_health(tmp_path, "n1", h)
    assert nodestate.load_health(tmp_path, "n1") == h
    assert json.loads((tmp_path / "n1" / "health.json").read_text()) == {
        "drained_reason": "slurmkit: xid GPU1 GPU-b: 79", "clean_runs": 2, "own_errors": {"prolog": 3, "epilog": 1},
        "own_error_at": {"prolog": 1767229100.5}, "drained_boot_id": "b00t", "xid_holds": {"0000:3b:00.0": hold}}
    # a file from before holds were kept reads with none
    (tmp_path / "n1" / "health.json").write_text('{"drained_reason": "slurmkit: xid GPU1 GPU-b: 79"}')
    assert nodestate.load_health(tmp_path, "n1").xid_holds == {}
    (tmp_path / "n1" / "health.json").write_text('{"clean_runs": "x", "own_errors": [1]}')
    assert nodestate.load_health(tmp_path, "n1") == nodestate.NodeHealth(None, 0, {})
    t0 = time.time()
    assert nodestate.count_own_error(tmp_path, "n1", "healthcheck") == 1
    assert nodestate.load_health(tmp_path, "n1").own_errors == {"healthcheck": 1}
    # when: SlurmkitHookOwnTrouble fires on a recent trouble, not on a count seen again after a gap
    assert t0 - 0.01 <= nodestate.load_health(tmp_path, "n1").own_error_at["healthcheck"] <= time.time() + 0.01


def test_job_start_round_trips_through_its_file(tmp_path):
    job = nodestate.JobStart(1767229200.5, "live", [
        nodestate.JobGpuStart(0, 2, 2, "GPU-a", "0000:9b:00.0", 123456789, [(4242, 1700000000000000)]),
        nodestate.JobGpuStart(2, 1, 3, "GPU-c", "0000:1c:00.0", None, [])], kmsg_seq=4711, boot_id="b00t")
    assert _through_json(job) == job
    assert (job.to_json()["kmsg_seq"], job.to_json()["boot_id"]) == (4711, "b00t")
    nodestate.save_job(tmp_path, "n1", "101", job)
    assert nodestate.pop_job(tmp_path, "n1", "101") == job
    assert not (tmp_path / "n1" / "job-101.json").exists()
    assert nodestate.pop_job(tmp_path, "n1", "101") is None
    (tmp_path / "n1" / "job-102.json").write_text('{"gpus": 3}')
    assert nodestate.pop_job(tmp_path, "n1", "102") is None


# --- enums ---------------------------------------------------------------------------------

def test_check_status_is_an_enum_with_the_same_words():
    r = CheckResult("xid", "fail", 1, "GPU-b", value=79)
    assert r.status is CheckStatus.FAIL
    assert json.dumps({"status": r.status}) == '{"status": "fail"}' and f"{r.status}" == "fail"
    assert overall([CheckResult("a", CheckStatus.WARN), r]) is CheckStatus.FAIL
    assert overall([CheckResult("a", "pass")], ["own trouble"]) is CheckStatus.ERROR
    with pytest.raises(ValueError):
        CheckResult("a", "fial")


def test_drain_result_reads_as_the_logged_words():
    kept = DrainResult(DrainOutcome.KEPT, "maintenance by bob")
    assert kept.outcome is DrainOutcome.KEPT and kept.their_reason == "maintenance by bob"
    assert str(kept) == "kept maintenance by bob"
    assert [str(DrainResult(o)) for o in (DrainOutcome.DRAINED, DrainOutcome.RESUMED, DrainOutcome.NOT_DRAINED)] \
        == ["drained", "resumed", "not drained"]


# --- the previous version's spool line -------------------------------------------------------

def test_old_spool_line_is_read_with_its_gpu_utilization(tmp_path):
    p = tmp_path / "energy.jsonl"
    p.write_text(OLD_LINE + "\n")
    (rec,), problems = spool.read(p)
    assert problems == []
    assert rec.job_id == "7001" and rec.energy_mj_total == 3_600_000_000 and rec.measured
    assert rec.accounting[1] == spool.GpuAccounting(70.0, 29000, 2) and rec.gpu_util_pct == 80.0
    # the format is unchanged but for the clock policy, which such a line does not record: the
    # record writes the same line again with "policy": null
    again = rec.to_json()
    assert rec.policy is None and again.pop("policy") is None
    assert json.dumps(again, separators=(",", ":"), sort_keys=True) == OLD_LINE
    df, problems = read_spool(str(tmp_path))
    assert problems == []
    assert df.to_dict("records") == [{"job_id": "7001", "node": "n2", "start_s": 1767229200.25,
                                      "end_s": 1767232800.5, "energy_mj": 3.6e9, "measured": True,
                                      "gpu_util_pct": 80.0, "policy": "none recorded"}]


def _report(rows, window, spool_df, now):
    table, dq = read_sacct_bytes(text(rows), "t.psv")
    return build_report(jobs_frame(table, dq, "t.psv"), dq, window, Assumptions(), spool=spool_df, now=now)


def test_efficiency_shows_the_spools_gpu_utilization_for_a_job_sacct_has_none_for(tmp_path):
    (tmp_path / "energy.jsonl").write_text(OLD_LINE + "\n")
    sp, _ = read_spool(str(tmp_path))
    # job 7001: 2 GPUs [T0+3600, T0+7200), no gres/gpuutil in its sacct usage (TRESUsageIn* empty)
    rows = [row(JobID="7001", Start=T0 + 3600, End=T0 + 7200, ElapsedRaw=3600, NodeList="n2")]
    week = Window(dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc), dt.datetime(2026, 1, 8, tzinfo=dt.timezone.utc))
    now = pd.Timestamp(T0 + 30 * 86400, unit="s", tz="UTC")
    rep, allocs = _report(rows, week, sp, now)
    assert pd.isna(allocs.loc[0, "step_gpu_util_pct"])
    assert allocs.loc[0, "spool_gpu_util_pct"] == pytest.approx(80.0)
    eff = rep["efficiency"]
    assert eff["gpu_util_pct_weighted"] == pytest.approx(80.0)
    assert eff["gpu_hours_with_util"] == pytest.approx(2.0)
    assert rep["totals"]["energy_kwh_by_source"]["measured"] == pytest.approx(1.0)
    # without the spool the job has no utilization figure at all
    rep, _ = _report(rows, week, None, now)
    assert rep["efficiency"]["gpu_util_pct_weighted"] is None


# --- the epilog's own record, read by the report's own reader --------------------------------

def _nvml_index(node, snapshot, slurm_index):
    minor = os.minor(os.stat(node.dev / f"nvidia{slurm_index}").st_rdev)
    return next(g["index"] for g in snapshot["gpus"] if g["minor_number"] == minor)


def test_epilog_spool_record_reaches_the_report(node, healthy, fake_nvml, tmp_path):
    path, snap = healthy
    node.write_config({"n1": path})
    assert node.run(node.prolog).returncode == 0          # job 101 on Slurm GPUs 0 and 2
    nv0, nv2 = _nvml_index(node, snap, 0), _nvml_index(node, snap, 2)
    start_mj = snap["gpus"][0]["values"]["total_energy_mj"]["value"]
    # the job's processes: GPU0 at 90 % for 30 s and 30 % for 10 s (weighted 75 %), GPU2 at 45 %
    later = record_snapshot(fake_nvml, tmp_path / "later.json", energy_mj=start_mj + 7_000_000,
                            accounting=f"{nv0}:5001:90:10:1000:30000,{nv0}:5002:30:10:500:10000,"
                                       f"{nv2}:5003:45:10:800:20000")
    assert later["gpus"][nv0]["values"]["accounting"]["rc"] == "SUCCESS"
    node.write_config({"n1": tmp_path / "later.json"})
    r = node.run(node.epilog)
    assert r.returncode == 0, r.stderr

    sp, problems = read_spool(str(node.spool_dir))
    assert problems == [] and len(sp) == 1
    got = sp.iloc[0]
    assert got["job_id"] == "101" and got["node"] == "n1" and bool(got["measured"])
    assert got["energy_mj"] == 2 * 7_000_000                 # two GPUs, 7e6 mJ each
    assert got["gpu_util_pct"] == pytest.approx((75.0 + 45.0) / 2)

    # ...and into the report's efficiency section for a job whose sacct rows carry no utilization
    t = int(got["start_s"])
    rows = [row(JobID="101", Submit=t - 60, Eligible=t - 60, Start=t - 1, End=t + 3599, ElapsedRaw=3600)]
    day = dt.datetime.fromtimestamp(t, dt.timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    window = Window(day - dt.timedelta(days=1), day + dt.timedelta(days=2))
    rep, allocs = _report(rows, window, sp, pd.Timestamp(t + 86400, unit="s", tz="UTC"))
    assert allocs.loc[0, "energy_source"] == "measured"
    assert rep["efficiency"]["gpu_util_pct_weighted"] == pytest.approx(60.0)


def test_each_node_appends_to_its_own_spool_file_and_the_report_reads_them_all(tmp_path):
    """A spool folder on a shared filesystem: every node writes <node>.jsonl, never another's."""
    d = tmp_path / "spool"
    for job, node in (("11", "gpu01"), ("12", "gpu02"), ("13", "gpu01")):
        rec = spool.record(job, node, "alice", 1000, 100.0, 200.0,
                           [spool.GpuEnergy(0, 0, 0, "GPU-x", "0000:01:00.0", 1_000, 61_000)], "live")
        assert spool.append(d, rec) == str(d / f"{node}.jsonl")
    assert sorted(p.name for p in d.iterdir()) == ["gpu01.jsonl", "gpu02.jsonl"]
    assert [r.job_id for r in spool.read(d / "gpu01.jsonl")[0]] == ["11", "13"]
    assert {r.node for r in spool.read(d / "gpu02.jsonl")[0]} == {"gpu02"}
    df, problems = read_spool(str(d))
    assert problems == [] and sorted(df["job_id"]) == ["11", "12", "13"]
    assert set(df["energy_mj"]) == {60_000}
    with pytest.raises(ValueError):
        spool.file_name("../etc/passwd")


# --- one GPU identity (slurmkit.records.GpuIdentity) under the three GPU records ------------------

# Written by slurmkit before the three records shared GpuIdentity (main at e6ca3e1: spool.record(...)
# .to_json() and nodestate.save_job of the records in the round-trip tests above): the files on
# nodes today, which must read back the same.
OLD_SPOOL_LINE = (
    '{"v": 1, "job_id": "42_3", "node": "n1", "user": "alice", "uid": 1000, "start_s": 10.5, "end_s": 70.25, '
    '"source": "measured", "reason": "energy counter restarted during the job: lower bound", '
    '"state_source": "snapshot:/x.json", "energy_mj_total": 62928, "gpus": [{"index": 0, "nvml_index": 2, '
    '"minor": 2, "uuid": "GPU-a", "pci_bus_id": "0000:9b:00.0", "start_energy_mj": 100, "end_energy_mj": 61828, '
    '"energy_mj": 61728, "counter_reset": false}, {"index": 1, "nvml_index": 0, "minor": 3, "uuid": "GPU-b", '
    '"pci_bus_id": "0000:1b:00.0", "start_energy_mj": 5000, "end_energy_mj": 1200, "energy_mj": 1200, '
    '"counter_reset": true}], "accounting": null, "accounting_reason": null, "events": [], "policy": null}')
OLD_JOB_FILE = (
    '{"start_s": 1767229200.5, "state_source": "live", "gpus": [{"index": 0, "nvml_index": 2, "minor": 2, '
    '"uuid": "GPU-a", "pci_bus_id": "0000:9b:00.0", "start_energy_mj": 123456789, "acct_seen": '
    '[[4242, 1700000000000000]]}, {"index": 2, "nvml_index": 1, "minor": 3, "uuid": "GPU-c", '
    '"pci_bus_id": "0000:1c:00.0", "start_energy_mj": null, "acct_seen": []}], "user": null, "end_by_s": null, '
    '"policy": null, "kmsg_seq": 4711, "boot_id": "b00t"}')


def test_files_written_before_the_shared_identity_read_back_and_write_byte_identical(tmp_path):
    from slurmkit.records import GpuIdentity

    path = tmp_path / spool.file_name("n1")
    path.write_text(OLD_SPOOL_LINE + "\n")
    [rec], problems = spool.read(path)
    assert problems == []
    assert [(g.index, g.nvml_index, g.minor, g.uuid, g.pci_bus_id) for g in rec.gpus] == [
        (0, 2, 2, "GPU-a", "0000:9b:00.0"), (1, 0, 3, "GPU-b", "0000:1b:00.0")]
    assert all(isinstance(g, GpuIdentity) for g in rec.gpus) and rec.gpus[1].counter_reset is True
    assert json.dumps(rec.to_json()) == OLD_SPOOL_LINE
    (tmp_path / "n1").mkdir()
    (tmp_path / "n1" / "job-101.json").write_text(OLD_JOB_FILE)
    job = nodestate.pop_job(tmp_path, "n1", "101")
    assert [g.identity() for g in job.gpus] == [(0, 2, 2, "GPU-a", "0000:9b:00.0"), (2, 1, 3, "GPU-c", "0000:1c:00.0")]
    assert job.gpus[0].acct_seen == [(4242, 1700000000000000)]
    assert json.dumps(job.to_json()) == OLD_JOB_FILE


def test_one_gpu_carries_its_identity_from_the_job_gpus_to_the_prolog_record_and_the_spool_line():
    from slurmkit.hooks.gres import JobGpu
    from slurmkit.records import GpuIdentity, fields

    names = [f.name for f in fields(GpuIdentity)]
    for cls in (JobGpu, nodestate.JobGpuStart, spool.GpuEnergy):
        assert issubclass(cls, GpuIdentity) and [f.name for f in fields(cls)][:5] == names
    gpu = JobGpu(2, 1, 3, "GPU-c", "0000:1c:00.0", file="/dev/nvidia2")
    start = nodestate.JobGpuStart(*gpu.identity(), start_energy_mj=1000)
    [line] = spool.record("9", "n1", "u", 1, 1.0, 2.0, [spool.GpuEnergy(*start.identity(), 1000, 4000)], "live").gpus
    assert line.identity() == start.identity() == gpu.identity() == (2, 1, 3, "GPU-c", "0000:1c:00.0")
    assert line.to_json() == {"index": 2, "nvml_index": 1, "minor": 3, "uuid": "GPU-c", "pci_bus_id": "0000:1c:00.0",
                              "start_energy_mj": 1000, "end_energy_mj": 4000, "energy_mj": 3000, "counter_reset": False}
    with pytest.raises(ValueError, match="gpus: want objects with an integer index"):
        spool.GpuEnergy.from_json({"index": "0"})
    with pytest.raises(ValueError, match="gpus: want objects with an integer index"):
        nodestate.JobGpuStart.from_json({"uuid": "GPU-a"})
