"""Render the weekly report dict (:func:`slurmkit.report.weekly.build_report`) to files.

- :func:`to_html`: one self-contained HTML page (jinja2 template ``templates/weekly.html.j2``,
  plots as inline base64 PNG, no scripts, fonts or external URLs)
- :func:`to_markdown`: the same tables as Markdown
- :func:`write_outputs`: ``weekly.html``, ``weekly.md``, ``weekly.json``, CSV tables
  (``by_user.csv``, ``by_account.csv``, ``by_partition.csv``, ``by_qos.csv``,
  ``by_gpu_type.csv``, ``energy_by_policy.csv``, ``outcomes.csv``, ``queue_wait.csv``, ``queue_wait_hist.csv``, ``backlog.csv``, ``downtime.csv``, ``down_by_reason.csv``, ``trends.csv``, ``hourly.csv``, ``breakdown.csv``, ``accounts.csv``,
  ``efficiency_by_user.csv``, ``idle_jobs.csv``, ``jobs.csv``, ``data_quality.csv``) and ``jobs.parquet`` (the per-allocation frame)
"""

from __future__ import annotations

import base64
import csv
import dataclasses
import json
import math
import re
from pathlib import Path

from slurmkit.accounting.quality import Problem, rejected_text
from slurmkit.report.energy import REPORTED_SOURCES

FORMATS = ("html", "md", "csv", "json", "parquet")
_GROUPS = [("account", "by_account", "account"), ("user", "by_user", "user"),
           ("partition", "by_partition", "partition"), ("QOS", "by_qos", "qos"),
           ("GPU type", "by_gpu_type", "gpu_type")]


def fmt(x, sig: int = 3) -> str:
    """A number for people: ``sig`` significant digits for small values (0.229, 0.0451, 4.00,
    12.3), whole numbers with thousands separators from 100 up (242, 12,345); "–" for None/NaN.
    Integers are printed exactly (1,234)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if isinstance(x, (bool,)):
        return str(x)
    if isinstance(x, int):
        return f"{x:,}"
    x = float(x)
    if x == 0:
        return "0"
    if math.isinf(x):
        return "∞" if x > 0 else "-∞"
    r = float(f"{x:.{sig}g}")          # rounded first: 99.96 -> 100, not 100.0
    digits = sig - 1 - math.floor(math.log10(abs(r)))
    if digits <= 0:
        return f"{x:,.0f}"
    if digits > 9:
        return f"{x:.{sig}g}"
    return f"{r:,.{digits}f}"


def cell(v):
    """A table cell's value for people: an int or float as :func:`fmt` writes it (``2,496,991``,
    ``0.229``), anything else as it is. Every HTML page (:func:`html_env`) and Markdown table
    (:func:`_md_table`) prints its numbers through it: a count reads the same in every row."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return fmt(v)
    return v


def html_env():
    """The jinja2 environment of the HTML reports (templates/, autoescaped, undefined names an
    error): every ``{{ number }}`` printed through :func:`cell`."""
    import jinja2

    return jinja2.Environment(loader=jinja2.PackageLoader("slurmkit.report", "templates"),
                              autoescape=True, undefined=jinja2.StrictUndefined, finalize=cell)


def pct(x) -> str:
    """A ratio as a percentage with the same digits as :func:`fmt` ("–" for None)."""
    return "–" if x is None else f"{fmt(100.0 * float(x))} %"


def cpu_efficiency_text(e: dict, unknown: dict | None = None) -> str:
    """The CPU-efficiency phrase of the efficiency section (HTML and Markdown), from the
    report's ``efficiency``: ``cpu_efficiency`` (TotalCPU / (NCPUS x run time) over finished
    jobs with a TotalCPU) and ``cpu_hours_share`` (the share of the window's CPU-hours those jobs
    hold), said as "measured on N % of the CPU-hours" (never "over 100 %", which reads as an
    efficiency above 100 %); "unknown" with why: no NCPUS (``unknown``: the report's
    ``unknown``, ``cpu_hours`` in it), else no finished job with a TotalCPU."""
    eff, share = e.get("cpu_efficiency"), e.get("cpu_hours_share")
    if eff is None and "cpu_hours" in (unknown or {}):
        return f"CPU efficiency unknown ({unknown['cpu_hours']})"
    if eff is None:
        return "CPU efficiency unknown (no finished job with a TotalCPU)"
    if share is None:
        return f"CPU efficiency {pct(eff)} (finished jobs with a TotalCPU)"
    if share >= 0.9995:
        return f"CPU efficiency {pct(eff)} (TotalCPU / NCPUS x run time, measured on all of the CPU-hours)"
    return (f"CPU efficiency {pct(eff)} (TotalCPU / NCPUS x run time, measured on {pct(share)} of the CPU-hours: "
            "the finished jobs with a TotalCPU)")


def dur(s) -> str:
    """Seconds as ``1d 02:03`` / ``02:03:04`` ("–" for None)."""
    if s is None:
        return "–"
    s = int(round(s))
    d, rem = divmod(s, 86400)
    h, rem = divmod(rem, 3600)
    m, sec = divmod(rem, 60)
    return f"{d}d {h:02d}:{m:02d}" if d else f"{h:02d}:{m:02d}:{sec:02d}"


def signed(x) -> str:
    """A change with its sign (+0.229, -1,234) ("–" for None)."""
    if x is None:
        return "–"
    return ("+" if float(x) >= 0 else "") + fmt(x)


#: What the energy figures read when no job has any energy source.
ENERGY_UNKNOWN = "unknown (no measurement, no Slurm energy, no GPU TDP in the profile)"


#: The figures :func:`slurmkit.report.weekly.unknown_figures` may name, as the report says them.
UNKNOWN_LABELS = {"gpu_hours": "GPU-hours (and GPU jobs, waste, GPUs in use, cost per GPU-hour)",
                  "cpu_hours": "CPU-hours", "energy_kwh": "energy (and facility energy, CO2e, energy cost)",
                  "gpu_utilization": "GPU utilization (and GPU-hours at ~0 %, idle jobs)",
                  "utilization": "utilization"}


def known(report: dict, key: str, x, show=None) -> str:
    """``x`` formatted (``show``, default :func:`fmt`), or "unknown" when it is None because the
    report's ``unknown`` names ``key`` (no input for it), never "–" or 0."""
    if x is None and key in (report.get("unknown") or {}):
        return "unknown"
    return (show or fmt)(x)


def _util_pct(x) -> str:
    # no figure though the input has utilization: no GPU job of the window has a measurement
    return "– (no GPU job with a measurement)" if x is None else f"{fmt(x)} %"


def requested_note(report: dict) -> str:
    """Why the GPU-hours are what jobs asked for, not what they got ("" when none is): all of
    them ("requested: no AllocTRES/AllocGRES in the capture") or some ("X of them requested:
    ..."). From ``totals.gpu_hours_from_request`` (the rows whose GPU count came from ReqTRES)
    against ``totals.gpu_hours``."""
    t = report.get("totals") or {}
    req, gh = t.get("gpu_hours_from_request"), t.get("gpu_hours")
    if not req or gh is None:
        return ""
    if abs(req - gh) <= 1e-9 * max(abs(gh), 1.0):
        return "requested: no AllocTRES/AllocGRES in the capture"
    return f"{fmt(req)} of them requested: rows without AllocTRES/AllocGRES"


