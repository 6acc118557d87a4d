"""sreport's breakdown and the account tree for the period report: the sections
:func:`slurmkit.report.period.period_report` takes through its ``sections=`` hook.

Each part of the period (ISO week or month) is computed on its own from the store's rows of its
days (the same day files the period report aggregates, read by :meth:`Store.load` into the
weekly model's allocation frame, :func:`slurmkit.report.usage.allocations`), with the weekly
report's functions (:func:`slurmkit.report.weekly.breakdown_section`'s
:func:`slurmkit.report.breakdown.breakdown`, :func:`~slurmkit.report.breakdown.account_tree`);
the period's figures are the sum of its parts' (every figure is a sum over hours and the parts
tile the period's hours), and a part's the sum of its tiles' (at most :data:`TILE_DAYS` days),
so memory holds one tile's allocation rows at a time (the step rows are not read), never a
month's or the period's.
"""

from __future__ import annotations

import datetime as dt

import pandas as pd

from slurmkit.errors import InputError
from slurmkit.report.window import Window, iso_z

#: The names of the two sections in the period report (``report[name]``).
SECTIONS = ("sreport_breakdown", "accounts")


def _whole_hours_to(w: Window, now: pd.Timestamp) -> Window:
    """``w`` cut at the last whole hour before ``now`` (sreport's hours; a past window as is)."""
    from slurmkit.report.live import whole_hours

    end = min(pd.Timestamp(w.end), now)
    return Window(*whole_hours(w.start, max(end, pd.Timestamp(w.start)).to_pydatetime()))


def _days(w: Window) -> list[dt.datetime]:
    d = w.start.replace(hour=0, minute=0, second=0, microsecond=0)
    out = []
    while d < w.end:
        out.append(d)
        d += dt.timedelta(days=1)
    return out


#: The longest window whose rows the breakdown holds in memory at once (days): a part (a
#: month) is computed as the sum of tiles of at most this many days, as the period is the sum
#: of its parts (every figure is a sum over hours), so memory holds a week's allocation rows
#: at most (about 1.2 GiB for a week of 1M jobs), whatever the breakdown.
TILE_DAYS = 7


def tiles(w: Window, days: int = TILE_DAYS) -> list[Window]:
    """``w`` cut into consecutive windows of at most ``days`` days, at UTC midnights counted
    from ``w``'s first day (the first and last clipped to ``w``); ``[w]`` for an empty ``w``
    (a part after the store's latest pull: its figures are zeros over no hour)."""
    out, t = [], w.start.replace(hour=0, minute=0, second=0, microsecond=0)
    while t < w.end:
        nxt = t + dt.timedelta(days=days)
        out.append(Window(max(t, w.start), min(nxt, w.end)))
        t = nxt
    return out or [w]


