"""Deadline runner: read a node's GPU state with NVML in a worker process that is killed when a
call or the whole read overruns.

:func:`read_state` is what the hooks and ``slurmkit health check`` call. For ``"live"`` it starts
the worker (:mod:`slurmkit.health.worker`) in a session of its own, so the whole process group
can be killed: forked from this interpreter (:func:`_fork_worker`: the hook's modules are already
imported, so the worker only adds NVML), or as a new ``python -m slurmkit.health.worker`` where a
fork is not safe (other threads running) or another environment is asked for (``env``: the
dynamic loader reads ``LD_LIBRARY_PATH`` only when a program starts). It follows the worker's
progress lines (one per NVML call) and raises :class:`NvmlTimeout` naming the call in flight when
a call exceeds ``per_call_deadline_s`` or the read exceeds ``total_deadline_s``. The worker is
then SIGKILLed and given :data:`KILL_GRACE_S`; one that still does not exit (stuck in the driver
in uninterruptible sleep) is abandoned, so the caller returns by the deadline plus that grace
whatever the driver does.
A replay spec (a file path) is read in-process: nothing on the host is touched.

Worker protocol (stdout, one line each): ``CALL <nvml function>``, ``SLEEP <seconds>``
(a deliberate pause, exempt from the per-call deadline), and finally ``STATE <json>`` /
``ACTED <json list of [log line, outcome]>`` or ``ERROR <json message>``.
"""

from __future__ import annotations

import json
import os
import sys
import time

from slurmkit.health.source import Action, NvmlTimeout, SnapshotSource, SourceError
from slurmkit.health.state import NodeState
from slurmkit.profile.health import Health  # the deadlines' one default
from slurmkit.records import record

LIVE = "live"
STARTUP = "worker start-up"


@record
class ReadRequest:
    """What one read of the node's GPU state asks for, beside where it reads from and its
    deadlines (the keywords of :func:`read_state`).

    ``before_job`` (the prolog): only the GPUs of ``job_minors`` (device minor numbers; None:
    all) are re-sampled for leftover processes; ``thresholds``: the checks' thresholds the read
    needs (the ECC / retired-page sampling); ``node``: the node's name (a multi-node capture's
    section); ``kmsg_cursor``: the file that keeps the /dev/kmsg position between runs (None:
    XIDs are not read), ``kmsg_device`` where the kernel log is read from (None: ``/dev/kmsg``);
    ``sysfs``: the sysfs root for PCI functions, NUMA nodes and InfiniBand ports (None: ``/sys``
    live, the capture's own values in a replay); ``fabric``: what is read beside NVML
    (:func:`slurmkit.health.fabric.spec_of` of the config's ``expect``; None: nothing);
    ``counters_file``: where the error counters are kept between runs
    (:func:`slurmkit.health.baseline.swap`; None: rises are not judged).
    """

    before_job: bool = False
    thresholds: dict | None = None
    node: str | None = None
    kmsg_cursor: str | os.PathLike | None = None
    sysfs: str | os.PathLike | None = None
    fabric: dict | None = None
    counters_file: str | os.PathLike | None = None
    job_minors: set | None = None
    kmsg_device: str | os.PathLike | None = None

    def worker_request(self, fabric: dict | None) -> dict:
        """The live worker's JSON request (:mod:`slurmkit.health.worker`) for this read, with
        ``fabric`` as :func:`_fabric_with_timeout` made it."""
        return {"read": True, "before_job": bool(self.before_job), "node": self.node,
                "thresholds": dict(self.thresholds or {}),
                "job_minors": None if self.job_minors is None else sorted(self.job_minors),
                "kmsg_cursor": os.fspath(self.kmsg_cursor) if self.kmsg_cursor else None,
                "kmsg_device": os.fspath(self.kmsg_device) if self.kmsg_cursor and self.kmsg_device else None,
                "sysfs": os.fspath(self.sysfs) if self.sysfs else None, "fabric": fabric or None}


