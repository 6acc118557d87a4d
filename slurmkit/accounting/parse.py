"""Pure, vectorised parsers for sacct's text values (string columns in, typed Series out).

Every function takes the raw column as sacct printed it (a pandas Series of str or a pyarrow
string array) and returns plain numbers with units in the name: seconds, MiB, GPUs, as a pandas
Series (index kept when a Series came in). Values that do not parse become NaN / NaT / "" and
callers decide (and record in the data-quality section) what that means.

The formats themselves are read in one place, :mod:`slurmkit.slurm` (``slurm.tres``,
``slurm.duration``, ``slurm.memory``, ``slurm.gres``); here they are applied to columns. Where
a column repeats its values (TRES strings, durations, time limits, GRES) the scalar reader
runs once per distinct value (:func:`map_distinct`); the columns of mostly distinct values
(usage memory and TRES usage strings) keep a pyarrow kernel (split on commas, cast, the unit
table of ``slurm.memory``), held equal to the scalar readers on every real capture of the corpus
by tests/accounting/test_accounting_parsers_corpus.py.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from slurmkit import hostlist
from slurmkit.errors import InputError
from slurmkit.slurm import duration, gres, memory, tres

#: Markers sacct prints for a time that is not set.
NO_TIME = ("Unknown", "None", "", "N/A", "INVALID")
_NULL = pa.scalar(None, pa.string())


def _arrow(s) -> pa.ChunkedArray:
    if isinstance(s, pa.ChunkedArray):
        return s if s.type == pa.string() else s.cast(pa.string())
    if isinstance(s, pa.Array):
        return pa.chunked_array([s.cast(pa.string()) if s.type != pa.string() else s])
    arr = pa.array(s, type=pa.string(), from_pandas=True)
    return pa.chunked_array([arr]) if isinstance(arr, pa.Array) else arr


def _index(s):
    return s.index if isinstance(s, pd.Series) else None


def _all_digits(a) -> bool:
    """True when every non-null value is a non-empty run of ASCII digits (no regex)."""
    return bool(pc.all(pc.ascii_is_decimal(a)).as_py())


def num_np(a: pa.ChunkedArray, pattern=r"^[0-9]+(\.[0-9]+)?$") -> np.ndarray:
    """Strings -> float64 numpy (NaN where not a plain number). All digits (counts, epoch
    seconds, usage figures): a cast, no regular expression."""
    if _all_digits(a):
        return pc.cast(a, pa.float64()).to_numpy(zero_copy_only=False).astype("float64", copy=False)
    ok = pc.match_substring_regex(a, pattern)
    vals = pc.cast(pc.if_else(ok, a, _NULL), pa.float64())
    return vals.to_numpy(zero_copy_only=False).astype("float64", copy=False)


#: Values :func:`dict_apply` looks at (at each end of a column) before hashing all of it.
_SAMPLE = 8192


def dict_apply(a: pa.ChunkedArray, fn, max_share: float = 0.5):
    """Apply ``fn`` (Arrow string array -> tuple of numpy float arrays / Arrow arrays) to the
    distinct values of ``a`` only and expand the results back by index: sacct columns repeat
    their values (states, TRES strings, durations), so this parses each value once. Falls back
    to ``fn(a)`` when more than ``max_share`` of the values are distinct."""
    arr = a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a
    if len(arr) > 4 * _SAMPLE:
        # mostly distinct values (step usage strings): skip the hash table over the whole column
        head = pc.dictionary_encode(arr.slice(0, _SAMPLE)).dictionary
        tail = pc.dictionary_encode(arr.slice(len(arr) - _SAMPLE)).dictionary
        if max(len(head), len(tail)) > max_share * _SAMPLE:
            return fn(pa.chunked_array([arr]))
    enc = pc.dictionary_encode(arr)
    uniq = enc.dictionary
    if len(uniq) > max_share * max(len(arr), 1):
        return fn(pa.chunked_array([arr]))
    idx = enc.indices.to_numpy(zero_copy_only=False)
    nulls = pd.isna(idx)
    idx = np.where(nulls, 0, idx).astype(np.int64)
    out = []
    for r in fn(pa.chunked_array([uniq]) if len(uniq) else pa.chunked_array([pa.array([""])])):
        if isinstance(r, np.ndarray):
            v = r[idx] if len(uniq) else np.full(len(idx), np.nan)
            if nulls.any():
                v = np.where(nulls, np.nan, v)
            out.append(v)
        else:
            r = r.combine_chunks() if isinstance(r, pa.ChunkedArray) else r
            v = pc.take(r, pa.array(idx)) if len(uniq) else pa.array([""] * len(idx))
            if nulls.any():
                v = pc.if_else(pa.array(nulls), pa.scalar(None, v.type), v)
            out.append(v)
    return tuple(out)


#: pandas' default string dtype ("str": Arrow storage, NaN as the missing value).
_STR = pd.StringDtype("pyarrow", na_value=np.nan)


def str_series(a, index=None) -> pd.Series:
    """Arrow strings (array, chunked array or anything :func:`pyarrow.array` takes) -> a pandas
    ``str`` Series backed by the same Arrow memory (no copy), nulls as ""; ``index``: the
    Series' index (default a RangeIndex)."""
    a = pc.fill_null(_arrow(a), "")
    return pd.Series(pd.arrays.ArrowStringArray(a, dtype=_STR), index=index, copy=False)


