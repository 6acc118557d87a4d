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
=========================  ==========================================================
"""

from __future__ import annotations


def resume_gate(run) -> bool:
    """True when ``run``'s node may be resumed (see the module docstring). ``run`` is a
    :class:`slurmkit.hooks.flows.Run` after :meth:`~slurmkit.hooks.flows.Run.setup`; a fail sets
    ``run.drain_reason`` and drains through :meth:`~slurmkit.hooks.flows.Run.apply_verdict`."""
    from slurmkit.health.active import ERROR, SKIP, dcgm_diag

    health = run.health
    if not health.active_check:
        run.log.info("active check off ([health] active_check = false): resuming on clean runs alone")
        return True
    rep = dcgm_diag(health.dcgm_diag_level, health.active_timeout_s, dcgmi=run.cfg.dcgmi,
                    capture=run.cfg.dcgm_capture_for(run.node))
    if rep.status == SKIP:
        run.log.info(rep.message)
        return True
    if rep.status == ERROR:
        run.own_error(f"active check: {rep.message}; {run.node} stays drained until it passes")
        return False
    if rep.status == "fail":
        run.log.error(f"active check failed ({rep.source}): {rep.message}")
        run.drain_reason = rep.reason()
        run.apply_verdict()
        return False
    if rep.status == "warn":
        run.log.warning(f"active check warned ({rep.source}): {rep.message}")
    else:
        run.log.info(f"active check passed ({rep.source}): {rep.message}")
    return True
