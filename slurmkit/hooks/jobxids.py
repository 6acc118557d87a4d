"""The Xids the hooks attribute to a running job on this node, judged as the health check judges
them: the hooks' evidence for a job's retry after a mid-run node fault.

After a failed step, the job's batch shell (``job_templates/_run.sh.j2``,
``slurmkit_hook_xids``) asks each node of the job that has no bad-node record yet, in one bounded
``srun --overlap`` step, with the hooks' own interpreter (read from slurmkit's
``HealthCheckProgram`` shim) and config::

    python -I -m slurmkit.hooks.jobxids JOB_ID HOOKS_CONFIG

What it reads, as the hooks do, as the job's user (srun runs the step as that user; the
hooks' state directory and ``/dev/kmsg`` under ``kernel.dmesg_restrict=1`` are root's):

- the job's window: what the prolog published for the job's user,
  ``<jobs_dir>/<node>/job-<id>.json`` (root:<job gid> 0640 in root's 0711 directories:
  :func:`slurmkit.hooks.nodestate.publish_job`; the job's GPUs' bus ids, its start and
  ``/dev/kmsg`` position), else (root, a prolog of an older version) the prolog's own record
  (:func:`slurmkit.hooks.nodestate.read_job`);
- the kernel log the hooks read (``/dev/kmsg``, or the node's ``kmsg`` file in the hooks config,
  read whole without moving any hook's cursor: :func:`slurmkit.health.kmsg.read_kmsg`; a
  replayed node's snapshot ``xids``), the job's window over it
  (:func:`slurmkit.hooks.attribution.window_of`: only lines on the job's GPUs, logged since its
  prolog) and the health check's Xid judgement (:func:`slurmkit.health.checks.check_xid` over
  NVIDIA's Xid catalog, :mod:`slurmkit.health.xidcatalog`): only an Xid the health check would
  fail on (a reset, reboot or report: 48, 62, 64, 74, 79, 95, 119, 120, ..., an Xid 94 whose line
  says ``RST: Yes``, or an NVLink Xid the driver calls Fatal) is node evidence; an application
  Xid (13, 31, 43, 45, 68, 69, a contained 94: often the program's own crash) or a warn-level
  one is said, never counted;
- where the job's user may not read the kernel log: the NVML state of the job's GPUs instead,
  which any user may query (:func:`slurmkit.health.runner.read_state`, the hooks' live source
  under their deadlines; a replayed node's snapshot), judged by the health check's own GPU checks
  (:data:`NVML_CHECKS`) over a NodeState of just those GPUs (:func:`nvml_judged`): a GPU fallen
  off the bus (``nvmlDeviceGetHandleByIndex_v2`` -> GPU_IS_LOST), volatile uncorrectable ECC
  errors, retired pages or remapped rows pending or failed.

It prints one line per answer on stdout, each starting with the node name (``SLURMD_NODENAME``):

- ``<node> xid GPU<nvml index> <bus id>: Xid N (name) xK``: node evidence;
- ``<node> gpu GPU<nvml index> <bus id>: gpu_lost: GPU fell off the bus (GPU_IS_LOST)``: node
  evidence from NVML (the kernel log not readable to the job's user);
- ``<node> seen GPU<i> <bus id>: Xid 13 (...) xK: application error, ignored``: attributed to
  the job, not evidence (from NVML: a warn-level result, said the same way);
- ``<node> none``: the job's window holds no Xid (or, judged by NVML, the job's GPUs fail no check);
- ``<node> unknown <why>``: it cannot tell (no prolog record here, nothing published the job's
  user may read, the kernel log unreadable and NVML too, the xid check switched off, a broken
  config): never evidence.

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
    from slurmkit.health.state import NodeState, Xid
    from slurmkit.hooks import attribution

    window = attribution.window_of(str(job_id), rec, boot_id)
    if window is None:
        return [], []
    # a line naming its GPU only as the driver's GPU<n> (NVML's index): the job's GPU the prolog
    # recorded at that index (copies: the caller's lines are left as they are)
    by_index = {g.nvml_index: g.pci_bus_id for g in rec.gpus if g.nvml_index is not None and g.pci_bus_id}
    xids = [Xid(**{**x.__dict__, "pci_bus_id": by_index[x.gpu_index]})
            if x.pci_bus_id is None and x.gpu_index in by_index else x for x in xids]
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


#: The health check's GPU checks (``checks.toml``) that judge the job's GPUs from NVML when the
#: job's user cannot read the kernel log: a GPU that fell off the bus or fails in a way that
#: kills what runs on it. Node-wide checks (count, clocks, fabric) are not the job's evidence.
NVML_CHECKS = ("gpu_lost", "nvml_error", "reset_required", "gpu_recovery_action", "ecc_volatile_uncorrectable",
               "retired_pages_pending", "row_remap_pending", "row_remap_failure")


def _job_gpu_of(g, rec, listed: set, count: int):
    """The job's GPU (of prolog record ``rec``) behind NVML's GPU ``g``: by PCI bus id; a GPU
    without one (its handle refused: GPU_IS_LOST) by the NVML index the prolog recorded, or,
    where NVML lists only as many GPUs as the job has here (``count``: the job's cgroup lets it
    see only its own), the one job GPU not otherwise ``listed`` (bus ids NVML names). None:
    not the job's, or not told."""
    from slurmkit.pci import normalise_bus_id

    if g.pci_bus_id:
        want = normalise_bus_id(g.pci_bus_id)
        return next((j for j in rec.gpus if j.pci_bus_id and normalise_bus_id(j.pci_bus_id) == want), None)
    unseen = [j for j in rec.gpus if j.pci_bus_id and normalise_bus_id(j.pci_bus_id) not in listed]
    by_index = [j for j in unseen if j.nvml_index == g.index]
    if by_index:
        return by_index[0]
    return unseen[0] if count == len(rec.gpus) and len(unseen) == 1 else None


