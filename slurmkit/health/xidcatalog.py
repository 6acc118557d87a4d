"""NVIDIA's Xid catalog: what each Xid asks of the operator, and how slurmkit judges a line by it.

:data:`CATALOG` is the catalog's table for Ampere and newer GPUs (NVIDIA, "Analyzing Xid Errors
with the Xid Catalog", https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, its
spreadsheet's "Catalog" sheet as of :data:`CATALOG_VERSION`; transcribed from leptonai/gpud's
``components/accelerator/nvidia/xid/catalog_generated.go``, generated from that spreadsheet):
``{code: (mnemonic, description, immediate resolution)}``, the resolution bucket exactly as the
catalog spells it (``RESTART_APP``, ``RESET_GPU``, ``RESTART_BM``, ``CONTACT_SUPPORT``, ...;
"" where the catalog gives none). The one table of Xid actions in slurmkit; docs/health.md
names its version and source.

:func:`judge` turns one kernel-log line into a verdict by that column (:data:`RESOLUTIONS`),
with what the driver states in the line itself taking precedence:

* ``caused by previous Xid N`` (the driver's suffix on an Xid 45 channel teardown): judged as Xid N;
* Xid 94 / 95 (error containment): the line's ``RST: Yes|No, D-RST: Yes|No`` flags (the driver's
  ``bGpuResetReqd`` / ``bGpuDrainAndResetReqd``, open-gpu-kernel-modules
  ``kern_gpu_ga100.c`` ``_gpuGenerateErrorLog_GA100``) decide whether a reset is needed;
* NVLink Xids 144-150 (``WORKFLOW_NVLINK5_ERR``): the severity the message states
  (``Fatal`` / ``Nonfatal``);
* Xid 154: the recovery action the line names (``to 0x1 (GPU Reset Required)``).

Pure, standard library only (the hooks import it when a kernel log holds an Xid).
"""

from __future__ import annotations

import re

CATALOG_VERSION = "2025-10-29"
CATALOG_SOURCE = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"

