"""The hooks' per-node metric files (slurmkit.hooks.metrics), written by the real shims on
snapshots recorded from the fake NVML, parsed with prometheus_client's parser."""

import json
import time

import pytest

from nodeenv import nvml_gpu_of, set_value

from slurmkit.hooks import flows, metrics


def _samples(path) -> dict:
    """{(name, labels tuple): value} of one textfile (the parser fails on invalid text)."""
    from prometheus_client.parser import text_string_to_metric_families

    out = {}
    for fam in text_string_to_metric_families(path.read_text()):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _named(samples: dict, name: str) -> dict:
    return {dict(k[1]).get("gpu", "") + "|" + "|".join(f"{a}={b}" for a, b in k[1] if a not in ("node", "gpu")): v
            for k, v in samples.items() if k[0] == name}


def test_prolog_exposes_the_jobs_gpus_and_epilog_removes_them(node, healthy):
    path, snap = healthy
    node.write_config({"n1": path})
    assert node.run(node.prolog).returncode == 0
    nf = _samples(node.textfile_dir / "slurmkit_n1_node.prom")
    info = {dict(k[1])["pci_bus_id"]: dict(k[1]) for k, v in nf.items() if k[0] == "slurmkit_gpu_job_info" and v == 1}
    want = [nvml_gpu_of(node, snap, i) for i in (0, 2)]
    assert sorted(info) == sorted(g["pci_bus_id"] for g in want)
    for g in want:
        assert info[g["pci_bus_id"]] == {"node": "n1", "gpu": str(g["index"]), "pci_bus_id": g["pci_bus_id"],
                                         "job_id": "101", "user": "alice"}
    assert nf[("slurmkit_node_drained_by_slurmkit", (("node", "n1"),))] == 0
    # a second job on the other two GPUs: both listed
    assert node.run(node.prolog, job_id="102", gpus="1,3").returncode == 0
    nf = _samples(node.textfile_dir / "slurmkit_n1_node.prom")
    jobs = sorted(dict(k[1])["job_id"] for k in nf if k[0] == "slurmkit_gpu_job_info")
    assert jobs == ["101", "101", "102", "102"]
    # the epilog of 101: only 102's series remain (series do not pile up)
    assert node.run(node.epilog).returncode == 0
    nf = _samples(node.textfile_dir / "slurmkit_n1_node.prom")
    assert sorted(dict(k[1])["job_id"] for k in nf if k[0] == "slurmkit_gpu_job_info") == ["102", "102"]
    # the drained gauge is in the node's file only, never in a hook's (node_exporter refuses a
    # series that two files carry)
    for hook in ("prolog", "epilog"):
        assert "slurmkit_node_drained_by_slurmkit" not in (node.textfile_dir / f"slurmkit_n1_{hook}.prom").read_text()


def test_gpu_file_carries_readings_in_base_units(node, healthy):
    path, snap = healthy
    node.write_config({"n1": path})
    assert node.run(node.healthcheck, job_id=None, gpus=None).returncode == 0
    gf = _samples(node.textfile_dir / "slurmkit_n1_gpus.prom")
    assert gf[("slurmkit_gpus_visible", (("node", "n1"),))] == 4
    assert gf[("slurmkit_gpus_expected", (("node", "n1"),))] == 4
    for g in snap["gpus"]:
        lab = (("gpu", str(g["index"])), ("node", "n1"), ("pci_bus_id", g["pci_bus_id"]))
        v = g["values"]
        assert gf[("slurmkit_gpu_energy_joules_total", lab)] == v["total_energy_mj"]["value"] / 1000
        assert gf[("slurmkit_gpu_power_watts", lab)] == v["power_draw_w"]["value"]
        assert gf[("slurmkit_gpu_utilization_ratio", lab)] == v["utilization_gpu_pct"]["value"] / 100
        dom, rest = g["pci_bus_id"].split(":", 1)  # dcgm-exporter's form: 00000000:3B:00.0
        dcgm = (("UUID", g["uuid"]), ("dcgm_pci_bus_id", f"0000{dom}:{rest}".upper()))
        assert gf[("slurmkit_gpu_info", tuple(sorted(lab + (("uuid", g["uuid"]),) + dcgm)))] == 1
        assert gf[("slurmkit_gpu_status", lab)] == 0  # pass
        bits = v["clock_event_reasons"]["value"]
        for bit, reason in metrics.CLOCK_EVENT_REASONS.items():  # only the active reasons have a sample
            key = ("slurmkit_gpu_clock_event_reason_active", tuple(sorted(lab + (("reason", reason),))))
            assert gf.get(key) == (1 if bits & bit else None)
        # a healthy GPU's memory health has no sample (none pending, none remapped)
        assert not any(k[0] in ("slurmkit_gpu_row_remap_pending", "slurmkit_gpu_row_remap_failure",
                                "slurmkit_gpu_retired_pages_pending") and dict(k[1])["gpu"] == str(g["index"])
                       for k in gf)
    # the hook's own file: its deadline, for the "near its deadline" alert
    assert node.metric("n1", "healthcheck", "slurmkit_hook_deadline_seconds") == 8.0