def nvml_judged(rec, state, cfg) -> tuple[list[str], list[str]]:
    """``(evidence, seen)`` of the job of prolog record ``rec`` from the NVML state ``state``
    (:class:`slurmkit.health.state.NodeState`, the node's GPUs as the job's user reads them):
    the :data:`NVML_CHECKS` (those ``cfg`` enables) over a NodeState of just the job's GPUs
    (:func:`_job_gpu_of`). ``evidence``: the fails, ``seen``: the warnings, each
    ``GPU<nvml index> <bus id>: <check>: <meaning>`` (index and bus id as the prolog recorded
    them). Pure."""
    from slurmkit.health.checks import CHECKS
    from slurmkit.health.result import FAIL, PASS
    from slurmkit.pci import normalise_bus_id
    from slurmkit.records import replace

    listed = {normalise_bus_id(g.pci_bus_id) for g in state.gpus if g.pci_bus_id}
    mine = {}
    for g in state.gpus:
        j = _job_gpu_of(g, rec, listed, len(state.gpus))
        if j is not None:
            mine[g.index] = j
    sub = replace(state, gpus=[g for g in state.gpus if g.index in mine], xids=[], node="", source="")
    evidence, seen = [], []
    for cid in NVML_CHECKS:
        if not cfg.enabled.get(cid, True):
            continue
        for r in CHECKS[cid](sub, cfg):
            j = mine.get(r.gpu_index)
            if r.status is PASS or j is None:
                continue
            line = f"GPU{j.nvml_index if j.nvml_index is not None else ''} {j.pci_bus_id}: {r.check}: {r.meaning()}"
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
    try:
        rec = nodestate.read_job(cfg.state_dir, cfg.jobs_dir, node, str(job_id))
    except FileNotFoundError:
        return [f"unknown no prolog record {nodestate.published_path(cfg.jobs_dir, node, str(job_id))} "
                "(the hooks did not record this job's start here)"]
    except OSError as exc:
        return [f"unknown cannot read the job's prolog record {exc.filename or ''}: {exc.strerror or exc}"]
    except ValueError as exc:
        return [f"unknown {exc}"]
    from slurmkit.health.config import load_config

    hc = load_config()
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
            return _by_nvml(rec, cfg, hc, node, f"cannot read the kernel log {device}: {exc.strerror or exc}")
    evidence, seen = judged(str(job_id), rec, xids, nodestate.boot_id(), hc)
    out = [f"xid {line}" for line in evidence] + [f"seen {line}" for line in seen]
    return out or ["none"]


#: Seconds the NVML read of :func:`_by_nvml` may take in all (the batch shell gives the whole
#: query 30 s): the hooks' own deadline when shorter.
NVML_DEADLINE_S = 15.0


def _by_nvml(rec, cfg, hc, node: str, unread: str) -> list[str]:
    """The answer from the NVML state of the job's GPUs (:func:`nvml_judged`), read live in the
    hooks' worker under their deadlines (or the node's snapshot), when the kernel log could not
    be read (``unread`` says why)."""
    from slurmkit.health.runner import read_state
    from slurmkit.health.source import NvmlTimeout, SourceError
    from slurmkit.health.state import RC_SUCCESS

    total = min(NVML_DEADLINE_S, cfg.deadline_s or NVML_DEADLINE_S)
    try:
        state = read_state(cfg.snapshot_for(node) or "live", total_deadline_s=total,
                           per_call_deadline_s=min(hc.per_call_deadline_s, total), thresholds=hc.thresholds, node=node)
    except NvmlTimeout as exc:
        return [f"unknown {unread}; NVML: {exc}"]
    except SourceError as exc:
        return [f"unknown {unread}; NVML: {exc}"]
    if state.init_rc != RC_SUCCESS:
        return [f"unknown {unread}; NVML: nvmlInit: {state.init_rc}"]
    evidence, seen = nvml_judged(rec, state, hc)
    out = [f"gpu {line}" for line in evidence] + [f"seen {line}" for line in seen]
    return out or [f"none (the job's GPUs by NVML: {unread})"]


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
