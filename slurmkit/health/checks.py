"""The GPU health checks: one small pure function per check over a :class:`NodeState`.

Each check returns a list of :class:`CheckResult` (one per GPU it could judge; a value that is
NOT_SUPPORTED / N/A yields no result: absence is never hardware evidence). Check ids,
thresholds and the XID table live in ``checks.toml`` (see :mod:`slurmkit.health.config`).

:func:`run_checks` runs the enabled checks; :func:`evaluate` folds them into the overall status
and the JSON shape ``{"node", "source", "status", "results": [...], "errors": [...]}``.
Overall status: ``fail`` (hardware evidence) > ``error`` (slurmkit's own trouble: NVML library
absent on a node without expected GPUs, unreadable state) > ``warn`` > ``pass``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from slurmkit.health import fabric, mig, nvlink, pcie, services
from slurmkit.health.config import HealthConfig
from slurmkit.health.nvml_returns import HARDWARE, OWN, RETURN_CODES, kind as rc_kind
from slurmkit.health.result import (FAIL, PASS, WARN, CheckResult, CheckStatus, overall, recovery_words,
                                    result, usable_gpus)
from slurmkit.health.state import (RC_GPU_IS_LOST, RC_LIBRARY_NOT_FOUND, RC_SUCCESS, RC_UNKNOWN,
                                   GpuState, NodeState)
from slurmkit.records import asdict

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing is not imported when the hooks run
    from typing import Any


#: nvmlInit results that are slurmkit's own trouble even on a GPU node (the hook runs without
#: the rights it needs, a bug, a busy host): reported as errors, never drained. The class of
#: every NVML return code: :mod:`slurmkit.health.nvml_returns`.
OWN_INIT_RCS = frozenset(rc for rc, k in RETURN_CODES.items() if k == OWN and rc != RC_LIBRARY_NOT_FOUND)


# ---- node-level --------------------------------------------------------------------------

def check_gpu_count(state: NodeState, cfg: HealthConfig, **_) -> list[CheckResult]:
    """NVML's count vs the expected count (gres / profile) and vs NVIDIA PCI functions in sysfs."""
    if state.init_rc != RC_SUCCESS:
        return []
    seen = state.gpu_count if state.gpu_count is not None else len(state.gpus)
    out = []
    expected = cfg.expect.get("expected_gpu_count")
    if expected is not None:
        units, how = seen, ""
        if seen < expected and not cfg.expect.get("mig_instances"):
            # gres that name no MIG type (AutoDetect=nvml beside an untyped Gres=gpu:N, as DeepOps
            # runs MIG nodes): Slurm's NVML AutoDetect counts each MIG instance of a GPU in MIG
            # mode as one gpu (slurmd -G: 'Type:(null) Count:1 ... File:/dev/nvidia1,
            # /dev/nvidia-caps/...'), so the node's gpu gres are its whole GPUs and its instances
            mig = [len(g.get("mig_devices") or []) for g in state.gpus]
            if any(mig):
                units = sum(n or 1 for n in mig)
                how = f"{units} gres: {sum(mig)} MIG instances on {sum(1 for n in mig if n)} GPU(s) count one each"
        st = FAIL if units < expected else PASS
        out.append(result("gpu_count", st, None, units, expected,
                      "NVML sees fewer GPUs than the node's gres" + (f" ({how})" if how else "") if st == FAIL
                      else how))
    if state.pci_devices is not None:
        pci = len(state.pci_devices)
        st = FAIL if pci != seen else PASS
        out.append(result("gpu_count", st, None, seen, pci,
                      f"{pci} NVIDIA GPUs on the PCI bus but NVML reports {seen}" if st == FAIL else "PCI"))
    return out


def check_nvml_init(state: NodeState, cfg: HealthConfig, **_) -> list[CheckResult]:
    """nvmlInit failed: hardware/driver evidence when the node should have GPUs; otherwise it is
    not judged here (:func:`evaluate` reports it as slurmkit's own trouble)."""
    if state.init_rc == RC_SUCCESS:
        return [result("nvml_init", PASS, None, RC_SUCCESS)]
    expected = cfg.expect.get("expected_gpu_count") or 0
    if expected > 0 and state.init_rc not in OWN_INIT_RCS:
        return [result("nvml_init", FAIL, None, state.init_rc, expected,
                   f"nvmlInit failed ({state.init_rc}) on a node with {expected} GPUs in gres")]
    return []


