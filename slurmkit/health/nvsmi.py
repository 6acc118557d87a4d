"""Importers for ``nvidia-smi -q -x`` (XML, DTD v10-v13) and ``nvidia-smi -q`` (text) captures.

Both produce the same :class:`~slurmkit.health.state.NodeState` as a live read (so a capture
replays through the same checks and can be saved as snapshot JSON). Each value's ``source`` is
``nvidia-smi:<field path>``; a field printed as ``N/A`` / absent is recorded as
``NOT_AVAILABLE`` (never as zero). A value that is present but cannot be parsed raises
:class:`~slurmkit.health.errors.CaptureError` naming the file and line.

Captures are read strictly: fewer GPU sections than the capture's ``Attached GPUs`` is
unreadable (CaptureError), never a pass, and so is a text capture (one with ``Attached GPUs``,
not an excerpt) whose GPU section ends before its ``Processes``, which nvidia-smi prints last; an error nvidia-smi printed in a GPU's section
(:data:`ERROR_TEXTS`: ``Unknown Error``, ``ERR!``, ``GPU requires reset``, ...) or a ``Unable to
determine the device handle for GPU <bus id>: <error>`` line in place of a section is recorded
as that GPU's ``nvsmi_error`` (``"<text> (<field path>)"``), which the ``nvsmi_error`` check
fails with that text in the reason.

Only the standard library is used (``xml.parsers.expat`` keeps line numbers).
"""

from __future__ import annotations

import re
from typing import Callable

from slurmkit.health.errors import CaptureError
from slurmkit.health.state import RC_GPU_IS_LOST, RC_NOT_AVAILABLE, RC_UNKNOWN, GpuState, NodeState, normalise_bus_id

# nvmlClocksEventReason* bits by nvidia-smi's text label / XML element suffix
_CLOCK_BITS_TEXT = {
    "Idle": 0x1, "Applications Clocks Setting": 0x2, "SW Power Cap": 0x4, "HW Slowdown": 0x8,
    "Sync Boost": 0x10, "SW Thermal Slowdown": 0x20, "HW Thermal Slowdown": 0x40,
    "HW Power Brake Slowdown": 0x80, "Display Clock Setting": 0x100,
}
_CLOCK_BITS_XML = {
    "gpu_idle": 0x1, "applications_clocks_setting": 0x2, "sw_power_cap": 0x4, "hw_slowdown": 0x8,
    "sync_boost": 0x10, "sw_thermal_slowdown": 0x20, "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80, "display_clocks_setting": 0x100,
}

_NA = {"N/A", "", "Not Supported", "[N/A]", "Requested functionality has been deprecated"}
#: Texts nvidia-smi prints in a GPU's section when NVML failed in a way that is the GPU's (not
#: "not supported"): each makes that GPU's ``nvsmi_error`` (matched as a substring, in order).
ERROR_TEXTS = ("Unable to determine the device handle", "GPU requires reset", "[Unknown Error]", "Unknown Error",
               "ERR!", "GPU is lost")
_HANDLE = re.compile(r"^Unable to determine the device handle for (?:GPU\s*)?"
                     r"(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*:\s*(?P<err>.*)$")


def _error_text(v: str) -> str | None:
    """The :data:`ERROR_TEXTS` entry ``v`` contains, else None."""
    return next((t for t in ERROR_TEXTS if t in v), None)


def _is_na(v: str) -> bool:
    return v in _NA or _error_text(v) is not None


def _num(v: str) -> int:
    m = re.fullmatch(r"\s*(-?\d+)\s*(MiB|C|x|%|MHz|KB/s)?\s*", v)
    if not m:
        raise ValueError(f"want a number, got {v!r}")
    return int(m.group(1))


def _float(v: str) -> float:
    m = re.fullmatch(r"\s*(-?\d+(?:\.\d+)?)\s*(W|mV)?\s*", v)
    if not m:
        raise ValueError(f"want a number, got {v!r}")
    return float(m.group(1))


def _yesno(v: str) -> bool:
    if v in ("Yes", "Active"):
        return True
    if v in ("No", "Not Active"):
        return False
    raise ValueError(f"want Yes/No, got {v!r}")


def _enabled(v: str) -> bool:
    if v == "Enabled":
        return True
    if v == "Disabled":
        return False
    raise ValueError(f"want Enabled/Disabled, got {v!r}")


def _str(v: str) -> str:
    return v


