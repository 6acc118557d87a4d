"""The period report's sentences shared by its Markdown (:func:`slurmkit.report.period.render_markdown`)
and its HTML page (:mod:`slurmkit.report.period_html`): the heading, the days not in the store,
what an empty table says, the queue-wait line, the captures' time zone. One home for each, so
both say the same.
"""

from __future__ import annotations

from slurmkit.report.period_plots import part_days


def period_span(p: dict) -> str:
    """``p`` (the report's ``period``: label, start, end) as one heading: ``2026-Q4
    (2026-10-01T00:00:00Z .. 2027-01-01T00:00:00Z)``; a ``--start/--end`` period, whose label
    is the span, once."""
    return p["label"] if ".." in p["label"] else f"{p['label']} ({p['start']} .. {p['end']})"


def missing_counts(report: dict) -> str:
    """The days not in the store, in words: ``30 day(s) not in the store`` with one cluster;
    with several, per cluster (``santis: 30 of 31``) and how many no cluster holds; "" when
    none is missing."""
    st = report["store"]
    if not st["days_missing"]:
        return ""
    per = st.get("clusters") or {}
    if len(per) <= 1:
        return f"{len(st['days_missing'])} day(s) not in the store"
    n = len(part_days(report["period"]))
    every = len(set.intersection(*[set(c["days_missing"]) for c in per.values()]))
    return ("day(s) not in the store: " + ", ".join(f"{c} {len(v['days_missing'])} of {n}" for c, v in per.items())
            + f" ({every} in no cluster's store)")


def time_zones(store_root, clusters: list[str], days: list[str]) -> list[dict]:
    """What the store's manifests record of how ``days`` were filled, per cluster: ``{"cluster",
    "time_zone", "time_zone_given", "days"}`` for the days filled from captures by ``report
    store`` (the zone their times were read in, and whether --tz gave it or UTC was assumed);
    days pulled live (epoch times) or filled before the zone was recorded are not listed."""
    from slurmkit.accounting.store import Store

    out = []
    want = set(days)
    for c in clusters:
        man = Store(store_root, "" if c == "_default" else c).manifest()
        seen: dict = {}
        for d, e in man.items():
            if d in want and e.get("time_zone"):
                k = (e["time_zone"], bool(e.get("time_zone_given")))
                seen[k] = seen.get(k, 0) + 1
        out += [{"cluster": c, "time_zone": z, "time_zone_given": g, "days": n} for (z, g), n in sorted(seen.items())]
    return out


def time_zone_text(zones: list[dict]) -> str:
    """:func:`time_zones` in words: ``habrok: Europe/Amsterdam (--tz), 324 day(s)``; a zone
    assumed says so."""
    return "; ".join(f"{z['cluster']}: {z['time_zone']} " + ("(--tz)" if z["time_zone_given"] else
                                                            "(assumed: no --tz given to report store)")
                     + f", {z['days']} day(s)" for z in zones)


def empty_group_text(section: dict, key: str) -> str:
    """What an empty group table (``section[key]``, a key of :data:`slurmkit.report.period.GROUPS`) says: why no
    figure when the section is not in the store (``not in the store.``); ``unknown`` when its
    job count is; for ``by_gpu_type`` with jobs (it holds GPU jobs only, as the weekly
    report's) how many ran without GPUs; else ``No jobs in the period.``"""
    if section.get("not_in_store"):
        return f"{section['not_in_store'][0].upper()}{section['not_in_store'][1:]}: no figures."
    from slurmkit.report import render

    if section["totals"].get("jobs") is None:
        return "Unknown."
    return render.empty_group_text(section, key, "period")


def queue_wait_text(section: dict) -> str:
    """The queue-wait sentence of ``section`` (the period or a part): jobs started, p50, p95,
    longest (s); ``not in the store`` when none of its days is."""
    from slurmkit.report.render import fmt

    if section.get("not_in_store"):
        return f"Queue wait: {section['not_in_store']}."
    qa = section["queue_wait"]["all"]
    if qa["n"] is None:
        why = section["queue_wait"].get("unknown")
        return f"Queue wait: unknown ({why})." if why else "Queue wait: unknown."
    return (f"{fmt(qa['n'])} jobs started in the period (wait from {section['queue_wait']['from']}); p50 "
            f"{fmt(qa['p50_s'])} s, p95 {fmt(qa['p95_s'])} s, longest {fmt(qa['max_s'])} s.")


__all__ = ["period_span", "missing_counts", "time_zones", "time_zone_text", "empty_group_text", "queue_wait_text"]


def utilization_text(report: dict) -> str:
    """The period's utilization denominator in words (Markdown and HTML): the capacity, where it
    comes from, the hours counted, the down and available GPU-hours, the utilization of them and
    of sreport's Reported where computed; unknown with why, never 0 %."""
    from slurmkit.report.render import fmt, pct

    u = report.get("utilization") or {}
    cp = u.get("capacity_period") or {}
    if u.get("utilization") is None:
        why = (report.get("unknown") or {}).get("utilization") or report.get("not_in_store") or "no GPU-hours"
        head = f"Utilization over the period: unknown ({why})"
    else:
        down = "unknown" if u.get("down_gpu_hours") is None else fmt(u["down_gpu_hours"])
        head = (f"Utilization over the period: {pct(u['utilization'])} of the available GPU-hours: capacity "
                f"{fmt(u.get('capacity_gpus'))} GPUs ({u.get('capacity_source')}), counted {cp.get('start')} – "
                f"{cp.get('end')} ({fmt(u.get('capacity_gpu_hours'))} GPU-h), less {down} down GPU-h = "
                f"{fmt(u.get('available_gpu_hours'))} available")
    rep = u.get("of_reported")
    if rep and rep.get("utilization") is not None:
        head += (f"; {pct(rep['utilization'])} of sreport's Reported ({fmt(rep.get('allocated_gpu_hours'))} of "
                 f"{fmt(rep.get('reported_gpu_hours'))} GPU-h, {rep['window']['start']} – {rep['window']['end']})")
    return head + "."
