"""The per-user job record: what ``submit`` knew about a job when it queued it, kept after
slurmctld forgets the job (``MinJobAge`` after it ends) and sacct never knew (the ``-o`` / ``-e``
file names: sacct keeps only the working directory).

One JSON file per job, ``<records dir>/<cluster key>/<job id>.json``:

- records dir: ``$SLURMKIT_JOBS_DIR``, else ``$XDG_STATE_HOME/slurmkit/jobs``
  (``~/.local/state/slurmkit/jobs``);
- cluster key: 12 hex digits of the SHA-256 of the ``SLURM_CONF`` path the Slurm commands use
  (the backend's environment, else this process's; ``""`` for Slurm's default): job ids count
  per cluster, so two clusters' job 17 are two records.

Written by :func:`slurmkit.submit.api.submit` (the ``output``, ``error``, ``chdir``,
``job-name`` and ``array`` options of its plan, the template's ``log_dir``); read first by
``slurmkit logs``, ``slurmkit status`` and :meth:`slurmkit.submit.api.Job.stdout` /
``stderr``, then Slurm.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import posixpath
import re
import time
from dataclasses import asdict, dataclass

from slurmkit.atomicfile import atomic_write

#: the record's format version (key ``slurmkit_job``)
VERSION = 1

#: ``%[width]X`` of a Slurm file name pattern (sbatch(1), "filename pattern")
_PATTERN = re.compile(r"%(\d*)([%AaJjNnstux])")


def records_dir(env=None) -> str:
    """The records folder: ``$SLURMKIT_JOBS_DIR``, else ``$XDG_STATE_HOME/slurmkit/jobs``, else
    ``~/.local/state/slurmkit/jobs`` (``env``: the environment to read, default ``os.environ``)."""
    env = os.environ if env is None else env
    if env.get("SLURMKIT_JOBS_DIR"):
        return env["SLURMKIT_JOBS_DIR"]
    base = env.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "slurmkit", "jobs")


def cluster_key(backend=None) -> str:
    """12 hex digits naming the cluster the backend's Slurm commands talk to: the SHA-256 of its
    ``SLURM_CONF`` (the backend's ``env``, else this process's environment; empty: Slurm's
    default configuration)."""
    conf = (getattr(backend, "env", None) or {}).get("SLURM_CONF") or os.environ.get("SLURM_CONF") or ""
    return hashlib.sha256(conf.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class JobRecord:
    """One job as submitted. ``job_id``: sbatch's id (an array's job id); ``workdir``: absolute
    working directory (``--chdir``, else the submit directory); ``output`` / ``error``: the
    ``--output`` / ``--error`` patterns as given (None: Slurm's default, ``slurm-%j.out``, for an
    array ``slurm-%A_%a.out``; no error file: stderr goes to the output); ``name``: the job name;
    ``tasks``: an array's task ids (empty: not an array); ``log_dir``: absolute folder of the
    job's rank logs (``<log_dir>/<job id>``; None when the template has none); ``template``;
    ``submitted``: Unix time of the submit."""

    job_id: str
    workdir: str
    output: str | None = None
    error: str | None = None
    name: str | None = None
    tasks: tuple[int, ...] = ()
    log_dir: str | None = None
    template: str | None = None
    submitted: float = 0.0

    def output_path(self, task: int | None = None, raw_id: str | None = None) -> str | None:
        """Absolute path of the batch output of the job, or of array task ``task``
        (:func:`expand` of the pattern; ``raw_id``: the task's own job id, for ``%j``); None when
        the pattern needs what only the running job knows (``%N``, an array task's ``%j``
        without ``raw_id``)."""
        default = "slurm-%A_%a.out" if self.tasks else "slurm-%j.out"
        return self._path(self.output or default, task, raw_id)

    def error_path(self, task: int | None = None, raw_id: str | None = None) -> str | None:
        """As :meth:`output_path` for stderr: the ``--error`` file, else the output file (where
        Slurm writes stderr without ``--error``)."""
        return self._path(self.error, task, raw_id) if self.error else self.output_path(task, raw_id)

    def _path(self, pattern: str, task, raw_id) -> str | None:
        if self.tasks and task is None:
            task = self.tasks[0]
        path = expand(pattern, self.job_id, task, raw_id=raw_id, name=self.name)
        if path is None:
            return None
        return path if posixpath.isabs(path) else posixpath.normpath(posixpath.join(self.workdir, path))


def expand(pattern: str, job_id: str, task: int | None = None, *, raw_id: str | None = None,
           name: str | None = None, user: str | None = None) -> str | None:
    """A Slurm file name pattern (sbatch(1) "filename pattern") expanded for the batch step of
    job ``job_id`` (array task ``task``): ``%%``, ``%A`` (array job id), ``%a`` (task id),
    ``%j`` / ``%J`` (the job's own id: ``raw_id`` for an array task, which Slurm gives it when
    the task starts), ``%s`` (``batch``), ``%n`` / ``%t`` (0), ``%u`` (user, default this
    process's), ``%x`` (job name, default ``sbatch``); a width (``%4a``) zero-pads numbers. A
    backslash turns patterns off, as in Slurm. None when it holds ``%N`` (the first node) or an
    array task's ``%j`` without ``raw_id``."""
    if "\\" in pattern:
        return pattern.replace("\\", "")
    own = raw_id if raw_id is not None else (job_id if task is None else None)
    values = {"A": job_id, "a": None if task is None else str(task), "j": own, "J": own, "s": "batch",
              "n": "0", "t": "0", "u": user or getpass.getuser(), "x": name or "sbatch", "%": "%", "N": None}
    unknown = []

    def one(m):
        width, key = m.group(1), m.group(2)
        value = values[key]
        if value is None:
            unknown.append(key)
            return ""
        if width and value.isdigit():
            value = value.zfill(min(int(width), 10))
        return value

    out = _PATTERN.sub(one, pattern)
    return None if unknown else out


def path(job_id: str, backend=None, env=None) -> str:
    """Where the record of job ``job_id`` lives (see the module's docstring)."""
    return os.path.join(records_dir(env), cluster_key(backend), f"{job_id}.json")


def write(record: JobRecord, backend=None, env=None) -> str:
    """Store ``record`` (atomically; folders made, mode 0600: the paths are the user's); returns
    its path. Raises ``OSError`` when it cannot be written."""
    where = path(record.job_id, backend, env)
    os.makedirs(os.path.dirname(where), mode=0o700, exist_ok=True)
    data = {"slurmkit_job": VERSION, **asdict(record), "tasks": list(record.tasks)}
    atomic_write(where, json.dumps(data, indent=1) + "\n", mode=0o600)
    return where


def read(job_id: str, backend=None, env=None) -> JobRecord | None:
    """The record of job ``job_id`` (an array task ``A_T`` reads its array's, ``A``); None when
    there is none, or it is not one this version wrote (unreadable, another format)."""
    try:
        with open(path(str(job_id).split("_")[0], backend, env), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.pop("slurmkit_job", None) != VERSION:
        return None
    try:
        data["tasks"] = tuple(int(t) for t in data.get("tasks") or ())
        return JobRecord(**data)
    except (TypeError, ValueError):
        return None


def from_plan(job_id: str, options, params: dict, template: str, cwd: str) -> JobRecord:
    """The record of job ``job_id`` submitted with plan options ``options`` (``Option`` items:
    ``output``, ``error``, ``chdir``, ``job-name``, ``array`` as ``0-N[%T]``), template
    parameters ``params`` (``log_dir``, relative to the working directory) from directory
    ``cwd``."""
    opts = {o.name: o.value for o in options}
    chdir = opts.get("chdir")
    workdir = os.path.abspath(os.path.join(cwd, chdir)) if chdir else os.path.abspath(cwd)
    tasks: tuple[int, ...] = ()
    m = re.fullmatch(r"(\d+)-(\d+)(?:%\d+)?", opts.get("array") or "")
    if m:
        tasks = tuple(range(int(m.group(1)), int(m.group(2)) + 1))
    log_dir = params.get("log_dir")
    if log_dir:
        log_dir = os.path.join(log_dir if os.path.isabs(str(log_dir)) else os.path.join(workdir, str(log_dir)), job_id)
    return JobRecord(job_id=str(job_id), workdir=workdir, output=opts.get("output"), error=opts.get("error"),
                     name=opts.get("job-name"), tasks=tasks, log_dir=log_dir, template=template,
                     submitted=time.time())