# key -> (converter, text paths, xml paths); first path present wins
_MAP: dict[str, tuple[Callable, tuple[str, ...], tuple[str, ...]]] = {
    "name": (_str, ("Product Name",), ("product_name",)),
    "serial": (_str, ("Serial Number",), ("serial",)),
    "vbios_version": (_str, ("VBIOS Version",), ("vbios_version",)),
    "persistence_mode": (_enabled, ("Persistence Mode",), ("persistence_mode",)),
    "accounting_mode": (_enabled, ("Accounting Mode",), ("accounting_mode",)),
    "mig_current": (_enabled, ("MIG Mode/Current",), ("mig_mode/current_mig",)),
    "mig_pending": (_enabled, ("MIG Mode/Pending",), ("mig_mode/pending_mig",)),
    "ecc_enabled": (_enabled, ("ECC Mode/Current",), ("ecc_mode/current_ecc",)),
    "ecc_pending": (_enabled, ("ECC Mode/Pending",), ("ecc_mode/pending_ecc",)),
    "ecc_aggregate_sram_correctable": (_num, ("ECC Errors/Aggregate/SRAM Correctable",),
                                       ("ecc_errors/aggregate/sram_correctable",)),
    "retired_pages_sbe": (_num, ("Retired Pages/Single Bit ECC",),
                          ("retired_pages/multiple_single_bit_retirement/retired_count",)),
    "retired_pages_dbe": (_num, ("Retired Pages/Double Bit ECC",),
                          ("retired_pages/double_bit_retirement/retired_count",)),
    "retired_pages_pending": (_yesno, ("Retired Pages/Pending Page Blacklist", "Retired Pages/Pending Page Retirement"),
                              ("retired_pages/pending_retirement", "retired_pages/pending_blacklist")),
    "remap_correctable_rows": (_num, ("Remapped Rows/Correctable Error",), ("remapped_rows/remapped_row_corr",)),
    "remap_uncorrectable_rows": (_num, ("Remapped Rows/Uncorrectable Error",), ("remapped_rows/remapped_row_unc",)),
    "remap_pending": (_yesno, ("Remapped Rows/Pending",), ("remapped_rows/remapped_row_pending",)),
    "remap_failure": (_yesno, ("Remapped Rows/Remapping Failure Occurred",), ("remapped_rows/remapped_row_failure",)),
    "app_clock_graphics_mhz": (_num, ("Applications Clocks/Graphics",), ("applications_clocks/graphics_clock",)),
    "app_clock_mem_mhz": (_num, ("Applications Clocks/Memory",), ("applications_clocks/mem_clock",)),
    "default_app_clock_graphics_mhz": (_num, ("Default Applications Clocks/Graphics",),
                                       ("default_applications_clocks/graphics_clock",)),
    "default_app_clock_mem_mhz": (_num, ("Default Applications Clocks/Memory",),
                                  ("default_applications_clocks/mem_clock",)),
    "power_limit_w": (_float, ("GPU Power Readings/Current Power Limit", "Power Readings/Power Limit"),
                      ("gpu_power_readings/current_power_limit", "power_readings/power_limit")),
    "default_power_limit_w": (_float, ("GPU Power Readings/Default Power Limit", "Power Readings/Default Power Limit"),
                              ("gpu_power_readings/default_power_limit", "power_readings/default_power_limit")),
    "power_draw_w": (_float, ("GPU Power Readings/Power Draw", "Power Readings/Power Draw"),
                     ("gpu_power_readings/power_draw", "power_readings/power_draw")),
    "temperature_c": (_num, ("Temperature/GPU Current Temp",), ("temperature/gpu_temp",)),
    "slowdown_temperature_c": (_num, ("Temperature/GPU Slowdown Temp",), ("temperature/gpu_temp_slow_threshold",)),
    "utilization_gpu_pct": (_num, ("Utilization/Gpu",), ("utilization/gpu_util",)),
    "pcie_link_gen": (_num, ("PCI/GPU Link Info/PCIe Generation/Current",),
                      ("pci/pci_gpu_link_info/pcie_gen/current_link_gen",)),
    "pcie_link_gen_max": (_num, ("PCI/GPU Link Info/PCIe Generation/Max",),
                          ("pci/pci_gpu_link_info/pcie_gen/max_link_gen",)),
    "pcie_link_width": (_num, ("PCI/GPU Link Info/Link Width/Current",),
                        ("pci/pci_gpu_link_info/link_widths/current_link_width",)),
    "pcie_link_width_max": (_num, ("PCI/GPU Link Info/Link Width/Max",),
                            ("pci/pci_gpu_link_info/link_widths/max_link_width",)),
    "virtualization_mode": (_str, ("GPU Virtualization Mode/Virtualization Mode",),
                            ("gpu_virtualization_mode/virtualization_mode",)),
    "fabric_state": (_str, ("Fabric/State",), ("fabric/state",)),
    "fabric_status": (_str, ("Fabric/Status",), ("fabric/status",)),
    "memory_total_mib": (_num, ("FB Memory Usage/Total",), ("fb_memory_usage/total",)),
    "memory_reserved_mib": (_num, ("FB Memory Usage/Reserved",), ("fb_memory_usage/reserved",)),
    "memory_used_mib": (_num, ("FB Memory Usage/Used",), ("fb_memory_usage/used",)),
}