def physical_text(t: dict) -> str:
    """The physical GPU-hours line of a report's ``totals`` (weekly or a period's window): MIG
    instances weighed by their share of the GPU beside the GPU-hours, which count an instance
    as one GPU as sreport does; "" when the totals have no physical figure."""
    if "physical_gpu_hours" not in t:
        return ""
    ph, gh = t["physical_gpu_hours"], t.get("gpu_hours")
    if ph is None:
        head = "Physical GPU-hours unknown (no allocation with GPUs has a known share of its GPU)"
    else:
        head = (f"Physical GPU-hours {fmt(ph)}: MIG instances weighed by their share of the GPU (compute slices, "
                f"a 3g instance of an A100 is 3/7); the GPU-hours ({_or_unknown(gh)}) count an instance as one GPU, "
                "as sreport does")
    n = t.get("allocation_rows_physical_unknown") or 0
    return head + (f"; {n} allocation row(s) with GPUs whose share of a GPU is not known are not in it" if n else "") + "."


def gpu_h_header(report: dict, base: str = "GPU-hours") -> str:
    """A table header of GPU-hours, marked "(requested)" when they all come from ReqTRES and
    "(some requested)" when part of them do (:func:`requested_note`)."""
    note = requested_note(report)
    return base if not note else f"{base} (requested)" if note.startswith("requested") else f"{base} (some requested)"


def unknown_lines(report: dict) -> list[str]:
    """One sentence per unknown figure: what it is and why it is unknown."""
    return [f"Unknown: {UNKNOWN_LABELS.get(k, k)} — {why}." for k, why in (report.get("unknown") or {}).items()]


def energy_known(report: dict) -> bool:
    """False when no job in the report has an energy source (its 0 kWh is not a measurement)."""
    return bool(report["totals"].get("energy_known", True))


def kwh(report: dict, x, long: bool = False) -> str:
    """An energy figure in kWh (unit included), or "unknown" when the report's energy is
    unknown (``long``: with the reason)."""
    if not energy_known(report):
        return ENERGY_UNKNOWN if long else "unknown"
    return "–" if x is None else f"{fmt(x)} kWh"


def energy_coverage_text(t: dict, short: bool = False) -> str:
    """The energy of a ``totals`` (the weekly report's, a period's or a part's) with what it
    covers (``t["energy_coverage"]``, :func:`slurmkit.report.energy.energy_coverage`): "299 kWh
    from 2 of 3 jobs, 43 % of CPU-hours; 1 job unknown" (``short``: "299 kWh (2 of 3 jobs)"),
    "5.71 kWh from all 4 jobs" ("5.71 kWh"), or unknown with why (short: "unknown"): a partial
    figure is never said without its coverage, an unknown one never as 0."""
    c = t.get("energy_coverage") or {}
    e = t.get("energy_kwh")
    if e is None or not c.get("known", t.get("energy_known", True)):
        return "unknown" if short else ENERGY_UNKNOWN
    if c.get("complete", True) or not c:
        n = c.get("jobs")
        return f"{fmt(e)} kWh" + ("" if short or n is None else f" from all {fmt(n)} job{'' if n == 1 else 's'}")
    k, n, u = c["jobs_with_energy"], c["jobs"], c["jobs_unknown"]
    if short:
        return f"{fmt(e)} kWh ({fmt(k)} of {fmt(n)} jobs)"
    shares = [f"{pct(c[f'{h}_hours_share'])} of {h.upper()}-hours" for h in ("cpu", "gpu")
              if c.get(f"{h}_hours_share") is not None]
    return (f"{fmt(e)} kWh from {fmt(k)} of {fmt(n)} jobs" + "".join(f", {x}" for x in shares)
            + f"; {fmt(u)} job{'' if u == 1 else 's'} unknown")


#: The figures derived from the energy, with their units (``totals``' keys).
DERIVED_UNITS = {"facility_kwh": "kWh", "co2e_kg": "kg"}


def derived_text(t: dict, key: str) -> str:
    """A figure derived from the energy of ``totals`` ``t`` (``facility_kwh``, ``co2e_kg``,
    ``cost_total``) as the tables say it, with the energy's coverage where that is partial:
    "86.0 kWh (9 of 64 jobs)" (a partial figure is never said without it); "unknown" where
    the energy is; "–" where no assumption is set (a total cost: where no price is, or a price
    applies to an unknown figure). A total cost unknown for its energy part says the part that
    is known: "330.6 EUR for GPU-hours; energy cost unknown"."""
    x = t.get(key)
    unit = DERIVED_UNITS.get(key) or (t.get("currency") or "")
    c = t.get("energy_coverage") or {}
    energy_known = c.get("known", t.get("energy_known", True)) and t.get("energy_kwh") is not None
    if x is None:
        if key == "cost_total" and t.get("cost_gpu_hours") is not None and not energy_known:
            return f"{fmt(t['cost_gpu_hours'])} {unit}".strip() + " for GPU-hours; energy cost unknown"
        if key == "cost_total":
            return "–"
        return "unknown" if not energy_known else "–"
    partial = energy_known and c and not c.get("complete", True) and \
        (key != "cost_total" or t.get("cost_energy") is not None)
    cover = f" ({fmt(c['jobs_with_energy'])} of {fmt(c['jobs'])} jobs)" if partial else ""
    return f"{fmt(x)} {unit}".strip() + cover


def group_kwh(report: dict, g: dict) -> str:
    """A group row's kWh (``by_user`` ...) with the jobs it misses ("5.71 (1 job unknown)"),
    "unknown" when the report's energy or the group's is unknown."""
    if not energy_known(report) or g.get("energy_kwh") is None:
        return "unknown"
    u = g.get("energy_jobs_unknown") or 0
    return fmt(g["energy_kwh"]) + (f" ({fmt(u)} job{'' if u == 1 else 's'} unknown)" if u else "")


def energy_by_source_text(t: dict) -> str:
    """The sources an energy total comes from, with their kWh ("slurm 5.71 kWh, modelled 120
    kWh"; :data:`slurmkit.report.energy.REPORTED_SOURCES` order), "–" when none has any or the
    energy is unknown: never a column of 0 kWh per source beside the total."""
    by = t.get("energy_kwh_by_source") or {}
    if t.get("energy_kwh") is None or not t.get("energy_known", True):
        return "–"
    got = [f"{s} {fmt(by[s])} kWh" for s in REPORTED_SOURCES if by.get(s)]
    return ", ".join(got) or "–"


def modelled_pct(t: dict) -> str:
    """"N % modelled" (the share of the energy modelled from TDP), "" when none is modelled or
    the energy is unknown."""
    m, total = (t.get("energy_kwh_by_source") or {}).get("modelled"), t.get("energy_kwh")
    if not m or not total or not t.get("energy_known", True):
        return ""
    return f"{pct(m / total)} modelled"


def no_energy_text(t: dict) -> str:
    """How many GPU-hours have no energy figure (no source knows it), "" when none lack one."""
    gh = t.get("gpu_hours_without_energy")
    if not gh:
        return ""
    return (f"{fmt(gh)} of the {fmt(t.get('gpu_hours'))} GPU-hours have no energy figure (no measurement, "
            f"no Slurm energy, no GPU TDP): the energy misses them.")


def _md_energy(r: dict) -> list[str]:
    """The Markdown energy provenance table: kWh and jobs by source, as in the HTML."""
    t = r["totals"]
    jobs = (r.get("energy_sources") or {}).get("jobs") or t.get("energy_jobs_by_source") or {}
    rows = [[s, fmt(t["energy_kwh_by_source"].get(s)) if energy_known(r) else "unknown", jobs.get(s, 0)]
            for s in REPORTED_SOURCES]
    rows.append(["none", "–", jobs.get("none", 0)])
    note = modelled_pct(t)
    return ["## Energy and its provenance", "", _md_table(["source", "kWh", "jobs"], rows), "",
            *([f"Energy: {note} from TDP (GPUs x hours x GPU TDP).", ""] if note else [])]


