"""The sacct fields slurmkit asks for, and the names sacct prints for them.

``FIELDS`` is the ``-o`` list of the ingest call (JobName last, so that a delimiter or newline
inside a job name can only spill into the last column). Captured files may carry any subset;
:data:`KNOWN` lists every field name sacct accepts that the parser understands.
"""

from __future__ import annotations

#: The ``sacct -o`` list of :func:`slurmkit.accounting.ingest.sacct_argv`. JobName stays last.
FIELDS: tuple[str, ...] = (
    "Cluster", "JobID", "JobIDRaw", "State", "User", "Account", "Partition", "QOS",
    "Submit", "Eligible", "Start", "End", "ElapsedRaw", "Suspended", "TimelimitRaw",
    "NCPUS", "NNodes", "NodeList", "ReqMem", "AllocTRES", "TotalCPU", "TRESUsageInTot",
    "TRESUsageInAve", "ConsumedEnergyRaw", "ExitCode", "JobName",
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

_CANON = {name.lower(): name for name in KNOWN}


def canonical(name: str) -> str:
    """sacct's field name in slurmkit's spelling (``ncpus`` -> ``NCPUS``); unknown names are
    returned stripped but otherwise unchanged."""
    name = name.strip()
    if name.lower() == "ncpus":
        return "NCPUS"
    return _CANON.get(name.lower(), name)


def looks_like_header(fields: list[str]) -> bool:
    """True when every entry of a first line is a sacct field name we know (a header line)."""
    names = [f.strip().lower() for f in fields if f.strip()]
    return bool(names) and all(n in _CANON for n in names) and "jobid" in names