def check_xid(state: NodeState, cfg: HealthConfig, **_) -> list[CheckResult]:
    """One result per distinct (Xid, GPU, verdict) seen in the kernel log since the last check,
    judged by NVIDIA's Xid catalog and what the line itself states
    (:func:`slurmkit.health.xidcatalog.judge`: the catalog's immediate resolution; ``caused by
    previous Xid N``; Xid 94/95's ``RST:`` / ``D-RST:`` flags; an NVLink Xid's ``Fatal``): a
    reset, a reboot or a report to NVIDIA fails, restarting the application passes (the job's own
    fault). A line that names no PCI address but the driver's ``GPU<n>`` (``Xid.gpu_index``) is
    that NVML index's GPU; one naming no GPU at all (or an index NVML does not have) is a
    node-level result. XIDs of the first read after install (``origin`` ``baseline:...``: the
    current boot's old ones) warn at most: a baseline, not a drain; with ``[health]
    baseline_xids = "drain"`` they are judged like new ones (a failing XID fails, its message
    saying it is from the baseline). A line logged before its GPU's recorded reset
    (``state.gpu_resets``: ``slurmkit hooks gpu-reset``, placed by
    :func:`slurmkit.health.kmsg.logged_before`) is history: pass, said so (a consumer whose
    cursor lags, e.g. the epilog, sees it only after the reset)."""
    if not state.xids:  # the usual run: the catalog is not imported for nothing
        return []
    from slurmkit.health import xidcatalog

    drain_baseline = cfg.baseline_xids == "drain"
    resets = state.gpu_resets or {}
    by_index = {g.index: g for g in state.gpus}

    def bus_of(x) -> str | None:
        if x.pci_bus_id or x.gpu_index is None:
            return x.pci_bus_id
        g = by_index.get(x.gpu_index)
        return g.pci_bus_id if g is not None else None

    def history(x, bus) -> bool:
        rec = resets.get(bus) if bus else None
        if rec is None:
            return False
        from slurmkit.health.kmsg import logged_before

        return logged_before(x, rec.get("kmsg_seq"), rec.get("at_s")) is True

    counts: Counter = Counter()
    for x in state.xids:
        bus = bus_of(x)
        named = x.gpu_index if bus is None else None  # a GPU<n> NVML does not have: said, node-level
        counts[(x.xid, bus, named, x.origin.startswith("baseline:"), history(x, bus))
               + xidcatalog.judge(x.xid, x.message)] += 1
    out = []
    for (xid, bus, named, baseline, old, judged, sev, verdict, action, basis), n in sorted(
            counts.items(), key=lambda kv: tuple("" if v is None else str(v) for v in kv[0])):
        if old:
            status = PASS
        elif verdict == "pass":
            status = PASS
        elif baseline and not drain_baseline:
            status = WARN
        else:
            status = FAIL if verdict == "fail" else WARN
        g = state.gpu_by_bus_id(bus) if bus else None
        name = cfg.xid_names.get(xid) or xidcatalog.name(xid)
        msg = f"Xid {xid}" + (f" ({name})" if name else "") + f" x{n}"
        if named is not None:
            msg += f", GPU{named} in the driver's words (no such NVML index)"
        if judged != xid:
            msg += f", caused by previous Xid {judged}: judged as Xid {judged}"
        if sev:
            msg += f", {sev} (the driver's word)"
        said = f" ({basis})" if basis.startswith("the driver") else ""
        if old:
            msg += ": logged before the GPU's recorded reset (history, not a drain)"
        elif verdict == "pass":
            msg += (": application error, ignored" if action == "restart the application"
                    else f": {action}, not a drain ({basis})") + said
        elif baseline and not drain_baseline:
            msg += f": before slurmkit's first run this boot (baseline, not a drain; {action})"
        else:
            msg += f": {action}{said}" + (
                "; before slurmkit's first run this boot (baseline_xids = drain)" if baseline else "")
        r = result("xid", status, g, xid, basis, msg)
        if g is None and bus:
            r.pci_bus_id = bus
        elif g is None and named is not None:
            r.place = f"GPU{named} (not an NVML GPU)"
        out.append(r)
    return out


def check_driver_version(state: NodeState, cfg: HealthConfig, **_) -> list[CheckResult]:
    """Driver vs the pinned ``[health] driver_version`` (warn)."""
    pin = cfg.expect.get("driver_version")
    if not pin or state.driver_version is None:
        return []
    st = PASS if state.driver_version == pin else WARN
    return [result("driver_version", st, None, state.driver_version, pin)]


# ---- per GPU --------------------------------------------------------------------------------

def check_gpu_lost(state: NodeState, cfg: HealthConfig, **_) -> list[CheckResult]:
    """Handle returns GPU_IS_LOST / Unknown Error, or any value read returned GPU_IS_LOST."""
    out = []
    for g in state.gpus:
        lost = [k for k, r in g.values.items() if r.rc == RC_GPU_IS_LOST]
        if g.handle_rc in (RC_GPU_IS_LOST, RC_UNKNOWN):
            out.append(result("gpu_lost", FAIL, g, g.handle_rc, RC_SUCCESS,
                          f"nvmlDeviceGetHandleByIndex_v2: {g.handle_rc}"))
        elif lost:
            out.append(result("gpu_lost", FAIL, g, RC_GPU_IS_LOST, RC_SUCCESS,
                          "GPU_IS_LOST from " + ", ".join(sorted({g.values[k].source for k in lost}))))
        elif g.handle_rc == RC_SUCCESS:
            out.append(result("gpu_lost", PASS, g, RC_SUCCESS))
    return out


