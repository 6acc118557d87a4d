"""The resume gate: before slurmkit resumes a node it drained, the node must pass the active
check (:func:`slurmkit.health.active.dcgm_diag`, ``dcgmi diag -r <[health] dcgm_diag_level>``).

Run by the healthcheck hook only (never in a job's prolog), once the node has had
``resume_after`` clean periodic checks. Outcomes of :func:`resume_gate`:

=========================  ==========================================================
pass / warn                resume (a warn is logged)
fail (or the diag hangs)   the node stays drained; its reason becomes the failing test,
                           ``slurmkit: dcgm_diag: GPU1 Memory: fail (...)``
skip (DCGM not installed,  resume as before: the gate is documented as skipped (logged)
or ``active_check=false``)
error (own trouble)        the node stays drained this run (counted, logged); the next
                           clean run tries again
node busy (a job record    the diag does not run; the node stays drained ("resume waits
or a GPU process)          for the node to be idle") until a health check finds it idle
=========================  ==========================================================

:func:`idle_check` runs the same diag on a healthy node that slurmkit has not drained, when
``[health] active_interval_s`` is set and that long has passed since the last one
(``<state_dir>/<node>/active.json``), and only while the node is idle: no job of this node has a
prolog record (``job-<id>.json``) and no GPU has a compute process. A fail drains.
"""

from __future__ import annotations


def _diag(run):
    """The DCGM diag and, when ``[health] nccl_busbw_min_gbps`` is set and the diag did not fail,
    the all-reduce floor: the deciding report (:func:`slurmkit.health.active.worst`)."""
    from slurmkit.health.active import ERROR, DiagReport, dcgm_diag, nccl_allreduce, worst

    import os

    from slurmkit.hooks import nodestate

    health = run.judging.health
    pidfile = None
    try:
        d = nodestate.node_dir(run.cfg.state_dir, run.node)
        os.makedirs(d, exist_ok=True)
        pidfile = os.path.join(d, "dcgmi-diag.pid")  # a diag left by a killed hook is found here
    except OSError as exc:
        run.own_error(f"active check pid file in {run.cfg.state_dir}: {exc.strerror or exc}")
    timeout = _share(run, health.active_timeout_s)
    if isinstance(timeout, DiagReport):
        return timeout
    reps = [_within(dcgm_diag(health.dcgm_diag_level, timeout, dcgmi=run.cfg.dcgmi,
                              capture=run.cfg.dcgm_capture_for(run.node), pidfile=pidfile), timeout, health)]
    if health.nccl_busbw_min_gbps is not None and reps[0].status not in ("fail", ERROR):
        gpus = run.judging.hc.expect.get("expected_gpu_count") or len(run.node_gpus.files or []) or 1
        timeout = _share(run, health.active_timeout_s)
        if isinstance(timeout, DiagReport):
            return timeout
        reps.append(_within(nccl_allreduce(float(health.nccl_busbw_min_gbps), int(gpus), timeout,
                                           exe=run.cfg.all_reduce_perf, capture=run.cfg.nccl_capture_for(run.node)),
                            timeout, health))
        for r in reps:
            if r.status not in ("fail", "error"):
                run.log.info(f"active check part {r.check}: {r.status}: {r.message}")
    for r in reps:
        if r.timed_out:
            run.log.error(f"active check {r.check} timed out ({r.source}): {r.message}")
    return worst(reps)


#: Fewer seconds than this left of the health check's budget: the active check waits for a later run.
MIN_ACTIVE_S = 5.0


def _share(run, want_s: float):
    """The active check's deadline this run (s): ``want_s`` (``[health] active_timeout_s``), cut
    to what is left of the health check's budget (:meth:`slurmkit.hooks.flows.Run.time_left`:
    slurmd kills HealthCheckProgram at 60 s); an ``error`` :class:`DiagReport` (own trouble:
    the node stays as it is, a later run tries again) when less than :data:`MIN_ACTIVE_S` is left."""
    from slurmkit.health.active import ERROR, DiagReport

    left = run.time_left()
    if left >= want_s:
        return want_s
    if left < MIN_ACTIVE_S:
        return DiagReport(ERROR, message=f"only {max(left, 0):.0f} s left of the health check's "
                          "time (slurmd stops it at 60 s): the active check runs at a later health check")
    return left


