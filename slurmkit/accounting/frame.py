"""Typed job rows from sacct's string table: allocation rows and step rows apart.

:func:`jobs_frame` turns the reader's string columns into a :class:`JobRows`: ``allocs``, one
row per allocation row (a job, an array task, a het component, a requeued attempt) with every
column below, and ``steps``, one row per step row (``.batch``, ``.extern``, ``.0``,
``.interactive``) with only what a step contributes, its usage (:data:`STEP_COLUMNS`). Steps
are three rows in four of a large capture, so they are never typed or held as wide rows.

Allocation columns (absent sacct fields give the stated default):

=================  =================================================================
cluster            Cluster ("" when not in the input; the caller may set a default)
job_id             JobID as printed (``123_4``, ``900+0``)
key_id             JobIDRaw when present, else the JobID: the allocation identity (array
                   tasks and het components each their own)
array_task         ``4``, ``[5-9]`` (pending tasks) or ""
pending_tasks      number of tasks in a pending array record (backlog), else 0
het                het component offset or ""
state              State without ``by N``; ``cancelled_by`` the uid/user after ``by``
user, account, partition, qos, nodelist, job_name, exit_code     strings
submit, eligible, start, end   datetime64[ns, UTC] (NaT for Unknown / None)
elapsed_s          ElapsedRaw, else Elapsed, else CPUTimeRAW / NCPUS, else CPUTime / NCPUS
                   (seconds; excludes suspended time)
suspended_s        Suspended (seconds)
timelimit_s        TimelimitRaw x 60 or Timelimit; +inf for UNLIMITED / Partition_Limit
ncpus, nnodes      NCPUS / AllocCPUS, NNodes / AllocNodes (float, NaN when absent: unknown)
req_cpus           ReqTRES ``cpu=``, else ReqCPUS: the CPUs asked for (float, NaN when absent)
alloc_mem_mib      AllocTRES mem=, else ReqMem (``Mc`` x NCPUS, ``Mn`` x NNodes)
gpus, gpu_type     from AllocTRES (:func:`~slurmkit.accounting.parse.gpus_from_tres`), else
                   AllocGRES, else ReqTRES; NaN (unknown) when the input has none of them
gpu_source         which of them (:data:`GPU_SOURCES`: ``ReqTRES (requested)``, ``none``)
physical_gpus      the same GPUs in physical GPUs: a MIG instance weighed by its share of the
                   GPU (:func:`~slurmkit.accounting.parse.physical_gpus_from_tres`;
                   ``gres/gpu:a100_3g.20gb=1`` is 3/7 where ``gpus`` is 1); NaN (unknown) where
                   ``gpus`` is, or where a MIG type's share is not known
req_gpus           GPUs requested, from ReqTRES (a pending job has no AllocTRES yet; the
                   queue-wait bucket of a job); NaN without ReqTRES
total_cpu_s        TotalCPU (seconds of user+system CPU)
mem_used_mib       TRESUsageInTot mem=, else MaxRSS x NTasks (MiB; MaxRSS is the largest
                   task's, so x NTasks as reportseff counts it: reportseff issue 41)
gpu_util_pct       TRESUsageInAve, else TRESUsageInTot / NTasks ``gres/gpuutil`` (percent
                   per task; TRESUsageInTot sums the tasks)
energy_j           ConsumedEnergyRaw (joules; NaN when absent)
energy_tres_j      ``energy=`` of AllocTRES (joules; NaN when absent)
=================  =================================================================

Step columns: ``cluster``, ``job_id`` (``123_4.batch``), ``key_id`` (JobIDRaw without the
step, else the JobID without it: the allocation's ``key_id``), ``step`` (``batch``, ``extern``,
``0``, ``interactive``), ``submit``, ``start``, ``elapsed_s``, ``total_cpu_s``,
``mem_used_mib``, ``gpu_util_pct``, as above, ``gpu_mem_mib`` (``gres/gpumem`` of
TRESUsageInMax, else of TRESUsageInTot: GPU memory used, MiB, Slurm 23.02+ with
AcctGatherGpu / the NVML plugin; NaN when absent), ``gpus`` (the step's AllocTRES GPUs; NaN when
the input has no AllocTRES) and ``energy_j`` (``energy=`` of the step's TRESUsageInTot, joules:
what Slurm's acct_gather_energy plugin measured on the step's nodes during the step; NaN when
absent). A row is a step row when its JobID has a ``.``.
"""

from __future__ import annotations

import os
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from slurmkit.accounting import parse as P
from slurmkit.accounting.quality import MAX_LISTED, DataQuality

#: Columns of a step row (see the module docstring).
STEP_COLUMNS = ("cluster", "job_id", "key_id", "step", "submit", "start", "elapsed_s", "total_cpu_s",
                "mem_used_mib", "gpu_util_pct", "gpu_mem_mib", "gpus", "energy_j")
#: The identity of a row: sacct prints a row once per (cluster, JobIDRaw, Submit, Start); a step
#: adds its name. A second row with the same key is a repeat (or a step printed without suffix).
ALLOC_KEY = ["cluster", "key_id", "submit", "start"]
STEP_KEY = ["cluster", "key_id", "step", "submit", "start"]
#: Columns with few distinct values: stored as pandas categoricals (a code per row).
CATEGORICAL = ("cluster", "state", "cancelled_by", "user", "account", "partition", "qos", "step",
               "gpu_type", "exit_code", "het", "array_task", "nodelist", "gpu_source")
#: sacct fields the file reader may hand over as int64 (nulls for Unknown / None / ""): the
#: typed columns below take either that or text.
INT_FIELDS = ("Submit", "Eligible", "Start", "End", "ElapsedRaw", "NCPUS", "AllocCPUS", "NNodes",
              "AllocNodes", "ConsumedEnergyRaw")
#: The sacct fields a step row is typed from (:func:`_typed_steps`).
_STEP_FIELDS = frozenset(("Cluster", "JobID", "JobIDRaw", "Submit", "Start", "ElapsedRaw", "Elapsed",
                          "TotalCPU", "TRESUsageInTot", "TRESUsageInAve", "TRESUsageInMax", "MaxRSS",
                          "AllocTRES", "NTasks"))
