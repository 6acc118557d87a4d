"""Report plots drawn with matplotlib (Agg) and returned as PNG bytes, for inlining as
``data:image/png;base64`` in the HTML report (no external files, readable in a mail client)."""

from __future__ import annotations

import io


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
    """GPUs in use per hour over the window (the ``hourly`` section), peak and p95 marked;
    capacity drawn when known."""
    import datetime as dt

    plt, fig, ax = _fig()
    h = report["hourly"]
    xs = [dt.datetime.fromisoformat(t.replace("Z", "+00:00")) for t in h["hours"]]
    ys = [v or 0.0 for v in h["gpus_in_use"]]
    ax.fill_between(xs, ys, step="post", alpha=0.35, color="#1f77b4")
    per = "daily" if h.get("bucket") == "day" else "hourly"
    ax.step(xs, ys, where="post", color="#1f77b4", lw=1, label=f"GPUs in use ({per} mean)")
    if h.get("p95") is not None:
        ax.axhline(h["p95"], color="#ff7f0e", lw=1, ls="--", label=f"p95 {h['p95']:.1f}")
    cap = report.get("utilization", {}).get("capacity_gpus")
    if cap:
        ax.axhline(cap, color="#2ca02c", lw=1, label=f"capacity {cap:g}")
    ax.set_ylabel("GPUs")
    ax.set_xlabel("UTC")
    ax.legend(loc="upper right", fontsize=8)
    fig.autofmt_xdate()
    return _png(plt, fig)


def top_users_png(report: dict, n: int = 10) -> bytes:
    """Horizontal bars: GPU-hours of the top ``n`` users, wasted GPU-hours stacked."""
    plt, fig, ax = _fig(7.5, 0.35 * min(n, max(len(report["by_user"]), 1)) + 1.2)
    rows = report["by_user"][:n][::-1]
    names = [r["user"] or "(none)" for r in rows]
    used = [(r["gpu_hours"] or 0) - (r["wasted_gpu_hours"] or 0) for r in rows]
    waste = [r["wasted_gpu_hours"] or 0 for r in rows]
    ax.barh(names, used, color="#1f77b4", label="GPU-hours not wasted")
    ax.barh(names, waste, left=used, color="#d62728", label="GPU-hours wasted (failed, timed out, requeued ...)")
    ax.set_xlabel("GPU-hours")
    ax.legend(loc="lower right", fontsize=8)
    return _png(plt, fig)


#: Energy provenances in their order of preference, as the report names them.
ENERGY_SOURCES = ("measured", "prometheus", "slurm", "modelled")


def energy_png(report: dict) -> bytes | None:
    """Energy (kWh) by provenance: measured, Prometheus, Slurm, modelled; None when the report's
    energy is unknown (no empty chart)."""
    if not report["totals"].get("energy_known", True):
        return None
    plt, fig, ax = _fig(5.0, 2.4)
    src = report["totals"]["energy_kwh_by_source"]
    keys = list(ENERGY_SOURCES)
    vals = [src.get(k) or 0.0 for k in keys]
    ax.bar(keys, vals, color=["#2ca02c", "#17becf", "#9467bd", "#7f7f7f"])
    ax.set_ylabel("kWh")
    return _png(plt, fig)


def queue_wait_png(report: dict, n: int = 12) -> bytes | None:
    """Queue wait as a distribution per partition and GPU-count bucket: one horizontal box per
    group (the ``n`` groups with most jobs), box p25-p75, median line, whiskers p5-p95, the
    longest wait a dot; log time axis in hours. None when no job started in the window."""
    groups = [q for q in report["queue_wait"]["by_partition_gpus"] if q["n"] and q["p50_s"] is not None]
    if not groups:
        return None
    groups = sorted(groups, key=lambda q: -q["n"])[:n][::-1]
    plt, fig, ax = _fig(7.5, 0.38 * len(groups) + 1.3)
    floor = 1.0 / 3600   # 1 s: a log axis holds no 0

    def h(v):
        return max((v or 0.0) / 3600.0, floor)

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
    ax.set_xlabel(f"wait, hours (Start − {report['queue_wait'].get('from', 'Eligible')}); "
                  "box p25-p75, red median, whiskers p5-p95, dot the longest")
    ax.tick_params(axis="y", labelsize=8)
    ax.xaxis.label.set_size(8)
    return _png(plt, fig)