def _failing(snap, tmp_path, bus):
    bad = set_value(snap, 1, "remap_pending", True)
    bad = set_value(bad, 1, "remap_uncorrectable_rows", 2)
    bad["xids"] = [{"xid": 79, "pci_bus_id": bus, "message": "GPU has fallen off the bus.", "origin": "kmsg",
                    "line": 1, "timestamp": ""},
                   {"xid": 13, "pci_bus_id": bus, "message": "Graphics Exception", "origin": "kmsg", "line": 2,
                    "timestamp": ""}]
    p = tmp_path / "failing.json"
    p.write_text(json.dumps(bad))
    return p


def test_failing_gpu_counts_xids_by_code_and_observed_drains(node, healthy, tmp_path):
    path, snap = healthy
    g1 = next(g for g in snap["gpus"] if g["index"] == 1)
    failing = _failing(snap, tmp_path, g1["pci_bus_id"])
    node.write_config({"n1": failing}, mode="observe")
    t0 = time.time()
    assert node.run(node.healthcheck, job_id=None, gpus=None).returncode == 0
    t1 = time.time()
    for _ in range(2):  # the same would-be drain on every health check: one observed drain
        assert node.run(node.healthcheck, job_id=None, gpus=None).returncode == 0
    nf = _samples(node.textfile_dir / "slurmkit_n1_node.prom")
    # the replayed capture holds the same two kernel-log lines on every run: each counted once,
    # and when the first run counted it (so the hardware Xid's alert ends 15 minutes later)
    xids = {(dict(k[1])["xid"], dict(k[1])["class"], dict(k[1])["gpu"]): v
            for k, v in nf.items() if k[0] == "slurmkit_gpu_xid_errors_total"}
    assert xids == {("79", "hardware", "1"): 1, ("13", "application", "1"): 1}
    last = {dict(k[1])["xid"]: v for k, v in nf.items() if k[0] == "slurmkit_gpu_xid_last_timestamp_seconds"}
    assert set(last) == {"79", "13"} and all(t0 <= t <= t1 for t in last.values())
    observed = {dict(k[1])["check"]: v for k, v in nf.items() if k[0] == "slurmkit_observed_drains_total"}
    assert list(observed.values()) == [1] and list(observed)[0] in ("xid", "row_remap_pending")
    # a clean run clears it; the same failure afterwards is a new observed drain
    node.write_config({"n1": path}, mode="observe")
    assert node.run(node.healthcheck, job_id=None, gpus=None).returncode == 0
    node.write_config({"n1": failing}, mode="observe")
    assert node.run(node.healthcheck, job_id=None, gpus=None).returncode == 0
    nf = _samples(node.textfile_dir / "slurmkit_n1_node.prom")
    assert [v for k, v in nf.items() if k[0] == "slurmkit_observed_drains_total"] == [2]
    assert not any(k[0] == "slurmkit_drains_total" for k in nf)  # observe mode drains nothing
    assert nf[("slurmkit_node_drained_by_slurmkit", (("node", "n1"),))] == 0
    gf = _samples(node.textfile_dir / "slurmkit_n1_gpus.prom")
    lab = (("gpu", "1"), ("node", "n1"), ("pci_bus_id", g1["pci_bus_id"]))
    assert gf[("slurmkit_gpu_row_remap_pending", lab)] == 1
    assert gf[("slurmkit_gpu_remapped_rows", tuple(sorted(lab + (("cause", "uncorrectable"),))))] == 2
    assert gf[("slurmkit_gpu_status", lab)] == 2  # fail


