"""A health check's result: :class:`CheckResult` with its :class:`CheckStatus`, the drain reason
it gives Slurm (:meth:`CheckResult.reason`, :func:`fit_reason`), and the helpers every module of
checks shares (:func:`result`, :func:`usable_gpus`, :func:`overall`).

Its own module, below every module of checks (:mod:`slurmkit.health.checks`, ``fabric``,
``nvlink``, ``pcie``, ``services``): they import their results from here, and
:mod:`slurmkit.health.checks` assembles the table of checks from all of them.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

from slurmkit.health.state import RC_SUCCESS, GpuState, NodeState
from slurmkit.records import record

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing is not imported when the hooks run
    from typing import Any


class CheckStatus(StrEnum):
    """A check's verdict, and a node's overall status (:func:`overall`). The values are the words
    the JSON, the CLI and the hooks' logs show; ``error`` is only ever an overall status."""

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    ERROR = "error"


PASS, WARN, FAIL, ERROR = CheckStatus.PASS, CheckStatus.WARN, CheckStatus.FAIL, CheckStatus.ERROR
_RANK = {PASS: 0, WARN: 1, ERROR: 2, FAIL: 3}


#: The longest drain reason slurmkit writes (characters; ``scontrol show node`` and
#: ``sinfo -R -o "%100E %9u %19H %N"`` show it whole). ``sinfo -R`` shows only the first
#: :data:`REASON_LEAD` (its default ``%20E``), so every reason leads with ``slurmkit: <tag>
#: <where>``: the check's short tag (:data:`REASON_TAGS`) and the GPU, HCA/port or link.
REASON_MAX = 100
REASON_LEAD = 20
#: check id -> the short word its drain reason leads with (the checks beyond NVML; any other
#: check leads with its id). The full check id stays in the hooks' log and the JSON report.
REASON_TAGS = {"ib_port": "ib", "ib_rate": "ib", "ib_counters": "ib", "nvlink_errors": "nvlink",
               "nvlink_down": "nvlink", "pcie_errors": "pcie", "fabric_state": "fabric",
               "fabric_manager": "fabricmgr", "gpudirect_rdma": "peermem"}


def limit_text(limit) -> str:
    """A result's limit in words for the log and ``health check``'s text: a mapping of
    thresholds as ``name value`` pairs (``ib_counter_rise_fail 100, ib_link_downed_rise_fail
    2``), a list or tuple joined with commas, anything else as ``str`` (never a Python repr of a
    container)."""
    if isinstance(limit, dict):
        return ", ".join(f"{k} {limit_text(v)}" for k, v in limit.items())
    if isinstance(limit, (list, tuple, set)):
        return ", ".join(limit_text(v) for v in limit)
    return str(limit)


def fit_reason(text: str, limit: int = REASON_MAX) -> str:
    """``text`` as one drain reason: one printable line (control characters become spaces) of at
    most ``limit`` characters. A longer text is cut at the last space before the limit and ends
    with ``...``; a trailing ``(+N more)`` is kept. The one helper for every reason slurmkit
    gives Slurm (:meth:`CheckResult.reason`, the active check's, ``hooks.drain.sanitize``)."""
    import re

    text = re.sub(r"[^\x20-\x7e]", " ", text).strip()
    if len(text) <= limit:
        return text
    m = re.search(r" \(\+\d+ more\)$", text)
    tail = m.group(0) if m else ""
    body = text[:len(text) - len(tail)]
    room = limit - len(tail) - 3
    cut = body[:room]
    if " " in cut[REASON_LEAD:]:
        cut = cut[:cut.rindex(" ")]
    return cut.rstrip(" ,;:") + "..." + tail


