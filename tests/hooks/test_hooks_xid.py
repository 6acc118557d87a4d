"""XID lifetime and attribution: holds that only a reboot or that GPU's reset end, the reset
record, kernel-log times, and which job an Xid belongs to on a shared node (our own fixtures;
the hooks run through their installed shims)."""

import json
import os
import re
import stat
import time

import pytest

from nodeenv import where

from slurmkit.health.checks import CheckResult, run_checks
from slurmkit.health.config import load_config
from slurmkit.health.kmsg import kmsg_records, logged_before, parse_log, read_kmsg
from slurmkit.health.state import GpuState, NodeState, Xid
from slurmkit.hooks import attribution, gpureset, nodestate, spool, xidhold

B1, B2 = "0000:3b:00.0", "0000:4c:00.0"


# ---- kernel-log time and order ------------------------------------------------------------

def test_kmsg_records_carry_sequence_and_wall_clock_time(tmp_path):
    dev = tmp_path / "kmsg"
    dev.write_text("6,100,1000000,-;usb 1-1: new device\n"
                   "3,101,2500000,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=0, name=x, GPU has fallen off the bus.\n")
    (x,) = read_kmsg(tmp_path / "cur", dev, boot_time_s=1_767_000_000.0)
    assert (x.seq, x.line, x.timestamp, x.time_s) == (101, 101, "2.500000", 1_767_000_002.5)
    # the one record reader: a continuation line skipped, a record without a time kept
    with open(dev, "a") as fh:
        fh.write(" DEVICE=+pci:0000:3b:00.0\n6,102,-,-;slurmkit: GPU 0000:3b:00.0 reset\n")
    assert [r[:2] for r in kmsg_records(dev)] == [(100, 1000000), (101, 2500000), (102, None)]
    assert gpureset.last_kmsg_seq(str(dev)) == 102
    assert gpureset.last_kmsg_seq(str(tmp_path / "no-such-kmsg")) is None


def test_saved_dmesg_times_seconds_since_boot_and_dmesg_T():
    text = ("[  12.250000] NVRM: Xid (PCI:0000:3b:00): 48, pid=1, DBE\n"
            "[Fri Aug 30 11:43:09 2024] NVRM: Xid (PCI:0000:4c:00): 13, pid=2, Graphics Exception\n"
            "NVRM: Xid (PCI:0000:4c:00): 31, pid=3, MMU Fault\n")
    a, b, c = parse_log(text, "dmesg.txt", boot_time_s=1000.0)
    assert (a.time_s, a.seq) == (1012.25, None)
    assert b.time_s == pytest.approx(time.mktime((2024, 8, 30, 11, 43, 9, 0, 0, -1)))
    assert c.time_s is None
    assert parse_log(text)[0].time_s is None  # seconds since an unknown boot: no time


def test_logged_before_prefers_the_sequence_number():
    x = Xid(79, B1, "m", seq=50, time_s=2000.0)
    assert logged_before(x, 60, 1000.0) is True      # the sequence decides, not the (drifting) time
    assert logged_before(x, 40, 9000.0) is False
    assert logged_before(Xid(79, B1, "m", time_s=2000.0), None, 2500.0) is True
    assert logged_before(Xid(79, B1, "m"), None, 2500.0) is None


# ---- holds ----------------------------------------------------------------------------------

def _xid_fail(bus, value=79, gpu=1):
    return CheckResult("xid", "fail", gpu, f"GPU-{gpu}", bus, value, None, f"Xid {value} x1")