#: ``{Xid: (mnemonic, description, immediate resolution)}``: NVIDIA's Xid catalog (see above).
CATALOG: dict[int, tuple[str, str, str]] = {
    1: ('ROBUST_CHANNEL_FIFO_ERROR_FIFO_METHOD', 'Unused', 'CONTACT_SUPPORT'),
    2: ('ROBUST_CHANNEL_FIFO_ERROR_SW_METHOD', 'Unused', 'CONTACT_SUPPORT'),
    3: ('ROBUST_CHANNEL_FIFO_ERROR_UNK_METHOD', 'Unused', 'CONTACT_SUPPORT'),
    4: ('ROBUST_CHANNEL_FIFO_ERROR_CHANNEL_BUSY', 'Unused', 'CONTACT_SUPPORT'),
    5: ('ROBUST_CHANNEL_FIFO_ERROR_RUNOUT_OVERFLOW', 'Unused', 'CONTACT_SUPPORT'),
    6: ('ROBUST_CHANNEL_FIFO_ERROR_PARSE_ERR', 'Unused', 'CONTACT_SUPPORT'),
    7: ('ROBUST_CHANNEL_FIFO_ERROR_PTE_ERR', 'Unused', 'CONTACT_SUPPORT'),
    8: ('ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT', 'GPU stopped processing', 'RESTART_APP'),
    9: ('ROBUST_CHANNEL_GR_ERROR_INSTANCE', 'Unused', 'CONTACT_SUPPORT'),
    10: ('ROBUST_CHANNEL_GR_ERROR_SINGLE_STEP', 'Unused', 'CONTACT_SUPPORT'),
    11: ('ROBUST_CHANNEL_GR_ERROR_MISSING_HW', 'Invalid or corrupted push buffer stream', 'RESTART_APP'),
    12: ('ROBUST_CHANNEL_GR_ERROR_SW_METHOD', 'Unused', 'CONTACT_SUPPORT'),
    13: ('ROBUST_CHANNEL_GR_EXCEPTION/ROBUST_CHANNEL_GR_ERROR_SW_NOTIFY', 'Graphics Engine Exception', 'RESTART_APP'),
    14: ('ROBUST_CHANNEL_FAKE_ERROR', 'Unused', 'IGNORE'),
    15: ('ROBUST_CHANNEL_SCANLINE_TIMEOUT', 'Unused', 'CONTACT_SUPPORT'),
    16: ('ROBUST_CHANNEL_VBLANK_CALLBACK_TIMEOUT', 'Unused', 'CONTACT_SUPPORT'),
    17: ('ROBUST_CHANNEL_PARAMETER_ERROR', 'Unused', 'CONTACT_SUPPORT'),
    18: ('ROBUST_CHANNEL_BUS_MASTER_TIMEOUT_ERROR', 'Unused', 'CONTACT_SUPPORT'),
    19: ('ROBUST_CHANNEL_DISP_MISSED_NOTIFIER', 'Unused', 'CONTACT_SUPPORT'),
    20: ('ROBUST_CHANNEL_MPEG_ERROR_SW_METHOD', 'Unused', 'CONTACT_SUPPORT'),
    21: ('ROBUST_CHANNEL_ME_ERROR_SW_METHOD', 'Unused', 'CONTACT_SUPPORT'),
    22: ('ROBUST_CHANNEL_VP_ERROR_SW_METHOD', 'Unused', 'CONTACT_SUPPORT'),
    23: ('ROBUST_CHANNEL_RC_LOGGING_ENABLED', 'Unused', 'CONTACT_SUPPORT'),
    24: ('ROBUST_CHANNEL_GR_SEMAPHORE_TIMEOUT', 'Unused', 'CONTACT_SUPPORT'),
    25: ('ROBUST_CHANNEL_GR_ILLEGAL_NOTIFY', 'Invalid or illegal push buffer stream', 'RESTART_APP'),
    26: ('ROBUST_CHANNEL_FIFO_ERROR_FBISTATE_TIMEOUT', 'Unused', 'CONTACT_SUPPORT'),
    27: ('ROBUST_CHANNEL_VP_ERROR', 'Unused', 'CONTACT_SUPPORT'),
    28: ('ROBUST_CHANNEL_VP2_ERROR', 'Unused', 'CONTACT_SUPPORT'),
    29: ('ROBUST_CHANNEL_BSP_ERROR', 'Unused', 'CONTACT_SUPPORT'),
    30: ('ROBUST_CHANNEL_BAD_ADDR_ACCESS', 'Unused', 'CONTACT_SUPPORT'),
    31: ('ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT', 'GPU memory page fault', 'RESTART_APP'),
    32: ('ROBUST_CHANNEL_PBDMA_ERROR', 'Invalid or corrupted push buffer stream', 'RESTART_APP'),
    33: ('ROBUST_CHANNEL_SEC_ERROR', 'Unused', 'CONTACT_SUPPORT'),
    34: ('ROBUST_CHANNEL_MSVLD_ERROR', 'Unused', 'CONTACT_SUPPORT'),
    35: ('ROBUST_CHANNEL_MSPDEC_ERROR', 'Unused', 'CONTACT_SUPPORT'),
    36: ('ROBUST_CHANNEL_MSPPP_ERROR', 'Unused', 'CONTACT_SUPPORT'),
    37: ('ROBUST_CHANNEL_FECS_ERR_UNIMP_FIRMWARE_METHOD', 'Driver firmware error', 'IGNORE'),
    38: ('ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT', 'Driver firmware error', 'IGNORE'),
    39: ('ROBUST_CHANNEL_CE0_ERROR', 'Copy Engine Exception', 'RESTART_APP'),
    40: ('ROBUST_CHANNEL_CE1_ERROR', 'Copy Engine Exception', 'RESTART_APP'),
    41: ('ROBUST_CHANNEL_CE2_ERROR', 'Copy Engine Exception', 'RESTART_APP'),
    42: ('ROBUST_CHANNEL_VIC_ERROR', 'Unused', 'CONTACT_SUPPORT'),
    43: ('ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR', 'GPU stopped processing', 'IGNORE'),
    44: ('ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW', 'Graphics Engine fault during context switch', 'IGNORE'),
    45: ('ROBUST_CHANNEL_PREEMPTIVE_REMOVAL', 'Preemptive cleanup, due to previous errors -- Most likely to see when running multiple cuda applications and hitting a DBE', 'WORKFLOW_XID_45'),
    46: ('ROBUST_CHANNEL_GPU_TIMEOUT_ERROR', 'GPU stopped processing', 'RESET_GPU'),
    47: ('ROBUST_CHANNEL_NVENC0_ERROR', 'Unused', 'CONTACT_SUPPORT'),
    48: ('ROBUST_CHANNEL_GPU_ECC_DBE', 'Double Bit ECC Error', 'WORKFLOW_XID_48'),
    49: ('SILENT_RUNNING_CONSTANT_LEVEL_SET_BY_REGISTRY', 'Unused', 'CONTACT_SUPPORT'),
    50: ('SILENT_RUNNING_LEVEL_TRANSITION_DUE_TO_RC_ERROR', 'Unused', 'CONTACT_SUPPORT'),
    51: ('SILENT_RUNNING_STRESS_TEST_FAILURE', 'Unused', 'CONTACT_SUPPORT'),
    52: ('SILENT_RUNNING_LEVEL_TRANS_DUE_TO_TEMP_RISE', 'Unused', 'CONTACT_SUPPORT'),
    53: ('SILENT_RUNNING_TEMP_REDUCED_CLOCKING', 'Unused', 'CONTACT_SUPPORT'),
    54: ('SILENT_RUNNING_PWR_REDUCED_CLOCKING', 'Auxiliary power is not connected to the GPU board', 'CHECK_MECHANICALS'),
    55: ('SILENT_RUNNING_TEMPERATURE_READ_ERROR', 'Unused', 'CONTACT_SUPPORT'),
    56: ('DISPLAY_CHANNEL_EXCEPTION', 'Unused', 'CONTACT_SUPPORT'),
    57: ('FB_LINK_TRAINING_FAILURE_ERROR', 'Unused', 'CONTACT_SUPPORT'),
    58: ('FB_MEMORY_ERROR', 'Unused', 'CONTACT_SUPPORT'),
    59: ('PMU_ERROR', 'Unused', 'CONTACT_SUPPORT'),
    60: ('ROBUST_CHANNEL_SEC2_ERROR', 'Video processor exception', 'RESTART_APP'),
    61: ('PMU_BREAKPOINT', 'Unused', 'CONTACT_SUPPORT'),
    62: ('PMU_HALT_ERROR', 'Internal micro-controller halt (newer drivers)', 'RESET_GPU'),
    63: ('INFOROM_DRAM_RETIREMENT_EVENT', 'GPU memory remapping event', 'IGNORE'),
    64: ('INFOROM_DRAM_RETIREMENT_FAILURE', 'GPU memory remapping failure', 'RESET_GPU'),
    65: ('ROBUST_CHANNEL_NVENC1_ERROR', 'Unused', 'CONTACT_SUPPORT'),
    66: ('ROBUST_CHANNEL_FECS_ERR_REG_ACCESS_VIOLATION', 'Illegal access by driver', 'IGNORE'),
    67: ('ROBUST_CHANNEL_FECS_ERR_VERIF_VIOLATION', 'Illegal access by driver', 'IGNORE'),
    68: ('ROBUST_CHANNEL_NVDEC0_ERROR', 'NVDEC0 Exception', 'RESTART_APP'),
    69: ('ROBUST_CHANNEL_GR_CLASS_ERROR', 'Graphics Engine class error', 'RESTART_APP'),
    70: ('ROBUST_CHANNEL_CE3_ERROR', 'CE3: Unknown Error', 'RESTART_APP'),
    71: ('ROBUST_CHANNEL_CE4_ERROR', 'CE4: Unknown Error', 'RESTART_APP'),
    72: ('ROBUST_CHANNEL_CE5_ERROR', 'CE5: Unknown Error', 'RESTART_APP'),
    73: ('ROBUST_CHANNEL_NVENC2_ERROR', 'Unused', 'CONTACT_SUPPORT'),
    74: ('NVLINK_ERROR', 'NVLINK Error', 'WORKFLOW_NVLINK_ERR'),
    75: ('ROBUST_CHANNEL_CE6_ERROR', 'CE6: Unknown Error', 'RESTART_APP'),
    76: ('ROBUST_CHANNEL_CE7_ERROR', 'CE7: Unknown Error', 'RESTART_APP'),
    77: ('ROBUST_CHANNEL_CE8_ERROR', 'CE8: Unknown Error', 'RESTART_APP'),
    78: ('VGPU_START_ERROR', 'vGPU Start Error', 'UPDATE_SWFW'),
    79: ('ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS', 'GPU has fallen off the bus', 'RESTART_BM'),
    80: ('PBDMA_PUSHBUFFER_CRC_MISMATCH', 'Corrupted data sent to GPU', 'RESTART_APP'),
    81: ('ROBUST_CHANNEL_VGA_SUBSYSTEM_ERROR', 'Unused', 'CONTACT_SUPPORT'),
    82: ('ROBUST_CHANNEL_NVJPG0_ERROR', 'NVJPG0 Error', 'RESTART_APP'),
    83: ('ROBUST_CHANNEL_NVDEC1_ERROR', 'NVDEC1 Error', 'RESTART_APP'),
    84: ('ROBUST_CHANNEL_NVDEC2_ERROR', 'NVDEC2 Error', 'RESTART_APP'),
    85: ('ROBUST_CHANNEL_CE9_ERROR', 'CE9: Unknown Error', 'RESTART_APP'),
    86: ('ROBUST_CHANNEL_OFA0_ERROR', 'OFA Exception', 'RESTART_APP'),
    87: ('NVTELEMETRY_DRIVER_REPORT', 'Unused', 'CONTACT_SUPPORT'),
    88: ('ROBUST_CHANNEL_NVDEC3_ERROR', 'NVDEC3 Error', 'RESTART_APP'),
    89: ('ROBUST_CHANNEL_NVDEC4_ERROR', 'NVDEC4 Error', 'RESTART_APP'),
    90: ('LTC_ERROR', 'Unused', 'CONTACT_SUPPORT'),
    91: ('RESERVED_XID', 'Unused', 'CONTACT_SUPPORT'),
    92: ('EXCESSIVE_SBE_INTERRUPTS', 'High single-bit ECC error rate', 'IGNORE'),
    93: ('INFOROM_ERASE_LIMIT_EXCEEDED', 'Non-fatal violation of provisioned InfoROM wear limit', 'IGNORE'),
    94: ('ROBUST_CHANNEL_CONTAINED_ERROR', 'Contained memory error', 'RESTART_APP'),
    95: ('ROBUST_CHANNEL_UNCONTAINED_ERROR', 'Uncontained memory error', 'RESET_GPU'),
    96: ('ROBUST_CHANNEL_NVDEC5_ERROR', 'NVDEC5 Error', 'RESTART_APP'),
    97: ('ROBUST_CHANNEL_NVDEC6_ERROR', 'NVDEC6 Error', 'RESTART_APP'),
    98: ('ROBUST_CHANNEL_NVDEC7_ERROR', 'NVDEC7 Error', 'RESTART_APP'),
    99: ('ROBUST_CHANNEL_NVJPG1_ERROR', 'NVJPG1 Error', 'RESTART_APP'),
    100: ('ROBUST_CHANNEL_NVJPG2_ERROR', 'NVJPG2 Error', 'RESTART_APP'),
    101: ('ROBUST_CHANNEL_NVJPG3_ERROR', 'NVJPG3 Error', 'RESTART_APP'),
    102: ('ROBUST_CHANNEL_NVJPG4_ERROR', 'NVJPG4 Error', 'RESTART_APP'),
    103: ('ROBUST_CHANNEL_NVJPG5_ERROR', 'NVJPG5 Error', 'RESTART_APP'),
    104: ('ROBUST_CHANNEL_NVJPG6_ERROR', 'NVJPG6 Error', 'RESTART_APP'),
    105: ('ROBUST_CHANNEL_NVJPG7_ERROR', 'NVJPG7 Error', 'RESTART_APP'),
    106: ('SMBPBI_TEST_MESSAGE', 'SMBPBI Test Message', 'IGNORE'),
    107: ('SMBPBI_TEST_MESSAGE_SILENT', 'SMBPBI Test Message Silent', 'IGNORE'),
    108: ('NVLINK_REMOTE_TRANSLATION_ERROR', 'Unused', 'IGNORE'),
    109: ('ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR', 'Context Switch Timeout Error', 'RESET_GPU'),
    110: ('SEC_FAULT_ERROR', 'Security Fault Error', 'RESET_GPU'),
    111: ('BUNDLE_ERROR_EVENT', 'Unused', 'CONTACT_SUPPORT'),
    112: ('DISP_SUPERVISOR_ERROR', 'Unused', 'CONTACT_SUPPORT'),
    113: ('DP_LT_FAILURE', 'Unused', 'CONTACT_SUPPORT'),
    114: ('HEAD_RG_UNDERFLOW', 'Unused', 'CONTACT_SUPPORT'),
    115: ('CORE_CHANNEL_REGS', 'Unused', 'CONTACT_SUPPORT'),
    116: ('WINDOW_CHANNEL_REGS', 'Unused', 'CONTACT_SUPPORT'),
    117: ('CURSOR_CHANNEL_REGS', 'Unused', 'CONTACT_SUPPORT'),
    118: ('HEAD_REGS', 'Unused', 'CONTACT_SUPPORT'),
    119: ('GSP_RPC_TIMEOUT', 'GSP RPC Timeout', 'RESET_GPU'),
    120: ('GSP_ERROR', 'GSP Error', 'RESET_GPU'),
    121: ('C2C_ERROR', 'C2C Error', 'IGNORE'),
    122: ('SPI_PMU_RPC_READ_FAIL', 'Unused', 'CONTACT_SUPPORT'),
    123: ('SPI_PMU_RPC_WRITE_FAIL', 'Unused', 'CONTACT_SUPPORT'),
    124: ('SPI_PMU_RPC_ERASE_FAIL', 'Unused', 'CONTACT_SUPPORT'),
    125: ('INFOROM_FS_ERROR', 'Unused', 'CONTACT_SUPPORT'),
    126: ('ROBUST_CHANNEL_CE10_ERROR', 'CE10: Unknown Error', 'RESTART_APP'),
    127: ('ROBUST_CHANNEL_CE11_ERROR', 'CE11: Unknown Error', 'RESTART_APP'),
    128: ('ROBUST_CHANNEL_CE12_ERROR', 'CE12: Unknown Error', 'RESTART_APP'),
    129: ('ROBUST_CHANNEL_CE13_ERROR', 'CE13: Unknown Error', 'RESTART_APP'),
    130: ('ROBUST_CHANNEL_CE14_ERROR', 'CE14: Unknown Error', 'RESTART_APP'),
    131: ('ROBUST_CHANNEL_CE15_ERROR', 'CE15: Unknown Error', 'RESTART_APP'),
    132: ('ROBUST_CHANNEL_CE16_ERROR', 'CE16: Unknown Error', 'RESTART_APP'),
    133: ('ROBUST_CHANNEL_CE17_ERROR', 'CE17: Unknown Error', 'RESTART_APP'),
    134: ('ROBUST_CHANNEL_CE18_ERROR', 'CE18: Unknown Error', 'RESTART_APP'),
    135: ('ROBUST_CHANNEL_CE19_ERROR', 'CE19: Unknown Error', 'RESTART_APP'),
    136: ('ALI_TRAINING_FAIL', 'Link Training Failed', 'RESET_GPU'),
    137: ('NVLINK_PRIV_ERR', 'NVLink Privilege Error', 'IGNORE'),
    138: ('ROBUST_CHANNEL_DLA_ERROR', 'Unused', 'CONTACT_SUPPORT'),
    139: ('ROBUST_CHANNEL_OFA1_ERROR', 'OFA1 Error', 'RESTART_APP'),
    140: ('UNRECOVERABLE_ECC_ERROR_ESCAPE', 'ECC Unrecovered Error', 'RESET_GPU'),
    141: ('ROBUST_CHANNEL_FAST_PATH_ERROR', 'CUDA Fast Path Error', 'IGNORE'),
    142: ('ROBUST_CHANNEL_NVENC3_ERROR', 'NVENC3 Error', 'CONTACT_SUPPORT'),
    143: ('GPU_INIT_ERROR', 'GPU Initialization Error', 'RESET_GPU'),
    144: ('NVLINK_SAW_ERROR', 'NVLINK: SAW Error', 'WORKFLOW_NVLINK5_ERR'),
    145: ('NVLINK_RLW_ERROR', 'NVLINK: RLW Error', 'WORKFLOW_NVLINK5_ERR'),
    146: ('NVLINK_TLW_ERROR', 'NVLINK: TLW Error', 'WORKFLOW_NVLINK5_ERR'),
    147: ('NVLINK_TREX_ERROR', 'NVLINK: TREX Error', 'WORKFLOW_NVLINK5_ERR'),
    148: ('NVLINK_NVLPW_CTRL_ERROR', 'NVLINK: NVLPW_CTRL Error', 'WORKFLOW_NVLINK5_ERR'),
    149: ('NVLINK_NETIR_ERROR', 'NVLINK: NETIR Error', 'WORKFLOW_NVLINK5_ERR'),
    150: ('NVLINK_MSE_ERROR', 'NVLINK: MSE Error', 'WORKFLOW_NVLINK5_ERR'),
    151: ('ROBUST_CHANNEL_KEY_ROTATION_ERROR', 'Key rotation Error', 'RESTART_VM'),
    152: ('ROBUST_CHANNEL_DLA_SMMU_ERROR', 'DLA SMMU Error', 'IGNORE'),
    153: ('ROBUST_CHANNEL_DLA_TIMEOUT', 'DLA timeout Error', 'IGNORE'),
    154: ('GPU_RECOVERY_ACTION_CHANGED', 'GPU Recovery Action Changed', 'XID_154'),
    155: ('NVLINK_SW_DEFINED_ERROR', 'NVLINK: SW Defined Error', 'RESET_GPU'),
    156: ('RESOURCE_RETIREMENT_EVENT', 'Resource Retirement Event', 'RESET_GPU'),
    157: ('RESOURCE_RETIREMENT_FAILURE', 'Resource Retirement Failure', 'IGNORE'),
    158: ('GPU_FATAL_TIMEOUT', 'GPU Fatal Timeout', 'RESET_GPU'),
    159: ('ROBUST_CHANNEL_CHI_NON_DATA_ERROR', 'CHI Non-Data Error', 'CHECK_UVM'),
    160: ('CHANNEL_RETIREMENT_EVENT', 'Channel Retirement Event', 'IGNORE'),
    161: ('CHANNEL_RETIREMENT_FAILURE', 'Channel Retirement Failure', 'IGNORE'),
    162: ('PSHC_REENGAGED', 'Power Smoothing HW Circuitry capability reengaged', ''),
    163: ('PSHC_DISENGAGED', 'Power Smoothing HW Circuitry capability disengaged', ''),
    164: ('PSHC_LOW_LIFETIME', 'Power Smoothing HW Circuitry low lifetime reached', ''),
    165: ('PSHC_ZERO_LIFETIME', 'Power Smoothing HW Circuitry lifetime exhausted', ''),
    166: ('NVLINK_SECURE_CRYPTO_ERR', 'CC traffic seen prior to link properly being configured for encrypted traffic', ''),
    167: ('PCIE_FATAL_TIMEOUT', 'PCIE_FATAL_TIMEOUT', ''),
    168: ('REDUCED_GPU_MEMORY_CAPACITY', 'Errors found in WPR (write protected region)', ''),
    169: ('SEC2_HALT_ERROR', 'Internal micro-controller halt', ''),
    170: ('NVLINK_SECURE_OTHER', 'Interrupt seen in CC mode', ''),
    171: ('UNCORRECTABLE_DRAM_ERROR', 'Additional to Xid 48 providing more details on particulars of fault to differentiate DRAM/SRAM', ''),
    172: ('UNCORRECTABLE_SRAM_ERROR', 'Additional to Xid 48 providing more details on particulars of fault to differentiate DRAM/SRAM', ''),
}