#: Section and key names of ``nvidia-smi -q`` text as the readers above spell them; a capture's
#: own spelling is mapped onto these case-insensitively (nvidia-smi's versions differ: "Retired
#: pages" and "Retired Pages", "Gpu" and "GPU").
_TEXT_NAMES = {n.lower(): n for n in (
    [part for _, tpaths, _ in _MAP.values() for path in tpaths for part in path.split("/")]
    + ["ECC Errors", "Volatile", "Aggregate", "GPU Reset Status", "Reset Required", "GPU Recovery Action",
       "Clocks Event Reasons", "Clocks Throttle Reasons", "HW Slowdown", "GPU T.Limit Temp",
       "GPU Slowdown T.Limit Temp", "Processes", "Process ID", "Type", "Used GPU Memory", "GPU UUID",
       "Minor Number"] + list(_CLOCK_BITS_TEXT))}
#: Fields whose nvidia-smi error text (``Unknown Error``, ``ERR!``) is a fault of the GPU: the
#: ones the checks judge. Elsewhere (``Addressing Mode``, ``Product Name``, a field a driver
#: cannot report) the text is a reading nvidia-smi could not make, like ``N/A``: not a fault.
_JUDGED = ({p.lower() for k, (_, tp, xp) in _MAP.items()
            if k not in ("name", "serial", "vbios_version", "virtualization_mode") for p in tp + xp}
           | {"gpu uuid", "uuid", "minor number", "minor_number", "gpu recovery action", "gpu_recovery_action"})
_JUDGED_PREFIXES = ("ecc errors/", "ecc_errors/", "gpu reset status/", "gpu_reset_status/", "clocks event reasons/",
                    "clocks throttle reasons/", "clocks_event_reasons/", "clocks_throttle_reasons/", "processes/",
                    "temperature/", "retired pages/", "retired_pages/", "remapped rows/", "remapped_rows/")


def _judged(path: str) -> bool:
    p = path.lower()
    return p in _JUDGED or p.startswith(_JUDGED_PREFIXES)


def _text_name(name: str) -> str:
    return _TEXT_NAMES.get(name.lower(), name)


class _Fields:
    """A GPU section flattened to ``path -> [(value, line), ...]`` (in file order)."""

    def __init__(self, file: str):
        self.file = file
        self.start: int | None = None  # the section's "GPU <bus id>" line
        self.items: list[tuple[str, str, int]] = []
        self.first: dict[str, tuple[str, int]] = {}

    def add(self, path: str, value: str, line: int) -> None:
        self.items.append((path, value, line))
        self.first.setdefault(path, (value, line))

    def get(self, paths) -> tuple[str, int, str] | None:
        for p in paths:
            if p in self.first:
                v, line = self.first[p]
                return v, line, p
        return None

    def conv(self, fn, v: str, line: int, path: str):
        try:
            return fn(v)
        except ValueError as exc:  # the converters above: "want a number, got 'x'"
            raise CaptureError(self.file, line, str(exc), key=path) from None


def recovery_action_name(text: str) -> str:
    """nvidia-smi's "GPU Recovery Action" words -> the NVML name (``None`` -> ``NONE``, ``GPU
    Reset`` / ``Reset`` -> ``GPU_RESET``, ``Node Reboot`` / ``Reboot`` -> ``NODE_REBOOT``, ``Drain
    P2P`` -> ``DRAIN_P2P``, ``Drain and Reset`` -> ``DRAIN_AND_RESET``); other words upper-cased
    with ``_`` (judged as an action all the same: only ``NONE`` passes)."""
    key = " ".join(text.replace("_", " ").split()).lower()
    known = {"none": "NONE", "reset": "GPU_RESET", "gpu reset": "GPU_RESET", "reboot": "NODE_REBOOT",
             "node reboot": "NODE_REBOOT", "drain p2p": "DRAIN_P2P", "drain and reset": "DRAIN_AND_RESET"}
    return known.get(key, key.upper().replace(" ", "_"))