def test_holds_per_gpu_released_only_by_that_gpus_later_reset():
    xids = [Xid(79, B1, "m", seq=10, time_s=100.0), Xid(48, B2, "m", seq=12, time_s=120.0)]
    holds = xidhold.add({}, [_xid_fail(B1), _xid_fail(B2, 48, 2), CheckResult("xid", "warn", 1, None, B1, 31)],
                        xids, now=500.0)
    assert holds == {B1: {"since_s": 100.0, "since_seq": 10, "reason": f"slurmkit: xid GPU1 {B1}: Xid 79"},
                     B2: {"since_s": 120.0, "since_seq": 12, "reason": f"slurmkit: xid GPU2 {B2}: Xid 48"}}
    # a reset of B1 logged after its Xid (sequence 11 > 10) releases B1 only
    left, gone = xidhold.release(holds, {B1: {"at_s": 50.0, "kmsg_seq": 11}})
    assert (sorted(left), sorted(gone)) == ([B2], [B1])
    # a reset recorded before the Xid (sequence 9) releases nothing
    assert xidhold.release(holds, {B1: {"at_s": 900.0, "kmsg_seq": 9}})[1] == {}
    # without sequence numbers, by time
    assert xidhold.cleared_by({"since_s": 100.0, "since_seq": None}, {"at_s": 101.0, "kmsg_seq": None})
    assert not xidhold.cleared_by({"since_s": 100.0, "since_seq": None}, {"at_s": 99.0, "kmsg_seq": None})
    # a newer Xid on a held GPU moves its since on: the earlier reset no longer counts
    later = xidhold.add(holds, [_xid_fail(B1)], [Xid(79, B1, "m", seq=30, time_s=300.0)], now=600.0)
    assert (later[B1]["since_seq"], later[B1]["since_s"]) == (30, 300.0)
    # an Xid naming no GPU holds node-wide: no reset releases it
    nodewide = xidhold.add({}, [CheckResult("xid", "fail", None, None, None, 79)], [Xid(79, None, "m")], now=7.0)
    assert list(nodewide) == [""] and nodewide[""]["since_s"] == 7.0
    assert xidhold.release(nodewide, {"": {"at_s": 99.0, "kmsg_seq": None}})[1] == {}


def test_hold_implied_by_an_older_drain_reason():
    assert xidhold.from_reason(f"slurmkit: xid GPU1 {B1}: Xid 79 GPU fell off the bus (+1 more)") == \
        {B1: {"since_s": 0.0, "since_seq": None,
              "reason": f"slurmkit: xid GPU1 {B1}: Xid 79 GPU fell off the bus (+1 more)"}}
    assert list(xidhold.from_reason("slurmkit: xid GPU0 GPU-1: 79")) == [""]
    assert xidhold.from_reason("slurmkit: ecc_mode GPU1 0000:3b:00.0: ECC off") == {}


# ---- the reset record -------------------------------------------------------------------------

def test_reset_record_keeps_this_boots_resets_only(tmp_path):
    gpureset.record(tmp_path, "n1", B1, boot_id="b1", uuid="GPU-a", how="nvidia-smi --gpu-reset",
                    kmsg_seq=812, at_s=1000.0)
    gpureset.record(tmp_path, "n1", B2, boot_id="b1", how="recorded by hand (--done)", at_s=1001.0)
    assert gpureset.load(tmp_path, "n1", "b1") == {
        B1: {"at_s": 1000.0, "kmsg_seq": 812, "uuid": "GPU-a", "how": "nvidia-smi --gpu-reset"},
        B2: {"at_s": 1001.0, "kmsg_seq": None, "uuid": None, "how": "recorded by hand (--done)"}}
    assert gpureset.load(tmp_path, "n1", "b2") == {}  # after a reboot: the reboot ended those drains
    gpureset.record(tmp_path, "n1", B2, boot_id="b2", at_s=2000.0)
    assert list(gpureset.load(tmp_path, "n1", "b2")) == [B2]
    (tmp_path / "n1" / gpureset.FILE).write_text("{not json")
    assert gpureset.load(tmp_path, "n1", "b2") == {}


def test_gpu_named_by_bus_id_index_or_uuid():
    st = NodeState(node="n1", source="t", gpus=[GpuState(0, "GPU-a", "0000:19:00.0"), GpuState(1, "GPU-b", B1)])
    assert gpureset.resolve("00000000:3B:00.0") == (B1, None)
    assert gpureset.resolve("3b:00", st) == (B1, "GPU-b")
    assert gpureset.resolve("1", st) == (B1, "GPU-b") and gpureset.resolve("GPU-b", st) == (B1, "GPU-b")
    with pytest.raises(ValueError, match="no GPU '7' on this node"):
        gpureset.resolve("7", st)
    assert gpureset.nvsmi_bus_id(B1) == "00000000:3B:00.0"


