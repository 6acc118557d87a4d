"""The live source: NVML through ``pynvml`` (nvidia-ml-py), NVIDIA PCI functions from sysfs and
Xids from ``/dev/kmsg``. The only module in slurmkit that imports pynvml.

Every value is recorded with the NVML call it came from and that call's return code, so a
NOT_SUPPORTED value is kept as such (not a failure) and GPU_IS_LOST reaches the ``gpu_lost``
check. ``nvmlInit`` failing (library absent, no permission) is recorded in ``init_rc``, not
raised: the checks decide whether that is hardware evidence (a GPU node) or slurmkit's trouble.

Normally used inside the worker process started by :func:`slurmkit.health.runner.read_state`,
which kills it at the deadline; ``progress`` is called with each NVML call's name before the
call so the runner can name a hung call.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from slurmkit.health.source import Action, ActionFailed, GpuSource, SourceError, hostname
from slurmkit.health.state import RC_SUCCESS, GpuState, NodeState, normalise_bus_id

_FABRIC_STATES = {0: "Not Supported", 1: "Not Started", 2: "In Progress", 3: "Completed"}
_VIRT = {0: "None", 1: "Pass-Through", 2: "VGPU", 3: "Host VGPU", 4: "Host VSGA"}
MIB = 1 << 20


def nvidia_pci_functions(sysfs: str | os.PathLike = "/sys") -> list[str] | None:
    """Bus ids (``0000:9b:00.0``) of NVIDIA (vendor 0x10de) display/3D controllers (class
    0x0300/0x0302) in ``<sysfs>/bus/pci/devices``; None when that directory is unreadable or
    shows no NVIDIA GPU at all (e.g. in a container): then the PCI count is unknown."""
    root = os.path.join(sysfs, "bus", "pci", "devices")
    try:
        entries = sorted(os.listdir(root))
    except OSError:
        return None
    out = []
    for name in entries:
        try:
            with open(os.path.join(root, name, "vendor")) as f:
                vendor = f.read().strip()
            with open(os.path.join(root, name, "class")) as f:
                cls = f.read().strip()
        except OSError:
            continue
        if vendor == "0x10de" and cls[:6] in ("0x0300", "0x0302"):
            try:
                out.append(normalise_bus_id(name))
            except ValueError:
                continue
    return out or None


class LiveNvmlSource(GpuSource):
    """Reads this node through NVML. ``kmsg_cursor``: cursor file for :func:`read_kmsg` (None:
    Xids not read). ``sysfs``: root of sysfs (``/sys``). ``fabric``: what is read beside NVML
    (InfiniBand ports, fabric manager, GPUDirect module: :func:`slurmkit.health.fabric.spec_of`)."""

    replay = False
    name = "live"

    def __init__(self, node: str | None = None, *, kmsg_cursor: str | os.PathLike | None = None,
                 kmsg_device: str | os.PathLike = "/dev/kmsg", sysfs: str | os.PathLike = "/sys",
                 progress: Callable[[str], None] | None = None, fabric: dict | None = None):
        self.node = node or hostname()
        self.fabric = fabric
        self.kmsg_cursor, self.kmsg_device, self.sysfs = kmsg_cursor, kmsg_device, sysfs
        self.progress = progress or (lambda call: None)
        self._nvml = None
        self._handles: dict[int, object] = {}

    # ---- plumbing ------------------------------------------------------------------------
    def _lib(self):
        if self._nvml is None:
            try:
                import pynvml
            except ImportError as exc:  # nvidia-ml-py not installed: slurmkit's own trouble
                raise SourceError(f"pynvml (nvidia-ml-py) is not importable: {exc}") from None
            self._nvml = pynvml
            self._rc_names = {getattr(pynvml, k): k[len("NVML_ERROR_"):]
                              for k in dir(pynvml) if k.startswith("NVML_ERROR_")}
        return self._nvml

    def _rc(self, exc) -> str:
        return self._rc_names.get(getattr(exc, "value", None), "UNKNOWN")

    def _call(self, name: str, *args):
        """Call ``pynvml.<name>(*args)``; returns (value, rc name)."""
        nv = self._lib()
        self.progress(name)
        try:
            return getattr(nv, name)(*args), RC_SUCCESS
        except nv.NVMLError as exc:
            return None, self._rc(exc)

    def _put(self, g: GpuState, key: str, name: str, *args, conv=None) -> object:
        v, rc = self._call(name, *args)
        if rc == RC_SUCCESS and conv is not None:
            v = conv(v)
        g.put(key, v, source=name, rc=rc)
        return v

    def close(self) -> None:
        """nvmlShutdown (when nvmlInit succeeded)."""
        if self._nvml is not None and self._handles is not None and getattr(self, "_inited", False):
            self._call("nvmlShutdown")
            self._inited = False

    # ---- reading -------------------------------------------------------------------------
    def read_once(self) -> NodeState:
        state = NodeState(node=self.node, source="live", replay=False)
        import time as _t

        state.timestamp = _t.strftime("%Y-%m-%dT%H:%M:%S%z")
        state.pci_devices = nvidia_pci_functions(self.sysfs)
        if self.fabric:
            from slurmkit.health.fabric import read_node_fabric

            self.progress("read sysfs class/infiniband, module, proc")
            read_node_fabric(state, self.sysfs, self.fabric)
        if self.kmsg_cursor is not None:
            from slurmkit.health.kmsg import read_kmsg

            self.progress("read /dev/kmsg")
            try:
                state.xids = read_kmsg(self.kmsg_cursor, self.kmsg_device, errors=state.errors)
            except OSError as exc:
                state.errors.append(f"kernel log {self.kmsg_device}: {exc.strerror or exc}")
        nv = self._lib()
        _, rc = self._call("nvmlInit")
        state.init_rc = rc
        if rc != RC_SUCCESS:
            return state
        self._inited = True
        state.driver_version, _ = self._call("nvmlSystemGetDriverVersion")
        count, rc = self._call("nvmlDeviceGetCount")
        if rc != RC_SUCCESS:
            state.errors.append(f"nvmlDeviceGetCount_v2: {rc}")
            return state
        state.gpu_count = count
        for i in range(count):
            state.gpus.append(self._read_gpu(nv, i))
        return state

    def _read_gpu(self, nv, i: int) -> GpuState:
        """GPU ``i``'s state, each field with the NVML call it came from and its return code (a
        field whose call failed is None with that code); only the handle when NVML gives none."""
        g = GpuState(index=i)
        h, rc = self._call("nvmlDeviceGetHandleByIndex", i)
        g.handle_rc = rc
        if rc != RC_SUCCESS:
            return g
        self._handles[i] = h
        g.uuid, _ = self._call("nvmlDeviceGetUUID", h)
        pci, rc = self._call("nvmlDeviceGetPciInfo", h)
        if rc == RC_SUCCESS:
            raw = pci.busId.decode() if isinstance(pci.busId, bytes) else pci.busId
            g.pci_bus_id = normalise_bus_id(raw)
        g.minor_number, _ = self._call("nvmlDeviceGetMinorNumber", h)
        g.put("numa_node", *self._numa(g.pci_bus_id))
        self._put(g, "name", "nvmlDeviceGetName", h)
        self._put(g, "serial", "nvmlDeviceGetSerial", h)
        self._put(g, "vbios_version", "nvmlDeviceGetVbiosVersion", h)
        _, rc = self._call("nvmlDeviceValidateInforom", h)
        g.put("inforom_valid", rc == RC_SUCCESS if rc in (RC_SUCCESS, "CORRUPTED_INFOROM") else None,
              source="nvmlDeviceValidateInforom",
              rc=RC_SUCCESS if rc in (RC_SUCCESS, "CORRUPTED_INFOROM") else rc)
        self._read_recovery_action(nv, g, h)
        self._put(g, "persistence_mode", "nvmlDeviceGetPersistenceMode", h, conv=bool)
        self._put(g, "accounting_mode", "nvmlDeviceGetAccountingMode", h, conv=bool)
        mig, rc = self._call("nvmlDeviceGetMigMode", h)
        g.put("mig_current", bool(mig[0]) if mig else None, source="nvmlDeviceGetMigMode", rc=rc)
        g.put("mig_pending", bool(mig[1]) if mig else None, source="nvmlDeviceGetMigMode", rc=rc)
        ecc, rc = self._call("nvmlDeviceGetEccMode", h)
        g.put("ecc_enabled", bool(ecc[0]) if ecc else None, source="nvmlDeviceGetEccMode", rc=rc)
        g.put("ecc_pending", bool(ecc[1]) if ecc else None, source="nvmlDeviceGetEccMode", rc=rc)
        self._read_ecc_and_retirement(nv, g, h)
        self._read_clocks_power_temperature(nv, g, h)
        self._put(g, "utilization_gpu_pct", "nvmlDeviceGetUtilizationRates", h, conv=lambda u: int(u.gpu))
        self._put(g, "pcie_link_gen", "nvmlDeviceGetCurrPcieLinkGeneration", h)
        self._put(g, "pcie_link_gen_max", "nvmlDeviceGetMaxPcieLinkGeneration", h)
        self._put(g, "pcie_link_width", "nvmlDeviceGetCurrPcieLinkWidth", h)
        self._put(g, "pcie_link_width_max", "nvmlDeviceGetMaxPcieLinkWidth", h)
        self._put(g, "virtualization_mode", "nvmlDeviceGetVirtualizationMode", h,
                  conv=lambda m: _VIRT.get(int(m), str(m)))
        links = self._read_nvlink_state(nv, g, h)
        self._read_nvlink_errors(nv, g, h, links)
        self._put(g, "pcie_replay_counter", "nvmlDeviceGetPcieReplayCounter", h, conv=int)
        from slurmkit.health.pcie import read_aer

        for key, (v, src, rc) in read_aer(self.sysfs, g.pci_bus_id).items():
            g.put(key, v, source=src, rc=rc)
        self._read_fabric(nv, g, h)
        self._read_memory(g, h)
        self._read_mig_devices(g, h)
        self._read_accounting(g, h)
        self._put(g, "total_energy_mj", "nvmlDeviceGetTotalEnergyConsumption", h, conv=int)
        return g

    def _read_mig_devices(self, g: GpuState, h) -> None:
        """A GPU in MIG mode: its MIG devices as ``mig_devices`` (:func:`slurmkit.health.mig.mig_device`),
        numbered as nvidia-smi numbers them (the slots of ``nvmlDeviceGetMigDeviceHandleByIndex``
        up to ``nvmlDeviceGetMaxMigDeviceCount`` that hold one; NOT_FOUND: an empty slot): GPU and
        compute instance ids (``nvmlDeviceGetGpuInstanceId`` / ``nvmlDeviceGetComputeInstanceId``),
        ``nvmlDeviceGetAttributes`` (``gpuInstanceSliceCount``, ``computeInstanceSliceCount``,
        ``memorySizeMB``, ``multiprocessorCount``) and the ``MIG-`` UUID (``nvmlDeviceGetUUID``).
        A failing count or handle call leaves ``mig_devices`` None with its return code. Not
        recorded when MIG mode is off or unknown."""
        if g.get("mig_current") is not True:
            return
        from slurmkit.health.mig import mig_device

        src = "nvmlDeviceGetMigDeviceHandleByIndex"
        n, rc = self._call("nvmlDeviceGetMaxMigDeviceCount", h)
        if rc != RC_SUCCESS:
            g.put("mig_devices", None, source="nvmlDeviceGetMaxMigDeviceCount", rc=rc)
            return
        out: list[dict] = []
        for k in range(int(n)):
            mh, rc = self._call(src, h, k)
            if rc == "NOT_FOUND":
                continue
            if rc != RC_SUCCESS:
                g.put("mig_devices", None, source=src, rc=rc)
                return
            gi, _ = self._call("nvmlDeviceGetGpuInstanceId", mh)
            ci, _ = self._call("nvmlDeviceGetComputeInstanceId", mh)
            a, rc = self._call("nvmlDeviceGetAttributes", mh)
            uuid, _ = self._call("nvmlDeviceGetUUID", mh)
            ok = rc == RC_SUCCESS and a is not None
            out.append(mig_device(len(out), gi, ci, int(a.gpuInstanceSliceCount) if ok else None,
                                  int(a.memorySizeMB) if ok else None, int(a.multiprocessorCount) if ok else None,
                                  uuid.decode() if isinstance(uuid, bytes) else uuid, g.get("name"),
                                  g.get("memory_total_mib"), int(a.computeInstanceSliceCount) if ok else None))
        g.put("mig_devices", out, source=src)

    def _read_ecc_and_retirement(self, nv, g: GpuState, h) -> None:
        """ECC error totals (nvmlDeviceGetTotalEccErrors, nvmlDeviceGetMemoryErrorCounter),
        retired pages (nvmlDeviceGetRetiredPages*) and remapped rows (nvmlDeviceGetRemappedRows)."""
        U, C = nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_MEMORY_ERROR_TYPE_CORRECTED
        self._put(g, "ecc_volatile_uncorrectable", "nvmlDeviceGetTotalEccErrors", h, U, nv.NVML_VOLATILE_ECC)
        self._put(g, "ecc_volatile_correctable", "nvmlDeviceGetTotalEccErrors", h, C, nv.NVML_VOLATILE_ECC)
        self._put(g, "ecc_aggregate_uncorrectable", "nvmlDeviceGetTotalEccErrors", h, U, nv.NVML_AGGREGATE_ECC)
        self._put(g, "ecc_aggregate_sram_correctable", "nvmlDeviceGetMemoryErrorCounter", h, C,
                  nv.NVML_AGGREGATE_ECC, nv.NVML_MEMORY_LOCATION_SRAM)
        self._put(g, "retired_pages_sbe", "nvmlDeviceGetRetiredPages", h,
                  nv.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS, conv=len)
        self._put(g, "retired_pages_dbe", "nvmlDeviceGetRetiredPages", h,
                  nv.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR, conv=len)
        self._put(g, "retired_pages_pending", "nvmlDeviceGetRetiredPagesPendingStatus", h, conv=bool)
        rows, rc = self._call("nvmlDeviceGetRemappedRows", h)
        for k, pos, conv in (("remap_correctable_rows", 0, int), ("remap_uncorrectable_rows", 1, int),
                             ("remap_pending", 2, bool), ("remap_failure", 3, bool)):
            g.put(k, conv(rows[pos]) if rows else None, source="nvmlDeviceGetRemappedRows", rc=rc)

    def _read_clocks_power_temperature(self, nv, g: GpuState, h) -> None:
        """Clock event reasons and application clocks (MHz), power limits and draw (W, NVML's mW
        / 1000), temperature and the margin to the slowdown threshold (degrees C)."""
        self._put(g, "clock_event_reasons", "nvmlDeviceGetCurrentClocksEventReasons", h, conv=int)
        self._put(g, "app_clock_graphics_mhz", "nvmlDeviceGetApplicationsClock", h, nv.NVML_CLOCK_GRAPHICS)
        self._put(g, "app_clock_mem_mhz", "nvmlDeviceGetApplicationsClock", h, nv.NVML_CLOCK_MEM)
        self._put(g, "default_app_clock_graphics_mhz", "nvmlDeviceGetDefaultApplicationsClock", h,
                  nv.NVML_CLOCK_GRAPHICS)
        self._put(g, "default_app_clock_mem_mhz", "nvmlDeviceGetDefaultApplicationsClock", h, nv.NVML_CLOCK_MEM)
        mw = lambda v: v / 1000.0  # noqa: E731  NVML power values are mW
        self._put(g, "power_limit_w", "nvmlDeviceGetPowerManagementLimit", h, conv=mw)
        self._put(g, "default_power_limit_w", "nvmlDeviceGetPowerManagementDefaultLimit", h, conv=mw)
        self._put(g, "power_draw_w", "nvmlDeviceGetPowerUsage", h, conv=mw)
        t = self._put(g, "temperature_c", "nvmlDeviceGetTemperature", h, nv.NVML_TEMPERATURE_GPU)
        slow = self._put(g, "slowdown_temperature_c", "nvmlDeviceGetTemperatureThreshold", h,
                         nv.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN)
        if t is not None and slow is not None:
            g.put("slowdown_margin_c", slow - t, source="nvmlDeviceGetTemperatureThreshold")
        else:
            g.put("slowdown_margin_c", None, source="nvmlDeviceGetTemperatureThreshold",
                  rc=g.rc("slowdown_temperature_c") if slow is None else g.rc("temperature_c"))

    def _read_nvlink_state(self, nv, g: GpuState, h) -> list[bool]:
        """Each NVLink's state (nvmlDeviceGetNvLinkState, links numbered from 0 up to the first
        invalid one); returns the states."""
        links, first_rc = [], None
        for link in range(nv.NVML_NVLINK_MAX_LINKS):
            v, rc = self._call("nvmlDeviceGetNvLinkState", h, link)
            if rc != RC_SUCCESS:
                first_rc = first_rc or rc
                if rc in ("INVALID_ARGUMENT", "NOT_SUPPORTED"):
                    break  # links are numbered from 0: the first invalid one ends the list
                continue
            links.append(bool(v))
        g.put("nvlink_active", links if links else None, source="nvmlDeviceGetNvLinkState",
              rc=RC_SUCCESS if links else (first_rc or "NOT_SUPPORTED"))
        return links

    def _read_fabric(self, nv, g: GpuState, h) -> None:
        """The GPU's fabric state and status (nvmlDeviceGetGpuFabricInfo)."""
        info = nv.c_nvmlGpuFabricInfo_t()
        _, rc = self._call("nvmlDeviceGetGpuFabricInfo", h, nv.byref(info))
        if rc == RC_SUCCESS:
            g.put("fabric_state", _FABRIC_STATES.get(int(info.state), str(info.state)),
                  source="nvmlDeviceGetGpuFabricInfo")
            g.put("fabric_status", "Success" if int(info.status) == 0 else
                  self._rc_names.get(int(info.status), str(info.status)), source="nvmlDeviceGetGpuFabricInfo")
        else:
            g.put("fabric_state", None, source="nvmlDeviceGetGpuFabricInfo", rc=rc)
            g.put("fabric_status", None, source="nvmlDeviceGetGpuFabricInfo", rc=rc)

    def _read_recovery_action(self, nv, g: GpuState, h) -> None:
        """``gpu_recovery_action``: the field ``NVML_FI_DEV_GET_GPU_RECOVERY_ACTION`` (230) of
        ``nvmlDeviceGetFieldValues``, an ``nvmlDeviceGpuRecoveryAction_t`` recorded by its name
        without ``NVML_GPU_RECOVERY_ACTION_`` (``NONE`` 0, ``GPU_RESET`` 1, ``NODE_REBOOT`` 2,
        ``DRAIN_P2P`` 3, ``DRAIN_AND_RESET`` 4, and newer ones by pynvml's names; a number pynvml
        does not name: ``ACTION_<n>``). NVML fills each field's own ``nvmlReturn`` (the call
        succeeds when any field was read): that code is what is recorded. A driver that predates
        the field reports it there (``NOT_SUPPORTED``, or ``INVALID_ARGUMENT`` for a field id it
        does not know); a pynvml or driver without the call gives ``FUNCTION_NOT_FOUND``. All of
        these are absent values (:data:`slurmkit.health.nvml_returns.FIELD_ABSENT_RCS`): no
        result, not slurmkit's trouble."""
        src = "nvmlDeviceGetFieldValues"
        field_id = getattr(nv, "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION", None)
        if field_id is None:  # a pynvml older than the field
            g.put("gpu_recovery_action", None, source=src, rc="FUNCTION_NOT_FOUND")
            return
        vals, rc = self._call("nvmlDeviceGetFieldValues", h, [field_id])
        if rc != RC_SUCCESS:
            g.put("gpu_recovery_action", None, source=src, rc=rc)
            return
        fv = vals[0]
        rc = RC_SUCCESS if int(fv.nvmlReturn) == 0 else self._rc_names.get(int(fv.nvmlReturn), "UNKNOWN")
        if rc != RC_SUCCESS:
            g.put("gpu_recovery_action", None, source=src, rc=rc)
            return
        names = {getattr(nv, k): k[len("NVML_GPU_RECOVERY_ACTION_"):]
                 for k in dir(nv) if k.startswith("NVML_GPU_RECOVERY_ACTION_")}
        action = int(fv.value.uiVal)
        g.put("gpu_recovery_action", names.get(action, f"ACTION_{action}"), source=src)

    def _read_nvlink_errors(self, nv, g: GpuState, h, links: list[bool]) -> None:
        """``nvlink_errors``: {link: {replay, recovery, crc_flit, crc_data}} of the active links."""
        from slurmkit.health.nvlink import NVLINK_COUNTERS

        errs, rc_seen = {}, None
        for link, up in enumerate(links):
            if not up:
                continue
            row = {}
            for name, const in NVLINK_COUNTERS.items():
                v, rc = self._call("nvmlDeviceGetNvLinkErrorCounter", h, link, getattr(nv, const))
                if rc == RC_SUCCESS:
                    row[name] = int(v)
                else:
                    rc_seen = rc_seen or rc
            if row:
                errs[str(link)] = row
        g.put("nvlink_errors", errs or None, source="nvmlDeviceGetNvLinkErrorCounter",
              rc=RC_SUCCESS if errs else (rc_seen or "NOT_SUPPORTED"))

    def _read_memory(self, g: GpuState, h) -> None:
        nv = self._nvml
        mem, rc = self._call("nvmlDeviceGetMemoryInfo", h, nv.nvmlMemory_v2)
        for k, attr in (("memory_total_mib", "total"), ("memory_reserved_mib", "reserved"),
                        ("memory_used_mib", "used")):
            g.put(k, getattr(mem, attr) // MIB if mem is not None else None,
                  source="nvmlDeviceGetMemoryInfo_v2", rc=rc)
        procs, rc = self._call("nvmlDeviceGetComputeRunningProcesses", h)
        g.put("processes", [{"pid": int(p.pid), "used_mib": None if p.usedGpuMemory is None
                             else int(p.usedGpuMemory) // MIB} for p in procs] if procs is not None else None,
              source="nvmlDeviceGetComputeRunningProcesses_v3", rc=rc)

    def _numa(self, bus_id: str | None):
        """(NUMA node, source, rc) from ``<sysfs>/bus/pci/devices/<bus>/numa_node`` (-1 -> None)."""
        src = "sysfs:bus/pci/devices/*/numa_node"
        if not bus_id:
            return None, src, "NOT_AVAILABLE"
        try:
            with open(os.path.join(self.sysfs, "bus", "pci", "devices", bus_id, "numa_node")) as f:
                n = int(f.read().strip())
        except (OSError, ValueError):
            return None, src, "NOT_AVAILABLE"
        return (n if n >= 0 else None), src, ("SUCCESS" if n >= 0 else "NOT_AVAILABLE")

    def _read_accounting(self, g: GpuState, h) -> None:
        """Per-process accounting records (only when accounting mode is on)."""
        if g.get("accounting_mode") is not True:
            g.put("accounting", None, source="nvmlDeviceGetAccountingStats",
                  rc=g.rc("accounting_mode") if g.get("accounting_mode") is None else "NOT_AVAILABLE")
            return
        pids, rc = self._call("nvmlDeviceGetAccountingPids", h)
        if rc != RC_SUCCESS:
            g.put("accounting", None, source="nvmlDeviceGetAccountingPids", rc=rc)
            return
        recs = []
        for pid in pids:
            st, rc = self._call("nvmlDeviceGetAccountingStats", h, pid)
            if rc != RC_SUCCESS:
                continue  # the record aged out of the driver's buffer between the two calls
            recs.append({"pid": int(pid), "gpu_util_pct": int(st.gpuUtilization),
                         "memory_util_pct": int(st.memoryUtilization),
                         "max_memory_mib": None if st.maxMemoryUsage is None else int(st.maxMemoryUsage) // MIB,
                         "time_ms": int(st.time), "start_time_us": int(st.startTime),
                         "running": bool(st.isRunning)})
        g.put("accounting", recs, source="nvmlDeviceGetAccountingStats")

    def sample_clock_events(self, gpu: GpuState) -> int | None:
        h = self._handles.get(gpu.index)
        if h is None:
            return None
        v, rc = self._call("nvmlDeviceGetCurrentClocksEventReasons", h)
        return int(v) if rc == RC_SUCCESS else None

    def sample_busy(self, gpu: GpuState) -> dict:
        h = self._handles.get(gpu.index)
        if h is None:
            return {"memory_used_mib": None, "pids": []}
        fresh = GpuState(index=gpu.index)
        self._read_memory(fresh, h)
        return {"memory_used_mib": fresh.get("memory_used_mib"),
                "pids": [p["pid"] for p in fresh.get("processes") or []]}

    # ---- actions -------------------------------------------------------------------------
    def _do(self, action: Action) -> None:
        """Carry out ``action`` through NVML (the call each kind makes: :class:`Action`). Raises
        :class:`ActionFailed` with the NVML return code when NVML refuses it (init, handle or the
        call itself)."""
        if action.kind == "kill":
            import signal

            try:
                os.kill(int(action.pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
            return
        nv = self._lib()
        text = action.describe()
        if not getattr(self, "_inited", False):
            _, rc = self._call("nvmlInit")
            if rc != RC_SUCCESS:
                raise ActionFailed(f"{text}: nvmlInit: {rc}", rc)
            self._inited = True
        h = self._handles.get(action.gpu_index)
        if h is None:
            h, rc = self._call("nvmlDeviceGetHandleByIndex", action.gpu_index)
            if rc != RC_SUCCESS:
                raise ActionFailed(f"{text}: nvmlDeviceGetHandleByIndex_v2: {rc}", rc)
            self._handles[action.gpu_index] = h
        if action.kind == "reset_app_clocks":
            call, args = "nvmlDeviceResetApplicationsClocks", ()
        elif action.kind == "set_app_clocks":
            mem, graphics = (int(x) for x in action.clocks_mhz)
            call, args = "nvmlDeviceSetApplicationsClocks", (mem, graphics)
        elif action.kind == "set_locked_clocks":
            call, args = "nvmlDeviceSetGpuLockedClocks", tuple(int(x) for x in action.clocks_mhz)
        elif action.kind == "reset_locked_clocks":
            call, args = "nvmlDeviceResetGpuLockedClocks", ()
        elif action.kind == "set_mem_locked_clocks":
            call, args = "nvmlDeviceSetMemoryLockedClocks", tuple(int(x) for x in action.clocks_mhz)
        elif action.kind == "reset_mem_locked_clocks":
            call, args = "nvmlDeviceResetMemoryLockedClocks", ()
        elif action.kind == "set_power_limit":
            call, args = "nvmlDeviceSetPowerManagementLimit", (int(round(action.power_limit_w * 1000)),)
        elif action.kind == "enable_accounting":
            call, args = "nvmlDeviceSetAccountingMode", (nv.NVML_FEATURE_ENABLED,)
        else:
            raise SourceError(f"unknown action {action.kind!r}")
        _, rc = self._call(call, h, *args)
        if rc != RC_SUCCESS:
            raise ActionFailed(f"{text}: {call}: {rc}", rc)
