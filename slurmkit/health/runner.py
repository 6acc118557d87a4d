"""Deadline runner: read a node's GPU state with NVML in a worker process that is killed when a
call or the whole read overruns.

:func:`read_state` is what the hooks and ``slurmkit health check`` call. For ``"live"`` it starts
``python -m slurmkit.health.worker`` (own session, so the whole process group can be killed),
follows its progress lines (one per NVML call) and raises :class:`NvmlTimeout` naming the call
in flight when a call exceeds ``per_call_deadline_s`` or the read exceeds ``total_deadline_s``.
The worker is then SIGKILLed and given :data:`KILL_GRACE_S`; one that still does not exit (stuck
in the driver in uninterruptible sleep) is abandoned, so the caller returns by the deadline plus
that grace whatever the driver does.
A replay spec (a file path) is read in-process: nothing on the host is touched.

Worker protocol (stdout, one line each): ``CALL <nvml function>``, ``SLEEP <seconds>``
(a deliberate pause, exempt from the per-call deadline), and finally ``STATE <json>`` /
``ACTED <json list of log lines>`` or ``ERROR <json message>``.
"""

from __future__ import annotations

import json
import os
import sys
import time

from slurmkit.health.source import Action, NvmlTimeout, SnapshotSource, SourceError
from slurmkit.health.state import NodeState
from slurmkit.profile.health import Health  # the deadlines' one default

LIVE = "live"
STARTUP = "worker start-up"


def source_for(spec: str | os.PathLike, node: str | None = None):
    """``"live"`` -> LiveNvmlSource (in this process: only for the worker itself); a path ->
    SnapshotSource."""
    if str(spec) == LIVE:
        from slurmkit.health.nvml_source import LiveNvmlSource

        return LiveNvmlSource(node=node)
    return SnapshotSource(spec, node=node)


def read_state(source_spec: str | os.PathLike = LIVE, total_deadline_s: float = Health.deadline_s,
               per_call_deadline_s: float = Health.per_call_deadline_s, *, before_job: bool = False,
               thresholds: dict | None = None, node: str | None = None,
               kmsg_cursor: str | os.PathLike | None = None, sysfs: str | os.PathLike | None = None,
               env: dict | None = None, fabric: dict | None = None,
               counters_file: str | os.PathLike | None = None, job_minors: set[int] | None = None) -> NodeState:
    """Read the node's GPU state from ``source_spec`` (``"live"`` or a capture path).

    Live: NVML runs in a worker process; raises :class:`NvmlTimeout` at the deadlines (the worker
    is killed, so the caller returns in time) and :class:`SourceError` for slurmkit's own
    trouble (worker crashed, bad output). NVML init failures and per-value return codes are *not*
    exceptions: they are recorded in the state for the checks. ``kmsg_cursor`` is the file that
    keeps the /dev/kmsg position between runs (None: XIDs are not read); ``sysfs`` the sysfs root
    for PCI functions, NUMA nodes and InfiniBand ports (default ``/sys``). ``job_minors``: before a
    job, only these GPUs (device minor numbers) are re-sampled for leftover processes (None: all).

    ``fabric`` (:func:`slurmkit.health.fabric.spec_of` of the config's ``expect``): what is read
    beside NVML — the InfiniBand / RoCE HCAs' ports, the fabric manager process, the GPUDirect
    module (None: nothing). Live, the worker reads them; a replay keeps what its capture recorded
    unless ``sysfs`` is given, then they are read from that root. ``counters_file``: where the error counters are kept between runs
    (:func:`slurmkit.health.baseline.swap`; None: rises are not judged).
    """
    if str(source_spec) != LIVE:
        state = SnapshotSource(source_spec, node=node).read(before_job=before_job, thresholds=thresholds,
                                                            job_minors=job_minors)
        if fabric and sysfs is not None:
            from slurmkit.health.fabric import read_node_fabric

            read_node_fabric(state, sysfs, fabric)
        return _with_baseline(state, counters_file)
    args = ["--json-thresholds", json.dumps(thresholds or {})]
    if before_job:
        args.append("--before-job")
    if job_minors is not None:
        args += ["--job-minors", ",".join(str(m) for m in sorted(job_minors))]
    if node:
        args += ["--node", node]
    if kmsg_cursor:
        args += ["--kmsg-cursor", str(kmsg_cursor)]
    if sysfs:
        args += ["--sysfs", str(sysfs)]
    if fabric:
        args += ["--fabric", json.dumps(fabric)]
    out = _run_worker(args, total_deadline_s, per_call_deadline_s, env)
    kind, payload = out
    if kind != "STATE":
        raise SourceError(f"NVML worker: unexpected reply {kind}")
    try:
        state = NodeState.from_json(payload, source=LIVE, replay=False)
    except (KeyError, TypeError, ValueError) as exc:
        raise SourceError(f"NVML worker returned a bad state: {exc}") from None
    return _with_baseline(state, counters_file)