def test_xid_logged_before_its_gpus_reset_is_history_not_a_fail():
    """A consumer whose cursor lags (the epilog) sees an Xid only after the GPU was reset: that
    line is history; a later one on the same GPU, or one on another GPU, still fails."""
    st = NodeState(node="n1", source="t", gpus=[GpuState(1, "GPU-b", B1), GpuState(2, "GPU-c", B2)])
    st.xids = [Xid(79, B1, "old", seq=10), Xid(79, B2, "other GPU", seq=11)]
    st.gpu_resets = {B1: {"at_s": 0.0, "kmsg_seq": 15}}
    res = {r.pci_bus_id: r for r in run_checks(st, load_config()) if r.check == "xid"}
    assert (res[B1].status, res[B2].status) == ("pass", "fail")
    assert "before the GPU's recorded reset" in res[B1].message
    st.xids.append(Xid(79, B1, "after the reset", seq=20))
    assert sorted(r.status for r in run_checks(st, load_config()) if r.check == "xid" and r.pci_bus_id == B1) \
        == ["fail", "pass"]


# ---- attribution ----------------------------------------------------------------------------

def test_attribution_by_gpu_and_window():
    a = attribution.JobWindow("A", frozenset({B1}), start_s=1000.0, end_s=2000.0, start_seq=50)
    b = attribution.JobWindow("B", frozenset({B2}), start_s=1500.0)
    wins = [a, b]
    assert attribution.attribute(Xid(79, B1, "m", seq=51, time_s=900.0), wins) == ["A"]  # seq beats drifting time
    assert attribution.attribute(Xid(79, B1, "m", seq=49, time_s=1200.0), wins) == []    # before A's prolog read
    assert attribution.attribute(Xid(79, B2, "m", time_s=1600.0), wins) == ["B"]         # B's GPU: never A's
    assert attribution.attribute(Xid(79, B2, "m", time_s=1400.0), wins) == []            # before B started
    assert attribution.attribute(Xid(79, B1, "m", time_s=2500.0), wins) == []            # after A ended
    assert attribution.attribute(Xid(79, B1, "m"), wins) == ["A"]                        # no time: the GPU's job
    assert attribution.attribute(Xid(79, None, "m", time_s=1600.0), wins) == []
    shared = attribution.JobWindow("C", frozenset({B2}), start_s=1000.0)
    assert attribution.describe(attribution.attribute(Xid(79, B2, "m", time_s=1600.0), [b, shared])) == "jobs B, C"
    assert attribution.describe([]) == "no job"


def test_window_of_a_record_from_another_boot_is_a_ghost():
    rec = nodestate.JobStart(1000.0, "live", [nodestate.JobGpuStart(0, 1, 1, "GPU-b", B1)], kmsg_seq=40, boot_id="b1")
    w = attribution.window_of("7", rec, "b1", end_s=3000.0)
    assert (w.bus_ids, w.start_seq, w.end_s) == (frozenset({B1}), 40, 3000.0)
    assert attribution.window_of("7", rec, "b2") is None
    old = nodestate.JobStart(1000.0, "live", [nodestate.JobGpuStart(0, 1, 1, "GPU-b", B1)])  # an older prolog's
    assert attribution.window_of("7", old, "b2").start_seq is None


# ---- through the hooks ------------------------------------------------------------------------

def _job_bus(node, job_id):
    rec = json.loads((node.state_dir / "n1" / f"job-{job_id}.json").read_text())
    return rec["gpus"][0]["pci_bus_id"], rec


def _xid_lines(node, job_id):
    recs, _ = spool.read(node.spool_dir / spool.file_name("n1"))
    rec = next(r for r in recs if r.job_id == job_id)
    return [(e.value, e.gpu_index, e.job_id) for e in rec.events if e.check == "xid"]


