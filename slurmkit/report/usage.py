"""Per-allocation usage in a window: clipped hours, GPU-hours, waste, queue wait, efficiency.

Input: the typed rows of :func:`slurmkit.accounting.frame.jobs_frame` (allocation and step
rows, a :class:`~slurmkit.accounting.frame.JobRows`). Output of :func:`allocations`: one row
per allocation row (a requeued job has one
row per attempt; ``jobs`` counts distinct ``(cluster, key_id)``) with

- ``run_s``: seconds it ran (ElapsedRaw, which excludes suspended time; End − Start when absent)
- ``in_window_s``: ``run_s`` scaled by the share of [Start, End) inside the window
  (a running job's End is ``now``, at most Start + Timelimit: :func:`end_or_now`)
- ``gpu_hours`` = gpus × in_window_s / 3600, ``cpu_hours`` = NCPUS × in_window_s / 3600
- ``physical_gpu_hours`` = physical_gpus × in_window_s / 3600: a MIG instance weighed by its
  share of the GPU (:func:`slurmkit.slurm.tres.physical_gpus`); ``gpu_hours`` counts an
  instance as one GPU, as sreport does. NaN where the share is unknown, or the rows come from
  a store day written before the frame had ``physical_gpus``
- with ``gpu_nodes`` (node -> GPUs, the site profile's): a job whose AllocTRES has no
  ``gres/gpu`` but which ran on a node with GPUs, of a cluster no job of which in the input has
  ``gres/gpu`` in its AllocTRES, has ``gpus`` unknown (NaN), not 0: Slurm did not track
  gres/gpu (:func:`untracked_gpus`, :data:`GPU_UNTRACKED`, listed in the data quality)
- ``wasted``: bool, outcome wastes its GPU-hours (:data:`WASTE_STATES`, or a requeued attempt)
- ``final_attempt`` / ``requeued_attempt``: the job's last attempt (by Start) / an earlier one
- ``started``: the row started (:func:`started`: Start set, not after End, not a held job's
  cancel with Start = End before Eligible)
- ``wait_s``: Start − Eligible (Submit when Eligible is unknown), once per job (its first
  attempt that started), for jobs started in the window; ``gpu_bucket``: of the GPUs it asked
  for (ReqTRES, else AllocTRES)
- ``step_mem_mib``: the largest step's memory use (TRESUsageInTot mem / MaxRSS), as seff does
- ``step_gpu_mem_mib``: the largest step's GPU memory use (``gres/gpumem`` of TRESUsageInMax /
  TRESUsageInTot, Slurm 23.02+), NaN when no step has it
- ``step_gpu_util_pct``: mean of the steps' gres/gpuutil (per task: TRESUsageInAve, or
  TRESUsageInTot / NTasks), weighted by each step's GPUs x ElapsedRaw, over the steps that hold
  GPUs (extern excluded); within 0-100 %: a higher value is capped and listed
- ``step_energy_j``: the largest ``energy=`` (J) of the steps' TRESUsageInTot (Slurm's
  acct_gather_energy per step; NaN when no step has one). The largest, not the sum: steps run
  at the same time on the same nodes (``extern`` spans the whole allocation on every node,
  ``batch`` its first node), so a sum counts the nodes' energy twice; Slurm's own job figure
  (ConsumedEnergyRaw of the allocation row) equals its extern step's in the CSCS capture

The data-quality counts get every row that is not used: outside the window, steps without an
allocation row.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from slurmkit import hostlist
from slurmkit.accounting.quality import MAX_LISTED, OUTSIDE_WINDOW, DataQuality

#: Outcomes whose GPU-hours are waste. REQUEUED rows are earlier attempts of a requeued job.
WASTE_STATES = ("FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED", "REQUEUED",
                "BOOT_FAIL", "DEADLINE")

#: Data-quality reason of a step utilization above 100 %.
GPU_UTIL_OVER = "GPU utilization over 100 % (capped at 100 %)"

GPU_BUCKETS = [(0, 0, "0"), (1, 1, "1"), (2, 4, "2-4"), (5, 8, "5-8"), (9, np.inf, "9+")]

#: Data-quality reason of a job on a GPU node whose AllocTRES has no gres/gpu (GPUs unknown).
GPU_UNTRACKED = ("no gres/gpu in AllocTRES on a GPU node: Slurm did not track gres/gpu for this job "
                 "(no job of its cluster in the input has gres/gpu in AllocTRES: AccountingStorageTRES without "
                 "gres/gpu?); its GPUs are unknown, not 0")


#: The GPU bucket of a job whose GPU count the input does not give (no AllocTRES, AllocGRES or
#: ReqTRES): not the 0-GPU bucket.
GPU_BUCKET_UNKNOWN = "unknown"


def gpu_bucket(gpus: pd.Series) -> pd.Series:
    """GPU-count bucket label: ``0``, ``1``, ``2-4``, ``5-8``, ``9+`` (fractions round up), as a
    categorical; :data:`GPU_BUCKET_UNKNOWN` where the count is unknown (NaN)."""
    g = np.ceil(gpus.to_numpy(float))
    labels = [label for _, _, label in GPU_BUCKETS] + [GPU_BUCKET_UNKNOWN]
    code = np.full(len(g), len(labels) - 2, dtype=np.int8)
    for i, (lo, hi, _) in reversed(list(enumerate(GPU_BUCKETS))):
        code[(g >= lo) & (g <= hi)] = i
    code[np.isnan(g)] = len(labels) - 1
    return pd.Series(pd.Categorical.from_codes(code, labels), index=gpus.index)


def _where(mask: np.ndarray, *arrays: np.ndarray) -> tuple:
    """``arrays`` at ``mask`` (the arrays themselves, not copies, when the mask is all True)."""
    return arrays if mask.all() else tuple(a[mask] for a in arrays)


def _step_usage(pos: np.ndarray, steps: pd.DataFrame, keep: np.ndarray, n: int) -> dict:
    """Per-allocation step aggregates indexed by ``pos`` (each step's attempt position among
    ``n`` allocation rows; only steps where ``keep``): largest step memory (MiB), the mean
    gres/gpuutil of the non-extern steps that hold GPUs, weighted by their GPUs x ElapsedRaw
    (percent), summed TotalCPU (s), largest step GPU memory (MiB), the largest TRESUsageInTot
    ``energy=`` (J)."""
    mem = np.full(n, np.nan)
    gmem = np.full(n, np.nan)
    cpu = np.full(n, np.nan)
    util_mean = np.full(n, np.nan)
    energy = np.full(n, np.nan)
    if not keep.any():
        return {"step_mem_mib": mem, "step_gpu_util_pct": util_mean, "step_cpu_s": cpu,
                "step_gpu_mem_mib": gmem, "step_energy_j": energy}
    if "energy_j" in steps:
        e = steps["energy_j"].to_numpy(float)
        eok = keep & ~np.isnan(e)
        if eok.any():
            p, v = _where(eok, pos, e)
            np.fmax.at(energy, p, v)
    for col, into in (("mem_used_mib", mem), ("gpu_mem_mib", gmem)):
        if col not in steps:   # (a store written before the column existed)
            continue
        m = steps[col].to_numpy(float)
        ok = keep & ~np.isnan(m)
        if ok.any():
            p, v = _where(ok, pos, m)
            np.fmax.at(into, p, v)
    util = steps["gpu_util_pct"].to_numpy(float)
    uok = keep & ~np.isnan(util)
    if uok.any():
        uok &= (steps["step"] != "extern").to_numpy(bool)
        sg = steps["gpus"].to_numpy(float) if "gpus" in steps else np.full(len(steps), np.nan)
        uok &= ~(sg == 0)   # a step without GPUs used none of them
        p, u, el, g = _where(uok, pos, util, steps["elapsed_s"].to_numpy(float), sg)
        # weighted by each step's GPUs (1 where its AllocTRES is not known) and its time
        ww = np.clip(np.nan_to_num(el), 1.0, None) * np.where(np.isnan(g), 1.0, g)
        w = np.bincount(p, weights=ww, minlength=n)
        uw = np.bincount(p, weights=u * ww, minlength=n)
        with np.errstate(invalid="ignore", divide="ignore"):
            util_mean = np.where(w > 0, uw / w, np.nan)
    c = steps["total_cpu_s"].to_numpy(float)
    cok = keep & ~np.isnan(c)
    if cok.any():
        p, v = _where(cok, pos, c)
        total = np.bincount(p, weights=v, minlength=n)
        has = np.zeros(n, bool)
        has[p] = True
        cpu = np.where(has, total, np.nan)
    return {"step_mem_mib": mem, "step_gpu_util_pct": util_mean, "step_cpu_s": cpu,
            "step_gpu_mem_mib": gmem, "step_energy_j": energy}


def attempt_of_steps(alloc_code: np.ndarray, alloc_start: pd.Series, step_code: np.ndarray,
                     step_start: pd.Series, tolerance_s: int = 5) -> np.ndarray:
    """For each step row, the position of its allocation attempt among the allocation rows:
    the attempt of the same job code that started last at or before the step's Start (+
    ``tolerance_s``); a step without Start goes to the job's last attempt, one that starts
    before every attempt to the first. Vectorised (one sort, one ``searchsorted``): a requeued
    job's attempts share the job code, but each attempt's steps are its own (memory and CPU of
    attempt 1 are not attempt 2's). Every ``step_code`` must be among ``alloc_code``."""
    if not len(step_code):
        return np.zeros(0, np.int64)
    # a job with one attempt (most of them): its steps are that attempt's, no search
    ncodes = int(max(alloc_code.max(initial=-1), step_code.max())) + 1
    count = np.bincount(alloc_code, minlength=ncodes)
    where = np.zeros(ncodes, np.int64)
    where[alloc_code] = np.arange(len(alloc_code))
    out = where[step_code]
    multi = count[step_code] > 1
    if multi.any():
        sub = np.flatnonzero(count[alloc_code] > 1)  # the attempts of requeued jobs
        out[multi] = sub[_search_attempts(alloc_code[sub], alloc_start.iloc[sub], step_code[multi],
                                          step_start[multi], tolerance_s)]
    return out


def _search_attempts(alloc_code, alloc_start, step_code, step_start, tolerance_s):
    big = np.int64(1) << 33   # epoch seconds fit below 2**33 until the year 2242

    def key(code, start, add=0):
        t = start.to_numpy(dtype="datetime64[s]", na_value=np.datetime64("NaT")).astype(np.int64)
        sec = np.where(start.isna().to_numpy(), big - 1, np.clip(t + add, 0, big - 2))
        return code.astype(np.int64) * big + sec

    ak = key(alloc_code, alloc_start)
    order = np.argsort(ak, kind="stable")
    aks = ak[order]
    i = np.searchsorted(aks, key(step_code, step_start, tolerance_s), side="right") - 1
    pos = order[np.clip(i, 0, None)]
    bad = (i < 0) | (alloc_code[pos] != step_code)
    if bad.any():
        first = np.searchsorted(aks, step_code[bad].astype(np.int64) * big, side="left")
        pos[bad] = order[np.clip(first, 0, len(order) - 1)]
    return pos


def job_codes(rows) -> tuple[np.ndarray, np.ndarray]:
    """``(alloc codes, step codes)``: one integer per allocation identity (cluster, key_id)
    of ``rows.allocs``, shared by a requeued job's attempts; a step gets its allocation's code,
    or -1 when no allocation row has its identity."""
    acodes, scodes = rows.identity()
    has_alloc = np.zeros(int(max(acodes.max(initial=-1), scodes.max(initial=-1))) + 1, bool)
    has_alloc[acodes] = True
    return acodes, np.where(has_alloc[scodes], scodes, -1) if len(scodes) else scodes


#: Data-quality reason (a repair) of a step row matched to its allocation by JobID.
STEP_BY_JOB_ID = "step's JobIDRaw names no allocation row (matched by its JobID)"


def _match_by_job_id(allocs: pd.DataFrame, steps: pd.DataFrame, scode: np.ndarray, dq: DataQuality,
                     source: str) -> np.ndarray:
    """``scode`` with the steps that no allocation row's identity (cluster, JobIDRaw) matches
    given the code of the allocation whose JobID (sacct's ``JobID``, same cluster) is the
    step's JobID before its last ``.``: sacct printed a garbled JobIDRaw (bcgsc/mavis's capture
    has ``1672269_2.batch`` with JobIDRaw ``1671673291279.batch``; its allocation's is
    ``1672279``). Each match is a repair in ``dq`` (:data:`STEP_BY_JOB_ID`), naming the step;
    steps still unmatched keep -1."""
    lost = np.flatnonzero(scode < 0)
    cl = allocs["cluster"].astype(str).to_numpy()
    by_jid = pd.Series(allocs["job_code"].to_numpy(), index=pd.Index(cl + "\0" + allocs["job_id"].astype(str).to_numpy()))
    by_jid = by_jid[~by_jid.index.duplicated()]
    st = steps.iloc[lost]
    want = st["cluster"].astype(str).to_numpy() + "\0" + st["job_id"].astype(str).str.rsplit(".", n=1).str[0].to_numpy()
    hit = pd.Series(want).map(by_jid).to_numpy(float)
    ok = ~np.isnan(hit)
    if not ok.any():
        return scode
    scode = scode.copy()
    scode[lost[ok]] = hit[ok].astype(scode.dtype)
    for jid, raw in zip(st["job_id"].to_numpy()[ok][:MAX_LISTED], st["key_id"].astype(str).to_numpy()[ok][:MAX_LISTED]):
        dq.repair(STEP_BY_JOB_ID, source or "input", None, f"JobID {jid}: JobIDRaw {raw} is no allocation's", n=0)
    dq.repaired[STEP_BY_JOB_ID] += int(ok.sum())
    return scode


def end_or_now(allocs: pd.DataFrame, now: pd.Timestamp) -> pd.Series:
    """Each allocation's End (sacct End); for one still running (End unknown) ``now``, but
    never past Start + Timelimit (``timelimit_s``; UNLIMITED: no cap): a job cannot run
    longer, and a capture read long after it was taken would otherwise count its running jobs
    up to today. Aware UTC timestamps; NaT where neither End nor ``now`` applies. A frame of
    :func:`allocations` carries the answer as its column ``stop`` (with a capture's running
    job stopped where sacct printed its Elapsed), which is returned as it is."""
    if "stop" in allocs:
        return allocs["stop"]
    end = allocs["end"]
    tl = allocs["timelimit_s"]
    limit = allocs["start"] + pd.to_timedelta(tl.where(np.isfinite(tl)), unit="s")
    stop = end.fillna(now)
    return stop.where(~(end.isna() & (limit < stop)), limit)


def printed_at(allocs: pd.DataFrame) -> pd.Series:
    """When sacct printed each running row of a capture: Start + its Elapsed (``elapsed_s``:
    ElapsedRaw, else Elapsed, as sacct measured it when it printed the row); NaT for a row with
    an End or without an Elapsed over 0."""
    el = allocs["elapsed_s"]
    return allocs["start"] + pd.to_timedelta(el.where(allocs["end"].isna() & (el > 0)), unit="s")


def started(allocs: pd.DataFrame) -> pd.Series:
    """True for the allocation rows that started: Start set and not after End, and not a job
    cancelled while held, which Slurm records with Start = End = the cancel time and no run
    time: before its Eligible time (``--begin``) or with Eligible ``Unknown`` (``-H``, a hold;
    told only when the input has Eligible). A job cancelled while pending has no Start
    (``None``). Seen in the sandbox's sacct (tests/report/test_report_sandbox_captures.py)."""
    start, end, elig = allocs["start"], allocs["end"], allocs["eligible"]
    no_run = (start == end) & ~(allocs["elapsed_s"] > 0)
    held_cancel = no_run & ((elig.notna() & (start < elig)) | (elig.isna() & bool(elig.notna().any())))
    return start.notna() & ~(end.notna() & (start > end)) & ~held_cancel


def utc(t) -> pd.Timestamp:
    """A timestamp as an aware UTC ``pd.Timestamp`` (naive values are taken as UTC)."""
    t = pd.Timestamp(t)
    return t.tz_localize("UTC") if t.tzinfo is None else t.tz_convert("UTC")


def _drop_orphan_steps(allocs: pd.DataFrame, steps: pd.DataFrame, scode: np.ndarray, dq: DataQuality,
                       source: str) -> tuple[pd.DataFrame, np.ndarray]:
    """``(steps, scode)`` without the step rows whose allocation row is not in the input (matched
    by JobID first, :func:`_match_by_job_id`); each skipped in ``dq`` with its job's GPU-hours
    at stake (its largest step's)."""
    # steps whose allocation row is not in the input
    orphan = scode < 0
    if orphan.any():
        scode = _match_by_job_id(allocs, steps, scode, dq, source)
        orphan = scode < 0
    if orphan.any():
        lost = steps.loc[orphan]
        gh = (lost["gpus"] * lost["elapsed_s"] / 3600.0) if "gpus" in lost else pd.Series(0.0, index=lost.index)
        # per job: its largest step (the steps of one allocation share its GPUs)
        per_job = gh.groupby(lost["key_id"].astype(str).to_numpy()).max().fillna(0.0)
        dq.gpu_hours_at_stake += float(per_job.sum())
        for jid, key in zip(lost["job_id"].head(MAX_LISTED), lost["key_id"].astype(str).head(MAX_LISTED)):
            at = per_job.get(key, 0.0)
            dq.skip("step row without its allocation row", 0, source or "input", None,
                    f"JobID {jid}" + (f": its job's {at:.3g} GPU-hours not counted" if at > 0 else ""))
        dq.skip("step row without its allocation row", int(orphan.sum()))
        steps, scode = steps[~orphan], scode[~orphan]

    return steps, scode


def _cap_gpu_util(steps: pd.DataFrame, dq: DataQuality, source: str) -> pd.DataFrame:
    """``steps`` with gres/gpuutil over 100 % (a sum over tasks or GPUs sacct did not average)
    capped at 100, each repair recorded in ``dq``."""
    # a utilization over 100 % is a sum (over tasks or GPUs) sacct did not average: capped
    su = steps["gpu_util_pct"]
    over = (su > 100.0).to_numpy()
    if over.any():
        for jid, v in zip(steps.loc[over, "job_id"].head(MAX_LISTED), su[over].head(MAX_LISTED)):
            dq.repair(GPU_UTIL_OVER, source or "input", None, f"JobID {jid}: gres/gpuutil {v:g}", n=0)
        dq.repaired[GPU_UTIL_OVER] += int(over.sum())
        steps = steps.assign(gpu_util_pct=su.clip(upper=100.0))

    return steps


def _run_times(allocs: pd.DataFrame, start, end, now, untimed: bool, running_elapsed: bool) -> pd.Series:
    """Add each allocation row's ``stop``, ``run_s``, ``in_window_s`` (its run seconds times
    the share of Start -> stop inside ``[start, end)``), ``provisional`` and ``started`` to
    ``allocs`` (in place); returns the rows without any time kept by ``untimed``."""
    ran = started(allocs)
    notime = allocs["start"].isna() & allocs["submit"].isna() & allocs["end"].isna()
    notime &= (allocs["pending_tasks"] == 0) & (allocs["state"] != "PENDING") & bool(untimed)
    ran |= notime
    stop = end_or_now(allocs, now)
    if running_elapsed:
        # a running job in a capture ran, as far as the capture knows, until sacct printed its
        # Elapsed (Start + Elapsed, when over 0): its hours, the GPUs-in-use curve and the
        # instant peak all stop there, whatever --as-of says
        printed = printed_at(allocs)
        stop = stop.where(~(printed < stop), printed)
    allocs["stop"] = stop
    stop = stop.where(~ran | (stop >= allocs["start"]), allocs["start"])
    lo = allocs["start"].clip(lower=start)
    hi = stop.clip(upper=end)
    overlap = (hi - lo).dt.total_seconds().clip(lower=0).where(ran, 0.0)
    full = (stop - allocs["start"]).dt.total_seconds()
    # a running job in a capture: sacct's Elapsed when the capture was taken (what sacct
    # measured), when it printed one, else Start -> the capture time / now (never more)
    el = allocs["elapsed_s"]
    running = el.clip(upper=full).where(el > 0, full) if running_elapsed else full
    run_s = el.where(el.notna() & (allocs["end"].notna() | notime), running)
    run_s = run_s.fillna(full).fillna(0.0)
    frac = (overlap / full).where(full > 0, 0.0).fillna(0.0).where(~notime, 1.0)
    allocs["run_s"] = run_s
    allocs["in_window_s"] = run_s * frac
    allocs["provisional"] = ran & allocs["end"].isna() & (~notime | (allocs["state"] == "RUNNING"))
    allocs["started"] = ran

    return notime


def _window_rows(allocs: pd.DataFrame, start, end, notime: pd.Series, dq: DataQuality, source: str):
    """``(keep, n_out)``: which allocation rows belong to ``[start, end)`` (they touch it, or
    are pending and submitted before its end, or are untimed and kept), and how many are
    outside it; rows with no Submit, Start nor End are skipped in ``dq``."""
    # which allocation rows belong to the window
    pending = allocs["pending_tasks"] > 0
    t_lo = allocs["start"].fillna(allocs["submit"]).fillna(allocs["end"])
    t_hi = allocs["stop"]
    touches = (t_lo < end) & (t_hi >= start)
    touches |= pending & (allocs["submit"].isna() | (allocs["submit"] < end))
    touches |= notime
    unknown = t_lo.isna() & ~pending & ~notime
    keep = touches & ~unknown
    n_unknown = int(unknown.sum())
    if n_unknown:
        for jid in allocs.loc[unknown, "job_id"].head(MAX_LISTED):
            dq.skip("no Submit/Start/End time", 0, source or "input", None, f"JobID {jid}")
        dq.skip("no Submit/Start/End time", n_unknown)
    n_out = int((~keep & ~unknown).sum())
    return keep, n_out


def _attempts(allocs: pd.DataFrame, start, end) -> None:
    """Add ``final_attempt``, ``requeued_attempt``, ``wasted`` and ``wait_s`` to ``allocs`` (in
    place): a requeued job's rows but the last are requeued attempts, whose GPU-hours are
    waste; a job's queue wait is that of its first attempt that started in the window."""
    # a requeued job has one row per attempt (same job code): all but the last (by Start, a
    # pending attempt last) are requeued attempts, whatever their state (REQUEUED, PREEMPTED
    # with a checkpoint, NODE_FAIL): their GPU-hours are waste
    final = np.ones(len(allocs), bool)
    dup = allocs["job_code"].duplicated(keep=False).to_numpy()
    if dup.any():
        d = allocs[dup].sort_values(["job_code", "start", "submit"], na_position="last", kind="stable")
        last = ~d["job_code"].duplicated(keep="last").to_numpy()
        final[allocs.index.get_indexer(d.index)] = last
    allocs["final_attempt"] = final
    allocs["requeued_attempt"] = ~final
    allocs["wasted"] = allocs["state"].isin(WASTE_STATES) | ~final
    ready = allocs["eligible"].fillna(allocs["submit"])
    started_in = allocs["started"] & (allocs["start"] >= start) & (allocs["start"] < end)
    # once per job: its first attempt that started (a requeued job's later attempts waited for
    # the requeue, not in the queue as submitted)
    if dup.any():
        first = ~allocs.assign(_s=started_in).sort_values(["_s", "start"], ascending=[False, True], kind="stable")[
            "job_code"].duplicated(keep="first")
        started_in &= first.reindex(allocs.index)
    allocs["wait_s"] = (allocs["start"] - ready).dt.total_seconds().clip(lower=0).where(started_in)


def _checked(rows, start, end, dq: DataQuality, now, source: str, untimed: bool, running_elapsed: bool):
    """The input checks of :func:`allocations`, each problem recorded in ``dq``: steps without
    their allocation row (matched by JobID first), GPU utilization over 100 % (capped), rows
    without any time, and the rows and steps outside ``[start, end)``. Returns ``(allocs`` (a
    shallow copy of ``rows.allocs`` with ``job_code`` and the run-time columns of
    :func:`_run_times`), ``steps`` (the matched ones, capped), ``keep`` (bool per allocation
    row: in the window), ``spos`` (each step's allocation row), ``step_in`` (bool per step: its
    allocation row is kept)``)."""
    start, end = utc(start), utc(end)
    now = utc(now) if now is not None else pd.Timestamp.now(tz="UTC")
    # one integer code per allocation identity (cluster, key_id), shared by its steps
    acodes, scode = job_codes(rows)
    allocs = rows.allocs.copy(deep=False)
    allocs["job_code"] = acodes
    steps, scode = _drop_orphan_steps(allocs, rows.steps, scode, dq, source)
    steps = _cap_gpu_util(steps, dq, source)
    notime = _run_times(allocs, start, end, now, untimed, running_elapsed)
    keep, n_out = _window_rows(allocs, start, end, notime, dq, source)
    # each step belongs to one attempt (a requeued job's attempts share the job code)
    spos = attempt_of_steps(allocs["job_code"].to_numpy(), allocs["start"], scode, steps["start"])
    keep_a = keep.to_numpy(bool)
    # steps of allocations outside the window go with them
    step_in = keep_a[spos]
    dq.skip(OUTSIDE_WINDOW, n_out + int((~step_in).sum()))
    return allocs, steps, keep_a, spos, step_in


def checked_rows(rows, start, end, dq: DataQuality, now=None, source: str = "", running_elapsed: bool = False,
                 gpu_nodes: dict | None = None):
    """The input checks of :func:`allocations` over ``rows`` (a
    :class:`~slurmkit.accounting.frame.JobRows`) and ``[start, end)``, each problem recorded in
    ``dq`` as :func:`allocations` records it, without computing its per-allocation figures (the
    report's figures are SQL: :func:`slurmkit.report.period.open_rows`). With ``gpu_nodes``
    (node -> GPUs, the site profile's), the rows whose GPUs Slurm did not track have them
    unknown (:func:`untracked_gpus`, recorded for the window's rows). Returns the rows to
    report on: ``rows``, or a copy with those GPU counts unknown."""
    from slurmkit.accounting.frame import JobRows

    allocs, _, keep, _, _ = _checked(rows, start, end, dq, now, source, False, running_elapsed)
    if not gpu_nodes or not len(rows.allocs):
        return rows
    tracked = tracked_clusters(rows.allocs)
    inside = rows.allocs[keep].copy()
    untracked_gpus(inside, gpu_nodes, dq, source, tracked)
    every = rows.allocs.copy()
    if untracked_gpus(every, gpu_nodes, DataQuality(), "", tracked).any():
        return JobRows(every, rows.steps)
    return rows


def allocations(rows, start, end, dq: DataQuality, now=None,
                source: str = "", untimed: bool = False, running_elapsed: bool = False,
                gpu_nodes: dict | None = None) -> pd.DataFrame:
    """Allocation rows of ``rows`` (a :class:`~slurmkit.accounting.frame.JobRows`) in
    ``[start, end)`` (aware UTC timestamps) with the usage columns of the module docstring.
    Records unused rows in ``dq`` (so ``dq.rows_counted`` is exactly the rows used). ``now``:
    the time a running job's End is taken as (default: the current time). ``untimed``: rows
    with no Submit, Start nor End at all (a capture printed without them, as reportseff's
    ``sacct -o`` is) are kept instead of skipped, as started unless PENDING, with ``run_s`` =
    ``in_window_s`` = their ElapsedRaw / Elapsed (no time to place them in the window: the
    per-job view, :mod:`slurmkit.report.jobs`). ``running_elapsed``: a running job runs its
    ElapsedRaw / Elapsed (what sacct measured when the capture was taken; when over 0, and never
    past ``now`` or Start + Timelimit) rather than Start -> ``now``: for captures, whose
    ``now`` is the capture time; live rows come from a pull made before ``now``. ``gpu_nodes``:
    node -> GPUs (the site profile's), for :func:`untracked_gpus`; None: not known."""
    allocs, steps, keep_a, spos, step_in = _checked(rows, start, end, dq, now, source, untimed, running_elapsed)
    start, end = utc(start), utc(end)
    kept = np.flatnonzero(keep_a)
    if len(kept) < len(keep_a):
        allocs = allocs.take(kept)   # (a take is cheaper than a mask on a wide frame)
    agg = _step_usage(spos, steps, step_in, len(keep_a))
    for name, arr in agg.items():
        allocs[name] = arr[kept]
    if gpu_nodes:
        if "physical_gpus" in allocs:   # (a column of the shared frame: set on a copy)
            allocs["physical_gpus"] = allocs["physical_gpus"].copy()
        allocs["gpus"] = allocs["gpus"].copy()
        untracked_gpus(allocs, gpu_nodes, dq, source, tracked_clusters(rows.allocs))
    allocs["gpu_hours"] = allocs["gpus"] * allocs["in_window_s"] / 3600.0
    phys = allocs["physical_gpus"] if "physical_gpus" in allocs else np.nan
    allocs["physical_gpu_hours"] = phys * allocs["in_window_s"] / 3600.0
    # NCPUS not in the input: unknown (NaN), not 0
    allocs["cpu_hours"] = allocs["ncpus"] * allocs["in_window_s"] / 3600.0
    _attempts(allocs, start, end)
    # the bucket of the GPUs the job asked for (ReqTRES), else of those it got
    asked = allocs["req_gpus"].fillna(allocs["gpus"]) if "req_gpus" in allocs else allocs["gpus"]
    allocs["gpu_bucket"] = gpu_bucket(asked)
    cpu_s = allocs["total_cpu_s"].where(allocs["total_cpu_s"] > 0).fillna(allocs["step_cpu_s"])
    denom = allocs["run_s"] * allocs["ncpus"]
    allocs["cpu_eff"] = (cpu_s / denom).where(denom > 0)
    allocs["mem_eff"] = (allocs["step_mem_mib"] / allocs["alloc_mem_mib"]).where(allocs["alloc_mem_mib"] > 0)
    return allocs.reset_index(drop=True)


def tracked_clusters(allocs: pd.DataFrame) -> set[str]:
    """The clusters (sacct's Cluster) of which some allocation row has GPUs in its AllocTRES
    (``gpu_source`` AllocTRES, ``gpus`` > 0): Slurm tracked gres/gpu there
    (AccountingStorageTRES), so a job of theirs without ``gres/gpu`` had no GPU."""
    if not len(allocs) or "gpu_source" not in allocs:
        return set()
    hit = (allocs["gpu_source"].astype(str) == "AllocTRES") & (allocs["gpus"] > 0)
    col = allocs["cluster"] if "cluster" in allocs else pd.Series("", index=allocs.index)
    return {str(c) for c in col[hit].astype(object).unique()}


def untracked_gpus(allocs: pd.DataFrame, gpu_nodes: dict, dq: DataQuality, source: str = "",
                   tracked: set[str] | None = None) -> np.ndarray:
    """Mark unknown (NaN ``gpus`` and ``physical_gpus``, in place) the rows whose GPU count is 0
    because their AllocTRES has no ``gres/gpu`` (``gpu_source`` AllocTRES) while one of their
    nodes (NodeList, :func:`slurmkit.hostlist.expand_nodelist`) has GPUs in ``gpu_nodes`` (node ->
    GPUs: the site profile's node types, :func:`slurmkit.report.capacity.gpus_per_node_profile`)
    and their cluster is not in ``tracked`` (:func:`tracked_clusters` of the whole input: where
    another job shows gres/gpu in its AllocTRES, Slurm tracked it, and a job without it asked
    for no GPU: a CPU job on a GPU node, 0 GPUs). Slurm did not track gres/gpu for such a job;
    0 GPU-hours would hide it. Each row is listed in ``dq`` (:data:`GPU_UNTRACKED`, by JobID and
    nodes). Returns the rows' mask (bool numpy)."""
    n = len(allocs)
    if not n or not gpu_nodes or "nodelist" not in allocs:
        return np.zeros(n, bool)
    zero = (allocs["gpus"] == 0).to_numpy(bool, copy=True)
    if "gpu_source" in allocs:
        zero = zero & (allocs["gpu_source"].astype(str) == "AllocTRES").to_numpy(bool)
    if tracked and "cluster" in allocs:
        zero = zero & ~allocs["cluster"].astype(object).astype(str).isin(tracked).to_numpy(bool)
    if not zero.any():
        return zero
    on_gpu = {}
    for nl in allocs.loc[zero, "nodelist"].dropna().unique():
        try:
            on_gpu[nl] = any(gpu_nodes.get(x, 0) > 0 for x in hostlist.expand_nodelist(str(nl)))
        except hostlist.BadHostlist:
            on_gpu[nl] = False
    hit = zero & allocs["nodelist"].astype(object).map(lambda v: on_gpu.get(v, False)).to_numpy(bool)
    if hit.any():
        allocs.loc[hit, "gpus"] = np.nan
        if "physical_gpus" in allocs:
            allocs.loc[hit, "physical_gpus"] = np.nan
        rows = allocs.loc[hit, ["job_id", "nodelist"]]
        for i, (jid, nl) in enumerate(zip(rows["job_id"], rows["nodelist"])):
            dq.repair(GPU_UNTRACKED, source or "sacct" if i < MAX_LISTED else "", None, f"JobID {jid} on {nl}")
    return hit


def epoch_s(t: pd.Series) -> np.ndarray:
    """Aware timestamps -> float epoch seconds (NaN for NaT)."""
    ns = t.to_numpy(dtype="datetime64[ns]", na_value=np.datetime64("NaT")).view(np.int64)
    return np.where(ns == np.iinfo(np.int64).min, np.nan, ns / 1e9)
