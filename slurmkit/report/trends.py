"""Per-account and per-partition trends over the last N ISO weeks (pure).

The weekly report keeps one small aggregate table per ISO week in the store
(:meth:`slurmkit.accounting.store.Store.save_week`, built by :func:`week_table` from the
report's ``by_account`` / ``by_partition``); the trends read the last N of them
(:meth:`~slurmkit.accounting.store.Store.load_weeks`) and :func:`trends` lays them out per
account and per partition, one value per week.
"""

from __future__ import annotations

import datetime as dt

import pandas as pd

#: Weeks shown when no number is given (``--trend-weeks``).
DEFAULT_WEEKS = 8


def iso_week(t: dt.datetime) -> str:
    """``YYYY-Www`` of the ISO week holding ``t`` (UTC)."""
    y, w, _ = t.isocalendar()
    return f"{y}-W{w:02d}"


def iso_week_of_window(start: dt.datetime, end: dt.datetime) -> str | None:
    """The ISO week ``[start, end)`` is exactly (Monday 00:00 UTC to the next Monday), else None."""
    s = pd.Timestamp(start).tz_convert("UTC") if pd.Timestamp(start).tzinfo else pd.Timestamp(start, tz="UTC")
    e = pd.Timestamp(end).tz_convert("UTC") if pd.Timestamp(end).tzinfo else pd.Timestamp(end, tz="UTC")
    if s.weekday() == 0 and s == s.normalize() and e - s == pd.Timedelta(days=7):
        return iso_week(s.to_pydatetime())
    return None


def weeks_ending(last: str, n: int) -> list[str]:
    """The ``n`` ISO week labels ending with ``last`` (oldest first)."""
    monday = dt.datetime.strptime(last + "-1", "%G-W%V-%u")
    return [iso_week(monday - dt.timedelta(weeks=k)) for k in range(n - 1, -1, -1)]


def _f(x) -> float:
    return float("nan") if x is None else float(x)


def week_table(report: dict, partial: bool = False) -> pd.DataFrame:
    """The week's aggregate table from a report dict: one row per account and per partition
    (``kind``, ``name``, ``jobs``, ``gpu_hours``, ``cpu_hours``, ``wasted_gpu_hours``,
    ``provisional_gpu_hours``, ``energy_kwh``; None kWh when the report's energy is unknown),
    ``provisional`` when the report had running jobs or ``partial`` (its capture ends before the
    week does: a later run covers it). A ``week`` row (name "") holds the week's totals, so a
    week stored with no job is in the store (its trends read 0, not "not in the store")."""
    known = report["totals"].get("energy_known", True)
    prov = bool(report["totals"].get("provisional_jobs")) or bool(partial)
    t = report["totals"]
    rows = [{"kind": "week", "name": "", "jobs": int(t["jobs"]), "gpu_hours": _f(t["gpu_hours"]),
             "cpu_hours": _f(t["cpu_hours"]), "wasted_gpu_hours": _f(t["wasted_gpu_hours"]),
             "provisional_gpu_hours": _f(t.get("provisional_gpu_hours", 0.0)),
             "energy_kwh": float(t["energy_kwh"]) if known and t.get("energy_kwh") is not None else None,
             "provisional": prov}]
    for kind, key in (("account", "by_account"), ("partition", "by_partition")):
        for g in report[key]:
            rows.append({"kind": kind, "name": str(g[kind] or ""), "jobs": int(g["jobs"]),
                         # an unknown figure (None: no GPU field / NCPUS in the input) is NaN, not 0
                         "gpu_hours": _f(g["gpu_hours"]), "cpu_hours": _f(g["cpu_hours"]),
                         "wasted_gpu_hours": _f(g["wasted_gpu_hours"]),
                         "provisional_gpu_hours": _f(g.get("provisional_gpu_hours", 0.0)),
                         "energy_kwh": float(g["energy_kwh"]) if known and g["energy_kwh"] is not None else None,
                         "provisional": prov})
    cols = ["kind", "name", "jobs", "gpu_hours", "cpu_hours", "wasted_gpu_hours", "provisional_gpu_hours",
            "energy_kwh", "provisional"]
    return pd.DataFrame(rows, columns=cols).astype({"energy_kwh": "float64"})