def read_state(source_spec: str | os.PathLike = LIVE, total_deadline_s: float = Health.deadline_s,
               per_call_deadline_s: float = Health.per_call_deadline_s, *, env: dict | None = None,
               **request) -> NodeState:
    """Read the node's GPU state from ``source_spec`` (``"live"`` or a capture path); the other
    keywords are a :class:`ReadRequest`'s fields (what the read asks for; an unknown one raises
    TypeError). ``env``: the live worker's environment (a new interpreter; None: this one's).

    Live (:func:`_read_live`): NVML runs in a worker process; raises :class:`NvmlTimeout` at the
    deadlines (the worker is killed, so the caller returns in time) and :class:`SourceError` for
    slurmkit's own trouble (worker crashed, bad output). NVML init failures and per-value return
    codes are *not* exceptions: they are recorded in the state for the checks. A replay
    (:func:`_read_replay`) keeps what its capture recorded beside NVML unless ``sysfs`` is
    given, then the fabric and the GPUs' PCIe AER counters are read from that root. What is read
    beside NVML gets :func:`slurmkit.health.fabric.read_timeout_s` of ``per_call_deadline_s``
    in all (``fabric["timeout_s"]`` when the caller sets it). Either way a kernel-log line that
    names its GPU only as the driver's ``GPU<n>`` gets that NVML GPU's bus id
    (:func:`slurmkit.health.kmsg.name_gpus`), and the error counters are then swapped with
    ``counters_file``'s (:func:`_with_baseline`).
    """
    req = ReadRequest(**request)
    fabric = _fabric_with_timeout(req.fabric, min(per_call_deadline_s, total_deadline_s))
    if str(source_spec) != LIVE:
        state = _read_replay(source_spec, req, fabric)
    else:
        state = _read_live(req, fabric, total_deadline_s, per_call_deadline_s, env)
    if state.xids:
        from slurmkit.health.kmsg import name_gpus

        name_gpus(state.xids, state.gpus)
    return _with_baseline(state, req.counters_file)


def _fabric_with_timeout(fabric: dict | None, deadline_s: float) -> dict | None:
    """``fabric`` with its reads' time budget (``timeout_s``, s) unless the caller set one."""
    if not fabric:
        return fabric
    from slurmkit.health.fabric import read_timeout_s

    return {"timeout_s": read_timeout_s(deadline_s), **fabric}


def _read_replay(source_spec, req: ReadRequest, fabric: dict | None) -> NodeState:
    """A capture read in this process; with ``req.sysfs`` the AER counters and the fabric re-read there."""
    state = SnapshotSource(source_spec, node=req.node).read(before_job=req.before_job, thresholds=req.thresholds,
                                                            job_minors=req.job_minors)
    if req.sysfs is not None:
        from slurmkit.health.pcie import reread_aer

        reread_aer(state, req.sysfs)
        if fabric:
            from slurmkit.health.fabric import read_node_fabric

            read_node_fabric(state, req.sysfs, fabric)
    return state


def _read_live(req: ReadRequest, fabric: dict | None, total_deadline_s: float, per_call_deadline_s: float,
               env: dict | None) -> NodeState:
    """NVML (and ``fabric``) read by a worker process under the deadlines; its STATE reply parsed."""
    kind, payload = _run_worker(req.worker_request(fabric), total_deadline_s, per_call_deadline_s, env)
    if kind != "STATE":
        raise SourceError(f"NVML worker: unexpected reply {kind}")
    try:
        return NodeState.from_json(payload, source=LIVE, replay=False)
    except (KeyError, TypeError, ValueError) as exc:
        raise SourceError(f"NVML worker returned a bad state: {exc}") from None


def _with_baseline(state: NodeState, counters_file) -> NodeState:
    """``state`` after :func:`slurmkit.health.baseline.swap` with ``counters_file`` (None: as is);
    the swap's own trouble is appended to ``state.errors``."""
    if counters_file is not None:
        from slurmkit.health.baseline import swap

        trouble = swap(counters_file, state)
        if trouble:
            state.errors.append(trouble)
    return state


def apply_actions(actions: list[Action], source_spec: str | os.PathLike = LIVE, total_deadline_s: float = Health.deadline_s,
                  per_call_deadline_s: float = Health.per_call_deadline_s, env: dict | None = None
                  ) -> list[tuple[str, str]]:
    """Carry out ``actions`` through the source (live: in a worker under the deadlines; replay:
    logged as "would ..."), each whatever became of the ones before. Returns ``[(log line,
    outcome)]``, one per action, in order; outcome as :meth:`GpuSource.apply
    <slurmkit.health.source.GpuSource.apply>` gives it (``SUCCESS``, ``REPLAY`` or the NVML return
    code that refused it). Raises :class:`NvmlTimeout` at the deadlines and
    :class:`SourceError` for slurmkit's own trouble (the worker crashed)."""
    if str(source_spec) != LIVE:
        src = SnapshotSource(source_spec)
        return [src.apply(a) for a in actions]
    spec = {"read": False, "actions": [dict(a.__dict__) for a in actions]}
    kind, acted = _run_worker(spec, total_deadline_s, per_call_deadline_s, env)
    if kind != "ACTED" or len(acted) != len(actions):
        raise SourceError(f"NVML worker: unexpected reply {kind} ({len(acted)} results for {len(actions)} actions)")
    return [(str(line), str(rc)) for line, rc in acted]


