"""Unit tests: one per check and per threshold edge, over states built here (our own fixtures)."""

from __future__ import annotations

import pytest

from slurmkit.health import checks as C
from slurmkit.health.config import check_ids, defaults, load_config
from slurmkit.health.state import GpuState, NodeState, Xid
from slurmkit.profile.health import Health

DEFAULTS = defaults()["thresholds"]


def node(*gpus: GpuState, **kw) -> NodeState:
    s = NodeState(node="n1", source="test", gpus=list(gpus), gpu_count=len(gpus))
    for k, v in kw.items():
        setattr(s, k, v)
    return s


def gpu(i=0, **values) -> GpuState:
    g = GpuState(index=i, uuid=f"GPU-{i:04d}", pci_bus_id=f"0000:{0x19 + i:02x}:00.0", minor_number=7 - i)
    for k, v in values.items():
        g.put(k, v)
    return g


def only(results, check):
    out = [r for r in results if r.check == check]
    return out


def status_of(fn, state, cfg=None, **kw):
    res = fn(state, cfg or load_config(), **kw)
    return [r.status for r in res]


# ---- data file / config -------------------------------------------------------------------

def test_every_check_id_in_the_data_file_has_a_function_and_back():
    ids = set(check_ids())
    assert set(C.CHECKS) == ids - {"nvml-timeout"}


def test_xid_names_from_data_file():
    cfg = load_config()
    assert cfg.xid_names[79] == "GPU fell off the bus" and cfg.xid_names[94] == "contained error"


SITE = """[cluster]
name = "c"
[node_types.t]
gpu_model = "h100"
gpu_count = 2
[partitions.gpu]
nodes = "n[1-2]"
node_type = "t"
"""


@pytest.mark.parametrize("health,key,line", [
    ('[health.thresholds]\nnope = 1', "health.thresholds.nope", 11),
    ('[health.thresholds]\nretired_pages_fail = "sixty"', "health.thresholds.retired_pages_fail", 11),
    ('[health.checks]\necc_typo = false', "health.checks.ecc_typo", 11),
    ('[health.checks]\nxid = "no"', "health.checks.xid", 11),
    ('[health]\npower_limit_w = "700"', "health.power_limit_w", 11),
    ('[health]\nmode = "loud"', "health.mode", 11),
    ('[health]\ncolour = 1', "health.colour", 11),
    ('[health]\nmig = false\nper_call_deadline_s = "3"', "health.per_call_deadline_s", 12),
    ('[health]\nbaseline_xids = "ignore"', "health.baseline_xids", 11),
    ('[health]\nbaseline_xids = true', "health.baseline_xids", 11),
])
def test_bad_health_value_fails_at_profile_load_with_file_line_key(tmp_path, health, key, line):
    from slurmkit.profile import ProfileError, load_profile

    site = tmp_path / "site.toml"
    site.write_text(SITE + "\n" + health + "\n")
    with pytest.raises(ProfileError) as ei:
        load_profile(site)
    assert (ei.value.file, ei.value.line, ei.value.key) == (str(site), line, key)
    assert str(ei.value).startswith(f"{site}:{line}: {key}: ")


def test_profile_health_section_reaches_the_checks(tmp_path):
    from slurmkit.profile import load_profile

    site = tmp_path / "site.toml"
    site.write_text(SITE + '[health]\npower_limit_w = 600\ndeadline_s = 2.5\n'
                    '[health.thresholds]\nretired_pages_fail = 7\n[health.checks]\nxid = false\n')
    cfg = load_config(load_profile(site).health, gpu_count=2)
    assert cfg.t("retired_pages_fail") == 7 and cfg.deadline_s == 2.5
    assert cfg.expect == {"power_limit_w": 600, "expected_gpu_count": 2}
    assert cfg.enabled["xid"] is False and cfg.enabled["persistence_mode"] is True
    # the hooks config's [checks] switches come last
    assert load_config(load_profile(site).health, checks={"xid": True}).enabled["xid"] is True


def test_disabled_check_does_not_run():
    s = node(gpu(persistence_mode=False))
    assert only(C.run_checks(s, load_config()), "persistence_mode")[0].status == "warn"
    assert not only(C.run_checks(s, load_config(Health(**{"checks": {"persistence_mode": False}}))), "persistence_mode")


# ---- node level -----------------------------------------------------------------------------