def check_nvml_error(state: NodeState, cfg: HealthConfig, **_) -> list[CheckResult]:
    """A GPU whose handle or any value read returned a *hardware* NVML return code other than
    the ``gpu_lost`` ones (INSUFFICIENT_POWER, IRQ_ISSUE, RESET_REQUIRED, TIMEOUT, ...; the table
    in :mod:`slurmkit.health.nvml_returns`): fail, naming the call and the code."""
    out = []
    for g in state.gpus:
        if g.handle_rc in (RC_GPU_IS_LOST, RC_UNKNOWN):
            continue  # gpu_lost's
        bad = [] if rc_kind(g.handle_rc) != HARDWARE else [("nvmlDeviceGetHandleByIndex_v2", g.handle_rc)]
        bad += sorted({(r.source, r.rc) for r in g.values.values()
                       if r.rc != RC_GPU_IS_LOST and rc_kind(r.rc) == HARDWARE})
        if bad:
            call, rc = bad[0]
            more = f" (+{len(bad) - 1} more)" if len(bad) > 1 else ""
            out.append(result("nvml_error", FAIL, g, rc, RC_SUCCESS, f"{call}: {rc}{more}"))
    return out  # no pass results: the other checks speak for a GPU that answers


def check_nvsmi_error(state: NodeState, cfg: HealthConfig, **_) -> list[CheckResult]:
    """An error nvidia-smi printed in a GPU's section of a capture (``Unknown Error``, ``ERR!``,
    ``GPU requires reset``, ``Unable to determine the device handle``; see
    :mod:`slurmkit.health.nvsmi`): fail, with that text (and the field) as the value. Live NVML
    reads have no such value: no result."""
    out = []
    for g in state.gpus:
        if "nvsmi_error" not in g.values:
            continue
        v = g.get("nvsmi_error")
        out.append(result("nvsmi_error", FAIL if v else PASS, g, v or "", "",
                      "nvidia-smi printed an error for this GPU" if v else ""))
    return out


def check_ecc_mode(state: NodeState, cfg: HealthConfig, **_) -> list[CheckResult]:
    """ECC mode (``nvmlDeviceGetEccMode``, where the GPU has ECC): a pending change (current !=
    pending: it takes effect at the next GPU reset, under a job) -> fail; ECC off -> warn (a
    choice some sites make on workstation cards; switch the check off there)."""
    out = []
    for g in usable_gpus(state):
        cur, pend = g.get("ecc_enabled"), g.get("ecc_pending")
        if cur is None:
            continue
        if pend is not None and pend != cur:
            out.append(result("ecc_mode", FAIL, g, f"current {'on' if cur else 'off'}, pending {'on' if pend else 'off'}",
                          "current == pending", "ECC mode change pending a GPU reset"))
        elif not cur:
            out.append(result("ecc_mode", WARN, g, "off", "on", "ECC is off on a GPU that has it"))
        else:
            out.append(result("ecc_mode", PASS, g, "on", "on"))
    return out


def _bool_check(check: str, key: str, bad: bool, status: CheckStatus, msg: str):
    def fn(state: NodeState, cfg: HealthConfig, **_) -> list[CheckResult]:
        out = []
        for g in usable_gpus(state):
            v = g.get(key)
            if v is None:
                continue
            out.append(result(check, status if v is bad else PASS, g, v, not bad, msg if v is bad else ""))
        return out
    fn.__name__ = f"check_{check}"
    fn.__doc__ = f"``{key}`` is {bad} -> {status}: {msg}."
    return fn


check_reset_required = _bool_check("reset_required", "reset_required", True, FAIL, "GPU reset required")

def check_gpu_recovery_action(state: NodeState, cfg: HealthConfig, **_) -> list[CheckResult]:
    """The driver's GPU recovery action (``gpu_recovery_action``: NVML field
    ``NVML_FI_DEV_GET_GPU_RECOVERY_ACTION``, nvidia-smi "GPU Recovery Action"): ``NONE`` passes;
    anything else fails with the action in words (``driver asks for a GPU reset``), whatever the
    other checks say. Not read (an older driver: NOT_SUPPORTED / an unknown field id): no result."""
    out = []
    for g in usable_gpus(state):
        action = g.get("gpu_recovery_action")
        if action is None:
            continue
        if action == "NONE":
            out.append(result("gpu_recovery_action", PASS, g, action, "NONE"))
        else:
            out.append(result("gpu_recovery_action", FAIL, g, action, "NONE", recovery_words(action)))
    return out