def test_shared_node_epilog_reports_only_its_own_jobs_xids(node, healthy, tmp_path):
    """Two 1-GPU jobs on one node (replayed GPUs). At job A's epilog the kernel log holds an Xid
    on job B's GPU and two on A's own: one logged before A started, one during A. A's spool
    record has only the one during A, naming A; the log says whose each is; the would-be drain
    reason still names the GPU."""
    path, snap = healthy
    node.write_config({"n1": path}, mode="observe")
    assert node.run(node.prolog, job_id="201", gpus="0").returncode == 0
    assert node.run(node.prolog, job_id="202", gpus="2").returncode == 0
    bus_a, rec_a = _job_bus(node, "201")
    bus_b, rec_b = _job_bus(node, "202")
    t0, t1 = rec_a["start_s"], rec_b["start_s"]  # the epilog below starts later than t1 + 0.002
    end = dict(snap, xids=[
        {"xid": 79, "pci_bus_id": bus_a, "message": "GPU has fallen off the bus.", "origin": "/dev/kmsg",
         "line": 1, "timestamp": "", "time_s": t0 - 30},                       # before job A
        {"xid": 79, "pci_bus_id": bus_b, "message": "GPU has fallen off the bus.", "origin": "/dev/kmsg",
         "line": 2, "timestamp": "", "time_s": t1 + 0.001},                    # job B's GPU
        {"xid": 48, "pci_bus_id": bus_a, "message": "DBE", "origin": "/dev/kmsg",
         "line": 3, "timestamp": "", "time_s": t1 + 0.002}])                   # job A's, during A
    p = tmp_path / "end.json"
    p.write_text(json.dumps(end))
    node.write_config({"n1": p}, mode="observe")
    r = node.run(node.epilog, job_id="201", gpus="0")
    assert r.returncode == 0, r.stderr
    gpu_a = next(g["index"] for g in snap["gpus"] if g["pci_bus_id"] == bus_a)
    assert _xid_lines(node, "201") == [(48, gpu_a, "201")], r.stderr  # not B's 79, not the 79 from before A
    assert f"Xid 79 on {bus_b}: attributed to job 202" in r.stderr
    assert f"Xid 79 on {bus_a}: attributed to no job" in r.stderr
    assert f"Xid 48 on {bus_a}: attributed to job 201" in r.stderr
    assert "would drain n1: slurmkit: xid GPU" in r.stderr and "(+2 more)" in r.stderr
    # B's epilog: B's GPU's Xid is B's
    r = node.run(node.epilog, job_id="202", gpus="2")
    assert r.returncode == 0, r.stderr
    gpu_b = next(g["index"] for g in snap["gpus"] if g["pci_bus_id"] == bus_b)
    assert _xid_lines(node, "202") == [(79, gpu_b, "202")]
    # the event names its GPU by PCI bus id too (gpu_index is NVML's, the line's gpus[] Slurm's)
    recs, _ = spool.read(node.spool_dir / spool.file_name("n1"))
    assert [e.pci_bus_id for r in recs if r.job_id == "202" for e in r.events if e.check == "xid"] == [bus_b]


def _kmsg(path, *records):
    """Append ``/dev/kmsg`` records (seq, message) to the file the hooks read as the kernel log."""
    with open(path, "a") as fh:
        for seq, msg in records:
            fh.write(f"3,{seq},{seq * 1000},-;{msg}\n")


