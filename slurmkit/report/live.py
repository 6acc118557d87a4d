"""Live inputs of the weekly report: sacct per day into the store, node capacity and events,
sreport — every Slurm command through :func:`slurmkit.slurm.commands.run`.

Kept apart from the pure model (:mod:`slurmkit.report.weekly`) so that the model is testable
from captured text. ``progress``: a callable ``(done_days, total_days)`` or None.
"""

from __future__ import annotations

import datetime as dt

from slurmkit.accounting.ingest import SACCT_ENV, pull_day
from slurmkit.accounting.quality import SAME_ROW_PULL, DataQuality
from slurmkit.accounting.frame import JobRows
from slurmkit.accounting.store import Store
from slurmkit.report import capacity as C
from slurmkit.report import sreport as S


def ingest_window(days, cluster: str | None, store: Store | None, progress=None,
                  timeout: float = 300.0) -> tuple[JobRows, DataQuality, int]:
    """Rows of ``days`` (list of ``(day_start, day_end)``): pulls the days the store lacks or
    holds provisionally (all days when ``store`` is None) and returns ``(rows, dq, pulled)``."""
    pulled = 0
    frames, dq = [], DataQuality()
    for i, (d0, d1) in enumerate(days):
        midnight = d0.replace(hour=0, minute=0, second=0, microsecond=0)
        if store is None or store.needs_pull(midnight):
            full = (midnight, midnight + dt.timedelta(days=1))
            rows, ddq = pull_day(*full, cluster=cluster, timeout=timeout)
            pulled += 1
            if store is not None:
                store.save_day(midnight, rows, ddq)
            else:
                frames.append(rows)
                dq.merge(ddq)
        if progress:
            progress(i + 1, len(days))
    if store is not None:
        return (*store.load([d0.replace(hour=0, minute=0, second=0, microsecond=0) for d0, _ in days]), pulled)
    rows = JobRows.concat(frames).drop_repeats(
        dq, "sacct", keep="last", reason=SAME_ROW_PULL, list_rows=False)
    return rows, dq, pulled


def node_events_text(start, end, nodes=(), timeout: float = 60.0) -> str:
    """``sacctmgr -n -P show event`` of the nodes ``nodes`` (all when empty) overlapping
    ``[start, end)``, columns :data:`slurmkit.report.capacity.EVENT_FORMAT` (NodeName,
    TimeStart, TimeEnd, State, Reason), epoch times (``SLURM_TIME_FORMAT=%s``): the text
    :func:`slurmkit.report.capacity.node_events` reads. Raises ``SlurmError``."""
    from slurmkit.slurm.commands import run

    fmt = "%Y-%m-%dT%H:%M:%S"
    argv = ["sacctmgr", "-n", "-P", "show", "event", "Event=Node", f"Start={start:{fmt}}", f"End={end:{fmt}}",
            "format=" + ",".join(C.EVENT_FORMAT)]
    if nodes:
        argv.insert(5, "Nodes=" + ",".join(nodes))
    return run(argv, timeout=timeout, env=dict(SACCT_ENV)).stdout


def live_capacity(start, end, timeout: float = 60.0, now=None) -> tuple[float, float, dict]:
    """``(GPUs in the cluster, down GPU-hours in [start, end), downtime)`` from ``scontrol
    show -o nodes`` (GPUs per node) and ``sacctmgr show event`` (node events with their
    reasons): ``downtime`` is :func:`slurmkit.report.capacity.downtime`'s timeline by node."""
    from slurmkit.slurm.commands import run

    nodes = C.gpus_per_node_scontrol(run(["scontrol", "show", "-o", "nodes"], timeout=timeout).stdout)
    if not nodes:
        return 0.0, 0.0, C.downtime(C.node_events(""), {}, start, end, now)
    events = C.node_events(node_events_text(start, end, list(nodes), timeout), source="sacctmgr show event")
    down = C.downtime(events, nodes, start, end, now)
    down["source"] = "sacctmgr show event"
    return float(sum(nodes.values())), float(down["down_gpu_hours"]), down