_REPEAT = "repeated JobID/Submit/Start (step row without suffix or duplicate)"
#: Data-quality reasons of local times a DST change makes ambiguous or skips.
DST_FOLD = "local time in a DST fold (read as the first, summer-time occurrence)"
DST_GAP = "local time in a DST gap (read as the first instant after the gap)"


@dataclass(frozen=True)
class JobRows:
    """Typed sacct rows: ``allocs`` (one row per allocation row, every column of the module
    docstring) and ``steps`` (one row per step row, :data:`STEP_COLUMNS`)."""

    allocs: pd.DataFrame
    steps: pd.DataFrame
    _codes: tuple | None = field(default=None, repr=False, compare=False)

    def identity(self) -> tuple[np.ndarray, np.ndarray]:
        """``(alloc codes, step codes)``: :func:`identity_codes` of both frames in one code
        space (computed once)."""
        if self._codes is None:
            object.__setattr__(self, "_codes", tuple(identity_codes(self.allocs, self.steps)))
        return self._codes

    def __len__(self) -> int:
        return len(self.allocs) + len(self.steps)

    @property
    def empty(self) -> bool:
        return len(self) == 0

    @classmethod
    def concat(cls, parts: list[JobRows]) -> JobRows:
        """The rows of ``parts`` one after the other (categoricals stay codes); ``parts`` are
        left as they were."""
        if not parts:
            return jobs_frame(pa.table({"JobID": pa.array([], pa.string())}), DataQuality())
        return cls(_concat_columns([p.allocs for p in parts], consume=False),
                   _concat_columns([p.steps for p in parts], consume=False))

    def drop_repeats(self, dq: DataQuality, source: str = "<sacct>", keep: str = "first",
                     reason: str = _REPEAT, list_rows: bool = True) -> JobRows:
        """Without the rows whose key (:data:`ALLOC_KEY`, :data:`STEP_KEY`) repeats another
        row's (``keep``: ``"first"`` or ``"last"`` stays), the dropped rows counted in ``dq``
        under ``reason`` (``list_rows``: the first 20 listed by JobID)."""
        acode, scode = self.identity()
        allocs, akeep = _drop(self.allocs, acode, ALLOC_KEY, dq, source, keep, reason, list_rows)
        steps, skeep = _drop(self.steps, scode, STEP_KEY, dq, source, keep, reason, list_rows)
        return JobRows(allocs, steps, (acode if akeep is None else acode[akeep],
                                       scode if skeep is None else scode[skeep]))

    def drop_started_later(self, dq: DataQuality, later: np.ndarray | None = None) -> JobRows:
        """Without the allocation rows of a job pending when it was read (no Start, State
        PENDING, not an array's pending-tasks record) whose job (same identity and Submit)
        another row shows started: the pending copy of a job an earlier capture (or pull) saw
        waiting and a later one saw running or ended. ``later``: one sortable value per
        allocation row (the pull time, epoch s; NaN unknown), the started row must be read
        strictly later; None: any started row (the captures are ordered by their time).
        The dropped rows are counted in ``dq`` (:data:`~slurmkit.accounting.quality.
        STARTED_LATER`); the step rows are left as they are."""
        from slurmkit.accounting.quality import STARTED_LATER

        a = self.allocs
        if not len(a):
            return self
        acode, scode = self.identity()
        start = a["start"].notna().to_numpy()
        waiting = (~start & (a["state"].astype(str) == "PENDING").to_numpy()
                   & (pd.to_numeric(a["pending_tasks"], errors="coerce").fillna(0) == 0).to_numpy())
        if not waiting.any() or not start.any():
            return self
        submit = pd.to_datetime(a["submit"], utc=True).dt.tz_localize(None).to_numpy("datetime64[ns]").view(np.int64)
        when = (np.zeros(len(a)) if later is None else np.asarray(later, dtype=float))
        key = pd.DataFrame({"c": acode, "s": submit})
        seen = pd.DataFrame({"c": acode[start], "s": submit[start], "t": when[start]}) \
            .groupby(["c", "s"], sort=False)["t"].max()
        first = key.join(seen, on=["c", "s"])["t"].to_numpy(float)
        drop = waiting & ~np.isnan(first) & ((later is None) | (first > when))
        if not drop.any():
            return self
        dq.skip(STARTED_LATER, int(drop.sum()))
        return JobRows(a[~drop].reset_index(drop=True), self.steps, (acode[~drop], scode))


def identity_codes(*frames: pd.DataFrame) -> list[np.ndarray]:
    """One int64 array per frame: a code per row for its (cluster, key_id), equal across the
    frames exactly when the identity is (dense: 0 .. distinct-1). JobIDRaw is a number in
    sacct's output, so the key is usually cast to an integer (no string hashing); other keys
    (``123_4`` when there is no JobIDRaw) are hashed as text. Cast keys that differ only by
    leading zeros (``012``, ``12``) are one identity: sacct never prints JobIDRaw with them."""
    sizes = [len(f) for f in frames]
    if not sum(sizes):
        return [np.zeros(0, np.int64) for _ in frames]
    keys = pa.chunked_array([c for f in frames for c in _arrow_chunks(f["key_id"])], pa.large_string())
    try:
        kcodes = pc.cast(keys, pa.int64()).to_numpy()
        if kcodes.min() < 0 or kcodes.max() >= 1 << 40:
            raise pa.ArrowInvalid("out of range")
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        kcodes = pc.dictionary_encode(keys).combine_chunks().indices.to_numpy(zero_copy_only=False)
        kcodes = kcodes.astype(np.int64)
    ccodes, names = _shared_codes([f["cluster"] for f in frames])
    combined = kcodes if len(names) <= 1 else (ccodes << 40) + kcodes
    codes = _dense_codes(combined)
    return list(np.split(codes.astype(np.int64), np.cumsum(sizes)[:-1]))


def _dense_codes(keys: np.ndarray) -> np.ndarray:
    """Codes 0 .. distinct-1 of int64 ``keys``, equal exactly where the keys are: by a table
    over the keys' range when it is small (job ids of a capture are near-consecutive), else
    by hashing (``pd.factorize``)."""
    lo, hi = int(keys.min()), int(keys.max())
    if hi - lo <= 4 * len(keys) + 1024:
        seen = np.zeros(hi - lo + 1, bool)
        seen[keys - lo] = True
        return (np.cumsum(seen) - 1)[keys - lo]
    return pd.factorize(keys)[0]


