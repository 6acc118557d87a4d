"""sreport's breakdown of a window, computed from accounting, node events and reservations, and
the account hierarchy with each user's usage (pure functions over plain data).

- :func:`breakdown`: per TRES (``cpu``, ``gres/gpu``) the hours Allocated, Down, Planned Down,
  Idle, Planned (sreport's ``Reserved`` before Slurm 22.05) and Reported, with sreport's
  definitions (Slurm's ``as_mysql_rollup.c``, read at slurm-22-05-8-1, and ``man sreport``):

  * Reported: the TRES the cluster registered (``sacctmgr show event`` "Cluster Registered TRES"
    rows) x time, else the nodes' TRES x the window.
  * Allocated: jobs' allocated TRES x run time, and the whole TRES of each active reservation
    (neither MAINT nor IGNORE_JOBS) x its time, less node down time inside it; jobs in such a
    reservation are in the reservation's figure, not again.
  * Down: node events (down, drained, failing; a node's overlapping events count once) x the
    node's TRES; events with MAINT in their state are left out, FUTURE / powered-down CLOUD
    nodes count as Planned Down. Down time inside a MAINT reservation is Planned Down.
  * Planned Down: MAINT reservations' TRES x time (sreport takes a reservation's TRES as
    slurmctld recorded it, e.g. ``cpu=8`` without GPUs).
  * Planned: CPU time that eligible jobs waited (Eligible -> Start, or -> End for one that never
    started) x their CPUs (x pending array tasks); 0 for other TRES.
  * Idle: Reported - Allocated - Down - Planned Down - Planned.

  Each hour is then capped as slurmdbd's hourly rollup caps it: Allocated at Reported, Down and
  then Planned Down so that the three fit, Planned so that Idle is not negative.
- :func:`parse_reservations`: ``sacctmgr -P show reservation format=...`` or ``scontrol show
  reservation`` -> reservations
- :func:`parse_assoc_tree` / :func:`account_tree`: ``sacctmgr -P show assoc tree`` -> the
  account hierarchy with per-user GPU-hours and CPU-hours; :func:`compare_accounts` against
  sreport's AccountUtilizationByUser.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from slurmkit import hostlist
from slurmkit.accounting.parse import parse_times
from slurmkit.errors import InputError
from slurmkit.report import capacity as C
from slurmkit.report import week_sql as WS
from slurmkit.report.window import iso_z
from slurmkit.slurm import tres as T

#: The TRES of the breakdown and their names in reports.
TRES = ("gres/gpu", "cpu")
#: The figures, in sreport's column order.
FIGURES = ("allocated", "down", "planned_down", "idle", "planned", "reported")
#: ``sacctmgr show reservation format=`` of the live call; :func:`parse_reservations` reads it.
RESV_FORMAT = ("Name", "ID", "Flags", "NodeNames", "TRES", "TimeStart", "TimeEnd", "Associations")
_RESV_NAMES = {"name": "name", "id": "id", "flags": "flags", "nodename": "nodes", "nodenames": "nodes",
               "tres": "tres", "timestart": "start", "start": "start", "timeend": "end", "end": "end",
               "cluster": "cluster", "unusedwall": "unused_wall", "associations": "assocs", "assocs": "assocs"}


def parse_reservations(text: str, tz: str = "UTC", source: str = "reservations") -> list[dict]:
    """Reservations from ``sacctmgr -P show reservation format=...`` (its header line, or
    ``-n`` with :data:`RESV_FORMAT`; Flags and the times are needed) or ``scontrol show
    reservation`` (``ReservationName=... StartTime=...``, multi-line or ``-o``) ->
    ``[{"name", "id", "flags" (set, upper case), "nodes" (expanded), "tres" ({TRES: count}),
    "start", "end" (aware UTC; sacctmgr's epoch or local ISO times read in ``tz``), "assocs"
    (the ids of the associations allowed in it, sacctmgr's Associations; [] when not listed)}]``.
    sacctmgr lists one row per version of a reservation (an update starts a new row), as
    slurmdbd's rollup reads them. Raises :class:`~slurmkit.errors.InputError` (``source``,
    line) for output that is neither."""
    if "ReservationName=" in text:
        return _scontrol_reservations(text, tz)
    lines = [(i, ln.rstrip("\r")) for i, ln in enumerate(text.splitlines(), 1) if ln.strip()]
    if not lines:
        return []
    first = [c.strip().lower() for c in lines[0][1].split("|")]
    if all(c in _RESV_NAMES for c in first) and "name" in first:
        cols = [_RESV_NAMES[c] for c in first]
        lines = lines[1:]
    else:
        cols = [_RESV_NAMES[c.lower()] for c in RESV_FORMAT]
    missing = {"flags", "start", "end"} - set(cols)
    if missing:
        raise InputError(source, lines[0][0] if lines else None,
                         f"no {', '.join(sorted(missing))} column: list reservations with "
                         f"format={','.join(RESV_FORMAT)}")
    recs = []
    for i, ln in lines:
        parts = ln.split("|")
        if len(parts) != len(cols):
            raise InputError(source, i, f"{len(parts)} columns, expected {len(cols)} "
                                        f"(sacctmgr -P show reservation format={','.join(RESV_FORMAT)})")
        recs.append(dict(zip(cols, (p.strip() for p in parts))))
    return _reservation_records(recs, tz)


def _scontrol_reservations(text: str, tz: str) -> list[dict]:
    blocks = [b for b in re.split(r"(?=ReservationName=)", text) if b.strip().startswith("ReservationName=")]
    recs = []
    for b in blocks:
        kv = dict(re.findall(r"(\w+)=(\S*)", b))
        recs.append({"name": kv.get("ReservationName", ""), "id": "", "flags": kv.get("Flags", ""),
                     "nodes": kv.get("Nodes", ""), "tres": kv.get("TRES", ""),
                     "start": kv.get("StartTime", ""), "end": kv.get("EndTime", "")})
    return _reservation_records(recs, tz)


def _reservation_records(recs: list[dict], tz: str) -> list[dict]:
    starts = parse_times(pd.Series([r.get("start", "") for r in recs], dtype="str"), tz)
    ends = parse_times(pd.Series([r.get("end", "") for r in recs], dtype="str"), tz)
    out = []
    for r, s, e in zip(recs, starts, ends):
        nodes = r.get("nodes", "")
        out.append({"name": r.get("name", ""), "id": r.get("id", ""),
                    "flags": {f.strip().upper() for f in r.get("flags", "").split(",") if f.strip()},
                    "nodes": hostlist.expand_hostlist(nodes) if nodes and nodes != "(null)" else [],
                    "tres": T.numbers(r.get("tres", "")), "start": s, "end": e,
                    "assocs": [a.strip() for a in r.get("assocs", "").split(",") if a.strip()]})
    return out


def _epoch(t) -> float:
    return pd.Timestamp(t).timestamp()


def _bins(lo: np.ndarray, hi: np.ndarray, w: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Per bin ``[bounds[j], bounds[j+1])``: sum of ``w`` x the seconds of ``[lo, hi)`` inside it
    (vectorised: the integral of the step function at each bound, differenced)."""
    if len(lo) == 0:
        return np.zeros(len(bounds) - 1)
    keep = hi > lo
    lo, hi, w = lo[keep], hi[keep], w[keep]

    def integral(t: np.ndarray, wts: np.ndarray) -> np.ndarray:   # sum of w x max(0, b - t)
        order = np.argsort(t, kind="stable")
        ts, ws = t[order], wts[order]
        cw, cwt = np.concatenate([[0.0], np.cumsum(ws)]), np.concatenate([[0.0], np.cumsum(ws * ts)])
        k = np.searchsorted(ts, bounds, side="right")
        return bounds * cw[k] - cwt[k]

    f = integral(lo, w) - integral(hi, w)
    return np.diff(f)


def _hour_bounds(start: float, end: float) -> np.ndarray:
    first = np.ceil(start / 3600.0) * 3600.0
    inner = np.arange(first, end, 3600.0)
    return np.unique(np.concatenate([[start], inner[inner > start], [end]]))


def breakdown(window_start, window_end, allocs: pd.DataFrame, events: pd.DataFrame | None,
              reservations: list[dict] | None, node_tres: dict[str, dict[str, float]],
              now=None, tres: tuple[str, ...] = TRES) -> dict:
    """sreport's cluster-utilization breakdown of ``[window_start, window_end)`` (see the module
    docstring for each figure's definition).

    ``allocs``: allocation rows (the report's frame: ``start``, ``end``, ``gpus``, ``ncpus``;
    optional ``started``, ``eligible``, ``pending_tasks``, ``timelimit_s``, ``reservation``);
    ``events``: :func:`slurmkit.report.capacity.node_events` with ``cluster_rows=True`` (or
    None: no down time known); ``reservations``: :func:`parse_reservations` (None: none known);
    ``node_tres``: {node: {"cpu": CPUs, "gres/gpu": GPUs}} (``scontrol show nodes`` CfgTRES or the
    site profile); ``now``: where ongoing events and running jobs end (default: now).
    Returns ``{"window", "capacity_source", "tres": {TRES: {figure: hours or None, "count"}},
    "registered"}`` (``registered``: the cluster's first registration in ``events``,
    :func:`registration`, ISO UTC, or None; Reported counts from it):
    a TRES whose job counts are unknown (NaN ``gpus`` / ``ncpus``) has Allocated and Idle None;
    without ``events`` Down, Planned Down and Idle are None (not known, never 0), without
    ``reservations`` Planned Down and Idle."""
    s, e = _epoch(window_start), _epoch(window_end)
    now = pd.Timestamp(now) if now is not None else pd.Timestamp.now(tz="UTC")
    now = now.tz_localize("UTC") if now.tzinfo is None else now
    t_now = now.timestamp()
    bounds = _hour_bounds(s, e)
    nb = len(bounds) - 1
    resv_known = reservations is not None
    reservations = reservations or []
    ev = events if events is not None else C.node_events("")
    # capacity: the cluster's registrations, else the nodes' TRES
    reg = ev[(ev["node"] == "") & ev["reason"].str.contains("Registered", case=False, na=False)] \
        if "tres" in ev else ev.iloc[0:0]
    source = ("registered TRES (sacctmgr show event: Cluster Registered TRES)" if len(reg)
              else "node TRES (scontrol show nodes CfgTRES, or the site profile)")
    first_reg = registration(ev)
    tracked = [r for r in reservations if "IGNORE_JOBS" not in r["flags"] and not pd.isna(r["start"])]
    jobs = _rows(allocs, now) if _has(allocs) else None
    down_iv = C.node_down_intervals(ev[(ev["node"] != "") & ~ev["state"].str.upper().str.contains("MAINT", na=False)],
                                    window_start, window_end, now)
    planned_states = ev[ev["state"].str.upper().str.contains("FUTURE|POWER", na=False)]
    planned_nodes = set(planned_states["node"])
    # each node's TRES as its events recorded them (read once: {node: [{TRES: count}]})
    node_ev_tres: dict[str, list[dict]] = {}
    if "tres" in ev:
        for node, t in zip(ev["node"], ev["tres"]):
            if node and isinstance(t, str) and t:
                node_ev_tres.setdefault(node, []).append(T.numbers(t))
    out = {}
    for k in tres:
        per = {f: np.zeros(nb) for f in FIGURES}
        # Reported
        if len(reg):
            lo = np.array([_epoch(t) for t in reg["start"]])
            hi = np.array([t_now if pd.isna(t) else _epoch(t) for t in reg["end"]])
            w = np.array([T.numbers(t).get(k, 0.0) for t in reg["tres"]])
            # a later registration replaces the earlier one (slurmdbd closes the old row)
            per["reported"] = _bins(np.clip(lo, s, e), np.clip(hi, s, e), w, bounds)
        else:
            count = sum(v.get(k, 0.0) for v in node_tres.values())
            per["reported"] = np.diff(bounds) * count
        resv_less = _down_seconds(per, k, down_iv, node_ev_tres, node_tres, tracked, planned_nodes, bounds, t_now)
        _reservation_seconds(per, k, tracked, resv_less, s, e, bounds, t_now)
        if jobs is not None:
            allocated, planned, known = WS.job_seconds(*jobs, k, {r["name"] for r in tracked}, s, e, bounds, t_now)
            per["allocated"] += allocated
            per["planned"] += planned
        else:
            known = True
        _cap_hours(per)
        fig = {f: float(per[f].sum()) / 3600.0 for f in FIGURES}
        if not known:
            fig["allocated"] = fig["idle"] = None
        if events is None:
            fig["down"] = fig["planned_down"] = fig["idle"] = None
        if not resv_known:
            fig["planned_down"] = fig["idle"] = None
        fig["count"] = float(sum(v.get(k, 0.0) for v in node_tres.values()))
        out[k] = fig
    return {"window": {"start": iso_z(pd.Timestamp(window_start)), "end": iso_z(pd.Timestamp(window_end))},
            "capacity_source": source, "tres": out,
            "registered": None if first_reg is None else iso_z(first_reg)}


def _down_seconds(per: dict, k: str, down_iv: dict, node_ev_tres: dict, node_tres: dict, tracked: list,
                  planned_nodes: set, bounds: np.ndarray, t_now: float) -> dict:
    """Add TRES ``k``'s Down and Planned Down seconds per hour from the nodes' down intervals
    ``down_iv`` to ``per``, less what a reservation takes over (a MAINT reservation's share is
    Planned Down). Returns ``{id(reservation): seconds per hour taken over}``."""
    nb = len(bounds) - 1
    # Down and Planned Down from node events, less what a reservation takes over; a node's
    # TRES as its events recorded them (as slurmdbd's rollup counts them: a node retired
    # since is still counted), else the node's TRES
    ev_tres = {node: max(t.get(k, 0.0) for t in ts) for node, ts in node_ev_tres.items()}
    resv_less = {id(r): np.zeros(nb) for r in tracked}
    for node, ivs in down_iv.items():
        n = ev_tres.get(node) or node_tres.get(node, {}).get(k, 0.0)
        if not n:
            continue
        lo = np.array([iv[0].timestamp() for iv in ivs])
        hi = np.array([iv[1].timestamp() for iv in ivs])
        secs = _bins(lo, hi, np.full(len(lo), n), bounds)
        for r in tracked:
            if node not in r["nodes"]:
                continue
            rlo, rhi = max(lo.min(), r["start"].timestamp()), min(hi.max(), _epoch(r["end"]) if not pd.isna(r["end"]) else t_now)
            both = _bins(np.maximum(lo, rlo), np.minimum(hi, rhi), np.full(len(lo), n), bounds)
            if "MAINT" in r["flags"]:
                per["planned_down"] += both
                secs = secs - both
            resv_less[id(r)] += both
        per["planned_down" if node in planned_nodes else "down"] += secs
    return resv_less


def _reservation_seconds(per: dict, k: str, tracked: list, resv_less: dict, s: float, e: float,
                         bounds: np.ndarray, t_now: float) -> None:
    """Add each reservation's TRES ``k`` seconds per hour (less its nodes' down time,
    ``resv_less``) to ``per``: Planned Down for a MAINT reservation, else Allocated."""
    for r in tracked:
        lo = r["start"].timestamp()
        hi = t_now if pd.isna(r["end"]) else _epoch(r["end"])
        secs = _bins(np.array([max(lo, s)]), np.array([min(hi, e)]), np.array([r["tres"].get(k, 0.0)]), bounds)
        per["planned_down" if "MAINT" in r["flags"] else "allocated"] += np.maximum(secs - resv_less[id(r)], 0.0)


def _cap_hours(per: dict[str, np.ndarray]) -> None:
    """slurmdbd's hourly caps (as_mysql_rollup.c ``_setup_cluster_tres_usage``), in place."""
    total = per["reported"]
    per["allocated"] = np.minimum(per["allocated"], total)
    over = total - (per["allocated"] + per["down"])
    per["down"] = np.maximum(per["down"] + np.minimum(over, 0.0), 0.0)
    over = total - (per["allocated"] + per["down"] + per["planned_down"])
    per["planned_down"] = np.maximum(per["planned_down"] + np.minimum(over, 0.0), 0.0)
    idle = total - per["allocated"] - per["down"] - per["planned_down"] - per["planned"]
    per["planned"] = np.maximum(per["planned"] + np.minimum(idle, 0.0), 0.0)
    per["idle"] = np.maximum(idle, 0.0)


def registration(events: pd.DataFrame | None) -> pd.Timestamp | None:
    """The cluster's first registration in ``events`` (:func:`slurmkit.report.capacity.node_events`
    with ``cluster_rows``): the earliest TimeStart of a row without NodeName whose Reason holds
    "Registered" (sacctmgr show event "Cluster Registered TRES"), aware UTC; None when the events
    hold none (or are None)."""
    if events is None or not len(events) or "reason" not in events:
        return None
    reg = events[(events["node"] == "") & events["reason"].str.contains("Registered", case=False, na=False)]
    starts = reg["start"].dropna()
    return None if not len(starts) else pd.Timestamp(starts.min())


def compare(ours: dict, sreport: dict, tolerance_h: float = 0.02) -> list[dict]:
    """:func:`breakdown`'s ``tres`` vs :func:`slurmkit.report.sreport.cluster_utilization` ->
    ``[{"tres", "figure", "ours", "sreport", "difference" (ours - sreport, hours), "within"}]``
    for each figure both have (``within``: ``|difference| <= tolerance_h`` plus 0.1 %)."""
    rows = []
    for k, fig in ours.items():
        theirs = sreport.get(k)
        if theirs is None:
            continue
        for f in FIGURES:
            a, b = fig.get(f), theirs.get(f)
            if a is None or b is None:
                rows.append({"tres": k, "figure": f, "ours": a, "sreport": b, "difference": None, "within": None})
                continue
            d = a - b
            rows.append({"tres": k, "figure": f, "ours": a, "sreport": b, "difference": d,
                         "within": bool(abs(d) <= tolerance_h + 0.001 * abs(b))})
    return rows


#: ``sacctmgr show assoc tree format=`` of the live call; :func:`parse_assoc_tree` reads it.
ASSOC_FORMAT = ("Cluster", "Account", "User", "ParentName", "ID")


def parse_assoc_tree(text: str, source: str = "sacctmgr show assoc tree") -> list[dict]:
    """``sacctmgr -P [-n] show assoc tree format=Cluster,Account,User,ParentName`` (sacctmgr
    indents Account by one space per level) -> ``[{"account", "user" ("" on an account row),
    "parent" (the parent account; "" for root), "depth", "id" (the association's id; "" when
    not printed)}]`` in sacctmgr's order. Raises
    :class:`~slurmkit.errors.InputError` (``source``, line) for a row that does not fit."""
    lines = [(i, ln.rstrip("\r")) for i, ln in enumerate(text.splitlines(), 1) if ln.strip()]
    if lines and lines[0][1].split("|")[0].strip().lower() == "cluster":
        names = [c.strip().lower() for c in lines[0][1].split("|")]
        lines = lines[1:]
    else:
        names = [c.lower() for c in ASSOC_FORMAT]
    if "account" not in names or "user" not in names:
        raise InputError(source, None, f"no Account or User column: use format={','.join(ASSOC_FORMAT)}")
    out, stack = [], []          # stack: accounts by depth
    for i, ln in lines:
        parts = ln.split("|")
        if len(parts) != len(names):
            raise InputError(source, i, f"{len(parts)} columns, expected {len(names)} ({','.join(ASSOC_FORMAT)})")
        r = dict(zip(names, parts))
        raw = r["account"]
        depth = len(raw) - len(raw.lstrip(" "))
        account, user = raw.strip(), r["user"].strip()
        if not user:
            del stack[depth:]
            parent = r.get("parentname", "").strip() or (stack[-1] if stack else "")
            stack.append(account)
            out.append({"account": account, "user": "", "parent": parent, "depth": depth, "id": r.get("id", "").strip(),
                        "cluster": r.get("cluster", "").strip()})
        else:
            out.append({"account": account, "user": user, "parent": account, "depth": depth, "id": r.get("id", "").strip(),
                        "cluster": r.get("cluster", "").strip()})
    return out


def job_facts(allocs: pd.DataFrame) -> dict:
    """What the breakdown's inputs must agree with, from the report's allocation rows
    (``cluster``: sacct's Cluster; ``nodelist``: sacct's NodeList; ``start``): ``{"clusters"
    (set of names), "nodes" (set of node names the jobs ran on), "last_start" (the latest
    Start, aware UTC, or None)}`` (:func:`slurmkit.report.week_sql.job_facts` over the rows);
    facts of several frames combine with :func:`add_facts`. A NodeList that is not a hostlist
    names no node here."""
    if not _has(allocs):
        return {"clusters": set(), "nodes": set(), "last_start": None}
    con, view = _rows(allocs, None)
    return WS.job_facts(con, view)


def _has(allocs) -> bool:
    """Whether the allocation rows (a frame, or a ``(connection, relation)`` pair) hold a row."""
    if isinstance(allocs, tuple):
        con, name = allocs
        return bool(con.execute(f'SELECT count(*) FROM (SELECT 1 FROM "{name}" LIMIT 1)').fetchall()[0][0])
    return bool(len(allocs))


def _rows(allocs, now: pd.Timestamp | None):
    """``(connection, view)``: the allocation rows as :mod:`slurmkit.report.week_sql` reads them:
    a ``(connection, relation)`` pair as it is (the weekly report's rows,
    :func:`slurmkit.report.period.rows_table`), or a frame registered in a new DuckDB connection
    (:func:`slurmkit.report.week_sql.frame_rows`; running rows up to ``now``)."""
    import duckdb

    if isinstance(allocs, tuple):
        return allocs
    con = duckdb.connect()
    return con, WS.frame_rows(con, allocs, "rows", now=now)


def add_facts(a: dict, b: dict) -> dict:
    """:func:`job_facts` of two frames -> those of both."""
    last = [t for t in (a["last_start"], b["last_start"]) if t is not None]
    return {"clusters": a["clusters"] | b["clusters"], "nodes": a["nodes"] | b["nodes"],
            "last_start": max(last) if last else None}


def _short(node: str) -> str:
    """A node name without its domain (``n1.cluster.example`` -> ``n1``)."""
    return node.split(".", 1)[0]


def _names(nodes) -> str:
    """Node names as a hostlist (their list when they are not hostlist names), at most 200."""
    ranked = sorted(nodes)
    try:
        text = hostlist.collect_hostlist(ranked[:200])
    except hostlist.BadHostlist:
        text = ",".join(ranked[:200])
    return text + (", ..." if len(ranked) > 200 else "")


def _tree_clusters(assocs: list[dict]) -> set[str]:
    """The cluster names of the account tree ``assocs`` (:func:`parse_assoc_tree`'s Cluster
    column, as printed; empty where the capture has no such column)."""
    return {r.get("cluster", "") for r in assocs} - {""}


def cluster_tree(assocs: list[dict], clusters: set[str]) -> list[dict]:
    """The rows of the account tree ``assocs`` (:func:`parse_assoc_tree`) of the jobs'
    cluster: ``sacctmgr show assoc tree`` without ``cluster=`` lists every cluster of the
    slurmdbd, one tree after another; those of the one cluster of ``clusters`` (the jobs'
    Cluster, the store cluster's name; names compared as Slurm does, case-insensitively) are
    kept. A tree of one cluster (or without the column) is returned as is. Raises
    :class:`~slurmkit.errors.InputError` (``--assoc-tree``) when the tree holds several
    clusters and not exactly one of them is the jobs'."""
    named = {c.lower() for c in _tree_clusters(assocs)}
    if len(named) <= 1:
        return assocs
    keep = named & {c.lower() for c in clusters}
    if len(keep) != 1:
        raise InputError("--assoc-tree", None, f"the account tree holds the associations of clusters "
                         f"{', '.join(sorted(named))}, and the jobs are of "
                         f"{', '.join(sorted(clusters)) or 'no named cluster'}: give the tree of one cluster "
                         "(sacctmgr -P show assoc tree cluster=NAME format=Cluster,Account,User,ParentName,ID)")
    return [r for r in assocs if r.get("cluster", "").lower() in keep]


def foreign_inputs(facts: dict, inputs: dict) -> list[str]:
    """Why the breakdown's inputs (``node_tres``, ``events``, ``assocs``, as
    :func:`breakdown` and :func:`account_tree` take them; ``time_zone``: the zone captured
    events were read in, if any) cannot be the cluster the jobs ran on (``facts``:
    :func:`job_facts`), one sentence each; [] when nothing says so. A report of one cluster's
    jobs against another's nodes, events or accounts gives figures of nothing (Reported 0,
    every user under root) without an error, so the callers refuse it:

    - the account tree's Cluster column (``sacctmgr show assoc tree format=Cluster,...``) names
      none of the clusters of the jobs (names compared case-insensitively, as Slurm does);
    - none of the nodes the jobs ran on (NodeList) is a node of ``node_tres`` (``scontrol show
      nodes``, or the site profile; names also compared without their domain); some of them
      missing is not refused (a node retired since);
    - the events' first cluster registration (``Cluster Registered TRES``) is after the last
      job started: the events are of another cluster, or of later dates, or read in the wrong
      zone."""
    out = []
    theirs = _tree_clusters(inputs.get("assocs") or [])
    if theirs and facts["clusters"] and not {c.lower() for c in theirs} & {c.lower() for c in facts["clusters"]}:
        out.append(f"the account tree (--assoc-tree / sacctmgr show assoc tree) is of cluster "
                   f"{', '.join(sorted(theirs))}, and the jobs are of cluster {', '.join(sorted(facts['clusters']))}")
    node_tres = inputs.get("node_tres") or {}
    ran = facts["nodes"]
    if node_tres and ran and not (ran & set(node_tres) or {_short(n) for n in ran} & {_short(n) for n in node_tres}):
        out.append(f"none of the {len(ran)} nodes the jobs ran on ({_names(ran)}) is a node of the capacity input "
                   f"(--nodes / scontrol show nodes, or the site profile: {_names(node_tres)})")
    reg = registration(inputs.get("events"))
    if reg is not None and facts["last_start"] is not None and reg > facts["last_start"]:
        zone = inputs.get("time_zone")
        out.append(f"the events (--events / sacctmgr show event) have the cluster registering with slurmdbd at "
                   f"{iso_z(reg)}, after the last job started ({iso_z(facts['last_start'])}): they are of another "
                   "cluster or of later dates" + (f", or their times are not {zone}'s (they were read in {zone}: "
                                                  "give --tz the zone of the host sacctmgr ran on)" if zone else ""))
    return out


def refuse_foreign(facts: dict, inputs: dict | None) -> None:
    """Raise :class:`~slurmkit.errors.InputError` (file ``breakdown inputs``, exit 2) when
    :func:`foreign_inputs` finds the inputs are not the jobs' cluster's; nothing without
    ``inputs``."""
    why = foreign_inputs(facts, inputs) if inputs else []
    if why:
        raise InputError("breakdown inputs", None,
                         "; ".join(why) + ": sreport's breakdown and the account tree need the nodes, events, "
                         "reservations and associations of the cluster the jobs ran on")


def _usage_hours(allocs: pd.DataFrame, s: float, e: float, now: pd.Timestamp) -> pd.DataFrame:
    """Per (account, user): GPU-hours and CPU-hours of the started jobs inside ``[s, e)``
    (:func:`slurmkit.report.week_sql.usage_hours`)."""
    if not _has(allocs):
        return pd.DataFrame(columns=["account", "user", "gpu_hours", "cpu_hours"])
    con, view = _rows(allocs, now)
    return WS.usage_hours(con, view, s, e)


def reservation_shares(reservations: list[dict], allocs: pd.DataFrame, events: pd.DataFrame | None,
                       node_tres: dict[str, dict[str, float]], window_start, window_end, now=None) -> dict[str, dict]:
    """The idle time of each reservation that slurmdbd's rollup gives to the associations
    allowed in it (as_mysql_rollup.c, slurm-22-05-8-1): per hour and per TRES of the
    reservation's TRES, its TRES x time less the jobs run in it (sacct Reservation) and the down
    time of its nodes, split evenly (whole seconds) among its associations (``assocs``; IGNORE_JOBS
    reservations too) -> ``{assoc id: {"gpu_hours", "cpu_hours"}}``."""
    s, e = _epoch(window_start), _epoch(window_end)
    now = pd.Timestamp(now) if now is not None else pd.Timestamp.now(tz="UTC")
    now = now.tz_localize("UTC") if now.tzinfo is None else now
    bounds = _hour_bounds(s, e)
    ev = events if events is not None else C.node_events("")
    down_iv = C.node_down_intervals(ev[(ev["node"] != "") & ~ev["state"].str.upper().str.contains("MAINT", na=False)],
                                    window_start, window_end, now)
    jobs = _rows(allocs, now) if _has(allocs) and (isinstance(allocs, tuple) or "reservation" in allocs) else None
    out: dict[str, dict] = {}
    for r in reservations:
        if not r["assocs"] or pd.isna(r["start"]):
            continue
        lo = max(r["start"].timestamp(), s)
        hi = min(now.timestamp() if pd.isna(r["end"]) else _epoch(r["end"]), e)
        for k, key in (("gres/gpu", "gpu_hours"), ("cpu", "cpu_hours")):
            n = r["tres"].get(k, 0.0)
            if not n or hi <= lo:
                continue
            idle = _bins(np.array([lo]), np.array([hi]), np.array([n]), bounds)
            for node in r["nodes"]:
                ivs = down_iv.get(node, [])
                c = node_tres.get(node, {}).get(k, 0.0)
                if ivs and c:
                    idle -= _bins(np.array([max(iv[0].timestamp(), lo) for iv in ivs]),
                                  np.array([min(iv[1].timestamp(), hi) for iv in ivs]), np.full(len(ivs), c), bounds)
            if jobs is not None:
                idle -= WS.reservation_job_seconds(*jobs, r["name"], k, lo, hi, bounds)
            share = np.floor(np.maximum(idle, 0.0) / len(r["assocs"]))
            for a in r["assocs"]:
                d = out.setdefault(a, {"gpu_hours": 0.0, "cpu_hours": 0.0})
                d[key] += float(share.sum()) / 3600.0
    return out


def account_tree(assocs: list[dict], allocs: pd.DataFrame, window_start, window_end, now=None,
                 shares: dict[str, dict] | None = None) -> dict:
    """The account hierarchy (:func:`parse_assoc_tree`) with each user's usage in
    ``[window_start, window_end)`` from ``allocs`` (``account``, ``user``, ``start``, ``end``,
    ``gpus``, ``ncpus``; running jobs up to ``now``) -> ``{"account": "root", "gpu_hours",
    "cpu_hours" (the account's users and sub-accounts, hours; None when a count is unknown),
    "users": [{"user", "gpu_hours", "cpu_hours"}], "children": [...]}``. Usage under an
    (account, user) the tree does not list is put under the account (or root) as is, so no
    usage is lost. ``shares``: :func:`reservation_shares` by association id (the tree's ``id``):
    added to the user, or to the account itself (``reservation_idle``) for an account's own
    association, as sreport adds them."""
    now = pd.Timestamp(now) if now is not None else pd.Timestamp.now(tz="UTC")
    now = now.tz_localize("UTC") if now.tzinfo is None else now
    use = _usage_hours(allocs, _epoch(window_start), _epoch(window_end), now)
    nodes: dict[str, dict] = {}
    root = None
    for a in assocs:
        if a["user"]:
            continue
        node = nodes.setdefault(a["account"], {"account": a["account"], "users": [], "children": []})
        parent = nodes.get(a["parent"])
        if parent is not None and node is not parent:
            parent["children"].append(node)
        elif root is None:
            root = node
    root = root or nodes.setdefault("root", {"account": "root", "users": [], "children": []})
    listed = {(a["account"], a["user"]) for a in assocs if a["user"]}
    users: dict[tuple, dict] = {}
    for a in assocs:
        if a["user"] and a["account"] in nodes:
            users[(a["account"], a["user"])] = u = {"user": a["user"], "gpu_hours": 0.0, "cpu_hours": 0.0}
            nodes[a["account"]]["users"].append(u)
    for r in use.itertuples():
        key = (r.account, r.user)
        if key not in listed:
            target = nodes.get(r.account, root)
            users[key] = u = {"user": r.user, "gpu_hours": 0.0, "cpu_hours": 0.0, "not_in_tree": True}
            target["users"].append(u)
        for f in ("gpu_hours", "cpu_hours"):
            v = getattr(r, f)
            users[key][f] = None if (users[key][f] is None or pd.isna(v)) else users[key][f] + float(v)

    own: dict[str, dict] = {}
    for a in assocs:
        got = (shares or {}).get(a.get("id") or "")
        if not got:
            continue
        if a["user"] and (a["account"], a["user"]) in users:
            u = users[(a["account"], a["user"])]
            for f in ("gpu_hours", "cpu_hours"):
                u[f] = None if u[f] is None else u[f] + got[f]
        elif not a["user"] and a["account"] in nodes:
            own[a["account"]] = got
            nodes[a["account"]]["reservation_idle"] = dict(got)

    def total(node: dict) -> None:
        for c in node["children"]:
            total(c)
        for f in ("gpu_hours", "cpu_hours"):
            vals = [u[f] for u in node["users"]] + [c[f] for c in node["children"]] + \
                [own.get(node["account"], {}).get(f, 0.0)]
            node[f] = None if any(v is None for v in vals) else float(sum(vals))

    total(root)
    return root


def tree_rows(tree: dict, depth: int = 0) -> list[dict]:
    """The tree as rows, depth first (sreport's order): ``{"depth", "account", "user" ("" on an
    account row), "gpu_hours", "cpu_hours"}``; for the Markdown/HTML/CSV tables."""
    rows = [{"depth": depth, "account": tree["account"], "user": "", "gpu_hours": tree["gpu_hours"],
             "cpu_hours": tree["cpu_hours"]}]
    for u in tree["users"]:
        rows.append({"depth": depth + 1, "account": tree["account"], "user": u["user"],
                     "gpu_hours": u["gpu_hours"], "cpu_hours": u["cpu_hours"]})
    for c in tree["children"]:
        rows += tree_rows(c, depth + 1)
    return rows


def compare_accounts(tree: dict, sreport_rows: list[dict], tolerance_h: float = 0.02) -> list[dict]:
    """The tree's rows vs :func:`slurmkit.report.sreport.account_users` -> ``[{"account", "user",
    "tres", "ours", "sreport", "difference", "within"}]`` for every row either side has.
    sreport also gives each account or user allowed in a reservation a share of its idle time
    (``man sreport``), which jobs do not show: such rows differ by that share."""
    ours = {}
    for r in tree_rows(tree):
        ours[(r["account"], r["user"], "gres/gpu")] = r["gpu_hours"]
        ours[(r["account"], r["user"], "cpu")] = r["cpu_hours"]
    theirs = {(r["account"], r["login"], r["tres"]): r["used"] for r in sreport_rows}
    out = []
    for key in list(ours) + [k for k in theirs if k not in ours]:
        if key[2] not in {k[2] for k in theirs}:
            continue
        a, b = ours.get(key), theirs.get(key, 0.0 if key in ours else None)
        d = None if a is None or b is None else a - b
        out.append({"account": key[0], "user": key[1], "tres": key[2], "ours": a, "sreport": b, "difference": d,
                    "within": None if d is None else bool(abs(d) <= tolerance_h + 0.001 * abs(b))})
    return out


#: What makes a figure differ from sreport's, said beside the difference.
WHY = {"allocated": "jobs sreport has and the input lacks (or the reverse), suspended time (sreport leaves it out), "
                    "or jobs inside a reservation the input does not name (sacct Reservation)",
       "down": "node events sreport rolled up that the events input lacks (or the reverse)",
       "planned_down": "MAINT reservations, FUTURE or powered-down nodes missing on one side",
       "planned": "the CPUs of eligible pending jobs (their requested CPUs, ReqTRES cpu=; an input without ReqTRES or ReqCPUS counts NCPUS, which a GPU job's allocation may exceed)",
       "idle": "what is left of Reported after the other figures: it moves with them",
       "reported": "capacity: ours is the nodes' TRES x the hours, sreport's the TRES the cluster registered "
                   "with slurmdbd, from its registration (a restart, a node added or removed changes it)"}


def explain(ours: dict, sreport_fig: dict | None, differences: list[dict], window: dict,
            capacity_source: str | None) -> list[str]:
    """The sentences a report prints beside the breakdown: where the capacity comes from,
    which hours sreport covers, and for each figure out of tolerance why it may differ
    (:data:`WHY`). ``ours``: :func:`breakdown`'s result; ``sreport_fig``: sreport's parsed
    figures or None when sreport was not reachable."""
    out = [f"This breakdown's Reported: {ours.get('capacity_source', 'unknown')} (the utilization's capacity: "
           f"{capacity_source or 'unknown'})."]
    if sreport_fig is None:
        out.append("sreport not reached: only our figures are shown.")
        return out
    reg = ours.get("registered")
    if reg is not None and reg > window["start"]:
        out.insert(1, f"The cluster registered with slurmdbd at {reg} (sacctmgr show event: Cluster Registered "
                      "TRES), inside this window: Reported counts from then, not from the window's start.")
    if not sreport_fig:
        out.append("sreport returned no rows for this window ("
                   + (f"cluster registered at {reg}; " if reg else "")
                   + "rollup not yet run?): not comparable.")
        return out
    out.append(f"Both cover {window['start']} – {window['end']}: the whole hours slurmdbd has rolled up "
               "(sreport never reports the current hour; hours after the last rollup are missing from it).")
    off = [d for d in differences if d["within"] is False]
    if not off:
        out.append("Every figure equals sreport's within rounding.")
    for d in off:
        out.append(f"{d['tres']} {d['figure'].replace('_', ' ')}: ours {d['ours']:.4g} h, sreport "
                   f"{d['sreport']:.4g} h ({d['difference']:+.4g} h): {WHY[d['figure']]}.")
    return out