def _per_week(series: pd.Series, weeks: list[str], have: list[str]) -> list:
    """One value per week of ``series`` (indexed by week; NaN: unknown): None for a week not in
    the store (``have``) and for an unknown figure (the renderers tell them apart by
    ``weeks_known``), 0.0 for a stored week without the name."""
    out = []
    for w in weeks:
        if w not in have:
            out.append(None)
            continue
        v = series.get(w, 0.0)
        out.append(None if pd.isna(v) else float(v))
    return out


def trends(tables: pd.DataFrame, weeks: list[str], limit: int = 12) -> dict:
    """``{"weeks", "weeks_known", "provisional_weeks", "totals", "by_account", "by_partition"}``
    from the stored weekly tables (:data:`~slurmkit.accounting.store.WEEK_COLUMNS`) of ``weeks``
    (oldest first): per account and per partition (the ``limit`` with most GPU-hours over the
    weeks, the rest summed as ``(others)``), ``gpu_hours``, ``cpu_hours`` and ``jobs`` per week
    (None for a week not in the store, and for CPU- or GPU-hours a stored week could not know:
    an input without NCPUS / a GPU field; ``weeks_known`` tells the two apart) and
    ``total_gpu_hours`` / ``total_cpu_hours`` (None when a known week's figure is unknown);
    ``totals``: the cluster's ``gpu_hours``, ``cpu_hours`` and ``jobs`` per week (the stored
    ``week`` rows)."""
    have = [w for w in weeks if (tables["week"] == w).any()] if len(tables) else []
    prov = sorted(set(tables.loc[tables["provisional"].astype(bool), "week"])) if len(tables) else []
    out = {"weeks": list(weeks), "weeks_known": have, "provisional_weeks": [w for w in weeks if w in prov]}
    wk = tables[tables["kind"] == "week"] if len(tables) else tables
    tot = {}
    for col in ("gpu_hours", "cpu_hours", "jobs"):
        ser = wk.groupby("week")[col].sum(min_count=1) if len(wk) else pd.Series(dtype=float)
        vals = _per_week(ser, weeks, have)
        tot[col] = [None if v is None else int(v) for v in vals] if col == "jobs" else vals
    out["totals"] = tot
    for kind, key in (("account", "by_account"), ("partition", "by_partition")):
        t = tables[tables["kind"] == kind] if len(tables) else tables
        if not len(t):
            out[key] = []
            continue
        per = {col: t.groupby(["name", "week"])[col].sum(min_count=1) for col in ("gpu_hours", "cpu_hours", "jobs")}
        order = t.groupby("name")["gpu_hours"].sum().sort_values(ascending=False, kind="stable")
        names = list(order.index[:limit])
        rest = list(order.index[limit:])
        rows = []
        for name in names + (["(others)"] if rest else []):
            sel = rest if name == "(others)" else [name]
            row = {kind: name}
            for col in ("gpu_hours", "cpu_hours", "jobs"):
                s = per[col]
                s = s[s.index.get_level_values("name").isin(sel)].groupby(level="week").sum(min_count=1)
                vals = _per_week(s, weeks, have)
                row[col] = [None if v is None else int(v) for v in vals] if col == "jobs" else vals
            known_w = [row[c] for c in ("gpu_hours", "cpu_hours")]
            row["total_gpu_hours"] = None if any(v is None for w, v in zip(weeks, known_w[0]) if w in have) \
                else float(sum(v for v in known_w[0] if v is not None))
            row["total_cpu_hours"] = None if any(v is None for w, v in zip(weeks, known_w[1]) if w in have) \
                else float(sum(v for v in known_w[1] if v is not None))
            rows.append(row)
        out[key] = rows
    return out