def test_gpu_count_vs_gres_and_pci():
    s = node(gpu(0), gpu(1))
    assert status_of(C.check_gpu_count, s, load_config(gpu_count=2)) == ["pass"]
    assert status_of(C.check_gpu_count, s, load_config(gpu_count=3)) == ["fail"]
    s.pci_devices = ["0000:19:00.0", "0000:1a:00.0", "0000:1b:00.0"]  # one on the bus, not in NVML
    r = C.check_gpu_count(s, load_config())
    assert [x.status for x in r] == ["fail"] and r[0].value == 2 and r[0].limit == 3


def test_nvml_init_failure_gpu_node_vs_cpu_node():
    s = node(init_rc="DRIVER_NOT_LOADED", gpu_count=None)
    assert status_of(C.check_nvml_init, s, load_config(gpu_count=4)) == ["fail"]
    assert status_of(C.check_nvml_init, s, load_config()) == []
    rep = C.evaluate(node(init_rc="LIBRARY_NOT_FOUND", gpu_count=None), load_config())
    assert rep["status"] == "error" and "NVML library not found" in rep["errors"][0]
    # no permission is our own trouble even on a GPU node
    rep = C.evaluate(node(init_rc="NO_PERMISSION", gpu_count=None), load_config(gpu_count=4))
    assert rep["status"] == "error"


def test_xid_table_ignore_fail_warn_and_gpu_attribution():
    s = node(gpu(0), gpu(1))
    s.xids = [Xid(13, "0000:19:00.0", "app"), Xid(79, "0000:1a:00.0", "off the bus"),
              Xid(79, "0000:1a:00.0", "again"), Xid(92, "0000:19:00.0", "sbe rate"),
              Xid(162, "0000:19:00.0", "PSHC reengaged")]
    res = C.check_xid(s, load_config())
    by = {(r.value, r.gpu_index): r for r in res}
    assert by[(13, 0)].status == "pass"
    assert by[(79, 1)].status == "fail" and "x2" in by[(79, 1)].message and by[(79, 1)].uuid == "GPU-0001"
    assert by[(92, 0)].status == "pass"  # the catalog: IGNORE
    assert by[(162, 0)].status == "warn"  # the catalog names no action


def test_driver_pin():
    s = node(gpu(), driver_version="535.161.08")
    assert status_of(C.check_driver_version, s, load_config(Health(**{"driver_version": "535.161.08"}))) == ["pass"]
    assert status_of(C.check_driver_version, s, load_config(Health(**{"driver_version": "550.54.15"}))) == ["warn"]
    assert status_of(C.check_driver_version, s) == []


# ---- per GPU --------------------------------------------------------------------------------

def test_gpu_lost_and_unknown_error():
    lost = GpuState(index=1, handle_rc="GPU_IS_LOST")
    unk = GpuState(index=2, handle_rc="UNKNOWN")
    g = gpu(0)
    g.put("temperature_c", None, rc="GPU_IS_LOST")
    res = C.check_gpu_lost(node(g, lost, unk), load_config())
    assert [(r.gpu_index, r.status, r.value) for r in res] == [
        (0, "fail", "GPU_IS_LOST"), (1, "fail", "GPU_IS_LOST"), (2, "fail", "UNKNOWN")]


def test_reset_required_inforom_persistence():
    assert status_of(C.check_reset_required, node(gpu(reset_required=True))) == ["fail"]
    assert status_of(C.check_reset_required, node(gpu(reset_required=False))) == ["pass"]
    assert status_of(C.check_inforom, node(gpu(inforom_valid=False))) == ["fail"]
    assert status_of(C.check_inforom, node(gpu(inforom_valid=True))) == ["pass"]
    assert status_of(C.check_persistence_mode, node(gpu(persistence_mode=False))) == ["warn"]


def test_not_supported_values_give_no_verdict():
    g = gpu()
    g.put("ecc_volatile_uncorrectable", None, rc="NOT_SUPPORTED")
    g.put("remap_pending", None, rc="NOT_SUPPORTED")
    s = node(g)
    assert C.check_ecc_volatile_uncorrectable(s, load_config()) == []
    assert C.check_row_remap_pending(s, load_config()) == []
    assert C.evaluate(s, load_config())["status"] == "pass"


def test_ecc_volatile_uncorrectable_edge():
    assert status_of(C.check_ecc_volatile_uncorrectable, node(gpu(ecc_volatile_uncorrectable=0))) == ["pass"]
    assert status_of(C.check_ecc_volatile_uncorrectable, node(gpu(ecc_volatile_uncorrectable=1))) == ["fail"]


