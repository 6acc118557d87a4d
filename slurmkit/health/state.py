"""The GPU state of one node: plain records (:mod:`slurmkit.records`) that every source fills
and every check reads.

A :class:`NodeState` holds node-level facts (NVML init result, driver version, PCI devices,
kernel-log XIDs, slurmkit's own errors) and one :class:`GpuState` per GPU in NVML order. Each GPU
value is a :class:`Reading` that keeps the value *and* where it came from (the NVML call, or the
``nvidia-smi`` field when imported) and the call's return code, so "not supported" is never
confused with "zero" and a snapshot can be replayed faithfully.

Value keys and units (``FIELDS``) are fixed here; sources, checks and the snapshot JSON all use
them. Memory in MiB, clocks in MHz, power in W, temperature in degrees C, energy in mJ.
Only the standard library is imported (the prolog imports this module on every job).
"""

from __future__ import annotations

from slurmkit.pci import normalise_bus_id
from slurmkit.records import field, record

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing is not imported when the hooks run
    from typing import Any

SNAPSHOT_VERSION = 1

# Return codes recorded per value (NVML's names without the NVML_ERROR_ prefix; "SUCCESS").
RC_SUCCESS = "SUCCESS"
RC_NOT_SUPPORTED = "NOT_SUPPORTED"
RC_NOT_AVAILABLE = "NOT_AVAILABLE"  # nvidia-smi printed "N/A" or the field is absent in a capture
RC_FUNCTION_NOT_FOUND = "FUNCTION_NOT_FOUND"
RC_GPU_IS_LOST = "GPU_IS_LOST"
RC_UNKNOWN = "UNKNOWN"
RC_LIBRARY_NOT_FOUND = "LIBRARY_NOT_FOUND"

#: Return codes that mean "this value does not exist here" (never hardware evidence).
ABSENT_RCS = frozenset({RC_NOT_SUPPORTED, RC_NOT_AVAILABLE, RC_FUNCTION_NOT_FOUND})