def _with_baseline(state: NodeState, counters_file) -> NodeState:
    if counters_file is not None:
        from slurmkit.health.baseline import swap

        trouble = swap(counters_file, state)
        if trouble:
            state.errors.append(trouble)
    return state


def run_actions(actions: list[Action], source_spec: str | os.PathLike = LIVE, total_deadline_s: float = Health.deadline_s,
                per_call_deadline_s: float = Health.per_call_deadline_s, env: dict | None = None) -> list[str]:
    """Carry out ``actions`` through the source (live: in a worker under the deadlines; replay:
    logged as "would ..."). Returns one log line per action."""
    if str(source_spec) != LIVE:
        src = SnapshotSource(source_spec)
        return [src.act(a) for a in actions]
    payload = json.dumps([a.__dict__ for a in actions])
    kind, lines = _run_worker(["--actions", payload, "--no-read"], total_deadline_s, per_call_deadline_s, env)
    if kind != "ACTED":
        raise SourceError(f"NVML worker: unexpected reply {kind}")
    return lines


#: Seconds to wait for a SIGKILLed worker to exit before abandoning it (a worker stuck in the
#: driver in uninterruptible sleep does not die until the driver lets go, maybe never).
KILL_GRACE_S = 0.5
#: The worker's command line (the arguments follow).
WORKER_ARGV = (sys.executable, "-m", "slurmkit.health.worker")


def _kill(proc) -> bool:
    """SIGKILL the worker's process group (``proc``: its ``subprocess.Popen``) and wait at most
    :data:`KILL_GRACE_S` for it.

    Returns True when it exited; False when it did not (uninterruptible sleep in the driver, or
    not ours to kill): it is abandoned, never waited on without bound."""
    import signal
    import subprocess

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:  # gone already, or not ours (EPERM): the bounded wait below decides
        pass
    try:
        proc.wait(timeout=KILL_GRACE_S)
        return True
    except subprocess.TimeoutExpired:
        proc.returncode = -signal.SIGKILL  # abandoned: no later wait() on it (Popen.__del__ neither)
        return False


def _run_worker(args: list[str], total_s: float, per_call_s: float, env: dict | None):
    import selectors  # the live path's own imports: a replay (and the module's import) does without
    import subprocess

    t0 = time.monotonic()
    proc = subprocess.Popen([*WORKER_ARGV, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            env=env, start_new_session=True)
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    buf = b""
    # interpreter start-up is exempt from the per-call deadline, and overrunning the total
    # before the first NVML call is our own trouble (slow node / filesystem), not NVML's
    call, call_t0, in_sleep = STARTUP, t0, True
    result = None
    try:
        while result is None:
            now = time.monotonic()
            left_total = total_s - (now - t0)
            left_call = float("inf") if in_sleep else per_call_s - (now - call_t0)
            wait = min(left_total, left_call)
            if wait <= 0:
                died = _kill(proc)
                if call == STARTUP:
                    raise SourceError(f"NVML worker did not start within {total_s:g} s")
                raise NvmlTimeout(call, time.monotonic() - t0,
                                  total_s if left_total <= left_call else per_call_s,
                                  abandoned_pid=None if died else proc.pid)
            if not sel.select(timeout=wait):
                continue
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                try:  # stdout closed: it is exiting; bounded all the same
                    proc.wait(timeout=max(KILL_GRACE_S, total_s - (time.monotonic() - t0)))
                except subprocess.TimeoutExpired:
                    _kill(proc)
                err = proc.stderr.read().decode(errors="replace").strip().splitlines()
                raise SourceError(f"NVML worker exited with {proc.returncode} during {call}: "
                                  + (err[-1] if err else "no output"))
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                tag, _, rest = line.decode(errors="replace").partition(" ")
                if tag == "CALL":
                    call, call_t0, in_sleep = rest, time.monotonic(), False
                elif tag == "SLEEP":
                    in_sleep = True
                elif tag in ("STATE", "ACTED"):
                    result = (tag, json.loads(rest))
                elif tag == "ERROR":
                    _kill(proc)
                    raise SourceError(json.loads(rest))
    finally:
        sel.close()
        if proc.poll() is None:
            # result received: let the worker shut NVML down, but never wait past the deadline
            try:
                proc.wait(timeout=max(0.05, total_s - (time.monotonic() - t0)))
            except subprocess.TimeoutExpired:
                _kill(proc)
        proc.stdout.close()
        proc.stderr.close()
    return result