def test_ecc_sram_correctable_threshold_edge():
    t = DEFAULTS["ecc_sram_correctable_warn"]
    assert status_of(C.check_ecc_sram_correctable, node(gpu(ecc_aggregate_sram_correctable=t))) == ["pass"]
    assert status_of(C.check_ecc_sram_correctable, node(gpu(ecc_aggregate_sram_correctable=t + 1))) == ["warn"]
    cfg = load_config(Health(**{"thresholds": {"ecc_sram_correctable_warn": t + 1}}))
    assert status_of(C.check_ecc_sram_correctable, node(gpu(ecc_aggregate_sram_correctable=t + 1)), cfg) == ["pass"]


def test_ecc_aggregate_uncorrectable_rma_warn():
    t = DEFAULTS["ecc_aggregate_uncorrectable_warn"]
    assert status_of(C.check_ecc_aggregate_uncorrectable, node(gpu(ecc_aggregate_uncorrectable=t - 1))) == ["pass"]
    assert status_of(C.check_ecc_aggregate_uncorrectable, node(gpu(ecc_aggregate_uncorrectable=t))) == ["warn"]


def test_retired_pages_pending_and_count_edge():
    assert status_of(C.check_retired_pages_pending, node(gpu(retired_pages_pending=True))) == ["fail"]
    t = DEFAULTS["retired_pages_fail"]
    assert status_of(C.check_retired_pages_count, node(gpu(retired_pages_sbe=t - 2, retired_pages_dbe=1))) == ["pass"]
    r = C.check_retired_pages_count(node(gpu(retired_pages_sbe=t - 1, retired_pages_dbe=1)), load_config())
    assert r[0].status == "fail" and r[0].value == t and r[0].limit == t


def test_row_remap_failure_uncorrectable_edge():
    assert status_of(C.check_row_remap_failure, node(gpu(remap_failure=True))) == ["fail"]
    t = DEFAULTS["remap_uncorrectable_fail"]
    assert status_of(C.check_row_remap_uncorrectable, node(gpu(remap_uncorrectable_rows=t - 1))) == ["pass"]
    assert status_of(C.check_row_remap_uncorrectable, node(gpu(remap_uncorrectable_rows=t))) == ["fail"]


@pytest.mark.parametrize("unc,dbe,status", [(0, 0, "warn"), (1, 0, "fail"), (0, 2, "fail")])
def test_row_remap_pending(unc, dbe, status):
    g = gpu(remap_pending=True, remap_uncorrectable_rows=unc, ecc_volatile_uncorrectable=dbe, remap_correctable_rows=3)
    r = C.check_row_remap_pending(node(g), load_config())
    assert r[0].status == status
    if status == "warn":
        assert "reboot when idle" in r[0].message


def test_clock_events_single_sample_warns_naming_the_bit():
    r = C.check_clock_events(node(gpu(clock_event_reasons=0x40)), load_config())
    assert r[0].status == "warn" and r[0].value == "hw_thermal_slowdown"


def test_clock_events_three_of_three_fails_some_warns_sw_cap_ignored():
    g = gpu(clock_event_reasons=0x88, clock_event_samples=[0x88, 0x88, 0x80])
    r = C.check_clock_events(node(g), load_config())[0]
    assert r.status == "fail" and r.value == "hw_power_brake_slowdown"
    g = gpu(clock_event_reasons=0x08, clock_event_samples=[0x08, 0x00, 0x00])
    assert C.check_clock_events(node(g), load_config())[0].status == "warn"
    g = gpu(clock_event_reasons=0x04, clock_event_samples=[0x04])  # SW power cap only
    assert C.check_clock_events(node(g), load_config())[0].status == "pass"


def test_app_clocks_vs_profile_else_default():
    g = gpu(app_clock_graphics_mhz=1755, app_clock_mem_mhz=2619,
            default_app_clock_graphics_mhz=1980, default_app_clock_mem_mhz=2619)
    assert status_of(C.check_app_clocks, node(g)) == ["warn", "pass"]
    cfg = load_config(Health(**{"app_clock_graphics_mhz": 1755}))
    assert status_of(C.check_app_clocks, node(g), cfg) == ["pass", "pass"]


def test_power_limit_tolerance_edge():
    tol = DEFAULTS["power_limit_tolerance_w"]
    assert status_of(C.check_power_limit, node(gpu(power_limit_w=700 - tol, default_power_limit_w=700))) == ["pass"]
    assert status_of(C.check_power_limit, node(gpu(power_limit_w=600.0, default_power_limit_w=700))) == ["warn"]
    assert status_of(C.check_power_limit, node(gpu(power_limit_w=600.0, default_power_limit_w=700)),
                     load_config(Health(**{"power_limit_w": 600}))) == ["pass"]