def test_a_jobs_epilog_sees_its_xids_after_another_jobs_epilog_moved_the_cursor(node, fake_nvml, tmp_path):
    """Live (fake NVML, the kernel log from a file): job B's epilog runs first and moves the
    node's epilog cursor past both Xids; job A's epilog still reads from where A's prolog
    stopped, so A's record has A's Xid, and B's has B's."""
    kmsg = tmp_path / "kmsg"
    _kmsg(kmsg, (1, "usb 1-1: new device"), (2, "NVRM: Xid (PCI:0000:19:00): 13, pid=1, old"))
    node.write_config(mode="observe", kmsg={"n1": kmsg})
    env = fake_nvml.env("healthy", base={})
    assert node.run(node.prolog, job_id="301", gpus="0", env=env).returncode == 0
    assert node.run(node.prolog, job_id="302", gpus="2", env=env).returncode == 0
    bus_a, rec_a = _job_bus(node, "301")
    bus_b, rec_b = _job_bus(node, "302")
    assert rec_a["kmsg_seq"] == rec_b["kmsg_seq"] == 2 and rec_a["boot_id"] == nodestate.boot_id()
    short = lambda b: b[:-2]  # noqa: E731  the kernel log's PCI:dddd:bb:dd form
    _kmsg(kmsg, (3, f"NVRM: Xid (PCI:{short(bus_b)}): 48, pid=7, DBE"),
          (4, f"NVRM: Xid (PCI:{short(bus_a)}): 95, pid=8, Uncontained: LTC TAG (0x2,0x1). RST: Yes, D-RST: No"))
    r = node.run(node.epilog, job_id="302", gpus="2", env=env)
    assert r.returncode == 0, r.stderr
    assert (node.state_dir / "n1" / "kmsg-epilog.cursor").read_text().strip() == "4"
    assert not (node.state_dir / "n1" / "kmsg-epilog-302.cursor").exists()
    r = node.run(node.epilog, job_id="301", gpus="0", env=env)
    assert r.returncode == 0, r.stderr
    assert [(v, j) for v, _, j in _xid_lines(node, "301")] == [(95, "301")]
    assert [(v, j) for v, _, j in _xid_lines(node, "302")] == [(48, "302")]
    assert f"Xid 48 on {bus_b}: attributed to no job" in r.stderr  # B has ended: no window holds it now
    # a third job's epilog without a prolog record reads from the node's cursor: nothing new
    r = node.run(node.epilog, job_id="303", gpus="0", env=env)
    assert r.returncode == 0 and "Xid" not in r.stderr


def test_one_xid_line_counts_once_whichever_hooks_read_it(node, fake_nvml, tmp_path):
    """Live (fake NVML, the kernel log from a file): one Xid 79 line read by the health check, by
    the job's epilog (from its prolog's position) and by the next health check is one event in
    slurmkit_gpu_xid_errors_total, and the time it was counted stays the first run's (so
    SlurmkitGpuHardwareXid ends 15 minutes later)."""
    from prometheus_client.parser import text_string_to_metric_families

    kmsg = tmp_path / "kmsg"
    _kmsg(kmsg, (1, "usb 1-1: new device"))
    node.write_config(mode="observe", kmsg={"n1": kmsg})
    env = fake_nvml.env("healthy", base={})
    assert node.run(node.healthcheck, job_id=None, gpus=None, env=env).returncode == 0
    assert node.run(node.prolog, job_id="301", gpus="0", env=env).returncode == 0
    bus, _ = _job_bus(node, "301")
    _kmsg(kmsg, (2, f"NVRM: Xid (PCI:{bus[:-2]}): 79, pid=1, GPU has fallen off the bus."))

    def counted():
        text = (node.textfile_dir / "slurmkit_n1_node.prom").read_text()
        got = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples
               if s.name.startswith("slurmkit_gpu_xid_") and s.labels["xid"] == "79"}
        return got["slurmkit_gpu_xid_errors_total"], got["slurmkit_gpu_xid_last_timestamp_seconds"]

    r = node.run(node.healthcheck, job_id=None, gpus=None, env=env)
    assert "would drain n1: slurmkit: xid" in r.stderr, r.stderr
    first = counted()
    assert first[0] == 1
    time.sleep(0.01)
    r = node.run(node.epilog, job_id="301", gpus="0", env=env)
    assert "Xid 79" in r.stderr, r.stderr  # the epilog reads the line too (its job's window)
    assert node.run(node.healthcheck, job_id=None, gpus=None, env=env).returncode == 0
    assert counted() == first


