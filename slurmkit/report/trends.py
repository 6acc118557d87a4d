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


def trends(tables: pd.DataFrame, weeks: list[str], limit: int = 12) -> dict:
    """``{"weeks", "weeks_known", "provisional_weeks", "by_account", "by_partition"}`` from the
    stored weekly tables (:data:`~slurmkit.accounting.store.WEEK_COLUMNS`) of ``weeks``
    (oldest first): per account and per partition (the ``limit`` with most GPU-hours over the
    weeks, the rest summed as ``(others)``), ``gpu_hours`` and ``jobs`` per week (None for a
    week not in the store) and ``total_gpu_hours``."""
    have = [w for w in weeks if (tables["week"] == w).any()] if len(tables) else []
    prov = sorted(set(tables.loc[tables["provisional"].astype(bool), "week"])) if len(tables) else []
    out = {"weeks": list(weeks), "weeks_known": have, "provisional_weeks": [w for w in weeks if w in prov]}
    for kind, key in (("account", "by_account"), ("partition", "by_partition")):
        t = tables[tables["kind"] == kind] if len(tables) else tables
        if not len(t):
            out[key] = []
            continue
        gh = t.pivot_table(index="name", columns="week", values="gpu_hours", aggfunc="sum")
        jobs = t.pivot_table(index="name", columns="week", values="jobs", aggfunc="sum")
        order = gh.sum(axis=1).sort_values(ascending=False, kind="stable")
        names = list(order.index[:limit])
        rest = list(order.index[limit:])
        rows = []
        for name in names + (["(others)"] if rest else []):
            sel = rest if name == "(others)" else [name]
            g = gh.loc[sel].sum(axis=0, min_count=1)
            j = jobs.loc[sel].sum(axis=0, min_count=1)
            rows.append({kind: name, "gpu_hours": [None if w not in have else float(g.get(w, 0.0) if not pd.isna(g.get(w)) else 0.0) for w in weeks],
                         "jobs": [None if w not in have else int(j.get(w, 0) if not pd.isna(j.get(w)) else 0) for w in weeks],
                         "total_gpu_hours": float(g.sum())})
        out[key] = rows
    return out
