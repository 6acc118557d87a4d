"""The live path through the REAL pynvml against the test-built fake libnvidia-ml.so.1
(tests/fake_nvml): healthy, NOT_SUPPORTED, GPU_IS_LOST, hangs, no permission, no library."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from slurmkit.health.checks import evaluate
from slurmkit.health.config import load_config
from slurmkit.health.runner import read_state, run_actions
from slurmkit.health.source import Action, NvmlTimeout, SnapshotSource, SourceError


def _results(rep):
    return [(r["check"], r["gpu_index"], r["status"], r["value"]) for r in rep["results"]]


def test_healthy_live_read_carries_the_library_values(fake_nvml):
    env = fake_nvml.env("healthy", gpus=3, minors="5,9,2", procs="1:4242:512", energy_mj=5000)
    s = read_state("live", env=env)
    assert not s.replay and s.init_rc == "SUCCESS" and s.gpu_count == 3
    assert [g.minor_number for g in s.gpus] == [5, 9, 2]  # index != minor
    assert s.gpus[1].get("processes") == [{"pid": 4242, "used_mib": 512}]
    assert s.gpus[1].get("memory_used_mib") == 512 and s.gpus[0].get("memory_used_mib") == 0
    assert [g.get("total_energy_mj") for g in s.gpus] == [5000, 6000, 7000]
    assert s.gpus[0].values["total_energy_mj"].source == "nvmlDeviceGetTotalEnergyConsumption"
    assert s.gpus[0].values["memory_used_mib"].source == "nvmlDeviceGetMemoryInfo_v2"
    assert s.gpus[2].pci_bus_id == "0000:4c:00.0"
    rep = evaluate(s, load_config(gpu_count=3))
    assert rep["status"] == "pass", _results(rep)


def test_healthy_live_equals_its_snapshot_replay(fake_nvml, tmp_path):
    env = fake_nvml.env("healthy", gpus=4)
    out = tmp_path / "n1.json"
    r = subprocess.run([sys.executable, "-m", "slurmkit", "health", "snapshot", "-o", str(out), "--node", "n1"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    live = read_state("live", env=env, node="n1")
    replay = SnapshotSource(out).read()
    assert replay.replay and replay.to_json()["gpus"] == live.to_json()["gpus"]
    cfg = load_config(gpu_count=4)
    assert evaluate(replay, cfg)["results"] == evaluate(live, cfg)["results"]
    assert evaluate(replay, cfg)["status"] == "pass"


def test_not_supported_is_not_a_fail(fake_nvml):
    s = read_state("live", env=fake_nvml.env("not_supported", gpus=2))
    g = s.gpus[0]
    assert g.rc("ecc_volatile_uncorrectable") == "NOT_SUPPORTED" and g.get("ecc_volatile_uncorrectable") is None
    assert g.uuid and g.pci_bus_id
    rep = evaluate(s, load_config(gpu_count=2), before_job=True)
    assert rep["status"] == "pass", _results(rep)
    assert {r["check"] for r in rep["results"]} <= {"gpu_count", "nvml_init", "gpu_lost"}


def test_gpu_is_lost_fails_that_gpu(fake_nvml):
    s = read_state("live", env=fake_nvml.env("gpu_is_lost", gpus=4, lost=2))
    assert [g.handle_rc for g in s.gpus] == ["SUCCESS", "SUCCESS", "GPU_IS_LOST", "SUCCESS"]
    rep = evaluate(s, load_config(gpu_count=4))
    fails = [r for r in rep["results"] if r["status"] == "fail"]
    assert [(r["check"], r["gpu_index"], r["value"]) for r in fails] == [("gpu_lost", 2, "GPU_IS_LOST")]


def test_hang_in_nvml_init_times_out_within_the_deadline(fake_nvml):
    with pytest.raises(NvmlTimeout) as ei:
        read_state("live", total_deadline_s=2.0, per_call_deadline_s=2.0, env=fake_nvml.env("hang_init"))
    assert ei.value.call == "nvmlInit"
    assert ei.value.elapsed_s < 2.0 + 1.0


def test_hang_in_one_call_hits_the_per_call_deadline(fake_nvml):
    with pytest.raises(NvmlTimeout) as ei:
        read_state("live", total_deadline_s=6.0, per_call_deadline_s=1.0, env=fake_nvml.env("hang_memory"))
    assert ei.value.call == "nvmlDeviceGetMemoryInfo" and ei.value.deadline_s == 1.0
    assert ei.value.elapsed_s < 6.0


def test_no_permission_is_own_trouble(fake_nvml):
    s = read_state("live", env=fake_nvml.env("no_permission"))
    assert s.init_rc == "NO_PERMISSION"
    rep = evaluate(s, load_config(gpu_count=4))
    assert rep["status"] == "error" and not [r for r in rep["results"] if r["status"] == "fail"]


def test_library_absent_on_cpu_node_is_own_trouble_on_gpu_node_a_fail(tmp_path):
    env = dict(os.environ, LD_LIBRARY_PATH=str(tmp_path))  # an empty dir: no libnvidia-ml.so.1
    if any(os.path.exists(os.path.join(d, "libnvidia-ml.so.1"))
           for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib")):
        pytest.skip("a real libnvidia-ml.so.1 is installed on this host")
    s = read_state("live", env=env)
    assert s.init_rc == "LIBRARY_NOT_FOUND"
    assert evaluate(s, load_config())["status"] == "error"
    assert evaluate(s, load_config(gpu_count=8))["status"] == "fail"


def test_clock_event_bits_sampled_three_times_live_fail(fake_nvml):
    s = read_state("live", env=fake_nvml.env("healthy", gpus=2, clock_reasons=0x88))
    assert s.gpus[0].get("clock_event_samples") == [0x88, 0x88, 0x88]
    rep = evaluate(s, load_config())
    ce = [r for r in rep["results"] if r["check"] == "clock_events"]
    assert [(r["status"], r["value"]) for r in ce] == [("fail", "hw_slowdown,hw_power_brake_slowdown")] * 2


def _in_process(fake, env, script: str) -> dict:
    """Run ``script`` in a fresh interpreter whose dynamic loader finds the fake library."""
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


BUSY_SCRIPT = """
    import json, os
    from slurmkit.health.nvml_source import LiveNvmlSource
    from slurmkit.health.checks import evaluate
    from slurmkit.health.config import load_config
    sleeps = []
    def sleep(s):                      # injected: record, and let the leftover process exit
        sleeps.append(s)
        if os.environ.get("CLEAR_AFTER") == str(len(sleeps)):
            os.environ.pop("SLURMKIT_FAKE_NVML_PROCS", None)
            os.environ["SLURMKIT_FAKE_NVML_CLOCK_REASONS"] = "0x1"
    src = LiveNvmlSource(node="n1")
    st = src.read(before_job=True, sleep=sleep)
    src.close()
    rep = evaluate(st, load_config(), before_job=True)
    print(json.dumps({"sleeps": sleeps, "samples": st.gpus[0].get("busy_samples"),
                      "clock": st.gpus[1].get("clock_event_samples"),
                      "res": [(r["check"], r["gpu_index"], r["status"]) for r in rep["results"]
                              if r["check"] in ("leftover_processes", "memory_used", "clock_events")]}))