#: The catalog's immediate resolution -> ``(verdict, action in words)``. ``fail`` drains the
#: node (and holds it until the GPU's recorded reset or a reboot: :mod:`slurmkit.hooks.xidhold`),
#: ``warn`` is shown and counted, ``pass`` is the application's own fault or needs nothing.
#: ``WORKFLOW_NVLINK5_ERR`` and ``XID_154`` are decided by the line (:func:`judge`).
RESOLUTIONS: dict[str, tuple[str, str]] = {
    "RESTART_APP": ("pass", "restart the application"),
    "IGNORE": ("pass", "no action needed"),
    "WORKFLOW_XID_45": ("pass", "restart the application"),
    "RESET_GPU": ("fail", "reset the GPU"),
    "WORKFLOW_XID_48": ("fail", "reset the GPU"),
    "WORKFLOW_NVLINK_ERR": ("fail", "reset the GPU"),
    "RESTART_BM": ("fail", "reboot the node"),
    "RESTART_VM": ("fail", "reboot the node"),
    "CONTACT_SUPPORT": ("fail", "report to NVIDIA support"),
    "CHECK_MECHANICALS": ("fail", "check the GPU's power cabling"),
    "UPDATE_SWFW": ("warn", "update the driver / firmware"),
    "CHECK_UVM": ("warn", "check the UVM driver"),
    "": ("warn", "the catalog gives no action"),
}

