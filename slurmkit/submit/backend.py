"""Talking to Slurm for ``submit``: submit a script, read job states, cancel, list idle nodes.

:class:`CliBackend` (the default, always available) uses Slurm's command-line tools through
``slurmkit.slurm.commands.run``: ``sbatch --parsable``, ``squeue``, ``sacct``, ``scancel``,
``sinfo``. :class:`PyslurmBackend` does the same through pyslurm; :func:`get_backend` picks it
only when pyslurm imports and its version matches the running Slurm (``sbatch --version``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from slurmkit.hostlist import expand_nodelist
from slurmkit.slurm.commands import SlurmError, run

#: States after which a job will not run again by itself (squeue/sacct base state names).
TERMINAL = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
                      "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "REVOKED", "SPECIAL_EXIT"})


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


_GPU_TRES = re.compile(r"gres[/:]gpu(?::[^,=:]+)?[:=](\d+)")


def gpus_from_tres(tres: str) -> int:
    """Total GPUs in a TRES string: ``gres/gpu=8`` or ``gres/gpu:h100=8`` (AllocTRES) or
    ``gres:gpu:h100:4`` (squeue %b, per node). Typed and untyped entries of one job are the
    same GPUs, so the untyped count wins when present."""
    untyped = re.search(r"gres[/:]gpu[:=](\d+)(?:,|$)", tres)
    if untyped:
        return int(untyped.group(1))
    found = _GPU_TRES.findall(tres)
    return sum(int(x) for x in found)


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
        job_id, state, nodelist, count, tres, *rest = (p.strip() for p in parts)
        per_node = gpus_from_tres(tres)
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
        out[job_id] = JobInfo(job_id, state.split()[0], expand_nodelist(nodelist),
                              gpus_from_tres(alloc) or gpus_from_tres(req), "sacct")
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


class CliBackend:
    """Slurm through its command-line tools. ``env``: extra environment for every command
    (e.g. ``{"SLURM_CONF": ...}``); ``timeout`` in seconds per command."""

    name = "cli"

    def __init__(self, env: dict | None = None, timeout: float = 60.0):
        self.env = dict(env or {})
        self.timeout = timeout

    def _run(self, argv, **kw):
        return run(argv, timeout=self.timeout, env=self.env, **kw)

    def submit(self, script: str, test_only: bool = False) -> str:
        """Submit ``script`` (text, on stdin) with ``sbatch --parsable``; return the job id.
        With ``test_only``: ``sbatch --test-only``, returning Slurm's estimate line."""
        if test_only:
            res = self._run(["sbatch", "--test-only"], input=script)
            return (res.stderr.strip() or res.stdout.strip()).removeprefix("sbatch: ")
        res = self._run(["sbatch", "--parsable"], input=script)
        job_id = res.stdout.strip().split(";")[0]
        if not job_id.isdigit():
            raise SlurmError(f"sbatch --parsable printed {res.stdout.strip()!r}, not a job id", ["sbatch"])
        return job_id

    def states(self, job_ids) -> dict[str, JobInfo]:
        """Job id -> :class:`JobInfo` for many jobs: one ``squeue`` call, and one ``sacct`` call
        only for jobs squeue no longer knows. Unknown ids are absent from the result."""
        ids = [str(j) for j in job_ids]
        if not ids:
            return {}
        try:
            res = self._run(["squeue", "-h", "-t", "all", "-j", ",".join(ids), "-o", "%i|%T|%N|%D|%b|%r|%S"], check=False)
            found = parse_squeue(res.stdout) if res.returncode == 0 else {}
        except SlurmError:
            found = {}
        found.update(aggregate_arrays(ids, found))
        missing = [j for j in ids if j not in found]
        if missing:
            res = self._run(["sacct", "-X", "-n", "-P", "-j", ",".join(missing),
                             "-o", "JobID,State,NodeList,AllocTRES,ReqTRES"])
            acct = parse_sacct(res.stdout)
            acct.update(aggregate_arrays(missing, acct))
            found.update({j: acct[j] for j in missing if j in acct})
        return {j: found[j] for j in ids if j in found}

    def cancel(self, job_id: str, signal: str | None = None) -> None:
        """``scancel`` the job (``signal``: send that signal instead of cancelling)."""
        self._run(["scancel", *([f"--signal={signal}"] if signal else []), str(job_id)])

    def idle_nodes(self, partition: str) -> list[str]:
        """Idle node names of ``partition``: ``sinfo -h -N -o '%N|%T'``, keeping only nodes in
        state ``idle`` (never drained, draining, down, reserved or in maintenance)."""
        from slurmkit.submit.placement import parse_sinfo_nodes

        res = self._run(["sinfo", "-h", "-N", "-p", partition, "-o", "%N|%T"])
        return parse_sinfo_nodes(res.stdout)


def slurm_version(env: dict | None = None) -> tuple[int, int] | None:
    """(major, minor) of the running Slurm from ``sbatch --version`` (``slurm 22.05.8`` -> (22, 5))."""
    try:
        res = run(["sbatch", "--version"], timeout=10, env=env)
    except SlurmError:
        return None
    m = re.search(r"(\d+)\.(\d+)", res.stdout)
    return (int(m.group(1)), int(m.group(2))) if m else None


class PyslurmBackend(CliBackend):
    """pyslurm (>= 23.2 API) for submit and state; cancel and sinfo stay on the CLI tools."""

    name = "pyslurm"

    def __init__(self, pyslurm_module, env: dict | None = None, timeout: float = 60.0):
        super().__init__(env, timeout)
        self.pyslurm = pyslurm_module

    def submit(self, script: str, test_only: bool = False) -> str:
        if test_only:
            return super().submit(script, test_only=True)
        desc = self.pyslurm.JobSubmitDescription(script=script)
        return str(desc.submit())

    def states(self, job_ids) -> dict[str, JobInfo]:
        out = {}
        for j in job_ids:
            try:
                job = self.pyslurm.Job.load(int(j))
            except Exception:  # pyslurm raises RPCError for unknown/finished jobs
                continue
            out[str(j)] = JobInfo(str(j), str(job.state), expand_nodelist(job.nodes or ""),
                                  int((job.gres_per_node or {}).get("gpu", 0) or 0) * int(job.num_nodes or 1),
                                  "pyslurm")
        missing = [j for j in map(str, job_ids) if j not in out]
        if missing:
            out.update(super().states(missing))
        return out


def get_backend(env: dict | None = None, prefer: str | None = None):
    """The backend to use: pyslurm when importable and its major.minor equals the running
    Slurm's (or ``prefer="pyslurm"`` forces the check to be made), else :class:`CliBackend`.
    ``prefer="cli"`` always gives the CLI backend."""
    if prefer != "cli":
        try:
            import pyslurm  # noqa: F401
        except ImportError:
            pyslurm = None
        if pyslurm is not None:
            m = re.match(r"(\d+)\.(\d+)", getattr(pyslurm, "__version__", "") or "")
            if m and slurm_version(env) == (int(m.group(1)), int(m.group(2))):
                return PyslurmBackend(pyslurm, env)
    return CliBackend(env)