def test_unreadable_gpu_state_rewrites_the_gpu_file_with_its_marker(node, healthy, tmp_path):
    path, snap = healthy
    node.write_config({"n1": path})
    assert node.run(node.healthcheck, job_id=None, gpus=None).returncode == 0
    gf = _samples(node.textfile_dir / "slurmkit_n1_gpus.prom")
    assert gf[("slurmkit_gpus_read", (("node", "n1"),))] == 1
    t0 = gf[("slurmkit_gpus_read_timestamp_seconds", (("node", "n1"),))]
    assert any(name == "slurmkit_gpu_temperature_celsius" for name, _ in gf)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    node.write_config({"n1": broken})
    r = node.run(node.healthcheck, job_id=None, gpus=None)
    assert r.returncode == 0 and "own trouble" in r.stderr
    # no reading of the earlier run is left to look current: the marker says the GPUs were not read
    gf = _samples(node.textfile_dir / "slurmkit_n1_gpus.prom")
    assert gf[("slurmkit_gpus_read", (("node", "n1"),))] == 0
    assert gf[("slurmkit_gpus_read_timestamp_seconds", (("node", "n1"),))] >= t0
    assert gf[("slurmkit_gpus_expected", (("node", "n1"),))] == 4
    assert not any(name.startswith("slurmkit_gpu_") for name, _ in gf)
    nf = _samples(node.textfile_dir / "slurmkit_n1_node.prom")
    assert nf[("slurmkit_node_metrics_timestamp_seconds", (("node", "n1"),))] >= t0
    assert node.metric("n1", "healthcheck", "slurmkit_hook_own_errors_total") == 1


@pytest.mark.parametrize("reason,check", [
    ("slurmkit: row_remap_pending GPU1 GPU-abc: pending, 2 uncorrectable rows", "row_remap_pending"),
    ("slurmkit: nvml-timeout", "nvml_timeout"),
    ("slurmkit: gpu_count: 3 (+1 more)", "gpu_count"),
    (None, ""),
])
def test_check_of_a_drain_reason(reason, check):
    assert metrics.check_of(reason) == check


def test_writer_refuses_a_duplicate_series():
    from slurmkit.hooks import textfile

    fam = [("slurmkit_x", "gauge", "x", [({"node": "n1", "gpu": "0"}, 0), ({"gpu": "0", "node": "n1"}, 2)])]
    with pytest.raises(ValueError, match=r"duplicate series slurmkit_x\{gpu='0', node='n1'\}"):
        textfile.render(fam)
    with pytest.raises(ValueError, match="slurmkit_y given twice"):
        textfile.render([("slurmkit_y", "gauge", "y", []), ("slurmkit_y", "gauge", "y", [])])
    assert textfile.render([("slurmkit_x", "gauge", "x", fam[0][3][:1])]) == (
        '# HELP slurmkit_x x\n# TYPE slurmkit_x gauge\nslurmkit_x{node="n1",gpu="0"} 0\n')


def test_writer_escapes_label_values_and_tells_series_apart_by_them():
    from prometheus_client.parser import text_string_to_metric_families

    from slurmkit.hooks import textfile

    # a drain reason as slurmkit writes it (hooks.drain), edited to hold a quote, a backslash and a newline
    odd = 'slurmkit: xid GPU0 "NVRM: Xid (PCI:0000:3b:00): 79" \\ fallen\noff the bus'
    fam = [("slurmkit_node_drain_info", "gauge", "x", [({"node": "n1", "reason": odd}, 1),
                                                       ({"node": "n1", "reason": odd.replace('"', "'")}, 1),
                                                       ({"node": "n1", "reason": 7}, 1)])]
    text = textfile.render(fam)
    assert '\\"NVRM: Xid (PCI:0000:3b:00): 79\\" \\\\ fallen\\noff' in text
    back = [s.labels["reason"] for f in text_string_to_metric_families(text) for s in f.samples]
    assert back == [odd, odd.replace('"', "'"), "7"]
    with pytest.raises(ValueError, match="duplicate series"):
        textfile.render([("slurmkit_x", "gauge", "x", [({"reason": odd, "node": "n1"}, 0), fam[0][3][0]])])
    with pytest.raises(ValueError, match="duplicate series"):
        textfile.render([("slurmkit_x", "gauge", "x", [({"gpu": 0}, 0), ({"gpu": "0"}, 1)])])  # one series as text