def _field(struct: pa.ChunkedArray, name: str) -> pa.ChunkedArray:
    return pc.struct_field(struct, name)


def parse_times(s, tz: str = "UTC", counts: dict | None = None) -> pd.Series:
    """sacct Submit/Eligible/Start/End -> ``datetime64[ns, UTC]``.

    Accepts epoch seconds (``SLURM_TIME_FORMAT=%s``, what the ingest asks for), ISO
    ``2023-08-31T12:29:47`` and the ``2024-03-15-20:24:16`` form some sites configure. Times
    without a zone are read in ``tz`` (sacct prints local time; the ingest runs it with
    TZ=UTC). ``Unknown`` / ``None`` / empty -> NaT. An integer column (the reader's
    ``int_fields``: epoch seconds, nulls for the no-time words) is taken as epoch seconds.
    A local time in a DST fold or gap is read as :func:`local_to_epoch` says; ``counts``
    (a dict with ``"fold"`` and ``"gap"``), when given, is increased by how many there were,
    and ``counts["bad"]`` (a list) gets the positions of the values that are a time sacct
    cannot have printed (``2026-13-45T99:00:00``, past 2262, negative, text): NaT, not silently.
    """
    if isinstance(s, (pa.Array, pa.ChunkedArray)) and pa.types.is_integer(s.type):
        out = _epoch_times(s, _index(s))
        if counts is not None:
            given = pc.is_valid(s).to_numpy(zero_copy_only=False)
            _note_bad(counts, given & out.isna().to_numpy())
        return out
    a = pc.utf8_trim_whitespace(_arrow(s))
    digits = pc.fill_null(pc.and_(pc.ascii_is_decimal(a), pc.less_equal(pc.binary_length(a), 12)), False)
    epoch = pc.cast(pc.if_else(digits, a, _NULL), pa.int64())
    secs = epoch.to_numpy(zero_copy_only=False)
    secs = np.where(pd.isna(secs), np.nan, secs).astype("float64")
    other = pc.and_(pc.invert(digits), pc.invert(pc.is_in(a, pa.array(NO_TIME))))
    if pc.any(other).as_py():
        fixed = pc.replace_substring_regex(a, r"^([0-9]{4}-[0-9]{2}-[0-9]{2})[-T ]([0-9]{2}:[0-9]{2}:[0-9]{2})$",
                                           r"\1T\2")
        fixed = pc.if_else(other, fixed, _NULL)
        iso = pc.strptime(fixed, format="%Y-%m-%dT%H:%M:%S", unit="s", error_is_null=True)
        iso_s = pc.cast(iso, pa.int64()).to_numpy(zero_copy_only=False)
        iso_s = np.where(pd.isna(iso_s), np.nan, iso_s).astype("float64")
        if tz != "UTC":
            iso_s, fold, gap = local_to_epoch(iso_s, tz)
            if counts is not None:
                counts["fold"] += fold
                counts["gap"] += gap
        secs = np.where(np.isnan(secs), iso_s, secs)
    out = _utc_series(secs, _index(s))
    if counts is not None:
        given = pc.invert(pc.fill_null(pc.is_in(a, pa.array(NO_TIME)), True)).to_numpy(zero_copy_only=False)
        _note_bad(counts, given & out.isna().to_numpy())
    return out