_CAUSED_BY_RE = re.compile(r"caused by previous Xid (\d+)")
_SEVERITY_RE = re.compile(r"\b(non-?fatal|fatal)\b", re.IGNORECASE)
_RST_RE = re.compile(r"\bRST:\s*(Yes|No)\s*[,;]\s*D-RST:\s*(Yes|No)", re.IGNORECASE)
_RECOVERY_RE = re.compile(r"recovery action changed from .* to 0x[0-9a-fA-F]+ \(([^)]*)\)")
#: the NVLink5 Xids whose severity the message states (``WORKFLOW_NVLINK5_ERR``)
SEVERITY_XIDS = range(144, 151)


def judged_as(xid: int, message: str) -> tuple[int, str | None]:
    """How an Xid line is judged: ``(Xid number, severity)``. A line the driver marks ``caused
    by previous Xid N`` (an Xid 45 channel teardown after an NVLink Xid 149) is judged as Xid N;
    for the NVLink Xids 144-150 the severity the message states (``"fatal"`` / ``"nonfatal"``,
    None when it states none), else None."""
    m = _CAUSED_BY_RE.search(message)
    judged = int(m.group(1)) if m else xid
    sev = None
    if judged in SEVERITY_XIDS:
        s = _SEVERITY_RE.search(message)
        if s:
            sev = "nonfatal" if s.group(1).lower().startswith("non") else "fatal"
    return judged, sev


