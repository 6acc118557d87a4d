"""Pure, vectorised parsers for sacct's text values (pandas Series of str in, typed Series out).

Every function takes the raw column as sacct printed it and returns plain numbers with units
in the name: seconds, MiB, GPUs. Values that do not parse become NaN / NaT / "" and callers
decide (and record in the data-quality section) what that means. No per-row Python on the
common paths: pandas' Arrow-backed string methods and ``pd.to_datetime`` do the work.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

#: Markers sacct prints for a time that is not set.
NO_TIME = ("Unknown", "None", "", "N/A", "INVALID")

_ISO_FIX = re.compile(r"^(\d{4}-\d\d-\d\d)[-T ](\d\d:\d\d:\d\d)$")


def parse_times(s: pd.Series, tz: str = "UTC") -> pd.Series:
    """sacct Submit/Eligible/Start/End -> ``datetime64[ns, UTC]``.

    Accepts epoch seconds (``SLURM_TIME_FORMAT=%s``, what the ingest asks for), ISO
    ``2023-08-31T12:29:47`` and the ``2024-03-15-20:24:16`` form some sites configure. Times
    without a zone are read in ``tz`` (sacct prints local time; the ingest runs it with
    TZ=UTC). ``Unknown`` / ``None`` / empty -> NaT.
    """
    s = s.astype("str").str.strip()
    digits = s.str.fullmatch(r"\d{1,12}").fillna(False).astype(bool)
    out = pd.Series(pd.NaT, index=s.index, dtype="datetime64[ns, UTC]")
    if digits.any():
        secs = pd.to_numeric(s[digits], errors="coerce")
        out[digits] = pd.to_datetime(secs, unit="s", utc=True)
    rest = ~digits & ~s.isin(NO_TIME)
    if rest.any():
        txt = s[rest].str.replace(_ISO_FIX.pattern, r"\1T\2", regex=True)
        ts = pd.to_datetime(txt, format="%Y-%m-%dT%H:%M:%S", errors="coerce")
        if tz == "UTC":
            ts = ts.dt.tz_localize("UTC")
        else:
            ts = ts.dt.tz_localize(tz, ambiguous="NaT", nonexistent="NaT").dt.tz_convert("UTC")
        out[rest] = ts
    return out


_DUR = r"^(?:(?P<d>\d+)-)?(?:(?P<h>\d+):)?(?P<m>\d+):(?P<s>\d+(?:\.\d+)?)$"


def parse_duration_s(s: pd.Series) -> pd.Series:
    """sacct durations -> float seconds.

    ``[D-]HH:MM:SS``, ``MM:SS``, ``MM:SS.mmm`` (TotalCPU under an hour), ``D-HH`` and
    ``D-HH:MM`` (Timelimit), or a bare integer (seconds, as the ``*Raw`` fields print).
    ``UNLIMITED``, ``Partition_Limit``, ``INVALID``, empty -> NaN.
    """
    s = s.astype("str").str.strip()
    out = pd.to_numeric(s.where(s.str.fullmatch(r"\d+(?:\.\d+)?").fillna(False).astype(bool)),
                        errors="coerce")
    need = out.isna() & s.str.contains(r"[:\-]", regex=True).fillna(False).astype(bool)
    if need.any():
        sub = s[need]
        # Timelimit forms "D-HH" / "D-HH:MM" -> normalise to D-HH:MM:SS
        sub = sub.str.replace(r"^(\d+)-(\d+)$", r"\1-\2:00:00", regex=True)
        sub = sub.str.replace(r"^(\d+)-(\d+):(\d+)$", r"\1-\2:\3:00", regex=True)
        parts = sub.str.extract(_DUR)
        val = (pd.to_numeric(parts["d"], errors="coerce").fillna(0) * 86400
               + pd.to_numeric(parts["h"], errors="coerce").fillna(0) * 3600
               + pd.to_numeric(parts["m"], errors="coerce") * 60
               + pd.to_numeric(parts["s"], errors="coerce"))
        out[need] = val
    return out.astype("float64")


def parse_timelimit_s(s: pd.Series, raw_minutes: bool = False) -> pd.Series:
    """Timelimit -> float seconds; ``UNLIMITED`` and ``Partition_Limit`` -> +inf (no limit
    known to the job); empty / ``INVALID`` -> NaN. ``raw_minutes``: the TimelimitRaw field
    (whole minutes)."""
    s = s.astype("str").str.strip()
    if raw_minutes:
        out = pd.to_numeric(s, errors="coerce") * 60.0
    else:
        out = parse_duration_s(s)
    unlimited = s.isin(("UNLIMITED", "Partition_Limit", "4294967295"))
    return out.mask(unlimited, np.inf).astype("float64")


_MEM_UNIT_MIB = {"": None, "B": 1 / 1048576, "K": 1 / 1024, "M": 1.0, "G": 1024.0,
                 "T": 1048576.0, "P": 1073741824.0}


def parse_mem_mib(s: pd.Series, bare: str = "M") -> tuple[pd.Series, pd.Series]:
    """Memory strings -> ``(MiB float, per)``.

    ``199G``, ``32000M``, ``356K``, ``2T``, ``1.5G``; old ReqMem forms ``4000Mc`` (per CPU) and
    ``4000Mn`` (per node) give ``per`` = ``"cpu"`` / ``"node"``, otherwise ``""``. A bare number
    is in unit ``bare`` (``"M"`` for ReqMem and TRES ``mem=``, ``"B"`` for usage fields printed
    with ``--noconvert``). Unparsable -> NaN.
    """
    s = s.astype("str").str.strip()
    parts = s.str.extract(r"^(?P<n>\d+(?:\.\d+)?)(?P<u>[KMGTPB]?)(?P<p>[cn]?)$")
    num = pd.to_numeric(parts["n"], errors="coerce")
    unit = parts["u"].fillna("").replace("", bare)
    factor = unit.map({k: v for k, v in _MEM_UNIT_MIB.items() if v is not None}).astype("float64")
    per = parts["p"].fillna("").map({"c": "cpu", "n": "node", "": ""}).fillna("")
    return (num * factor).astype("float64"), per


def tres_value(s: pd.Series, key: str) -> pd.Series:
    """The value of ``key`` in a TRES string (``cpu=8,gres/gpu=2,mem=10G``) or NaN/None.

    ``key`` must match exactly: ``gres/gpu`` never matches ``gres/gpumem``, ``gres/gpuutil``
    or the typed ``gres/gpu:a100``."""
    pat = r"(?:^|,)" + re.escape(key) + r"=([^,]*)"
    return s.astype("str").str.extract(pat, expand=False)


_MIG = r"(\d+)g\.\d+gb"


def mig_weight(gpu_type: str) -> float:
    """Share of a whole GPU for a MIG profile name (``1g.10gb`` -> 1/7, ``3g.40gb`` -> 3/7,
    ``7g.80gb`` -> 1); 1.0 for anything that is not a MIG profile. A100/H100/H200 have seven
    compute slices."""
    m = re.search(_MIG, gpu_type or "")
    return min(int(m.group(1)), 7) / 7.0 if m else 1.0


def gpus_from_tres(s: pd.Series) -> tuple[pd.Series, pd.Series]:
    """AllocTRES -> ``(gpus float, gpu_type str)``.

    The untyped ``gres/gpu=N`` when present, else the sum of the typed ``gres/gpu:<type>=N``;
    never ``gres/gpumem`` / ``gres/gpuutil``. MIG slices (``gres/gpu:1g.10gb=2``) count by
    their share of a GPU (:func:`mig_weight`), also when an untyped count is present.
    ``gpu_type`` is the first typed entry's type ("" when only the untyped count is given).
    """
    s = s.astype("str").fillna("")
    untyped = pd.to_numeric(tres_value(s, "gres/gpu"), errors="coerce")
    gpu_type = s.str.extract(r"(?:^|,)gres/gpu:([^=,]+)=", expand=False).fillna("")
    has_typed = gpu_type != ""
    is_mig = gpu_type.str.contains(r"\d+g\.\d+gb", regex=True).fillna(False).astype(bool)
    gpus = untyped.fillna(0.0).astype("float64")
    need = has_typed & (untyped.isna() | is_mig)
    if need.any():
        found = s[need].str.extractall(r"(?:^|,)gres/gpu:(?P<t>[^=,]+)=(?P<n>\d+)")
        weights = found["t"].map(mig_weight).astype("float64")
        counts = pd.to_numeric(found["n"]) * weights
        gpus[need] = counts.groupby(level=0).sum().reindex(s[need].index).fillna(0.0)
    return gpus, gpu_type


_JOBID = (r"^(?P<base>\d+)(?:_(?P<task>\d+|\[[^\]]*\]))?(?:\+(?P<het>\d+))?"
          r"(?:\.(?P<step>[A-Za-z0-9_\-]+))?$")


def parse_job_ids(s: pd.Series) -> pd.DataFrame:
    """JobID -> DataFrame with ``base`` (str), ``array_task`` (str: ``4``, ``[5-9%2]`` or ""),
    ``het`` (str offset or ""), ``step`` (``batch``, ``extern``, ``0``, ``interactive`` or ""),
    ``alloc_id`` (the JobID without its step: ``123_4``, ``900+0``), ``valid`` (bool)."""
    s = s.astype("str").str.strip()
    parts = s.str.extract(_JOBID)
    valid = parts["base"].notna()
    parts = parts.fillna("")
    alloc = s.str.replace(r"\.[^.]*$", "", regex=True).where(parts["step"] != "", s)
    return pd.DataFrame({"base": parts["base"], "array_task": parts["task"], "het": parts["het"],
                         "step": parts["step"], "alloc_id": alloc, "valid": valid})


def pending_task_count(task: pd.Series) -> pd.Series:
    """Tasks in a pending array expression (``[5-9]`` -> 5, ``[1,3,7-8%2]`` -> 4); 0 for a plain
    task id or "". Uses python-hostlist to expand the ranges."""
    import hostlist

    def count(expr: str) -> int:
        if not expr.startswith("["):
            return 0
        body = expr[1:-1].split("%")[0]
        try:
            return len(hostlist.expand_hostlist(f"t[{body}]"))
        except hostlist.BadHostlist:
            return 0

    out = pd.Series(0, index=task.index, dtype="int64")
    pend = task.str.startswith("[").fillna(False).astype(bool)
    if pend.any():
        out[pend] = task[pend].map(count).astype("int64")
    return out


def parse_states(s: pd.Series) -> tuple[pd.Series, pd.Series]:
    """State -> ``(state, cancelled_by)``: ``CANCELLED by 1234`` -> (``CANCELLED``, ``1234``);
    other states unchanged with "" (``RUNNING``, ``REQUEUED``, ``OUT_OF_MEMORY``, ...)."""
    s = s.astype("str").str.strip()
    parts = s.str.extract(r"^(?P<st>[A-Z_]+)(?:\s+by\s+(?P<by>\S+))?")
    state = parts["st"].fillna(s.str.upper())
    return state, parts["by"].fillna("")
