"""GPU capacity and node down time (pure functions over text).

- :func:`gpus_per_node_scontrol`: ``scontrol show -o nodes`` -> {node: GPUs} (``Gres=gpu:h100:4``)
- :func:`node_events`: ``sacctmgr -P show event ... format=NodeName,TimeStart,TimeEnd,State,Reason``
  (or its default format, with or without header) -> intervals with their reasons;
  :func:`downtime`: the timeline by node and the down GPU-hours by reason; :func:`down_gpu_hours` merges each node's overlapping intervals (a drained node's
  time counts once, however many events cover it) and clips them to the window
- :func:`node_down_intervals`: each node's down intervals, merged and clipped to a window: the
  one home of down time (:func:`down_gpu_hours` and :mod:`slurmkit.report.breakdown` use it)

sreport's output is read in :mod:`slurmkit.report.sreport`.
"""

from __future__ import annotations

import re

import pandas as pd

from slurmkit import hostlist
from slurmkit.accounting.parse import parse_times
from slurmkit.errors import InputError
from slurmkit.report.window import iso_z
from slurmkit.slurm import gres as G
from slurmkit.slurm import tres as T

_GRES = re.compile(r"(?:^|[\s,])(?:Gres=)?gpu(?::[^:,\s(]+)?:(\d+)")


def _node_records(text: str) -> list[tuple[int, str, str]]:
    """``[(line, NodeName, record)]`` of ``scontrol show nodes`` text: one record per node,
    its line (``-o``) or its lines (without ``-o``: the indented lines after ``NodeName=...``
    joined), ``line`` the 1-based line where it starts."""
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        m = re.match(r"\s*NodeName=(\S+)", line)
        if m:
            out.append([i, m.group(1), line])
        elif out and line[:1].isspace() and line.strip():
            out[-1][2] += " " + line.strip()
    return [tuple(r) for r in out]


def gpus_per_node_scontrol(text: str) -> dict[str, int]:
    """``scontrol show [-o] nodes`` text -> {NodeName: GPUs of its ``Gres=`` (:func:`slurmkit.slurm.gres.gpu_count`),
    else of its ``CfgTRES=`` (:func:`slurmkit.slurm.tres.gpu_count`)}; nodes without GPUs -> 0.
    Raises :class:`~slurmkit.errors.InputError` for a Gres= or CfgTRES= that does not parse."""
    out = {}
    for _, name, rec in _node_records(text):
        gm = re.search(r"\bGres=(\S+)", rec)
        tm = re.search(r"\bCfgTRES=(\S+)", rec)
        if gm:
            out[name] = G.gpu_count(gm.group(1))
        else:
            out[name] = (T.gpu_count(tm.group(1)) if tm else None) or 0
    return out


def node_tres_scontrol(text: str, source: str | None = None) -> dict[str, dict[str, float]]:
    """``scontrol show [-o] nodes`` text -> {NodeName: {"cpu": CfgTRES cpu= (else CPUTot=),
    "gres/gpu": :func:`gpus_per_node_scontrol`'s GPUs}}: the node TRES of
    :func:`slurmkit.report.breakdown.breakdown`. ``source``: a captured file's name; its text
    is then checked to be scontrol's: :class:`~slurmkit.errors.InputError` (``source``, line)
    for slurm.conf's words (a NodeName that is a hostlist or DEFAULT, PartitionName=,
    ClusterName=, SlurmctldHost=), a node with neither CfgTRES= nor CPUTot=, or no node at all."""
    gpus = gpus_per_node_scontrol(text)
    out = {}
    if source is not None:
        for i, line in enumerate(text.splitlines(), 1):
            m = re.match(r"\s*(NodeName=(?:DEFAULT\b|\S*[\[\],])|PartitionName=|ClusterName=|SlurmctldHost=)", line)
            if m:
                raise InputError(source, i, f"{m.group(1)}...: slurm.conf's words, not 'scontrol show -o nodes' "
                                            "output (one node per line, NodeName=<node> ... CfgTRES=...): capture "
                                            "that on the cluster")
    for i, name, rec in _node_records(text):
        tm = re.search(r"\bCfgTRES=(\S+)", rec)
        cpus = T.number(tm.group(1), "cpu") if tm else None
        if cpus is None:
            cm = re.search(r"\bCPUTot=(\d+)", rec)
            cpus = float(cm.group(1)) if cm else None
        if source is not None:
            if cpus is None:
                raise InputError(source, i, f"node {name} has neither CfgTRES= nor CPUTot=: expected "
                                            "'scontrol show -o nodes' output")
        out[name] = {"cpu": cpus or 0.0, "gres/gpu": float(gpus.get(name, 0))}
    if source is not None and not out:
        raise InputError(source, None, "no node (NodeName=...) in it: expected 'scontrol show -o nodes' output")
    return out


