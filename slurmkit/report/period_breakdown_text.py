"""The period report's sreport breakdown and account tree (:mod:`slurmkit.report.period_breakdown`'s
sections) as text: their CSV tables and Markdown lines, for :func:`slurmkit.report.period.write_period`
and :func:`slurmkit.report.period.render_markdown`."""

from __future__ import annotations

_EM = "\u2003"   # the tree's indent in Markdown, as the weekly report's
_NAMES = {"allocated": "Allocated", "down": "Down", "planned_down": "Planned Down", "idle": "Idle",
          "planned": "Planned", "reported": "Reported"}


def tables(report: dict) -> dict[str, list[dict]]:
    """The sections' CSV tables (:func:`slurmkit.report.period.write_period`):
    ``breakdown_sreport.csv`` (a row per part, TRES and figure: ``part``, ``start``, ``end``,
    ``tres``, ``figure``, ``hours``, ``sreport_hours``, ``difference``, ``within``; an unknown
    figure empty) and ``accounts.csv`` (a row per part and tree row: ``part``, ``depth``,
    ``account``, ``user``, ``gpu_hours``, ``cpu_hours``); none without the sections."""
    out = {}
    sb = report.get("sreport_breakdown")
    if sb:
        rows = []
        for w in sb["windows"]:
            diffs = {(d["tres"], d["figure"]): d for d in w["differences"]}
            for k, fig in w["ours"].items():
                for f, name in _NAMES.items():
                    d = diffs.get((k, f), {})
                    rows.append({"part": w["label"], "start": w["start"], "end": w["end"], "tres": k, "figure": name,
                                 "hours": fig[f], "sreport_hours": d.get("sreport"),
                                 "difference": d.get("difference"), "within": d.get("within")})
        out["breakdown_sreport.csv"] = rows
    acc = report.get("accounts")
    if acc:
        out["accounts.csv"] = [{"part": w["label"], **r} for w in acc["windows"] for r in w["rows"]]
    return out


def markdown_lines(report: dict) -> list[str]:
    """The sections in Markdown: the breakdown per part (GPU-hours and CPU-hours, sreport's
    column order; "unknown" for an unknown figure; sreport's figure where it was asked), then the
    period's account tree; [] without the sections."""
    from slurmkit.report.render import fmt

    def f(x):
        return "unknown" if x is None else fmt(x)

    lines = []
    sb = report.get("sreport_breakdown")
    if sb:
        lines += ["", "## Denominators: sreport's breakdown", "",
                  f"Inputs: {sb['source']}; Reported from {sb['capacity_source']}.", "",
                  "| part | TRES | " + " | ".join(_NAMES.values()) + " |", "|---|---" + "|---" * len(_NAMES) + "|"]
        for w in sb["windows"]:
            part = "**period**" if w["label"] == "(period)" else w["label"]
            for k, fig in w["ours"].items():
                theirs = (w.get("sreport") or {}).get(k)
                cells = [f(fig[x]) + (f" (sreport {f(theirs.get(x))})" if theirs and theirs.get(x) is not None
                                      and fig[x] is not None and abs(fig[x] - theirs[x]) > 0.02 else "")
                         for x in _NAMES]
                lines.append(f"| {part} | {k} | " + " | ".join(cells) + " |")
        for w in sb["windows"]:
            if w["sreport"] is not None:
                lines.append(f"\n{w['label']}: " + " ".join(w["notes"]))
    acc = report.get("accounts")
    if acc:
        w = acc["windows"][0]
        lines += ["", f"## Accounts ({w['start']} .. {w['end']})", "", "| account | user | GPU-h | CPU-h |",
                  "|---|---|---|---|"]
        lines += [f"| {_EM * r['depth']}{r['account']} | {r['user']} | {f(r['gpu_hours'])} | {f(r['cpu_hours'])} |"
                  for r in w["rows"]]
        lines += ["", f"Usage: {w['note']}; each week's or month's tree in the JSON and accounts.csv."]
    return lines
