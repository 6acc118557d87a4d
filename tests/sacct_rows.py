"""Tiny sacct inputs written in tests: ``row(**fields)`` one parsable row (a finished 2-GPU job
of an hour by default), ``text(rows)`` the bytes of a capture with header (``FIELDS`` order),
``T0`` (2026-01-01T00:00:00Z, epoch s) and ``WEEK`` (the window ``[T0, T0 + 7 d)``).
Shared by the accounting, report and hooks tests."""

from __future__ import annotations

import datetime as dt

from slurmkit.accounting.fields import FIELDS
from slurmkit.report.window import Window

__all__ = ["FIELDS", "T0", "WEEK", "row", "text"]

T0 = 1_767_225_600  # 2026-01-01T00:00:00Z
WEEK = Window(dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc), dt.datetime(2026, 1, 8, tzinfo=dt.timezone.utc))


def row(**kw) -> dict:
    base = {"Cluster": "c1", "JobID": "100", "JobIDRaw": "", "State": "COMPLETED", "User": "alice",
            "Account": "acct", "Partition": "gpu", "QOS": "normal", "Submit": str(T0),
            "Eligible": str(T0), "Start": str(T0 + 600), "End": str(T0 + 600 + 3600),
            "ElapsedRaw": "3600", "Suspended": "00:00:00", "TimelimitRaw": "120", "NCPUS": "4",
            "NNodes": "1", "NodeList": "n1", "ReqMem": "8G",
            "AllocTRES": "billing=4,cpu=4,gres/gpu=2,mem=8G,node=1", "TotalCPU": "01:00:00",
            "TRESUsageInTot": "", "TRESUsageInAve": "", "ConsumedEnergyRaw": "0", "ExitCode": "0:0",
            "ReqTRES": "billing=4,cpu=4,gres/gpu=2,mem=8G,node=1", "JobName": "train"}
    base.update({k: str(v) for k, v in kw.items()})
    if not base["JobIDRaw"]:
        base["JobIDRaw"] = base["JobID"]
    return base


def text(rows, delim="|", header=True) -> bytes:
    lines = [delim.join(FIELDS)] if header else []
    lines += [delim.join(r[f] for f in FIELDS) for r in rows]
    return ("\n".join(lines) + "\n").encode()