check_inforom = _bool_check("inforom", "inforom_valid", False, FAIL, "InfoROM corrupted")
check_persistence_mode = _bool_check("persistence_mode", "persistence_mode", False, WARN,
                                     "persistence mode is off")
check_retired_pages_pending = _bool_check("retired_pages_pending", "retired_pages_pending", True, FAIL,
                                          "page retirement pending: reset the GPU")
check_row_remap_failure = _bool_check("row_remap_failure", "remap_failure", True, FAIL,
                                      "row remapping failed: RMA")


def _threshold_check(check: str, key: str, tname: str | None, op: str, status: CheckStatus, msg: str):
    ops: dict[str, Callable[[Any, Any], bool]] = {
        ">": lambda v, t: v > t, ">=": lambda v, t: v >= t}

    def fn(state: NodeState, cfg: HealthConfig, **_) -> list[CheckResult]:
        limit = cfg.t(tname) if tname else 0
        out = []
        for g in usable_gpus(state):
            v = g.get(key)
            if v is None:
                continue
            bad = ops[op](v, limit)
            out.append(result(check, status if bad else PASS, g, v, limit, msg if bad else ""))
        return out
    fn.__name__ = f"check_{check}"
    fn.__doc__ = f"``{key}`` {op} {tname or 0} -> {status}."
    return fn


check_ecc_volatile_uncorrectable = _threshold_check(
    "ecc_volatile_uncorrectable", "ecc_volatile_uncorrectable", None, ">", FAIL,
    "uncorrectable ECC errors since boot")
check_ecc_sram_correctable = _threshold_check(
    "ecc_sram_correctable", "ecc_aggregate_sram_correctable", "ecc_sram_correctable_warn", ">", WARN,
    "many SRAM correctable errors")
check_ecc_aggregate_uncorrectable = _threshold_check(
    "ecc_aggregate_uncorrectable", "ecc_aggregate_uncorrectable", "ecc_aggregate_uncorrectable_warn", ">=",
    WARN, "lifetime uncorrectable ECC errors: RMA candidate")
check_row_remap_uncorrectable = _threshold_check(
    "row_remap_uncorrectable", "remap_uncorrectable_rows", "remap_uncorrectable_fail", ">=", FAIL,
    "remapped rows for uncorrectable errors at the RMA limit")


def check_retired_pages_count(state: NodeState, cfg: HealthConfig, **_) -> list[CheckResult]:
    """Retired pages SBE + DBE >= ``retired_pages_fail`` -> fail."""
    limit = cfg.t("retired_pages_fail")
    out = []
    for g in usable_gpus(state):
        sbe, dbe = g.get("retired_pages_sbe"), g.get("retired_pages_dbe")
        if sbe is None and dbe is None:
            continue
        total = (sbe or 0) + (dbe or 0)
        st = FAIL if total >= limit else PASS
        out.append(result("retired_pages_count", st, g, total, limit,
                      f"{sbe or 0} SBE + {dbe or 0} DBE retired pages" if st == FAIL else ""))
    return out


def check_row_remap_pending(state: NodeState, cfg: HealthConfig, **_) -> list[CheckResult]:
    """Pending remap: with uncorrectable rows or volatile DBE -> fail; else warn (reboot when idle)."""
    out = []
    for g in usable_gpus(state):
        pending = g.get("remap_pending")
        if pending is None:
            continue
        if not pending:
            out.append(result("row_remap_pending", PASS, g, False, False))
            continue
        unc = g.get("remap_uncorrectable_rows") or 0
        dbe = g.get("ecc_volatile_uncorrectable") or 0
        if unc > 0 or dbe > 0:
            out.append(result("row_remap_pending", FAIL, g, f"pending, {unc} uncorrectable rows, {dbe} volatile DBE",
                          False, "row remap pending after uncorrectable errors: drain and reset the GPU"))
        else:
            out.append(result("row_remap_pending", WARN, g, "pending, correctable only", False,
                          "row remap pending from correctable errors: reboot when idle"))
    return out


def check_clock_events(state: NodeState, cfg: HealthConfig, **_) -> list[CheckResult]:
    """HW slowdown / thermal / power brake bits. Live: when a bit is set the source takes more
    samples 100 ms apart; set in every one of >= ``clock_event_samples`` -> fail, only in some ->
    warn. A single sample (a replayed capture) -> warn naming the bits. SW power cap ignored."""
    bits = cfg.clock_event_bits
    need = int(cfg.t("clock_event_samples"))
    out = []
    for g in usable_gpus(state):
        samples = g.get("clock_event_samples")
        if samples is None:
            first = g.get("clock_event_reasons")
            if first is None:
                continue
            samples = [first]
        names_first = [n for n, b in bits.items() if samples[0] & b]
        if not names_first:
            out.append(result("clock_events", PASS, g, "none", None))
            continue
        always = [n for n, b in bits.items() if all(s & b for s in samples)]
        label = ",".join(always or names_first)
        if len(samples) >= need and always:
            out.append(result("clock_events", FAIL, g, label, f"set in {len(samples)} of {len(samples)} samples",
                          f"{label} active in every sample"))
        elif len(samples) == 1:
            out.append(result("clock_events", WARN, g, label, "single sample",
                          f"{label} active in a single sample (replay: not confirmed)"))
        else:
            out.append(result("clock_events", WARN, g, label, f"{need} samples",
                          f"{label} active in some samples only"))
    return out