def run_actions(actions: list[Action], source_spec: str | os.PathLike = LIVE, total_deadline_s: float = Health.deadline_s,
                per_call_deadline_s: float = Health.per_call_deadline_s, env: dict | None = None) -> list[str]:
    """:func:`apply_actions`, one log line per action; raises :class:`SourceError` naming the
    actions NVML refused (after every action was tried)."""
    out = apply_actions(actions, source_spec, total_deadline_s, per_call_deadline_s, env)
    failed = [line for line, rc in out if rc not in ("SUCCESS", "REPLAY")]
    if failed:
        raise SourceError("; ".join(failed))
    return [line for line, _ in out]


#: Seconds to wait for a SIGKILLed worker to exit before abandoning it (a worker stuck in the
#: driver in uninterruptible sleep does not die until the driver lets go, maybe never).
KILL_GRACE_S = 0.5
#: The worker's command line when it runs as a new interpreter (its request, JSON, follows);
#: isolated (``-I``: no current directory on its path) when this interpreter is, as the hooks' is.
#: Set to another command (tests: a stand-in worker), it is always started, never forked.
WORKER_ARGV = (sys.executable, *(("-I",) if sys.flags.isolated else ()), "-m", "slurmkit.health.worker")
_DEFAULT_WORKER_ARGV = WORKER_ARGV


class _Worker:
    """A started worker: ``pid`` (also its process group), ``out`` / ``err`` (read ends of its
    fd 1 / fd 2), :meth:`wait` (bounded), ``returncode`` (None while it runs)."""

    def __init__(self, pid: int, out: int, err: int, popen=None):
        self.pid, self.out, self.err, self._popen = pid, out, err, popen
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """Its exit status (negative: the signal that ended it; an abandoned worker reads as
        SIGKILLed), or None while it runs."""
        if self.returncode is None:
            if self._popen is not None:
                self.returncode = self._popen.poll()
            else:
                try:
                    pid, status = os.waitpid(self.pid, os.WNOHANG)
                except ChildProcessError:
                    pid, status = self.pid, 0
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout_s: float) -> bool:
        """Wait at most ``timeout_s`` for the worker to exit; True when it has."""
        end = time.monotonic() + timeout_s
        pause = 0.001
        while self.poll() is None:
            left = end - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(pause, left))
            pause = min(pause * 2, 0.02)
        return True

    def abandon(self) -> None:
        """Never wait for it again (it did not exit when killed): it reads as SIGKILLed from now
        on, and is never reaped (``Popen.__del__`` does not wait on it either)."""
        import signal

        self.returncode = -signal.SIGKILL
        if self._popen is not None:
            self._popen.returncode = self.returncode

    def close(self) -> None:
        if self._popen is not None:
            self._popen.stdout.close()
            self._popen.stderr.close()
            return
        for fd in (self.out, self.err):
            try:
                os.close(fd)
            except OSError:
                pass


def _can_fork(env: dict | None) -> bool:
    """A fork of this interpreter may serve the request: the same environment is wanted, no
    other thread runs (a thread holding a lock at the fork would leave it held in the child),
    and the worker command was not replaced (tests put a stand-in worker there)."""
    if env is not None or WORKER_ARGV != _DEFAULT_WORKER_ARGV or not hasattr(os, "fork"):
        return False
    threading = sys.modules.get("threading")
    return threading is None or threading.active_count() == 1