def _fill(g: GpuState, f: _Fields, xml: bool) -> None:
    """Put every field of one GPU's block ``f`` (nvidia-smi -q text, or -q -x XML when ``xml``)
    into ``g``, each with its nvidia-smi path as source; a field nvidia-smi shows as N/A or not
    at all is None with ``RC_NOT_AVAILABLE``."""
    errs = [(path, v.strip()) for path, v, _ in f.items if _error_text(v.strip()) and _judged(path)]
    if errs:  # "" when nvidia-smi printed no error for this GPU
        path, v = errs[0]
        more = f" (+{len(errs) - 1} more)" if len(errs) > 1 else ""
        g.put("nvsmi_error", f"{_error_text(v)} ({path}){more}", source=f"nvidia-smi:{path}")
    else:
        g.put("nvsmi_error", "", source="nvidia-smi")
    for key, (fn, tpaths, xpaths) in _MAP.items():
        hit = f.get(xpaths if xml else tpaths)
        if hit is None:
            g.put(key, None, source="nvidia-smi:" + (xpaths if xml else tpaths)[0], rc=RC_NOT_AVAILABLE)
            continue
        v, line, path = hit
        if _is_na(v.strip()):
            g.put(key, None, source=f"nvidia-smi:{path}", rc=RC_NOT_AVAILABLE)
        else:
            g.put(key, f.conv(fn, v.strip(), line, path), source=f"nvidia-smi:{path}")
    _fill_ecc(g, f, xml)
    # reset required: text "GPU Reset Status/Reset Required", XML v12 gpu_reset_status
    hit = f.get(("gpu_reset_status/reset_required",) if xml else ("GPU Reset Status/Reset Required",))
    if hit and not _is_na(hit[0].strip()):
        v, line, path = hit
        g.put("reset_required", f.conv(_yesno, v.strip(), line, path), source=f"nvidia-smi:{path}")
    else:
        g.put("reset_required", None, source="nvidia-smi:reset", rc=RC_NOT_AVAILABLE)
    # the driver's recovery action: XML v13 gpu_recovery_action, text "GPU Recovery Action"
    path = "gpu_recovery_action" if xml else "GPU Recovery Action"
    hit = f.get((path,))
    if hit and not _is_na(hit[0].strip()):
        g.put("gpu_recovery_action", recovery_action_name(hit[0].strip()), source=f"nvidia-smi:{path}")
    else:
        g.put("gpu_recovery_action", None, source=f"nvidia-smi:{path}", rc=RC_NOT_AVAILABLE)
    _fill_clock_event_reasons(g, f, xml)
    _fill_slowdown_margin(g, f, xml)
    _fill_processes(g, f, xml)
    _fill_mig_devices(g, f, xml)


def _fill_ecc(g: GpuState, f: _Fields, xml: bool) -> None:
    """The ECC totals: every uncorrectable / correctable counter of the volatile and aggregate
    sections summed (DRAM + SRAM forms, and the older single_bit / double_bit totals)."""
    # ECC totals: sum every uncorrectable / correctable counter of the section (DRAM + SRAM forms)
    for scope in ("volatile", "aggregate"):
        for kind in ("uncorrectable", "correctable"):
            key = f"ecc_{scope}_{kind}"
            if key not in ("ecc_volatile_uncorrectable", "ecc_volatile_correctable", "ecc_aggregate_uncorrectable"):
                continue
            prefix = f"ecc_errors/{scope}/" if xml else f"ECC Errors/{scope.capitalize()}/"
            total, seen = 0, False
            for path, v, line in f.items:
                if not path.startswith(prefix):
                    continue
                leaf = path[len(prefix):].lower().replace(" ", "_")
                # older schemas (Volta and before): single_bit/total and double_bit/total
                if leaf == ("double_bit/total" if kind == "uncorrectable" else "single_bit/total"):
                    pass
                elif "/" in leaf or not (leaf.startswith("sram_" + kind) or leaf.startswith("dram_" + kind)
                                       or leaf.startswith("device_memory") and kind in leaf):
                    continue
                if kind == "correctable" and "uncorrectable" in leaf:
                    continue
                if _is_na(v.strip()):
                    continue
                total += f.conv(_num, v.strip(), line, path)
                seen = True
            g.put(key, total if seen else None, source=f"nvidia-smi:{prefix}*{kind}",
                  rc="SUCCESS" if seen else RC_NOT_AVAILABLE)