def gpus_per_node_profile(profile) -> dict[str, int]:
    """Site profile (a loaded ``slurmkit.profile.Profile``) -> {node: GPUs}: every partition's
    nodes (``partitions.<p>.nodes``, expanded by the loader) with their node type's ``Name=gpu``
    gres count (its GPUs; MIG instances where MIG is on, the units sacct's ``gres/gpu`` counts;
    0 on a CPU-only node type). A node in several partitions is counted once."""
    out = {}
    for part in profile.partitions.values():
        count = sum(g.gres_count for g in profile.node_types[part.node_type].gpu_groups)
        for node in part.node_names:
            out[node] = count
    return out


def node_tres_profile(profile) -> dict[str, dict[str, float]]:
    """Site profile -> {node: {"cpu": the CPUs slurm.conf gives its node type (``slurm_node.cpus``,
    when the profile says slurm.conf differs from the hardware: what slurmctld and slurmdbd
    count), else sockets x cores_per_socket x threads_per_core, "gres/gpu":
    :func:`gpus_per_node_profile`'s GPUs}}: the node TRES of
    :func:`slurmkit.report.breakdown.breakdown` for a captured report."""
    gpus = gpus_per_node_profile(profile)
    out = {}
    for part in profile.partitions.values():
        nt = profile.node_types[part.node_type]
        cpus = nt.slurm_node.cpus if nt.slurm_node is not None else nt.sockets * nt.cores_per_socket * nt.threads_per_core
        for node in part.node_names:
            out[node] = {"cpu": float(cpus), "gres/gpu": float(gpus.get(node, 0))}
    return out


#: sacctmgr's event columns (``format=`` names and the headers ``-P`` prints for them) -> ours.
_EVENT_COLUMNS = {"nodename": "node", "timestart": "start", "start": "start", "timeend": "end",
                  "end": "end", "state": "state", "reason": "reason", "cluster": "cluster",
                  "user": "user", "duration": "duration", "event": "event", "eventraw": "event_raw",
                  "clusternodes": "cluster_nodes", "stateraw": "state_raw", "tres": "tres"}
#: ``sacctmgr -n -P show event`` without ``format=``: its default columns.
DEFAULT_EVENT_FORMAT = ("Cluster", "NodeName", "TimeStart", "TimeEnd", "State", "Reason", "User")
#: The live call's ``format=`` (:func:`slurmkit.report.live.node_events_text`): Reason last, so a
#: reason holding the delimiter only spills into its own column.
EVENT_FORMAT = ("NodeName", "TimeStart", "TimeEnd", "State", "Reason")


def _event_columns(first: list[str]) -> list[str] | None:
    """The columns a header line names, or None when ``first`` is not a header."""
    names = [f.strip().lower() for f in first]
    if "nodename" in names and all(n in _EVENT_COLUMNS for n in names if n):
        return [_EVENT_COLUMNS.get(n, n) for n in names]
    return None