# key -> (NVML call it comes from live, unit / meaning)
FIELDS: dict[str, tuple[str, str]] = {
    "nvsmi_error": ("nvidia-smi", "an error text nvidia-smi printed in the GPU's section of a capture (\"\": none)"),
    "name": ("nvmlDeviceGetName", "product name"),
    "numa_node": ("sysfs:bus/pci/devices/*/numa_node", "NUMA node of the GPU (None: unknown)"),
    "serial": ("nvmlDeviceGetSerial", "board serial"),
    "vbios_version": ("nvmlDeviceGetVbiosVersion", "VBIOS version string"),
    "inforom_valid": ("nvmlDeviceValidateInforom", "bool: InfoROM checksum valid"),
    "reset_required": ("nvidia-smi", "bool: GPU reset required (a capture's \"GPU Reset Status / Reset Required\")"),
    "gpu_recovery_action": ("nvmlDeviceGetFieldValues",
                            "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION as its nvmlDeviceGpuRecoveryAction_t name without "
                            "NVML_GPU_RECOVERY_ACTION_: NONE | GPU_RESET | NODE_REBOOT | DRAIN_P2P | DRAIN_AND_RESET | ..."),
    "persistence_mode": ("nvmlDeviceGetPersistenceMode", "bool"),
    "accounting_mode": ("nvmlDeviceGetAccountingMode", "bool"),
    "mig_current": ("nvmlDeviceGetMigMode", "bool: MIG enabled now"),
    "mig_pending": ("nvmlDeviceGetMigMode", "bool: MIG enabled after reset"),
    "mig_devices": ("nvmlDeviceGetMigDeviceHandleByIndex",
                    "list of the GPU's MIG devices (MIG mode on only): {index, gpu_instance_id, compute_instance_id, "
                    "profile, slices, ci_slices, memory_mib, sm_count, uuid} (slurmkit.health.mig.mig_device)"),
    "ecc_enabled": ("nvmlDeviceGetEccMode", "bool: ECC mode current"),
    "ecc_pending": ("nvmlDeviceGetEccMode", "bool: ECC mode pending (takes effect at the next reset)"),
    "ecc_volatile_uncorrectable": ("nvmlDeviceGetTotalEccErrors", "count, UNCORRECTED/VOLATILE"),
    "ecc_volatile_correctable": ("nvmlDeviceGetTotalEccErrors", "count, CORRECTED/VOLATILE"),
    "ecc_aggregate_uncorrectable": ("nvmlDeviceGetTotalEccErrors", "count, UNCORRECTED/AGGREGATE"),
    "ecc_aggregate_sram_correctable": ("nvmlDeviceGetMemoryErrorCounter",
                                       "count, CORRECTED/AGGREGATE/SRAM"),
    "retired_pages_sbe": ("nvmlDeviceGetRetiredPages", "pages retired for multiple SBE"),
    "retired_pages_dbe": ("nvmlDeviceGetRetiredPages", "pages retired for DBE"),
    "retired_pages_pending": ("nvmlDeviceGetRetiredPagesPendingStatus", "bool"),
    "remap_correctable_rows": ("nvmlDeviceGetRemappedRows", "rows remapped for correctable"),
    "remap_uncorrectable_rows": ("nvmlDeviceGetRemappedRows", "rows remapped for uncorrectable"),
    "remap_pending": ("nvmlDeviceGetRemappedRows", "bool: remap pending (reset needed)"),
    "remap_failure": ("nvmlDeviceGetRemappedRows", "bool: a remap failed"),
    "clock_event_reasons": ("nvmlDeviceGetCurrentClocksEventReasons", "bitmask (first sample)"),
    "clock_event_samples": ("nvmlDeviceGetCurrentClocksEventReasons",
                            "list of bitmasks, 100 ms apart (1 = single sample)"),
    "app_clock_graphics_mhz": ("nvmlDeviceGetApplicationsClock", "MHz"),
    "app_clock_mem_mhz": ("nvmlDeviceGetApplicationsClock", "MHz"),
    "default_app_clock_graphics_mhz": ("nvmlDeviceGetDefaultApplicationsClock", "MHz"),
    "default_app_clock_mem_mhz": ("nvmlDeviceGetDefaultApplicationsClock", "MHz"),
    "power_limit_w": ("nvmlDeviceGetPowerManagementLimit", "W (NVML gives mW)"),
    "default_power_limit_w": ("nvmlDeviceGetPowerManagementDefaultLimit", "W"),
    "power_draw_w": ("nvmlDeviceGetPowerUsage", "W"),
    "temperature_c": ("nvmlDeviceGetTemperature", "deg C, GPU sensor"),
    "slowdown_temperature_c": ("nvmlDeviceGetTemperatureThreshold", "deg C, SLOWDOWN threshold"),
    "slowdown_margin_c": ("nvmlDeviceGetTemperatureThreshold",
                          "deg C left before HW slowdown (threshold - current)"),
    "utilization_gpu_pct": ("nvmlDeviceGetUtilizationRates", "percent"),
    "pcie_link_gen": ("nvmlDeviceGetCurrPcieLinkGeneration", "generation"),
    "pcie_link_gen_max": ("nvmlDeviceGetMaxPcieLinkGeneration", "generation"),
    "pcie_link_width": ("nvmlDeviceGetCurrPcieLinkWidth", "lanes"),
    "pcie_link_width_max": ("nvmlDeviceGetMaxPcieLinkWidth", "lanes"),
    "virtualization_mode": ("nvmlDeviceGetVirtualizationMode", "None | Pass-Through | ..."),
    "nvlink_active": ("nvmlDeviceGetNvLinkState", "list of bool per link (supported links)"),
    "nvlink_errors": ("nvmlDeviceGetNvLinkErrorCounter",
                      "{link: {replay, recovery, crc_flit, crc_data}} counts of the active links"),
    "pcie_replay_counter": ("nvmlDeviceGetPcieReplayCounter", "PCIe replays since boot"),
    "pcie_aer_correctable": ("sysfs:bus/pci/devices/*/aer_dev_correctable", "TOTAL_ERR_COR since boot"),
    "pcie_aer_nonfatal": ("sysfs:bus/pci/devices/*/aer_dev_nonfatal", "TOTAL_ERR_NONFATAL since boot"),
    "pcie_aer_fatal": ("sysfs:bus/pci/devices/*/aer_dev_fatal", "TOTAL_ERR_FATAL since boot"),
    "fabric_state": ("nvmlDeviceGetGpuFabricInfo", "Not Supported | Not Started | In Progress | Completed"),
    "fabric_status": ("nvmlDeviceGetGpuFabricInfo", "Success or an NVML error name"),
    "memory_total_mib": ("nvmlDeviceGetMemoryInfo_v2", "MiB"),
    "memory_reserved_mib": ("nvmlDeviceGetMemoryInfo_v2", "MiB (driver reserved, not 'used')"),
    "memory_used_mib": ("nvmlDeviceGetMemoryInfo_v2", "MiB (v2: reserved excluded)"),
    "processes": ("nvmlDeviceGetComputeRunningProcesses_v3",
                  "list of {pid, used_mib} compute processes"),
    "busy_samples": ("nvmlDeviceGetMemoryInfo_v2",
                     "list of {memory_used_mib, pids} re-read 2 s apart before a job"),
    "accounting": ("nvmlDeviceGetAccountingStats",
                   "list of {pid, gpu_util_pct, memory_util_pct, max_memory_mib, time_ms, start_time_us,"
                   " running} (accounting mode on only)"),
    "total_energy_mj": ("nvmlDeviceGetTotalEnergyConsumption", "mJ since driver load"),
}