#: What the energy-by-policy table counts (HTML and Markdown).
POLICY_NOTE = ("GPU jobs by the clock policy their spool records name (the partition's policy the "
               "prolog set, else the node type's resting one). Energy is measured energy only (NVML "
               "counters from the spool or Prometheus), over the GPU-hours that have it; a policy "
               "that was not (fully) applied is listed apart; jobs without a recorded policy are "
               "under \"none recorded\".")


def _md_policy(r: dict) -> list[str]:
    """The Markdown energy-per-GPU-hour-by-clock-policy table ([] when the report has no GPU job)."""
    rows = r.get("energy_by_policy") or []
    if not rows:
        return []
    return ["## Energy per GPU-hour by clock policy", "", _md_table(
        ["policy", "jobs", "GPU-hours", "measured GPU-hours", "energy kWh", "kWh per GPU-hour"],
        [[p["policy"], p["jobs"], fmt(p["gpu_hours"]), fmt(p["measured_gpu_hours"]), fmt(p["energy_kwh"]),
          fmt(p["kwh_per_gpu_hour"])] for p in rows]), "", POLICY_NOTE, ""]


def recon_text(rc: dict | None) -> str:
    """The reconciliation line (plain text; "" when there is none): per-job GPU-hours vs
    sreport over the whole hours sreport covers, the jobs to check when flagged, or why it was
    not reconciled."""
    if not rc:
        return ""
    if rc.get("status") == "not_reconciled":
        return f"Reconciliation with sreport: not reconciled: {rc.get('note') or 'no GPU time to compare'}."
    span = f"{rc['window']['start']} – {rc['window']['end']}"
    head = (f"Reconciliation over {span}: jobs {fmt(rc['jobs_gpu_hours'])} GPU-hours vs sreport "
            f"{fmt(rc['sreport_gpu_hours'])}")
    if not rc["flagged"]:
        return f"{head} ({pct(rc['relative'])} apart)."
    apart = f"{pct(rc['relative'])} apart" if rc.get("relative") is not None else "sreport reports none"
    jobs = rc.get("jobs_to_check") or []
    check = (f"check jobs {', '.join(jobs)}" if jobs
             else "no job here has GPU time in these hours: check sreport's accounts and users")
    note = f" {rc['note']}" if rc.get("note") else ""
    return f"{head} ({apart}, over 1 %: {check}).{note}"


def memory_note(e: dict) -> str:
    """Why memory efficiency can exceed 100 % ("" when no allocation did)."""
    n = e.get("allocations_over_memory") or 0
    if not n:
        return ""
    return (f"{fmt(n)} allocation(s) used more memory than allocated (largest step's TRESUsageInTot "
            f"mem vs AllocTRES mem): the limit was not enforced (no cgroup ConstrainRAMSpace), "
            f"and jobacct_gather/linux counts shared pages in every process's RSS.")


def outcome_label(o: dict) -> str:
    """An outcomes line's name: the final state, or "requeued attempts (REQUEUED 1, PREEMPTED 1)"."""
    if o.get("states"):
        return f"{o['state']} ({', '.join(f'{k} {v}' for k, v in o['states'].items())})"
    return o["state"]


def _or_unknown(x) -> str:
    """:func:`fmt` of ``x``, "unknown" for None (a figure the input cannot give)."""
    return "unknown" if x is None else fmt(x)


def backlog_text(t: dict) -> str:
    """The pending backlog line: jobs (array tasks each) waiting at the capture / now, GPUs and
    GPU-hours they request (requested GPUs × time limit, an upper bound)."""
    jobs = (t.get("pending_jobs") or 0) + (t.get("pending_array_tasks") or 0)
    if not jobs:
        return "Pending backlog: no job waiting."
    nolimit = t.get("pending_without_time_limit") or 0
    return (f"Pending backlog: {jobs:,} job(s) waiting ({t.get('pending_array_tasks') or 0:,} of them array "
            f"tasks), requesting {_or_unknown(t.get('pending_gpus_requested'))} GPUs and "
            f"{_or_unknown(t.get('pending_gpu_hours_requested'))} GPU-hours (requested GPUs × time limit, at most)"
            + (" (no ReqTRES, AllocTRES or AllocGRES in the input)" if t.get("pending_gpus_requested") is None else "")
            + (f"; {nolimit:,} GPU job(s) without a time limit not in the GPU-hours" if nolimit else "") + ".")


def wait_histogram_rows(qw: dict) -> list[dict]:
    """``queue_wait_hist.csv``: one row per partition x GPU bucket (and ``(all)``), jobs per
    wait bin (columns named by :data:`slurmkit.report.weekly.WAIT_BIN_LABELS`)."""
    bins = qw.get("bins") or []
    out = [{"partition": "(all)", "gpu_bucket": "(all)", **dict(zip(bins, qw.get("histogram") or []))}] if bins else []
    out += [{"partition": q["partition"], "gpu_bucket": q["gpu_bucket"], **dict(zip(bins, q.get("histogram") or []))}
            for q in qw["by_partition_gpus"]]
    return out


def _md_wait_histogram(qw: dict) -> list[str]:
    rows = wait_histogram_rows(qw)
    if not rows:
        return []
    bins = qw["bins"]
    return ["Jobs by wait:", "", _md_table(["partition", "GPUs", *bins],
                                          [[h["partition"] or "(none)", h["gpu_bucket"], *[h.get(b, 0) for b in bins]]
                                           for h in rows]), ""]


def downtime_text(report: dict) -> str:
    """The downtime line: nodes down or drained in the window, node-hours and GPU-hours, and
    where the events came from ("" when the report has no event source)."""
    d = report.get("downtime")
    if not d:
        return ""
    if not d.get("events_total"):
        return f"No node was down or drained in the window ({d.get('source', 'node events')})."
    gh = (f"{fmt(d['down_gpu_hours'])} GPU-hours" if d.get("down_gpu_hours") is not None
          else "GPU-hours unknown (no GPUs per node: give --site)")
    more = (f"; the {d['events_listed']} longest of {d['events_total']} events listed"
            if d.get("events_listed", 0) < d["events_total"] else "")
    return (f"{d['nodes']} node(s) down or drained for {fmt(d['node_hours'])} node-hours, {gh} "
            f"(from {d.get('source', 'node events')}; overlapping events count once{more}).")


def _md_downtime(r: dict, limit: int) -> list[str]:
    d = r.get("downtime")
    if not d:
        return []
    out = ["## Downtime and drains", "", downtime_text(r), ""]
    if d.get("by_reason"):
        out += ["### Down GPU-hours by reason", "", _md_table(
            ["reason", "events", "nodes", "node-hours", "GPU-hours"],
            [[b["reason"], b["events"], b["nodes"], fmt(b["node_hours"]), fmt(b["gpu_hours"])]
             for b in d["by_reason"][:limit]]), "",
            "### Timeline by node", "", _md_table(
            ["node", "from", "to", "state", "reason", "hours in window", "GPU-hours"],
            [[e["node"], e["start"], e["end"] or "still down", e["state"], e["reason"], fmt(e["hours"]),
              fmt(e["gpu_hours"])] for e in d["events"][:4 * limit]]), ""]
    return out