def _within(rep, timeout_s: float, health):
    """``rep`` as it stands, unless it overran a deadline cut short by the budget (``timeout_s``
    below ``health.active_timeout_s``): then not evidence but an ``error`` (own trouble: tried
    again at a later run), since its own deadline was never given."""
    from slurmkit.health.active import ERROR, DiagReport

    if rep.timed_out and timeout_s < health.active_timeout_s:
        return DiagReport(ERROR, check=rep.check, source=rep.source,
                          message=f"{rep.check} ran past the {timeout_s:.0f} s left of the health check's time "
                                  f"(short of its {health.active_timeout_s:g} s): tried again at a later health check")
    return rep


def node_busy(run) -> str | None:
    """Why the node is not idle (a job's prolog record ``job-<id>.json`` in the state dir, or a
    GPU compute process), or None when it is: the active check runs only on an idle node."""
    import os

    from slurmkit.hooks import nodestate

    d = nodestate.node_dir(run.cfg.state_dir, run.node)
    try:
        jobs = sorted(n[len("job-"):-len(".json")] for n in os.listdir(d) if n.startswith("job-") and n.endswith(".json"))
    except OSError:
        jobs = []
    if jobs:
        return f"job {', '.join(jobs)} still recorded on the node"
    busy = [g.index for g in (run.state.gpus if run.state else []) if g.get("processes")]
    if busy:
        return "compute processes on GPU " + ", ".join(map(str, busy))
    return None


def idle_check(run, now: float | None = None) -> None:
    """The periodic active check on an idle, healthy node (see the module docstring). Never
    raises for an unwritable state directory (own trouble)."""
    import json
    import os
    import time

    health = run.judging.health
    if not health.active_check or not health.active_interval_s:
        return  # most health checks end here: the active check's module is imported only when one is due
    from slurmkit.health.active import ERROR, SKIP
    from slurmkit.hooks import nodestate

    now = time.time() if now is None else now
    d = nodestate.node_dir(run.cfg.state_dir, run.node)
    path = os.path.join(d, "active.json")
    try:
        with open(path, encoding="utf-8") as fh:
            last = float(json.load(fh).get("last_s", 0))
    except (OSError, ValueError, TypeError, AttributeError):
        last = 0.0
    if now - last < health.active_interval_s:
        return
    busy = node_busy(run)
    if busy:
        run.log.info(f"active check due but the node is busy ({busy}): next health check")
        return
    rep = _diag(run)
    try:
        from slurmkit.atomicfile import atomic_write

        # a diag that gave no result (own trouble) is tried again at the next health check, not
        # after a whole interval: its time is kept apart from the last diag that gave one
        rec = {"last_s": last if rep.status == ERROR else now, "status": rep.status, "message": rep.message}
        if rep.status == ERROR:
            rec["error_s"] = now
        atomic_write(path, json.dumps(rec))
    except OSError as exc:
        run.own_error(f"active check record {path}: {exc.strerror or exc}")
    if rep.status == SKIP:
        run.log.info(rep.message)
    elif rep.status == ERROR:
        run.own_error(f"active check: {rep.message}")
    elif rep.status == "fail":
        run.log.error(f"active check failed on an idle node ({rep.source}): {rep.message}")
        run.verdict.drain_reason = rep.reason()
        run.apply_verdict()
    else:
        run.log.info(f"active check {rep.status} on an idle node ({rep.source}): {rep.message}")


def resume_gate(run) -> bool:
    """True when ``run``'s node may be resumed (see the module docstring). ``run`` is a
    :class:`slurmkit.hooks.flows.Run` after :meth:`~slurmkit.hooks.flows.Run.setup`; a fail sets
    ``run.verdict.drain_reason`` and drains through :meth:`~slurmkit.hooks.flows.Run.apply_verdict`."""
    from slurmkit.health.active import ERROR, SKIP

    if not run.judging.health.active_check:
        run.log.info("active check off ([health] active_check = false): resuming on clean runs alone")
        return True
    busy = node_busy(run)
    if busy:  # never a self-test on a job's GPUs: the same rule as the idle check
        run.log.info(f"resume waits for the node to be idle ({busy}): {run.node} stays drained, "
                     "the active check runs at a later health check")
        return False
    rep = _diag(run)
    if rep.status == SKIP:
        run.log.info(rep.message)
        return True
    if rep.status == ERROR:
        run.own_error(f"active check: {rep.message}; {run.node} stays drained until it passes")
        return False
    if rep.status == "fail":
        run.log.error(f"active check failed ({rep.source}): {rep.message}")
        run.verdict.drain_reason = rep.reason()
        run.apply_verdict()
        return False
    if rep.status == "warn":
        run.log.warning(f"active check warned ({rep.source}): {rep.message}")
    else:
        run.log.info(f"active check passed ({rep.source}): {rep.message}")
    return True