def _nvidia_smi(tmp_path, code: int, text: str):
    """A stand-in for nvidia-smi (there is no GPU here) that logs its arguments and answers as the
    real one does."""
    exe = tmp_path / "nvidia-smi"
    exe.write_text(f"#!/bin/sh\necho \"$@\" >> {tmp_path}/nvidia-smi.args\nprintf '%s\\n' '{text}'\nexit {code}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return exe


def test_gpu_reset_command_resets_records_and_refuses_on_failure(node, healthy, tmp_path):
    from click.testing import CliRunner

    from slurmkit.cli import cli as cli_main

    path, snap = healthy
    node.write_config({"n1": path})
    g1 = next(g for g in snap["gpus"] if g["index"] == 1)
    base = ["hooks", "gpu-reset", "--config", str(node.cfg_path), "--node", "n1"]
    busy = _nvidia_smi(tmp_path, 255, "The following GPUs could not be reset: In use by another client")
    r = CliRunner().invoke(cli_main, [*base, "1", "--nvidia-smi", str(busy)])
    assert r.exit_code == 1 and "In use by another client" in r.output and "nothing recorded" in r.output
    assert gpureset.load(node.state_dir, "n1", nodestate.boot_id()) == {}
    ok = _nvidia_smi(tmp_path, 0, f"GPU {gpureset.nvsmi_bus_id(g1['pci_bus_id'])} was successfully reset.")
    r = CliRunner().invoke(cli_main, [*base, "1", "--nvidia-smi", str(ok)])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "nvidia-smi.args").read_text().splitlines()[-1] == \
        f"--gpu-reset -i {gpureset.nvsmi_bus_id(g1['pci_bus_id'])}"
    rec = gpureset.load(node.state_dir, "n1", nodestate.boot_id())[g1["pci_bus_id"]]
    assert (rec["uuid"], rec["how"], rec["kmsg_seq"]) == (g1["uuid"], "nvidia-smi --gpu-reset", None)  # replayed node
    r = CliRunner().invoke(cli_main, [*base, "GPU-none"])
    assert r.exit_code == 2 and "no GPU 'GPU-none' on this node" in r.output
    # a bus id the node does not have is refused, nothing run nor recorded
    r = CliRunner().invoke(cli_main, [*base, "0000:ee:00.0", "--nvidia-smi", str(ok)])
    assert r.exit_code == 2 and "no GPU at PCI 0000:ee:00.0 on this node" in r.output
    assert list(gpureset.load(node.state_dir, "n1", nodestate.boot_id())) == [g1["pci_bus_id"]]


def test_gpu_reset_refuses_a_pci_device_the_live_node_lacks(tmp_path):
    (tmp_path / "sys" / "bus" / "pci" / "devices" / "0000:3b:00.0").mkdir(parents=True)
    gpureset.check_present("0000:3b:00.0", sysfs_root=str(tmp_path))
    with pytest.raises(ValueError, match="no PCI device 0000:3c:00.0 on this node"):
        gpureset.check_present("0000:3c:00.0", sysfs_root=str(tmp_path))


def test_reset_ends_the_history_of_a_lagging_consumer(node, healthy, tmp_path):
    """An Xid logged before the GPU's recorded reset does not fail the prolog that reads it only
    now; one on another GPU still does (observe mode: what it would drain)."""
    path, snap = healthy
    g1, g2 = (next(g for g in snap["gpus"] if g["index"] == i) for i in (1, 2))
    xids = [{"xid": 79, "pci_bus_id": g["pci_bus_id"], "message": "GPU has fallen off the bus.", "origin": "/dev/kmsg",
             "line": i, "timestamp": "", "time_s": time.time() - 100} for i, g in enumerate((g1, g2))]
    p = tmp_path / "xids.json"
    p.write_text(json.dumps(dict(snap, xids=xids)))
    gpureset.record(node.state_dir, "n1", g1["pci_bus_id"], boot_id=nodestate.boot_id(),
                    how="recorded by hand (--done)")
    node.write_config({"n1": p}, mode="observe")
    r = node.run(node.prolog)
    assert r.returncode == 0, r.stderr
    assert f"would drain n1: slurmkit: xid {where(node, g2)}: Xid 79 GPU fell off the bus" in r.stderr
    assert "(+1 more)" not in r.stderr  # GPU1's line is history
    assert os.path.exists(node.state_dir / "n1" / gpureset.FILE)


