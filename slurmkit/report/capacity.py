"""GPU capacity, node down time and the sreport reconciliation (pure functions over text).

- :func:`gpus_per_node_scontrol`: ``scontrol show -o nodes`` -> {node: GPUs} (``Gres=gpu:h100:4``)
- :func:`node_events`: ``sacctmgr -n -P show event ... format=NodeName,TimeStart,TimeEnd,State``
  -> intervals; :func:`down_gpu_hours` merges each node's overlapping intervals (a drained node's
  time counts once, however many events cover it) and clips them to the window
- :func:`sreport_gpu_hours`: ``sreport -n -P cluster AccountUtilizationByUser
  --tres=gres/gpu format=Cluster,Account,Login,Used`` -> Used of the user rows summed (in
  sreport's ``-t`` unit)
"""

from __future__ import annotations

import re

import pandas as pd

_GRES = re.compile(r"(?:^|[\s,])(?:Gres=)?gpu(?::[^:,\s(]+)?:(\d+)")


def gpus_per_node_scontrol(text: str) -> dict[str, int]:
    """``scontrol show -o nodes`` text -> {NodeName: GPUs from Gres=gpu[:type]:N, else from
    CfgTRES gres/gpu=N (typed entries summed when the untyped one is absent)}; nodes without
    GPUs -> 0."""
    out = {}
    for line in text.splitlines():
        m = re.search(r"NodeName=(\S+)", line)
        if not m:
            continue
        gm = re.search(r"\bGres=(\S+)", line)
        tm = re.search(r"\bCfgTRES=(\S+)", line)
        n = 0
        if tm and not gm:
            tres = dict(e.split("=", 1) for e in tm.group(1).split(",") if "=" in e)
            if "gres/gpu" in tres:
                n = int(tres["gres/gpu"])
            else:
                n = sum(int(v) for k, v in tres.items() if k.startswith("gres/gpu:"))
        if gm:
            for part in gm.group(1).split(","):
                pm = re.match(r"gpu(?::[^:(]+)?:(\d+)", part)
                if pm:
                    n += int(pm.group(1))
        out[m.group(1)] = n
    return out


def gpus_per_node_profile(profile) -> dict[str, int]:
    """Site profile (a loaded ``slurmkit.profile.Profile``) -> {node: GPUs}: every partition's
    nodes (``partitions.<p>.nodes``, expanded by the loader) with their node type's ``gpu_count``.
    A node in several partitions is counted once."""
    out = {}
    for part in profile.partitions.values():
        count = profile.node_types[part.node_type].gpu_count
        for node in part.node_names:
            out[node] = count
    return out


def node_events(text: str) -> pd.DataFrame:
    """sacctmgr event lines ``NodeName|TimeStart|TimeEnd|State`` (epoch seconds or ISO;
    TimeEnd ``Unknown`` while ongoing) -> DataFrame(node, start, end, state). Cluster-wide
    events (empty NodeName) are dropped."""
    from slurmkit.accounting.parse import parse_times

    rows = [ln.split("|") for ln in text.splitlines() if ln.strip()]
    rows = [r + [""] * (4 - len(r)) for r in rows if r[0].strip()]
    df = pd.DataFrame([r[:4] for r in rows], columns=["node", "start", "end", "state"], dtype="str")
    df["start"] = parse_times(df["start"])
    df["end"] = parse_times(df["end"])
    return df


def down_gpu_hours(events: pd.DataFrame, gpus: dict[str, int], start, end, now=None) -> float:
    """GPU-hours lost to down/drained nodes in ``[start, end)``: per node, the union of its
    event intervals (ongoing ones end at ``now``) clipped to the window, × that node's GPUs.
    A node listed by several events (hostlist entries in one event are expanded) counts once."""
    from slurmkit import hostlist

    start, end = pd.Timestamp(start), pd.Timestamp(end)
    now = pd.Timestamp(now) if now is not None else pd.Timestamp.now(tz="UTC")
    per_node: dict[str, list] = {}
    for ev in events.itertuples():
        if pd.isna(ev.start):
            continue
        lo = max(ev.start, start)
        hi = min(ev.end if not pd.isna(ev.end) else now, end)
        if hi <= lo:
            continue
        for node in hostlist.expand_hostlist(ev.node):
            per_node.setdefault(node, []).append((lo, hi))
    total = 0.0
    for node, ivs in per_node.items():
        ivs.sort()
        merged_s, cur_lo, cur_hi = 0.0, None, None
        for lo, hi in ivs:
            if cur_hi is None or lo > cur_hi:
                if cur_hi is not None:
                    merged_s += (cur_hi - cur_lo).total_seconds()
                cur_lo, cur_hi = lo, hi
            else:
                cur_hi = max(cur_hi, hi)
        if cur_hi is not None:
            merged_s += (cur_hi - cur_lo).total_seconds()
        total += merged_s * gpus.get(node, 0) / 3600.0
    return total


def sreport_gpu_hours(text: str) -> float:
    """``sreport -n -P -t <unit> cluster AccountUtilizationByUser --tres=gres/gpu
    format=Cluster,Account,Login,Used`` -> the sum of the user rows' Used (in ``<unit>``).
    Account rows (empty Login) are the users' sums and are not added again."""
    total = 0.0
    for ln in text.splitlines():
        parts = ln.strip().split("|")
        if len(parts) < 4 or not parts[2].strip():
            continue
        try:
            total += float(parts[3])
        except ValueError:
            continue
    return total