def breakdown_inputs(start, end, cluster: str | None = None, timeout: float = 60.0) -> dict:
    """The inputs of sreport's breakdown and the account tree for ``[start, end)``, read live:
    ``{"node_tres": scontrol show -o nodes (:func:`slurmkit.report.capacity.node_tres_scontrol`),
    "events": sacctmgr show event with the cluster's registrations and each event's TRES,
    "reservations": sacctmgr show reservation (format :data:`slurmkit.report.breakdown.RESV_FORMAT`),
    "assocs": sacctmgr show assoc tree (:data:`~slurmkit.report.breakdown.ASSOC_FORMAT`)}``
    (epoch times, ``SLURM_TIME_FORMAT=%s``). Raises ``SlurmError``."""
    from slurmkit.report import breakdown as B
    from slurmkit.slurm.commands import run

    fmt = "%Y-%m-%dT%H:%M:%S"
    span = [f"Start={start:{fmt}}", f"End={end:{fmt}}"]
    where = [f"Clusters={cluster}"] if cluster else []
    env = dict(SACCT_ENV)
    nodes = C.node_tres_scontrol(run(["scontrol", "show", "-o", "nodes"], timeout=timeout).stdout)
    # events up to now, not to the window's end: a cluster that registered after the rolled-up
    # hours (a new cluster) has Reported 0 there, not the nodes' TRES x the hours
    ev_end = max(end, dt.datetime.now(end.tzinfo))
    ev = run(["sacctmgr", "-P", "show", "event", span[0], f"End={ev_end:{fmt}}", *where,
              "format=NodeName,TimeStart,TimeEnd,State,TRES,Reason"],
             timeout=timeout, env=env).stdout
    rs = run(["sacctmgr", "-P", "show", "reservation", *span, *where, "format=" + ",".join(B.RESV_FORMAT)],
             timeout=timeout, env=env).stdout
    tree = run(["sacctmgr", "-P", "show", "assoc", "tree", *([f"cluster={cluster}"] if cluster else []),
                "format=" + ",".join(B.ASSOC_FORMAT)], timeout=timeout, env=env).stdout
    return {"node_tres": nodes, "events": C.node_events(ev, source="sacctmgr show event", cluster_rows=True),
            "reservations": B.parse_reservations(rs, source="sacctmgr show reservation"),
            "assocs": B.parse_assoc_tree(tree)}


def whole_hours(start: dt.datetime, end: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
    """The whole hours inside ``[start, end)`` (sreport rounds to whole hours)."""
    s = start.replace(minute=0, second=0, microsecond=0)
    if s < start:
        s += dt.timedelta(hours=1)
    e = end.replace(minute=0, second=0, microsecond=0)
    return s, max(s, e)


def run_rollup(start, end, timeout: float = 120.0) -> None:
    """``sacctmgr -i rollup <start> <end>`` (root): slurmdbd rolls the hourly usage tables up
    now, so that sreport covers the hours since its last automatic rollup. Raises
    ``SlurmError``."""
    from slurmkit.slurm.commands import run

    fmt = "%Y-%m-%dT%H:%M:%S"
    run(["sacctmgr", "-i", "rollup", f"{start:{fmt}}", f"{end:{fmt}}"], timeout=timeout, env=dict(SACCT_ENV))


def sreport_text(report: str, start, end, cluster: str | None = None, tres: str = "cpu,gres/gpu",
                 timeout: float = 120.0, wrapper: tuple = ()) -> str:
    """``sreport -n -P -t seconds cluster <report> start=... end=... -T <tres>`` (sreport's
    default columns; seconds, as ``-t hours`` rounds to whole hours): the text
    :func:`slurmkit.report.sreport.cluster_utilization` (``report`` "utilization") or
    :func:`~slurmkit.report.sreport.account_users` ("AccountUtilizationByUser") reads with
    ``unit="seconds"``. ``wrapper``: a command prefix (tests use ``faketime`` to see the
    current hour, which sreport never reports). Raises ``SlurmError``."""
    from slurmkit.slurm.commands import run

    fmt = "%Y-%m-%dT%H:%M:%S"
    argv = ["sreport", "-n", "-P", "-t", "seconds", "cluster", report, f"start={start:{fmt}}",
            f"end={end:{fmt}}", "-T", tres]
    if cluster:
        argv[5:5] = ["-M", cluster]
    return run([*wrapper, *argv], timeout=timeout, env=dict(SACCT_ENV)).stdout


def sreport_gpu_hours(start, end, cluster: str | None = None, rollup: bool = False,
                      timeout: float = 120.0, wrapper: tuple = ()) -> float:
    """GPU-hours sreport reports for ``[start, end)`` (whole hours): its AccountUtilizationByUser
    user rows (:func:`slurmkit.report.sreport.gpu_hours`), optionally after ``sacctmgr -i
    rollup`` (root) so that the hourly tables are current."""
    if rollup:
        run_rollup(start, end, timeout)
    return S.gpu_hours(sreport_text("AccountUtilizationByUser", start, end, cluster, "gres/gpu", timeout, wrapper),
                       "seconds")