def _note_bad(counts: dict, bad: np.ndarray) -> None:
    if bad.any():
        counts.setdefault("bad", []).append(np.flatnonzero(bad))


def local_to_epoch(wall_s: np.ndarray, tz: str) -> tuple[np.ndarray, int, int]:
    """Wall-clock times in zone ``tz`` (float seconds since 1970-01-01 00:00 *local*, NaN: none)
    -> ``(epoch seconds UTC, times in a fold, times in a gap)``.

    A time a DST change makes ambiguous (the repeated hour in autumn: the *fold*) is read as its
    first occurrence (summer time), as ``localtime`` gives it for the earlier of the two
    instants; a time that does not exist (the skipped hour in spring: the *gap*) is read as the
    first instant after the gap. Neither becomes NaT; the callers list how many there were.
    Raises ``zoneinfo.ZoneInfoNotFoundError`` for an unknown zone."""
    ok = ~np.isnan(wall_s)
    out = np.full(len(wall_s), np.nan)
    if not ok.any():
        return out, 0, 0
    naive = pd.DatetimeIndex(wall_s[ok].astype("int64").astype("datetime64[s]"))
    first = np.ones(len(naive), bool)
    no_fold = naive.tz_localize(tz, ambiguous="NaT", nonexistent="shift_forward")
    no_gap = naive.tz_localize(tz, ambiguous=first, nonexistent="NaT")
    local = naive.tz_localize(tz, ambiguous=first, nonexistent="shift_forward")
    out[ok] = local.tz_convert("UTC").as_unit("s").asi8.astype("float64")
    return out, int(no_fold.isna().sum()), int(no_gap.isna().sum())


def _epoch_times(a, index) -> pd.Series:
    """Integer epoch seconds (nulls) -> ``datetime64[ns, UTC]`` (negative: NaT, as the text
    path, which takes digits only)."""
    secs = np.asarray(pc.cast(a, pa.int64()).to_numpy(zero_copy_only=False), dtype="float64")
    secs[secs < 0] = np.nan   # (nulls are NaN already)
    return _utc_series(secs, index)


#: The last epoch second a ``datetime64[ns]`` holds (2262-04-11T23:47:16Z).
_MAX_EPOCH_S = (2**63 - 1) // 10**9


def _utc_series(secs: np.ndarray, index) -> pd.Series:
    """Float epoch seconds (NaN: none) -> ``datetime64[ns, UTC]``; NaT past 2262 (what
    nanoseconds in an int64 hold) instead of an overflowed time."""
    secs = np.where(secs > _MAX_EPOCH_S, np.nan, secs)
    ns = np.where(np.isnan(secs), np.iinfo(np.int64).min, secs * 1e9).astype("int64")
    return pd.Series(ns.view("datetime64[ns]"), index=index).dt.tz_localize("UTC")


def int_column_np(a) -> np.ndarray:
    """An integer Arrow column (the reader's ``int_fields``) -> float64 numpy, NaN for nulls."""
    return np.asarray(pc.cast(a, pa.float64()).to_numpy(zero_copy_only=False), dtype="float64")