def trend_rows(t: dict | None) -> list[dict]:
    """``trends.csv``: one row per kind (account / partition, and ``cluster`` for the totals),
    name and ISO week, with its GPU-hours, CPU-hours and jobs (empty for a week not in the
    store; "unknown" for a stored week's figure its input could not give)."""
    if not t:
        return []
    out = []
    known_w = set(t.get("weeks_known") or [])
    groups = [("cluster", [{"cluster": "", **t["totals"]}] if t.get("totals") else [])]
    groups += [(kind, t.get(key) or []) for kind, key in (("account", "by_account"), ("partition", "by_partition"))]
    for kind, rows in groups:
        for r in rows:
            cpu = r.get("cpu_hours") or [None] * len(t["weeks"])
            for w, g, c, j in zip(t["weeks"], r["gpu_hours"], cpu, r["jobs"]):
                out.append({"kind": kind, "name": r[kind], "week": w,
                            "gpu_hours": g if g is not None or w not in known_w else UNKNOWN_CELL,
                            "cpu_hours": c if c is not None or w not in known_w else UNKNOWN_CELL, "jobs": j,
                            "provisional": w in (t.get("provisional_weeks") or [])})
    return out


#: A stored week's figure its input could not give (no NCPUS, no GPU field).
UNKNOWN_CELL = "unknown"


def trend_cell(t: dict, week: str, v) -> str:
    """One trend table cell: "–" for a week not in the store, "unknown" for a stored week's
    unknown figure, else the number (:func:`fmt`); a provisional week's cell (``provisional_weeks``:
    jobs still running, or a capture that ends before the week does) says "(provisional)"."""
    if week not in (t.get("weeks_known") or []):
        return "–"
    mark = " (provisional)" if week in (t.get("provisional_weeks") or []) else ""
    return (UNKNOWN_CELL if v is None else fmt(v)) + mark


def trends_text(t: dict | None) -> str:
    """What the trends cover: the weeks, how many of them the store holds."""
    if not t:
        return ""
    missing = len(t["weeks"]) - len(t["weeks_known"])
    return (f"GPU-hours and CPU-hours per ISO week, {t['weeks'][0]} to {t['weeks'][-1]}, from the weekly aggregates in the store"
            + (f"; {missing} week(s) not in the store (–; a stored week with no job reads 0)" if missing else "")
            + "; a figure a week's input could not give (no NCPUS, no GPU field) reads unknown"
            + (f"; provisional (jobs still running, or the capture ends before the week does; a later run "
               f"replaces it): {', '.join(t['provisional_weeks'])}" if t.get("provisional_weeks") else "")
            + ".")


def no_trend_rows_text(t: dict, what: str = "GPU-hours") -> str:
    """What a trend table (by account, by partition) says in place of a table of headers
    only: no stored weeks (none of the trend weeks is in the store), or stored weeks without
    a job (``what``: the table's figure, ``GPU-hours`` or ``CPU-hours``)."""
    if not t.get("weeks_known"):
        return f"No stored weeks: none of {t['weeks'][0]} to {t['weeks'][-1]} is in the store."
    return f"No jobs in the stored weeks ({', '.join(t['weeks_known'])}): 0 {what}."


def trend_tables(t: dict) -> list[tuple[str, list[str], list[list[str]]]]:
    """The trend tables as ``(title, header, rows)`` of cells, for Markdown and HTML: the
    cluster's totals per week, then GPU-hours and CPU-hours by account and by partition."""
    weeks = t["weeks"]
    out = []
    if t.get("totals"):
        tot = t["totals"]
        out.append(("Cluster per week", ["", *weeks], [
            ["GPU-hours", *[trend_cell(t, w, v) for w, v in zip(weeks, tot["gpu_hours"])]],
            ["CPU-hours", *[trend_cell(t, w, v) for w, v in zip(weeks, tot["cpu_hours"])]],
            ["jobs", *[trend_cell(t, w, v) for w, v in zip(weeks, tot["jobs"])]]]))
    for what, col, total in (("GPU-hours", "gpu_hours", "total_gpu_hours"), ("CPU-hours", "cpu_hours", "total_cpu_hours")):
        for kind, key in (("account", "by_account"), ("partition", "by_partition")):
            rows = [[str(row[kind] or "") or "(none)",
                     *[trend_cell(t, w, v) for w, v in zip(weeks, row.get(col) or [None] * len(weeks))],
                     UNKNOWN_CELL if row.get(total) is None else fmt(row[total])]
                    for row in t.get(key) or []]
            out.append((f"{what} by {kind}", [kind, *weeks, "total"], rows))
    return out


def _md_trends(r: dict) -> list[str]:
    t = r.get("trends")
    if not t:
        return []
    out = [f"## Trends over the last {len(t['weeks'])} weeks", "", trends_text(t), ""]
    for name, head, rows in trend_tables(t):
        if not rows:   # no stored week with a job: no table of headers only
            out += [f"### {name}", "", no_trend_rows_text(t, name.split(" by ")[0]), ""]
            continue
        rows = [[_md_text(r[0]), *r[1:]] for r in rows]
        out += [f"### {name}", "", _md_table([h[-3:] if h.startswith(("19", "20")) else h for h in head], rows), ""]
    return out


def job_sizes_table(js: dict | None) -> tuple[list[str], list[list[str]]]:
    """The job-size distribution (:func:`slurmkit.report.jobs.job_sizes`) as a header and rows
    of cells ``jobs / GPU-h``, one row per GPU bucket, one column per duration bucket."""
    if not js:
        return [], []
    head = ["GPUs by duration", *js["duration_buckets"]]
    rows = [[g, *[f"{UNKNOWN_CELL if j is None else fmt(j)} / {UNKNOWN_CELL if h is None else fmt(h)}"
                  for j, h in zip(js["jobs"][i], js["gpu_hours"][i])]]
            for i, g in enumerate(js["gpu_buckets"])]
    return head, rows


def _md_job_sizes(r: dict) -> list[str]:
    js = r.get("job_sizes")
    if not js:
        return []
    head, rows = job_sizes_table(js)
    return ["## Job sizes (GPUs x duration)", "",
            "Jobs / GPU-hours per cell: GPUs allocated (AllocTRES, else AllocGRES, else requested) by how long the job "
            f"ran ({js['duration_from']}); a job counts once, in its last attempt's cell.", "",
            _md_table(head, rows), ""]


def _top_group(report: dict, key: str, col: str) -> str:
    """"account a with 12.5 GPU-hours (41 %)": the group of ``report[key]`` with the most
    GPU-hours and its share of the total; "" when GPU-hours are unknown or none is over 0."""
    rows = [g for g in report.get(key) or [] if (g.get("gpu_hours") or 0) > 0]
    total = (report.get("totals") or {}).get("gpu_hours")
    if not rows or not total:
        return ""
    g = max(rows, key=lambda x: x["gpu_hours"])
    return f"{col} {g.get(col) or '(none)'} with {fmt(g['gpu_hours'])} GPU-hours ({pct(g['gpu_hours'] / total)})"


