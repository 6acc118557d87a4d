"""Report plots drawn with matplotlib (Agg) and returned as PNG bytes, for inlining as
``data:image/png;base64`` in the HTML report (no external files, readable in a mail client)."""

from __future__ import annotations

import io

from slurmkit.report.energy import REPORTED_SOURCES


def _fig(w=7.5, h=2.8):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(w, h), dpi=100)
    return plt, fig, ax


def _png(plt, fig) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def hourly_png(report: dict) -> bytes:
    """:func:`hourly_fig` as PNG bytes."""
    return _png(*hourly_fig(report)[:2])


def hourly_fig(report: dict):
    """``(pyplot, figure, axes)``: GPUs in use per hour over the window (the ``hourly``
    section), peak and p95 marked; capacity drawn when known. The y axis starts at 0 (a week
    without GPU jobs has no negative GPUs) and reaches at least 1."""
    import datetime as dt

    plt, fig, ax = _fig()
    h = report["hourly"]
    xs = [dt.datetime.fromisoformat(t.replace("Z", "+00:00")) for t in h["hours"]]
    ys = [v or 0.0 for v in h["gpus_in_use"]]
    ax.fill_between(xs, ys, step="post", alpha=0.35, color="#1f77b4")
    per = "daily" if h.get("bucket") == "day" else "hourly"
    ax.step(xs, ys, where="post", color="#1f77b4", lw=1, label=f"GPUs in use ({per} mean)")
    cov = report.get("coverage") or {}
    lo = hi = None
    if cov.get("partial"):   # after the capture: nothing is known, not 0 GPUs
        lo, hi = (dt.datetime.fromisoformat(cov[k].replace("Z", "+00:00")) for k in ("covered_until", "window_end"))

    def level(y, **kw):
        # a level of the hours covered: it stops where the capture does
        if lo is None or not xs:
            ax.axhline(y, **kw)
        else:
            ax.hlines(y, xs[0], lo, **kw)

    if h.get("p95") is not None:
        level(h["p95"], color="#ff7f0e", lw=1, ls="--", label=f"p95 {h['p95']:.3g}")
    cap = report.get("utilization", {}).get("capacity_gpus")
    if cap:
        level(cap, color="#2ca02c", lw=1, label=f"capacity {cap:g}")
    if lo is not None:
        ax.axvspan(lo, hi, color="#bbbbbb", alpha=0.5, lw=0, label="not captured")
    ax.set_ylabel("GPUs")
    plain_axis(ax.yaxis)
    ax.set_xlabel("UTC")
    top = max([*ys, h.get("p95") or 0.0, cap or 0.0, 0.0])
    ax.set_ylim(0.0, max(1.0, top * 1.08))
    ax.legend(loc="upper right", fontsize=8)
    fig.autofmt_xdate()
    return plt, fig, ax


def top_users_png(report: dict, n: int = 10) -> bytes:
    """:func:`top_users_fig` as PNG bytes."""
    return _png(*top_users_fig(report, n)[:2])


def top_users_fig(report: dict, n: int = 10):
    """``(pyplot, figure, axes)``: horizontal bars, GPU-hours of the top ``n`` users, wasted
    GPU-hours stacked; the legend above the bars, outside the axes, so it covers none."""
    plt, fig, ax = _fig(7.5, 0.35 * min(n, max(len(report["by_user"]), 1)) + 1.5)
    rows = report["by_user"][:n][::-1]
    names = [r["user"] or "(none)" for r in rows]
    used = [(r["gpu_hours"] or 0) - (r["wasted_gpu_hours"] or 0) for r in rows]
    waste = [r["wasted_gpu_hours"] or 0 for r in rows]
    ax.barh(names, used, color="#1f77b4", label="GPU-hours not wasted")
    ax.barh(names, waste, left=used, color="#d62728", label="GPU-hours wasted (failed, timed out, requeued ...)")
    ax.set_xlabel("GPU-hours")
    plain_axis(ax.xaxis)
    ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.02), ncol=2, fontsize=8, frameon=False,
              borderaxespad=0.0)
    return plt, fig, ax


#: Energy provenances in their order of preference, as the report names them.
ENERGY_SOURCES = REPORTED_SOURCES