@record
class CheckResult:
    """One verdict. ``value`` is what was seen, ``limit`` the threshold or expected value it was
    compared with (both JSON-able); GPU fields are None for node-level results. ``place`` names
    a non-GPU location in words (``mlx5_0/1 ibp12s0``: HCA/port and netdev or PCI address; ""
    for none). ``status`` is a :class:`CheckStatus` (its word is accepted and converted;
    ValueError for another). ``gpu_index`` is NVML's index; ``gres_index`` Slurm's GPU index
    (the GPU's place in the node's gres.conf list, as ``SLURM_JOB_GPUS`` counts), set by the
    hooks where gres.conf is read (None: not known, e.g. ``slurmkit health check``)."""

    check: str
    status: CheckStatus
    gpu_index: int | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    value: Any = None
    limit: Any = None
    message: str = ""
    place: str = ""
    gres_index: int | None = None

    def __post_init__(self) -> None:
        if type(self.status) is not CheckStatus:
            self.status = CheckStatus(self.status)

    def meaning(self) -> str:
        """What was seen, in words, short enough for ``sinfo -R`` ("x8 of x16", "Xid 79 GPU fell
        off the bus", "2 uncorrectable rows pending remap"); :data:`MEANINGS` per check,
        else the message or the value."""
        fn = MEANINGS.get(self.check)
        try:
            text = fn(self) if fn else None
        except (TypeError, ValueError, AttributeError):
            text = None
        return text or self.message or str(self.value)

    def where(self) -> str:
        """`` GPU<i> <PCI bus id>`` (``i``: NVML's index; a GPU without a bus id shows its UUID),
        `` GPU<i> (gres index <g>, <PCI bus id>)`` when Slurm's index is known (the two differ
        when the device minors are not in bus order), `` <place>``, or `` <PCI bus id>`` of a
        node-level result that has one; "" for none."""
        if self.gpu_index is not None:
            which = self.pci_bus_id or self.uuid or "?"
            if self.gres_index is not None:
                return f" GPU{self.gpu_index} (gres index {self.gres_index}, {which})"
            return f" GPU{self.gpu_index} {which}"
        if self.place:
            return f" {self.place}"
        return f" {self.pci_bus_id}" if self.pci_bus_id else ""

    def line(self) -> str:
        """The result for the hooks' log: ``<check id><where>: <meaning>``, never cut."""
        return f"{self.check}{self.where()}: {self.meaning()}"

    def reason(self, more: int = 0) -> str:
        """The drain reason: ``slurmkit: <tag><where>: <meaning>`` (``slurmkit: pcie_width GPU3
        0000:3b:00.0: x8 of x16``, ``slurmkit: ib mlx5_0/1 ibp12s0: down (DOWN/Polling)``) and
        `` (+N more)`` for ``more`` other failures, through :func:`fit_reason` (at most
        :data:`REASON_MAX` characters). The tag is :data:`REASON_TAGS`'s word, else the check
        id. The UUID goes to the hooks' log, not the reason."""
        tag = REASON_TAGS.get(self.check, self.check)
        extra = f" (+{more} more)" if more > 0 else ""
        return fit_reason(f"slurmkit: {tag}{self.where()}: {self.meaning()}{extra}")


def _xid_meaning(r: CheckResult) -> str:
    import re

    m = re.fullmatch(r"Xid (\d+)(?: \(([^)]*)\))? x(\d+)([,:].*)?", r.message)
    if not m:
        return f"Xid {r.value}"
    return f"Xid {m.group(1)}" + (f" {m.group(2)}" if m.group(2) else "") + (f" (x{m.group(3)})" if m.group(3) != "1" else "")


def _remap_meaning(r: CheckResult) -> str:
    import re

    m = re.search(r"(\d+) uncorrectable rows, (\d+) volatile DBE", str(r.value))
    if not m:
        return "correctable rows pending remap" if r.status is WARN else ""
    unc, dbe = int(m.group(1)), int(m.group(2))
    return f"{unc} uncorrectable rows pending remap" + (f", {dbe} volatile DBE" if dbe else "")


def _mig_meaning(r: CheckResult) -> str:
    import re

    if r.value == "MIG off":
        return f"not in MIG mode ({r.limit} expected)"
    m = re.search(r"(\d+ of \d+) expected instances seen", r.message)
    return f"{r.value} ({m.group(1)} seen)" if m else ""