def test_temperature_margin_edge():
    assert status_of(C.check_temperature_margin, node(gpu(slowdown_margin_c=1))) == ["pass"]
    assert status_of(C.check_temperature_margin, node(gpu(slowdown_margin_c=0))) == ["fail"]


def test_temperature_idle_edge_and_busy_gpu_skipped():
    t = DEFAULTS["temperature_idle_max_c"]
    assert status_of(C.check_temperature_idle, node(gpu(temperature_c=t, processes=[], utilization_gpu_pct=0))) == ["pass"]
    assert status_of(C.check_temperature_idle, node(gpu(temperature_c=t + 1, processes=[], utilization_gpu_pct=0))) == ["fail"]
    assert status_of(C.check_temperature_idle, node(gpu(temperature_c=t + 1, processes=[], utilization_gpu_pct=90))) == []


def test_mig_pending_and_profile():
    assert status_of(C.check_mig_mode, node(gpu(mig_current=False, mig_pending=True))) == ["fail"]
    assert status_of(C.check_mig_mode, node(gpu(mig_current=True, mig_pending=True))) == ["pass"]
    assert status_of(C.check_mig_mode, node(gpu(mig_current=True, mig_pending=True)), load_config(Health(**{"mig": False}))) == ["fail"]


def test_leftover_processes_and_memory_only_before_a_job():
    g = gpu(memory_used_mib=500, processes=[{"pid": 42, "used_mib": 490}])
    assert C.check_leftover_processes(node(g), load_config()) == []
    assert status_of(C.check_leftover_processes, node(g), before_job=True) == ["fail"]
    assert status_of(C.check_memory_used, node(g), before_job=True) == ["fail"]


def test_busy_samples_clear_on_a_later_try_pass():
    g = gpu(busy_samples=[{"memory_used_mib": 900, "pids": [42]}, {"memory_used_mib": 0, "pids": []}])
    assert status_of(C.check_leftover_processes, node(g), before_job=True) == ["pass"]
    assert status_of(C.check_memory_used, node(g), before_job=True) == ["pass"]


def test_memory_used_edge_reserved_not_counted():
    t = DEFAULTS["memory_used_max_mib"]
    ok = gpu(memory_used_mib=t, memory_reserved_mib=551, processes=[])
    display = gpu(memory_used_mib=t + 1, memory_reserved_mib=0, processes=[])
    bad = gpu(memory_used_mib=t + 1, memory_reserved_mib=0, processes=[{"pid": 42, "used_mib": t + 1}])
    assert status_of(C.check_memory_used, node(ok), before_job=True) == ["pass"]
    assert status_of(C.check_memory_used, node(display), before_job=True) == ["warn"]  # no compute process
    assert status_of(C.check_memory_used, node(bad), before_job=True) == ["fail"]


def test_pcie_width_bare_metal_fails_vm_warns():
    assert status_of(C.check_pcie_width, node(gpu(pcie_link_width=16, pcie_link_width_max=16))) == ["pass"]
    assert status_of(C.check_pcie_width, node(gpu(pcie_link_width=8, pcie_link_width_max=16,
                                                  virtualization_mode="None"))) == ["fail"]
    assert status_of(C.check_pcie_width, node(gpu(pcie_link_width=8, pcie_link_width_max=16,
                                                  virtualization_mode="Pass-Through"))) == ["warn"]


def test_pcie_gen_only_under_load():
    t = DEFAULTS["pcie_gen_load_pct"]
    assert status_of(C.check_pcie_gen, node(gpu(pcie_link_gen=1, pcie_link_gen_max=4, utilization_gpu_pct=0))) == []
    assert status_of(C.check_pcie_gen, node(gpu(pcie_link_gen=1, pcie_link_gen_max=4, utilization_gpu_pct=t))) == ["fail"]
    assert status_of(C.check_pcie_gen, node(gpu(pcie_link_gen=4, pcie_link_gen_max=4, utilization_gpu_pct=99))) == ["pass"]


def test_nvlink_down_vs_peers_and_pin():
    a = gpu(0, nvlink_active=[True] * 18)
    b = gpu(1, nvlink_active=[True] * 17 + [False])
    r = C.check_nvlink_down(node(a, b), load_config())
    assert [(x.gpu_index, x.status, x.value, x.limit) for x in r] == [(0, "pass", 18, 18), (1, "fail", 17, 18)]
    r = C.check_nvlink_down(node(a, b), load_config(Health(**{"nvlink_active_links": 12})))
    assert [x.status for x in r] == ["pass", "pass"]