def _shared_codes(cols: list[pd.Series]) -> tuple[np.ndarray, list[str]]:
    """Concatenated int64 codes of string / categorical columns in one code space (categorical
    columns by their categories, without a string per row), and the distinct values seen."""
    names: dict[str, int] = {}
    out = []
    for c in cols:
        cat = c if isinstance(c.dtype, pd.CategoricalDtype) else c.astype("category")
        remap = np.array([names.setdefault(str(v), len(names)) for v in cat.cat.categories] + [-1], np.int64)
        out.append(remap[cat.cat.codes.to_numpy()])
    return np.concatenate(out) if out else np.zeros(0, np.int64), list(names)


def _arrow_chunks(s: pd.Series) -> list:
    arr = pa.array(s.array) if not isinstance(s.dtype, pd.CategoricalDtype) else pa.array(s.astype(str).array)
    arr = arr.cast(pa.large_string()) if arr.type != pa.large_string() else arr
    return arr.chunks if isinstance(arr, pa.ChunkedArray) else [arr]


def _time_ints(s: pd.Series) -> np.ndarray:
    return s.to_numpy(dtype="datetime64[ns]", na_value=np.datetime64("NaT")).view(np.int64)


def _duplicated(cols: list[np.ndarray], keep: str) -> np.ndarray:
    """``DataFrame.duplicated`` over integer columns, by way of one 64-bit mix of each row:
    rows whose mix repeats are the candidates, and only they are compared column by column
    (so a collision of the mix never drops a row). When the leading columns alone tell every
    row apart (:func:`_distinct_prefix`: a job's one allocation row, a job's steps by name),
    no row repeats and nothing is hashed."""
    if _distinct_prefix(cols):
        return np.zeros(len(cols[0]), bool)
    h = np.zeros(len(cols[0]), np.uint64)
    with np.errstate(over="ignore"):
        for c in cols:
            h ^= c.astype(np.int64).view(np.uint64)
            h *= np.uint64(0x9E3779B97F4A7C15)
            h ^= h >> np.uint64(29)
    out = np.zeros(len(h), bool)
    srt = np.sort(h)
    if not (srt[1:] == srt[:-1]).any():   # the usual case: no mix repeats, no row repeats
        return out
    cand = pd.Series(h).duplicated(keep=False).to_numpy()
    if cand.any():
        sub = pd.DataFrame({i: c[cand] for i, c in enumerate(cols)})
        out[np.flatnonzero(cand)] = sub.duplicated(keep=keep).to_numpy()
    return out


def _distinct_prefix(cols: list[np.ndarray]) -> bool:
    """True when the leading integer columns of ``cols``, as many as make a mixed-radix key
    over at most ``4 x rows + 1024`` values (the dense identity codes, a categorical's codes;
    epoch times span too much), hold no two equal rows: then no row of ``cols`` repeats
    another. One ``bincount``, no sort (a sort of the row mixes is most of the repeat check's
    cost on a large capture). False when not told (the prefix repeats, or fits no column)."""
    n = len(cols[0])
    if n < 2:
        return True
    limit = 4 * n + 1024
    key, size = None, 1
    for c in cols:
        c = np.asarray(c).astype(np.int64, copy=False)
        lo, hi = int(c.min()), int(c.max())
        span = hi - lo + 1
        if size * span > limit:
            break
        key = c - lo if key is None else key * span + (c - lo)
        size *= span
    return key is not None and int(np.bincount(key, minlength=size).max()) <= 1


def _drop(frame: pd.DataFrame, code: np.ndarray, key: list[str], dq: DataQuality, source: str,
          keep: str, reason: str, list_rows: bool) -> tuple[pd.DataFrame, np.ndarray | None]:
    """``(frame without repeats, mask of the rows kept or None when all are)``."""
    if len(frame) < 2:
        return frame, None
    cols = {"identity": code}
    for k in key:
        if k in ("cluster", "key_id"):
            continue
        cols[k] = (frame[k].cat.codes.to_numpy() if isinstance(frame[k].dtype, pd.CategoricalDtype)
                   else _time_ints(frame[k]))
    dup = _duplicated(list(cols.values()), keep)
    if dup.any():
        kinds = _repeat_kinds(frame, code, dup, keep) if reason == _REPEAT else {reason: dup}
        for why, rows in kinds.items():
            for jid in frame.loc[rows, "job_id"].head(20 if list_rows else 0):
                dq.skip(why, 0, source, None, f"JobID {jid}")
            dq.skip(why, int(rows.sum()))
        return frame[~dup].reset_index(drop=True), ~dup
    return frame, None


def _repeat_kinds(frame: pd.DataFrame, code: np.ndarray, dup: np.ndarray, keep: str) -> dict[str, np.ndarray]:
    """The repeated rows of one capture (``dup``) by kind: :data:`~slurmkit.accounting.quality.
    IDENTICAL_REPEAT` (every column equal to a kept row: sacct printed the record again, e.g.
    gcm's multiple-multiline capture), :data:`~slurmkit.accounting.quality.LOST_SUFFIX` (an
    allocation key repeated by a row without User while the kept row has one: a step printed
    under its job's JobID, as in the CSCS capture), else :data:`_REPEAT` (a problem)."""
    from slurmkit.accounting.quality import IDENTICAL_REPEAT, LOST_SUFFIX

    group = pd.Series(code).isin(code[dup]).to_numpy()
    sub = frame[group]
    same = np.zeros(len(frame), bool)
    try:
        same[np.flatnonzero(group)] = sub.assign(_code=code[group]).astype(str).duplicated(keep=keep).to_numpy()
    except TypeError:       # an unhashable cell: no row is taken as identical
        pass
    same &= dup
    lost = np.zeros(len(frame), bool)
    if "user" in frame:
        user = frame["user"].astype(str).replace("nan", "").to_numpy()
        kept_user = dict(zip(code[~dup], user[~dup]))
        lost = dup & ~same & (user == "") & np.array([bool(kept_user.get(c, "")) for c in code])
    out = {IDENTICAL_REPEAT: same, LOST_SUFFIX: lost, _REPEAT: dup & ~same & ~lost}
    return {k: v for k, v in out.items() if v.any()}