def _pinned(cfg: HealthConfig, g, key: str, default):
    """What ``key`` (``app_clock_*_mhz``, ``power_limit_w``) should read on GPU ``g``: the
    policy a running job's prolog set on it (``expect["gpu_policy"]``: {NVML index: {setting:
    value}}, :func:`slurmkit.hooks.clock_policy.running_expect`), else the site's resting value
    (``expect[key]``: the node type's clock policy or ``[health]``), else ``default``."""
    job = (cfg.expect.get("gpu_policy") or {}).get(g.index) or {}
    return job[key] if key in job else cfg.expect.get(key, default)


def check_app_clocks(state: NodeState, cfg: HealthConfig, **_) -> list[CheckResult]:
    """Application clocks (MHz, ``nvmlDeviceGetApplicationsClock``) vs what the GPU should run
    at (:func:`_pinned`: a running job's partition policy, else the node type's policy or
    ``[health] app_clock_*_mhz``, else the GPU's default) -> warn."""
    out = []
    for g in usable_gpus(state):
        for kind in ("graphics", "mem"):
            v = g.get(f"app_clock_{kind}_mhz")
            want = _pinned(cfg, g, f"app_clock_{kind}_mhz", g.get(f"default_app_clock_{kind}_mhz"))
            if v is None or want is None:
                continue
            st = PASS if v == want else WARN
            out.append(result("app_clocks", st, g, f"{kind} {v} MHz", f"{want} MHz",
                          "application clocks changed (the epilog resets them)" if st == WARN else ""))
    return out


def check_power_limit(state: NodeState, cfg: HealthConfig, **_) -> list[CheckResult]:
    """Power limit (W, ``nvmlDeviceGetPowerManagementLimit``) vs what the GPU should have
    (:func:`_pinned`: a running job's partition policy, else the node type's policy or
    ``[health] power_limit_w``, else the default limit) -> warn."""
    tol = cfg.t("power_limit_tolerance_w")
    out = []
    for g in usable_gpus(state):
        v = g.get("power_limit_w")
        want = _pinned(cfg, g, "power_limit_w", g.get("default_power_limit_w"))
        if v is None or want is None:
            continue
        st = WARN if abs(v - want) > tol else PASS
        out.append(result("power_limit", st, g, v, want,
                      "power limit changed (the epilog resets it)" if st == WARN else ""))
    return out


def check_temperature_margin(state: NodeState, cfg: HealthConfig, **_) -> list[CheckResult]:
    """Degrees C left before HW slowdown <= ``temperature_margin_min_c`` -> fail."""
    limit = cfg.t("temperature_margin_min_c")
    out = []
    for g in usable_gpus(state):
        m = g.get("slowdown_margin_c")
        if m is None:
            continue
        st = FAIL if m <= limit else PASS
        out.append(result("temperature_margin", st, g, m, limit, "at the HW slowdown temperature" if st == FAIL else ""))
    return out


def _idle(g: GpuState) -> bool:
    procs = g.get("processes")
    util = g.get("utilization_gpu_pct")
    return not procs and (util is None or util == 0)


def check_temperature_idle(state: NodeState, cfg: HealthConfig, **_) -> list[CheckResult]:
    """An idle GPU (no compute process, 0 % utilization) hotter than ``temperature_idle_max_c``."""
    limit = cfg.t("temperature_idle_max_c")
    out = []
    for g in usable_gpus(state):
        t = g.get("temperature_c")
        if t is None or not _idle(g):
            continue
        st = FAIL if t > limit else PASS
        out.append(result("temperature_idle", st, g, t, limit, "idle GPU too hot (cooling?)" if st == FAIL else ""))
    return out


def check_mig_mode(state: NodeState, cfg: HealthConfig, **_) -> list[CheckResult]:
    """MIG current != pending (a reset is due) or != ``[health] mig`` -> fail."""
    want = cfg.expect.get("mig")
    out = []
    for g in usable_gpus(state):
        cur, pend = g.get("mig_current"), g.get("mig_pending")
        if cur is None:
            continue
        if pend is not None and cur != pend:
            out.append(result("mig_mode", FAIL, g, f"current {cur}, pending {pend}", "current == pending",
                          "MIG mode change pending a GPU reset"))
        elif want is not None and cur != want:
            out.append(result("mig_mode", FAIL, g, cur, want, "MIG mode differs from the profile"))
        else:
            out.append(result("mig_mode", PASS, g, cur, want))
    return out