@record
class Reading:
    """One value with its provenance: ``source`` is the NVML call (live) or the nvidia-smi field
    (imported); ``rc`` the NVML return code name (``SUCCESS``, ``NOT_SUPPORTED``, ``GPU_IS_LOST``..).
    ``value`` is None whenever ``rc`` is not SUCCESS."""

    value: Any = None
    source: str = ""
    rc: str = RC_SUCCESS

    def to_json(self) -> dict:
        return {"value": self.value, "source": self.source, "rc": self.rc}


@record
class GpuState:
    """One GPU. ``index`` is the NVML enumeration order (not Slurm's gres index, not the minor).

    ``handle_rc`` is the return code of ``nvmlDeviceGetHandleByIndex_v2`` (``GPU_IS_LOST`` ->
    the GPU fell off the bus). ``values`` maps keys of :data:`FIELDS` to :class:`Reading`.
    """

    index: int
    uuid: str | None = None
    pci_bus_id: str | None = None
    minor_number: int | None = None
    handle_rc: str = RC_SUCCESS
    values: dict[str, Reading] = field(default_factory=dict)

    def get(self, key: str, default=None):
        """The value of ``key`` when it was read successfully, else ``default``."""
        r = self.values.get(key)
        if r is None or r.rc != RC_SUCCESS or r.value is None:
            return default
        return r.value

    def rc(self, key: str) -> str:
        """The return code recorded for ``key`` (``NOT_AVAILABLE`` when never read)."""
        r = self.values.get(key)
        return r.rc if r is not None else RC_NOT_AVAILABLE

    def put(self, key: str, value, source: str | None = None, rc: str = RC_SUCCESS) -> None:
        """Record ``key``; ``source`` defaults to the NVML call listed in :data:`FIELDS`."""
        if source is None:
            source = FIELDS.get(key, ("", ""))[0]
        self.values[key] = Reading(value if rc == RC_SUCCESS else None, source, rc)


@record
class Xid:
    """One NVRM Xid line from the kernel log: ``xid`` number, ``pci_bus_id`` normalised,
    ``message`` the text after the number, ``line`` its 1-based line in ``origin`` (for
    ``/dev/kmsg``: the record's sequence number), ``timestamp`` the kernel's time as written
    (``dmesg``'s ``[  123.456789]`` seconds since boot, or ``dmesg -T``'s date).

    ``seq``: the ``/dev/kmsg`` sequence number (None for saved text): orders the line exactly
    against other records of the same boot. ``time_s``: when it was logged, epoch seconds
    (None when unknown): the kernel's timestamp (``/dev/kmsg``'s microseconds since boot) plus
    the boot's wall-clock time, as ``dmesg -T`` converts it (:mod:`slurmkit.health.kmsg`).
    ``gpu_index``: for a line that names no PCI address, the driver's ``GPU<n>`` (NVML's index;
    None: the line names no GPU, or has a PCI address)."""

    xid: int
    pci_bus_id: str | None
    message: str
    origin: str = ""
    line: int = 0
    timestamp: str = ""
    seq: int | None = None
    time_s: float | None = None
    gpu_index: int | None = None