def jobs_frame(table: pa.Table, dq: DataQuality, source: str = "<sacct>",
               cluster: str = "", tz: str = "UTC") -> JobRows:
    """Typed :class:`JobRows` (see the module docstring) from the reader's string table.

    Rows whose JobID does not parse are dropped and recorded in ``dq`` (``bad JobID``); so are
    repeated keys (:meth:`JobRows.drop_repeats`), keeping the first.
    """
    allocs, steps = _typed(table, dq, source, cluster, tz)
    return _last_attempts(JobRows(allocs, steps), dq, source).drop_repeats(dq, source)


def _last_attempts(rows: JobRows, dq: DataQuality, source: str) -> JobRows:
    """``rows`` without the earlier attempts of requeued jobs that nothing tells apart: rows
    of one allocation key (JobIDRaw) with neither Submit nor Start (``sacct -D`` without those
    fields prints a row per attempt, each with its steps) that are not one record printed twice
    and have a User (a step row that lost its suffix has none). Each such job's last row
    printed is kept (its final attempt, as sacct without ``-D`` prints it), and its last copy of
    each step; the others are skipped as :data:`~slurmkit.accounting.quality.UNTOLD_ATTEMPTS`,
    each job listed as ``JobID <id>: <n> rows (<states>), the last kept``."""
    from slurmkit.accounting.quality import UNTOLD_ATTEMPTS

    a = rows.allocs
    untimed = (a["submit"].isna() & a["start"].isna()).to_numpy() if len(a) > 1 else np.zeros(len(a), bool)
    if not untimed.any():
        return rows
    acode, scode = rows.identity()
    user = a["user"].astype(str).replace("nan", "").to_numpy() != "" if "user" in a else np.ones(len(a), bool)
    cand = untimed & user
    seen = pd.Series(acode[cand])
    multi = set(seen[seen.duplicated(keep=False)].tolist())
    if not multi:
        return rows
    grp = cand & np.isin(acode, list(multi))
    # one record printed twice is not two attempts (drop_repeats counts it once)
    same = a[grp].astype(str).assign(_c=acode[grp]).duplicated(keep="last").to_numpy()
    drop = np.zeros(len(a), bool)
    drop[np.flatnonzero(grp)] = pd.Series(acode[grp]).duplicated(keep="last").to_numpy() & ~same
    if not drop.any():
        return rows
    told = set(acode[drop].tolist())
    listed = 0
    for c in sorted(told, key=lambda c: int(np.flatnonzero(acode == c)[0])):
        rows_c = np.flatnonzero(grp & (acode == c))
        if listed < 20:
            states = ", ".join(str(s) for s in a["state"].to_numpy()[rows_c])
            dq.skip(UNTOLD_ATTEMPTS, 0, source, None,
                    f"JobID {a['job_id'].iat[rows_c[-1]]}: {len(rows_c)} rows ({states}), the last kept")
        listed += 1
    dq.skip(UNTOLD_ATTEMPTS, int(drop.sum()))
    st = rows.steps
    sdrop = np.zeros(len(st), bool)
    if len(st):
        s_untimed = (st["submit"].isna() & st["start"].isna()).to_numpy() & np.isin(scode, list(told))
        if s_untimed.any():
            key = st[s_untimed][["step"]].astype(str).assign(_c=scode[s_untimed])
            sdrop[np.flatnonzero(s_untimed)] = key.duplicated(keep="last").to_numpy()
            dq.skip(UNTOLD_ATTEMPTS, int(sdrop.sum()))
    return JobRows(a[~drop].reset_index(drop=True), st[~sdrop].reset_index(drop=True),
                   (acode[~drop], scode[~sdrop]))


def _concat_columns(frames: list, consume: bool = True) -> pd.DataFrame:
    """Concatenate frames with the same columns column by column (``consume``: emptying
    ``frames`` so that each block's memory is freed once its columns are copied);
    :data:`CATEGORICAL` columns are merged with ``union_categoricals`` (they stay codes)."""
    from pandas.api.types import union_categoricals

    if len(frames) == 1 and not consume:
        return frames[0]
    # columns as Series (views into each frame's blocks: no copy, unlike DataFrame.pop)
    names = list(dict.fromkeys(c for f in frames for c in f.columns))
    # a column some parts lack (a store written before it existed) is NaN there
    split = [{c: f[c] if c in f.columns else pd.Series(np.full(len(f), np.nan)) for c in names}
             for f in frames]
    if consume:
        frames.clear()
    cols = {}
    for c in names:
        parts = [d.pop(c) for d in split]
        if c in CATEGORICAL:
            cats = [p.astype("category") for p in parts]
            try:
                col = pd.Series(union_categoricals(cats))
            except TypeError:  # categories of different dtypes (an empty day's part): as text
                col = pd.concat([p.astype(str) for p in parts], ignore_index=True).astype("category")
        else:
            col = pd.concat(parts, ignore_index=True)
        del parts
        cols[c] = col
    # column by column: a frame built from the dict would stack the float columns into one
    # 2-D block (a copy of all of them)
    out = pd.DataFrame(index=pd.RangeIndex(len(next(iter(cols.values()))) if cols else 0))
    for c, col in cols.items():
        out[c] = col  # a Series: kept by reference (copy on write), not copied
    return out


