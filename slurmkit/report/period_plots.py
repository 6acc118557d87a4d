"""The period report's plots: GPU-hours and CPU-hours per part of the breakdown (week over week
or month over month) by account, by partition and by cluster, as stacked bars.

Two layers, so a test can check the figures without a browser:

- :func:`part_series` / :func:`cluster_series` (pure, over the period report's dict, the JSON
  :func:`slurmkit.report.period.period_report` returns): for each part of ``breakdown``, the
  value of each drawn series, ``None`` where it is unknown or the part is not in the store;
- :func:`series_fig` draws one or two such series sets (matplotlib, Agg) and returns the
  figure; :func:`period_pngs` the PNG bytes the HTML inlines (``plots._png``, as the weekly
  report's plots).

Rules (docs/report.md, "The period report's HTML"): a part none of whose days is in the store
is not drawn (a hatched band "not in the store"), never a bar of 0; a part some of whose days
are missing is drawn and marked "partial"; an unknown figure (``None`` in the JSON: unknown
is never 0) is not drawn and the part is marked "unknown"; the y axis starts at 0; the legend sits
outside the axes (right), over no bar.
"""

from __future__ import annotations

import datetime as dt

#: Series colours (matplotlib's tab10 without grey), assigned by name so an account has the
#: same colour in the GPU-hours and the CPU-hours panel; "other" is grey.
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22",
           "#17becf", "#aec7e8", "#ffbb78", "#98df8a")
OTHER = "other"
OTHER_COLOR = "#9a9a9a"

#: How each metric is named on the plots and in the tables.
METRICS = {"gpu_hours": "GPU-hours", "cpu_hours": "CPU-hours"}


def _t(s: str) -> dt.datetime:
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00"))


def part_days(part: dict) -> list[str]:
    """The UTC days (``YYYY-MM-DD``) a part (``{"start", "end"}``, ISO-8601 UTC, end
    exclusive) touches, as the store holds them (one file per UTC day)."""
    s, e = _t(part["start"]), _t(part["end"])
    d = s.replace(hour=0, minute=0, second=0, microsecond=0)
    out = []
    while d < e:
        out.append(f"{d:%Y-%m-%d}")
        d += dt.timedelta(days=1)
    return out


def coverage(report: dict, cluster: str | None = None) -> list[dict]:
    """Per part of ``report["breakdown"]``: ``{"label", "days", "missing", "stored",
    "not_final", "future", "state"}``: the UTC days it touches, how many of them some cluster's
    store lacks (``store.clusters[c].days_missing`` and ``days_future``, the days after the
    report's now; only ``cluster``'s with ``cluster``), how many of them are future, how many
    some cluster holds, how many were stored before they were final (``days_not_final``),
    and ``state``: ``"missing"`` (no
    cluster has any of its days: its figures are not known, the JSON's zeros mean nothing),
    ``"partial"`` (some day missing from some cluster) or ``"complete"``."""
    st = report["store"]
    per = st.get("clusters") or {}
    names = [cluster] if cluster is not None else list(per)
    # a day after the report's now (``days_future``: not yet) is not stored either
    gone = [set(per[c].get("days_missing") or []) | set(per[c].get("days_future") or []) for c in names] or \
        [set(st.get("days_missing") or []) | set(st.get("days_future") or [])]
    src = per[cluster] if cluster is not None else st
    open_ = set(src.get("days_not_final") or [])
    future = set(st.get("days_future") or [])
    out = []
    for p in report["breakdown"]:
        days = part_days(p)
        some = sum(any(d in g for g in gone) for d in days)
        every = sum(all(d in g for g in gone) for d in days)
        out.append({"label": p["label"], "days": len(days), "missing": some, "stored": len(days) - every,
                    "not_final": sum(d in open_ for d in days), "future": sum(d in future for d in days),
                    "state": "missing" if days and every == len(days) else "partial" if some else "complete"})
    return out


def display(name) -> str:
    """A group's name as drawn and listed: ``(none)`` for an empty or missing one (a capture
    without Account), else the name."""
    return "(none)" if name is None or name == "" else str(name)


def short_label(label: str) -> str:
    """A part's tick label: ``2026-W45`` -> ``W45``, a month stays ``2026-11``."""
    return label.split("-", 1)[1] if "-W" in label else label