def node_events(text: str, tz: str = "UTC", source: str = "events", cluster_rows: bool = False) -> pd.DataFrame:
    """sacctmgr's ``-P`` event output -> DataFrame(node, start, end, state, reason, tres): with its
    header (any ``format=``), or without one (``-n``) in :data:`EVENT_FORMAT` (4 columns: no
    Reason) or sacctmgr's default :data:`DEFAULT_EVENT_FORMAT`. Times are epoch seconds or ISO
    (local times in ``tz``, as sacctmgr prints them); TimeEnd ``Unknown`` while ongoing (NaT).
    A reason holding ``|`` is rejoined. ``tres``: the event's TRES column (the node's TRES, or
    for a cluster event the cluster's registered TRES: ``cpu=32,gres/gpu=16,...``), "" when the
    output has none. Cluster-wide events (empty NodeName: "Cluster Registered TRES", slurmctld
    not responding) are dropped, or kept with ``node`` "" when ``cluster_rows``.
    Raises :class:`~slurmkit.errors.InputError` (``source`` and line) for a line whose columns
    fit no known format."""
    lines = [(i, ln.rstrip("\r")) for i, ln in enumerate(text.splitlines(), 1) if ln.strip()]
    cols = _event_columns(lines[0][1].split("|")) if lines else None
    if cols is not None:
        lines = lines[1:]
    recs = []
    for i, ln in lines:
        parts = ln.split("|")
        if cols is None:
            n = len(parts)
            cols_here = (["node", "start", "end", "state"] if n == 4 else
                         ["node", "start", "end", "state", "reason"] if n == 5 else
                         [_EVENT_COLUMNS[c.lower()] for c in DEFAULT_EVENT_FORMAT] if n >= 7 else None)
            if cols_here is None:
                raise InputError(source, i, f"{n} columns: not sacctmgr -P show event output "
                                            f"(format={','.join(EVENT_FORMAT)} or sacctmgr's default)")
        else:
            cols_here = cols
        k = cols_here.index("reason") if "reason" in cols_here else -1
        extra = len(parts) - len(cols_here)
        if extra > 0 and k >= 0:     # the delimiter inside a reason
            parts = parts[:k] + ["|".join(parts[k:k + extra + 1])] + parts[k + extra + 1:]
        elif extra != 0:
            raise InputError(source, i, f"{len(parts)} columns for {len(cols_here)}")
        r = dict(zip(cols_here, parts))
        if r.get("node", "").strip() or cluster_rows:
            recs.append({"node": r.get("node", "").strip(), "start": r.get("start", ""), "end": r.get("end", ""),
                         "state": r.get("state", "").strip(), "reason": r.get("reason", "").strip(),
                         "tres": r.get("tres", "").strip()})
    df = pd.DataFrame(recs, columns=["node", "start", "end", "state", "reason", "tres"], dtype="str")
    df["start"] = parse_times(df["start"], tz)
    df["end"] = parse_times(df["end"], tz)
    return df