def summary_sentences(report: dict) -> list[str]:
    """The few sentences a report opens with, for a reader with two minutes: the use (jobs,
    GPU-hours, CPU-hours), the largest account and user, the allocated share of capacity (named
    as such: GPU-hours allocated over the GPUs' available hours, not how busy they were), the
    GPUs' own utilization where measured, the energy with its coverage, and what is unknown and
    why. Every figure is the report's own (``totals``, ``utilization``, ``efficiency``,
    ``unknown``); none is computed here."""
    t, u = report["totals"], report.get("utilization") or {}
    unknown = report.get("unknown") or {}
    hours = []
    for key, name in (("gpu_hours", "GPU-hours"), ("cpu_hours", "CPU-hours")):
        x = known(report, key, t.get(key))
        hours.append(f"{name} unknown" if x == "unknown" else f"{x} {name}")
    out = [f"{fmt(t['jobs'])} job{'' if t['jobs'] == 1 else 's'} ran, using {hours[0]} and {hours[1]}"
           + (f" ({requested_note(report)})" if requested_note(report) else "") + "."]
    tops = [x for x in (_top_group(report, "by_account", "account"), _top_group(report, "by_user", "user")) if x]
    if tops:
        out.append("The largest: " + "; ".join(tops) + ".")
    if u.get("utilization") is not None:
        out.append(f"Allocated share of capacity: {pct(u['utilization'])} of the {fmt(u.get('available_gpu_hours'))} "
                   "GPU-hours the GPUs were available (GPU-hours allocated to jobs, not how busy the GPUs were).")
    else:
        out.append("Allocated share of capacity unknown: " + (unknown.get("utilization") or
                   "no GPU count of the cluster (give --capacity-gpus or a site profile)") + ".")
    e = report.get("efficiency") or {}
    if e.get("gpu_util_pct_weighted") is not None:
        out.append(f"The allocated GPUs were busy {_util_pct(e['gpu_util_pct_weighted'])} of the time, weighted by "
                   "GPU-hours, where measured.")
    out.append(f"Energy: {energy_coverage_text(t)}.")
    rest = {k: why for k, why in unknown.items() if k not in ("utilization", "energy_kwh")}   # (said above)
    if rest:
        out.append("Not known: " + "; ".join(f"{UNKNOWN_LABELS.get(k, k)}: {why}" for k, why in rest.items()) + ".")
    return out


def title(report: dict) -> str:
    c = f" — {report['cluster']}" if report.get("cluster") else ""
    import datetime as _dt

    w = report["window"]
    days = (_dt.datetime.fromisoformat(w["end"].replace("Z", "+00:00"))
            - _dt.datetime.fromisoformat(w["start"].replace("Z", "+00:00"))).total_seconds() / 86400
    # a window that is not a week is not called one (an 11-day window is an 11-day report)
    kind = "weekly report" if days == 7 else f"report over {days:g} day{'' if days == 1 else 's'}"
    return f"GPU cluster {kind}{c}: {w['start'][:10]} to {w['end'][:10]}"


def to_html(report: dict, limit: int = 25) -> str:
    """Self-contained HTML (str) with inline PNG plots."""
    from slurmkit import __version__
    from slurmkit.report import plots

    env = html_env()
    # no chart without figures to draw (no GPU count in the input: no curve, no user's GPU-hours)
    img = {"hourly": plots.hourly_png(report) if report["hourly"].get("gpus_in_use") else None,
           "users": plots.top_users_png(report) if any((u.get("gpu_hours") or 0) > 0 for u in report["by_user"])
           else None,
           "energy": plots.energy_png(report), "queue_wait": plots.queue_wait_png(report),
           "downtime": plots.downtime_png(report), "trends": plots.trends_png(report)}
    img = {k: base64.b64encode(v).decode("ascii") for k, v in img.items() if v is not None}
    return env.get_template("weekly.html.j2").render(
        r=report, img=img, f=fmt, pct=pct, dur=dur, signed=signed, title=title(report),
        cpu_efficiency=cpu_efficiency_text(report["efficiency"], report.get("unknown")), no_trend_rows=lambda what: no_trend_rows_text(report["trends"], what),
        outcome_label=outcome_label, known=lambda key, x, show=None: known(report, key, x, show),
        unknown_lines=unknown_lines(report), about=about_rows(report), backlog=backlog_text(report["totals"]), downtime=downtime_text(report), trends=trends_text(report.get("trends")),
        trend_tables=trend_tables(report["trends"]) if report.get("trends") else [],
        job_sizes=job_sizes_table(report.get("job_sizes")), memory_note=memory_note(report["efficiency"]), recon=recon_text(report.get("reconciliation")),
        denominators=denominators_text(report), breakdown_rows=breakdown_shown(report), account_rows=account_rows(report), kwh=lambda x, long=False: kwh(report, x, long), no_energy=no_energy_text(report["totals"]),
        energy_text=energy_coverage_text(report["totals"]), derived=lambda k: derived_text(report["totals"], k), group_kwh=lambda g: group_kwh(report, g), physical=physical_text(report["totals"]),
        groups=_GROUPS, energy_sources=REPORTED_SOURCES, limit=limit, version=__version__, policy_note=POLICY_NOTE,
        requested=requested_note(report), gh_head=gpu_h_header(report), wh_head=gpu_h_header(report, "wasted GPU-h"),
        yes_no=yes_no, assumption=assumption_text, rejected=rejected_text(report["data_quality"]), util_pct=_util_pct, empty_group=lambda key: empty_group_text(report, key),
        summary=summary_sentences(report), accounts_window_note=accounts_window_note(report))


def about_rows(report: dict) -> list[list[str]]:
    """The "About this report" block as ``[item, value]`` rows: each input (file, sha256, rows,
    delimiter, header or field list, latest time, ``-D``), the capture time and how it was
    found, the time zone (given or assumed), the window, the tool."""
    inp = report.get("inputs") or {}
    rows = []
    for f in inp.get("files") or []:
        how = "header line" if f.get("header") else (
            f"field list given (--sacct-fields {inp['sacct_fields_file']})" if inp.get("sacct_fields_file")
            else "field list given (--sacct-fields)")
        rows += [["input", f"{f['file']}"], ["  sha256", f["sha256"]], ["  rows", fmt(f["rows"])],
                 ["  delimiter", repr(f["delimiter"]) + (" (given)" if f.get("delimiter_given") else " (detected)")],
                 ["  fields", f"{how}: {','.join(f.get('fields') or [])}"],
                 ["  latest time in it", str(f.get("latest_time"))],
                 ["  -D (every attempt)", "yes" if f.get("duplicates") else f.get("duplicates_note", "cannot be told")]]
    if inp.get("live"):
        rows.append(["input", inp["live"]])
    if inp:
        rows += [["capture time (--as-of)", f"{inp.get('as_of')} ({inp.get('as_of_from')})" if inp.get("as_of")
                  else str(inp.get("as_of_from") or "now (live)")],
                 ["time zone", f"{inp.get('time_zone')} ({'given' if inp.get('time_zone_given') else 'ASSUMED'}"
                               f"{': ' + inp['time_zone_note'] if not inp.get('time_zone_given') else ''})"],
                 ["window", f"{report['window']['start']} – {report['window']['end']} (end exclusive)"],
                 ["tool", inp.get("tool", "")]]
    if requested_note(report):
        rows.append(["GPU-hours", f"{fmt(report['totals']['gpu_hours'])} GPU-h ({requested_note(report)}: "
                                  "ReqTRES GPUs × elapsed)"])
    return rows


def yes_no(v) -> str:
    """A flag for a reader: True -> "yes", False -> "no", "" or None -> "" (not compared)."""
    return "yes" if v is True else "no" if v is False else ("" if v is None else str(v))


def assumption_text(key: str, v) -> str:
    """An assumption's value for a reader: "not set" (None), "none given" for an empty
    per-type table (``gpu_tdp_w`` {}: every GPU at ``default_tdp_w``), ``type=W, ...`` for a
    table, yes / no for a flag, else the value."""
    if v is None:
        return "not set"
    if isinstance(v, dict):
        return ", ".join(f"{k}={x:g}" if isinstance(x, (int, float)) else f"{k}={x}" for k, x in sorted(v.items())) \
            or ("none given (every GPU at default_tdp_w)" if key == "gpu_tdp_w" else "none given")
    if isinstance(v, bool):
        return yes_no(v)
    return str(v)


def _md_text(v):
    """A name from the input (user, account) made inert in Markdown: ``*``, ``_``, backticks,
    brackets and ``<`` escaped (a user named ``**  USER1`` is not bold)."""
    if not isinstance(v, str):
        return v
    return re.sub(r"([\\`*_\[\]<>#])", r"\\\1", v)


