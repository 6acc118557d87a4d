"""The period report (:func:`slurmkit.report.period.period_report`'s dict) as one
self-contained HTML page: ``templates/period.html.j2``, the weekly page's style sheet and
"About this report" block (``templates/_style.html.j2``, ``_about.html.j2``), plots as inline
base64 PNG (:mod:`slurmkit.report.period_plots`; the queue-wait plot is the weekly report's,
:func:`slurmkit.report.plots.queue_wait_png`), no scripts, fonts or external URLs.

Sections, as in the JSON: totals per part (week or month), GPU-/CPU-hours per part by account
and by partition (plot and table), the period's tables by user, account, partition, QOS and GPU
type, outcomes, queue wait, per cluster (several clusters), data quality. An unknown figure
(``None``) reads "unknown" (:func:`slurmkit.report.render.known`); a part none of whose days is
in the store reads "not in the store", never 0.
"""

from __future__ import annotations

import base64

from slurmkit.report import period_plots as pp
from slurmkit.report.period_text import empty_group_text, queue_wait_text, time_zone_text, utilization_text
from slurmkit.report.render import (_GROUPS, dur, efficiency_text, energy_by_source_text, energy_coverage_text, derived_text, fmt,
                                     group_kwh, job_sizes_table, known, outcome_label, pct, physical_text, unknown_lines)

#: The group tables' rows shown in the page (the rest are in the JSON and the CSV).
LIMIT = 25
#: Names drawn per plot before "other".
TOP = 6


def title(report: dict) -> str:
    """The page's title: ``GPU cluster report 2026-Q4: 2026-10-01 to 2027-01-01 (by month) —
    <clusters>`` (a ``--start/--end`` period: the dates only; the end date is exclusive)."""
    p = report["period"]
    c = f" — {', '.join(report['clusters'])}" if report.get("clusters") else ""
    label = "" if ".." in p["label"] else f" {p['label']}"   # --start/--end: the dates say it
    return f"GPU cluster report{label}: {p['start'][:10]} to {p['end'][:10]} (by {p['by']}){c}"


def _days(days: list[str], n: int = 12) -> str:
    return ", ".join(days[:n]) + (f" … ({len(days) - n} more)" if len(days) > n else "")


def about_rows(report: dict) -> list[list[str]]:
    """The "About this report" block as ``[item, value]`` rows: the period and its breakdown,
    the store (folder, clusters, days read, days not in it, days not final), the time running
    jobs are counted up to (``as_of``), the rows the store's daily pulls read, the tool."""
    from slurmkit import __version__

    p, st = report["period"], report["store"]
    n_days = len(pp.part_days(p))
    label = "" if ".." in p["label"] else f"{p['label']}: "
    rows = [["period", f"{label}{p['start']} – {p['end']} (UTC, end exclusive)"],
            ["breakdown", "ISO weeks (clipped to the period)" if p["by"] == "week" else "calendar months"],
            ["store", st["root"]],
            ["cluster(s)", ", ".join(report["clusters"]) or "(none)"],
            ["days read from the store", f"{st['days']} day file(s) for {n_days} day(s) of the period"],
            ["days not in the store", f"{len(st['days_missing'])}" + (f": {_days(st['days_missing'])}"
                                                                      if st["days_missing"] else "")],
            ["days not yet (after the report's time)", f"{len(st.get('days_future') or [])}"],
            ["days not final (provisional)", f"{len(st['days_not_final'])}"
             + (f": {_days(st['days_not_final'])}" if st["days_not_final"] else "")],
            ["running jobs counted up to", f"their pull, at the latest {report.get('running_up_to', report['as_of'])}"
                                           f" (the report's time: {report['as_of']})"],
            ["time zone of the captures' times", time_zone_text(st.get("time_zones") or [])
             or "none recorded (days pulled live read epoch times; days filled by report store record theirs)"],
            ["rows read by the daily pulls", f"{report['data_quality']['rows_read']:,}"],
            ["tool", f"slurmkit {__version__} (report period; DuckDB over the store)"]]
    return rows


def missing_text(report: dict) -> str:
    """The banner over a period some of whose days are not in the store ("" when none is
    missing): how many days no cluster's store holds, and with several clusters how many
    each cluster's store lacks (``store.clusters[c].days_missing``); then, on its own, how
    many days are after the report's time (``store.days_future``: not yet, not missing)."""
    st = report["store"]
    future = st.get("days_future") or []
    later = (f"{len(future)} day(s) after {report['as_of']} are not yet (future): not missing, not counted."
             if future else "")
    if not st["days_missing"]:
        return later
    n = len(pp.part_days(report["period"]))
    per = st.get("clusters") or {}
    gone = [set(c["days_missing"]) for c in per.values()] or [set(st["days_missing"])]
    every = len(set.intersection(*gone))
    text = f"{every} of the period's {n} days are not in the store"
    if len(per) > 1:
        text += (f" of any cluster, and {len(st['days_missing']) - every} more are missing from some cluster's "
                 "(" + ", ".join(f"{c}: {len(v['days_missing'])}" for c, v in per.items()) + " days missing)")
    return (text + ": the figures miss them. A part with none of its days stored reads \"not in the store\" "
            "(hatched on the plots), never 0; a part with some missing is marked †." + (" " + later if later else ""))


