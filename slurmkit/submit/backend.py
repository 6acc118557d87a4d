"""Talking to Slurm for ``submit``: submit a script, read job states and exit codes, cancel,
list idle nodes.

:class:`Backend` is the one interface the submit core talks to Slurm through;
:class:`CliBackend` (the default) implements it with Slurm's command-line tools through
``slurmkit.slurm.commands.run``: ``sbatch --parsable``, ``squeue``, ``sacct``, ``scancel``,
``sinfo``. Other backends implement the same interface: ``slurmkit.remote``'s runs the same
commands on a login node through ssh. The core never imports them: it finds them by name among
the ``slurmkit.backends`` entry points (:func:`provider`), so a backend may live in another
package (docs/submit.md: why the command-line backend is the one slurmkit ships).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from slurmkit.errors import UsageError
from slurmkit.hostlist import expand_nodelist
from slurmkit.slurm import tres
from slurmkit.slurm.commands import Result, SlurmError, run
from slurmkit.submit.placement import parse_sinfo_nodes

#: States after which a job will not run again by itself (squeue/sacct base state names).
TERMINAL = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
                      "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "REVOKED", "SPECIAL_EXIT"})

#: What squeue prints (``slurm_load_jobs error: Invalid job id specified``, exit 1) when
#: slurmctld knows none of the ``-j`` ids: finished jobs past ``MinJobAge``. The one squeue
#: failure that means "ask sacct"; any other is an error.
SQUEUE_FORGOT = "Invalid job id specified"


@dataclass(frozen=True)
class JobInfo:
    """A job's state as Slurm reports it: ``job_id`` (str, ``123`` or ``123_4``), ``state``
    (base state, e.g. ``RUNNING``; ``CANCELLED by 0`` -> ``CANCELLED``), ``nodes`` (list of
    node names, expanded), ``gpus`` (GPUs allocated or requested in total), ``source``
    (``squeue`` or ``sacct``), ``reason`` and ``start`` (a pending job's, from squeue)."""

    job_id: str
    state: str
    nodes: tuple[str, ...]
    gpus: int
    source: str
    #: why a pending job waits (squeue %r: ``Resources``, ``Priority``, ``Dependency``,
    #: ``ReqNodeNotAvail, ...``; "" when running, done or not from squeue)
    reason: str = ""
    #: when Slurm expects a pending job to start (squeue %S, ISO local time; "" when unknown)
    start: str = ""

    def as_dict(self) -> dict:
        """``{"job_id", "state", "nodes", "gpus"}`` for ``--json``."""
        return {"job_id": self.job_id, "state": self.state, "nodes": list(self.nodes), "gpus": self.gpus}


def _rows(text: str, tool: str, width: int, *, more: int = 0):
    """The non-blank lines of ``tool``'s ``|``-separated output, split into ``width`` fields
    (or ``width + more``); raises SlurmError naming the line otherwise."""
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split("|")
        if len(parts) != width and len(parts) != width + more:
            raise SlurmError(f"{tool}: unexpected line {line!r} (want {width} '|'-separated fields)")
        yield parts


def parse_squeue(text: str) -> dict[str, JobInfo]:
    """``squeue -h -t all -o '%i|%T|%N|%D|%b|%r|%S'`` output (the last two optional) -> job id
    -> :class:`JobInfo` (GPUs = per-node count from %b x node count %D; for a pending job its
    reason %r and expected start %S, ``N/A`` / ``None`` read as unknown)."""
    out = {}
    for parts in _rows(text, "squeue", 5, more=2):
        job_id, state, nodelist, count, request, *rest = (p.strip() for p in parts)
        try:
            # %b: the job's tres_per_node, gres:gpu:2 (22.05) or gres/gpu:2 (24.11 and later)
            per_node = tres.gpu_count(tres.parse_request(request)) or 0
        except tres.TresError as exc:
            raise SlurmError(f"squeue: unexpected GRES {request!r} on line {'|'.join(parts)!r}: {exc.message}") from None
        n = int(count) if count.isdigit() else 0
        state = state.split()[0]
        reason, start = rest if rest and state == "PENDING" else ("", "")
        out[job_id] = JobInfo(job_id, state, expand_nodelist(nodelist), per_node * max(n, 1), "squeue",
                              "" if reason == "None" else reason, "" if start in ("N/A", "Unknown") else start)
    return out


def parse_sacct(text: str) -> dict[str, JobInfo]:
    """``sacct -X -n -P -o JobID,State,NodeList,AllocTRES,ReqTRES`` output -> job id ->
    :class:`JobInfo` (GPUs from AllocTRES, else ReqTRES). A requeued job has several rows;
    the last one wins."""
    out = {}
    for parts in _rows(text, "sacct", 5):
        job_id, state, nodelist, alloc, req = parts
        try:
            gpus = tres.gpu_count(alloc) or tres.gpu_count(req) or 0
        except tres.TresError as exc:
            raise SlurmError(f"sacct: unexpected TRES on line {'|'.join(parts)!r}: {exc.message}") from None
        out[job_id] = JobInfo(job_id, state.split()[0], expand_nodelist(nodelist), gpus, "sacct")
    return out


_STATE_ORDER = ("RUNNING", "REQUEUED", "PENDING", "SUSPENDED", "COMPLETING")


def aggregate_arrays(ids, rows: dict[str, JobInfo]) -> dict[str, JobInfo]:
    """For requested ids that are array jobs (rows ``ID_0``, ``ID_[1-3]``... but no ``ID``), one
    :class:`JobInfo` for the whole array: RUNNING/PENDING while any task is, else COMPLETED
    when all completed, else the first other final state; nodes and GPUs summed over tasks."""
    out = {}
    for j in ids:
        if j in rows:
            continue
        tasks = [info for key, info in rows.items() if key.startswith(f"{j}_")]
        if not tasks:
            continue
        states = [t.state for t in tasks]
        live = [s for s in _STATE_ORDER if s in states]
        if live:
            state = live[0]
        elif all(s == "COMPLETED" for s in states):
            state = "COMPLETED"
        else:
            state = next(s for s in states if s != "COMPLETED")
        nodes = tuple(dict.fromkeys(n for t in tasks for n in t.nodes))
        out[j] = JobInfo(j, state, nodes, sum(t.gpus for t in tasks), tasks[0].source)
    return out


class Backend(Protocol):
    """What the submit core needs of Slurm, wherever its commands run (here, or on a login node
    through ssh). ``name``: the backend's short name (``cli``, ``remote``)."""

    name: str

    def run(self, argv, check: bool = True, input: str | None = None) -> Result:
        """Run one Slurm client command (``argv``, never a shell string) where this backend's
        Slurm is; its :class:`~slurmkit.slurm.commands.Result`. Raises
        :class:`~slurmkit.slurm.commands.SlurmError` (or a subclass) when it cannot run, times
        out, or, with ``check``, exits non-zero."""

    def submit(self, script: str, test_only: bool = False) -> str:
        """Submit ``script`` (text); the job id (``test_only``: Slurm's start estimate)."""

    def states(self, job_ids) -> dict[str, JobInfo]:
        """Job id -> :class:`JobInfo`; ids Slurm does not know are absent."""

    def cancel(self, job_id: str, signal: str | None = None, full: bool = False) -> None:
        """Cancel the job (``signal``: send it that signal instead; ``full``: to the batch
        shell too, not only to the job's steps)."""

    def idle_nodes(self, partition: str) -> list[str]:
        """Idle node names of ``partition``."""


class CliBackend:
    """Slurm through its command-line tools. ``env``: extra environment for every command
    (e.g. ``{"SLURM_CONF": ...}``); ``timeout`` in seconds per command."""

    name = "cli"

    def __init__(self, env: dict | None = None, timeout: float = 60.0):
        self.env = dict(env or {})
        self.timeout = timeout

    def run(self, argv, check: bool = True, input: str | None = None) -> Result:
        """One Slurm command here (:func:`slurmkit.slurm.commands.run` with this backend's
        ``env`` and ``timeout``); raises :class:`~slurmkit.slurm.commands.SlurmError`."""
        return run(argv, timeout=self.timeout, env=self.env, check=check, input=input)

    def submit(self, script: str, test_only: bool = False) -> str:
        """Submit ``script`` (text, on stdin) with ``sbatch --parsable``; return the job id.
        With ``test_only``: ``sbatch --test-only``, returning Slurm's estimate line."""
        if test_only:
            res = self.run(["sbatch", "--test-only"], input=script)
            return (res.stderr.strip() or res.stdout.strip()).removeprefix("sbatch: ")
        res = self.run(["sbatch", "--parsable"], input=script)
        job_id = res.stdout.strip().split(";")[0]
        if not job_id.isdigit():
            raise SlurmError(f"sbatch --parsable printed {res.stdout.strip()!r}, not a job id", ["sbatch"])
        return job_id

    def states(self, job_ids) -> dict[str, JobInfo]:
        """Job id -> :class:`JobInfo` for many jobs: one ``squeue`` call, and one ``sacct`` call
        only for jobs squeue no longer knows. Unknown ids are absent from the result. Raises
        :class:`~slurmkit.slurm.commands.SlurmError` (a ``RemoteError`` through ssh) when squeue
        or sacct fails for any other reason than not knowing the jobs: no controller, no
        connection, a command missing; never reads a failure as "no jobs"."""
        ids = [str(j) for j in job_ids]
        if not ids:
            return {}
        res = self.run(["squeue", "-h", "-t", "all", "-j", ",".join(ids), "-o", "%i|%T|%N|%D|%b|%r|%S"], check=False)
        if res.returncode == 0:
            found = parse_squeue(res.stdout)
        elif SQUEUE_FORGOT in res.stderr:
            found = {}   # slurmctld knows none of the ids (any more): sacct may
        else:
            msg = (res.stderr.strip() or res.stdout.strip() or "no output").splitlines()[-1]
            raise SlurmError(f"squeue failed (exit {res.returncode}): {msg}", res.argv, returncode=res.returncode,
                             stderr=res.stderr)
        found.update(aggregate_arrays(ids, found))
        missing = [j for j in ids if j not in found]
        if missing:
            res = self.run(["sacct", "-X", "-n", "-P", "-j", ",".join(missing),
                             "-o", "JobID,State,NodeList,AllocTRES,ReqTRES"])
            acct = parse_sacct(res.stdout)
            acct.update(aggregate_arrays(missing, acct))
            found.update({j: acct[j] for j in missing if j in acct})
        return {j: found[j] for j in ids if j in found}

    def cancel(self, job_id: str, signal: str | None = None, full: bool = False) -> None:
        """``scancel`` the job (``signal``: send that signal instead of cancelling, to the job's
        steps; ``full``: ``scancel --full``, to the batch shell too)."""
        self.run(["scancel", *([f"--signal={signal}"] if signal else []), *(["--full"] if full else []),
                  str(job_id)])

    def idle_nodes(self, partition: str) -> list[str]:
        """Idle node names of ``partition``: ``sinfo -h -N -o '%N|%T'``, keeping only nodes in
        state ``idle`` (never drained, draining, down, reserved or in maintenance)."""
        res = self.run(["sinfo", "-h", "-N", "-p", partition, "-o", "%N|%T"])
        return parse_sinfo_nodes(res.stdout)


def exit_codes(backend: Backend, job_ids) -> dict[str, str]:
    """Job id -> Slurm's ``ExitCode`` (``status:signal``, e.g. ``0:0``, ``1:0``, ``137:0``):
    slurmctld's (``scontrol show job -o``, :func:`parse_scontrol_exit_code`) while it still
    knows a (non-array) job, else sacct's (one ``sacct -X`` call through ``backend``). sacct
    prints a status of 128 or more less 128 (Slurm ``src/sacct/print.c``: a batch shell that
    exited 137 shows ``9:0``), so slurmctld's is preferred. Ids neither knows (yet) are absent.
    Array jobs: sacct's first non-zero task's code, else ``0:0``. Raises
    :class:`~slurmkit.slurm.commands.SlurmError` when sacct fails."""
    ids = [str(j) for j in job_ids]
    if not ids:
        return {}
    res = backend.run(["sacct", "-X", "-n", "-P", "-j", ",".join(ids), "-o", "JobID,ExitCode"])
    rows = [line.split("|") for line in res.stdout.splitlines() if line.count("|") == 1]
    out = {}
    for j in ids:
        codes = [code.strip() for jid, code in rows if jid == j or jid.startswith(f"{j}_")]
        if codes:
            out[j] = next((c for c in codes if c != "0:0"), codes[-1])
        if j.isdigit() and not any(jid.startswith(f"{j}_") for jid, _ in rows):
            ctld = backend.run(["scontrol", "show", "job", "-o", j], check=False)
            code = parse_scontrol_exit_code(ctld.stdout) if ctld.returncode == 0 else None
            if code:
                out[j] = code
    return out


def parse_scontrol_exit_code(text: str) -> str | None:
    """``ExitCode=`` (``status:signal``, the status as the batch shell exited: 137 stays 137)
    of one job's ``scontrol show job -o`` line; None when absent or for several jobs (an array)."""
    found = re.findall(r"(?:^|\s)ExitCode=(\d+:\d+)(?=\s|$)", text)
    return found[0] if len(found) == 1 else None


def get_backend(env: dict | None = None) -> CliBackend:
    """The local backend: :class:`CliBackend` with ``env`` (extra environment for Slurm's
    commands, e.g. ``{"SLURM_CONF": ...}``)."""
    return CliBackend(env)


#: The entry-point group backends are registered under (setup.cfg ``[options.entry_points]``):
#: a name -> a module that provides ``open_backend(target, ssh_config=None, timeout=None)`` (a
#: :class:`Backend` for ``target``) and ``submit_remote(template, command, *, remote, **kw)``
#: (``slurmkit.submit(..., remote=...)``). slurmkit's own: ``remote`` (:mod:`slurmkit.remote.submit`).
BACKENDS = "slurmkit.backends"


def provider(name: str):
    """The backend provider registered as ``name`` in :data:`BACKENDS`. Raises
    :class:`~slurmkit.errors.UsageError` when none is (slurmkit not installed with pip, so its
    entry points are missing)."""
    from importlib.metadata import entry_points

    found = list(entry_points(group=BACKENDS, name=name))
    if not found:
        raise UsageError("backend", f"no {name!r} backend is installed (entry point group {BACKENDS}; "
                         "install slurmkit with pip)")
    return found[0].load()


def describe_exit_code(code: str | None) -> str:
    """Slurm's ``ExitCode`` (sacct/scontrol ``status:signal``) in words: ``"0:0"`` -> ``exit 0``,
    ``"1:0"`` -> ``exit 1``, ``"137:0"`` -> ``exit 137: killed by signal 9, SIGKILL`` (a status
    above 128 is how bash and slurmkit's launchers report a rank killed by signal status-128),
    ``"0:9"`` -> ``killed by signal 9, SIGKILL`` (the batch shell itself was killed); None or
    text of another form is returned as it is (``"-"`` for None). Signal names: Linux numbering
    (Python's :mod:`signal`)."""
    import signal as _signal

    def name(n: int) -> str:
        try:
            return _signal.Signals(n).name
        except ValueError:
            return f"signal {n}"

    if not code:
        return "-"
    status, sep, sig = str(code).partition(":")
    if not sep or not status.isdigit() or not sig.isdigit():
        return str(code)
    st, sg = int(status), int(sig)
    if sg:
        return f"killed by signal {sg}, {name(sg)}" + (f" (exit {st})" if st else "")
    if 128 < st < 128 + 65:
        return f"exit {st}: killed by signal {st - 128}, {name(st - 128)}"
    return f"exit {st}"