def job_clusters(store_root, clusters: list[str], w: Window) -> set[str]:
    """The Cluster names (sacct's Cluster column) of the store clusters ``clusters``' rows in
    the day files of ``w`` (their ``cluster`` column only is read). Raises
    :class:`~slurmkit.errors.InputError` naming a day file that cannot be read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from slurmkit.accounting.store import Store

    out: set[str] = set()
    for c in clusters or ["_default"]:
        st = Store(store_root, "" if c == "_default" else c)
        for d in _days(w):
            path, _ = st.day_files(d)
            if path.exists():
                with InputError.reading(path, "a day file of the store (Parquet, with a cluster column)",
                                        pa.ArrowException, ValueError):
                    column = pq.read_table(path, columns=["cluster"]).column(0)
                out |= {str(x) for x in column.unique().to_pylist() if x}
    return out


def latest_pull(store_root, clusters: list[str], w: Window) -> pd.Timestamp | None:
    """The latest pull (the manifest's ``pulled_at``, aware UTC, to the microsecond) of the
    store clusters ``clusters``' days in ``w``; None when no day of it is stored. (A live pull
    stores ``time.time()``, a float: read as is, its last digits are nanoseconds that no
    ``datetime`` holds.)"""
    from slurmkit.accounting.store import Store

    pulls = []
    for c in clusters or ["_default"]:
        man = Store(store_root, "" if c == "_default" else c).manifest()
        pulls += [float(man[f"{d:%Y-%m-%d}"]["pulled_at"]) for d in _days(w)
                  if man.get(f"{d:%Y-%m-%d}", {}).get("pulled_at") is not None]
    return pd.Timestamp(round(max(pulls) * 1e6), unit="us", tz="UTC") if pulls else None


def part_allocations(store_root, clusters: list[str], w: Window, now) -> pd.DataFrame:
    """The allocation frame (:func:`slurmkit.report.usage.allocations`, the weekly model's) of
    ``w`` from the store's day files of the store clusters ``clusters``: the rows the period
    report aggregates for that window (the allocation files only: the step rows are not read).
    Days not in the store are absent (the period report lists them under
    ``store.days_missing``)."""
    from slurmkit.accounting.store import Store
    from slurmkit.report.usage import allocations

    frames = []
    for c in clusters or ["_default"]:
        rows, dq = Store(store_root, "" if c == "_default" else c).load(_days(w), steps=False)
        frames.append(allocations(rows, w.start, w.end, dq, now=now))
    full = [f for f in frames if len(f)]
    return pd.concat(full, ignore_index=True) if len(full) > 1 else (full or frames)[0]


def _add(a, b):
    return None if a is None or b is None else a + b


def _sum_figures(parts: list[dict]) -> dict:
    """{TRES: {figure: hours}} summed over the parts (None when any part's is None)."""
    from slurmkit.report.breakdown import FIGURES

    out = {}
    for k in parts[0]:
        out[k] = {f: parts[0][k][f] for f in FIGURES}
        for p in parts[1:]:
            for f in FIGURES:
                out[k][f] = _add(out[k][f], p[k][f])
        out[k]["count"] = parts[-1][k]["count"]
    return out


def merge_trees(trees: list[dict]) -> dict:
    """Account trees (:func:`slurmkit.report.breakdown.account_tree`) of the parts summed into
    the period's: accounts matched by name, users by name under their account; hours added
    (None when any part's is None)."""
    def merge(a: dict, b: dict) -> dict:
        out = {**a, "gpu_hours": _add(a["gpu_hours"], b["gpu_hours"]), "cpu_hours": _add(a["cpu_hours"], b["cpu_hours"])}
        users = {u["user"]: dict(u) for u in a["users"]}
        for u in b["users"]:
            if u["user"] in users:
                v = users[u["user"]]
                v["gpu_hours"], v["cpu_hours"] = _add(v["gpu_hours"], u["gpu_hours"]), _add(v["cpu_hours"], u["cpu_hours"])
            else:
                users[u["user"]] = dict(u)
        out["users"] = list(users.values())
        kids = {c["account"]: c for c in a["children"]}
        for c in b["children"]:
            kids[c["account"]] = merge(kids[c["account"]], c) if c["account"] in kids else c
        out["children"] = list(kids.values())
        if "reservation_idle" in a or "reservation_idle" in b:
            ra, rb = a.get("reservation_idle", {}), b.get("reservation_idle", {})
            out["reservation_idle"] = {f: ra.get(f, 0.0) + rb.get(f, 0.0) for f in ("gpu_hours", "cpu_hours")}
        return out

    tree = trees[0]
    for t in trees[1:]:
        tree = merge(tree, t)
    return tree


class _Sections:
    """The two sections of :func:`breakdown_sections` over one report's inputs: each part's
    figures computed once (:meth:`compute`), reconciled with sreport's (:meth:`theirs`)."""

    def __init__(self, store_root, inputs: dict, now_ts: pd.Timestamp, sreport, captures: dict, tz: str,
                 tile_days: int):
        from slurmkit.report import sreport as S

        self.store_root, self.inputs, self.now_ts, self.sreport = store_root, inputs, now_ts, sreport
        self.captures, self.tz, self.tile_days = captures, tz, tile_days
        self.cache: dict = {}
        self.parse = {"utilization": S.cluster_utilization, "AccountUtilizationByUser": S.account_users}

    def theirs(self, kind: str, w: Window, whole: bool):
        """sreport's figures of ``kind`` for window ``w``: from its capture when the capture's banner
        names ``w`` (or names none and ``w`` is the period, ``whole``), else from sreport asked live,
        else None."""
        from slurmkit.report import sreport as S

        if kind in self.captures:
            path, text = self.captures[kind]
            named = S.banner_window(text, self.tz)
            if (named is None and not whole) or (named is not None and named != (pd.Timestamp(w.start),
                                                                                  pd.Timestamp(w.end))):
                return None
            try:
                return self.parse[kind](text, S.unit_of(text), source=path)
            except ValueError as exc:      # an InputError names its line; -t Percent
                raise exc if isinstance(exc, InputError) else InputError(path, None, str(exc)) from None
        if self.sreport is None:
            return None
        return self.parse[kind](self.sreport(kind, w), "seconds")

    def matched(self, kind: str, windows: list[dict], found: list) -> None:
        """A capture of ``kind`` that named none of ``windows`` (label, start, end; ``found``:
        sreport's figures per window, None where not captured): refused."""
        from slurmkit.report import sreport as S

        if kind in self.captures and all(f is None for f in found):
            path, text = self.captures[kind]
            named = S.banner_window(text, self.tz)
            asked = ", ".join(f"{w['label']} {w['start']} - {w['end']}" for w in windows)
            raise InputError(path, None, f"its banner names {iso_z(named[0])} - {iso_z(named[1])} (read in {self.tz}), "
                                         f"none of this report's windows (whole hours: {asked}): capture sreport "
                                         "with start= and end= of the period or of one of its parts")

    def compute(self, windows, clusters):
        """``[(label, whole hours, breakdown figures or None, account tree or None)]``: the period
        first, then each part (each the sum of its tiles'); computed once per report."""
        from slurmkit.report import breakdown as BD

        key = (tuple((label, w.start, w.end) for label, w in windows), tuple(clusters))
        if key in self.cache:        # both sections of one report share one pass over the parts
            return self.cache[key]
        # nothing is known after the store's latest pull of the period's days (a store filled
        # from a capture: the capture time): running jobs and the windows stop there, as the
        # period report's jobs do (running_up_to) and the weekly report's window does
        pulled = latest_pull(self.store_root, clusters, windows[0][1])
        upto = min(self.now_ts, pulled) if pulled is not None else self.now_ts
        assocs = self.inputs.get("assocs")
        if assocs and len({r.get("cluster", "").lower() for r in assocs} - {""}) > 1:
            # (sacctmgr's tree of every cluster of the slurmdbd: the jobs' one's)
            assocs = BD.cluster_tree(assocs, job_clusters(self.store_root, clusters, windows[0][1]) | set(clusters))
        parts = []
        facts = BD.job_facts(pd.DataFrame())
        for label, w in windows[1:] or windows[:1]:
            hw = _whole_hours_to(w, upto)
            figs, trees = [], []
            for t in tiles(hw, self.tile_days):      # (a part's figures: the sum of its tiles')
                a = part_allocations(self.store_root, clusters, t, min(pd.Timestamp(t.end), upto))
                facts = BD.add_facts(facts, BD.job_facts(a))
                if self.inputs.get("node_tres") is not None:
                    figs.append(BD.breakdown(t.start, t.end, a, self.inputs.get("events"),
                                             self.inputs.get("reservations"), self.inputs["node_tres"], now=t.end))
                if assocs:
                    shares = BD.reservation_shares(self.inputs.get("reservations") or [], a,
                                                   self.inputs.get("events"), self.inputs.get("node_tres") or {},
                                                   t.start, t.end, now=t.end)
                    trees.append(BD.account_tree(assocs, a, t.start, t.end, now=t.end, shares=shares))
                del a
            ours = {**figs[0], "window": {"start": iso_z(pd.Timestamp(hw.start)), "end": iso_z(pd.Timestamp(hw.end))},
                    "tres": _sum_figures([f["tres"] for f in figs])} if figs else None
            parts.append((label, hw, ours, merge_trees(trees) if trees else None))
        BD.refuse_foreign(facts, {**self.inputs, "assocs": assocs})
        p0 = windows[0][1]
        hp = _whole_hours_to(p0, upto)
        per = ("(period)", hp, {"window": {"start": iso_z(pd.Timestamp(hp.start)), "end": iso_z(pd.Timestamp(hp.end))},
                                "capacity_source": parts[0][2]["capacity_source"],
                                "tres": _sum_figures([p[2]["tres"] for p in parts])} if parts[0][2] else None,
               merge_trees([p[3] for p in parts]) if parts[0][3] else None)
        self.cache[key] = [per] + (parts if len(windows) > 1 else [])
        return self.cache[key]

    def utilization(self, windows, clusters):
        """The ``sreport_breakdown`` section (None without node TRES)."""
        from slurmkit.report import breakdown as BD

        if self.inputs.get("node_tres") is None:
            return None
        out = []
        for label, hw, bd, _ in self.compute(windows, clusters):
            sre = self.theirs("utilization", hw, label == "(period)")
            diffs = BD.compare(bd["tres"], sre) if sre is not None else []
            out.append({"label": label, **bd["window"], "ours": bd["tres"], "sreport": sre, "differences": diffs,
                        "notes": BD.explain(bd, sre, diffs, bd["window"], None)[1:]})
        self.matched("utilization", out, [w["sreport"] for w in out])
        return {"source": self.inputs.get("source", ""),
                "capacity_source": self.compute(windows, clusters)[0][2]["capacity_source"], "windows": out}

    def accounts(self, windows, clusters):
        """The ``accounts`` section (None without sacctmgr's assoc tree)."""
        from slurmkit.report import breakdown as BD

        if not self.inputs.get("assocs"):
            return None
        out, found = [], []
        for label, hw, _, tree in self.compute(windows, clusters):
            sre = self.theirs("AccountUtilizationByUser", hw, label == "(period)")
            out.append({"label": label, **hw.as_dict(), "tree": tree, "rows": BD.tree_rows(tree),
                        "differences": BD.compare_accounts(tree, sre) if sre is not None else [],
                        "note": "jobs' usage, plus each reservation's idle time split evenly among the accounts and "
                                "users allowed in it, as sreport counts it (man sreport)"
                                + ("" if sre is not None else "; no sreport capture of this window"
                                   if "AccountUtilizationByUser" in self.captures else "; sreport not asked")})
            found.append(sre)
        self.matched("AccountUtilizationByUser", out, found)
        return {"source": self.inputs.get("source", ""), "windows": out}


def breakdown_sections(store_root, inputs: dict, now=None, sreport=None, captures: dict | None = None,
                       tz: str = "UTC", tile_days: int = TILE_DAYS) -> dict:
    """``{name: fn(windows, clusters)}`` for :func:`slurmkit.report.period.period_report`'s
    ``sections=``: ``sreport_breakdown`` and ``accounts``.

    ``inputs``: the breakdown inputs, read live (:func:`slurmkit.report.live.breakdown_inputs`)
    or from captures, over the period: ``node_tres`` ({node: {"cpu", "gres/gpu"}}, scontrol
    CfgTRES or the profile; None: no breakdown), ``events`` (node events with the cluster's
    registrations, or None: Down unknown), ``reservations`` (or None: Planned Down unknown),
    ``assocs`` (sacctmgr's assoc tree, or None: no account tree), ``source`` (words).
    ``now``: where running jobs and ongoing events end (default: the current time); windows are
    cut at its last whole hour. ``sreport``: None, or a callable ``(report, Window) -> text``
    (``report`` "utilization" or "AccountUtilizationByUser", seconds, as
    :func:`slurmkit.report.live.sreport_text` prints them) to reconcile each window with.
    ``captures``: sreport's output captured instead, ``{"utilization" /
    "AccountUtilizationByUser": (path, text)}`` (:func:`slurmkit.report.sreport.unit_of`'s unit),
    each reconciled with the window whose whole hours its banner names (its times read in
    ``tz``; one without a banner, ``-n``: the period); a capture naming none of the windows
    raises :class:`~slurmkit.errors.InputError` (its path). ``tile_days``: each part is
    computed as the sum of windows of at most this many days (:func:`tiles`).

    ``report["sreport_breakdown"]``: ``{"source", "capacity_source", "windows": [{"label"
    ("(period)" first, then each part), "start", "end" (the hours covered), "ours" ({TRES:
    {figure: hours or None, "count"}}, :data:`slurmkit.report.breakdown.FIGURES`), "sreport"
    (same shape or None), "differences", "notes"}]}``; ``report["accounts"]``: ``{"source",
    "windows": [{"label", "start", "end", "tree", "rows", "differences", "note"}]}``; each None
    when its inputs are missing."""
    now_ts = pd.Timestamp(now) if now is not None else pd.Timestamp.now(tz="UTC")
    now_ts = now_ts.tz_localize("UTC") if now_ts.tzinfo is None else now_ts.tz_convert("UTC")
    s = _Sections(store_root, inputs, now_ts, sreport, captures or {}, tz, tile_days)
    return {"sreport_breakdown": s.utilization, "accounts": s.accounts}


def live_inputs(period_window: Window, cluster: str | None, now=None, timeout: float = 60.0) -> dict:
    """The breakdown inputs over the period read live, as the weekly report reads them
    (:func:`slurmkit.report.live.breakdown_inputs`: ``scontrol show -o nodes``, ``sacctmgr
    show event / reservation / assoc tree``). Raises ``SlurmError``."""
    from slurmkit.report.live import breakdown_inputs

    now_ts = pd.Timestamp(now) if now is not None else pd.Timestamp.now(tz="UTC")
    now_ts = now_ts.tz_localize("UTC") if now_ts.tzinfo is None else now_ts.tz_convert("UTC")
    end = min(pd.Timestamp(period_window.end), now_ts).to_pydatetime()
    got = breakdown_inputs(period_window.start, max(end, period_window.start), cluster, timeout)
    return {**got, "source": "live: scontrol show -o nodes, sacctmgr show event / reservation / assoc tree"}


def capture_zone(store_root, cluster: str, window: Window, tz: str | None = None) -> tuple[str, str]:
    """``(zone, how)``: the zone the captured events' and reservations' times are read in
    (``sacctmgr`` prints the local time of the host it ran on, with no zone): ``tz`` when given
    (``how`` "--tz"); else the zone ``report store --tz`` recorded for the store cluster
    ``cluster``'s days in ``window`` when they name one, given (``how`` "the store's"); else
    UTC (``how`` "assumed", with ``: the store's days record A, B`` when they name several). Raises :class:`~slurmkit.errors.UsageError` (``--tz``) for a
    ``tz`` that is not an IANA zone name."""
    from slurmkit.report.period_text import time_zones
    from slurmkit.report.pipeline import check_zone

    if tz:
        check_zone(tz)
        return tz, "--tz"
    days = [f"{d0:%Y-%m-%d}" for d0, _ in window.days()]
    given = {z["time_zone"] for z in time_zones(store_root, [cluster], days) if z["time_zone_given"]}
    if len(given) == 1:
        return given.pop(), "the store's"
    return "UTC", "assumed" + (f": the store's days record {', '.join(sorted(given))}" if given else "")


def local_times(*paths) -> bool:
    """Whether any of the captures ``paths`` (None skipped) prints times as local ISO times
    (:func:`slurmkit.report.pipeline.prints_local_times`). Raises
    :class:`~slurmkit.errors.InputError` for a file that cannot be read."""
    from slurmkit.report.pipeline import prints_local_times, read_capture

    return any(prints_local_times(read_capture(p)) for p in paths if p)


def captured_inputs(events=None, reservations=None, nodes=None, assoc_tree=None, tz: str = "UTC",
                    profile=None) -> dict:
    """The breakdown inputs from captured files, read as the weekly report reads them
    (``report weekly``'s ``--events``, ``--reservations``, ``--nodes``, ``--assoc-tree``):
    node TRES from ``nodes`` (``scontrol show -o nodes``), else the site profile, else None.
    Raises :class:`~slurmkit.errors.InputError` for a file that cannot be read or parsed."""
    from slurmkit.report.pipeline import WeeklyOptions, captured_breakdown_inputs

    opts = WeeklyOptions(events=events, reservations=reservations, nodes=nodes, assoc_tree=assoc_tree, tz=tz,
                         profile=profile)
    got = captured_breakdown_inputs(opts, Window(dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc),
                                                  dt.datetime(1970, 1, 2, tzinfo=dt.timezone.utc)), None)
    files = [str(p) for p in (events, reservations, nodes, assoc_tree) if p]
    return {k: got[k] for k in ("node_tres", "events", "reservations", "assocs")} | \
        {"source": "captures: " + ", ".join(files) + ("" if nodes else "; node TRES from the site profile")}


__all__ = ["SECTIONS", "TILE_DAYS", "tiles", "breakdown_sections", "live_inputs", "capture_zone", "captured_inputs", "part_allocations",
           "merge_trees", "local_times"]
