"""Energy per allocation with its provenance, and the money / CO2e it implies.

Sources, in order of preference, kept apart per job (``energy_source`` column):

1. ``measured``: the hook spool (``slurmkit.hooks.spool``): NVML
   ``nvmlDeviceGetTotalEnergyConsumption`` deltas in mJ, one record per job attempt and node
   (a requeued job has one record per attempt and node, all under the same job id). Each record
   goes to the allocation attempt whose [Start, End] holds its ``start_s`` (± a few seconds,
   :data:`SPOOL_MATCH_TOLERANCE_S`); an attempt is measured when every record matched to it
   says ``source == "measured"``.
2. ``slurm``: sacct ``ConsumedEnergyRaw`` (joules, from Slurm's acct_gather_energy plugin),
   only where non-zero and the site trusts it (``trust_slurm``); then ``slurm_tres``, the
   ``energy=`` (J) of the allocation's AllocTRES, and ``slurm_usage``, the largest ``energy=``
   (J) of its steps' TRESUsageInTot (``step_energy_j`` of :func:`slurmkit.report.usage.allocations`):
   the same plugin's figures in captures without ConsumedEnergyRaw, each its own source.
3. ``modelled``: GPUs × hours × GPU TDP (W) from the profile (``node_types.<t>.gpu_tdp_w``
   matched by ``gpu_model``) or ``--gpu-tdp-w``; GPU board power only.
4. ``none``: no source (a CPU job without Slurm energy, or an unknown TDP).

Each job's energy is scaled by the share of its run inside the window. Facility kWh = kWh ×
PUE; CO2e kg = facility kWh × carbon (g/kWh) / 1000; cost = facility kWh × price per kWh +
GPU-hours × price per GPU-hour. Every assumption is returned with where it came from.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

MJ_PER_KWH = 3.6e9   # millijoules per kWh
#: Seconds a spool record's ``start_s`` (the prolog's energy read) may lie outside its
#: attempt's sacct [Start, End] (prolog / epilog run just after Start / End).
SPOOL_MATCH_TOLERANCE_S = 5.0
J_PER_KWH = 3.6e6    # joules per kWh


@dataclass
class Assumptions:
    """Energy and cost assumptions and where each came from (``origin``: key -> "profile
    <path>", "--option" or "not set"). ``gpu_tdp_w``: GPU type (lower case) -> watts;
    ``default_tdp_w``: for GPUs of unknown type (None: not modelled)."""

    pue: float | None = None
    carbon_g_per_kwh: float | None = None
    price_per_kwh: float | None = None
    price_per_gpu_hour: float | None = None
    currency: str = ""
    gpu_tdp_w: dict = field(default_factory=dict)
    default_tdp_w: float | None = None
    trust_slurm: bool = True
    origin: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"pue": self.pue, "carbon_g_per_kwh": self.carbon_g_per_kwh,
                "price_per_kwh": self.price_per_kwh, "price_per_gpu_hour": self.price_per_gpu_hour,
                "currency": self.currency, "gpu_tdp_w": dict(self.gpu_tdp_w),
                "default_tdp_w": self.default_tdp_w, "trust_slurm_energy": self.trust_slurm,
                "origin": dict(self.origin)}


def assumptions_from_profile(profile, path: str = "") -> Assumptions:
    """Energy and cost assumptions of a loaded ``slurmkit.profile.Profile``: its ``.report``
    section (PUE, gCO2e/kWh, prices, currency; None stays unset) and each node type's
    GPU groups' ``tdp_w`` (W; ``gpu_tdp_w`` of the one-group form) by gres type (lower case); the
    TDP of untyped GPU groups (when they agree) is the default for GPUs sacct gives no type. ``path``: the name in ``origin`` (default
    the profile's ``source``)."""
    a = Assumptions()
    path = path or profile.source
    where = f"profile {path}" if path else "profile"
    rep = profile.report
    for key in ("pue", "carbon_g_per_kwh", "price_per_kwh", "price_per_gpu_hour"):
        val = getattr(rep, key)
        if val is not None:
            setattr(a, key, float(val))
            a.origin[key] = where
    if rep.currency:
        a.currency, a.origin["currency"] = rep.currency, where
    untyped = set()
    for nt in profile.node_types.values():
        for grp in nt.gpu_groups:
            if grp.tdp_w and grp.model:
                a.gpu_tdp_w[grp.model.lower()] = float(grp.tdp_w)
            elif grp.tdp_w:
                untyped.add(float(grp.tdp_w))
    if len(untyped) == 1:  # untyped GPUs (gres/gpu without a type) take the default
        a.default_tdp_w = next(iter(untyped))
        a.origin["default_tdp_w"] = where + " (its untyped GPU group's tdp_w)"
    if a.gpu_tdp_w:
        a.origin["gpu_tdp_w"] = where
        if len(set(a.gpu_tdp_w.values())) == 1 and not untyped:
            a.default_tdp_w = next(iter(a.gpu_tdp_w.values()))
            a.origin["default_tdp_w"] = where + " (the only GPU TDP in it)"
    return a


def read_spool(path) -> tuple[pd.DataFrame, list[str]]:
    """Hook spool -> DataFrame(job_id, node, start_s, end_s, energy_mj, measured, gpu_util_pct,
    policy) and problems, one row per :class:`slurmkit.hooks.spool.SpoolRecord` (read by the
    hooks' own reader, :func:`slurmkit.hooks.spool.read`). ``start_s`` / ``end_s``: epoch seconds
    of the prolog's / epilog's energy read; ``energy_mj``: the record's ``energy_mj_total`` (mJ);
    NaN when the record has none. ``gpu_util_pct``: the mean over the record's GPUs of their
    NVML accounting utilization (``nvmlDeviceGetAccountingStats``, %; NaN when the record has
    no accounting figure). ``policy``: the clock policy the job ran under
    (:attr:`slurmkit.hooks.clock_policy.JobPolicy.label`; ``none recorded`` when the record
    has none).

    ``path``: a spool file (``energy.jsonl``) or a directory of ``*.jsonl`` files. Lines that
    do not parse are listed as ``file:line: why``, a file that cannot be opened as ``file: why``."""
    from slurmkit.hooks.clock_policy import NONE_RECORDED
    from slurmkit.hooks.spool import read

    files = sorted(glob.glob(os.path.join(path, "*.jsonl"))) if os.path.isdir(path) else [path]
    recs, problems = [], []
    for f in files:
        try:
            got, bad = read(f)
        except OSError as exc:
            problems.append(f"{f}: {exc.strerror}")
            continue
        problems.extend(bad)
        nan = np.nan
        recs.extend({"job_id": r.job_id, "node": r.node,
                     "start_s": nan if r.start_s is None else r.start_s,
                     "end_s": nan if r.end_s is None else r.end_s,
                     "energy_mj": nan if r.energy_mj_total is None else float(r.energy_mj_total),
                     "measured": r.measured,
                     "gpu_util_pct": nan if r.gpu_util_pct is None else r.gpu_util_pct,
                     "policy": r.policy.label if r.policy is not None else NONE_RECORDED} for r in got)
    df = pd.DataFrame(recs, columns=["job_id", "node", "start_s", "end_s", "energy_mj", "measured",
                                     "gpu_util_pct", "policy"])
    return df, problems


def match_spool(allocs: pd.DataFrame, spool: pd.DataFrame,
                tolerance_s: float = SPOOL_MATCH_TOLERANCE_S) -> np.ndarray:
    """For each spool record, the row position in ``allocs`` of the allocation attempt it
    belongs to (-1: none). A record belongs to the attempt with the same raw job id
    (``key_id``) whose sacct [Start, End] (a running attempt: open-ended) holds its ``start_s``
    within ``tolerance_s`` seconds; when two back-to-back attempts both hold it, the one that
    started later. A record without ``start_s`` goes to the job's only attempt (none when the
    job has several). Vectorised: one merge of the records with the attempts of their job ids."""
    out = np.full(len(spool), -1, dtype=np.int64)
    if spool.empty or allocs.empty:
        return out
    ids = spool["job_id"].astype(str)
    sel = np.flatnonzero(allocs["key_id"].isin(pd.unique(ids)).to_numpy())
    if not len(sel):
        return out
    epoch = pd.Timestamp(0, tz="UTC")
    sub = allocs.iloc[sel]
    right = pd.DataFrame({"job_id": sub["key_id"].astype(str).to_numpy(), "pos": sel,
                          "s": (sub["start"] - epoch).dt.total_seconds().to_numpy(float),
                          "e": (sub["end"] - epoch).dt.total_seconds().fillna(np.inf).to_numpy(float)})
    left = pd.DataFrame({"job_id": ids.to_numpy(), "rec": np.arange(len(spool)),
                         "t": spool["start_s"].to_numpy(float)})
    m = left.merge(right, on="job_id", how="inner")
    attempts = m.groupby("rec")["pos"].transform("size")
    inside = (m["t"] >= m["s"] - tolerance_s) & (m["t"] <= m["e"] + tolerance_s)
    m = m[inside | (m["t"].isna() & (attempts == 1))]
    m = m.sort_values(["rec", "s"]).drop_duplicates("rec", keep="last")
    out[m["rec"].to_numpy()] = m["pos"].to_numpy()
    return out


#: ``clock_policy`` of an attempt whose spool records (one per node) name different policies.
MIXED_POLICIES = "mixed"

#: The values of ``energy_source`` (a categorical): no source, then the sources in order of
#: preference; ``prometheus`` (measured by the hooks, read through Prometheus where the spool has
#: no record: :mod:`slurmkit.report.prometheus`) ranks with ``measured`` and comes last only to keep
#: the codes of the others.
SOURCES = ("none", "measured", "slurm", "modelled", "prometheus", "slurm_tres", "slurm_usage")

#: The sources a job's energy comes from, in order of preference, as the report names them
#: (totals, the energy table and chart): ``slurm`` is ConsumedEnergyRaw, ``slurm_tres`` the
#: ``energy=`` (J) of the allocation's AllocTRES (a capture without ConsumedEnergyRaw),
#: ``slurm_usage`` the largest ``energy=`` (J) of the allocation's steps' TRESUsageInTot (a
#: capture with neither).
REPORTED_SOURCES = ("measured", "prometheus", "slurm", "slurm_tres", "slurm_usage", "modelled")


def _tdp_w(gpu_type: pd.Series, table: dict) -> pd.Series:
    """The profile's TDP (W) of each row's GPU type (matched lower-case), NaN when not listed;
    a categorical column is looked up once per category."""
    if isinstance(gpu_type.dtype, pd.CategoricalDtype):
        per_cat = pd.Series(gpu_type.cat.categories, dtype="str").str.lower().map(table)
        per_cat = np.append(per_cat.to_numpy(dtype="float64", na_value=np.nan), np.nan)
        return pd.Series(per_cat[gpu_type.cat.codes.to_numpy()], index=gpu_type.index)  # code -1: NaN
    return gpu_type.str.lower().map(table).astype("float64")


#: data-quality reason of a spool record of a job in the window that no attempt holds in time.
UNMATCHED_REASON = "spool record outside its job's sacct Start..End"


def list_unmatched(spool: pd.DataFrame, positions, dq, limit: int = 20) -> None:
    """List in ``dq`` (a :class:`~slurmkit.accounting.quality.DataQuality`, reason
    :data:`UNMATCHED_REASON`, no sacct row count changed) the first ``limit`` spool records at
    ``positions`` (rows of ``spool``, :func:`read_spool`): records of a job in the input that no
    attempt holds in time, with the job, the node and the prolog's time."""
    for i in list(positions)[:limit]:
        r = spool.iloc[int(i)]
        when = "no start time" if pd.isna(r["start_s"]) else \
            pd.Timestamp(float(r["start_s"]), unit="s", tz="UTC").isoformat()
        dq.skip(UNMATCHED_REASON, n=0, source="spool",
                detail=f"job {r['job_id']} node {r['node']}: prolog at {when}, outside every attempt's "
                       f"Start..End (± {SPOOL_MATCH_TOLERANCE_S:g} s): its measured energy is not used "
                       "(node clock skew, or sacct times in another time zone?)")


def attach_energy(allocs: pd.DataFrame, a: Assumptions, spool: pd.DataFrame | None = None,
                  dq=None) -> pd.DataFrame:
    """Add ``energy_kwh`` (in the window) and ``energy_source`` (one of :data:`SOURCES`:
    measured | prometheus | slurm | slurm_tres | slurm_usage | modelled | none; ``energy_kwh``
    NaN, unknown, for none) to the allocation frame, plus ``spool_gpu_util_pct``
    and ``clock_policy`` (the spool records' ``policy``: one label, :data:`MIXED_POLICIES` when the
    attempt's records disagree, ``none recorded`` when it has none). Spool records go to the
    allocation attempt that holds them in time (:func:`match_spool`), so each attempt of a
    requeued job gets its own measured energy; an attempt without (all-measured) records falls
    back to Slurm or the model — never both measured and modelled. A record of a job in the
    frame that no attempt holds in time (node clock skew, sacct times read in another time zone)
    is not used: counted in ``out.attrs["spool_unmatched"]`` and, with ``dq`` (a
    :class:`~slurmkit.accounting.quality.DataQuality`), listed there (reason
    :data:`UNMATCHED_REASON`; the sacct row counts are unchanged). Adds the columns in place and
    returns the same frame."""
    out = allocs  # columns are added in place (the frame is the caller's working copy)
    # share of the run inside the window; a job that ran under a second (ElapsedRaw 0) and is in
    # the frame lies in the window: all of its measured / Slurm energy counts
    share = (out["in_window_s"] / out["run_s"]).where(out["run_s"] > 0, 1.0).fillna(0.0)
    kwh = pd.Series(np.nan, index=out.index, dtype="float64")
    src = np.zeros(len(out), np.int8)   # index into SOURCES
    out["spool_gpu_util_pct"] = np.nan
    from slurmkit.hooks.clock_policy import NONE_RECORDED

    policy = None   # (made when a spool record has a label: a string per row costs)
    unmatched = 0
    if spool is not None and not spool.empty:
        pos = match_spool(out, spool)
        hit = pos >= 0
        lost = ~hit & spool["job_id"].astype(str).isin(pd.unique(out["key_id"].astype(str))).to_numpy()
        unmatched = int(lost.sum())
        if unmatched and dq is not None:
            list_unmatched(spool, np.flatnonzero(lost), dq)
        recs = pd.DataFrame({"pos": pos[hit], "mj": spool["energy_mj"].to_numpy(float)[hit],
                             "ok": spool["measured"].to_numpy(bool)[hit],
                             "util": pd.to_numeric(spool["gpu_util_pct"], errors="coerce")
                             .to_numpy(float)[hit],
                             "prom": (spool["provenance"] == "prometheus").to_numpy(bool)[hit]
                             if "provenance" in spool else np.zeros(int(hit.sum()), bool)})
        per = recs.groupby("pos").agg(mj=("mj", "sum"), ok=("ok", "all"), util=("util", "mean"),
                                      prom=("prom", "any"))
        m = pd.Series(np.nan, index=out.index, dtype="float64")
        idx = out.index[per.index.to_numpy()]
        m[idx] = per["mj"].where(per["ok"]).to_numpy(float)
        util = np.full(len(out), np.nan)
        util[per.index.to_numpy()] = per["util"].to_numpy(float)
        out["spool_gpu_util_pct"] = util
        has = m.notna()
        kwh[has] = m[has] / MJ_PER_KWH * share[has]
        src[has.to_numpy()] = 1
        prom = np.zeros(len(out), bool)
        prom[per.index.to_numpy()] = per["prom"].to_numpy(bool)
        src[has.to_numpy() & prom] = SOURCES.index("prometheus")
        if "policy" in spool:  # rows filled from Prometheus carry none
            labels = pd.DataFrame({"pos": pos[hit], "policy": spool["policy"].fillna(NONE_RECORDED)
                                   .astype(str).to_numpy()[hit]}).drop_duplicates()
            first = labels.drop_duplicates("pos")
            many = labels["pos"].value_counts().reindex(first["pos"]).to_numpy() > 1
            policy = np.full(len(out), NONE_RECORDED, dtype=object)
            policy[first["pos"].to_numpy()] = np.where(many, MIXED_POLICIES, first["policy"].to_numpy())
    if policy is None and len(out):   # no label: one category, a code per row
        out["clock_policy"] = pd.Categorical.from_codes(np.zeros(len(out), np.int8), pd.Index([NONE_RECORDED]))
    else:
        out["clock_policy"] = pd.Categorical(policy if policy is not None else np.full(0, NONE_RECORDED, dtype=object))
    if a.trust_slurm:
        sl = (out["energy_j"] > 0) & kwh.isna()
        kwh[sl] = out.loc[sl, "energy_j"] / J_PER_KWH * share[sl]
        src[sl.to_numpy()] = 2
        if "energy_tres_j" in out:   # energy= in AllocTRES: Slurm's energy, its own provenance
            st = (out["energy_tres_j"] > 0) & kwh.isna()
            kwh[st] = out.loc[st, "energy_tres_j"] / J_PER_KWH * share[st]
            src[st.to_numpy()] = SOURCES.index("slurm_tres")
        if "step_energy_j" in out:   # energy= in the steps' TRESUsageInTot (the largest step)
            su = (out["step_energy_j"] > 0) & kwh.isna()
            kwh[su] = out.loc[su, "step_energy_j"] / J_PER_KWH * share[su]
            src[su.to_numpy()] = SOURCES.index("slurm_usage")
    tdp = _tdp_w(out["gpu_type"], a.gpu_tdp_w)
    if a.default_tdp_w:
        tdp = tdp.fillna(a.default_tdp_w)
    mo = kwh.isna() & (out["gpus"] > 0) & tdp.notna()
    kwh[mo] = (out["gpus"] * tdp * out["in_window_s"] / 3600.0 / 1000.0)[mo]
    src[mo.to_numpy()] = 3
    out["energy_kwh"] = kwh   # NaN (unknown, blank in jobs.csv) where no source knows it
    out["energy_source"] = pd.Categorical.from_codes(src, SOURCES)
    out.attrs["spool_unmatched"] = unmatched
    return out


def energy_coverage(jobs: int, jobs_unknown: int, cpu_hours: float | None, cpu_hours_energy: float | None,
                    gpu_hours: float | None, gpu_hours_energy: float | None, known: bool) -> dict:
    """What an energy figure covers (``totals.energy_coverage``; the text is
    :func:`slurmkit.report.render.energy_coverage_text`), from a window's (or a group's) sums over
    its runs: ``jobs`` (distinct), ``jobs_unknown`` (distinct jobs with a run of no energy source:
    a job whose attempts are known only in part is unknown), ``cpu_hours`` / ``gpu_hours`` and
    those of the runs with a source (``*_energy``; None where not known). Returns ``{"jobs",
    "jobs_with_energy", "jobs_unknown", "cpu_hours_share", "gpu_hours_share"`` (the runs with a
    source over all, 0..1; None without such hours or where they are unknown), ``"complete"``
    (every job has a source), ``"known"`` (some job has one: else the energy is unknown, not 0)}``."""
    def share(part, whole):
        if not whole or whole != whole:
            return None
        return round((0.0 if part is None or part != part else float(part)) / float(whole), 9)

    return {"jobs": int(jobs), "jobs_with_energy": int(jobs) - int(jobs_unknown), "jobs_unknown": int(jobs_unknown),
            "cpu_hours_share": share(cpu_hours_energy, cpu_hours), "gpu_hours_share": share(gpu_hours_energy, gpu_hours),
            "complete": bool(known) and not jobs_unknown, "known": bool(known)}


def costs(kwh: float | None, gpu_hours: float | None, a: Assumptions) -> dict:
    """Facility kWh, CO2e (kg) and cost from IT energy ``kwh`` and ``gpu_hours``; a figure is
    None when its assumption is not set or ``kwh`` is None (energy unknown; the total cost is
    then unknown too when a price per kWh is set; likewise ``gpu_hours`` None and a price per
    GPU-hour)."""
    fac = kwh * a.pue if a.pue is not None and kwh is not None else None
    base = fac if fac is not None else None
    co2 = base * a.carbon_g_per_kwh / 1000.0 if base is not None and a.carbon_g_per_kwh is not None else None
    cost_e = base * a.price_per_kwh if base is not None and a.price_per_kwh is not None else None
    cost_g = gpu_hours * a.price_per_gpu_hour if a.price_per_gpu_hour is not None and gpu_hours is not None else None
    cost = None if cost_e is None and cost_g is None else (cost_e or 0.0) + (cost_g or 0.0)
    if kwh is None and a.price_per_kwh is not None:
        cost = None
    if gpu_hours is None and a.price_per_gpu_hour is not None:
        cost = None
    return {"facility_kwh": fac, "co2e_kg": co2, "cost_energy": cost_e, "cost_gpu_hours": cost_g,
            "cost_total": cost, "currency": a.currency}