def part_series(report: dict, key: str, metric: str = "gpu_hours", n: int = 6) -> dict:
    """The stacked series of one panel: ``metric`` (``gpu_hours`` or ``cpu_hours``) per part of
    the breakdown, by ``key`` (``by_account`` or ``by_partition``).

    Returns ``{"metric", "key", "col", "parts": [label], "coverage": coverage(report),
    "series": [{"name", "values": [float | None per part], "missing": [bool per part]}],
    "unknown": [bool per part]}``:

    - the ``n`` names (:func:`display`) with most ``metric`` over the period (``report[key]``,
      the period's table; unknown last; a name whose ``metric`` is 0 over the period is left
      out, into ``other``, which is then 0 and not drawn), each with its part's row's figure (``breakdown[i][key]``), 0.0
      when it has no row in the part (no run there), ``None`` when the row's figure is unknown;
    - ``other`` (when there are more names, or rows without the column): the part's total
      (``breakdown[i]["totals"][metric]``) less the drawn names' known figures, so the stack
      adds up to the part's total; ``None`` when one of the other rows' figure is unknown;
    - every value ``None`` in a part not in the store (``coverage`` state ``missing``) or whose
      total is unknown (``None``); ``unknown[i]`` is True when any value of part ``i`` is None
      in a part that is in the store.
    """
    col = key[3:]
    # ranked by the plotted figure over the period; a name with none of it (0 GPU-hours) is
    # not drawn, not listed in the legend, not in the table beside the plot
    ranked = sorted((r for r in report[key] if r[metric] is None or r[metric] > 0),
                    key=lambda r: (r[metric] is None, -(r[metric] or 0.0)))
    names = [display(r[col]) for r in ranked[:n]]
    cov = coverage(report)
    series = {name: [] for name in names}
    other = []
    unknown = []
    for part, c in zip(report["breakdown"], cov):
        total = part["totals"].get(metric)
        rows = {display(r[col]): r for r in part[key]}
        if c["state"] == "missing" or total is None:
            for name in names:
                series[name].append(None)
            other.append(None)
            unknown.append(c["state"] != "missing")
            continue
        vals = [(rows[name][metric] if name in rows else 0.0) for name in names]
        for name, v in zip(names, vals):
            series[name].append(v)
        rest = total - sum(v for v in vals if v is not None)
        if any(r[metric] is None for name, r in rows.items() if name not in series):
            other.append(None)      # an unknown figure among the others: "other" is unknown
        else:
            # sums taken in another order differ in the last digits: no 1e-9 "other"
            other.append(round(rest, 9) if rest > 1e-6 * max(abs(total), 1.0) else 0.0)
        unknown.append(any(v is None for v in vals) or other[-1] is None)
    gone = [c["state"] == "missing" for c in cov]
    out = [{"name": name, "values": series[name], "missing": gone} for name in names]
    if len(ranked) > n or any(v for v in other if v):
        out.append({"name": OTHER, "values": other, "missing": gone})
    return {"metric": metric, "key": key, "col": col, "parts": [p["label"] for p in report["breakdown"]],
            "coverage": cov, "series": out, "unknown": unknown}


def cluster_series(report: dict, metric: str = "gpu_hours") -> dict | None:
    """Like :func:`part_series`, one series per cluster of ``by_cluster`` (its part's total,
    ``by_cluster[c]["breakdown"][i]["totals"][metric]``; ``None`` where that cluster's part is
    not in its store or unknown). None with a single cluster."""
    if not report.get("by_cluster"):
        return None
    cov = coverage(report)
    series, unknown = [], [False] * len(cov)
    for c in report["by_cluster"]:
        ccov = coverage(report, c["cluster"])
        vals = []
        for i, (part, cc) in enumerate(zip(c["breakdown"], ccov)):
            v = None if cc["state"] == "missing" else part["totals"].get(metric)
            if v is None and cc["state"] != "missing":
                unknown[i] = True
            vals.append(v)
        series.append({"name": c["cluster"], "values": vals, "missing": [cc["state"] == "missing" for cc in ccov]})
    return {"metric": metric, "key": "by_cluster", "col": "cluster",
            "parts": [p["label"] for p in report["breakdown"]], "coverage": cov, "series": series,
            "unknown": unknown}


def colours(*panels: dict) -> dict[str, str]:
    """A colour per series name over ``panels`` (first seen first), ``other`` grey."""
    out: dict[str, str] = {}
    for p in panels:
        for s in p["series"]:
            if s["name"] == OTHER:
                out[OTHER] = OTHER_COLOR
            elif s["name"] not in out:
                out[s["name"]] = PALETTE[len([k for k in out if k != OTHER]) % len(PALETTE)]
    return out