def energy_png(report: dict) -> bytes | None:
    """Energy (kWh) by provenance: measured, Prometheus, Slurm, modelled; None when the report's
    energy is unknown (no empty chart)."""
    if not report["totals"].get("energy_known", True):
        return None
    src = report["totals"]["energy_kwh_by_source"]
    keys = list(ENERGY_SOURCES)
    vals = [src.get(k) or 0.0 for k in keys]
    # (horizontal bars: the sources' names side by side on one axis overlapped)
    plt, fig, ax = _fig(5.0, 0.32 * len(keys) + 0.9)
    ax.barh(keys[::-1], vals[::-1], color=["#2ca02c", "#17becf", "#9467bd", "#c5b0d5", "#e377c2", "#7f7f7f"][::-1])
    ax.set_xlabel("kWh")
    ax.tick_params(axis="y", labelsize=8)
    plain_axis(ax.xaxis)
    return _png(plt, fig)


#: Units of the queue-wait axis: (name, seconds, used while the longest wait is under this many
#: seconds).
WAIT_UNITS = (("seconds", 1.0, 180.0), ("minutes", 60.0, 3 * 3600.0), ("hours", 3600.0, float("inf")))


def wait_unit(longest_s: float) -> tuple[str, float]:
    """``(name, seconds per unit)`` of the queue-wait axis for waits up to ``longest_s``
    seconds: seconds under 3 min, minutes under 3 h, else hours (tick labels stay plain
    numbers, never ``3x10^-4`` hours)."""
    for name, sec, below in WAIT_UNITS:
        if longest_s < below:
            return name, sec
    return WAIT_UNITS[-1][:2]


def plain_tick(v: float) -> str:
    """An axis tick as a plain number, never with an exponent: whole numbers with thousands
    separators from 1000 on (``1,000``, ``2,500,000``, never ``1e+03`` or ``2.5`` under a ``1e6``
    offset), up to 6 significant digits below (``0.0001``, ``0.5``, ``20``, ``999.5``)."""
    v = float(v) + 0.0          # (no "-0")
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    text = f"{v:.6g}"
    if "e" in text:
        import numpy as np

        text = np.format_float_positional(v, precision=6, fractional=False, trim="-")
    return text


def plain_axis(axis) -> None:
    """Label ``axis`` (an Axes' ``xaxis`` or ``yaxis``) with :func:`plain_tick`: every plot's
    quantity axis (GPUs, GPU-hours, CPU-hours, kWh) reads plain grouped numbers, with no ``1e6``
    offset above it."""
    from matplotlib.ticker import FuncFormatter

    axis.set_major_formatter(FuncFormatter(lambda v, _pos: plain_tick(v)))


def queue_wait_png(report: dict, n: int = 12) -> bytes | None:
    """:func:`queue_wait_fig` as PNG bytes (None when it draws nothing)."""
    got = queue_wait_fig(report, n)
    return None if got is None else _png(*got[:2])