"""


def test_leftover_process_fails_after_three_tries_two_seconds_apart(fake_nvml):
    out = _in_process(fake_nvml, fake_nvml.env("healthy", gpus=2, procs="0:777:300"), BUSY_SCRIPT)
    t = load_config().thresholds
    assert out["sleeps"] == [t["busy_interval_s"]] * (t["busy_tries"] - 1)
    assert [s["pids"] for s in out["samples"]] == [[777]] * t["busy_tries"]
    assert ["leftover_processes", 0, "fail"] in out["res"] and ["memory_used", 0, "fail"] in out["res"]
    assert ["leftover_processes", 1, "pass"] in out["res"]


def test_process_gone_on_second_try_passes(fake_nvml):
    env = fake_nvml.env("healthy", gpus=2, procs="0:777:300")
    env["CLEAR_AFTER"] = "1"
    out = _in_process(fake_nvml, env, BUSY_SCRIPT)
    assert out["sleeps"] == [load_config().t("busy_interval_s")]
    assert [s["pids"] for s in out["samples"]] == [[777], []]
    assert ["leftover_processes", 0, "pass"] in out["res"] and ["memory_used", 0, "pass"] in out["res"]


def test_transient_hw_clock_bit_warns(fake_nvml):
    env = fake_nvml.env("healthy", gpus=2, clock_reasons=0x08)
    env["CLEAR_AFTER"] = "1"
    script = BUSY_SCRIPT.replace("src.read(before_job=True", "src.read(before_job=False")
    out = _in_process(fake_nvml, env, script)
    assert out["sleeps"][0] == load_config().t("clock_event_interval_s")
    assert out["clock"] == [0x08, 0x1, 0x1]
    assert ["clock_events", 1, "warn"] in out["res"]


def test_actions_reach_the_library_live_and_are_would_in_replay(fake_nvml, tmp_path, corpus):
    log = tmp_path / "nvml-actions.log"
    env = fake_nvml.env("healthy", gpus=2, log=log)
    acts = [Action("reset_app_clocks", gpu_index=1), Action("reset_locked_clocks", gpu_index=0),
            Action("set_power_limit", gpu_index=1, power_limit_w=650.0), Action("enable_accounting", gpu_index=0)]
    lines = run_actions(acts, "live", env=env)
    assert lines == [a.describe() for a in acts]
    assert log.read_text().split("\n")[:-1] == ["reset_app_clocks 1 0", "reset_locked_clocks 0 0",
                                                 "set_power_limit_mw 1 650000", "set_accounting_mode 0 1"]
    replay = run_actions(acts, corpus / "nvidia-smi-q" / "tesla-t4.xml")
    assert all(x.startswith("would ") for x in replay) and "set power limit to 650.0 W on GPU1" in replay[2]


def test_kill_action_live_kills_the_pid(fake_nvml):
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        run_actions([Action("kill", pid=victim.pid)], "live", env=fake_nvml.env("healthy"))
        assert victim.wait(timeout=10) == -9
    finally:
        if victim.poll() is None:
            victim.kill()


def test_worker_crash_is_own_trouble(fake_nvml, tmp_path):
    env = fake_nvml.env("healthy")
    env["PYTHONPATH"] = str(tmp_path)  # a broken pynvml shadows the real one: a bug, not hardware
    (tmp_path / "pynvml.py").write_text("raise RuntimeError('broken install')\n")
    with pytest.raises(SourceError) as ei:
        read_state("live", env=env)
    assert "broken install" in str(ei.value)


def test_accounting_stats_per_process_when_accounting_is_on(fake_nvml):
    s = read_state("live", env=fake_nvml.env("healthy", gpus=2, accounting="1:4242:87:40:30000:65000,1:4243:5:1:100:20"))
    assert s.gpus[0].get("accounting_mode") is False and s.gpus[0].get("accounting") is None
    assert s.gpus[1].get("accounting_mode") is True
    assert s.gpus[1].get("accounting") == [
        {"pid": 4242, "gpu_util_pct": 87, "memory_util_pct": 40, "max_memory_mib": 30000, "time_ms": 65000,
         "start_time_us": 1700000000000000, "running": False},
        {"pid": 4243, "gpu_util_pct": 5, "memory_util_pct": 1, "max_memory_mib": 100, "time_ms": 20,
         "start_time_us": 1700000000000000, "running": False}]
    assert s.gpus[1].values["accounting"].source == "nvmlDeviceGetAccountingStats"


def _sysfs(root, functions):
    """A sysfs tree with PCI functions: {bus_id: (vendor, class, numa_node)} (our own fixture)."""
    for bus, (vendor, cls, numa) in functions.items():
        d = root / "bus" / "pci" / "devices" / bus
        d.mkdir(parents=True)
        (d / "vendor").write_text(vendor + "\n")
        (d / "class").write_text(cls + "\n")
        (d / "numa_node").write_text(f"{numa}\n")
    return root


def test_pci_functions_and_numa_from_sysfs(fake_nvml, tmp_path):
    fns = {"0000:19:00.0": ("0x10de", "0x030200", 0), "0000:3b:00.0": ("0x10de", "0x030200", 1),
           "0000:4c:00.0": ("0x10de", "0x030200", 1), "0000:5d:00.0": ("0x10de", "0x030200", -1),
           "0000:5e:00.0": ("0x15b3", "0x020700", 1)}  # a NIC: not counted
    root = _sysfs(tmp_path / "sys", fns)
    s = read_state("live", env=fake_nvml.env("healthy", gpus=4), sysfs=root)
    assert s.pci_devices == sorted(b for b, f in fns.items() if f[0] == "0x10de")
    assert [g.get("numa_node") for g in s.gpus] == [fns[g.pci_bus_id][2] if fns[g.pci_bus_id][2] >= 0 else None
                                                    for g in s.gpus]
    assert evaluate(s, load_config(gpu_count=4))["status"] == "pass"
    # one GPU still on the bus but gone from NVML
    s = read_state("live", env=fake_nvml.env("healthy", gpus=3), sysfs=root)
    rep = evaluate(s, load_config(gpu_count=4))
    counts = [r for r in rep["results"] if r["check"] == "gpu_count"]
    assert [(r["status"], r["value"], r["limit"]) for r in counts] == [("fail", 3, 4), ("fail", 3, 4)]


def test_worker_stuck_before_nvml_is_own_trouble_not_a_timeout(fake_nvml, tmp_path):
    env = fake_nvml.env("healthy")
    env["PYTHONPATH"] = str(tmp_path)  # an import that never finishes: slurmkit's trouble, no drain
    (tmp_path / "pynvml.py").write_text("import time\nwhile True:\n    time.sleep(1)\n")
    with pytest.raises(SourceError) as ei:
        read_state("live", total_deadline_s=2.0, per_call_deadline_s=0.5, env=env)
    assert "did not start within 2 s" in str(ei.value)


def test_gpu_recovery_action_is_read_live_recorded_replayed_and_judged(fake_nvml, tmp_path):
    """nvmlDeviceGetFieldValues(NVML_FI_DEV_GET_GPU_RECOVERY_ACTION) through the real pynvml:
    NONE passes, GPU_RESET / DRAIN_AND_RESET fail that GPU with the action in words; the snapshot
    keeps the value and its call, and its replay judges the same."""
    env = fake_nvml.env("healthy", gpus=4, recovery="1:1,2:4")
    out = tmp_path / "n1.json"
    r = subprocess.run([sys.executable, "-m", "slurmkit", "health", "snapshot", "-o", str(out), "--node", "n1"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    live = read_state("live", env=env, node="n1")
    assert [g.get("gpu_recovery_action") for g in live.gpus] == ["NONE", "GPU_RESET", "DRAIN_AND_RESET", "NONE"]
    assert live.gpus[1].values["gpu_recovery_action"].source == "nvmlDeviceGetFieldValues"
    recorded = json.loads(out.read_text())["gpus"][1]["values"]["gpu_recovery_action"]
    assert recorded == {"value": "GPU_RESET", "source": "nvmlDeviceGetFieldValues", "rc": "SUCCESS"}
    replay = SnapshotSource(out).read()
    cfg = load_config(gpu_count=4)
    assert evaluate(replay, cfg)["results"] == evaluate(live, cfg)["results"]
    from slurmkit.health.checks import run_checks

    got = [(r.gpu_index, r.status, r.reason()) for r in run_checks(replay, cfg) if r.check == "gpu_recovery_action"]
    b1, b2 = replay.gpus[1].pci_bus_id, replay.gpus[2].pci_bus_id
    assert got == [(0, "pass", f"slurmkit: gpu_recovery_action GPU0 {replay.gpus[0].pci_bus_id}: no recovery action"),
                   (1, "fail", f"slurmkit: gpu_recovery_action GPU1 {b1}: driver asks for a GPU reset"),
                   (2, "fail", f"slurmkit: gpu_recovery_action GPU2 {b2}: driver asks to drain and reset the GPU"),
                   (3, "pass", f"slurmkit: gpu_recovery_action GPU3 {replay.gpus[3].pci_bus_id}: no recovery action")]
    assert evaluate(replay, cfg)["status"] == "fail"


@pytest.mark.parametrize("knob, rc", [("old", "INVALID_ARGUMENT"), ("unsupported", "NOT_SUPPORTED")])
def test_driver_without_the_recovery_action_field_is_skipped_not_own_trouble(fake_nvml, knob, rc):
    """A driver older than the field answers in the field's own nvmlReturn (an unknown field id,
    or NOT_SUPPORTED): no result, not slurmkit's trouble, the node passes."""
    s = read_state("live", env=fake_nvml.env("healthy", gpus=2, recovery=knob))
    assert [(g.rc("gpu_recovery_action"), g.get("gpu_recovery_action")) for g in s.gpus] == [(rc, None)] * 2
    rep = evaluate(s, load_config(gpu_count=2))
    assert rep["status"] == "pass" and rep["errors"] == []
    assert not [r for r in rep["results"] if r["check"] in ("gpu_recovery_action", "nvml_error")]