def resolution(xid: int) -> str | None:
    """The catalog's immediate resolution for ``xid`` (None: not in the catalog)."""
    row = CATALOG.get(xid)
    return row[2] if row else None


def name(xid: int) -> str:
    """The catalog's description of ``xid`` ("" when it has none or calls the code unused)."""
    row = CATALOG.get(xid)
    return row[1] if row and row[1] != "Unused" else ""


def judge(xid: int, message: str) -> tuple[int, str | None, str, str, str]:
    """One Xid line judged: ``(judged Xid, severity, verdict, action, basis)``.

    ``judged``/``severity``: :func:`judged_as`. ``verdict``: ``"fail"`` | ``"warn"`` |
    ``"pass"``; ``action``: what is needed, in words ("reset the GPU", "restart the
    application", ...); ``basis``: where the verdict comes from (``NVIDIA Xid catalog:
    RESET_GPU``, ``the driver: RST: Yes, D-RST: No``, ``the driver: Fatal``, ...).
    An Xid not in the catalog warns."""
    judged, sev = judged_as(xid, message)
    caused = judged != xid
    res = resolution(judged)
    if res is None:
        return judged, sev, "warn", "unknown to the catalog", f"NVIDIA Xid catalog {CATALOG_VERSION}: no entry"
    basis = f"NVIDIA Xid catalog: {res or 'no action'}"
    if judged in (94, 95):
        rst = _RST_RE.search(message)
        if rst:
            reset, drain = (v.lower() == "yes" for v in rst.groups())
            flags = f"the driver: RST: {rst.group(1)}, D-RST: {rst.group(2)}"
            if drain:
                return judged, sev, "fail", "drain and reset the GPU", flags
            if reset:
                return judged, sev, "fail", "reset the GPU", flags
            if judged == 95:  # uncontained, yet the driver needs no reset: shown, not drained
                return judged, sev, "warn", "no reset needed", flags
            return judged, sev, "pass", "restart the application", flags
    if res == "WORKFLOW_NVLINK5_ERR":
        if sev == "fatal":
            return judged, sev, "fail", "reset the GPU", "the driver: Fatal"
        if sev is None and caused:  # the error tore down an application's channel: not contained to the link
            return judged, sev, "fail", "reset the GPU", f"the driver: caused by previous Xid {judged}"
        return judged, sev, "warn", "watch the link", ("the driver: Nonfatal" if sev else basis)
    if res == "XID_154":
        m = _RECOVERY_RE.search(message)
        words = m.group(1).strip() if m else ""
        if words.lower() == "none":
            return judged, sev, "pass", "none", "the driver: recovery action None"
        return judged, sev, "fail", words or "the recovery action NVML reports", basis
    verdict, action = RESOLUTIONS.get(res, ("warn", res.lower().replace("_", " ")))
    return judged, sev, verdict, action, basis