def _draw(ax, panel: dict, colour: dict[str, str], by: str) -> None:
    """Stacked bars of ``panel`` on ``ax``; each bar carries ``gid`` ``<series>|<part index>``
    (a test maps the artists back to the series); the y axis in plain grouped numbers
    (:func:`slurmkit.report.plots.plain_axis`)."""
    from slurmkit.report.plots import plain_axis

    xs = list(range(len(panel["parts"])))
    bottom = [0.0] * len(xs)
    what = METRICS.get(panel["metric"], panel["metric"])
    for s in panel["series"]:
        for x, v in zip(xs, s["values"]):
            if v is None:
                continue
            bar = ax.bar(x, v, bottom=bottom[x], width=0.7, color=colour[s["name"]],
                         label=s["name"] if x == next((i for i, w in enumerate(s["values"]) if w is not None), -1)
                         else "_nolegend_")
            bar.patches[0].set_gid(f"{s['name']}|{x}")
            bottom[x] += v
    top = max(bottom + [0.0])
    ymax = max(1.0, top * 1.18)
    ax.set_ylim(0.0, ymax)
    for x, c, unk in zip(xs, panel["coverage"], panel["unknown"]):
        if c["state"] == "missing":
            ax.axvspan(x - 0.4, x + 0.4, facecolor="none", edgecolor="#888888", hatch="///", lw=0,
                       label="not in the store" if x == next(i for i, k in enumerate(panel["coverage"])
                                                            if k["state"] == "missing") else "_nolegend_",
                       gid=f"missing|{x}")
            ax.text(x, ymax * 0.5, "not in the store", rotation=90, ha="center", va="center", fontsize=7,
                    color="#555555")
        elif unk or c["state"] == "partial":
            # above the bar, inside the axes (the y range leaves room); many parts: the mark only
            word = ("unknown" if unk else "partial") if len(xs) <= 16 else ("?" if unk else "†")
            ax.text(x, bottom[x] + ymax * 0.02, word, ha="center", va="bottom", fontsize=6, color="#b00000",
                    gid=f"{'unknown' if unk else 'partial'}|{x}")
    ax.set_xticks(xs, [short_label(p) + ("†" if c["state"] != "complete" else "")
                       for p, c in zip(panel["parts"], panel["coverage"])],
                  fontsize=7, rotation=45 if by == "month" and len(xs) > 6 else 0)
    ax.set_ylabel(what, fontsize=8)
    plain_axis(ax.yaxis)
    ax.tick_params(axis="y", labelsize=7)
    ax.set_xlim(-0.6, len(xs) - 0.4)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False, borderaxespad=0.0)


def series_fig(panels: list[dict], title: str, by: str):
    """``(pyplot, figure, axes list)``: one panel (axes) per series set of ``panels`` (e.g.
    GPU-hours above CPU-hours), sharing the x axis (the parts), stacked bars per part, the
    legend right of each panel, outside it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(panels), 1, figsize=(7.5, 0.4 + 2.5 * len(panels)), dpi=100, sharex=True,
                             squeeze=False)
    axes = [a[0] for a in axes]
    colour = colours(*panels)
    for ax, panel in zip(axes, panels):
        _draw(ax, panel, colour, by)
    axes[0].set_title(title, fontsize=9)
    per = "ISO week" if by == "week" else "month"
    axes[-1].set_xlabel(f"{per} (UTC); † part not (fully) in the store", fontsize=7)
    fig.tight_layout()
    return plt, fig, axes


def panels(report: dict, key: str, n: int = 6) -> list[dict]:
    """The panels of one plot: GPU-hours, and CPU-hours beside them when the report knows any
    (``totals.cpu_hours`` not None); for ``key`` ``by_cluster`` the per-cluster series.
    Panels whose figure is unknown over the whole period are left out ([] when none is left:
    no chart of zeros)."""
    out = []
    for metric in METRICS:
        if report["totals"].get(metric) is None:
            continue
        p = cluster_series(report, metric) if key == "by_cluster" else part_series(report, key, metric, n)
        if p is not None and p["series"]:
            out.append(p)
    return out


def period_pngs(report: dict, n: int = 6) -> dict[str, bytes]:
    """PNG bytes of the period plots: ``account``, ``partition`` and (several clusters)
    ``cluster``; a plot with no panel (figure unknown, no row) is left out."""
    from slurmkit.report.plots import _png

    per = "week" if report["period"]["by"] == "week" else "month"
    out = {}
    for name, key in (("account", "by_account"), ("partition", "by_partition"), ("cluster", "by_cluster")):
        ps = panels(report, key, n)
        if ps:
            plt, fig, _axes = series_fig(ps, f"per {per} by {name}" + (f" (top {n} + other)" if key != "by_cluster"
                                                                       else ""), report["period"]["by"])
            out[name] = _png(plt, fig)
    return out