def queue_wait_fig(report: dict, n: int = 12):
    """``(pyplot, figure, axes)``: queue wait as a distribution per partition and GPU-count
    bucket: one horizontal box per group (the ``n`` groups with most jobs), box p25-p75, median
    line, whiskers p5-p95, the longest wait a dot; log time axis in the unit :func:`wait_unit`
    picks for the longest wait, ticks as plain numbers. None when no job started in the window."""
    groups = [q for q in report["queue_wait"]["by_partition_gpus"] if q["n"] and q["p50_s"] is not None]
    if not groups:
        return None
    groups = sorted(groups, key=lambda q: -q["n"])[:n][::-1]
    plt, fig, ax = _fig(7.5, 0.38 * len(groups) + 1.3)
    longest = max(max(q.get("max_s") or 0.0, q.get("p95_s") or 0.0) for q in groups)
    unit, per = wait_unit(longest)
    floor = 1.0 / per   # 1 s: a log axis holds no 0

    def h(v):
        return max((v or 0.0) / per, floor)

    stats = [{"label": f"{q['partition'] or '(none)'} · {q['gpu_bucket']} GPU · n={q['n']}",
              "med": h(q["p50_s"]), "q1": h(q.get("p25_s")), "q3": h(q.get("p75_s")),
              "whislo": h(q.get("p5_s")), "whishi": h(q["p95_s"]), "fliers": [h(q.get("max_s"))]}
             for q in groups]
    import matplotlib

    # matplotlib 3.10 names it orientation= (vert= deprecated); 3.7-3.9 only know vert=
    horizontal = ({"orientation": "horizontal"} if tuple(map(int, matplotlib.__version__.split(".")[:2])) >= (3, 10)
                  else {"vert": False})
    ax.bxp(stats, **horizontal, showfliers=True, patch_artist=True,
           boxprops={"facecolor": "#c6dbef", "edgecolor": "#1f77b4"},
           medianprops={"color": "#d62728"}, flierprops={"marker": ".", "markersize": 4})
    ax.set_xscale("log")
    from matplotlib.ticker import FuncFormatter, NullFormatter

    import math

    plain = FuncFormatter(lambda v, _pos: plain_tick(v))
    plain_axis(ax.xaxis)
    lo, hi = ax.get_xlim()
    # within about a decade the major ticks are too few: the minor ones get plain labels too
    ax.xaxis.set_minor_formatter(plain if math.log10(hi / lo) < 1.5 else NullFormatter())
    ax.set_xlabel(f"wait, {unit} (Start − {report['queue_wait'].get('from', 'Eligible')}); "
                  "box p25-p75, red median, whiskers p5-p95, dot the longest")
    ax.tick_params(axis="y", labelsize=8)
    ax.xaxis.label.set_size(8)
    return plt, fig, ax


#: The narrowest bar of the downtime timeline, as a share of the window (a week: about 1 h).
MIN_BAR_SHARE = 0.006


def _span_text(td) -> str:
    """A timedelta as a short text: "1 h", "25 min", "40 s"."""
    s = td.total_seconds()
    return f"{s / 3600:.2g} h" if s >= 3600 else f"{s / 60:.2g} min" if s >= 60 else f"{s:.2g} s"


