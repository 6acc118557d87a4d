"""The sandbox's GPUs as NVML would describe them: snapshots the hooks replay.

The sandbox's GPUs are character devices; what NVML would say about them is written here as
slurmkit health snapshots (one JSON file per node, the format of ``slurmkit health snapshot``,
in ``<sandbox dir>/hooks/gpus/<node>.json``), so that the real prolog / epilog / healthcheck run
on every sandbox node exactly as they do when an admin replays a recorded node. ``sandbox up``
writes a healthy one per node; ``hooks install`` on the sandbox's slurm.conf replays them.
Identity is kept consistent with the device files: NVML enumerates GPUs by PCI bus id; GPU ``j``
in that order has minor number ``(j + 1) % G``, so Slurm's GPU index (position in gres.conf),
the device minor and NVML's index all differ.

A GPU is broken and fixed by editing its node's snapshot (``slurmkit sandbox gpu NODE --break
FAULT`` / ``--fix``): each fault of :data:`FAULTS` is the fault a real capture shows, its values
copied from that capture (named beside it) onto the healthy GPU. The faults given are kept in
``<sandbox dir>/hooks/gpus/faults.json`` (``{node: {"fault", "gpu", "at_s"}}``), so every writer
of the snapshots (``up``, the command, :class:`GpuSimulator`) applies the same ones.

:class:`GpuSimulator` keeps the snapshots current while the demo runs: each GPU's energy
counter (``nvmlDeviceGetTotalEnergyConsumption``, mJ) advances with its power draw, its
utilization (``nvmlDeviceGetUtilizationRates``) is the busy figure, and one accounting record
(``nvmlDeviceGetAccountingStats``) per period stands for a process, so the epilog measures a
real per-job energy delta and GPU utilization.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from slurmkit.atomicfile import atomic_write
from slurmkit.health.state import RC_NOT_SUPPORTED, RC_UNKNOWN, GpuState, NodeState, Reading, Xid

# DGX H100-like PCI bus ids, in NVML (bus) order.
_BUS_IDS = ["0000:19:00.0", "0000:3b:00.0", "0000:4c:00.0", "0000:5d:00.0",
            "0000:9b:00.0", "0000:bb:00.0", "0000:cb:00.0", "0000:db:00.0"]
IDLE_POWER_W = 70.0
BUSY_POWER_W = 450.0
#: utilization (%) of a busy simulated GPU, and of its accounting records
BUSY_UTILIZATION_PCT = 87
#: memory (MiB) a simulated process peaks at
BUSY_MEMORY_MIB = 30_720
#: accounting records NVML keeps per GPU here (a circular buffer; the oldest drop out)
ACCOUNTING_RECORDS = 64
DRIVER = "550.90.07"
VBIOS = "96.00.99.00.01"
#: where a sandbox keeps its nodes' snapshots, under its directory
SNAPSHOT_SUBDIR = Path("hooks") / "gpus"
FAULTS_FILE = "faults.json"


@dataclass(frozen=True)
class Fault:
    """A GPU fault the sandbox can give a node: ``summary`` (what it is), ``values`` (NVML
    readings that change), ``xid`` (an NVRM Xid line the kernel logs for the GPU, with
    ``xid_message``), ``lost`` (the NVML handle's return code once the GPU is gone: its readings
    are gone too), ``source`` (the real capture the edit is taken from, and the edit)."""

    summary: str
    source: str
    values: dict = field(default_factory=dict)
    xid: int | None = None
    xid_message: str = ""
    lost: str | None = None


_AKASH = "../shared/corpus/gpu-logs/akash-support-209_nvidia-smi-unknown-error_dmesg-T_xid79-fallen-off-bus.txt"
#: Faults the sandbox can give a node's GPU (``sandbox gpu NODE --break NAME``).
FAULTS: dict[str, Fault] = {
    "xid79": Fault(
        "the kernel logs Xid 79 (GPU has fallen off the bus) for the GPU; NVML still reads it",
        f"{_AKASH}: its line 'NVRM: Xid (PCI:0000:a1:00): 79, ..., GPU has fallen off the bus.'; "
        "edit: the bus id is the sandbox GPU's, the time the --break's",
        xid=79, xid_message="GPU has fallen off the bus."),
    "off-bus": Fault(
        "the GPU has fallen off the bus: Xid 79 in the kernel log and NVML cannot reach it "
        "(its handle: Unknown Error)",
        f"{_AKASH}: nvidia-smi's 'Unable to determine the device handle for GPU0000:A1:00.0: Unknown "
        "Error' and the Xid 79 line; edit: bus id and time the sandbox GPU's",
        xid=79, xid_message="GPU has fallen off the bus.", lost=RC_UNKNOWN),
    "dbe": Fault(
        "an uncorrectable (double-bit) ECC error since boot",
        "../shared/corpus/gpu-logs/q_excerpt_ECC_SRAM-uncorrectable_L139-149.txt: Volatile SRAM "
        "Uncorrectable 1, Aggregate SRAM Uncorrectable 5 (DRAM 0); edit: those counts on the sandbox GPU",
        values={"ecc_volatile_uncorrectable": 1, "ecc_aggregate_uncorrectable": 5}),
    "row-remap": Fault(
        "rows remapped for uncorrectable errors, the remap pending (the GPU needs a reset)",
        "../shared/corpus/nvidia-smi-q/a10_row_remap_pending.txt lines 139-143: Remapped Rows "
        "Correctable 0, Uncorrectable 4, Pending Yes, Remapping Failure No; edit: those on the sandbox GPU",
        values={"remap_correctable_rows": 0, "remap_uncorrectable_rows": 4, "remap_pending": True,
                "remap_failure": False}),
}


def nvml_minor(nvml_index: int, gpus: int) -> int:
    """Device minor number of the GPU NVML enumerates at ``nvml_index``."""
    return (nvml_index + 1) % gpus if gpus > 1 else 0


def bus_id(nvml_index: int) -> str:
    """PCI bus id (``0000:3b:00.0``) of the sandbox GPU NVML enumerates at ``nvml_index``."""
    if nvml_index < len(_BUS_IDS):
        return _BUS_IDS[nvml_index]
    return f"0000:{0xe0 + nvml_index - len(_BUS_IDS):02x}:00.0"


def node_state(node: str, gpus: int, gpu_type: str = "h100", energy_mj: dict[int, int] | None = None,
               power_w: dict[int, float] | None = None, fault: str | None = None, fault_gpu: int = 1,
               timestamp: str = "", utilization_pct: dict[int, int] | None = None,
               accounting: dict[int, list] | None = None, fault_at_s: float | None = None) -> NodeState:
    """A healthy (or, with ``fault``, a sick) NodeState for one sandbox node.

    ``energy_mj``: per NVML index, the energy counter in mJ (default 0); ``power_w``: per NVML
    index, the power draw in W; ``utilization_pct``: per NVML index, utilization in % (default
    0); ``accounting``: per NVML index, accounting records (``nvmlDeviceGetAccountingStats``'s
    fields); ``fault``: a key of :data:`FAULTS`, applied to NVML index ``fault_gpu``, its Xid
    logged at ``fault_at_s`` (epoch s; default now). Raises KeyError for an unknown fault.
    """
    state = NodeState(node=node, source="sandbox", replay=True, driver_version=DRIVER, gpu_count=gpus,
                      pci_devices=[bus_id(j) for j in range(gpus)], timestamp=timestamp)
    spec = FAULTS[fault] if fault else None
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
            "slowdown_temperature_c": 90, "slowdown_margin_c": 56,
            "utilization_gpu_pct": (utilization_pct or {}).get(j, 0),
            "pcie_link_gen": 5, "pcie_link_gen_max": 5, "pcie_link_width": 16, "pcie_link_width_max": 16,
            "virtualization_mode": "None", "nvlink_active": [True] * 18, "fabric_state": "Completed",
            "fabric_status": "Success", "memory_total_mib": 81559, "memory_reserved_mib": 535,
            "memory_used_mib": 0, "processes": [], "accounting": list((accounting or {}).get(j, [])),
            "total_energy_mj": int((energy_mj or {}).get(j, 0)),
        }
        sick = spec is not None and j == fault_gpu
        if sick:
            values.update(spec.values)
        if sick and spec.lost:
            g.handle_rc = spec.lost  # gone from NVML: no readings
        else:
            for key, value in values.items():
                g.values[key] = Reading(value, "sandbox")
            # H100s retire no pages (they remap rows): NVML says NOT_SUPPORTED
            for key in ("retired_pages_sbe", "retired_pages_dbe", "retired_pages_pending"):
                g.values[key] = Reading(None, "sandbox", RC_NOT_SUPPORTED)
        state.gpus.append(g)
    if spec is not None and spec.xid is not None and 0 <= fault_gpu < gpus:
        at = time.time() if fault_at_s is None else fault_at_s
        state.xids.append(Xid(xid=spec.xid, pci_bus_id=bus_id(fault_gpu), message=spec.xid_message,
                              origin="/dev/kmsg", line=1, time_s=at))
    return state


def write_snapshot(path: Path, state: NodeState) -> None:
    """Write ``state`` as snapshot JSON, atomically (a reader never sees half a file)."""
    atomic_write(path, json.dumps(state.to_json(), indent=1) + "\n")


# ---------------------------------------------------------------------- faults kept
def load_faults(snapshot_dir: Path) -> dict[str, dict]:
    """The faults given so far: ``{node: {"fault": name, "gpu": NVML index, "at_s": epoch s}}``
    from ``<snapshot_dir>/faults.json`` ({} when there is none or it cannot be read)."""
    try:
        data = json.loads((Path(snapshot_dir) / FAULTS_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return {n: f for n, f in data.items() if isinstance(f, dict) and f.get("fault") in FAULTS} \
        if isinstance(data, dict) else {}


def set_fault(snapshot_dir: Path, node: str, fault: str | None, gpu: int = 1, at_s: float | None = None) -> dict | None:
    """Give ``node``'s NVML GPU ``gpu`` the fault ``fault`` (a key of :data:`FAULTS`), or with
    None take the node's fault away; kept in ``faults.json``. Returns the entry it replaced (None
    when the node had no fault). Raises KeyError for an unknown fault."""
    if fault is not None and fault not in FAULTS:
        raise KeyError(fault)
    faults = load_faults(snapshot_dir)
    old = faults.pop(node, None)
    if fault is not None:
        faults[node] = {"fault": fault, "gpu": gpu, "at_s": time.time() if at_s is None else at_s}
    Path(snapshot_dir).mkdir(parents=True, exist_ok=True)
    atomic_write(Path(snapshot_dir) / FAULTS_FILE, json.dumps(faults, indent=1, sort_keys=True) + "\n")
    return old


def _kept_counters(path: Path) -> dict[int, int]:
    """The energy counters (mJ, per NVML index) of the snapshot at ``path`` ({} when none):
    rewriting a snapshot keeps them, as a GPU's counter does not go back."""
    try:
        data = json.loads(path.read_text())
        return {int(g["index"]): int(g["values"]["total_energy_mj"]["value"]) for g in data.get("gpus", [])
                if isinstance(g.get("values", {}).get("total_energy_mj", {}).get("value"), int)}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return {}