def _typed(table: pa.Table, dq: DataQuality, source: str = "<sacct>", cluster: str = "",
           tz: str = "UTC") -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(allocs, steps)`` frames of one table (one block of a larger input), without the
    repeated-key check. Step rows (a ``.`` in JobID) are split off first and typed apart."""
    jid = table.column("JobID") if "JobID" in table.column_names else None
    if jid is None:
        raise ValueError("sacct table without a JobID column")
    is_step = pc.fill_null(pc.match_substring(jid, "."), False)
    nsteps = pc.sum(is_step).as_py() or 0
    # a step row is typed from a few fields: the others are not copied for it
    step_fields = table.select([n for n in table.column_names if n in _STEP_FIELDS])
    if nsteps == 0:
        steps_t, allocs_t = step_fields.slice(0, 0), table
    elif nsteps == table.num_rows:
        steps_t, allocs_t = step_fields, table.slice(0, 0)
    else:
        steps_t, allocs_t = step_fields.filter(is_step), table.filter(pc.invert(is_step))
    return (_typed_allocs(allocs_t, dq, source, cluster, tz),
            _typed_steps(steps_t, dq, source, cluster, tz))


class _Cols:
    """Typed access to a string table's columns by sacct field name (first one present)."""

    def __init__(self, table: pa.Table):
        self.table, self.names, self.n = table, set(table.column_names), table.num_rows
        self.dst = {"fold": 0, "gap": 0}   # local times in a DST fold / gap (:meth:`times`)
        self.flags: list = []               # (row positions, reason) of repaired values
        self._usage: dict | None = None     # :meth:`usage_tot`

    @property
    def empty(self) -> pa.ChunkedArray:
        """A column of "" (for a field the input lacks)."""
        return pa.chunked_array([pc.cast(pa.repeat("", self.n), pa.string())])

    def col(self, *fields):
        for f in fields:
            if f in self.names:
                return self.table.column(f)
        return None

    def text(self, *fields) -> pd.Series:
        c = self.col(*fields)
        return P.str_series(c) if c is not None else P.str_series(self.empty)

    def num(self, *fields) -> pd.Series:
        c = self.col(*fields)
        if c is None:
            return pd.Series(np.full(self.n, np.nan))
        if pa.types.is_integer(c.type):
            return pd.Series(P.int_column_np(c))
        (v,) = P.dict_apply(c, lambda x: (P.num_np(pc.utf8_trim_whitespace(x), r"^-?[0-9]+(\.[0-9]+)?$"),))
        return pd.Series(v)

    def count(self, *fields) -> pd.Series:
        """:meth:`num` of a count or duration sacct never prints negative (NCPUS, NNodes,
        ElapsedRaw, ConsumedEnergyRaw): a negative value or text that is not a number (nor
        empty / Unknown) is NaN, and the row is flagged (:meth:`note_flags`)."""
        v = self.num(*fields)
        arr = v.to_numpy()
        name = next((f for f in fields if f in self.names), None)
        if name is None:
            return v
        neg = arr < 0
        if neg.any():
            self.flag(np.flatnonzero(neg), f"{name} negative (read as unknown)")
            v = v.where(~neg)
        c = self.col(name)
        if not pa.types.is_integer(c.type):
            nan = np.isnan(arr)
            if nan.any():
                t = pc.utf8_trim_whitespace(c)
                given = pc.invert(pc.fill_null(pc.is_in(t, pa.array(P.NO_TIME)), True)).to_numpy(zero_copy_only=False)
                bad = nan & given
                if bad.any():
                    self.flag(np.flatnonzero(bad), f"{name} not a number (read as unknown)")
        return v

    def gpus_negative(self, tres, neg: np.ndarray | None = None) -> None:
        """Flag the rows whose AllocTRES has a negative GPU count (read as unknown); ``neg``:
        :func:`~slurmkit.accounting.parse.negative_gpus` of ``tres`` when already known."""
        if tres is None:
            return
        neg = P.negative_gpus(tres) if neg is None else neg
        if neg.any():
            self.flag(np.flatnonzero(neg), "AllocTRES GPU count negative (read as unknown)")

    def times(self, field: str, tz: str) -> pd.Series:
        c = self.col(field)
        counts = {"fold": 0, "gap": 0}
        out = P.parse_times(c if c is not None else self.empty, tz, counts)
        self.dst["fold"] += counts["fold"]
        self.dst["gap"] += counts["gap"]
        for pos in counts.get("bad", ()):
            self.flag(pos, f"{field} is not a time (read as Unknown)")
        return out

    def flag(self, pos: np.ndarray, reason: str) -> None:
        """Note rows (positions in this block) whose value was repaired for ``reason``."""
        self.flags.append((np.asarray(pos), reason))

    def note_dst(self, dq: DataQuality, source: str, tz: str) -> None:
        """Record the local times read in a DST fold or gap (counted as repaired)."""
        if self.dst["fold"]:
            dq.repair(f"{DST_FOLD} ({tz})", source, None, f"{self.dst['fold']} time(s)", n=self.dst["fold"])
        if self.dst["gap"]:
            dq.repair(f"{DST_GAP} ({tz})", source, None, f"{self.dst['gap']} time(s)", n=self.dst["gap"])

    def note_flags(self, dq: DataQuality, source: str) -> None:
        """Record each flagged row as repaired, listed by JobID (the report finds its line)."""
        if not self.flags:
            return
        jid = self.col("JobID")
        for pos, reason in self.flags:
            ids = pc.take(jid, pa.array(pos[:MAX_LISTED])).to_pylist() if jid is not None else []
            for j in ids:
                dq.repair(reason, source, None, f"JobID {j}", n=0)
            dq.repaired[reason] += len(pos)

    def elapsed_s(self, ncpus: pd.Series | None = None) -> pd.Series:
        """Seconds the row ran: ElapsedRaw, else Elapsed, else (with ``ncpus``, an allocation
        row's NCPUS) CPUTimeRAW / NCPUS, else CPUTime / NCPUS (sacct's CPUTime is Elapsed x
        NCPUS): a capture without ElapsedRaw keeps the run time of a job whose local End reads
        before its Start (the autumn DST fold). NaN when none is known."""
        el = self.count("ElapsedRaw")
        if "Elapsed" in self.names:
            el = el.fillna(P.parse_duration_s(self.col("Elapsed")))
        if ncpus is not None and el.isna().any():
            cpu_s = self.count("CPUTimeRAW") if "CPUTimeRAW" in self.names else pd.Series(np.full(self.n, np.nan))
            if "CPUTime" in self.names:
                cpu_s = cpu_s.fillna(P.parse_duration_s(self.col("CPUTime")))
            el = el.fillna(cpu_s / ncpus.where(ncpus > 0))
        return el

    def total_cpu_s(self):
        return P.parse_duration_s(self.col("TotalCPU")) if "TotalCPU" in self.names else np.nan

    def usage_tot(self) -> dict[str, pd.Series]:
        """The TRESUsageInTot values of :data:`_USAGE_KEYS`, from one split of the column
        (:func:`~slurmkit.accounting.parse.tres_values`), computed once per block and shared by
        :meth:`usage`, :meth:`gpu_mem_mib` and the step energy; NaN Series without the field."""
        if self._usage is None:
            usage = self.col("TRESUsageInTot")
            self._usage = ({k: pd.Series(np.full(self.n, np.nan)) for k in _USAGE_KEYS} if usage is None
                           else P.tres_values(usage, _USAGE_KEYS))
        return self._usage

    def usage(self) -> tuple[pd.Series, pd.Series]:
        """``(mem_used_mib, gpu_util_pct)`` from TRESUsageInTot / MaxRSS / TRESUsageInAve."""
        tot = self.usage_tot()
        nan = pd.Series(np.full(self.n, np.nan))
        used, tot_util = tot["mem"], tot["gres/gpuutil"]
        if "MaxRSS" in self.names:
            rss, _ = P.parse_mem_mib(self.col("MaxRSS"), bare="B")
            if "NTasks" in self.names:   # MaxRSS is one task's: the step's tasks together
                tasks = self.num("NTasks")
                rss = rss * tasks.where(tasks > 0, 1.0).fillna(1.0)
            used = used.fillna(rss)
        util = P.tres_number(self.col("TRESUsageInAve"), "gres/gpuutil") if "TRESUsageInAve" in self.names else nan
        if "NTasks" in self.names:
            # TRESUsageInTot sums over the step's tasks: per task, as TRESUsageInAve gives it
            tasks = self.num("NTasks")
            tot_util = tot_util / tasks.where(tasks > 0, 1.0).fillna(1.0)
        return used, util.fillna(tot_util).astype("float64")

    def gpu_mem_mib(self) -> pd.Series:
        """GPU memory used (MiB): ``gres/gpumem`` of TRESUsageInMax, else of TRESUsageInTot
        (a bare number is bytes, as ``--noconvert`` prints it); NaN when absent."""
        out = pd.Series(np.full(self.n, np.nan))
        if "TRESUsageInMax" in self.names:
            out = out.fillna(P.tres_mem_mib(self.col("TRESUsageInMax"), "gres/gpumem", bare="B"))
        if "TRESUsageInTot" in self.names:
            out = out.fillna(self.usage_tot()["gres/gpumem"])
        return out

    def cluster(self, default: str) -> pd.Series:
        out = self.text("Cluster")
        return out.replace("", default) if default else out

    def identity(self, ids: pd.DataFrame, cluster: str) -> dict:
        """The first columns of a typed frame, allocation or step: ``cluster``, ``job_id``
        (JobID as printed) and ``key_id``, from ``ids`` (the JobID parser's frame)."""
        return {"cluster": self.cluster(cluster), "job_id": P.str_series(self.col("JobID")),
                "key_id": self.key_id(ids["alloc_id"])}

    def key_id(self, alloc_id: pd.Series) -> pd.Series:
        """JobIDRaw without a step, else ``alloc_id`` (where JobIDRaw is absent or empty)."""
        rawid = self.col("JobIDRaw")
        if rawid is None:
            return alloc_id
        jid = self.col("JobID")
        if self.n and jid is not None and pc.all(pc.equal(rawid, jid)).as_py():
            return alloc_id   # no array task or het job in this block: JobIDRaw is the JobID
        raw_alloc = P.str_series(P.before_dot(rawid))
        return raw_alloc.where(raw_alloc != "", alloc_id)