@pytest.mark.parametrize("state,status,verdict", [("Completed", "Success", "pass"), ("In Progress", "Success", "fail"),
                                                   ("Completed", "UNKNOWN", "fail")])
def test_fabric_state(state, status, verdict):
    assert status_of(C.check_fabric_state, node(gpu(fabric_state=state, fabric_status=status))) == [verdict]
    assert status_of(C.check_fabric_state, node(gpu(fabric_state="Not Supported"))) == []


def test_vbios_pin():
    assert status_of(C.check_vbios_version, node(gpu(vbios_version="96.00.74.00.0D")),
                     load_config(Health(**{"vbios_version": "96.00.74.00.0D"}))) == ["pass"]
    assert status_of(C.check_vbios_version, node(gpu(vbios_version="96.00.74.00.0D")),
                     load_config(Health(**{"vbios_version": "96.00.89.00.01"}))) == ["warn"]


# ---- evaluate ---------------------------------------------------------------------------------

def test_evaluate_shape_and_precedence():
    g = gpu(ecc_volatile_uncorrectable=3, persistence_mode=False)
    rep = C.evaluate(node(g), load_config())
    assert set(rep) == {"node", "source", "status", "results", "errors"}
    assert rep["status"] == "fail"
    bad = [r for r in rep["results"] if r["status"] == "fail"][0]
    assert set(bad) >= {"check", "status", "gpu_index", "uuid", "pci_bus_id", "value", "limit"}
    assert (bad["check"], bad["gpu_index"], bad["uuid"], bad["pci_bus_id"], bad["value"], bad["limit"]) == \
        ("ecc_volatile_uncorrectable", 0, "GPU-0000", "0000:19:00.0", 3, 0)
    assert C.CheckResult(**bad).reason() == \
        "slurmkit: ecc_volatile_uncorrectable GPU0 0000:19:00.0: 3 uncorrectable ECC errors since boot"
    assert C.overall([], ["oops"]) == "error"
    assert C.overall([C.CheckResult("x", "fail")], ["oops"]) == "fail"
    assert C.overall([C.CheckResult("x", "warn")]) == "warn"


@pytest.mark.parametrize("result, want", [
    (C.CheckResult("pcie_width", "fail", 3, "GPU-u", "0000:3b:00.0", 8, 16, "PCIe x8 of x16"),
     "slurmkit: pcie_width GPU3 0000:3b:00.0: x8 of x16"),
    (C.CheckResult("xid", "fail", 1, "GPU-u", "0000:9b:00.0", 79, None, "Xid 79 (GPU fell off the bus) x1"),
     "slurmkit: xid GPU1 0000:9b:00.0: Xid 79 GPU fell off the bus"),
    (C.CheckResult("xid", "fail", 1, "GPU-u", "0000:9b:00.0", 119, None, "Xid 119 (GSP RPC timeout) x3"),
     "slurmkit: xid GPU1 0000:9b:00.0: Xid 119 GSP RPC timeout (x3)"),
    (C.CheckResult("row_remap_pending", "fail", 1, "GPU-u", "0000:07:00.0",
                   "pending, 2 uncorrectable rows, 0 volatile DBE", False, "drain and reset"),
     "slurmkit: row_remap_pending GPU1 0000:07:00.0: 2 uncorrectable rows pending remap"),
])
def test_drain_reason_reads_in_sinfo_R(result, want):
    """``slurmkit: <check> GPU<i> <PCI bus id>: <meaning>``, the meaning in words within the first
    ~60 characters ``sinfo -R`` shows; the UUID is not in it (the hooks log it)."""
    got = result.reason()
    assert got == want
    assert "GPU-u" not in got
    assert got.index(result.meaning()) < 60  # sinfo -R's reason column shows the meaning


def test_drain_reason_from_a_real_capture_names_the_bus_and_the_rows(corpus):
    from slurmkit.health.source import load_capture

    state = load_capture(corpus / "nvidia-smi-q" / "a10_row_remap_pending.txt")
    bad = [r for r in C.run_checks(state, load_config()) if r.check == "row_remap_pending"]
    unc = state.gpus[0].get("remap_uncorrectable_rows")
    assert bad[0].reason() == f"slurmkit: row_remap_pending GPU0 0000:07:00.0: {unc} uncorrectable rows pending remap"


