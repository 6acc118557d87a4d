"""The names, labels and bins every report engine shares (the weekly report, :mod:`slurmkit.
report.weekly`; the period report's SQL, :mod:`slurmkit.report.period`), and the utilization
section computed from a window's GPU-hours: one home, imported by both."""

from __future__ import annotations

import math

import numpy as np

from slurmkit.report.usage import utc
from slurmkit.report.window import Window, iso_z


def _num(x):
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else round(x, 9)


#: The outcomes line of earlier attempts of requeued jobs (their ``attempts``; ``jobs`` only
#: counts a job whose later attempt is not in the window).
REQUEUED_LINE = "requeued attempts"

#: A job under this GPU utilization (percent) held its GPUs idle; the report lists the top ones.
IDLE_UTIL_PCT = 5.0
IDLE_JOBS = 20


#: The GPU type of GPUs counted without a type (``gres/gpu=4``), and of jobs whose GPU count the
#: input does not give.
GPU_UNTYPED = "untyped"
GPU_TYPE_UNKNOWN = "unknown (no GPU field)"


#: Queue-wait histogram bins (seconds, ``[lo, hi)``) and their labels.
WAIT_BINS = (0, 60, 300, 900, 3600, 4 * 3600, 12 * 3600, 86400, 3 * 86400, math.inf)
WAIT_BIN_LABELS = ("<1 min", "1-5 min", "5-15 min", "15 min-1 h", "1-4 h", "4-12 h", "12 h-1 d",
                   "1-3 d", "3 d+")


def wait_histogram(wait_s, weights=None) -> list[int]:
    """Jobs per :data:`WAIT_BINS` bin of their queue wait (seconds; NaN not counted);
    ``weights``: the jobs each value stands for (the period report's counted waits), else 1."""
    x = np.asarray(wait_s, float)
    w = None if weights is None else np.asarray(weights, float)[~np.isnan(x)]
    x = x[~np.isnan(x)]
    h = np.histogram(np.clip(x, 0, 1e12), bins=np.array(WAIT_BINS[:-1] + (1e12 + 1,)), weights=w)[0]
    return [int(round(v)) for v in h]


#: Why a figure is unknown (``report["unknown"]``), by figure.
UNKNOWN_WHY = {
    "gpu_hours": "no GPU count in the input (no AllocTRES, AllocGRES or ReqTRES field)",
    "cpu_hours": "no NCPUS or AllocCPUS field in the input",
    "energy_kwh": "no energy source (no spool measurement, no Slurm energy, no GPU TDP in the profile)",
    "gpu_utilization": "no GPU utilization in the input (no gres/gpuutil in TRESUsageInAve/TRESUsageInTot, "
                       "no spool or Prometheus figure)",
    "utilization": "no capacity (no --capacity-gpus, no site profile, no live node list)",
}


#: The outcomes line of jobs that ended before they started (cancelled while pending or held).
NEVER_STARTED_LINE = "cancelled before start"


def utilization(gpu_h: float | None, capacity_gpus: float | None, down_gpu_hours: float | None,
                window: Window, upto, capacity_from=None) -> dict:
    """The ``utilization`` section: GPU-hours / available GPU-hours, where available =
    ``capacity_gpus`` x the hours of ``capacity_period`` - ``down_gpu_hours``; None without a
    capacity. ``capacity_period`` (``{"start", "end", "why"}``, ISO UTC): from the window's start,
    or from ``capacity_from`` when it lies inside the window (the cluster's registration,
    ``sacctmgr show event`` "Cluster Registered TRES": it did not exist before), up to ``upto``
    (the capture time or now: no future hour)."""
    begin = utc(window.start)
    why = "the window's start"
    if capacity_from is not None and begin < utc(capacity_from) < utc(window.end):
        begin, why = utc(capacity_from), "the cluster's registration (sacctmgr show event: Cluster Registered TRES)"
    end = max(utc(upto), begin)
    util = {"capacity_gpus": _num(capacity_gpus), "capacity_gpu_hours": None,
            "down_gpu_hours": _num(down_gpu_hours), "available_gpu_hours": None, "utilization": None,
            "capacity_period": {"start": iso_z(begin), "end": iso_z(end), "why": f"from {why} to the capture time or now"}}
    if capacity_gpus:
        # capacity only up to the capture / now: an hour in the future holds no use yet
        cap = capacity_gpus * max((end - begin).total_seconds(), 0.0) / 3600.0
        avail = cap - (down_gpu_hours or 0.0)
        util.update(capacity_gpu_hours=_num(cap), available_gpu_hours=_num(avail),
                    utilization=_num(gpu_h / avail) if avail > 0 and gpu_h is not None else None)
    return util


def utilization_of_reported(ours: dict | None, window: dict | None) -> dict | None:
    """``utilization.of_reported``: sreport's own utilization, Allocated / Reported GPU-hours of
    the breakdown computed here (``ours``: :func:`slurmkit.report.breakdown.breakdown`'s
    ``tres``, over ``window``, the whole hours it covers): ``{"window", "allocated_gpu_hours",
    "reported_gpu_hours", "utilization"}`` (None without a Reported figure); None without the
    breakdown (no node TRES)."""
    if not ours:
        return None
    g = ours.get("gres/gpu") or {}
    al, rep = g.get("allocated"), g.get("reported")
    return {"window": window, "allocated_gpu_hours": _num(al), "reported_gpu_hours": _num(rep),
            "utilization": _num(al / rep) if al is not None and rep else None}


#: What each energy source is, in the order a job's figure is taken from them.
ENERGY_SOURCE_ORDER = ["measured (hook spool, NVML energy counters)",
                       "prometheus (the hooks' NVML energy counters read through Prometheus)",
                       "slurm (ConsumedEnergyRaw, non-zero and trusted)",
                       "slurm_tres (energy= of AllocTRES, J, non-zero and trusted: a capture without ConsumedEnergyRaw)",
                       "slurm_usage (the largest energy= of the job's steps' TRESUsageInTot, J, non-zero and "
                       "trusted: a capture with neither)",
                       "modelled (GPUs x hours x GPU TDP)"]