def downtime_png(report: dict, n_nodes: int = 30, n_reasons: int = 8) -> bytes | None:
    """Downtime and drains as a timeline: one row per node (the ``n_nodes`` most down), a bar
    per event over its time in the window, coloured by reason (the ``n_reasons`` with most
    down time by name, the rest "other reasons"); an ongoing event is hatched. None when no
    node was down in the window."""
    import datetime as dt

    d = report.get("downtime") or {}
    events = d.get("events") or []
    if not events:
        return None
    w0 = dt.datetime.fromisoformat(report["window"]["start"].replace("Z", "+00:00"))
    w1 = dt.datetime.fromisoformat(report["window"]["end"].replace("Z", "+00:00"))
    upto = dt.datetime.fromisoformat(report["as_of"].replace("Z", "+00:00")) if report.get("as_of") else w1
    per_node: dict[str, float] = {}
    for e in events:
        per_node[e["node"]] = per_node.get(e["node"], 0.0) + e["hours"]
    nodes = sorted(sorted(per_node, key=lambda k: -per_node[k])[:n_nodes])[::-1]
    reasons = [b["reason"] for b in d.get("by_reason", [])][:n_reasons]
    colors = ["#d62728", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf", "#1f77b4"]
    color = {r: colors[i % len(colors)] for i, r in enumerate(reasons)}
    plt, fig, ax = _fig(7.5, 0.3 * len(nodes) + 0.25 * ((min(len(reasons) + 1, n_reasons + 1) + 1) // 2) + 1.6)
    import matplotlib.dates as mdates

    seen = set()
    for e in events:
        if e["node"] not in nodes:
            continue
        lo = max(dt.datetime.fromisoformat(e["start"].replace("Z", "+00:00")), w0)
        hi = min(dt.datetime.fromisoformat(e["end"].replace("Z", "+00:00")) if e["end"] else upto, w1)
        if hi <= lo:
            continue
        # (an event of seconds in a week is under a pixel wide: drawn at least MIN_BAR_SHARE of
        # the window, said in the title)
        hi = max(hi, min(lo + (w1 - w0) * MIN_BAR_SHARE, w1))
        label = e["reason"] if e["reason"] in color else "other reasons"
        c = color.get(e["reason"], "#7f7f7f")
        ax.broken_barh([(mdates.date2num(lo), mdates.date2num(hi) - mdates.date2num(lo))],
                       (nodes.index(e["node"]) - 0.35, 0.7), facecolors=c, hatch="//" if e["ongoing"] else None,
                       label=None if label in seen else (label[:60] + ("…" if len(label) > 60 else "")))
        seen.add(label)
    ax.set_yticks(range(len(nodes)), nodes, fontsize=8)
    ax.set_xlim(mdates.date2num(w0), mdates.date2num(w1))
    ax.xaxis_date()
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d"))
    ax.tick_params(axis="x", labelsize=8)
    ax.set_title(f"UTC; hatched: still down at the capture / now; an event shorter than "
                 f"{_span_text((w1 - w0) * MIN_BAR_SHARE)} is drawn that wide", fontsize=8)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), fontsize=7, ncol=2, title="reason",
              title_fontsize=7)
    return _png(plt, fig)


#: The trend lines' (colour, marker, line style), one per series: tab10's colours, with a
#: marker and a line style that differ too (a legend readable without colour).
TREND_STYLES = tuple(zip(("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"),
                         ("o", "s", "^", "D", "v", "P", "X", "*"),
                         ("-", "--", "-.", ":", "-", "--", "-.", ":")))


def trends_png(report: dict, n: int = 8) -> bytes | None:
    """:func:`trends_fig` as PNG bytes; None where it draws nothing."""
    got = trends_fig(report, n)
    return None if got is None else _png(*got[:2])


def trends_fig(report: dict, n: int = 8):
    """``(pyplot, figure, axes)`` or None: GPU-hours (top row) and CPU-hours (bottom row) per ISO week over the trend weeks: one
    line per partition (left) and per account (right), the ``n`` with most GPU-hours; a week not
    in the store or an unknown figure is a gap, a provisional week (jobs still running, or a
    capture that ends before the week) an open marker. None without trends, with no week known
    or with no job in the known weeks."""
    t = report.get("trends") or {}
    if not t.get("weeks_known") or not (t.get("by_partition") or t.get("by_account")):
        return None   # no week, or stored weeks without a job: no empty chart
    import math

    weeks = t["weeks"]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt2

    fig, axes = plt2.subplots(2, 2, figsize=(7.5, 5.6), dpi=100, sharey="row")
    prov = set(t.get("provisional_weeks") or [])
    xs = list(range(len(weeks)))
    for row, (col, what) in enumerate((("gpu_hours", "GPU-hours"), ("cpu_hours", "CPU-hours"))):
        for ax, key, kind in ((axes[row][0], "by_partition", "partition"), (axes[row][1], "by_account", "account")):
            for i, r in enumerate((t.get(key) or [])[:n]):
                ys = [math.nan if v is None else v for v in (r.get(col) or [None] * len(weeks))]
                # each series its own colour, marker and line style (the provisional markers are
                # drawn in the series' colour, so they take no colour from the cycle)
                c, m, ls = TREND_STYLES[i % len(TREND_STYLES)]
                ax.plot(xs, ys, color=c, marker=m, ls=ls, ms=4, lw=1.2, label=str(r[kind] or "(none)")[:24])
                px = [x for x, w in zip(xs, weeks) if w in prov and not math.isnan(ys[x])]
                if px:
                    ax.plot(px, [ys[x] for x in px], ls="none", marker=m, mfc="white", mec=c, ms=7)
            ax.set_title(f"{what} per week by {kind}", fontsize=9)
            ax.set_xticks(xs, [w[-3:] for w in weeks], fontsize=7)
            ax.set_ylim(bottom=0)
            plain_axis(ax.yaxis)
            if row == 0:
                ax.legend(fontsize=6, loc="upper left")
        axes[row][0].set_ylabel(what)
    fig.text(0.5, 0.01, f"ISO weeks {weeks[0]} to {weeks[-1]}; open marker: provisional (running jobs or a partial capture); "
                        "a gap: not in the store or unknown", ha="center", fontsize=7)
    return plt2, fig, axes