def test_every_nvml_return_code_is_classified():
    import pynvml

    from slurmkit.health.nvml_returns import RETURN_CODES

    names = {k[len("NVML_ERROR_"):] for k in dir(pynvml) if k.startswith("NVML_ERROR_")}
    assert names - set(RETURN_CODES) == set()
    assert {RETURN_CODES[n] for n in ("INSUFFICIENT_POWER", "IRQ_ISSUE", "GPU_IS_LOST", "RESET_REQUIRED")} == {"hardware"}
    assert RETURN_CODES["NO_PERMISSION"] == "own" and RETURN_CODES["NOT_SUPPORTED"] == "absent"


def _gpu(i, handle_rc="SUCCESS"):
    g = GpuState(index=i, uuid=f"GPU-{i}", pci_bus_id=f"0000:{0x19 + i:02x}:00.0", handle_rc=handle_rc)
    return g


def test_hardware_return_codes_fail_that_gpu_own_ones_are_own_trouble():
    st = NodeState(node="n1", source="t", init_rc="SUCCESS")
    g0, g1, g2, g3 = _gpu(0), _gpu(1), _gpu(2, "IRQ_ISSUE"), _gpu(3, "NO_PERMISSION")
    g0.put("power_draw_w", 300.0, source="nvmlDeviceGetPowerUsage")
    g1.put("power_draw_w", None, source="nvmlDeviceGetPowerUsage", rc="INSUFFICIENT_POWER")
    g1.put("ecc_volatile_uncorrectable", None, source="nvmlDeviceGetTotalEccErrors", rc="NOT_SUPPORTED")
    st.gpus = [g0, g1, g2, g3]
    cfg = load_config(gpu_count=4)
    fails = [r for r in C.run_checks(st, cfg) if r.status == "fail"]
    assert [(r.check, r.gpu_index, r.value) for r in fails] == [("nvml_error", 1, "INSUFFICIENT_POWER"),
                                                               ("nvml_error", 2, "IRQ_ISSUE")]
    assert fails[0].reason() == "slurmkit: nvml_error GPU1 0000:1a:00.0: nvmlDeviceGetPowerUsage: INSUFFICIENT_POWER"
    assert C.own_trouble(st, cfg) == ["GPU3: nvmlDeviceGetHandleByIndex_v2: NO_PERMISSION"]


def test_ecc_mode_pending_change_fails_off_warns():
    st = NodeState(node="n1", source="t", init_rc="SUCCESS")
    on, off, pending = _gpu(0), _gpu(1), _gpu(2)
    for g, (cur, pend) in ((on, (True, True)), (off, (False, False)), (pending, (True, False))):
        g.put("ecc_enabled", cur, source="nvmlDeviceGetEccMode")
        g.put("ecc_pending", pend, source="nvmlDeviceGetEccMode")
    st.gpus = [on, off, pending, _gpu(3)]  # GPU3: no ECC mode (not supported): no result
    got = [(r.gpu_index, r.status) for r in C.run_checks(st, load_config()) if r.check == "ecc_mode"]
    assert got == [(0, "pass"), (1, "warn"), (2, "fail")]
    bad = next(r for r in C.run_checks(st, load_config()) if r.check == "ecc_mode" and r.status == "fail")
    assert bad.reason() == "slurmkit: ecc_mode GPU2 0000:1b:00.0: ECC mode change pending a reset (current on, pending off)"


def test_memory_used_without_a_compute_process_warns_not_fails():
    st = NodeState(node="n1", source="t", init_rc="SUCCESS")
    display, leftover = _gpu(0), _gpu(1)
    display.put("busy_samples", [{"memory_used_mib": 300, "pids": []}] * 3, source="t")
    leftover.put("busy_samples", [{"memory_used_mib": 300, "pids": [42]}] * 3, source="t")
    st.gpus = [display, leftover]
    got = {r.gpu_index: r.status for r in C.run_checks(st, load_config(), before_job=True) if r.check == "memory_used"}
    assert got == {0: "warn", 1: "fail"}


@pytest.mark.parametrize("action, status, words", [
    ("NONE", "pass", "no recovery action"),
    ("GPU_RESET", "fail", "driver asks for a GPU reset"),
    ("NODE_REBOOT", "fail", "driver asks for a node reboot"),
    ("DRAIN_P2P", "fail", "driver asks to drain peer-to-peer work"),
    ("DRAIN_AND_RESET", "fail", "driver asks to drain and reset the GPU"),
    ("ACTION_9", "fail", "driver asks for recovery action ACTION_9"),  # a newer driver's value
])
def test_gpu_recovery_action_anything_but_none_fails_in_words(action, status, words):
    st = node(gpu(0), gpu(1, gpu_recovery_action=action), gpu(2, persistence_mode=True))
    st.gpus[2].put("gpu_recovery_action", None, source="nvmlDeviceGetFieldValues", rc="INVALID_ARGUMENT")
    res = only(C.run_checks(st, load_config()), "gpu_recovery_action")
    assert [(r.gpu_index, r.status, r.value) for r in res] == [(1, status, action)]  # GPU0 unread, GPU2 older driver
    assert res[0].reason() == f"slurmkit: gpu_recovery_action GPU1 0000:1a:00.0: {words}"
    assert C.own_trouble(st, load_config()) == []