def _fill_clock_event_reasons(g: GpuState, f: _Fields, xml: bool) -> None:
    """The clock event (throttle) reasons as NVML's bitmask, from each reason's Active / Not
    Active line."""
    # clock event reasons bitmask
    mask, seen = 0, False
    for path, v, line in f.items:
        if xml:
            m = re.fullmatch(r"clocks_(?:event|throttle)_reasons/clocks_(?:event|throttle)_reason_(\w+)", path)
            bit = _CLOCK_BITS_XML.get(m.group(1)) if m else None
        else:
            m = re.fullmatch(r"Clocks (?:Event|Throttle) Reasons/(?:HW Slowdown/)?(.+)", path)
            bit = _CLOCK_BITS_TEXT.get(m.group(1)) if m else None
        if bit is None or _is_na(v.strip()):
            continue
        seen = True
        if f.conv(_yesno, v.strip(), line, path):
            mask |= bit
    g.put("clock_event_reasons", mask if seen else None,
          source="nvidia-smi:" + ("clocks_event_reasons" if xml else "Clocks Event Reasons"),
          rc="SUCCESS" if seen else RC_NOT_AVAILABLE)


def _fill_slowdown_margin(g: GpuState, f: _Fields, xml: bool) -> None:
    """The temperature margin to HW slowdown: slowdown temperature - GPU temperature, else the
    T.Limit form's reading less its slowdown threshold."""
    # temperature margin to HW slowdown
    t, slow = g.get("temperature_c"), g.get("slowdown_temperature_c")
    if t is not None and slow is not None:
        g.put("slowdown_margin_c", slow - t, source="nvidia-smi:slowdown temp - current temp")
    else:
        tl = f.get(("temperature/gpu_temp_tlimit",) if xml else ("Temperature/GPU T.Limit Temp",))
        sl = f.get(("temperature/gpu_temp_slow_tlimit_threshold",) if xml else ("Temperature/GPU Slowdown T.Limit Temp",))
        if tl and sl and not _is_na(tl[0].strip()) and not _is_na(sl[0].strip()):
            # T.Limit form: the reading is degrees below T.Limit; slowdown when it drops below `sl`
            margin = f.conv(_num, tl[0].strip(), tl[1], tl[2]) - f.conv(_num, sl[0].strip(), sl[1], sl[2])
            g.put("slowdown_margin_c", margin, source=f"nvidia-smi:{tl[2]} - {sl[2]}")
        else:
            g.put("slowdown_margin_c", None, source="nvidia-smi:temperature", rc=RC_NOT_AVAILABLE)


def _fill_processes(g: GpuState, f: _Fields, xml: bool) -> None:
    """The compute processes (type C or C+G, or no type shown): pid and used memory (MiB)."""
    # processes (compute: type C or C+G)
    procs, cur = [], None
    pid_path = "processes/process_info/pid" if xml else None
    for path, v, line in f.items:
        if xml:
            if path == pid_path:
                cur = {"pid": f.conv(_num, v.strip(), line, path), "type": "", "used_mib": None}
                procs.append(cur)
            elif cur is not None and path == "processes/process_info/type":
                cur["type"] = v.strip()
            elif cur is not None and path == "processes/process_info/used_memory" and not _is_na(v.strip()):
                cur["used_mib"] = f.conv(_num, v.strip(), line, path)
        else:
            if not path.startswith("Processes/"):
                continue
            leaf = path.rsplit("/", 1)[-1]
            if leaf == "Process ID":
                cur = {"pid": f.conv(_num, v.strip(), line, path), "type": "", "used_mib": None}
                procs.append(cur)
            elif cur is not None and leaf == "Type":
                cur["type"] = v.strip()
            elif cur is not None and leaf == "Used GPU Memory" and not _is_na(v.strip()):
                cur["used_mib"] = f.conv(_num, v.strip(), line, path)
    compute = [{"pid": p["pid"], "used_mib": p["used_mib"]} for p in procs if "C" in p["type"] or not p["type"]]
    g.put("processes", compute, source="nvidia-smi:" + ("processes" if xml else "Processes"))