#: sreport's names of the breakdown's figures.
BREAKDOWN_LABELS = {"allocated": "Allocated", "down": "Down", "planned_down": "Planned Down", "idle": "Idle",
                    "planned": "Planned (Reserved)", "reported": "Reported"}


def _hours(x) -> str:
    return "unknown" if x is None else fmt(x)


def breakdown_rows(report: dict) -> list[dict]:
    """``breakdown.csv``: one row per TRES x figure of ``utilization.breakdown``: ours and
    sreport's hours, the difference, whether it is within rounding ("unknown" where a figure is
    not known; sreport's columns empty when it was not reached)."""
    b = (report.get("utilization") or {}).get("breakdown")
    if not b:
        return []
    rows = []
    for tres, figs in b["ours"].items():
        theirs = (b.get("sreport") or {}).get(tres) or {}
        diff = {(d["tres"], d["figure"]): d for d in b.get("differences") or []}
        for f, label in BREAKDOWN_LABELS.items():
            d = diff.get((tres, f), {})
            rows.append({"tres": tres, "figure": label, "ours_hours": _hours(figs.get(f)),
                         "sreport_hours": "" if not theirs else _hours(theirs.get(f)),
                         "difference_hours": "" if d.get("difference") is None else fmt(d["difference"]),
                         "within_rounding": "" if d.get("within") is None else d["within"]})
    return rows


def denominators_text(report: dict) -> list[str]:
    """The sentences under the breakdown: the utilization's capacity source (always) and the
    breakdown's notes (its capacity, sreport's hours, each difference explained)."""
    u = report.get("utilization") or {}
    per = u.get("capacity_period") or {}
    out = [f"Utilization's capacity source: {u.get('capacity_source') or 'unknown'}"
           + (f", counted {per['start']} – {per['end']} ({per.get('why', '')})" if per else "") + "."]
    b = u.get("breakdown")
    if b:
        out += b.get("notes") or []
    else:
        out.append("sreport's breakdown: not computed (a live report with sreport reachable computes it).")
    return out


def account_rows(report: dict) -> list[dict]:
    """``accounts.csv``: the account tree depth first (``depth``, account, user, GPU-hours,
    CPU-hours) with sreport's AccountUtilizationByUser figures beside them."""
    a = report.get("accounts")
    if not a:
        return []
    theirs = {(d["account"], d["user"], d["tres"]): d["sreport"] for d in a.get("differences") or []}
    return [{**r, "gpu_hours": _hours(r["gpu_hours"]), "cpu_hours": _hours(r["cpu_hours"]),
             "sreport_gpu_hours": _hours(theirs[(r["account"], r["user"], "gres/gpu")])
             if (r["account"], r["user"], "gres/gpu") in theirs else "",
             "sreport_cpu_hours": _hours(theirs[(r["account"], r["user"], "cpu")])
             if (r["account"], r["user"], "cpu") in theirs else ""} for r in a["rows"]]


def accounts_window_note(report: dict) -> str:
    """Why the Accounts tree's figures can differ from *By account*: the tree covers the hours
    sreport has rolled up (``accounts.window``), the groups the whole report window; "" when the
    two windows are the same."""
    a = report.get("accounts") or {}
    aw, w = a.get("window"), report.get("window") or {}
    if not aw or (aw.get("start"), aw.get("end")) == (w.get("start"), w.get("end")):
        return ""
    return (f"These figures cover {aw['start']} – {aw['end']}, the whole hours sreport has rolled up, to compare "
            f"with it; By account covers the report's window, {w.get('start')} – {w.get('end')}: use outside "
            "these hours is only there.")


def breakdown_shown(report: dict) -> list[dict]:
    """The breakdown rows the HTML and Markdown show: :func:`breakdown_rows`, none when every
    hour in it, ours and sreport's, is 0 (nothing to compare; breakdown.csv keeps them)."""
    rows = breakdown_rows(report)
    b = (report.get("utilization") or {}).get("breakdown") or {}
    figs = [v for tres in (b.get("ours") or {}).values() for v in tres.values()]
    figs += [v for tres in (b.get("sreport") or {}).values() for v in (tres or {}).values()]
    return [] if figs and all(isinstance(v, (int, float)) and v == 0 for v in figs) else rows


def _md_denominators(r: dict) -> list[str]:
    """The Markdown report's last sections: the reconciliation with sreport, the utilization's
    denominators and sreport's breakdown (when not all 0), the account tree."""
    lines = ["## Reconciliation and denominators", ""]
    if r.get("reconciliation"):
        rc = r["reconciliation"]
        lines += [("**FLAGGED** " if rc["flagged"] else "") + recon_text(rc), ""]
    lines += [*denominators_text(r), ""]
    rows = breakdown_shown(r)
    if rows:
        b = r["utilization"]["breakdown"]
        lines += [f"sreport's breakdown, {b['window']['start']} – {b['window']['end']} (hours):", "",
                  _md_table(["TRES", "figure", "ours", "sreport", "difference", "within rounding"],
                            [[x["tres"], x["figure"], x["ours_hours"], x["sreport_hours"] or "–",
                              x["difference_hours"] or "–", yes_no(x["within_rounding"])] for x in rows]), ""]
    acc = account_rows(r)
    if acc:
        lines += ["## Accounts", "", f"Per-user usage under each account, {r['accounts']['window']['start']} – "
                  f"{r['accounts']['window']['end']}; {r['accounts']['note']}.", "",
                  *([accounts_window_note(r), ""] if accounts_window_note(r) else []),
                  _md_table(["account / user", "GPU-hours", "sreport GPU-h", "CPU-hours", "sreport CPU-h"],
                            [["\u2003" * x["depth"] + (x["user"] or x["account"]), x["gpu_hours"],
                              x["sreport_gpu_hours"] or "–", x["cpu_hours"], x["sreport_cpu_hours"] or "–"] for x in acc]), ""]
    return lines


def empty_group_text(report: dict, key: str, scope: str = "window") -> str:
    """What an empty group table (``key``: ``by_user`` ... ``by_gpu_type``) of ``report`` (a
    weekly report, or a period report's section: ``scope`` "period") says: the GPU-type table
    holds GPU jobs only, so with jobs that ran without GPUs it says so, not "no jobs"."""
    jobs = (report.get("totals") or {}).get("jobs")
    if key == "by_gpu_type" and jobs:
        return (f"No GPU job in the {scope}: its {jobs} job(s) ran without GPUs (GPU types are of GPU jobs "
                "only; the job sizes' 0-GPU row counts them).")
    return f"No jobs in the {scope}."


def _md_table(headers, rows) -> str:
    def md(v):
        return str(cell(v)).replace("|", "\\|").replace("\n", " ")
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(md(v) for v in r) + " |" for r in rows]
    return "\n".join(out)