#: check id -> the meaning of a result in words (:meth:`CheckResult.meaning`).
MEANINGS: dict[str, Callable[[CheckResult], str]] = {
    "xid": _xid_meaning,
    "row_remap_pending": _remap_meaning,
    "pcie_width": lambda r: f"x{r.value} of x{r.limit}" + (" (VM guest)" if "VM" in r.message else ""),
    "pcie_gen": lambda r: (f"PCIe max Gen{r.value} of Gen{r.limit} expected" if "expected" in r.message
                           else f"PCIe Gen{r.value} of Gen{r.limit} under load"),
    "gpu_lost": lambda r: f"GPU fell off the bus ({r.value})" if r.status is not PASS else "",
    "gpu_count": lambda r: f"{r.value} of {r.limit} GPUs visible",
    "mig_instances": _mig_meaning,
    "nvml_init": lambda r: f"nvmlInit {r.value}",
    "ecc_volatile_uncorrectable": lambda r: f"{r.value} uncorrectable ECC errors since boot",
    "ecc_aggregate_uncorrectable": lambda r: f"{r.value} lifetime uncorrectable ECC errors",
    "ecc_sram_correctable": lambda r: f"{r.value} SRAM correctable ECC errors",
    "retired_pages_pending": lambda r: "page retirement pending (reset the GPU)",
    "row_remap_uncorrectable": lambda r: f"{r.value} rows remapped for uncorrectable errors",
    "row_remap_failure": lambda r: "row remapping failed (RMA)",
    "reset_required": lambda r: "GPU reset required",
    "gpu_recovery_action": lambda r: "no recovery action" if r.value == "NONE" else recovery_words(str(r.value)),
    "inforom": lambda r: "InfoROM corrupted",
    "clock_events": lambda r: f"{r.value} in every sample" if r.status is FAIL else r.message,
    "temperature_margin": lambda r: f"{r.value} C to HW slowdown",
    "temperature_idle": lambda r: f"idle at {r.value} C (max {r.limit} C)",
    "leftover_processes": lambda r: f"{r.value} leftover processes",
    "memory_used": lambda r: f"{r.value} MiB used before the job",
    "nvsmi_error": lambda r: str(r.value),
    "nvml_error": lambda r: r.message,
    "ecc_mode": lambda r: f"ECC mode change pending a reset ({r.value})" if r.status is FAIL else f"ECC {r.value}",
}


def _first_and_more(r: CheckResult) -> str:
    """A list of rises (``link_downed +3, symbol_error +120, port_rcv_errors +5``: the deciding
    one first) -> ``link_downed +3 and 2 more``; any other value as it is."""
    if r.value in (None, ""):
        return r.message
    words = str(r.value).split(", ")
    return words[0] + (f" and {len(words) - 1} more" if len(words) > 1 else "")


# checks beyond NVML: their value is the meaning in words ("down (DOWN/Polling)", "200 of 400
# Gb/s", "nv-fabricmanager not running"); the place (HCA/port, netdev or PCI) is the result's own
for _check in ("ib_port", "ib_rate", "fabric_manager", "gpudirect_rdma", "node_type"):
    MEANINGS[_check] = lambda r: str(r.value) if r.value not in (None, "") else r.message
for _check in ("ib_counters", "nvlink_errors", "pcie_errors"):
    MEANINGS[_check] = _first_and_more


def result(check: str, status: CheckStatus, g: GpuState | None, value=None, limit=None, message="") -> CheckResult:
    """A :class:`CheckResult` of ``check`` for GPU ``g`` (its index, UUID and PCI bus id; None:
    a node-level result). Shared by the checks here and in ``nvlink`` / ``pcie``."""
    if g is None:
        return CheckResult(check, status, None, None, None, value, limit, message)
    return CheckResult(check, status, g.index, g.uuid, g.pci_bus_id, value, limit, message)


def usable_gpus(state: NodeState) -> list[GpuState]:
    """GPUs whose handle could be taken (``nvmlDeviceGetHandleByIndex_v2`` succeeded; the rest
    are judged by ``gpu_lost`` only)."""
    return [g for g in state.gpus if g.handle_rc == RC_SUCCESS]


#: ``nvmlDeviceGpuRecoveryAction_t`` names (``gpu_recovery_action``) -> what the driver asks for,
#: in words for ``sinfo -R`` (NVML's ``NVML_GPU_RECOVERY_ACTION_*``, nvidia-smi's "GPU Recovery
#: Action"). A name not listed reads as ``driver asks for recovery action <NAME>``.
RECOVERY_ACTIONS = {
    "GPU_RESET": "driver asks for a GPU reset",
    "NODE_REBOOT": "driver asks for a node reboot",
    "DRAIN_P2P": "driver asks to drain peer-to-peer work",
    "DRAIN_AND_RESET": "driver asks to drain and reset the GPU",
    "RECOVER_IMEX_DOMAIN": "driver asks to recover the IMEX domain",
    "BUS_RESET": "driver asks for a PCIe bus reset",
    "SYSTEM_REBOOT": "driver asks for a system reboot",
}


def recovery_words(action: str) -> str:
    """``GPU_RESET`` -> ``driver asks for a GPU reset`` (:data:`RECOVERY_ACTIONS`)."""
    return RECOVERY_ACTIONS.get(action, f"driver asks for recovery action {action}")


def overall(results: list[CheckResult], errors: list[str] = ()) -> CheckStatus:
    """``fail`` > ``error`` > ``warn`` > ``pass``."""
    worst = PASS
    for r in results:
        if _RANK[r.status] > _RANK[worst]:
            worst = r.status
    if errors and _RANK[ERROR] > _RANK[worst]:
        worst = ERROR
    return worst