#: A MIG device's fields: key -> (XML path, text path) under the GPU's ``mig_devices/mig_device``
#: (``MIG Devices/MIG Device``); text names compared in lower case.
_MIG_KEYS = {"index": ("index", "index"), "gpu_instance_id": ("gpu_instance_id", "gpu instance id"),
             "compute_instance_id": ("compute_instance_id", "compute instance id"),
             "sm_count": ("device_attributes/shared/multiprocessor_count", "device attributes/shared/multiprocessor count"),
             "copy_engines": ("device_attributes/shared/copy_engine_count", "device attributes/shared/copy engine count"),
             "memory_mib": ("fb_memory_usage/total", "fb memory usage/total")}


def _fill_mig_devices(g: GpuState, f: _Fields, xml: bool) -> None:
    """A GPU in MIG mode: its MIG devices (``<mig_devices><mig_device>``, the text's ``MIG
    Devices`` section) as ``mig_devices`` (:func:`slurmkit.health.mig.mig_device`): index, GPU
    and compute instance ids, multiprocessors, memory, and the profile named from the copy
    engines (= the GPU instance's compute slices) and the memory. Not recorded for a GPU whose
    MIG mode is off or unknown; NOT_AVAILABLE for a GPU in MIG mode whose section has no MIG
    devices part at all (then its instances are not judged, never taken for gone)."""
    if g.get("mig_current") is not True:
        return
    from slurmkit.health.mig import mig_device

    prefix = "mig_devices/mig_device/" if xml else "mig devices/mig device/"
    col = 0 if xml else 1
    leaf_of = {v[col]: k for k, v in _MIG_KEYS.items()}
    top = prefix.split("/", 1)[0]  # the MIG devices part ("None" when the GPU has none)
    devs: list[dict] = []
    section = False
    for path, v, line in f.items:
        p = path if xml else path.lower()
        section = section or p.split("/", 1)[0] == top
        if not p.startswith(prefix):
            continue
        key = leaf_of.get(p[len(prefix):])
        if key is None:
            continue
        if key == "index":
            devs.append({})
        if not devs or _is_na(v.strip()):
            continue
        devs[-1][key] = f.conv(_num, v.strip(), line, path)
    src = "nvidia-smi:" + ("mig_devices" if xml else "MIG Devices")
    if not section:
        g.put("mig_devices", None, source=src, rc=RC_NOT_AVAILABLE)
        return
    out = [mig_device(d.get("index", i), d.get("gpu_instance_id"), d.get("compute_instance_id"),
                      d.get("copy_engines"), d.get("memory_mib"), d.get("sm_count"), None, g.get("name"),
                      g.get("memory_total_mib")) for i, d in enumerate(devs)]
    g.put("mig_devices", out, source=src)


def _identity(g: GpuState, f: _Fields, xml: bool) -> None:
    uuid = f.get(("uuid",) if xml else ("GPU UUID",))
    if uuid and not _is_na(uuid[0].strip()):
        g.uuid = uuid[0].strip()
    minor = f.get(("minor_number",) if xml else ("Minor Number",))
    if minor and not _is_na(minor[0].strip()):
        g.minor_number = f.conv(_num, minor[0].strip(), minor[1], minor[2])


# ---- XML -------------------------------------------------------------------------------------