def downtime(events: pd.DataFrame, gpus: dict[str, int] | None, start, end, now=None,
             limit: int = 500) -> dict:
    """Downtime and drains in ``[start, end)`` by node, with their reasons.

    ``events``: :func:`node_events` (a hostlist ``n[1-3]`` is expanded: one entry per node);
    ``gpus``: {node: GPUs} (scontrol's Gres, or the profile's node types), None when not known
    (GPU-hours are then None); an ongoing event ends at ``now`` (the capture time, or the
    current time). Each instant of a node's down time is given to the event that began first,
    so the events' ``gpu_hours`` add up to :func:`down_gpu_hours` (overlapping events count
    once). Returns ``{"events": [{"node", "state", "reason", "start", "end" (ISO, None while
    ongoing), "ongoing", "hours" (the event's time in the window, h), "gpus", "gpu_hours" (the
    GPU-hours it alone takes: its disjoint share × the node's GPUs)}], "by_reason": [{"reason",
    "events", "nodes", "node_hours", "gpu_hours"}] (most first), "nodes", "node_hours",
    "down_gpu_hours", "events_listed", "events_total"}``; the first ``limit`` events, longest
    first, are listed."""
    start, end = pd.Timestamp(start), pd.Timestamp(end)
    now = pd.Timestamp(now) if now is not None else pd.Timestamp.now(tz="UTC")
    items = []
    for ev in events.itertuples():
        if pd.isna(ev.start):
            continue
        stop = ev.end if not pd.isna(ev.end) else now
        lo, hi = max(ev.start, start), min(stop, end)
        if hi <= lo:
            continue
        for node in hostlist.expand_hostlist(ev.node):
            items.append({"node": node, "lo": lo, "hi": hi, "state": ev.state, "reason": ev.reason or "(none)",
                          "start": iso_z(ev.start), "end": None if pd.isna(ev.end) else iso_z(ev.end),
                          "ongoing": bool(pd.isna(ev.end))})
    items.sort(key=lambda x: (x["node"], x["lo"], x["hi"]))
    covered: dict[str, pd.Timestamp] = {}
    for it in items:
        own_lo = max(it["lo"], covered.get(it["node"], it["lo"]))
        own_s = max((it["hi"] - own_lo).total_seconds(), 0.0)
        covered[it["node"]] = max(covered.get(it["node"], it["hi"]), it["hi"])
        g = None if gpus is None else gpus.get(it["node"], 0)
        it.update(hours=(it["hi"] - it["lo"]).total_seconds() / 3600.0, own_hours=own_s / 3600.0,
                  gpus=g, gpu_hours=None if g is None else g * own_s / 3600.0)
    by: dict[str, dict] = {}
    for it in items:
        b = by.setdefault(it["reason"], {"reason": it["reason"], "events": 0, "nodes": set(),
                                         "node_hours": 0.0, "gpu_hours": None if gpus is None else 0.0})
        b["events"] += 1
        b["nodes"].add(it["node"])
        b["node_hours"] += it["own_hours"]
        if gpus is not None:
            b["gpu_hours"] += it["gpu_hours"]
    by_reason = sorted(({**b, "nodes": len(b["nodes"])} for b in by.values()),
                       key=lambda b: (-(b["gpu_hours"] or 0.0), -b["node_hours"], b["reason"]))
    listed = sorted(items, key=lambda x: -x["hours"])[:limit]
    listed.sort(key=lambda x: (x["node"], x["lo"]))
    return {"events": [{k: it[k] for k in ("node", "state", "reason", "start", "end", "ongoing", "hours",
                                           "gpus", "gpu_hours")} for it in listed],
            "by_reason": by_reason, "nodes": len({it["node"] for it in items}),
            "node_hours": sum(it["own_hours"] for it in items),
            "down_gpu_hours": None if gpus is None else sum(it["gpu_hours"] for it in items),
            "events_listed": len(listed), "events_total": len(items)}


def node_down_intervals(events: pd.DataFrame, start, end, now=None) -> dict[str, list[tuple]]:
    """{node: [(lo, hi), ...]}: each node's event intervals (ongoing ones end at ``now``, default
    the current time) clipped to ``[start, end)``, overlapping ones merged (a node listed by
    several events counts once), sorted; hostlist entries in one event are expanded. Aware UTC
    timestamps. Events without a node (cluster rows) or a start are ignored."""
    start, end = pd.Timestamp(start), pd.Timestamp(end)
    now = pd.Timestamp(now) if now is not None else pd.Timestamp.now(tz="UTC")
    per_node: dict[str, list] = {}
    for ev in events.itertuples():
        if pd.isna(ev.start) or not ev.node:
            continue
        lo = max(ev.start, start)
        hi = min(ev.end if not pd.isna(ev.end) else now, end)
        if hi <= lo:
            continue
        for node in hostlist.expand_hostlist(ev.node):
            per_node.setdefault(node, []).append((lo, hi))
    out = {}
    for node, ivs in per_node.items():
        ivs.sort()
        merged: list[list] = []
        for lo, hi in ivs:
            if merged and lo <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], hi)
            else:
                merged.append([lo, hi])
        out[node] = [(lo, hi) for lo, hi in merged]
    return out


def down_gpu_hours(events: pd.DataFrame, gpus: dict[str, int], start, end, now=None) -> float:
    """GPU-hours lost to down/drained nodes in ``[start, end)``: per node, the union of its
    event intervals (:func:`node_down_intervals`; ongoing ones end at ``now``) × that node's
    GPUs."""
    return sum(sum((hi - lo).total_seconds() for lo, hi in ivs) * gpus.get(node, 0)
               for node, ivs in node_down_intervals(events, start, end, now).items()) / 3600.0
