"""Typed job-row frame from sacct's string table (one row per sacct row: allocations and steps).

:func:`jobs_frame` turns the reader's string columns into typed pandas columns with units in
their names. Columns (absent sacct fields give the stated default):

=================  =================================================================
cluster            Cluster ("" when not in the input; the caller may set a default)
job_id             JobID as printed (``123_4``, ``900+0``, ``123.batch``)
alloc_id           JobID without the step (``123_4``)
key_id             JobIDRaw without the step when present, else ``alloc_id``: the
                   allocation identity (array tasks and het components each their own)
step               step name (``batch``, ``extern``, ``0``, ``interactive``) or ""
is_step            bool: a step row (usage only, never hours)
array_task         ``4``, ``[5-9]`` (pending tasks) or ""
pending_tasks      number of tasks in a pending array record (backlog), else 0
het                het component offset or ""
state              State without ``by N``; ``cancelled_by`` the uid/user after ``by``
user, account, partition, qos, nodelist, job_name, exit_code     strings
submit, eligible, start, end   datetime64[ns, UTC] (NaT for Unknown / None)
elapsed_s          ElapsedRaw, else Elapsed (seconds; excludes suspended time)
suspended_s        Suspended (seconds)
timelimit_s        TimelimitRaw x 60 or Timelimit; +inf for UNLIMITED / Partition_Limit
ncpus, nnodes      NCPUS / AllocCPUS, NNodes / AllocNodes (float, NaN when absent)
alloc_mem_mib      AllocTRES mem=, else ReqMem (``Mc`` x NCPUS, ``Mn`` x NNodes)
gpus, gpu_type     from AllocTRES (:func:`~slurmkit.accounting.parse.gpus_from_tres`)
total_cpu_s        TotalCPU (seconds of user+system CPU)
mem_used_mib       TRESUsageInTot mem=, else MaxRSS (steps: the step's usage)
gpu_util_pct       TRESUsageInAve, else TRESUsageInTot ``gres/gpuutil`` (percent)
energy_j           ConsumedEnergyRaw (joules; NaN when absent)
=================  =================================================================
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from slurmkit.accounting import parse as P
from slurmkit.accounting.quality import DataQuality


def _col(df: pd.DataFrame, *names: str) -> pd.Series | None:
    for n in names:
        if n in df.columns:
            return df[n]
    return None


def _str(df, *names) -> pd.Series:
    c = _col(df, *names)
    if c is None:
        return pd.Series("", index=df.index, dtype="str")
    return c.astype("str").str.strip()


def _num(df, *names) -> pd.Series:
    c = _col(df, *names)
    if c is None:
        return pd.Series(np.nan, index=df.index, dtype="float64")
    return pd.to_numeric(c, errors="coerce").astype("float64")


def jobs_frame(table: pa.Table, dq: DataQuality, source: str = "<sacct>",
               cluster: str = "", tz: str = "UTC") -> pd.DataFrame:
    """Typed frame (see the module docstring) from the reader's string table.

    Rows whose JobID does not parse are dropped and recorded in ``dq`` (``bad JobID``); so are
    repeated keys (same cluster, JobIDRaw, Submit and Start: a step row printed without its
    suffix, or the same row from two captures), keeping the first.
    """
    raw = table.to_pandas(types_mapper=lambda t: pd.StringDtype("pyarrow") if t == pa.string() else None)
    out = pd.DataFrame(index=raw.index)
    ids = P.parse_job_ids(_str(raw, "JobID"))
    bad = ~ids["valid"]
    if bad.any():
        for jid in _str(raw, "JobID")[bad].head(20):
            dq.skip("bad JobID", 0, source, None, f"JobID {jid!r}")
        dq.skip("bad JobID", int(bad.sum()))
        raw, ids = raw[~bad], ids[~bad]
        out = out[~bad]
    out["cluster"] = _str(raw, "Cluster").replace("", cluster) if cluster else _str(raw, "Cluster")
    out["job_id"] = _str(raw, "JobID")
    out["alloc_id"] = ids["alloc_id"]
    rawid = _str(raw, "JobIDRaw")
    raw_alloc = rawid.str.replace(r"\..*$", "", regex=True)
    out["key_id"] = raw_alloc.where(raw_alloc != "", ids["alloc_id"])
    out["step"] = ids["step"]
    out["is_step"] = ids["step"] != ""
    out["array_task"] = ids["array_task"]
    out["pending_tasks"] = P.pending_task_count(ids["array_task"])
    out["het"] = ids["het"]
    state, by = P.parse_states(_str(raw, "State"))
    out["state"], out["cancelled_by"] = state, by
    for name, field in (("user", "User"), ("account", "Account"), ("partition", "Partition"),
                        ("qos", "QOS"), ("nodelist", "NodeList"), ("job_name", "JobName"),
                        ("exit_code", "ExitCode")):
        out[name] = _str(raw, field)
    for name, field in (("submit", "Submit"), ("eligible", "Eligible"), ("start", "Start"),
                        ("end", "End")):
        out[name] = P.parse_times(_str(raw, field), tz) if field in raw.columns else \
            pd.Series(pd.NaT, index=raw.index, dtype="datetime64[ns, UTC]")
    el = _num(raw, "ElapsedRaw")
    if "Elapsed" in raw.columns:
        el = el.fillna(P.parse_duration_s(_str(raw, "Elapsed")))
    out["elapsed_s"] = el
    out["suspended_s"] = P.parse_duration_s(_str(raw, "Suspended")).fillna(0.0)
    if "TimelimitRaw" in raw.columns:
        out["timelimit_s"] = P.parse_timelimit_s(_str(raw, "TimelimitRaw"), raw_minutes=True)
    else:
        out["timelimit_s"] = P.parse_timelimit_s(_str(raw, "Timelimit"))
    out["ncpus"] = _num(raw, "NCPUS", "AllocCPUS")
    out["nnodes"] = _num(raw, "NNodes", "AllocNodes")
    tres = _str(raw, "AllocTRES")
    tres_mem, _ = P.parse_mem_mib(P.tres_value(tres, "mem").fillna(""), bare="M")
    req_mem, per = P.parse_mem_mib(_str(raw, "ReqMem"), bare="M")
    req_mem = req_mem.where(per != "cpu", req_mem * out["ncpus"])
    req_mem = req_mem.where(per != "node", req_mem * out["nnodes"].fillna(1.0))
    out["alloc_mem_mib"] = tres_mem.fillna(req_mem)
    gpus, gtype = P.gpus_from_tres(tres)
    out["gpus"], out["gpu_type"] = gpus, gtype
    out["total_cpu_s"] = P.parse_duration_s(_str(raw, "TotalCPU"))
    usage = _str(raw, "TRESUsageInTot")
    used, _ = P.parse_mem_mib(P.tres_value(usage, "mem").fillna(""), bare="B")
    rss, _ = P.parse_mem_mib(_str(raw, "MaxRSS"), bare="B")
    out["mem_used_mib"] = used.fillna(rss)
    util = pd.to_numeric(P.tres_value(_str(raw, "TRESUsageInAve"), "gres/gpuutil"), errors="coerce")
    util = util.fillna(pd.to_numeric(P.tres_value(usage, "gres/gpuutil"), errors="coerce"))
    out["gpu_util_pct"] = util.astype("float64")
    out["energy_j"] = _num(raw, "ConsumedEnergyRaw")

    # repeated keys: keep the first
    key = ["cluster", "key_id", "step", "submit", "start"]
    dup = out.duplicated(key, keep="first")
    if dup.any():
        for jid in out.loc[dup, "job_id"].head(20):
            dq.skip("repeated JobID/Submit/Start (step row without suffix or duplicate)", 0, source,
                    None, f"JobID {jid}")
        dq.skip("repeated JobID/Submit/Start (step row without suffix or duplicate)", int(dup.sum()))
        out = out[~dup]
    return out.reset_index(drop=True)
