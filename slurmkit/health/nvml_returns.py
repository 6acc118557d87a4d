"""Every NVML return code (``nvmlReturn_t``, NVML's names without ``NVML_ERROR_``) and what it
means for a health verdict.

======================  =========  ===========================================================
return code             class      why
======================  =========  ===========================================================
SUCCESS                 ok
NOT_SUPPORTED           absent     this GPU / driver has no such value: never evidence
FUNCTION_NOT_FOUND      absent     older driver without the call
NO_DATA                 absent     nothing recorded yet (e.g. no samples)
VGPU_ECC_NOT_SUPPORTED  absent     vGPU guest without ECC reporting
FREQ_NOT_SUPPORTED      absent     clock pair not offered by this GPU
DEPRECATED              absent     call retired by the driver
RESET_TYPE_NOT_SUPPORTED  absent   the GPU does not offer that kind of reset
NOT_FOUND               absent     the object asked for (a process, a link) is not there
NOT_AVAILABLE           absent     slurmkit's: nvidia-smi printed N/A / the field is absent
UNINITIALIZED           own        slurmkit called NVML before nvmlInit (a bug)
INVALID_ARGUMENT        own        a bad argument from slurmkit (a bug)
ALREADY_INITIALIZED     own        a bug
INSUFFICIENT_SIZE       own        slurmkit's buffer too small (a bug)
ARGUMENT_VERSION_MISMATCH  own     pynvml and the driver disagree on a struct version
NO_PERMISSION           own        the hook runs without the rights it needs (not root)
LIBRARY_NOT_FOUND       own*       no libnvidia-ml: own trouble on a node without expected GPUs;
                                   on a GPU node ``nvml_init`` fails (the driver is missing)
IN_USE                  own        a setting is held by another client (e.g. MIG, persistence)
MEMORY                  own        the host is out of memory
INSUFFICIENT_RESOURCES  own        the driver ran out of a resource for this request
OPERATING_SYSTEM        own        the OS refused the request
NOT_READY               own        the system is not ready yet (boot, fabric manager start)
DRIVER_NOT_LOADED       hardware   no NVIDIA kernel driver on a node that should have GPUs
LIB_RM_VERSION_MISMATCH hardware   user-space library and kernel module differ (a driver upgrade
                                   without reboot): GPU jobs fail on this node
INSUFFICIENT_POWER      hardware   the GPU's external power cables are not properly attached
TIMEOUT                 hardware   the GPU did not answer in time
IRQ_ISSUE               hardware   the kernel detected an interrupt problem with the GPU
CORRUPTED_INFOROM       hardware   the InfoROM is corrupted
GPU_IS_LOST             hardware   the GPU fell off the bus
RESET_REQUIRED          hardware   the GPU needs a reset before it can be used
GPU_NOT_FOUND           hardware   the GPU is not found (gone from the bus)
INVALID_STATE           hardware   the GPU is in an invalid state
UNKNOWN                 hardware   an internal driver error (nvidia-smi: "Unknown Error")
======================  =========  ===========================================================

Field values (``nvmlDeviceGetFieldValues``, e.g. ``NVML_FI_DEV_GET_GPU_RECOVERY_ACTION``) carry
a return code per field in ``nvmlFieldValue_t.nvmlReturn``: a driver older than the field answers
``NOT_SUPPORTED``, or ``INVALID_ARGUMENT`` for a field id it does not know; for a field value
both mean *absent* (:data:`FIELD_ABSENT_RCS`, :func:`field_kind`), not slurmkit's bug.

A code not in the table (a newer driver's) is ``own``: logged, never a drain. *hardware* codes
fail the GPU that returned them (checks ``gpu_lost`` for GPU_IS_LOST / UNKNOWN handles,
``nvml_error`` for the rest); *own* ones are slurmkit's own trouble (logged, counted, no drain);
*absent* ones yield no result at all. Only the standard library is imported (hooks import this).
"""

from __future__ import annotations

OK, ABSENT, OWN, HARDWARE = "ok", "absent", "own", "hardware"

RETURN_CODES: dict[str, str] = {
    "SUCCESS": OK,
    **dict.fromkeys(("NOT_SUPPORTED", "FUNCTION_NOT_FOUND", "NO_DATA", "VGPU_ECC_NOT_SUPPORTED",
                     "FREQ_NOT_SUPPORTED", "DEPRECATED", "NOT_FOUND", "NOT_AVAILABLE",
                     "RESET_TYPE_NOT_SUPPORTED"), ABSENT),
    **dict.fromkeys(("UNINITIALIZED", "INVALID_ARGUMENT", "ALREADY_INITIALIZED", "INSUFFICIENT_SIZE",
                     "ARGUMENT_VERSION_MISMATCH", "NO_PERMISSION", "LIBRARY_NOT_FOUND", "IN_USE", "MEMORY",
                     "INSUFFICIENT_RESOURCES", "OPERATING_SYSTEM", "NOT_READY"), OWN),
    **dict.fromkeys(("DRIVER_NOT_LOADED", "LIB_RM_VERSION_MISMATCH", "INSUFFICIENT_POWER", "TIMEOUT",
                     "IRQ_ISSUE", "CORRUPTED_INFOROM", "GPU_IS_LOST", "RESET_REQUIRED", "GPU_NOT_FOUND",
                     "INVALID_STATE", "UNKNOWN"), HARDWARE),
}


def kind(rc: str) -> str:
    """The class of return code ``rc``: ok | absent | own | hardware (unlisted: own)."""
    return RETURN_CODES.get(rc, OWN)


#: Per-field return codes of ``nvmlDeviceGetFieldValues`` that mean "this driver has no such
#: field": the table's absent codes plus ``INVALID_ARGUMENT`` (a field id newer than the driver).
FIELD_ABSENT_RCS = frozenset({rc for rc, k in RETURN_CODES.items() if k == ABSENT} | {"INVALID_ARGUMENT"})


def field_kind(rc: str) -> str:
    """The class of a per-field return code of ``nvmlDeviceGetFieldValues``: as :func:`kind`,
    except that the codes of :data:`FIELD_ABSENT_RCS` are ``absent``."""
    return ABSENT if rc in FIELD_ABSENT_RCS else kind(rc)