def write_node_snapshots(snapshot_dir: Path, nodes: list[str], gpus: int, gpu_type: str = "h100",
                         only_missing: bool = False) -> list[Path]:
    """Write each node's idle snapshot (``<snapshot_dir>/<node>.json``) with the faults of
    ``faults.json``, keeping each GPU's energy counter; ``only_missing``: leave the files that
    exist. Returns the paths written."""
    snapshot_dir = Path(snapshot_dir)
    snapshot_dir.mkdir(parents=True, exist_ok=True)
    faults = load_faults(snapshot_dir)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    written = []
    for n in nodes:
        path = snapshot_dir / f"{n}.json"
        if only_missing and path.exists():
            continue
        f = faults.get(n) or {}
        write_snapshot(path, node_state(n, gpus, gpu_type, energy_mj=_kept_counters(path), fault=f.get("fault"),
                                        fault_gpu=int(f.get("gpu", 1)), fault_at_s=f.get("at_s"), timestamp=stamp))
        written.append(path)
    return written


class GpuSimulator:
    """Keeps one snapshot per sandbox node current: energy counters advance with power draw,
    utilization is ``utilization_pct`` and each GPU gains an accounting record per period.

    ``snapshot_dir``: where ``<node>.json`` files live; faults come from its ``faults.json``
    (:func:`set_fault`; ``faults`` {node: fault name} are added there at the start, on NVML
    GPU 1). Use as a context manager (a background thread refreshes every ``period_s`` seconds),
    or call :meth:`write_all` once for a static set.
    """

    def __init__(self, snapshot_dir: Path, nodes: list[str], gpus: int, gpu_type: str = "h100",
                 faults: dict[str, str] | None = None, period_s: float = 1.0, power_w: float = BUSY_POWER_W,
                 utilization_pct: int = BUSY_UTILIZATION_PCT):
        self.dir = Path(snapshot_dir)
        self.nodes, self.gpus, self.gpu_type = nodes, gpus, gpu_type
        for node, name in (faults or {}).items():
            set_fault(self.dir, node, name)
        self.period_s, self.power_w, self.utilization_pct = period_s, power_w, utilization_pct
        self._t0 = time.time()
        self._base = {n: _kept_counters(self.path(n)) for n in nodes}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def path(self, node: str) -> Path:
        return self.dir / f"{node}.json"

    def _accounting(self, now: float) -> list[dict]:
        """One finished record per whole period since the start (the last ``ACCOUNTING_RECORDS``),
        as ``nvmlDeviceGetAccountingStats`` gives them: a process that ran ``period_s`` at
        ``utilization_pct``."""
        done = int((now - self._t0) / self.period_s)
        recs = []
        for k in range(max(0, done - ACCOUNTING_RECORDS), done):
            start = self._t0 + k * self.period_s
            recs.append({"pid": 100_000 + k, "gpu_util_pct": self.utilization_pct, "memory_util_pct": 40,
                         "max_memory_mib": BUSY_MEMORY_MIB, "time_ms": int(self.period_s * 1000),
                         "start_time_us": int(start * 1e6), "running": False})
        return recs

    def write_all(self) -> None:
        """Write every node's snapshot for the present moment."""
        self.dir.mkdir(parents=True, exist_ok=True)
        now = time.time()
        elapsed = now - self._t0
        power = {j: self.power_w for j in range(self.gpus)}
        util = {j: self.utilization_pct for j in range(self.gpus)}
        recs = self._accounting(now)
        acct = {j: recs for j in range(self.gpus)}
        faults = load_faults(self.dir)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        for n in self.nodes:
            base = self._base.get(n, {})
            energy = {j: base.get(j, 0) + int(self.power_w * elapsed * 1000) for j in range(self.gpus)}
            f = faults.get(n) or {}
            write_snapshot(self.path(n), node_state(n, self.gpus, self.gpu_type, energy, power,
                                                    fault=f.get("fault"), fault_gpu=int(f.get("gpu", 1)),
                                                    fault_at_s=f.get("at_s"), timestamp=stamp,
                                                    utilization_pct=util, accounting=acct))

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


def sandbox_hook_defaults(slurm_conf: Path) -> dict | None:
    """What ``hooks install`` uses on a sandbox's slurm.conf (``<dir>/etc/slurm.conf`` beside
    ``<dir>/sandbox.json``) where its options do not say otherwise: ``{"dir": sandbox dir,
    "snapshots": {node: its snapshot path}, "state_dir", "spool_dir", "textfile_dir": under
    <dir>/hooks}``; None for any other slurm.conf."""
    conf = Path(slurm_conf).absolute()
    root = conf.parent.parent
    if conf.name != "slurm.conf" or conf.parent.name != "etc" or not (root / "sandbox.json").is_file():
        return None
    snaps = {p.stem: str(p) for p in sorted((root / SNAPSHOT_SUBDIR).glob("*.json")) if p.name != FAULTS_FILE}
    hooks = root / "hooks"
    return {"dir": root, "snapshots": snaps, "state_dir": str(hooks / "state"), "spool_dir": str(hooks / "spool"),
            "textfile_dir": str(hooks / "textfile")}