def map_distinct(a, fn, kind: str = "float"):
    """``fn`` (str -> value) run once per distinct value of the string column ``a`` (nulls read
    as "") and expanded back: a float64 numpy array (``kind="float"``: None and a value ``fn``
    raises :class:`~slurmkit.errors.InputError` for become NaN) or an Arrow string array
    (``kind="str"``: None and an error become "")."""
    arr = pc.fill_null(_arrow(a), "").combine_chunks()
    enc = pc.dictionary_encode(arr)
    idx = enc.indices.to_numpy(zero_copy_only=False)

    def safe(v):
        try:
            out = fn(v)
        except InputError:
            out = None
        return out

    uniq = enc.dictionary.to_pylist()
    if kind == "str":
        vals = pa.array([safe(v) or "" for v in uniq], pa.string())
        return pc.take(vals, enc.indices)
    vals = np.array([np.nan if (x := safe(v)) is None else x for v in uniq], dtype="float64")
    return vals[idx] if len(uniq) else np.full(len(idx), np.nan)


def _duration_np(a: pa.ChunkedArray, bare: str = "s", no_limit: float = np.nan) -> np.ndarray:
    """:func:`slurmkit.slurm.duration.seconds` of each value (``bare``: a bare number's unit),
    ``no_limit`` for UNLIMITED / Partition_Limit, NaN for not set or not a duration."""
    if bare == "s" and _all_digits(a):   # ElapsedRaw-style whole seconds: the reader's value is the number
        return num_np(a)

    def one(v):
        s = duration.seconds(v, bare)
        return no_limit if s == np.inf else s

    return map_distinct(a, one)


def parse_duration_s(s) -> pd.Series:
    """sacct durations -> float seconds (:func:`slurmkit.slurm.duration.seconds`): Elapsed,
    CPUTime, TotalCPU (``MM:SS.mmm``), Suspended; a bare number is seconds (as the ``*Raw``
    fields print). ``UNLIMITED``, ``Partition_Limit``, ``INVALID``, empty, not a duration -> NaN.
    """
    a = pc.utf8_trim_whitespace(_arrow(s))
    return pd.Series(_duration_np(a), index=_index(s), dtype="float64")


def parse_timelimit_s(s, raw_minutes: bool = False) -> pd.Series:
    """Timelimit -> float seconds (:func:`slurmkit.slurm.duration.seconds`, a bare number in
    minutes as Slurm writes it); ``UNLIMITED`` and ``Partition_Limit`` -> +inf (no limit known
    to the job); empty / ``INVALID`` -> NaN. ``raw_minutes``: the TimelimitRaw field (whole
    minutes; ``4294967295``: INFINITE, +inf)."""
    a = pc.utf8_trim_whitespace(_arrow(s))
    return pd.Series(_duration_np(a, "min", np.inf), index=_index(s), dtype="float64")


#: MiB per unit letter (:data:`slurmkit.slurm.memory.UNIT_MIB`, the one table).
_MEM_UNIT_MIB = memory.UNIT_MIB


#: ``binary_slice``'s stop for "to the end": pyarrow 26 fails ("Negative buffer resize") on
#: some arrays when the stop is left out.
_TO_END = 2**31 - 1
_UNITS = list(_MEM_UNIT_MIB)
_UNITS_BIN = pa.array([u.encode() for u in _UNITS], pa.binary())


def _unit_index(unit) -> np.ndarray:
    """Index of each unit letter in ``_UNITS`` (``len(_UNITS)`` for none / another)."""
    values = _UNITS_BIN if pa.types.is_binary(unit.type) else pa.array(_UNITS)
    return pc.fill_null(pc.index_in(unit, values), len(_UNITS)).to_numpy(zero_copy_only=False)


