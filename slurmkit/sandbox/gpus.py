"""The sandbox's GPUs as NVML would describe them: snapshots the hooks replay.

The sandbox's GPUs are character devices; what NVML would say about them is written here as
slurmkit health snapshots (one JSON file per node, the format of ``slurmkit health snapshot``),
so that the real prolog / epilog / healthcheck run on every sandbox node exactly as they do when
an admin replays a recorded node. Identity is kept consistent with the device files: NVML
enumerates GPUs by PCI bus id; GPU ``j`` in that order has minor number ``(j + 1) % G``, so
Slurm's GPU index (position in gres.conf), the device minor and NVML's index all differ.

:class:`GpuSimulator` keeps the snapshots current while the demo runs: each GPU's energy
counter (``nvmlDeviceGetTotalEnergyConsumption``, mJ) advances with its power draw, so the
epilog measures a real per-job energy delta.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path

from slurmkit.atomicfile import atomic_write
from slurmkit.health.state import RC_NOT_SUPPORTED, GpuState, NodeState, Reading

# DGX H100-like PCI bus ids, in NVML (bus) order.
_BUS_IDS = ["0000:19:00.0", "0000:3b:00.0", "0000:4c:00.0", "0000:5d:00.0",
            "0000:9b:00.0", "0000:bb:00.0", "0000:cb:00.0", "0000:db:00.0"]
IDLE_POWER_W = 70.0
BUSY_POWER_W = 450.0
DRIVER = "550.90.07"
VBIOS = "96.00.99.00.01"

#: Faults the sandbox can give a node's GPU (name -> values that change).
FAULTS = {
    # a pending row remap caused by uncorrectable errors: the GPU needs a reset
    "row-remap": {"remap_pending": True, "remap_uncorrectable_rows": 2},
    "ecc-dbe": {"ecc_volatile_uncorrectable": 4},
}


def nvml_minor(nvml_index: int, gpus: int) -> int:
    """Device minor number of the GPU NVML enumerates at ``nvml_index``."""
    return (nvml_index + 1) % gpus if gpus > 1 else 0


def bus_id(nvml_index: int) -> str:
    if nvml_index < len(_BUS_IDS):
        return _BUS_IDS[nvml_index]
    return f"0000:{0xe0 + nvml_index - len(_BUS_IDS):02x}:00.0"


def node_state(node: str, gpus: int, gpu_type: str = "h100", energy_mj: dict[int, int] | None = None,
               power_w: dict[int, float] | None = None, fault: str | None = None, fault_gpu: int = 1,
               timestamp: str = "") -> NodeState:
    """A healthy (or, with ``fault``, a sick) NodeState for one sandbox node.

    ``energy_mj``: per NVML index, the energy counter in mJ (default 0); ``power_w``: per NVML
    index, the power draw in W; ``fault``: a key of :data:`FAULTS`, applied to NVML index
    ``fault_gpu``. Raises KeyError for an unknown fault.
    """
    state = NodeState(node=node, source="sandbox", replay=True, driver_version=DRIVER, gpu_count=gpus,
                      pci_devices=[bus_id(j) for j in range(gpus)], timestamp=timestamp)
    for j in range(gpus):
        g = GpuState(index=j, uuid=f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{node}.{j}.slurmkit-sandbox')}",
                     pci_bus_id=bus_id(j), minor_number=nvml_minor(j, gpus))
        values = {
            "name": f"NVIDIA {gpu_type.upper()} (slurmkit sandbox)", "serial": f"SBX{abs(hash((node, j))) % 10**9:09d}",
            "vbios_version": VBIOS, "inforom_valid": True, "reset_required": False, "gpu_recovery_action": "NONE",
            "persistence_mode": True, "accounting_mode": True, "mig_current": False, "mig_pending": False, "ecc_enabled": True,
            "ecc_volatile_uncorrectable": 0, "ecc_volatile_correctable": 0, "ecc_aggregate_uncorrectable": 0,
            "ecc_aggregate_sram_correctable": 0, "remap_correctable_rows": 0, "remap_uncorrectable_rows": 0,
            "remap_pending": False, "remap_failure": False, "clock_event_reasons": 0, "clock_event_samples": [0],
            "app_clock_graphics_mhz": 1980, "app_clock_mem_mhz": 2619, "default_app_clock_graphics_mhz": 1980,
            "default_app_clock_mem_mhz": 2619, "power_limit_w": 700.0, "default_power_limit_w": 700.0,
            "power_draw_w": (power_w or {}).get(j, IDLE_POWER_W), "temperature_c": 34,
            "slowdown_temperature_c": 90, "slowdown_margin_c": 56, "utilization_gpu_pct": 0,
            "pcie_link_gen": 5, "pcie_link_gen_max": 5, "pcie_link_width": 16, "pcie_link_width_max": 16,
            "virtualization_mode": "None", "nvlink_active": [True] * 18, "fabric_state": "Completed",
            "fabric_status": "Success", "memory_total_mib": 81559, "memory_reserved_mib": 535,
            "memory_used_mib": 0, "processes": [], "accounting": [],
            "total_energy_mj": int((energy_mj or {}).get(j, 0)),
        }
        if fault and j == fault_gpu:
            values.update(FAULTS[fault])
        for key, value in values.items():
            g.values[key] = Reading(value, "sandbox")
        # H100s retire no pages (they remap rows): NVML says NOT_SUPPORTED
        for key in ("retired_pages_sbe", "retired_pages_dbe", "retired_pages_pending"):
            g.values[key] = Reading(None, "sandbox", RC_NOT_SUPPORTED)
        state.gpus.append(g)
    return state


def write_snapshot(path: Path, state: NodeState) -> None:
    """Write ``state`` as snapshot JSON, atomically (a reader never sees half a file)."""
    atomic_write(path, json.dumps(state.to_json(), indent=1) + "\n")


class GpuSimulator:
    """Keeps one snapshot per sandbox node current: energy counters advance with power draw.

    ``snapshot_dir``: where ``<node>.json`` files live; ``faults``: ``{node: fault name}``.
    Use as a context manager (a background thread refreshes every ``period_s`` seconds), or call
    :meth:`write_all` once for a static set.
    """

    def __init__(self, snapshot_dir: Path, nodes: list[str], gpus: int, gpu_type: str = "h100",
                 faults: dict[str, str] | None = None, period_s: float = 1.0, power_w: float = BUSY_POWER_W):
        self.dir = Path(snapshot_dir)
        self.nodes, self.gpus, self.gpu_type = nodes, gpus, gpu_type
        self.faults = dict(faults or {})
        self.period_s, self.power_w = period_s, power_w
        self._t0 = time.time()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def path(self, node: str) -> Path:
        return self.dir / f"{node}.json"

    def write_all(self) -> None:
        """Write every node's snapshot for the present moment."""
        self.dir.mkdir(parents=True, exist_ok=True)
        elapsed = time.time() - self._t0
        energy = {j: int(self.power_w * elapsed * 1000) for j in range(self.gpus)}
        power = {j: self.power_w for j in range(self.gpus)}
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        for n in self.nodes:
            write_snapshot(self.path(n), node_state(n, self.gpus, self.gpu_type, energy, power,
                                                    fault=self.faults.get(n), timestamp=stamp))

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            self.write_all()

    def __enter__(self):
        self.write_all()
        self._thread = threading.Thread(target=self._loop, name="sandbox-gpus", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread:
            self._thread.join()
