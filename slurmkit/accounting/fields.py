"""The sacct fields slurmkit asks for, and the names sacct prints for them.

``FIELDS`` is the ``-o`` list of the ingest call (JobName last, so that a delimiter or newline
inside a job name can only spill into the last column). Captured files may carry any subset;
:data:`KNOWN` lists every field name sacct accepts that the parser understands.
"""

from __future__ import annotations

import re

#: The ``sacct -o`` list of :func:`slurmkit.accounting.ingest.sacct_argv`. JobName stays last.
FIELDS: tuple[str, ...] = (
    "Cluster", "JobID", "JobIDRaw", "State", "User", "Account", "Partition", "QOS",
    "Submit", "Eligible", "Start", "End", "ElapsedRaw", "Suspended", "TimelimitRaw",
    "NCPUS", "NNodes", "NodeList", "ReqMem", "AllocTRES", "TotalCPU", "TRESUsageInTot",
    "TRESUsageInAve", "ConsumedEnergyRaw", "ExitCode", "ReqTRES", "JobName",
)

#: Delimiter for the ingest call: a byte no job name or user name realistically holds
#: (ASCII unit separator). One byte, so pyarrow's CSV reader can split on it directly.
DELIMITER = "\x1f"

#: Field names the parser uses (canonical spelling); captured headers are matched
#: case-insensitively against these plus any other sacct field (kept as plain strings).
KNOWN: tuple[str, ...] = FIELDS + (
    "Elapsed", "Timelimit", "NCPUs", "AllocCPUS", "ReqCPUS", "ReqTRES", "MaxRSS", "MaxVMSize",
    "TRESUsageInMax", "ConsumedEnergy", "AllocNodes", "ReqNodes", "NTasks", "Group",
    "CPUTime", "CPUTimeRAW", "UserCPU", "SystemCPU", "DerivedExitCode", "Constraints", "Comment",
    "TRESUsageOutTot", "MaxDiskRead", "MaxDiskWrite", "MaxPages", "MaxRSSNode", "MaxRSSTask",
    "MaxVMSizeNode", "MaxVMSizeTask", "MaxDiskReadNode", "MaxDiskReadTask", "MaxDiskWriteNode",
    "MaxDiskWriteTask", "Reason", "WCKey", "Priority", "Reserved", "Planned", "AveRSS",
)

#: Every field ``sacct --helpformat`` lists (Slurm 22.05 to 24.11), which ``sacct -l``, ``-o ALL``
#: and site format strings print: recognised in a header, and the ones not used ignored.
SACCT_FIELDS: tuple[str, ...] = (
    "Account", "AdminComment", "AllocCPUS", "AllocGRES", "AllocNodes", "AllocTRES", "AssocID", "AveCPU",
    "AveCPUFreq", "AveDiskRead", "AveDiskWrite", "AvePages", "AveRSS", "AveVMSize", "BlockID", "Cluster",
    "Comment", "Constraints", "ConsumedEnergy", "ConsumedEnergyRaw", "Container", "CPUTime", "CPUTimeRAW",
    "DBIndex", "DerivedExitCode", "Elapsed", "ElapsedRaw", "Eligible", "End", "ExitCode", "Extra",
    "FailedNode", "Flags", "GID", "Group", "JobID", "JobIDRaw", "JobName", "Layout", "Licenses",
    "MaxDiskRead", "MaxDiskReadNode", "MaxDiskReadTask", "MaxDiskWrite", "MaxDiskWriteNode",
    "MaxDiskWriteTask", "MaxPages", "MaxPagesNode", "MaxPagesTask", "MaxRSS", "MaxRSSNode", "MaxRSSTask",
    "MaxVMSize", "MaxVMSizeNode", "MaxVMSizeTask", "McsLabel", "MinCPU", "MinCPUNode", "MinCPUTask",
    "NCPUS", "NNodes", "NodeList", "NTasks", "Partition", "Planned", "PlannedCPU", "PlannedCPURAW",
    "Priority", "QOS", "QOSRAW", "QOSREQ", "Reason", "ReqCPUFreq", "ReqCPUFreqGov", "ReqCPUFreqMax",
    "ReqCPUFreqMin", "ReqCPUS", "ReqGRES", "ReqMem", "ReqNodes", "ReqTRES", "Reservation",
    "ReservationId", "Reserved", "ResvCPU", "ResvCPURAW", "Restarts", "Start", "State", "StdErr", "StdIn",
    "StdOut", "Submit", "SubmitLine", "Suspended", "SystemComment", "SystemCPU", "Timelimit",
    "TimelimitRaw", "TotalCPU", "TRESUsageInAve", "TRESUsageInMax", "TRESUsageInMaxNode",
    "TRESUsageInMaxTask", "TRESUsageInMin", "TRESUsageInMinNode", "TRESUsageInMinTask", "TRESUsageInTot",
    "TRESUsageOutAve", "TRESUsageOutMax", "TRESUsageOutMaxNode", "TRESUsageOutMaxTask", "TRESUsageOutMin",
    "TRESUsageOutMinNode", "TRESUsageOutMinTask", "TRESUsageOutTot", "UID", "User", "UserCPU", "WCKey",
    "WCKeyID", "WorkDir",
)

_CANON = {name.lower(): name for name in SACCT_FIELDS}
_CANON.update({name.lower(): name for name in KNOWN})


def canonical(name: str) -> str:
    """sacct's field name in slurmkit's spelling (``ncpus`` -> ``NCPUS``); unknown names are
    returned stripped but otherwise unchanged."""
    name = name.strip()
    if name.lower() == "ncpus":
        return "NCPUS"
    return _CANON.get(name.lower(), name)


_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


def looks_like_header(fields: list[str]) -> bool:
    """True when a first line is a header: it names JobID, every entry looks like a field name,
    and at least half of them are sacct fields (:data:`SACCT_FIELDS`; a newer Slurm's few
    fields unknown here do not stop it)."""
    names = [f.strip() for f in fields if f.strip()]
    if not names or "jobid" not in {n.lower() for n in names}:
        return False
    if not all(_NAME.match(n) for n in names):
        return False
    return 2 * sum(n.lower() in _CANON for n in names) >= len(names)