def _mem_np(a: pa.ChunkedArray, bare: str) -> tuple[np.ndarray, pa.ChunkedArray]:
    a = pc.if_else(pc.equal(a, ""), _NULL, a)
    # byte slices: the unit letters are ASCII, so cutting one off leaves valid UTF-8
    raw = a.cast(pa.binary())
    last = pc.binary_slice(raw, -1)
    uidx = _unit_index(last)
    has_unit = pa.array(uidx < len(_UNITS))
    body = pc.if_else(has_unit, pc.binary_slice(raw, 0, -1), raw).cast(pa.string())
    if _all_digits(body):
        # digits and at most a unit letter (usage figures, most AllocTRES / ReqMem): no regex
        num = num_np(body)
        per = pa.chunked_array([pa.nulls(len(a), pa.string())])
    else:
        parts = pc.extract_regex(a, r"^(?P<n>[0-9]+(?:\.[0-9]+)?)(?P<u>[" + "".join(_UNITS) + r"]?)(?P<p>[cn]?)$")
        num = num_np(_field(parts, "n"))
        uidx = _unit_index(_field(parts, "u"))
        per = _field(parts, "p")
    factor = np.array([_MEM_UNIT_MIB[u] for u in _UNITS] + [_MEM_UNIT_MIB[bare]])
    return num * factor[uidx], per


def parse_mem_mib(s, bare: str = "M") -> tuple[pd.Series, pd.Series]:
    """Memory strings -> ``(MiB float, per)``: :func:`slurmkit.slurm.memory.mib` as a pyarrow
    kernel (MaxRSS is mostly distinct values).

    ``199G``, ``32000M``, ``356K``, ``2T``, ``1.5G``; old ReqMem forms ``4000Mc`` (per CPU) and
    ``4000Mn`` (per node) give ``per`` = ``"cpu"`` / ``"node"``, otherwise ``""``. A bare number
    is in unit ``bare`` (``"M"`` for ReqMem and TRES ``mem=``, ``"B"`` for usage fields printed
    with ``--noconvert``). Unparsable -> NaN.
    """
    a = pc.utf8_trim_whitespace(_arrow(s))

    def one(x):
        mib, p = _mem_np(x, bare)
        return mib, pc.if_else(pc.equal(p, "c"), "cpu", pc.if_else(pc.equal(p, "n"), "node", ""))

    mib, per = dict_apply(a, one)
    return pd.Series(mib, index=_index(s), dtype="float64"), str_series(per, _index(s))


def _tres_entries(a: pa.ChunkedArray, keys: tuple[str, ...]) -> tuple[int, list]:
    """``(rows, [(values, row) for each key])``: the value after ``key=`` of the first
    comma-separated entry of a row that starts with it, as a compact string array, and the row
    it came from (int64 numpy, increasing); rows without the key have no entry. One split on
    commas for all keys, no regular expression (TRES usage strings are mostly distinct, so this
    runs over every row)."""
    arr = a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a
    lists = pc.split_pattern(arr, ",")
    flat = pc.list_flatten(lists)
    parents = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False)
    out = []
    for key in keys:
        prefix = key + "="
        hit = pc.starts_with(flat, prefix).to_numpy(zero_copy_only=False)
        where = np.flatnonzero(hit)
        row = parents[where]
        first = np.ones(len(row), bool)   # parents increase: the first entry of a row wins
        first[1:] = row[1:] != row[:-1]
        if not first.all():
            where, row = where[first], row[first]
        # a byte slice (the prefix is ASCII)
        vals = pc.binary_slice(pc.take(flat, pa.array(where)).cast(pa.binary()), len(prefix),
                               _TO_END).cast(pa.string())
        out.append((vals, row))
    return len(arr), out


def _scatter(n: int, row: np.ndarray, values: np.ndarray) -> np.ndarray:
    """A float64 array of ``n`` NaN with ``values`` at ``row``."""
    out = np.full(n, np.nan)
    out[row] = values
    return out


def _tres_arrow(a: pa.ChunkedArray, key: str) -> pa.ChunkedArray:
    """:func:`_tres_entries` of one key as a string column (null where the row lacks it)."""
    n, ((vals, row),) = _tres_entries(a, (key,))
    pick = np.full(n, -1, dtype=np.int64)
    pick[row] = np.arange(len(row))
    return pa.chunked_array([pc.take(vals, pa.array(pick, mask=pick < 0))], pa.string())


def _tres_values_np(a: pa.ChunkedArray, keys: dict) -> tuple:
    n, found = _tres_entries(a, tuple(keys))
    out = []
    for (vals, row), bare in zip(found, keys.values()):
        v = pa.chunked_array([vals], pa.string())
        out.append(_scatter(n, row, num_np(v) if bare is None else _mem_np(v, bare)[0]))
    return tuple(out)


