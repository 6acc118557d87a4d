"""Typed job-row frame from sacct's string table (one row per sacct row: allocations and steps).

:func:`jobs_frame` turns the reader's string columns into typed pandas columns with units in
their names. Columns (absent sacct fields give the stated default):

=================  =================================================================
cluster            Cluster ("" when not in the input; the caller may set a default)
job_id             JobID as printed (``123_4``, ``900+0``, ``123.batch``)
key_id             JobIDRaw without the step when present, else the JobID without it: the
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
import pyarrow.compute as pc

from slurmkit.accounting import parse as P
from slurmkit.accounting.quality import DataQuality


def jobs_frame(table: pa.Table, dq: DataQuality, source: str = "<sacct>",
               cluster: str = "", tz: str = "UTC") -> pd.DataFrame:
    """Typed frame (see the module docstring) from the reader's string table.

    Rows whose JobID does not parse are dropped and recorded in ``dq`` (``bad JobID``); so are
    repeated keys (same cluster, JobIDRaw, step, Submit and Start: a step row printed without
    its suffix, or the same row twice), keeping the first.
    """
    return drop_repeats(_compact(_typed(table, dq, source, cluster, tz)), dq, source)


#: Columns with few distinct values: stored as pandas categoricals (a code per row).
CATEGORICAL = ("cluster", "state", "cancelled_by", "user", "account", "partition", "qos", "step",
               "gpu_type", "exit_code", "het", "array_task", "nodelist")


def _compact(frame: pd.DataFrame) -> pd.DataFrame:
    for c in CATEGORICAL:
        frame[c] = frame[c].astype("category")
    return frame


def _concat_columns(frames: list) -> pd.DataFrame:
    """Concatenate block frames column by column, freeing each block's column as it goes;
    :data:`CATEGORICAL` columns are merged with ``union_categoricals`` (they stay codes)."""
    from pandas.api.types import union_categoricals

    cols = {}
    for c in list(frames[0].columns):
        parts = [f.pop(c) for f in frames]
        if c in CATEGORICAL:
            col = pd.Series(union_categoricals([p.astype("category") for p in parts]))
        else:
            col = pd.concat(parts, ignore_index=True)
        del parts
        cols[c] = col
    return pd.DataFrame(cols)


def _typed(table: pa.Table, dq: DataQuality, source: str = "<sacct>",
           cluster: str = "", tz: str = "UTC") -> pd.DataFrame:
    """:func:`jobs_frame` without the repeated-key check (one block of a larger input)."""
    names = set(table.column_names)
    n = table.num_rows

    def col(*fields):
        for f in fields:
            if f in names:
                return table.column(f)
        return None

    def text(*fields) -> pd.Series:
        c = col(*fields)
        return P._str_series(c) if c is not None else pd.Series([""] * n, dtype="str")

    def num(*fields) -> pd.Series:
        c = col(*fields)
        if c is None:
            return pd.Series(np.full(n, np.nan))
        (v,) = P._dict_apply(c, lambda x: (P._num_np(pc.utf8_trim_whitespace(x), r"^-?[0-9]+(\.[0-9]+)?$"),))
        return pd.Series(v)

    empty = pa.chunked_array([pa.array([""] * n, pa.string())])
    out = pd.DataFrame(index=pd.RangeIndex(n))
    jid = col("JobID")
    ids = P.parse_job_ids(jid)
    out["cluster"] = text("Cluster")
    if cluster:
        out["cluster"] = out["cluster"].replace("", cluster)
    out["job_id"] = P._str_series(jid)
    rawid = col("JobIDRaw")
    if rawid is not None:
        raw_alloc = P._str_series(P.before_dot(rawid))
        out["key_id"] = raw_alloc.where(raw_alloc != "", ids["alloc_id"])
    else:
        out["key_id"] = ids["alloc_id"]
    out["step"] = ids["step"]
    out["is_step"] = (ids["step"] != "").to_numpy(dtype=bool)
    out["array_task"] = ids["array_task"]
    out["pending_tasks"] = P.pending_task_count(ids["array_task"])
    out["het"] = ids["het"]
    state, by = P.parse_states(col("State") if col("State") is not None else empty)
    out["state"], out["cancelled_by"] = state, by
    for name, field in (("user", "User"), ("account", "Account"), ("partition", "Partition"),
                        ("qos", "QOS"), ("nodelist", "NodeList"), ("job_name", "JobName"),
                        ("exit_code", "ExitCode")):
        out[name] = text(field)
    for name, field in (("submit", "Submit"), ("eligible", "Eligible"), ("start", "Start"),
                        ("end", "End")):
        c = col(field)
        out[name] = P.parse_times(c if c is not None else empty, tz)
    el = num("ElapsedRaw")
    if "Elapsed" in names:
        el = el.fillna(P.parse_duration_s(col("Elapsed")))
    out["elapsed_s"] = el
    out["suspended_s"] = P.parse_duration_s(col("Suspended")).fillna(0.0) if "Suspended" in names else 0.0
    if "TimelimitRaw" in names:
        out["timelimit_s"] = P.parse_timelimit_s(col("TimelimitRaw"), raw_minutes=True)
    else:
        out["timelimit_s"] = P.parse_timelimit_s(col("Timelimit") if "Timelimit" in names else empty)
    out["ncpus"] = num("NCPUS", "AllocCPUS")
    out["nnodes"] = num("NNodes", "AllocNodes")
    tres = col("AllocTRES")
    tres = tres if tres is not None else empty
    tres_mem = P.tres_mem_mib(tres, "mem", bare="M")
    if "ReqMem" in names:
        req_mem, per = P.parse_mem_mib(col("ReqMem"), bare="M")
        req_mem = req_mem.where(per != "cpu", req_mem * out["ncpus"])
        req_mem = req_mem.where(per != "node", req_mem * out["nnodes"].fillna(1.0))
        out["alloc_mem_mib"] = tres_mem.fillna(req_mem)
    else:
        out["alloc_mem_mib"] = tres_mem
    gpus, gtype = P.gpus_from_tres(tres)
    out["gpus"], out["gpu_type"] = gpus, gtype
    out["total_cpu_s"] = P.parse_duration_s(col("TotalCPU")) if "TotalCPU" in names else np.nan
    usage = col("TRESUsageInTot")
    used = P.tres_mem_mib(usage, "mem", bare="B") if usage is not None else pd.Series(np.full(n, np.nan))
    if "MaxRSS" in names:
        rss, _ = P.parse_mem_mib(col("MaxRSS"), bare="B")
        used = used.fillna(rss)
    out["mem_used_mib"] = used
    util = P.tres_number(col("TRESUsageInAve"), "gres/gpuutil") if "TRESUsageInAve" in names else pd.Series(np.full(n, np.nan))
    if usage is not None:
        util = util.fillna(P.tres_number(usage, "gres/gpuutil"))
    out["gpu_util_pct"] = util.astype("float64")
    out["energy_j"] = num("ConsumedEnergyRaw")

    bad = ~ids["valid"].to_numpy(dtype=bool)
    if bad.any():
        for j in out.loc[bad, "job_id"].head(20):
            dq.skip("bad JobID", 0, source, None, f"JobID {j!r}")
        dq.skip("bad JobID", int(bad.sum()))
        out = out[~bad]

    return out.reset_index(drop=True)


def drop_repeats(out: pd.DataFrame, dq: DataQuality, source: str = "<sacct>") -> pd.DataFrame:
    """Drop rows whose key (cluster, JobIDRaw, step, Submit, Start) repeats an earlier row
    (a step row printed without its suffix, or the same row twice), recording them in ``dq``."""
    key = ["cluster", "key_id", "step", "submit", "start"]
    dup = out.duplicated(key, keep="first")
    if dup.any():
        for jid in out.loc[dup, "job_id"].head(20):
            dq.skip("repeated JobID/Submit/Start (step row without suffix or duplicate)", 0, source,
                    None, f"JobID {jid}")
        dq.skip("repeated JobID/Submit/Start (step row without suffix or duplicate)", int(dup.sum()))
        out = out[~dup]
    return out.reset_index(drop=True)


def load_sacct(path, dq: DataQuality | None = None, fields=None, delimiter=None, cluster: str = "",
               tz: str = "UTC") -> tuple[pd.DataFrame, DataQuality]:
    """A captured sacct file -> ``(typed frame, DataQuality)``, read block by block
    (:func:`slurmkit.accounting.read.stream_sacct_file`) so that the raw text is never held
    whole: each block becomes a typed frame at once."""
    from slurmkit.accounting.read import stream_sacct_file

    batches, fdq = stream_sacct_file(path, fields, delimiter)
    scratch = DataQuality()
    pool = pa.default_memory_pool()
    frames = []
    for t in batches:
        frames.append(_compact(_typed(t, scratch, str(path), cluster, tz)))
        del t
        pool.release_unused()  # hand the block's text back to the OS (jemalloc/mimalloc keep it)
    fdq.merge(scratch)
    rows = _concat_columns(frames)
    del frames
    rows = drop_repeats(rows, fdq, str(path))
    pool.release_unused()
    if dq is not None:
        dq.merge(fdq)
        return rows, dq
    return rows, fdq