@pytest.mark.parametrize("setting, drains", [("", False), ('baseline_xids = "drain"\n', True)])
def test_baseline_xids_setting_reaches_the_hooks(node, healthy, tmp_path, setting, drains):
    """The current boot's XIDs at slurmkit's first read (origin baseline:): logged by default, a
    drain with [health] baseline_xids = "drain" in the site profile the hooks read."""
    path, snap = healthy
    g1 = next(g for g in snap["gpus"] if g["index"] == 1)
    p = tmp_path / "baseline.json"
    p.write_text(json.dumps(dict(snap, xids=[{"xid": 79, "pci_bus_id": g1["pci_bus_id"], "message": "fallen off",
                                              "origin": "baseline:/dev/kmsg", "line": 4, "timestamp": ""}])))
    site = tmp_path / "site.toml"
    site.write_text(f'extends = "sandbox"\n[health]\nmode = "observe"\n{setting}')
    node.write_config({"n1": p}, mode=None, extra=f'profile = "{site}"\n')
    r = node.run(node.prolog)
    assert r.returncode == 0 and "own trouble" not in r.stderr, r.stderr
    want = f"would drain n1: slurmkit: xid {where(node, g1)}: Xid 79 GPU fell off the bus"
    assert (want in r.stderr) is drains
    assert ("baseline, not a drain" in r.stderr) is not drains


def test_hold_from_a_reason_that_names_the_gres_index_too():
    reason = "slurmkit: xid GPU1 (gres index 3, 0000:3b:00.0): Xid 79 GPU fell off the bus"
    assert xidhold.from_reason(reason) == {"0000:3b:00.0": {"since_s": 0.0, "since_seq": None, "reason": reason}}
    old = "slurmkit: xid GPU1 0000:3b:00.0: Xid 79 GPU fell off the bus"  # written before the gres index
    assert list(xidhold.from_reason(old)) == ["0000:3b:00.0"]


def test_gsp_heartbeat_naming_gpu_n_drains_that_nvml_gpu_in_the_hooks(node, fake_nvml, tmp_path):
    """Live (fake NVML, 4 GPUs; the kernel log from a file): the driver's GSP heartbeat timeout
    and "GSP Timeout" banner name the GPU only as GPU<n> (NVIDIA/open-gpu-kernel-modules#1230,
    verbatim but for GPU6 -> GPU2, this node having 4 GPUs: an edit): the prolog would drain for
    NVML GPU 2, named by its bus id; GPU6 itself (no such GPU here) is node-level."""
    kmsg = tmp_path / "kmsg"
    _kmsg(kmsg, (1, "usb 1-1: new device"))
    node.write_config(mode="observe", kmsg={"n1": kmsg})
    env = fake_nvml.env("healthy", base={})
    assert node.run(node.prolog, job_id="401", gpus="0", env=env).returncode == 0  # the cursor: past seq 1
    heartbeat = ("NVRM: GPU2 _kgspIsHeartbeatTimedOut: Heartbeat timed out, currentTimeMs 812751949 heartbeat 1899482 "
                 "heartbeatWithOffsetMs 812745879 diff 6070 timeout 5200")
    banner = "NVRM: GPU2 _kgspLogRpcTimeout: ********************************* GSP Timeout **********************************"
    _kmsg(kmsg, (2, heartbeat), (3, banner))
    r = node.run(node.prolog, job_id="402", gpus="0", env=env)
    assert r.returncode == 0, r.stderr
    m = re.search(r"would drain n1: slurmkit: xid GPU2 \(gres index (\d), (0000:[0-9a-f:.]+)\): Xid 119 GSP RPC timeout \(x2\)",
                  r.stderr)
    assert m, r.stderr
    assert f"Xid 119 on {m.group(2)} (x2): attributed to" in r.stderr  # the lines carry that GPU's bus id
    _kmsg(kmsg, (4, heartbeat.replace("GPU2", "GPU6")))
    r = node.run(node.prolog, job_id="403", gpus="0", env=env)
    assert "would drain n1: slurmkit: xid GPU6 (not an NVML GPU): Xid 119 GSP RPC timeout" in r.stderr, r.stderr