def tres_values(s, keys: dict) -> dict[str, pd.Series]:
    """Several values of a TRES string from one split on commas: ``keys`` maps a TRES key
    (``mem``, ``gres/gpuutil``, ``energy``) to ``None`` for a plain number (as
    :func:`tres_number` reads it) or to the unit of a bare number of a memory value (``"B"``,
    ``"M"``; MiB, as :func:`tres_mem_mib` reads it). -> ``{key: float Series}``, NaN where the
    row lacks the key or its value does not parse. Parsing one column once for all its keys:
    TRES usage strings are mostly distinct, so each split runs over every row."""
    keys = dict(keys)
    if not keys:
        return {}
    out = dict_apply(_arrow(s), lambda x: _tres_values_np(x, keys))
    return {k: pd.Series(v, index=_index(s), dtype="float64") for k, v in zip(keys, out)}


def tres_usage(s) -> tuple[pd.Series, pd.Series]:
    """A TRES usage string (TRESUsageInTot, printed with ``--noconvert``) -> ``(mem MiB, gres/
    gpuutil percent)``, NaN where absent; a bare ``mem=`` number is bytes. One split."""
    v = tres_values(s, {"mem": "B", "gres/gpuutil": None})
    return v["mem"], v["gres/gpuutil"]


def tres_number(s, key: str) -> pd.Series:
    """The value of ``key`` in a TRES string (``cpu=8,gres/gpu=2,mem=10G``) as float (NaN when
    absent or not a number). ``key`` must match exactly: ``gres/gpu`` never matches
    ``gres/gpumem``, ``gres/gpuutil`` or the typed ``gres/gpu:a100``."""
    (out,) = dict_apply(_arrow(s), lambda x: (num_np(_tres_arrow(x, key)),))
    return pd.Series(out, index=_index(s), dtype="float64")


def tres_mem_mib(s, key: str = "mem", bare: str = "M") -> pd.Series:
    """A memory TRES value (``mem=199G``, ``mem=1294440K``) in MiB (NaN when absent)."""
    def one(x):
        return (_mem_np(pc.fill_null(_tres_arrow(x, key), ""), bare)[0],)

    (mib,) = dict_apply(_arrow(s), one)
    return pd.Series(mib, index=_index(s), dtype="float64")


def _gpu_count(v: str) -> float | None:
    """:func:`slurmkit.slurm.tres.gpu_count`, no ``gres/gpu`` entry read as 0 (an AllocTRES
    without GPUs is a job without GPUs); a negative or unreadable count is None (unknown)."""
    try:
        n = tres.gpu_count(v)
    except tres.TresError:
        return None
    return 0 if n is None else n


def _physical(v: str) -> float | None:
    """:func:`slurmkit.slurm.tres.physical_gpus` as a float, no ``gres/gpu`` entry read as 0 (as
    :func:`_gpu_count`); an unknown MIG share, a negative or an unreadable count is None."""
    try:
        n = tres.physical_gpus(v)
    except tres.TresError:
        return None
    return 0.0 if n is None else float(n)


def _negative(v: str) -> float:
    try:
        tres.gpu_count(v)
    except tres.NegativeGpuCount:
        return 1.0
    except tres.TresError:
        return 0.0
    return 0.0


def gpus_from_tres(s) -> tuple[pd.Series, pd.Series]:
    """AllocTRES -> ``(gpus float, gpu_type str)``: :func:`slurmkit.slurm.tres.gpu_count` (the
    untyped ``gres/gpu=N``, else the typed entries summed; a MIG instance is one GPU, as sreport
    counts it) and :func:`slurmkit.slurm.tres.gpu_type`, once per distinct string. No
    ``gres/gpu`` entry -> 0; a negative count (``gres/gpu=-1``, :func:`negative_gpus`) or a
    string that is not TRES -> NaN, unknown."""
    gpus = map_distinct(s, _gpu_count)
    gtype = map_distinct(s, tres.gpu_type, kind="str")
    return pd.Series(gpus, index=_index(s), dtype="float64"), str_series(gtype, _index(s))