def _md_head(r: dict) -> list[str]:
    """The Markdown report's title, window, warnings and totals."""
    t = r["totals"]
    dq0 = r["data_quality"]
    banner = ([f"> **Warning:** {rejected_text(dq0)}, over the "
               f"{pct(dq0['rejected_limit'])} allowed: the figures below miss them. Every skipped row "
               f"is in data_quality.csv.", ""] if dq0.get("rejected_over_limit") else [])
    lines = [f"# {title(r)}", "", *banner,
             f"Window {r['window']['start']} – {r['window']['end']} (UTC, end exclusive).", "",
             "## Summary", "", " ".join(summary_sentences(r)), "",
             *([f"**{(r.get('coverage') or {})['note']}.**", ""] if (r.get("coverage") or {}).get("partial") else []),
             *([f"Provisional: {t['provisional_jobs']} job(s) still running as of {r.get('as_of')}; "
                f"{known(r, 'gpu_hours', t.get('provisional_gpu_hours'))} of the GPU-hours count up to then and will grow "
                f"(marked * below).", ""] if t.get("provisional_jobs") else []),
             "## Totals", "",
             _md_table(["jobs", gpu_h_header(r), "CPU-hours", gpu_h_header(r, "wasted GPU-h"), "allocated share of capacity",
                        "energy", "energy by source",
                        "facility energy", "CO2e", "cost", "pending jobs", "pending GPU-h requested"],
                       [[t["jobs"], known(r, "gpu_hours", t["gpu_hours"]), known(r, "cpu_hours", t["cpu_hours"]),
                         known(r, "gpu_hours", t["wasted_gpu_hours"]),
                         known(r, "utilization", r["utilization"]["utilization"], pct),
                         energy_coverage_text(t, short=True), energy_by_source_text(t), derived_text(t, "facility_kwh"),
                         derived_text(t, "co2e_kg"), derived_text(t, "cost_total"),
                         t["pending_jobs"] + t["pending_array_tasks"], _or_unknown(t.get("pending_gpu_hours_requested"))]]), "",
             *([f"GPU-hours {fmt(t['gpu_hours'])} ({requested_note(r)}).", ""] if requested_note(r) else []),
             *([physical_text(t), ""] if physical_text(t) else []),
             f"Energy: {energy_coverage_text(t)}.", "",
             *([*unknown_lines(r), ""] if r.get("unknown") else []),
             *([no_energy_text(t), ""] if no_energy_text(t) else []),
             f"GPUs in use: most at once {known(r, 'gpu_hours', r['hourly'].get('peak_at_once'))}; "
             f"{'daily' if r['hourly'].get('bucket') == 'day' else 'hourly'} mean peak "
             f"{known(r, 'gpu_hours', r['hourly']['peak'])}, p95 {known(r, 'gpu_hours', r['hourly']['p95'])}.", ""]
    return lines


def _md_groups(r: dict, limit: int) -> list[str]:
    """The Markdown report's group tables (by user, account, ...), ``limit`` rows each."""
    lines: list[str] = []
    for name, key, col in _GROUPS:
        if not r[key]:
            lines += [f"## By {name}", "", empty_group_text(r, key), ""]
            continue
        lines += [f"## By {name}", "", _md_table(
            [name, "jobs", gpu_h_header(r), "CPU-hours", "kWh", gpu_h_header(r, "wasted GPU-h"), "physical GPU-h"],
            [[_md_text(g[col]) or "(none)", g["jobs"],
              known(r, "gpu_hours", g["gpu_hours"]) + ("*" if g.get("provisional_gpu_hours") else ""),
              known(r, "cpu_hours", g["cpu_hours"]),
              group_kwh(r, g),
              known(r, "gpu_hours", g["wasted_gpu_hours"]), _or_unknown(g.get("physical_gpu_hours"))]
             for g in r[key][:limit]]), ""]
    return lines


def efficiency_text(r: dict) -> str:
    """The efficiency section's sentence (the weekly and the period report, Markdown and HTML):
    CPU efficiency with what it covers, median memory efficiency, GPU utilization, GPU-hours at
    ~0 %, and why memory may exceed 100 %."""
    e = r["efficiency"]
    return (f"{cpu_efficiency_text(e, r.get('unknown'))}, median memory {pct(e['memory_efficiency_median'])}, "
            f"GPU utilization {known(r, 'gpu_utilization', e['gpu_util_pct_weighted'], _util_pct)}, "
            f"GPU-hours at ~0 % utilization "
            f"{known(r, 'gpu_utilization', e['gpu_hours_near_zero_util'])}. {memory_note(e)}").rstrip()


def _md_efficiency(r: dict, limit: int) -> list[str]:
    """The Markdown report's efficiency section (by user, the idle jobs) and its assumptions."""
    e = r["efficiency"]
    return ["## Efficiency", "", efficiency_text(r), "",
           "### Efficiency by user (most GPU-hours at ~0 % utilization first)", "",
           _md_table(["user", gpu_h_header(r), "GPU util %", "GPU-h at ~0 %", "CPU eff", "median mem eff"],
                     [[_md_text(u["user"]) or "(none)", known(r, "gpu_hours", u.get("gpu_hours")),
                       known(r, "gpu_utilization", u.get("gpu_util_pct")),
                       known(r, "gpu_utilization", u.get("gpu_hours_near_zero_util")), pct(u["cpu_efficiency"]),
                       pct(u["memory_efficiency_median"])] for u in e["by_user"][:limit]]), "",
           "### Jobs that held GPUs idle (utilization under 5 %)", "",
           *([f"Unknown: {(r.get('unknown') or {}).get('gpu_utilization', 'no GPU utilization figure')}."]
             if e.get("idle_jobs") is None else
             [_md_table(["job", "user", "GPUs", gpu_h_header(r), "GPU util %"],
                        [[j["job_id"], _md_text(j["user"]) or "(none)", fmt(j["gpus"]), fmt(j["gpu_hours"]),
                          fmt(j["gpu_util_pct"])] for j in e["idle_jobs"]])]), "",
           "## Assumptions", "",
           _md_table(["assumption", "value", "from"],
                     [[k, assumption_text(k, v), r["assumptions"]["origin"].get(k, "")]
                      for k, v in r["assumptions"].items() if k != "origin"]), ""]


def _md_data_quality(r: dict) -> list[str]:
    """The Markdown report's data-quality section: the rows read, counted and skipped, the
    warnings, the unknown figures and the reasons rows were skipped or repaired."""
    dq = r["data_quality"]
    lines = ["## Data quality", "",
              f"Rows read {dq['rows_read']} = counted {dq['rows_counted']} + skipped {dq['rows_skipped']}"
              + (f" ({dq['rows_rejected']} of them for a problem)" if dq.get("rows_rejected") else "") + ".", "",
              *([f"Jobs whose steps are in the input but whose allocation row is not: "
                 f"{fmt(dq['gpu_hours_at_stake'])} GPU-hours at stake, not counted.", ""]
                if dq.get("gpu_hours_at_stake") else [])]
    lines += [f"Warning: {w}" for w in dq.get("warnings") or []] + ([""] if dq.get("warnings") else [])
    lines += [*unknown_lines(r), ""] if r.get("unknown") else []
    reasons = [[k, v, "skipped"] for k, v in dq["skipped_reasons"].items()]
    reasons += [[k, v, "counted, repaired"] for k, v in dq["repaired_reasons"].items()]
    if reasons:
        lines += [_md_table(["reason", "rows", "kind"], reasons), ""]
    return lines


def to_markdown(report: dict, limit: int = 25) -> str:
    """The report as Markdown (tables, no images)."""
    r = report
    lines = _md_head(r)
    lines += _md_groups(r, limit)
    lines += ["## Outcomes", "", _md_table(
        ["outcome", "jobs", "attempts", gpu_h_header(r), gpu_h_header(r, "wasted GPU-h")],
        [[outcome_label(o), o["jobs"], o.get("attempts", o["rows"]), known(r, "gpu_hours", o["gpu_hours"]),
          known(r, "gpu_hours", o["wasted_gpu_hours"])] for o in r["outcomes"]]), "",
        "Jobs by final state (they sum to the total; jobs cancelled before they started are apart, not in it); requeued attempts are the earlier attempts "
        "of requeued jobs, all wasted.", "",
        f"## Queue wait (Start − {r['queue_wait'].get('from', 'Eligible')})", "",
        *([f"Queue wait: unknown ({r['queue_wait']['unknown']}).", ""] if r["queue_wait"].get("unknown") else [_md_table(
            ["partition", "GPUs", "jobs", "p25", "p50", "p75", "p90", "p95", "longest"],
            [[q["partition"] or "(none)", q["gpu_bucket"], q["n"], dur(q.get("p25_s")), dur(q["p50_s"]),
              dur(q.get("p75_s")), dur(q["p90_s"]), dur(q["p95_s"]), dur(q.get("max_s"))]
             for q in r["queue_wait"]["by_partition_gpus"]]), "", *_md_wait_histogram(r["queue_wait"])]),
        backlog_text(r["totals"]), "",
        *_md_job_sizes(r), *_md_downtime(r, limit), *_md_trends(r)]
    lines += _md_efficiency(r, limit)
    lines += _md_energy(r)
    lines += _md_policy(r)
    lines += _md_denominators(r)
    if r.get("inputs"):
        lines += ["## About this report", "", _md_table(["item", "value"], about_rows(r)), ""]
    lines += _md_data_quality(r)
    return "\n".join(lines) + "\n"


