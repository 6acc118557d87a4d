"""The Python API: ``slurmkit.submit(...)`` -> :class:`Job`, and batched polling of many jobs.

Example::

    import slurmkit
    job = slurmkit.submit("torchrun", ["python", "train.py"], nodes=2, site="sandbox")
    job.wait()                      # -> "COMPLETED"
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time as _time
import warnings
from dataclasses import dataclass, field

from slurmkit.errors import SlurmkitError, SlurmkitWarning, UsageError
from slurmkit.slurm.commands import SlurmError

from slurmkit.submit import check as _check
from slurmkit.submit import jobrecord as _jobrecord
from slurmkit.submit import outputs as _outputs
from slurmkit.submit import render as _render
from slurmkit.submit import request as _request_mod
from slurmkit.submit import site as _site
from slurmkit.submit import templates as _templates
from slurmkit.submit.backend import TERMINAL, JobInfo, exit_codes, get_backend, provider


def prepare(req: _render.SubmitRequest, backend=None, profile=None, env: dict | None = None) -> _render.Plan:
    """Load the site profile (``req.site``; ``profile``: an already loaded
    ``slurmkit.profile.Profile`` instead), the template, query idle nodes when
    ``prefer_locality`` (through ``backend``, else :func:`get_backend` with ``env``), and
    return the :class:`~slurmkit.submit.render.Plan`. Raises ``ProfileError``, ``SiteError``,
    ``TemplateError`` or ``EscapeError`` (all :class:`~slurmkit.errors.InputError`) for bad
    input (an unreadable ``env_file`` too: it is read here, on the submitting machine; a Slurm
    pattern in the directory of ``output`` / ``error``: ``UsageError``), ``SlurmError`` when
    sinfo fails."""
    # a Slurm pattern in an -o/-e directory is refused here, so --dry-run, --explain and
    # --test-only say so too (the directories themselves are created by submit)
    _outputs.output_dirs({"--output": req.output, "--error": req.error}, req.chdir or os.getcwd())
    _check_shell_syntax(req)
    prof = profile if profile is not None else _site.load(req.site)
    facts = _check.checked_facts(prof, req.partition, source=str(req.site or "sandbox"), gpu_type=req.gpu_type)
    tpl = _templates.get(req.template)
    idle = None
    if req.prefer_locality and req.nodes > 1:
        idle = (backend or get_backend(env)).idle_nodes(facts.partition)
    env_file = None
    if req.env_file:
        try:
            with open(req.env_file, encoding="utf-8") as fh:
                env_file = (req.env_file, fh.read())
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"--env-file {req.env_file}", f"cannot read it: {exc}") from None
    return _render.plan(req, facts, tpl, idle, env_file=env_file)


def _check_shell_syntax(req: _render.SubmitRequest) -> None:
    """``--setup`` / ``--teardown`` commands parsed by ``bash -n`` here, at submit: one bash
    cannot parse would otherwise end the job with a syntax error only when it starts, after its
    wait in the queue. Raises ``UsageError`` naming the option, the command and bash's message.
    Nothing is checked where bash is absent (the job's shell still is)."""
    bash = shutil.which("bash")
    if bash is None:
        return
    for option, cmds in (("--setup", req.setup), ("--teardown", req.teardown)):
        for cmd in cmds:
            proc = subprocess.run([bash, "-n", "-c", str(cmd)], capture_output=True, text=True, timeout=30,
                                  stdin=subprocess.DEVNULL)
            if proc.returncode != 0:
                msg = proc.stderr.strip().splitlines()
                # bash: "bash: -c: line 1: unexpected EOF while looking for matching `)'"
                why = re.sub(r"^.*?-c: line \d+: ", "", msg[0]) if msg else f"exit status {proc.returncode}"
                raise UsageError(f"{option} {str(cmd)!r}", f"bash cannot parse it: {why}")


def plan(template: str, command=(), *, backend=None, env: dict | None = None, profile=None,
         **kw) -> _render.Plan:
    """The :class:`~slurmkit.submit.render.Plan` :func:`submit` would render (same keywords),
    without submitting: every ``#SBATCH`` option and exported variable with its source."""
    return prepare(build_request(template, command, kw), backend, profile, env)


def render_script(template: str, command=(), **kw) -> str:
    """The sbatch script :func:`submit` would send (same keywords), without submitting: what
    ``slurmkit submit --dry-run`` prints. Warns as :func:`submit` does
    (:class:`~slurmkit.errors.SlurmkitWarning`: a checkpoint signal that may come before the
    program's handler)."""
    p = plan(template, command, **kw)
    for text in p.warnings:
        warnings.warn(text, SlurmkitWarning, stacklevel=2)
    return _render.render(p)


def explain(template: str, command=(), **kw) -> str:
    """Where every ``#SBATCH`` option and exported variable of the script :func:`submit` would
    send comes from (same keywords), one per line: what ``slurmkit submit --explain`` prints."""
    return _render.explain(plan(template, command, **kw))


def _command_argv(command) -> tuple[str, ...]:
    """``command`` as argv: a list/tuple of str (or paths, numbers) as is, a str split like a
    shell would (``shlex.split``: quotes kept together, no expansion)."""
    import shlex

    if isinstance(command, str):
        try:
            return tuple(shlex.split(command))
        except ValueError as exc:
            raise UsageError("command", f"cannot split {command!r} like a shell would: {exc}") from None
    if isinstance(command, (list, tuple)):
        for i, word in enumerate(command):
            if not isinstance(word, (str, os.PathLike, int, float)) or isinstance(word, bool):
                raise TypeError(f"slurmkit.submit(): command[{i}] must be a str (or path), not "
                                f"{type(word).__name__} ({word!r})")
        return tuple(os.fspath(w) if isinstance(w, os.PathLike) else str(w) for w in command)
    raise TypeError(f"slurmkit.submit(): command must be a list of arguments or a str, not "
                    f"{type(command).__name__} ({command!r})")


def _dependency(after, dependency):
    """``after`` (a :class:`Job`, a job id, or a list of them) as ``afterok:<id>[:<id>...]``,
    joined to an explicit ``dependency`` with ``,`` (all must hold)."""
    if after is None:
        return dependency
    items = after if isinstance(after, (list, tuple)) else [after]
    ids = []
    for item in items:
        job_id = item.id if isinstance(item, Job) else item
        if isinstance(job_id, int) and not isinstance(job_id, bool):
            job_id = str(job_id)
        if not isinstance(job_id, str) or not job_id.replace("_", "").isdigit():
            raise TypeError(f"slurmkit.submit(): after must be a Job, a job id or a list of them, not {item!r}")
        ids.append(job_id)
    dep = "afterok:" + ":".join(ids)
    return f"{dependency},{dep}" if dependency else dep


def build_request(template, command, kw) -> _render.SubmitRequest:
    """The :class:`~slurmkit.submit.render.SubmitRequest` for ``template``, ``command`` and the
    keywords ``kw`` of :func:`submit` (``after`` folded into ``dependency``, paths made str).
    Raises ``TypeError`` naming a keyword of the wrong type or an unknown one (with the closest
    known keyword, ``difflib``), ``UsageError``
    for a command string that cannot be split."""
    if not isinstance(template, str):
        raise TypeError(f"slurmkit.submit(): template must be a template name (str), not "
                        f"{type(template).__name__} ({template!r})")
    for key in kw:
        if key not in _request_mod.api_fields() and key != "after":
            import difflib

            near = difflib.get_close_matches(key, [*_request_mod.api_fields(), "after"], n=1)
            raise TypeError(f"slurmkit.submit(): unexpected keyword {key!r}"
                            + (f" (did you mean {near[0]!r}?)" if near else ""))
        if key in _request_mod.api_fields():
            _request_mod.check_type(key, kw[key])
    kw = dict(kw)
    kw["dependency"] = _dependency(kw.pop("after", None), kw.get("dependency"))
    sets = kw.pop("sets", None) or {}
    params = kw.pop("params", None) or {}
    for key in ("site", "output", "error", "chdir"):
        if isinstance(kw.get(key), os.PathLike):
            kw[key] = os.fspath(kw[key])
    if isinstance(kw.get("env_file"), os.PathLike):
        kw["env_file"] = os.fspath(kw["env_file"])
    if isinstance(kw.get("job_env"), dict):
        kw["job_env"] = tuple(f"{k}={v}" for k, v in kw["job_env"].items())
    for key in ("sbatch_args", "job_env", "srun_opts", "setup", "teardown"):
        items = kw.pop(key, None) or ()
        kw[key] = tuple(str(a) for a in ((items,) if isinstance(items, str) else items))
    return _render.SubmitRequest(template=template, command=_command_argv(command),
                                 sets={str(k): str(v) for k, v in dict(sets).items()}, params=dict(params), **kw)


@dataclass
class Job:
    """A submitted job: ``id`` (str, as sbatch printed it) and the backend that submitted it.
    ``remote``: a host of the SSH config (or a ``slurmkit.remote.Remote``) whose login node
    Slurm's commands run on, when no backend is given; ``ssh_config``: the SSH config file
    naming that host (None: ssh's default ``~/.ssh/config``, as the CLI's ``--ssh-config``)."""

    id: str
    backend: object = field(repr=False, default=None)
    remote: object = field(repr=False, default=None)
    ssh_config: str | None = field(repr=False, default=None)

    def __post_init__(self):
        if self.backend is None and self.remote is not None:
            self.backend = provider("remote").open_backend(self.remote, self.ssh_config)
        if self.backend is None:
            self.backend = get_backend()

    def info(self) -> JobInfo | None:
        """The job's :class:`~slurmkit.submit.backend.JobInfo` (None when Slurm does not know it)."""
        return self.backend.states([self.id]).get(self.id)

    @property
    def exit_code(self) -> str | None:
        """Slurm's ``ExitCode`` of the job (``"status:signal"``, e.g. ``"0:0"``, ``"7:0"``; sacct
        ``ExitCode`` of the allocation); None while sacct does not know it yet. Raises
        ``SlurmError`` when sacct fails."""
        return exit_codes(self.backend, [self.id]).get(self.id)

    def state(self) -> str:
        """Base state name (``PENDING``, ``RUNNING``, ``COMPLETED``...; ``UNKNOWN`` if not found)."""
        info = self.info()
        return info.state if info else "UNKNOWN"

    def wait(self, timeout: float | None = None, poll_s: float = 2.0, until=TERMINAL, callback=None) -> str:
        """Poll every ``poll_s`` seconds until the state is in ``until`` (default: terminal);
        return it. ``callback(info)``: called with the job's
        :class:`~slurmkit.submit.backend.JobInfo` (None while Slurm does not know it) at the
        first poll and whenever its state, pending reason or expected start changes. Raises
        ``TimeoutError`` after ``timeout`` seconds and :class:`JobNotFound` when neither squeue
        nor sacct knows the job."""
        cb = None if callback is None else (lambda job_id, info: callback(info))
        return wait_all([self], timeout=timeout, poll_s=poll_s, until=until, callback=cb)[self.id]

    def record(self) -> _jobrecord.JobRecord | None:
        """What ``submit`` recorded about the job (:mod:`slurmkit.submit.jobrecord`: its output
        and error patterns, working directory, rank-log folder); None for a job submitted
        elsewhere (another machine, ``--remote``, before records were kept)."""
        return _jobrecord.read(self.id, self.backend)

    def paths(self) -> tuple[str | None, str | None]:
        """``(stdout path, stderr path)`` of the job's batch step (an array task ``A_T``: its
        own files), absolute: from the job's record first (patterns expanded for the task;
        ``%j`` of an array task: sacct ``JobIDRaw``), else ``scontrol show job``'s ``StdOut`` /
        ``StdErr`` while slurmctld knows the job; None for what neither knows."""
        rec = self.record()
        task = int(self.id.split("_")[1]) if "_" in self.id else None
        if rec is not None:
            raw = _raw_id(self.backend, self.id) if task is not None else None
            out, err = rec.output_path(task, raw), rec.error_path(task, raw)
            if out is not None:
                return out, err
        return _scontrol_paths(self.backend, self.id)

    def stdout(self) -> str | None:
        """The job's batch output so far (text, undecodable bytes replaced; the file on this
        machine, :meth:`paths`); None when the file is unknown or does not exist (yet)."""
        return _read_text(self.paths()[0])

    def stderr(self) -> str | None:
        """As :meth:`stdout` for stderr (the ``--error`` file, else the output file, where Slurm
        writes stderr without one)."""
        return _read_text(self.paths()[1])

    def cancel(self, signal: str | None = None, full: bool = False) -> None:
        """``scancel`` the job; with ``signal`` (a name such as ``USR1`` or a number), send it
        that signal instead (``scancel --signal``: to the job's steps; ``full``: to its batch
        shell too). Raises ``SlurmError`` when scancel fails."""
        self.backend.cancel(self.id, signal, full=full)


def submit(template: str, command=(), *, backend=None, env: dict | None = None, profile=None,
           remote=None, **kw):
    """Render ``template`` for the site and submit it; return a :class:`Job`.

    ``command``: the program and its arguments, a list (``["python", "train.py"]``) or a str
    split like a shell would (``"python train.py --lr 0.1"``). Keywords are
    :class:`~slurmkit.submit.render.SubmitRequest`'s fields (``site``, ``partition``, ``nodes``,
    ``gpus_per_node``, ``time``, ``name``, ``sets`` (text values, as ``--set``), ``params``
    (typed values), ``comment``, ``output``, ``error``, ``chdir``, ``nodelist``,
    ``prefer_locality``, ``switches``, ``switch_wait``, ``nccl_debug``, ``checkpoint_signal``,
    ``signal_s``, ``max_restarts``, ``job_env`` (``["X=/a:$X"]`` or a dict), ``env_file``,
    ``srun_opts``, ``setup``, ``teardown``, ``account``, ``qos``, ``mem``, ``mem_per_gpu``, ``exclusive``,
    ``constraint``, ``exclude``, ``reservation``, ``dependency``, ``mail_type``, ``mail_user``,
    ``sbatch_args``) plus ``after``: a :class:`Job` (or job id, or a list) this job starts after
    once it completed (``--dependency=afterok:<id>``). A keyword of the wrong type raises
    ``TypeError`` naming it. ``env``: extra environment for the Slurm commands (e.g.
    ``{"SLURM_CONF": ...}``); ``profile``: a loaded ``slurmkit.profile.Profile`` used instead of
    loading ``site``. With ``test_only=True`` nothing is queued; Slurm's start estimate (str,
    what ``sbatch --test-only`` printed) is returned. Raises what :func:`prepare` raises, and
    ``SlurmError`` when sbatch fails.
    The directories of ``output`` / ``error`` are created when missing (relative to ``chdir``,
    else the current directory); one with a Slurm pattern raises ``UsageError``. So is a missing
    ``chdir`` (a file in the way: ``UsageError``). The job's record
    (:mod:`slurmkit.submit.jobrecord`: output and error patterns, working directory, rank-log
    folder) is written once sbatch queued it; one that cannot be written is a warning.
    ``remote``: submit on that host's login node through ssh (the ``remote`` backend provider,
    :func:`slurmkit.submit.backend.provider`: ``slurmkit.remote.submit``; extra keywords
    ``ssh_config``, ``sync_dir``, ``remote_dir``, ``sync``, ``excludes``, ``timeout``).
    """
    if remote is not None:
        return provider("remote").submit_remote(template, command, remote=remote, **kw)
    backend = backend or get_backend(env)
    req = build_request(template, command, kw)
    p = prepare(req, backend, profile)
    for text in p.warnings:
        warnings.warn(text, SlurmkitWarning, stacklevel=2)
    script = _render.render(p)
    if not req.test_only:
        _outputs.make_workdir(req.chdir, os.getcwd())
        _outputs.make_output_dirs({"--output": req.output, "--error": req.error}, req.chdir or os.getcwd())
    try:
        if req.test_only:
            return backend.submit(script, test_only=True)
        job = Job(backend.submit(script), backend)
    except SlurmError as exc:
        raise _refused(exc, p) from None
    record = _jobrecord.from_plan(job.id, p.options, p.params, req.template, os.getcwd())
    try:
        _jobrecord.write(record, backend)
    except OSError as exc:
        warnings.warn(f"job {job.id} is queued, but its record could not be written ({exc}): `slurmkit logs` "
                      "finds its output only while Slurm knows the job", SlurmkitWarning, stacklevel=2)
    return job


#: the options whose numbers a refusal of sbatch names, with where each came from
_REQUEST = ("partition", "nodes", "ntasks-per-node", "gpus-per-node", "gres", "cpus-per-gpu", "cpus-per-task", "mem",
            "mem-per-gpu", "constraint", "nodelist", "exclude")


def _refused(exc: SlurmError, p: _render.Plan) -> SlurmError:
    """``exc`` (sbatch ran and refused the job: "Requested node configuration is not
    available", a limit) with the resource options of the plan and their sources appended, so
    the message says which profile or CLI number asked for what; ``exc`` itself when sbatch did
    not run (missing, timed out)."""
    if exc.returncode is None or exc.timed_out or exc.missing:
        return exc
    asked = "; ".join(f"--{o.name}={o.value} ({o.source})" for o in p.options if o.name in _REQUEST)
    return SlurmError(f"{exc}. The job asked for: {asked}", exc.argv, returncode=exc.returncode, stderr=exc.stderr)


def _read_text(path: str | None) -> str | None:
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def _scontrol_paths(backend, job_id: str) -> tuple[str | None, str | None]:
    """``StdOut=`` / ``StdErr=`` of ``scontrol show job`` (multi-line form: a value runs to the
    end of its line, spaces included); Nones when slurmctld does not know the job."""
    res = backend.run(["scontrol", "show", "job", str(job_id)], check=False)
    found = {}
    if res.returncode == 0:
        for line in res.stdout.splitlines():
            key, eq, value = line.strip().partition("=")
            if eq and key in ("StdOut", "StdErr") and key not in found:
                found[key] = line.split("=", 1)[1].rstrip(" ") or None
    return found.get("StdOut"), found.get("StdErr")


def _raw_id(backend, job_id: str) -> str | None:
    """An array task's own job id (sacct ``JobIDRaw`` of ``A_T``; slurmctld gives it when the
    task starts); None when sacct does not know it."""
    res = backend.run(["sacct", "-X", "-n", "-P", "-j", job_id, "-o", "JobID,JobIDRaw"], check=False)
    for line in res.stdout.splitlines():
        jid, _, raw = line.partition("|")
        if jid == job_id and raw.strip().isdigit():
            return raw.strip()
    return None


class JobNotFound(SlurmkitError, LookupError):
    """Neither squeue nor sacct knows the job (a wrong id, or accounting purged it)."""


#: polls in a row a job may be unknown before :func:`wait_all` gives up on it (sacct can lag
#: a moment behind squeue for a job that just ended)
_UNKNOWN_POLLS = 3


def poll(jobs) -> dict[str, JobInfo]:
    """States of many jobs in one backend call per backend (one squeue, plus one sacct for jobs
    squeue has forgotten): job id -> :class:`~slurmkit.submit.backend.JobInfo`."""
    by_backend: dict[int, tuple[object, list[str]]] = {}
    for job in jobs:
        by_backend.setdefault(id(job.backend), (job.backend, []))[1].append(job.id)
    out = {}
    for backend, ids in by_backend.values():
        out.update(backend.states(ids))
    return out


def wait_all(jobs, timeout: float | None = None, poll_s: float = 2.0, until=TERMINAL,
             callback=None) -> dict[str, str]:
    """Wait until every job's state is in ``until`` (any container of state names); job id ->
    final state. One batched :func:`poll` per ``poll_s`` seconds. ``callback(job_id, info)``:
    called at the first poll and whenever a job's state, pending reason or expected start
    changes (``info`` a :class:`~slurmkit.submit.backend.JobInfo`, None while unknown). Raises
    ``TimeoutError`` after ``timeout`` seconds, :class:`JobNotFound` when a job stays unknown
    to squeue and sacct for 3 polls in a row."""
    jobs = list(jobs)
    deadline = None if timeout is None else _time.monotonic() + timeout
    unknown: dict[str, int] = {}
    seen: dict[str, tuple] = {}
    while True:
        infos = poll(jobs)
        if callback is not None:
            for j in jobs:
                info = infos.get(j.id)
                key = (info.state, info.reason, info.start) if info else None
                if j.id not in seen or seen[j.id] != key:
                    seen[j.id] = key
                    callback(j.id, info)
        states = {j.id: (infos[j.id].state if j.id in infos else "UNKNOWN") for j in jobs}
        if all(s in until for s in states.values()):
            return states
        for job_id, state in states.items():
            unknown[job_id] = unknown.get(job_id, 0) + 1 if state == "UNKNOWN" else 0
            if unknown[job_id] >= _UNKNOWN_POLLS and "UNKNOWN" not in until:
                raise JobNotFound(f"job {job_id}: Slurm does not know it (squeue and sacct)")
        if deadline is not None and _time.monotonic() > deadline:
            raise TimeoutError(f"jobs not done after {timeout:g} s: {states}")
        _time.sleep(poll_s)