def parse_xml(text: str, file: str = "<xml>") -> NodeState:
    """Parse ``nvidia-smi -q -x`` output. Raises CaptureError(file, line) on malformed XML or
    values; GPUs are indexed in file order (nvidia-smi's order = NVML's)."""
    from xml.parsers import expat

    parser = expat.ParserCreate()
    stack: list[str] = []
    texts: list[list[str]] = []
    top: dict[str, tuple[str, int]] = {}
    gpus: list[tuple[str, int, _Fields]] = []
    cur: list = [None]

    def start(name, attrs):
        stack.append(name)
        texts.append([])
        if stack == ["nvidia_smi_log", "gpu"]:
            cur[0] = _Fields(file)
            gpus.append((attrs.get("id", ""), parser.CurrentLineNumber, cur[0]))

    def end(name):
        body = "".join(texts.pop()).strip()
        line = parser.CurrentLineNumber
        if len(stack) == 2 and stack[0] == "nvidia_smi_log" and name != "gpu":
            top[name] = (body, line)
        elif len(stack) > 2 and stack[1] == "gpu" and cur[0] is not None:
            cur[0].add("/".join(stack[2:]), body, line)
        stack.pop()

    def chars(data):
        if texts:
            texts[-1].append(data)

    parser.StartElementHandler, parser.EndElementHandler, parser.CharacterDataHandler = start, end, chars
    try:
        parser.Parse(text, True)
    except expat.ExpatError as exc:
        raise CaptureError(file, exc.lineno, f"malformed XML: {expat.ErrorString(exc.code)}") from None
    if not top and not gpus:
        raise CaptureError(file, 1, "no <nvidia_smi_log> document")
    state = NodeState(node="", source=f"nvidia-smi-xml:{file}", replay=True)
    state.driver_version = top.get("driver_version", ("", 0))[0] or None
    state.timestamp = top.get("timestamp", ("", 0))[0]
    if "attached_gpus" in top:
        v, line = top["attached_gpus"]
        try:
            state.gpu_count = int(v)
        except ValueError:
            raise CaptureError(file, line, f"attached_gpus: want a number, got {v!r}") from None
    if state.gpu_count is not None and len(gpus) < state.gpu_count:
        raise CaptureError(file, top["attached_gpus"][1], _too_few(len(gpus), state.gpu_count))
    for i, (bus, line, f) in enumerate(gpus):
        g = GpuState(index=i)
        raw = f.get(("pci/pci_bus_id",))
        try:
            g.pci_bus_id = normalise_bus_id(raw[0] if raw else bus)
        except ValueError as exc:
            raise CaptureError(file, raw[1] if raw else line, str(exc)) from None
        _identity(g, f, True)
        _fill(g, f, True)
        state.gpus.append(g)
    return state


def _too_few(sections: int, attached: int) -> str:
    return (f"{sections} GPU section{'s' if sections != 1 else ''} but Attached GPUs is {attached} "
            f"(a cut-off capture, or nvidia-smi -i: capture the whole node with nvidia-smi -q)")


# ---- text ------------------------------------------------------------------------------------

_KV = re.compile(r"^(?P<ind>\s*)(?P<key>\S.*?)\s+:(?:\s(?P<val>.*))?$")
_GPU = re.compile(r"^GPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")


def _lost_gpu(state: NodeState, handle) -> None:
    """Add the GPU an ``Unable to determine the device handle for GPU <bus>: <error>`` line
    (``handle``: its :data:`_HANDLE` match) names to ``state``: its ``nvsmi_error`` set,
    ``handle_rc`` GPU_IS_LOST ("GPU is lost") or UNKNOWN."""
    g = GpuState(index=len(state.gpus))
    g.pci_bus_id = normalise_bus_id(handle.group("bus"))
    err = handle.group("err").strip()
    g.handle_rc = RC_GPU_IS_LOST if "lost" in err.lower() else RC_UNKNOWN
    g.put("nvsmi_error", f"Unable to determine the device handle: {err}"[:120], source="nvidia-smi")
    state.gpus.append(g)


#: nvidia-smi's whole-output error lines: printed instead of any GPU section when it finds no
#: GPU or cannot reach the driver (NVIDIA/nvidia-docker#1553, forum and cluster-docs captures in
#: tests/health/nvsmi_errors/README.md).
NO_DEVICES = "No devices were found"
DRIVER_FAILED = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"
_DRIVER_HINT = "Make sure that the latest NVIDIA driver is installed and running."