def test_field_value_return_codes_of_an_older_driver_are_absent():
    from slurmkit.health.nvml_returns import FIELD_ABSENT_RCS, field_kind, kind

    assert {"NOT_SUPPORTED", "INVALID_ARGUMENT", "FUNCTION_NOT_FOUND"} <= FIELD_ABSENT_RCS
    assert (field_kind("INVALID_ARGUMENT"), kind("INVALID_ARGUMENT")) == ("absent", "own")
    assert field_kind("GPU_IS_LOST") == "hardware" and field_kind("SUCCESS") == "ok"


@pytest.mark.parametrize("text, name", [("None", "NONE"), ("Reset", "GPU_RESET"), ("GPU Reset", "GPU_RESET"),
                                        ("Node Reboot", "NODE_REBOOT"), ("Drain P2P", "DRAIN_P2P"),
                                        ("Drain and Reset", "DRAIN_AND_RESET"), ("Bus Reset", "BUS_RESET")])
def test_nvidia_smi_recovery_action_words_map_to_nvml_names(text, name):
    from slurmkit.health.nvsmi import recovery_action_name

    assert recovery_action_name(text) == name


def test_baseline_xids_log_by_default_drain_when_configured(tmp_path):
    """The current boot's XIDs from before slurmkit's first run: a warn by default; with
    [health] baseline_xids = "drain" a hardware one fails (an application one still passes)."""
    from slurmkit.profile import load_profile

    bus = "0000:1a:00.0"
    xids = [Xid(79, bus, "GPU has fallen off the bus.", origin="baseline:/dev/kmsg", line=3),
            Xid(13, bus, "Graphics Exception", origin="baseline:/dev/kmsg", line=4)]
    st = node(gpu(0), gpu(1), xids=xids)
    logged = only(C.run_checks(st, load_config()), "xid")
    assert [(r.value, r.status) for r in logged] == [(13, "pass"), (79, "warn")]
    assert "baseline, not a drain" in logged[1].message
    site = tmp_path / "site.toml"
    site.write_text(SITE + '[health]\nbaseline_xids = "drain"\n')
    health = load_profile(site).health
    assert health.baseline_xids == "drain"
    drained = only(C.run_checks(st, load_config(health, gpu_count=2)), "xid")
    assert [(r.value, r.status, r.gpu_index) for r in drained] == [(13, "pass", 1), (79, "fail", 1)]
    assert drained[1].reason() == f"slurmkit: xid GPU1 {bus}: Xid 79 GPU fell off the bus"
    assert "baseline_xids = drain" in drained[1].message
    assert Health().baseline_xids == "log"


PCIE_SITE = """[cluster]
name = "c"
[node_types.t]
gpu_model = "h100"
gpu_count = 2
pcie_width = 16
pcie_gen = 5
  [[node_types.t.gpus]]
  index = 0
  [[node_types.t.gpus]]
  index = 1
  pcie_width = 8
[partitions.gpu]
nodes = "n[1-2]"
node_type = "t"
"""


def _pcie_cfg(tmp_path, text=PCIE_SITE):
    from slurmkit.profile import load_profile

    site = tmp_path / "site.toml"
    site.write_text(text)
    nt = load_profile(site).node_types["t"]
    return load_config(gpu_count=2, pcie=nt.pcie_expect()), nt