#: energy_by_policy.csv's header, also when the report has no GPU job.
_POLICY_COLUMNS = ["policy", "jobs", "gpu_hours", "measured_gpu_hours", "energy_kwh", "kwh_per_gpu_hour"]
#: data_quality.csv's header (the fields of a listed problem), also when none was listed.
_PROBLEM_COLUMNS = [f.name for f in dataclasses.fields(Problem)]
_GROUP_COLUMNS = ["jobs", "gpu_hours", "cpu_hours", "energy_kwh", "energy_jobs_unknown", "wasted_gpu_hours",
                  "provisional_gpu_hours", "physical_gpu_hours"]


def csv_headers() -> dict[str, list[str]]:
    """Each weekly CSV's header (file name -> columns), written also when the table has no
    row (a spreadsheet or ``pandas.read_csv`` reads an empty table, not an error); a table with
    rows writes its rows' keys, which tests/report/test_report_outputs.py checks equal these."""
    from slurmkit.report.definitions import WAIT_BIN_LABELS

    return {**{f"{key}.csv": [col, *_GROUP_COLUMNS] for _n, key, col in _GROUPS},
            "energy_by_policy.csv": _POLICY_COLUMNS,
            "outcomes.csv": ["state", "jobs", "attempts", "rows", "gpu_hours", "wasted_gpu_hours"],
            "queue_wait.csv": ["partition", "gpu_bucket", "n", "p50_s", "p90_s", "p95_s", "p5_s", "p25_s", "p75_s",
                               "max_s"],
            "queue_wait_hist.csv": ["partition", "gpu_bucket", *WAIT_BIN_LABELS],
            "backlog.csv": ["jobs", "gpu_jobs", "gpus_requested", "gpu_hours_requested", "without_time_limit"],
            "downtime.csv": ["node", "state", "reason", "start", "end", "ongoing", "hours", "gpus", "gpu_hours"],
            "down_by_reason.csv": ["reason", "events", "nodes", "node_hours", "gpu_hours"],
            "trends.csv": ["kind", "name", "week", "gpu_hours", "cpu_hours", "jobs", "provisional"],
            "job_sizes.csv": ["gpus", "duration", "jobs", "gpu_hours"],
            "hourly.csv": ["hour", "gpus_in_use"],
            "efficiency_by_user.csv": ["user", "cpu_efficiency", "memory_efficiency_median", "gpu_hours",
                                       "gpu_util_pct", "gpu_hours_near_zero_util"],
            "idle_jobs.csv": ["job_id", "user", "gpus", "gpu_hours", "gpu_util_pct"],
            "breakdown.csv": ["tres", "figure", "ours_hours", "sreport_hours", "difference_hours", "within_rounding"],
            "accounts.csv": ["depth", "account", "user", "gpu_hours", "cpu_hours", "sreport_gpu_hours",
                             "sreport_cpu_hours"],
            "inputs.csv": ["item", "value"],
            "data_quality.csv": _PROBLEM_COLUMNS}


def _write_csv(path: Path, rows: list[dict], columns: list[str] | None = None) -> None:
    """``rows`` as CSV; ``columns``: the header when there are no rows."""
    keys = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=keys or columns or [])
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if v is None else v) for k, v in r.items()})


def write_outputs(report: dict, allocs, outdir, formats=FORMATS) -> list[Path]:
    """Write the chosen formats into ``outdir``; returns the paths written (in ``outdir``).

    Every file is first written into a temporary folder beside ``outdir``
    (``.<name>.tmp<pid>``, same filesystem); only when all of them are complete are they moved
    into ``outdir`` (created), each by an atomic rename. A failure on the way (a rendering
    error, a full disk) leaves ``outdir`` as it was: last week's report is never lost to a
    half-written one. Files of ``outdir`` this run does not write are left alone."""
    import os
    import shutil

    out = Path(outdir)
    tmp = out.parent / f".{out.name}.tmp{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        names = _write_all(report, allocs, tmp, formats)
        out.mkdir(parents=True, exist_ok=True)
        for name in names:
            os.replace(tmp / name, out / name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return [out / n for n in names]


def _write_all(report: dict, allocs, out: Path, formats) -> list[str]:
    """Write the chosen formats into ``out`` (an empty folder); returns the file names."""
    written = []
    if "html" in formats:
        (out / "weekly.html").write_text(to_html(report), encoding="utf-8")
        written.append("weekly.html")
    if "md" in formats:
        (out / "weekly.md").write_text(to_markdown(report), encoding="utf-8")
        written.append("weekly.md")
    if "json" in formats:
        (out / "weekly.json").write_text(json.dumps(report, indent=1, ensure_ascii=False), encoding="utf-8")
        written.append("weekly.json")
    if "csv" in formats:
        headers = csv_headers()
        for _n, key, _c in _GROUPS:
            _write_csv(out / f"{key}.csv", report[key], headers[f"{key}.csv"])
            written.append(f"{key}.csv")
        tables = {"energy_by_policy.csv": report.get("energy_by_policy") or [],
                  "outcomes.csv": report["outcomes"],
                  "queue_wait.csv": [{k: v for k, v in q.items() if k != "histogram"}
                                     for q in report["queue_wait"]["by_partition_gpus"]],
                  "queue_wait_hist.csv": wait_histogram_rows(report["queue_wait"]),
                  "backlog.csv": [report["queue_wait"]["backlog"]] if report["queue_wait"].get("backlog") else [],
                  "downtime.csv": (report.get("downtime") or {}).get("events", []),
                  "down_by_reason.csv": (report.get("downtime") or {}).get("by_reason", []),
                  "trends.csv": trend_rows(report.get("trends")),
                  "job_sizes.csv": (report.get("job_sizes") or {}).get("cells", []),
                  "hourly.csv": [{"hour": h, "gpus_in_use": g} for h, g in
                                 zip(report["hourly"]["hours"], report["hourly"]["gpus_in_use"])],
                  "efficiency_by_user.csv": report["efficiency"]["by_user"],
                  "idle_jobs.csv": report["efficiency"].get("idle_jobs") or [],
                  "breakdown.csv": breakdown_rows(report),
                  "accounts.csv": account_rows(report),
                  "inputs.csv": [{"item": k.strip(), "value": v} for k, v in about_rows(report)],
                  "data_quality.csv": (report["data_quality"].get("notes") or []) + report["data_quality"]["problems"]}
        for name, rows in tables.items():
            _write_csv(out / name, rows, headers[name])
            written.append(name)
        allocs.to_csv(out / "jobs.csv", index=False)
        written.append("jobs.csv")
    if "parquet" in formats:
        allocs.to_parquet(out / "jobs.parquet", index=False)
        written.append("jobs.parquet")
    return written