def test_check_status_is_one_series_per_check_and_gpu_with_the_worst():
    """Only results that did not pass have a series (the worst per check, GPU and port); the
    passes are one count. A fabric result names its HCA and port as node_exporter does."""
    from slurmkit.health.checks import CheckResult

    results = [CheckResult("app_clocks", "warn", 1), CheckResult("app_clocks", "pass", 1),
               CheckResult("app_clocks", "pass", 0), CheckResult("app_clocks", "pass", 0),
               CheckResult("gpu_count", "pass"), CheckResult("gpu_count", "fail"),
               CheckResult("xid", "fail", 2), CheckResult("xid", "pass", 2),
               CheckResult("ib_counters", "warn", place="mlx5_3/1 ibp154s0"),
               CheckResult("ib_counters", "pass", place="mlx5_0/1 ibp24s0"),
               CheckResult("ib_port", "fail", place="mlx5_5 0000:9a:00.0"),
               CheckResult("ib_port", "pass", place="mlx5_0/1 ibp24s0")]
    got, passed = metrics.check_samples({"node": "n1", "hook": "healthcheck"}, results)
    assert {(lab["check"], lab["gpu"], lab["device"], lab["port"]): v for lab, v in got} == {
        ("app_clocks", "1", "", ""): 1, ("gpu_count", "", "", ""): 2, ("xid", "2", "", ""): 2,
        ("ib_counters", "", "mlx5_3", "1"): 1, ("ib_port", "", "mlx5_5", ""): 2}
    assert passed == 3  # app_clocks GPU0, ib_counters and ib_port on mlx5_0/1 (a pass beside a fail is no pass)


class _Run:
    """What :func:`metrics.count_run` reads of a hook run (the flows' ``Run``)."""

    def __init__(self, drain_reason=None, drained=False, judged=True, resumed=None):
        self.verdict = flows.Verdict(drain_reason=drain_reason, drained=drained, resumed=resumed)
        self.state = object() if judged else None


def test_a_drain_counts_once_when_the_node_becomes_drained():
    reason = "slurmkit: row_remap_pending GPU1 GPU-abc: pending, 2 uncorrectable rows"
    c = {**{k: {} for k in metrics._KINDS}, "drain_open": None, "observed_open": None}
    # the drain, then 11 health checks that find it still failing (each re-asserts the drain)
    metrics.count_run(c, _Run(reason, drained=True), drained_reason=reason)
    for _ in range(11):
        metrics.count_run(c, _Run(reason, drained=True), drained_reason=reason)
    assert c["drains"] == {"row_remap_pending": 1}
    # a run that could not read the GPUs while drained changes nothing
    metrics.count_run(c, _Run(judged=False), drained_reason=reason)
    # resumed: the next drain counts again
    metrics.count_run(c, _Run(resumed=reason), drained_reason=None)
    metrics.count_run(c, _Run(reason, drained=True), drained_reason=reason)
    assert c["drains"] == {"row_remap_pending": 2} and c["resumes"] == {"row_remap_pending": 1}
    assert c["observed_drains"] == {}


def test_an_xid_line_counts_once_whichever_hook_reads_it():
    """One NVRM line read by the prolog, the health check and the epilog (each from its own
    kernel-log cursor): one count, and its time is the first run's. The same sequence number in
    the next boot is another line. Lines as slurmkit reads them from /dev/kmsg (slurmkit.health.kmsg:
    seq, time_s) with the Xid 79 message of ../shared/corpus/gpu-logs/akash-support-209_*."""
    from slurmkit.health.checks import CheckResult
    from slurmkit.health.state import Xid

    line = Xid(79, "0000:3b:00.0", "GPU has fallen off the bus.", origin="kmsg", line=812, seq=812,
               time_s=1767229200.25)
    result = CheckResult("xid", "fail", 1, "GPU-b", "0000:3b:00.0", 79)

    class Run:
        def __init__(self, xids):
            self.verdict = flows.Verdict(results=[result])
            self.state = type("S", (), {"xids": xids})()

    c = {**{k: {} for k in metrics._KINDS}, "drain_open": None, "observed_open": None}
    for i, hook_run in enumerate(("prolog", "healthcheck", "healthcheck", "epilog")):
        metrics.count_run(c, Run([line]), now=1000.0 + i, boot="b00t-1")
    assert c["xids"] == {"79|1|0000:3b:00.0|hardware": 1}
    assert c["xid_last"] == {"79|1|0000:3b:00.0|hardware": 1000.0}
    # a second line in the same run, and the first again: one more
    later = Xid(79, "0000:3b:00.0", "GPU has fallen off the bus.", origin="kmsg", line=900, seq=900,
                time_s=1767229300.0)
    metrics.count_run(c, Run([line, later]), now=2000.0, boot="b00t-1")
    assert c["xids"] == {"79|1|0000:3b:00.0|hardware": 2} and c["xid_last"]["79|1|0000:3b:00.0|hardware"] == 2000.0
    # after a reboot /dev/kmsg numbers from 0 again: sequence 812 is a new line
    metrics.count_run(c, Run([line]), now=3000.0, boot="b00t-2")
    assert c["xids"] == {"79|1|0000:3b:00.0|hardware": 3}
    # a line from saved text (dmesg, no sequence number): by its timestamp
    text = Xid(79, "0000:3b:00.0", "GPU has fallen off the bus.", origin="dmesg", line=3, timestamp="[  123.456789]")
    for _ in range(3):
        metrics.count_run(c, Run([text]), now=4000.0)
    assert c["xids"] == {"79|1|0000:3b:00.0|hardware": 4}


