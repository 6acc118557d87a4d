"""The Xids the hooks attribute to a running job on this node, judged as the health check judges
them: the hooks' evidence for a job's retry after a mid-run node fault.

After a failed step, the job's batch shell (``job_templates/_run.sh.j2``,
``slurmkit_hook_xids``) asks each node of the job that has no bad-node record yet, in one bounded
``srun --overlap`` step, with the hooks' own interpreter (read from slurmkit's
``HealthCheckProgram`` shim) and config::

    python -I -m slurmkit.hooks.jobxids JOB_ID HOOKS_CONFIG

What it reads, as the hooks do: the prolog's record ``<state_dir>/<node>/job-<id>.json``
(:func:`slurmkit.hooks.nodestate.read_job`: the job's GPUs' bus ids, its start and ``/dev/kmsg``
position), the kernel log the hooks read (``/dev/kmsg``, or the node's ``kmsg`` file in the
hooks config, read whole without moving any hook's cursor: :func:`slurmkit.health.kmsg.read_kmsg`;
a replayed node's snapshot ``xids``), the job's window over it
(:func:`slurmkit.hooks.attribution.window_of`: only lines on the job's GPUs, logged since its
prolog) and the health check's Xid judgement (:func:`slurmkit.health.checks.check_xid` over
``checks.toml [xid]``): only an Xid the health check would fail on (hardware / driver: 48, 62,
64, 74, 79, 94, 95, 119, 120, ..., or an NVLink Xid the driver calls Fatal) is node evidence;
an application Xid (13, 31, 43, 45, 68: often the program's own crash) or a warn-level one is
said, never counted.

It prints one line per answer on stdout, each starting with the node name (``SLURMD_NODENAME``):

- ``<node> xid GPU<nvml index> <bus id>: Xid N (name) xK``: node evidence;
- ``<node> seen GPU<i> <bus id>: Xid 13 (...) xK: application error, ignored``: attributed to
  the job, not evidence;
- ``<node> none``: the job's window holds no Xid;
- ``<node> unknown <why>``: it cannot tell (no prolog record here, the state directory or the
  kernel log unreadable for the job's user, the xid check switched off, a broken config): never
  evidence.

Exit status 0 for all of these (the answer is on stdout), 2 for a wrong command line.
"""

from __future__ import annotations

import os
import sys

USAGE = "usage: python -m slurmkit.hooks.jobxids JOB_ID HOOKS_CONFIG"


def judged(job_id: str, rec, xids, boot_id: str | None, cfg) -> tuple[list[str], list[str]]:
    """``(evidence, seen)`` for job ``job_id``: of ``xids`` (:class:`slurmkit.health.state.Xid`
    lines of this node's kernel log), those attributed to the job by its prolog record ``rec``
    (:class:`slurmkit.hooks.nodestate.JobStart`; ``boot_id``: this boot's id, a record of
    another boot holds nothing), judged by :func:`slurmkit.health.checks.check_xid` with ``cfg``
    (:class:`slurmkit.health.config.HealthConfig`). ``evidence``: one line per (Xid, GPU) the
    health check fails on; ``seen``: the others (application, warn-level). Each line is
    ``GPU3 0000:3b:00.0: Xid 79 (GPU fell off the bus) x2`` (GPU: the NVML index the prolog
    recorded for that bus id; the rest: the health check's words). Pure."""
    from slurmkit.health.checks import check_xid
    from slurmkit.health.result import FAIL
    from slurmkit.health.state import NodeState
    from slurmkit.hooks import attribution

    window = attribution.window_of(str(job_id), rec, boot_id)
    if window is None:
        return [], []
    state = NodeState(node="", source="")
    state.xids = [x for x in xids if window.contains(x)]
    if not state.xids:
        return [], []
    gpus = {g.pci_bus_id: g for g in rec.gpus if g.pci_bus_id}
    evidence, seen = [], []
    for r in check_xid(state, cfg):
        g = gpus.get(r.pci_bus_id)
        gpu = f"GPU{g.nvml_index}" if g is not None and g.nvml_index is not None else "GPU"
        line = f"{gpu} {r.pci_bus_id}: {r.message}"
        (evidence if r.status is FAIL else seen).append(line)
    return evidence, seen


def answer(job_id: str, config_path: str, node: str) -> list[str]:
    """The answer lines (without the node name) for job ``job_id`` on ``node``, from the hooks
    config at ``config_path`` (see the module docstring). Never raises: what cannot be read is
    an ``unknown`` line."""
    from slurmkit.errors import InputError
    from slurmkit.hooks import nodestate
    from slurmkit.hooks.config import load

    try:
        cfg = load(config_path)
    except InputError as exc:
        return [f"unknown the hooks config: {exc}"]
    if cfg.checks.get("xid") is False:
        return [f"unknown the hooks' xid check is switched off ([checks] xid = false in {config_path})"]
    where = os.path.join(cfg.state_dir, node, f"job-{job_id}.json")
    try:
        rec = nodestate.read_job(cfg.state_dir, node, str(job_id))
    except FileNotFoundError:
        return [f"unknown no prolog record {where} (the hooks did not record this job's start here)"]
    except OSError as exc:
        return [f"unknown cannot read the prolog record {where}: {exc.strerror or exc}"]
    except ValueError as exc:
        return [f"unknown {where}: not a prolog record ({exc})"]
    snapshot = cfg.snapshot_for(node)
    if snapshot:
        from slurmkit.health.errors import CaptureError
        from slurmkit.health.source import load_capture

        try:
            xids = load_capture(snapshot, node).xids
        except CaptureError as exc:
            return [f"unknown the node's replayed snapshot: {exc}"]
    else:
        from slurmkit.health.kmsg import read_kmsg

        device = cfg.kmsg_for(node) or "/dev/kmsg"
        try:
            xids = read_kmsg(None, device)  # no cursor: no hook's position moves
        except OSError as exc:
            return [f"unknown cannot read the kernel log {device}: {exc.strerror or exc}"]
    from slurmkit.health.config import load_config

    evidence, seen = judged(str(job_id), rec, xids, nodestate.boot_id(), load_config())
    out = [f"xid {line}" for line in evidence] + [f"seen {line}" for line in seen]
    return out or ["none"]


def main(argv: list[str] | None = None, env=None) -> int:
    """``python -m slurmkit.hooks.jobxids JOB_ID HOOKS_CONFIG``: print :func:`answer`'s lines,
    each prefixed with the node name; 0, or 2 for a wrong command line."""
    argv = sys.argv[1:] if argv is None else argv
    env = os.environ if env is None else env
    if len(argv) != 2 or not argv[0].strip():
        print(USAGE, file=sys.stderr)
        return 2
    from slurmkit.hooks.main import node_name

    node = node_name(env)
    try:
        lines = answer(argv[0], argv[1], node)
    except Exception as exc:  # a bug must read as "cannot tell", never as evidence
        lines = [f"unknown internal error: {type(exc).__name__}: {exc}"]
    for line in lines:
        print(f"{node} {' '.join(line.split())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