def _frame(cols: dict, valid: np.ndarray, dq: DataQuality, source: str) -> pd.DataFrame:
    """The typed frame of a block's columns (name -> Series or scalar, in column order): rows
    whose JobID did not parse (not ``valid``) dropped and recorded in ``dq`` (``bad JobID``),
    :data:`CATEGORICAL` columns as categoricals. Built in one go (inserting column by column
    costs more than the typing of a small block)."""
    bad = ~valid
    if bad.any():
        for j in cols["job_id"][bad].head(MAX_LISTED):
            dq.skip("bad JobID", 0, source, None, f"JobID {j!r}")
        dq.skip("bad JobID", int(bad.sum()))
        cols = {k: v[valid].reset_index(drop=True) if isinstance(v, pd.Series) else v
                for k, v in cols.items()}
    for c in CATEGORICAL:
        if c not in cols:
            continue
        if not isinstance(cols[c].dtype, pd.CategoricalDtype):
            cols[c] = cols[c].astype("category")
        elif bad.any():   # (a step name seen only on a dropped row is not a category)
            cols[c] = cols[c].cat.remove_unused_categories()
    return pd.DataFrame(cols, index=pd.RangeIndex(int(valid.sum())), copy=False)


def _typed_steps(table: pa.Table, dq: DataQuality, source: str, cluster: str, tz: str) -> pd.DataFrame:
    """The :data:`STEP_COLUMNS` frame of step rows (every JobID has a ``.``)."""
    c = _Cols(table)
    ids = P.parse_step_ids(c.col("JobID"))
    out = c.identity(ids, cluster)
    out["step"] = ids["step"]
    out["submit"] = c.times("Submit", tz)
    out["start"] = c.times("Start", tz)
    out["elapsed_s"] = c.elapsed_s()
    out["total_cpu_s"] = c.total_cpu_s()
    out["mem_used_mib"], out["gpu_util_pct"] = c.usage()
    out["gpu_mem_mib"] = c.gpu_mem_mib()
    tres = c.col("AllocTRES")
    if tres is not None:
        gt = _tres_gpus(tres)
        out["gpus"] = gt["gpus"]
        c.gpus_negative(tres, gt["negative"])
    else:
        out["gpus"] = pd.Series(np.full(c.n, np.nan))
    out["energy_j"] = c.usage_tot()["energy"]
    c.note_dst(dq, source, tz)
    c.note_flags(dq, source)
    return _frame(out, ids["valid"].to_numpy(dtype=bool), dq, source)