def _busy_samples(g: GpuState) -> list[dict] | None:
    s = g.get("busy_samples")
    if s:
        return s
    used, procs = g.get("memory_used_mib"), g.get("processes")
    if used is None and procs is None:
        return None
    return [{"memory_used_mib": used, "pids": [p["pid"] for p in procs or []]}]


def _job_gpus(state: NodeState, job_gpus):
    """The GPUs a job's leftover processes and memory are judged on: the job's, less those in
    MIG mode (the parent's processes and memory are every instance's, other jobs' included)."""
    return [g for g in usable_gpus(state) if (job_gpus is None or g.index in job_gpus)
            and g.get("mig_current") is not True]


def check_leftover_processes(state: NodeState, cfg: HealthConfig, before_job: bool = False, job_gpus=None, **_):
    """Before a job only, on the job's GPUs only (``job_gpus``: NVML indexes; None: all): compute
    processes present in every one of the busy samples -> fail. Other jobs' processes on other
    GPUs of a shared node are normal, and so are a GPU in MIG mode's (its instances' jobs): not
    judged there."""
    if not before_job:
        return []
    out = []
    for g in _job_gpus(state, job_gpus):
        samples = _busy_samples(g)
        if samples is None:
            continue
        stuck = all(s.get("pids") for s in samples)
        pids = samples[-1].get("pids") or []
        out.append(result("leftover_processes", FAIL if stuck else PASS, g, len(pids), 0,
                      f"pids {pids} after {len(samples)} tries" if stuck else ""))
    return out


def check_memory_used(state: NodeState, cfg: HealthConfig, before_job: bool = False, job_gpus=None, **_):
    """Before a job only, on the job's GPUs only (``job_gpus`` as for leftover processes): memory
    used (v2, reserved excluded) > ``memory_used_max_mib`` in every busy sample -> fail. ~500 MiB
    *reserved* on an idle GPU is normal and not counted."""
    if not before_job:
        return []
    limit = cfg.t("memory_used_max_mib")
    out = []
    for g in _job_gpus(state, job_gpus):
        samples = _busy_samples(g)
        if samples is None or samples[-1].get("memory_used_mib") is None:
            continue
        used = [s.get("memory_used_mib") or 0 for s in samples]
        bad = all(u > limit for u in used)
        if bad and not any(s.get("pids") for s in samples):
            # memory held without any compute process: a display (X / Wayland) GPU, not a leftover
            out.append(result("memory_used", WARN, g, used[-1], limit,
                          f"{used[-1]} MiB used with no compute process (display?)"))
            continue
        out.append(result("memory_used", FAIL if bad else PASS, g, used[-1], limit,
                      f"{used[-1]} MiB used after {len(used)} tries" if bad else ""))
    return out


def expected_pcie_width(cfg: HealthConfig, g: GpuState) -> int | None:
    """The lanes GPU ``g`` should train to by the profile: its own ``pcie_width`` in the node
    type's ``[[gpus]]`` (a x8 slot by design), else the node type's ``pcie_width``; None when the
    profile says nothing (then ``pcie_width`` compares with the link's max)."""
    per_gpu = cfg.expect.get("pcie_width_gpus") or {}
    return per_gpu.get(g.index, cfg.expect.get("pcie_width"))


def check_pcie_width(state: NodeState, cfg: HealthConfig, **_) -> list[CheckResult]:
    """The current link width (``nvmlDeviceGetCurrPcieLinkWidth``, lanes). With an expected width
    from the profile (:func:`expected_pcie_width`): below it -> fail (``x8 of x16``), at or above
    it -> pass, even below the link's max (a x8 slot declared x8 is no fault). Without one: below
    the max (``nvmlDeviceGetMaxPcieLinkWidth``, what GPU and slot support) -> fail. In a VM guest
    (pass-through) a narrow link only warns: the width the guest sees is set by the host's slot,
    not a fault the node can fix. Width does not downshift when idle (generation does)."""
    out = []
    for g in usable_gpus(state):
        w, wmax = g.get("pcie_link_width"), g.get("pcie_link_width_max")
        want = expected_pcie_width(cfg, g)
        if w is None or (wmax is None and want is None):
            continue
        vm = g.get("virtualization_mode") not in (None, "None")
        if want is not None:
            if w >= want:
                out.append(result("pcie_width", PASS, g, w, want))
            else:
                out.append(result("pcie_width", WARN if vm else FAIL, g, w, want,
                                  f"PCIe x{w} of x{want} expected by the profile" + (" (VM guest)" if vm else "")))
            continue
        if w >= wmax:
            out.append(result("pcie_width", PASS, g, w, wmax))
            continue
        out.append(result("pcie_width", WARN if vm else FAIL, g, w, wmax,
                      f"PCIe x{w} of x{wmax}" + (" (VM guest)" if vm else "")))
    return out