def physical_gpus_from_tres(s) -> pd.Series:
    """AllocTRES -> physical GPUs (float): :func:`slurmkit.slurm.tres.physical_gpus` (each MIG
    instance weighed by its share of the GPU: ``gres/gpu:a100_3g.20gb=1,gres/gpu=1`` -> 3/7),
    once per distinct string. No ``gres/gpu`` entry -> 0 (as :func:`gpus_from_tres`); a MIG type
    whose share is unknown (:class:`~slurmkit.slurm.tres.UnknownGpuShare`), a negative count or a
    string that is not TRES -> NaN, unknown."""
    return pd.Series(map_distinct(s, _physical), index=_index(s), dtype="float64")


def _gres_tres(v: str) -> str:
    return ",".join(f"gres/gpu:{t}={n}" if t else f"gres/gpu={n}"
                    for (name, t), n in gres.parse(v).items() if name == "gpu")


def gres_as_tres(s) -> pa.ChunkedArray:
    """AllocGRES / ReqGRES (``gpu:2``, ``gpu:tesla:2(IDX:0-1)``, ``craynetwork:1,gpu:1``; as
    Slurm printed GRES before TRES; read by :func:`slurmkit.slurm.gres.parse`) rewritten as TRES
    (``gres/gpu=2``, ``gres/gpu:tesla=2``) for :func:`gpus_from_tres`; other GRES dropped, a
    value that is not GRES -> ""."""
    return pa.chunked_array([map_distinct(s, _gres_tres, kind="str")])


def negative_gpus(s) -> np.ndarray:
    """AllocTRES -> bool numpy: the rows with a negative GPU count
    (:class:`slurmkit.slurm.tres.NegativeGpuCount`; their ``gpus`` are NaN, unknown, in
    :func:`gpus_from_tres`)."""
    return map_distinct(s, _negative) > 0


def before_dot(s, last: bool = False) -> pa.ChunkedArray:
    """The text before the first (``last``: the last) ``.`` of each value (the whole value when
    it has none): a JobID without its step. A split, not a regular expression."""
    parts = pc.split_pattern(_arrow(s), ".", max_splits=1, reverse=last)
    return pc.list_element(parts, 0)


_JOBID = (r"^(?P<base>[0-9]+)(?:_(?P<task>[0-9]+|\[[^\]]*\]))?(?:\+(?P<het>[0-9]+))?"
          r"(?:\.(?P<step>[A-Za-z0-9_\-]+))?$")


def parse_job_ids(s) -> pd.DataFrame:
    """JobID -> DataFrame with ``base`` (str), ``array_task`` (str: ``4``, ``[5-9%2]`` or ""),
    ``het`` (str offset or ""), ``step`` (``batch``, ``extern``, ``0``, ``interactive`` or ""),
    ``alloc_id`` (the JobID without its step: ``123_4``, ``900+0``), ``valid`` (bool)."""
    a = pc.utf8_trim_whitespace(_arrow(s))
    idx = _index(s)
    if _all_digits(a):   # plain job ids (no array task, het component or step): no regex
        empty = str_series(pc.cast(pa.repeat("", len(a)), pa.string()), idx)
        ids = str_series(a, idx)
        valid = pc.fill_null(pc.is_valid(a), False)
        return pd.DataFrame({"base": ids, "array_task": empty, "het": empty, "step": empty, "alloc_id": ids,
                             "valid": pd.Series(valid.to_numpy(zero_copy_only=False).astype(bool), index=idx)})
    parts = pc.extract_regex(a, _JOBID)
    valid = pc.fill_null(pc.is_valid(parts), False)
    step = pc.fill_null(_field(parts, "step"), "")
    alloc = pc.if_else(pc.not_equal(step, ""), before_dot(a, last=True), a)
    return pd.DataFrame({
        "base": str_series(_field(parts, "base"), idx),
        "array_task": str_series(_field(parts, "task"), idx),
        "het": str_series(_field(parts, "het"), idx),
        "step": str_series(step, idx),
        "alloc_id": str_series(alloc, idx),
        "valid": pd.Series(valid.to_numpy(zero_copy_only=False).astype(bool), index=idx)})