def part_rows(report: dict, section: dict | None = None, cluster: str | None = None) -> list[dict]:
    """The totals-per-part table: for each part of ``section`` (default the report; a
    ``by_cluster`` entry with ``cluster``) its label, window, days in the store, coverage state
    (:func:`slurmkit.report.period_plots.coverage`), totals and queue-wait p50/p95 (s)."""
    section = section or report
    out = []
    for part, c in zip(section["breakdown"], pp.coverage(report, cluster)):
        qa = part["queue_wait"]["all"]
        out.append({"label": part["label"], "start": part["start"], "end": part["end"], "coverage": c,
                    "part": part, "totals": part["totals"], "p50_s": qa["p50_s"], "p95_s": qa["p95_s"]})
    return out


def matrix(panel: dict, report: dict) -> list[dict]:
    """The table beside a plot: one row per series of ``panel`` (:func:`~slurmkit.report.period_plots.part_series` /
    :func:`~slurmkit.report.period_plots.cluster_series`), its values per part (as drawn; None unknown or not in the store),
    which parts are not in the store (``missing``) and its period figure (the period's row in ``report[key]``, the cluster's total, or for
    ``other`` the period's total less the named rows)."""
    metric, key, col = panel["metric"], panel["key"], panel["col"]
    if key == "by_cluster":
        period = {c["cluster"]: c["totals"].get(metric) for c in report["by_cluster"]}
    else:
        period = {pp.display(r[col]): r[metric] for r in report[key]}
    named = [s["name"] for s in panel["series"] if s["name"] != pp.OTHER]
    total = report["totals"].get(metric)
    rows = []
    for s in panel["series"]:
        if s["name"] == pp.OTHER:
            rest = [v for n, v in period.items() if n not in named]
            p = (None if total is None or any(v is None for v in rest)
                 else round(max(total - sum(period.get(n) or 0.0 for n in named), 0.0), 9))
        else:
            p = period.get(s["name"])
        rows.append({"name": s["name"], "values": s["values"], "missing": s["missing"], "period": p})
    return rows


def money_cells(section: dict):
    """The totals table's utilization, energy (with its coverage, short), CO2e and cost cells of a
    section (the period or a part), as HTML ``<td>`` cells: unknown figures read "unknown" (a
    figure built on an unknown one too), figures without their assumption "–"."""
    from html import escape

    t, u = section.get("totals") or {}, section.get("utilization") or {}
    unknown = section.get("unknown") or {}

    def cell(text, flag=False):
        cls = ' class="unknown"' if text == "unknown" else ' class="partial"' if flag else ""
        return f"<td{cls}>{escape(str(text))}</td>"

    util = pct(u["utilization"]) if u.get("utilization") is not None else "unknown" if "utilization" in unknown else "–"
    energy = energy_coverage_text(t, short=True)
    co2, cost = derived_text(t, "co2e_kg"), derived_text(t, "cost_total")
    cov = t.get("energy_coverage") or {}
    return "".join([cell(util), cell(energy, bool(cov) and cov.get("known") and not cov.get("complete")),
                            cell(co2), cell(cost)])


def to_html(report: dict, limit: int = LIMIT, top: int = TOP) -> str:
    """The page (str). Plots: :func:`slurmkit.report.period_plots.period_pngs` (GPU-hours and
    CPU-hours per part by account, partition and cluster) and the weekly report's queue-wait
    plot over the period's ``queue_wait``."""
    from slurmkit import __version__
    from slurmkit.report import plots
    from slurmkit.report.render import html_env

    env = html_env()
    img = dict(pp.period_pngs(report, top))
    qw = plots.queue_wait_png(report)
    if qw is not None:
        img["queue_wait"] = qw
    img = {k: base64.b64encode(v).decode("ascii") for k, v in img.items()}
    plotted = []
    for name, key in (("account", "by_account"), ("partition", "by_partition"), ("cluster", "by_cluster")):
        ps = pp.panels(report, key, top)
        plotted.append({"name": name, "key": key, "img": img.get(name),
                        "tables": [{"what": pp.METRICS[p["metric"]], "rows": matrix(p, report), "panel": p}
                                   for p in ps],
                        "unknown": [pp.METRICS[m] for m in pp.METRICS if report["totals"].get(m) is None]})
    clusters = [{"cluster": c["cluster"], "section": c, "store": report["store"]["clusters"][c["cluster"]],
                 "parts": part_rows(report, c, c["cluster"])} for c in report.get("by_cluster") or []]
    return env.get_template("period.html.j2").render(
        r=report, title=title(report), about=about_rows(report), parts=part_rows(report),
        plotted=plotted, clusters=clusters, img=img, groups=_GROUPS, limit=limit, top=top,
        job_sizes=job_sizes_table(None if report.get("not_in_store") else report.get("job_sizes")), f=fmt,
        empty_group=empty_group_text, queue_wait_text=queue_wait_text, dur=dur, outcome_label=outcome_label, unknown_lines=unknown_lines(report),
        known=lambda sec, key, x: known(sec, key, x), short=pp.short_label, version=__version__,
        n_days=len(pp.part_days(report["period"])), missing=missing_text(report),
        pcov=pp.coverage({**report, "breakdown": [report["period"]]})[0],
        physical="" if report.get("not_in_store") else physical_text(report.get("totals") or {}),
        money=money_cells, energy_text=energy_coverage_text(report["totals"]),
        energy_sources=energy_by_source_text(report["totals"]), utilization=utilization_text(report),
        group_kwh=lambda g: group_kwh(report, g), pct=pct,
        efficiency="" if report.get("not_in_store") else efficiency_text(report))


__all__ = ["to_html", "about_rows", "part_rows", "matrix", "title"]