def check_pcie_gen(state: NodeState, cfg: HealthConfig, **_) -> list[CheckResult]:
    """Link generation below its max while the GPU is busy (idle GPUs downshift to save power):
    fail. With the node type's ``pcie_gen`` in the profile, also the max link generation
    (``nvmlDeviceGetMaxPcieLinkGeneration``: what GPU and slot support, not the idle-downshifted
    current one) below it: warn (``max Gen4 of Gen5 expected``: the slot or BIOS gives a slower
    link; the GPU works at the lower bandwidth)."""
    load = cfg.t("pcie_gen_load_pct")
    want_gen = cfg.expect.get("pcie_gen")
    out = []
    for g in usable_gpus(state):
        gen, gmax, util = g.get("pcie_link_gen"), g.get("pcie_link_gen_max"), g.get("utilization_gpu_pct")
        if want_gen is not None and gmax is not None:
            ok = gmax >= want_gen
            out.append(result("pcie_gen", PASS if ok else WARN, g, gmax, want_gen,
                              "" if ok else f"max link Gen{gmax} of Gen{want_gen} expected by the profile"))
        if gen is None or gmax is None or util is None or util < load:
            continue
        st = FAIL if gen < gmax else PASS
        out.append(result("pcie_gen", st, g, gen, gmax, f"PCIe gen {gen} of {gmax} at {util} % load" if st == FAIL else ""))
    return out


def check_nvlink_down(state: NodeState, cfg: HealthConfig, **_) -> list[CheckResult]:
    """Active NVLinks per GPU below ``[health] nvlink_active_links``; without a pin, below the
    most any GPU of this node has active (a GPU that lost links its peers have)."""
    counts = {}
    for g in usable_gpus(state):
        links = g.get("nvlink_active")
        if links is not None:
            counts[g.index] = sum(1 for x in links if x)
    if not counts:
        return []
    want = cfg.expect.get("nvlink_active_links", max(counts.values()))
    out = []
    for g in usable_gpus(state):
        if g.index not in counts:
            continue
        n = counts[g.index]
        st = FAIL if n < want else PASS
        out.append(result("nvlink_down", st, g, n, want, f"{want - n} NVLink(s) down" if st == FAIL else ""))
    return out


def check_fabric_state(state: NodeState, cfg: HealthConfig, **_) -> list[CheckResult]:
    """NVSwitch fabric registration: state must be Completed and status Success."""
    out = []
    for g in usable_gpus(state):
        st_, status = g.get("fabric_state"), g.get("fabric_status")
        if st_ is None or st_ in ("N/A", "Not Supported"):
            continue
        ok = st_ == "Completed" and (status in (None, "Success"))
        out.append(result("fabric_state", PASS if ok else FAIL, g, f"{st_}/{status}", "Completed/Success",
                      "" if ok else "GPU not registered with the NVSwitch fabric"))
    return out


def check_vbios_version(state: NodeState, cfg: HealthConfig, **_) -> list[CheckResult]:
    """VBIOS vs the pinned ``[health] vbios_version`` (warn)."""
    pin = cfg.expect.get("vbios_version")
    if not pin:
        return []
    out = []
    for g in usable_gpus(state):
        v = g.get("vbios_version")
        if v is not None:
            out.append(result("vbios_version", PASS if v == pin else WARN, g, v, pin))
    return out


def check_node_type(state: NodeState, cfg: HealthConfig, **_) -> list[CheckResult]:
    """The site profile gives this node a node type (``expect["node_type"]``: pass naming it).
    A profile whose partitions do not list the node (``expect["no_node_type"]``) -> warn: the
    checks that need the node type (expected link layer and rate, fabric manager, the NVLink count
    from the matrix) are skipped, which must be said, not passed in silence; its InfiniBand ports
    are judged by what the kernel lists (every one ACTIVE / LinkUp, warn-level). No profile: no result."""
    missing = cfg.expect.get("no_node_type")
    if missing:
        return [result("node_type", WARN, None, "no node type for this node: fabric judged by what the kernel lists",
                       None, f"the site profile's partitions do not list {missing}: every InfiniBand port must "
                       "be ACTIVE/LinkUp (warn); link layer, rate, fabric_manager and the matrix's NVLink count "
                       "are not judged")]
    nt = cfg.expect.get("node_type")
    return [result("node_type", PASS, None, nt, None)] if nt else []