def _typed_allocs(table: pa.Table, dq: DataQuality, source: str, cluster: str, tz: str) -> pd.DataFrame:
    """The allocation frame (module docstring) of allocation rows (no JobID has a ``.``)."""
    c = _Cols(table)
    names = c.names
    ids = P.parse_job_ids(c.col("JobID"))
    out = c.identity(ids, cluster)
    out["array_task"] = ids["array_task"]
    out["pending_tasks"] = P.pending_task_count(ids["array_task"])
    out["het"] = ids["het"]
    state, by = P.parse_states(c.col("State") if c.col("State") is not None else c.empty)
    out["state"], out["cancelled_by"] = state, by
    for name, column in (("user", "User"), ("account", "Account"), ("partition", "Partition"),
                         ("qos", "QOS"), ("nodelist", "NodeList"), ("job_name", "JobName"),
                         ("exit_code", "ExitCode")):
        out[name] = c.text(column)
        if name in ABSENT_LABELLED and column not in names:
            # the capture has no such field: its jobs group as unknown, not as an empty name
            out[name] = pd.Series(pd.Categorical.from_codes(np.zeros(c.n, np.int8), [absent_label(column)]))
    for name, column in (("submit", "Submit"), ("eligible", "Eligible"), ("start", "Start"),
                         ("end", "End")):
        out[name] = c.times(column, tz)
    ncpus = c.count("NCPUS", "AllocCPUS")
    out["elapsed_s"] = c.elapsed_s(ncpus)
    out["suspended_s"] = P.parse_duration_s(c.col("Suspended")).fillna(0.0) if "Suspended" in names else 0.0
    if "TimelimitRaw" in names:
        out["timelimit_s"] = P.parse_timelimit_s(c.col("TimelimitRaw"), raw_minutes=True)
    else:
        out["timelimit_s"] = P.parse_timelimit_s(c.col("Timelimit") if "Timelimit" in names else c.empty)
    out["ncpus"] = ncpus
    # the CPUs the job asked for (ReqTRES cpu=, else ReqCPUS): sreport's Planned counts an
    # eligible pending job's requested CPUs, which a GPU job's allocation may exceed
    req_tres = c.col("ReqTRES")
    # each TRES column's distinct values parsed once for all that is read from it
    req = _tres_gpus(req_tres, {"cpu": None}) if req_tres is not None else None
    req_cpus = req["cpu"] if req is not None else pd.Series(np.full(c.n, np.nan))
    if "ReqCPUS" in names:
        req_cpus = req_cpus.fillna(c.count("ReqCPUS"))
    out["req_cpus"] = req_cpus
    out["nnodes"] = c.count("NNodes", "AllocNodes")
    tres = c.col("AllocTRES")
    tres = tres if tres is not None else c.empty
    alloc = _tres_gpus(tres, {"mem": "M", "energy": None})
    tres_mem = alloc["mem"]
    if "ReqMem" in names:
        req_mem, per = P.parse_mem_mib(c.col("ReqMem"), bare="M")
        req_mem = req_mem.where(per != "cpu", req_mem * out["ncpus"])
        req_mem = req_mem.where(per != "node", req_mem * out["nnodes"].fillna(1.0))
        out["alloc_mem_mib"] = tres_mem.fillna(req_mem)
    else:
        out["alloc_mem_mib"] = tres_mem
    out["gpus"], out["gpu_type"], out["gpu_source"], out["physical_gpus"] = _gpu_counts(
        c, {"AllocTRES": alloc, "ReqTRES": req})
    c.gpus_negative(tres, alloc["negative"])
    out["req_gpus"] = _requested_gpus(c.col("ReqTRES"), out["start"], req)
    out["total_cpu_s"] = c.total_cpu_s()
    out["mem_used_mib"], out["gpu_util_pct"] = c.usage()
    out["energy_j"] = c.count("ConsumedEnergyRaw")
    # Slurm's energy as a TRES (``energy=J`` in AllocTRES): a capture without ConsumedEnergyRaw
    out["energy_tres_j"] = alloc["energy"] if c.col("AllocTRES") is not None \
        else pd.Series(np.full(c.n, np.nan))
    # an End before the Start: sacct's clock went back, a local End in the autumn DST fold, or
    # the row was edited; the job ran elapsed_s (ElapsedRaw, Elapsed or CPUTime / NCPUS) from
    # its Start (0 s when none of them is known)
    back = (out["end"] < out["start"]).to_numpy()
    if back.any():
        c.flag(np.flatnonzero(back), "End before Start (End = Start + ElapsedRaw, Elapsed or CPUTime / NCPUS)")
        fixed = out["start"] + pd.to_timedelta(out["elapsed_s"].clip(lower=0).fillna(0.0), unit="s")
        out["end"] = out["end"].where(~back, fixed)
    c.note_dst(dq, source, tz)
    c.note_flags(dq, source)
    return _frame(out, ids["valid"].to_numpy(dtype=bool), dq, source)


#: The TRESUsageInTot keys a row is typed from (:meth:`_Cols.usage_tot`): ``None`` a number,
#: else the unit of a bare number (``--noconvert`` prints bytes).
_USAGE_KEYS = {"mem": "B", "gres/gpuutil": None, "gres/gpumem": "B", "energy": None}

#: The grouping columns whose absence from a capture is labelled (:func:`absent_label`).
ABSENT_LABELLED = ("account", "partition", "qos")


def absent_label(field: str) -> str:
    """The group name of the jobs of a capture without ``field`` (a sacct field name, e.g.
    ``Account``): ``"unknown (no Account field)"``; an empty value of a field the capture has
    stays "" (shown as "(none)")."""
    return f"unknown (no {field} field)"


#: Where a row's GPU count came from (``gpu_source``), in the order they are tried.
GPU_SOURCES = ("AllocTRES", "AllocGRES", "ReqTRES (requested)", "none")


def _gpu_counts(c, parsed: dict | None = None) -> tuple[pd.Series, pd.Series, pd.Series, pd.Series]:
    """``(gpus, gpu_type, gpu_source, physical_gpus)`` of allocation rows: AllocTRES when the
    input has it, else AllocGRES (``gpu:2``, ``gpu:tesla:2(IDX:0-1)``: Slurm before TRES, or a
    site's ``-o``), else ReqTRES (what the job asked for: ``ReqTRES (requested)``); with none of
    them the count is unknown (NaN, source ``none``), never 0. ``parsed``: field -> its
    :func:`_tres_gpus` when already known (or None)."""
    parsed = parsed or {}
    for name, src in (("AllocTRES", GPU_SOURCES[0]), ("AllocGRES", GPU_SOURCES[1]),
                      ("ReqTRES", GPU_SOURCES[2])):
        col = c.col(name)
        if col is None:
            continue
        if parsed.get(name) is not None:
            gpus, gtype, phys = parsed[name]["gpus"], parsed[name]["gpu_type"], parsed[name]["physical_gpus"]
        else:
            col = P.gres_as_tres(col) if name == "AllocGRES" else col
            gpus, gtype = P.gpus_from_tres(col)
            phys = P.physical_gpus_from_tres(col)
        return gpus, gtype, pd.Series(pd.Categorical.from_codes(np.full(c.n, GPU_SOURCES.index(src), np.int8),
                                                                GPU_SOURCES)), phys
    return (pd.Series(np.full(c.n, np.nan)), pd.Series([""] * c.n, dtype=object),
            pd.Series(pd.Categorical.from_codes(np.full(c.n, 3, np.int8), GPU_SOURCES)),
            pd.Series(np.full(c.n, np.nan)))