def test_the_lines_remembered_are_bounded():
    from slurmkit.health.checks import CheckResult
    from slurmkit.health.state import Xid

    c = {**{k: {} for k in metrics._KINDS}, "drain_open": None, "observed_open": None}
    xids = [Xid(13, "0000:3b:00.0", "Graphics Exception", origin="kmsg", line=i, seq=i) for i in range(600)]

    class Run:
        verdict = flows.Verdict(results=[CheckResult("xid", "pass", 1, "GPU-b", "0000:3b:00.0", 13)])
        state = type("S", (), {"xids": xids})()

    metrics.count_run(c, Run(), now=1.0, boot="b")
    assert c["xids"] == {"13|1|0000:3b:00.0|application": 600}
    assert len(c["xid_seen"]) == metrics.XID_SEEN_MAX


def test_healthcheck_node_state_says_whether_busy_nodes_are_skipped():
    """slurm.conf(5) HealthCheckNodeState: ANY (the default) checks every node; IDLE,
    NONDRAINED_IDLE and the like leave a busy (ALLOC or MIXED) node unchecked; CYCLE only spreads
    the runs."""
    assert [metrics.skips_busy(v) for v in ("ANY", "IDLE", "IDLE,CYCLE", "CYCLE", "ALLOC,MIXED", "ALLOC",
                                            "NONDRAINED_IDLE", "idle,mixed,alloc")] == [
        False, True, True, False, False, True, True, False]
    fams = dict((f[0], f[3]) for f in metrics.node_families("n1", None, metrics.load_counters("/nonexistent", "n1"),
                                                              [], "IDLE"))
    assert fams["slurmkit_healthcheck_skips_busy"] == [({"node": "n1", "states": "IDLE"}, 1)]
    assert fams["slurmkit_node_running_jobs"] == [({"node": "n1"}, 0)]
    fams = dict((f[0], f[3]) for f in metrics.node_families("n1", None, metrics.load_counters("/nonexistent", "n1"),
                                                              [], None))
    assert fams["slurmkit_healthcheck_skips_busy"] == []  # not known: no sample


def test_observed_drains_count_once_per_would_be_reason():
    c = {**{k: {} for k in metrics._KINDS}, "drain_open": None, "observed_open": None}
    a1 = "slurmkit: ecc_volatile_uncorrectable GPU0 GPU-a: 3"
    a2 = "slurmkit: ecc_volatile_uncorrectable GPU0 GPU-a: 5 (+1 more)"   # same reason, value moved
    b = "slurmkit: row_remap_pending GPU2 GPU-c: pending"
    for r in (a1, a2, a1):
        metrics.count_run(c, _Run(r))  # observe mode, or someone else's drain reason: not drained
    assert c["observed_drains"] == {"ecc_volatile_uncorrectable": 1}
    metrics.count_run(c, _Run(judged=False))   # unreadable: not a clean run
    metrics.count_run(c, _Run(a1))
    metrics.count_run(c, _Run(b))
    assert c["observed_drains"] == {"ecc_volatile_uncorrectable": 1, "row_remap_pending": 1}
    metrics.count_run(c, _Run())               # clean
    metrics.count_run(c, _Run(b))
    assert c["observed_drains"] == {"ecc_volatile_uncorrectable": 1, "row_remap_pending": 2}
    assert c["drains"] == {}
    assert metrics._would_be("slurmkit: nvml-timeout") == "slurmkit: nvml-timeout"


def _jobs_listed(node) -> list[tuple[str, str]]:
    nf = _samples(node.textfile_dir / "slurmkit_n1_node.prom")
    return sorted((dict(k[1])["job_id"], dict(k[1])["gpu"]) for k in nf if k[0] == "slurmkit_gpu_job_info")