@record
class NodeState:
    """Everything the checks look at for one node.

    ``source`` says where it came from (``live``, ``snapshot:PATH``, ``nvidia-smi-xml:PATH``...),
    ``replay`` is True for anything not read live (then actions are only logged as "would").
    ``init_rc`` is the result of ``nvmlInit`` (``LIBRARY_NOT_FOUND`` on a node without the driver),
    ``gpu_count`` of ``nvmlDeviceGetCount_v2``; ``pci_devices`` the NVIDIA GPU functions seen in
    sysfs (``/sys/bus/pci/devices``, class 0x03xx, vendor 0x10de), None when not looked at;
    ``errors`` slurmkit's own trouble (never hardware evidence).
    """

    node: str
    source: str
    replay: bool = True
    init_rc: str = RC_SUCCESS
    driver_version: str | None = None
    gpu_count: int | None = None
    gpus: list[GpuState] = field(default_factory=list)
    pci_devices: list[str] | None = None
    xids: list[Xid] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    timestamp: str = ""
    #: what was left out of the captures this state was read from, not being their tool's
    #: output (``health import --fabric``: a pasted shell prompt, comment or ``...`` elision):
    #: said with the verdict, never own trouble.
    notes: list[str] = field(default_factory=list)
    #: InfiniBand / RoCE ports of the profile's HCAs (:func:`slurmkit.health.fabric.read_ib_ports`;
    #: None: not read, so not judged).
    ib_ports: list[dict] | None = None
    #: node services (read under the deadline by :func:`slurmkit.health.fabric.read_node_fabric`:
    #: ``{"fabric_manager": {"running", "pids"}, "peermem": {"module"}}``; None: not read).
    services: dict | None = None
    #: the previous run's error counters (:mod:`slurmkit.health.baseline`; None: no previous
    #: run). Not part of the snapshot.
    baseline: dict | None = None
    #: GPU resets recorded on this node this boot (``slurmkit hooks gpu-reset``:
    #: :mod:`slurmkit.hooks.gpureset`), ``{pci bus id: {"at_s": epoch s, "kmsg_seq": int | None}}``:
    #: an Xid logged before its GPU's reset is history, not evidence. Not part of the snapshot.
    gpu_resets: dict | None = None

    def gpu_by_bus_id(self, bus_id: str) -> GpuState | None:
        want = normalise_bus_id(bus_id)
        return next((g for g in self.gpus if g.pci_bus_id == want), None)

    def gpu_by_minor(self, minor: int) -> GpuState | None:
        return next((g for g in self.gpus if g.minor_number == minor), None)

    # ---- JSON (the snapshot format) -------------------------------------------------------
    def to_json(self) -> dict:
        """The snapshot JSON: ``{"slurmkit_snapshot": 1, "node", "source", ..., "gpus": [...]}``."""
        return {
            "slurmkit_snapshot": SNAPSHOT_VERSION,
            "node": self.node,
            "source": self.source,
            "timestamp": self.timestamp,
            "init_rc": self.init_rc,
            "driver_version": self.driver_version,
            "gpu_count": self.gpu_count,
            "pci_devices": self.pci_devices,
            "xids": [x.__dict__ for x in self.xids],
            "errors": list(self.errors),
            "notes": list(self.notes),
            "ib_ports": self.ib_ports,
            "services": self.services,
            "gpus": [{
                "index": g.index, "uuid": g.uuid, "pci_bus_id": g.pci_bus_id,
                "minor_number": g.minor_number, "handle_rc": g.handle_rc,
                "values": {k: r.to_json() for k, r in g.values.items()},
            } for g in self.gpus],
        }

    @classmethod
    def from_json(cls, data: dict, source: str, replay: bool = True) -> "NodeState":
        """Inverse of :meth:`to_json`; raises ``KeyError``/``TypeError``/``ValueError`` on a bad
        document (the snapshot source wraps these into a ``SourceError`` naming the file)."""
        if not isinstance(data, dict) or data.get("slurmkit_snapshot") != SNAPSHOT_VERSION:
            raise ValueError(f"not a slurmkit snapshot (want \"slurmkit_snapshot\": {SNAPSHOT_VERSION})")
        gpus = []
        for g in data["gpus"]:
            gs = GpuState(index=int(g["index"]), uuid=g.get("uuid"),
                          pci_bus_id=normalise_bus_id(g["pci_bus_id"]) if g.get("pci_bus_id") else None,
                          minor_number=g.get("minor_number"), handle_rc=g.get("handle_rc", RC_SUCCESS))
            for k, r in g.get("values", {}).items():
                if not isinstance(r, dict):
                    raise TypeError(f"gpus[{gs.index}].values.{k}: want an object {{value, source, rc}}")
                gs.values[k] = Reading(r.get("value"), str(r.get("source", "")), str(r.get("rc", RC_SUCCESS)))
            gpus.append(gs)
        xids = [Xid(**x) for x in data.get("xids", [])]
        return cls(node=str(data.get("node", "")), source=source, replay=replay,
                   init_rc=str(data.get("init_rc", RC_SUCCESS)), driver_version=data.get("driver_version"),
                   gpu_count=data.get("gpu_count"), gpus=gpus, pci_devices=data.get("pci_devices"),
                   xids=xids, errors=list(data.get("errors", [])), timestamp=str(data.get("timestamp", "")),
                   notes=[str(x) for x in data.get("notes") or []],
                   ib_ports=_ports(data.get("ib_ports")),
                   services=data["services"] if isinstance(data.get("services"), dict) else None)


def _ports(v) -> list[dict] | None:
    if v is None:
        return None
    if not isinstance(v, list) or not all(isinstance(p, dict) and "hca" in p for p in v):
        raise TypeError("ib_ports: want a list of objects with an hca")
    return v