def parse_error_output(text: str, file: str = "<text>") -> NodeState | None:
    """A capture that is only nvidia-smi's own error output, read as a node whose GPUs are lost:
    ``Unable to determine the device handle for GPU <bus id>: <error>`` lines (one lost GPU
    each: ``nvsmi_error`` set, ``handle_rc`` GPU_IS_LOST or UNKNOWN, so the ``nvsmi_error``
    check fails it), ``No devices were found`` or ``NVIDIA-SMI has failed because it couldn't
    communicate with the NVIDIA driver`` (no GPU visible: ``gpu_count`` 0, which the
    ``gpu_count`` check fails wherever GPUs are expected: ``--expect-gpus``, gres.conf). None
    when ``text`` is anything else (then it is not this kind of output)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return None
    state = NodeState(node="", source=f"nvidia-smi-error:{file}", replay=True)
    handles = [_HANDLE.match(line) for line in lines]
    if all(handles):
        for h in handles:
            _lost_gpu(state, h)
        return state
    if lines == [NO_DEVICES] or (lines[0].startswith(DRIVER_FAILED) and lines[1:] in ([], [_DRIVER_HINT])):
        state.gpu_count = 0
        return state
    return None


def parse_text(text: str, file: str = "<text>") -> NodeState:
    """Parse ``nvidia-smi -q`` output (indentation gives the section path). Raises
    CaptureError(file, line) on a line that is neither ``key : value`` nor a section title."""
    state = NodeState(node="", source=f"nvidia-smi-text:{file}", replay=True)
    cur: _Fields | None = None
    attached_line = 1
    sections: list[tuple[int, str]] = []  # (indent, title) inside the current GPU
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not line.strip() or set(line.strip()) <= set("=") or line.strip() == "==============NVSMI LOG==============":
            continue
        if "\t" in line[: len(line) - len(line.lstrip())]:
            raise CaptureError(file, n, "tab in indentation (want spaces as nvidia-smi prints)")
        h = _HANDLE.match(line.strip())
        if h:  # nvidia-smi could not open this GPU: it prints this line instead of its section
            cur = None
            _lost_gpu(state, h)
            continue
        m = _GPU.match(line)
        if m:
            cur = _Fields(file)
            cur.start = n
            g = GpuState(index=len(state.gpus))
            g.pci_bus_id = normalise_bus_id(m.group(1))
            state.gpus.append(g)
            g._fields = cur  # type: ignore[attr-defined]
            sections = []
            continue
        ind = len(line) - len(line.lstrip())
        kv = _KV.match(line)
        if cur is None:
            if ind == 0 and kv:
                key, val = kv.group("key"), (kv.group("val") or "").strip()
                if key == "Driver Version":
                    state.driver_version = val
                elif key == "Timestamp":
                    state.timestamp = val
                elif key == "Attached GPUs":
                    attached_line = n
                    try:
                        state.gpu_count = int(val)
                    except ValueError:
                        raise CaptureError(file, n, f"Attached GPUs: want a number, got {val!r}") from None
                continue
            raise CaptureError(file, n, f"unexpected line before the first GPU section: {line.strip()[:60]!r}")
        while sections and sections[-1][0] >= ind:
            sections.pop()
        prefix = "/".join(t for _, t in sections)
        if kv:
            key = _text_name(kv.group("key"))
            path = f"{prefix}/{key}" if prefix else key
            cur.add(path, (kv.group("val") or "").strip(), n)
            # a key with a value can still own children (e.g. "HW Slowdown : Active")
            sections.append((ind, key))
        elif ":" not in line:
            sections.append((ind, _text_name(line.strip())))
        else:
            raise CaptureError(file, n, f"want 'key : value' or a section title, got {line.strip()[:60]!r}")
    if not state.gpus:
        raise CaptureError(file, 1, "no 'GPU <bus id>' section found (not nvidia-smi -q output?)")
    if state.gpu_count is not None and len(state.gpus) < state.gpu_count:
        raise CaptureError(file, attached_line, _too_few(len(state.gpus), state.gpu_count))
    if state.gpu_count is not None:
        # a whole capture (it has Attached GPUs, an excerpt has not): nvidia-smi -q prints each
        # GPU's Processes last, so a section without it was cut off (a short copy, a full disk)
        for g in state.gpus:
            f = g.__dict__.get("_fields")
            if f is not None and not any(p.split("/")[0] == _text_name("Processes") for p, _, _ in f.items):
                raise CaptureError(file, f.items[-1][2] if f.items else f.start,
                                   f"GPU {g.pci_bus_id}: its section ends before Processes, which nvidia-smi -q "
                                   "prints last in each GPU: a cut-off capture (capture the whole nvidia-smi -q)")
            procs = [(p, line) for p, _, line in (f.items if f is not None else ()) if p.startswith("Processes/")]
            if procs and procs[-1][0].rsplit("/", 1)[-1].lower() != "used gpu memory":
                # each process nvidia-smi -q lists ends with its Used GPU Memory: one without was cut
                raise CaptureError(file, procs[-1][1],
                                   f"GPU {g.pci_bus_id}: its Processes list ends inside a process (no Used GPU "
                                   "Memory after it): a cut-off capture (capture the whole nvidia-smi -q)")
    for g in state.gpus:
        f = g.__dict__.pop("_fields", None)
        if f is None:  # a device-handle error line: no section to read
            continue
        _identity(g, f, False)
        _fill(g, f, False)
    return state