def test_pcie_width_judged_against_the_node_types_width_and_a_slot_declared_x8(tmp_path):
    cfg, nt = _pcie_cfg(tmp_path)
    assert nt.pcie_expect() == {"width": 16, "gen": 5, "gpus": {1: 8}}
    assert (cfg.expect["pcie_width"], cfg.expect["pcie_width_gpus"]) == (16, {1: 8})
    # GPU0 expects x16 and trained to x8 although its link could do x16: fail, "x8 of x16"
    # GPU1 sits in a x8 slot by design: x8 (of a x16-capable link) passes
    st = node(gpu(0, pcie_link_width=8, pcie_link_width_max=16), gpu(1, pcie_link_width=8, pcie_link_width_max=16))
    res = C.check_pcie_width(st, cfg)
    assert [(r.gpu_index, r.status, r.value, r.limit) for r in res] == [(0, "fail", 8, 16), (1, "pass", 8, 8)]
    assert res[0].reason() == "slurmkit: pcie_width GPU0 0000:19:00.0: x8 of x16"
    # a x16 GPU in a slot wired x8 (NVML's max is the slot's): the profile still expects x16
    assert status_of(C.check_pcie_width, node(gpu(0, pcie_link_width=8, pcie_link_width_max=8)), cfg) == ["fail"]
    # the same x8 link without any profile expectation: max 8, current 8 -> pass (the old rule)
    assert status_of(C.check_pcie_width, node(gpu(0, pcie_link_width=8, pcie_link_width_max=8))) == ["pass"]
    # in a VM guest the host's slot decides: warn
    vm = node(gpu(0, pcie_link_width=8, pcie_link_width_max=16, virtualization_mode="Pass-Through"))
    assert status_of(C.check_pcie_width, vm, cfg) == ["warn"]
    # x16 where x16 is expected passes; the width NVML cannot read is not judged
    assert status_of(C.check_pcie_width, node(gpu(0, pcie_link_width=16, pcie_link_width_max=16)), cfg) == ["pass"]
    st = node(gpu(0))
    st.gpus[0].put("pcie_link_width", None, rc="NOT_SUPPORTED")
    assert status_of(C.check_pcie_width, st, cfg) == []


def test_pcie_gen_max_below_the_node_types_gen_warns_idle_downshift_does_not(tmp_path):
    cfg, _ = _pcie_cfg(tmp_path)
    # idle: current Gen1 is the power-saving downshift, max Gen5 as expected -> pass only
    idle = node(gpu(0, pcie_link_gen=1, pcie_link_gen_max=5, utilization_gpu_pct=0))
    assert [(r.status, r.value, r.limit) for r in C.check_pcie_gen(idle, cfg)] == [("pass", 5, 5)]
    # a slot / BIOS that gives Gen4 only: max link generation 4 of 5 -> warn, whatever the load
    slow = node(gpu(0, pcie_link_gen=1, pcie_link_gen_max=4, utilization_gpu_pct=0))
    res = C.check_pcie_gen(slow, cfg)
    assert [(r.status, r.value, r.limit) for r in res] == [("warn", 4, 5)]
    assert res[0].reason() == "slurmkit: pcie_gen GPU0 0000:19:00.0: PCIe max Gen4 of Gen5 expected"
    # under load the current generation is still judged against the max: fail
    busy = node(gpu(0, pcie_link_gen=3, pcie_link_gen_max=4, utilization_gpu_pct=90))
    assert sorted(status_of(C.check_pcie_gen, busy, cfg)) == ["fail", "warn"]
    # no pcie_gen in the profile: only the load rule (unchanged)
    assert status_of(C.check_pcie_gen, slow) == []


@pytest.mark.parametrize("line, key", [
    ("pcie_width = 10", "node_types.t.pcie_width"),
    ("pcie_width = \"16\"", "node_types.t.pcie_width"),
    ("pcie_gen = 0", "node_types.t.pcie_gen"),
])
def test_bad_pcie_expectation_fails_at_profile_load_with_file_line_key(tmp_path, line, key):
    from slurmkit.profile import ProfileError, load_profile

    site = tmp_path / "site.toml"
    site.write_text(SITE.replace('gpu_count = 2\n', f'gpu_count = 2\n{line}\n'))
    with pytest.raises(ProfileError) as ei:
        load_profile(site)
    assert (ei.value.file, ei.value.line, ei.value.key) == (str(site), 6, key)


def test_bad_per_gpu_pcie_width_names_the_gpu(tmp_path):
    from slurmkit.profile import ProfileError, load_profile

    site = tmp_path / "site.toml"
    site.write_text(PCIE_SITE.replace("  pcie_width = 8\n", "  pcie_width = 7\n"))
    with pytest.raises(ProfileError) as ei:
        load_profile(site)
    assert (ei.value.line, ei.value.key) == (12, "node_types.t.gpus[1].pcie_width")
    assert "7 is not one of: 1, 2, 4, 8, 12, 16, 32" in str(ei.value)
    unset = load_profile("sandbox").node_types["sandbox-h100x4"].pcie_expect()
    assert unset == {"width": None, "gen": None, "gpus": {}}  # unset: not judged against the profile
    assert "pcie_width" not in load_config(gpu_count=4, pcie=unset).expect