_STEP_ALLOC = r"^[0-9]+(?:_(?:[0-9]+|\[[^\]]*\]))?(?:\+[0-9]+)?$"
_STEP_NAME = r"^[A-Za-z0-9_\-]+$"


def parse_step_ids(s) -> pd.DataFrame:
    """Step JobIDs (each with a ``.``: ``123_4.batch``, ``900+0.0``) -> DataFrame with
    ``alloc_id`` (before the last ``.``), ``step`` (after it) and ``valid`` (bool: the grammar of
    :func:`parse_job_ids` with a step). A split and two matches, no capture groups: step rows
    are most of a large capture. ``step`` is a categorical (few names, many rows)."""
    a = pc.utf8_trim_whitespace(_arrow(s))
    idx = _index(s)
    parts = pc.split_pattern(a, ".", max_splits=1, reverse=True)
    two = pc.fill_null(pc.equal(pc.list_value_length(parts), 2), False)
    if not pc.all(two).as_py():
        parts = pc.if_else(two, parts, pa.scalar(["", ""], parts.type))
    alloc, step = pc.list_element(parts, 0), pc.list_element(parts, 1)
    # the step names are encoded once: checked per name, and kept as the categorical's codes
    enc = pc.dictionary_encode(pc.fill_null(step, "").combine_chunks())
    codes = enc.indices.to_numpy(zero_copy_only=False)
    names = enc.dictionary
    step_ok = pc.match_substring_regex(names, _STEP_NAME).to_numpy(zero_copy_only=False).astype(bool)[codes]
    alloc_ok = (np.ones(len(alloc), bool) if _all_digits(alloc) else
                pc.match_substring_regex(alloc, _STEP_ALLOC).to_numpy(zero_copy_only=False).astype(bool))
    valid = alloc_ok & step_ok & two.to_numpy(zero_copy_only=False).astype(bool)
    steps = pd.Categorical.from_codes(codes, pd.Index(names.to_pylist(), dtype="str"))
    return pd.DataFrame({"alloc_id": str_series(alloc, idx), "step": pd.Series(steps, index=idx),
                         "valid": pd.Series(valid, index=idx)})


def pending_task_count(task: pd.Series) -> pd.Series:
    """Tasks in a pending array expression (``[5-9]`` -> 5, ``[1,3,7-8%2]`` -> 4); 0 for a plain
    task id or "". Uses :mod:`slurmkit.hostlist` to expand the ranges."""
    def count(expr: str) -> int:
        body = expr[1:-1].split("%")[0]
        try:
            return len(hostlist.expand_hostlist(f"t[{body}]"))
        except hostlist.BadHostlist:
            return 0

    out = np.zeros(len(task), dtype="int64")
    pend = task.str.startswith("[").fillna(False).to_numpy(dtype=bool)
    if pend.any():
        out[pend] = [count(x) for x in task[pend]]
    return pd.Series(out, index=task.index)


def parse_states(s) -> tuple[pd.Series, pd.Series]:
    """State -> ``(state, cancelled_by)``: ``CANCELLED by 1234`` -> (``CANCELLED``, ``1234``);
    other states unchanged with "" (``RUNNING``, ``REQUEUED``, ``OUT_OF_MEMORY``, ...)."""
    a = pc.utf8_trim_whitespace(_arrow(s))

    def one(x):
        parts = pc.extract_regex(x, r"^(?P<st>[A-Z_]+)(?:\s+by\s+(?P<by>\S+))?")
        return pc.coalesce(_field(parts, "st"), pc.utf8_upper(x)), _field(parts, "by")

    st, by = dict_apply(a, one)
    return str_series(st, _index(s)), str_series(by, _index(s))