def _requested_gpus(req_tres, start: pd.Series, parsed: dict | None = None) -> pd.Series:
    """ReqTRES GPUs (:func:`~slurmkit.accounting.parse.gpus_from_tres`) of every row (the
    pending backlog's request; the GPU bucket a job's queue wait goes in), NaN when the input
    has no ReqTRES; ``parsed``: :func:`_tres_gpus` of ``req_tres`` when already known."""
    if req_tres is None:
        return pd.Series(np.full(len(start), np.nan), index=start.index)
    gpus = parsed["gpus"] if parsed is not None else P.gpus_from_tres(req_tres)[0]
    return pd.Series(gpus.to_numpy(float), index=start.index)


def _tres_gpus(tres, keys: dict | None = None) -> dict:
    """A TRES column (AllocTRES, ReqTRES) parsed once over its distinct values
    (:func:`~slurmkit.accounting.parse.dict_apply`) for all that is read from it:
    ``gpus`` and ``gpu_type`` (:func:`~slurmkit.accounting.parse.gpus_from_tres`),
    ``physical_gpus`` (:func:`~slurmkit.accounting.parse.physical_gpus_from_tres`), ``negative`` (bool numpy, :func:`~slurmkit.accounting.parse.negative_gpus`) and the
    values of ``keys`` (:func:`~slurmkit.accounting.parse.tres_values`: ``None`` for a
    number, a unit for memory in MiB), float Series each; the same values as the parsers
    called one by one on the whole column."""
    keys = dict(keys or {})
    a = pc.fill_null(P._arrow(tres), "")

    def one(x):
        gpus, gtype = P.gpus_from_tres(x)
        vals = P.tres_values(x, keys)
        return (gpus.to_numpy(float), gtype.array.__arrow_array__(),
                P.negative_gpus(x).astype(np.float64), P.physical_gpus_from_tres(x).to_numpy(float),
                *(vals[k].to_numpy(float) for k in keys))

    gpus, gtype, neg, phys, *vals = P.dict_apply(a, one)
    out = {"gpus": pd.Series(gpus), "gpu_type": P.str_series(gtype), "negative": neg > 0,
           "physical_gpus": pd.Series(phys)}
    out.update((k, pd.Series(v)) for k, v in zip(keys, vals))
    return out


def load_sacct(path, dq: DataQuality | None = None, fields=None, delimiter=None, cluster: str = "",
               tz: str = "UTC") -> tuple[JobRows, DataQuality]:
    """A captured sacct file -> ``(JobRows, DataQuality)``, read block by block
    (:func:`slurmkit.accounting.read.stream_sacct_file`) so that the raw text is never held
    whole: each block is typed at once. Gives what :func:`jobs_frame` gives on the whole
    file. ``dq``: merged into and returned when given. Raises
    :class:`~slurmkit.accounting.read.AccountingInputError` (file, line) for input that cannot
    be read at all."""
    from slurmkit.accounting.read import stream_sacct_file

    batches, fdq = stream_sacct_file(path, fields, delimiter, int_fields=INT_FIELDS)
    return _load(batches, fdq, dq, str(path), fields, cluster, tz)


def load_sacct_bytes(data: bytes, source: str = "<sacct>", fields=None, delimiter=None,
                     cluster: str = "", tz: str = "UTC") -> tuple[JobRows, DataQuality]:
    """:func:`load_sacct` over sacct output in memory (the live ingest's bytes), named
    ``source`` in the data-quality list and in messages: the same reader
    (:func:`slurmkit.accounting.read.stream_sacct_bytes`, one block) and the same typing."""
    from slurmkit.accounting.read import stream_sacct_bytes

    batches, fdq = stream_sacct_bytes(data, source, fields, delimiter, int_fields=INT_FIELDS)
    return _load(batches, fdq, None, source, fields, cluster, tz)


def _load(batches, fdq: DataQuality, dq: DataQuality | None, source: str, fields, cluster: str,
          tz: str) -> tuple[JobRows, DataQuality]:
    """Type the reader's tables (``batches``, whose counts ``fdq`` holds once they are read)
    into :class:`JobRows`, as :func:`jobs_frame` does on their concatenation."""
    scratch = DataQuality()
    pool = pa.default_memory_pool()
    allocs, steps = [], []
    # blocks are typed in worker threads while the next one is read (the pyarrow kernels run
    # without the GIL); at most ``workers`` blocks wait, and results are taken in file order
    workers = max(1, min(4, os.cpu_count() or 1))
    waiting: deque = deque()

    def collect():
        fut, bdq = waiting.popleft()
        a, s = fut.result()
        allocs.append(a)
        steps.append(s)
        scratch.merge(bdq)

    with ThreadPoolExecutor(workers, thread_name_prefix="sacct-block") as ex:
        for t in batches:
            bdq = DataQuality()
            waiting.append((ex.submit(_typed, t, bdq, source, cluster, tz), bdq))
            del t
            while len(waiting) > workers:
                collect()
        while waiting:
            collect()
        rows = None
        if allocs:
            # the two concatenations copy memory with the GIL released: side by side
            done = ex.submit(_concat_columns, steps)
            rows = JobRows(_concat_columns(allocs), done.result())
    fdq.merge(scratch)
    if rows is None:
        rows = jobs_frame(pa.table({n: pa.array([], pa.string()) for n in (fields or ["JobID"])}), fdq)
    allocs.clear()   # the blocks' frames go now (collect() still holds the lists)
    steps.clear()
    rows = _last_attempts(rows, fdq, source).drop_repeats(fdq, source)
    # the blocks' text goes back to the OS once, here: freeing it block by block made every
    # next block fault its pages in again (slower, and no lower peak)
    pool.release_unused()
    if dq is not None:
        dq.merge(fdq)
        return rows, dq
    return rows, fdq