def _fork_worker(spec: dict) -> _Worker:
    """Fork the worker: the child starts a session of its own, puts its stdin on /dev/null,
    fd 1 / fd 2 on pipes to us, closes every other descriptor, restores the default signal
    dispositions, serves ``spec`` (:func:`slurmkit.health.worker.serve`) and leaves with
    ``os._exit`` (never returning into the hook's code, never running its exit handlers)."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    for stream in (sys.stdout, sys.stderr):  # nothing of ours buffered goes out twice
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
    pid = os.fork()
    if pid == 0:  # the worker
        code = 70
        try:
            os.setsid()
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            try:
                fds = [int(name) for name in os.listdir("/proc/self/fd")]
            except OSError:
                fds = range(3, 1024)
            for fd in fds:
                if fd > 2:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
            import signal

            signal.signal(signal.SIGINT, signal.default_int_handler)
            for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGALRM, signal.SIGUSR1, signal.SIGUSR2):
                signal.signal(sig, signal.SIG_DFL)
            from slurmkit.health.worker import serve

            serve(spec)
            code = 0
        except BaseException:
            try:
                os.write(2, b"NVML worker (forked) failed before its reply\n")
            except BaseException:
                pass
        finally:
            try:
                sys.stderr.flush()  # a warning or traceback on its way to the runner
            finally:
                os._exit(code)
    os.close(out_w)
    os.close(err_w)
    return _Worker(pid, out_r, err_r)


def _exec_worker(spec: dict, env: dict | None) -> _Worker:
    """Start ``WORKER_ARGV SPEC_JSON`` as a new process in a session of its own."""
    import subprocess

    proc = subprocess.Popen([*WORKER_ARGV, json.dumps(spec)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            env=env, start_new_session=True)
    return _Worker(proc.pid, proc.stdout.fileno(), proc.stderr.fileno(), popen=proc)


def _kill(worker: _Worker) -> bool:
    """SIGKILL the worker's process group (and the worker itself, should its ``setsid`` not have
    happened yet) and wait at most :data:`KILL_GRACE_S` for it.

    Returns True when it exited; False when it did not (uninterruptible sleep in the driver, or
    not ours to kill): it is abandoned, never waited on without bound."""
    import signal

    if worker.poll() is not None:  # already exited (and reaped: its pid may be reused now)
        return True
    for kill in (os.killpg, os.kill):
        try:
            kill(worker.pid, signal.SIGKILL)
        except OSError:  # gone already, or not ours (EPERM): the bounded wait below decides
            pass
    if worker.wait(KILL_GRACE_S):
        return True
    worker.abandon()
    return False


def _stderr_tail(worker: _Worker) -> str:
    """The last line the worker wrote to fd 2 so far (never blocks: an abandoned worker, or
    something it started, may hold the pipe open)."""
    chunks = []
    try:
        os.set_blocking(worker.err, False)
        while True:
            chunk = os.read(worker.err, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    except OSError:  # EAGAIN: nothing more for now
        pass
    lines = b"".join(chunks).decode(errors="replace").strip().splitlines()  # the worker's stderr: shown in messages only
    return lines[-1] if lines else "no output"


def _run_worker(spec: dict, total_s: float, per_call_s: float, env: dict | None):
    import select

    t0 = time.monotonic()
    worker = _fork_worker(spec) if _can_fork(env) else _exec_worker(spec, env)
    poller = select.poll()
    poller.register(worker.out, select.POLLIN)
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
                died = _kill(worker)
                if call == STARTUP:
                    raise SourceError(f"NVML worker did not start within {total_s:g} s")
                raise NvmlTimeout(call, time.monotonic() - t0,
                                  total_s if left_total <= left_call else per_call_s,
                                  abandoned_pid=None if died else worker.pid)
            if not poller.poll(max(1, int(wait * 1000 + 0.999))):
                continue
            chunk = os.read(worker.out, 65536)
            if not chunk:
                # stdout closed: it is exiting; bounded all the same
                if not worker.wait(max(KILL_GRACE_S, total_s - (time.monotonic() - t0))):
                    _kill(worker)
                raise SourceError(f"NVML worker exited with {worker.returncode} during {call}: "
                                  + _stderr_tail(worker))
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                tag, _, rest = line.decode(errors="replace").partition(" ")  # the worker's lines: a tag and ASCII JSON
                if tag == "CALL":
                    call, call_t0, in_sleep = rest, time.monotonic(), False
                elif tag == "SLEEP":
                    in_sleep = True
                elif tag in ("STATE", "ACTED"):
                    result = (tag, json.loads(rest))
                elif tag == "ERROR":
                    _kill(worker)
                    raise SourceError(json.loads(rest))
    finally:
        if worker.poll() is None:
            # result received: let the worker shut NVML down, but never wait past the deadline
            if not worker.wait(max(0.05, total_s - (time.monotonic() - t0))):
                _kill(worker)
        worker.close()
    return result