CHECKS: dict[str, Callable[..., list[CheckResult]]] = {
    "node_type": check_node_type,
    "gpu_count": check_gpu_count,
    "nvml_init": check_nvml_init,
    "gpu_lost": check_gpu_lost,
    "reset_required": check_reset_required,
    "gpu_recovery_action": check_gpu_recovery_action,
    "inforom": check_inforom,
    "ecc_volatile_uncorrectable": check_ecc_volatile_uncorrectable,
    "ecc_sram_correctable": check_ecc_sram_correctable,
    "ecc_aggregate_uncorrectable": check_ecc_aggregate_uncorrectable,
    "retired_pages_pending": check_retired_pages_pending,
    "retired_pages_count": check_retired_pages_count,
    "row_remap_failure": check_row_remap_failure,
    "row_remap_uncorrectable": check_row_remap_uncorrectable,
    "row_remap_pending": check_row_remap_pending,
    "xid": check_xid,
    "nvsmi_error": check_nvsmi_error,
    "nvml_error": check_nvml_error,
    "ecc_mode": check_ecc_mode,
    "clock_events": check_clock_events,
    "app_clocks": check_app_clocks,
    "power_limit": check_power_limit,
    "temperature_margin": check_temperature_margin,
    "temperature_idle": check_temperature_idle,
    "persistence_mode": check_persistence_mode,
    "mig_mode": check_mig_mode,
    "mig_instances": mig.check_mig_instances,
    "leftover_processes": check_leftover_processes,
    "memory_used": check_memory_used,
    "pcie_width": check_pcie_width,
    "pcie_gen": check_pcie_gen,
    "nvlink_down": check_nvlink_down,
    "fabric_state": check_fabric_state,
    "driver_version": check_driver_version,
    "vbios_version": check_vbios_version,
    # the checks beyond NVML, in their own modules
    "ib_port": fabric.check_ib_port,
    "ib_rate": fabric.check_ib_rate,
    "ib_counters": fabric.check_ib_counters,
    "fabric_manager": services.check_fabric_manager,
    "gpudirect_rdma": services.check_gpudirect_rdma,
    "nvlink_errors": nvlink.check_nvlink_errors,
    "pcie_errors": pcie.check_pcie_errors,
}


def run_checks(state: NodeState, config: HealthConfig, *, before_job: bool = False,
               job_gpus: set[int] | None = None) -> list[CheckResult]:
    """Run every enabled check. ``before_job`` (the prolog) adds the leftover-process and
    memory-used checks, which judge ``busy_samples`` (3 reads 2 s apart live), on ``job_gpus``
    (NVML indexes of the job's GPUs; None: every GPU, a whole-node check)."""
    out: list[CheckResult] = []
    for cid, fn in CHECKS.items():
        if config.enabled.get(cid, True):
            out.extend(fn(state, config, before_job=before_job, job_gpus=job_gpus))
    return out


def own_trouble(state: NodeState, config: HealthConfig) -> list[str]:
    """slurmkit's own trouble in ``state`` (never drains): recorded errors, and an NVML init
    failure on a node that is not expected to have GPUs (e.g. library absent on a CPU node)."""
    errs = list(state.errors)
    if state.init_rc != RC_SUCCESS and (state.init_rc in OWN_INIT_RCS
                                        or not (config.expect.get("expected_gpu_count") or 0)):
        what = "NVML library not found" if state.init_rc == RC_LIBRARY_NOT_FOUND else f"nvmlInit: {state.init_rc}"
        errs.append(f"{what}" + ("" if state.init_rc in OWN_INIT_RCS else " (not a fault: no GPUs are expected on this node)"))
    for g in state.gpus:
        if g.handle_rc != RC_SUCCESS and rc_kind(g.handle_rc) == OWN:
            errs.append(f"GPU{g.index}: nvmlDeviceGetHandleByIndex_v2: {g.handle_rc}")
    return errs


def timeout_report(node: str, source: str, exc) -> dict:
    """The report for an NVML hang (a :class:`~slurmkit.health.source.NvmlTimeout`): status
    ``fail`` with one ``nvml-timeout`` result naming the call in flight."""
    r = CheckResult("nvml-timeout", FAIL, value=exc.call, limit=f"{exc.deadline_s:g} s", message=str(exc))
    return {"node": node, "source": source, "status": FAIL, "results": [asdict(r)], "errors": []}


def evaluate(state: NodeState, config: HealthConfig, *, before_job: bool = False) -> dict:
    """Run the checks and return the report dict:
    ``{"node", "source", "status", "results": [{check, status, gpu_index, uuid, pci_bus_id,
    value, limit, message}], "errors": [...]}``, and ``"notes": [...]`` when the state has
    notes (what its captures left out as not their tool's output,
    :attr:`~slurmkit.health.state.NodeState.notes`)."""
    results = run_checks(state, config, before_job=before_job)
    errors = own_trouble(state, config)
    report = {
        "node": state.node,
        "source": state.source,
        "status": overall(results, errors),
        "results": [asdict(r) for r in results],
        "errors": errors,
    }
    if state.notes:
        report["notes"] = list(state.notes)
    return report