def test_a_new_prolog_on_the_same_gpus_drops_a_ghost_job(node, healthy):
    """Job 101's epilog never ran (the node crashed); Slurm gives GPU 2 to job 102: 101 is gone."""
    path, snap = healthy
    node.write_config({"n1": path})
    assert node.run(node.prolog, job_id="101", gpus="0,2").returncode == 0
    assert node.run(node.prolog, job_id="103", gpus="1").returncode == 0   # other GPUs: kept
    r = node.run(node.prolog, job_id="102", gpus="2,3")
    assert r.returncode == 0 and "dropped job 101's prolog record: its GPUs are job 102's now" in r.stderr
    jobs = _jobs_listed(node)
    assert [j for j, _ in jobs] == ["102", "102", "103"]   # one job per GPU
    assert not (node.state_dir / "n1" / "job-101.json").exists()


def test_gpus_shared_by_design_keep_every_job(node, healthy):
    path, snap = healthy
    node.gres_conf.write_text(node.gres_conf.read_text() + "NodeName=n[1-2] Name=shard Count=8\n")
    node.write_config({"n1": path})
    assert node.run(node.prolog, job_id="101", gpus="0,2").returncode == 0
    r = node.run(node.prolog, job_id="102", gpus="2")
    assert r.returncode == 0 and "dropped" not in r.stderr
    assert [j for j, _ in _jobs_listed(node)] == ["101", "101", "102"]


def test_health_check_drops_records_past_their_jobs_end(node, healthy):
    """Job 101 should have ended two hours ago (SLURM_JOB_END_TIME) and its epilog never ran;
    job 102 runs until tomorrow; job 104 has no end time (an older prolog) but is recent."""
    path, snap = healthy
    node.write_config({"n1": path})
    now = time.time()
    assert node.run(node.prolog, job_id="101", gpus="0", env={"SLURM_JOB_END_TIME": str(int(now - 7200))}).returncode == 0
    assert node.run(node.prolog, job_id="102", gpus="1", env={"SLURM_JOB_END_TIME": str(int(now + 86400))}).returncode == 0
    assert node.run(node.prolog, job_id="104", gpus="3").returncode == 0
    assert json.loads((node.state_dir / "n1" / "job-102.json").read_text())["end_by_s"] == int(now + 86400)
    assert [j for j, _ in _jobs_listed(node)] == ["101", "102", "104"]
    r = node.run(node.healthcheck, job_id=None, gpus=None)
    assert r.returncode == 0 and "dropped job 101's prolog record: past its end time" in r.stderr
    assert [j for j, _ in _jobs_listed(node)] == ["102", "104"]
    assert "own trouble" not in r.stderr


def test_a_runs_textfiles_go_in_together_and_its_own_file_despite_a_bug(node, monkeypatch):
    """write_textfile: the hook's file and the node's files renamed in one batch (one fsync of the
    textfile folder); a bug in the node files still leaves the hook's own file written."""
    from slurmkit import atomicfile
    from slurmkit.hooks import config, main
    from slurmkit.hooks.log import HookLog

    run = flows.Run("prolog", "n1", {"SLURMD_NODENAME": "n1"}, config.load(node.cfg_path),
                    HookLog("prolog", "n1", "7", echo=False))  # no GPUs read: the GPU file's marker
    synced, real = [], atomicfile._fsync_dir
    monkeypatch.setattr(atomicfile, "_fsync_dir", lambda d: (synced.append(d), real(d)))
    assert main.write_textfile(run, 0, 0.25, 0) == str(node.textfile_dir / "slurmkit_n1_prolog.prom")
    assert sorted(p.name for p in node.textfile_dir.iterdir()) == [
        "slurmkit_n1_gpus.prom", "slurmkit_n1_node.prom", "slurmkit_n1_prolog.prom"]
    assert synced == [str(node.state_dir / "n1"), str(node.textfile_dir)]  # counters.json, then the batch
    assert _samples(node.textfile_dir / "slurmkit_n1_gpus.prom")[("slurmkit_gpus_read", (("node", "n1"),))] == 0

    def boom(run):
        raise RuntimeError("boom")

    monkeypatch.setattr(metrics, "_node_files", boom)
    (node.textfile_dir / "slurmkit_n1_prolog.prom").unlink()
    with pytest.raises(OSError, match="internal error writing the node metrics: RuntimeError: boom"):
        main.write_textfile(run, 1, 0.5, 0)
    assert _samples(node.textfile_dir / "slurmkit_n1_prolog.prom")[
        ("slurmkit_hook_exit_code", (("hook", "prolog"), ("node", "n1")))] == 1
