"""A job's output (its ``-o`` file), printed once or followed while the job runs.

Where: ``scontrol show job`` (``StdOut=``) while slurmctld knows the job; after that, sacct's
``WorkDir`` and Slurm's default name ``slurm-<id>.out``. Read with ``cat`` or followed with
``tail -F`` until the job has ended, on the login node through ssh
(:class:`~slurmkit.remote.backend.RemoteBackend`: one shell script, its squeue bounded by
``timeout``; a squeue that fails ends the follow) or here (a local backend: the backend's
job-state query, squeue then sacct with its timeout; a Slurm that cannot answer is an error).
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import threading
import time

from slurmkit.errors import SlurmkitError
from slurmkit.slurm.commands import env_unset_argv
from slurmkit.submit.backend import TERMINAL


class LogsError(SlurmkitError):
    """The job's output cannot be found or read (message names the job and the path)."""


class OutputMissing(LogsError):
    """The job's output file does not exist (``path``: where Slurm says it writes it; ``host``:
    the login node it was looked for on, None here)."""

    def __init__(self, message: str, path: str, host: str | None = None):
        super().__init__(message)
        self.path, self.host = path, host


def parse_stdout_path(scontrol_text: str) -> str | None:
    """``StdOut=`` of ``scontrol show job`` output (multi-line form; the value runs to the end
    of its line, paths with spaces included); None when absent."""
    for line in scontrol_text.splitlines():
        s = line.strip()
        if s.startswith("StdOut="):
            value = line.split("=", 1)[1]
            return value[:-1] if value.endswith(" ") else value
    return None


def output_path(backend, job_id: str) -> str:
    """Where job ``job_id`` writes its output, on the host the backend runs Slurm's commands
    on. Raises :class:`LogsError` when Slurm knows neither the job nor its directory."""
    res = backend.run(["scontrol", "show", "job", str(job_id)], check=False)
    if res.returncode == 0:
        path = parse_stdout_path(res.stdout)
        if path:
            return path
    res = backend.run(["sacct", "-X", "-n", "-P", "-j", str(job_id), "-o", "JobID,WorkDir"], check=False)
    rows = [ln.split("|", 1) for ln in res.stdout.splitlines() if "|" in ln]
    for jid, workdir in rows:
        if jid == str(job_id) and workdir:
            return f"{workdir.rstrip('/')}/slurm-{job_id}.out"
    raise LogsError(f"job {job_id}: unknown to scontrol and sacct, so its output file cannot be found")


#: Seconds one squeue of the follow loop may take; every how many seconds it asks.
SQUEUE_TIMEOUT_S = 30
FOLLOW_POLL_S = 2


def follow_script(path: str, job_id: str) -> str:
    """POSIX shell that prints ``path`` from its start and follows it (``tail -F``) while
    squeue lists job ``job_id`` (pending jobs: until the file appears and the job ends); each
    squeue is killed after :data:`SQUEUE_TIMEOUT_S` s (coreutils ``timeout``; a squeue that
    fails or times out ends the follow like a job that left the queue)."""
    q = shlex.quote(path)
    j = shlex.quote(str(job_id))
    return (f"tail -n +1 -F {q} 2>/dev/null & t=$!; "
            f"while timeout {SQUEUE_TIMEOUT_S} {shlex.join(env_unset_argv())} squeue -h -j {j} -o %T "
            f"2>/dev/null | grep -q .; do sleep {FOLLOW_POLL_S}; done; "
            f"sleep 1; kill $t 2>/dev/null; wait $t 2>/dev/null; exit 0")


def _in_queue(backend, job_id: str) -> bool:
    """Whether job ``job_id`` is still pending or running, by the backend's job-state query
    (:meth:`~slurmkit.submit.backend.CliBackend.states`: squeue, then sacct for a job squeue no
    longer knows; each with the backend's timeout). A job neither knows counts as gone. Raises
    :class:`~slurmkit.slurm.commands.SlurmError` when Slurm cannot answer (no controller, a
    timeout): the follow stops with that error instead of ending as if the job had."""
    info = backend.states([str(job_id)]).get(str(job_id))
    return info is not None and info.state not in TERMINAL


def _follow_local(backend, path: str, job_id: str, out) -> None:
    """``tail -F path`` copied to ``out`` while the job is pending or running (:func:`_in_queue`),
    then one more second; then what tail had not copied yet. A pending job's file appears only
    when it starts, and tail -F looks again for a missing file only once a second, so a short job
    could end, and the follow with it, before tail printed a line of it (the rest is read from
    the file itself). Raises :class:`~slurmkit.slurm.commands.SlurmError` when Slurm cannot
    answer (tail stopped first)."""
    tail = subprocess.Popen(["tail", "-n", "+1", "-F", path], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    copied = [0]

    def copy():
        for chunk in iter(lambda: tail.stdout.read1(65536), b""):
            out.write(chunk)
            out.flush()
            copied[0] += len(chunk)

    copier = threading.Thread(target=copy, daemon=True)
    copier.start()
    try:
        while _in_queue(backend, job_id):
            time.sleep(FOLLOW_POLL_S)
        time.sleep(1)  # the job's last lines, written as it left the queue
    finally:
        tail.terminate()
        tail.wait(timeout=10)
        copier.join(timeout=10)
    try:
        with open(path, "rb") as fh:
            fh.seek(copied[0])
            rest = fh.read()
    except OSError:
        return
    if rest:
        out.write(rest)
        out.flush()


def show(backend, job_id: str, follow: bool = False, out=None) -> int | None:
    """Write job ``job_id``'s output to ``out`` (a binary file; default stdout), and with
    ``follow`` keep writing until the job has left the queue. Returns the number of bytes
    written (None when followed). Raises :class:`OutputMissing` when the file does not exist
    (yet) and the job is not followed, :class:`LogsError` when it cannot be read,
    ``RemoteError`` (step ``logs``) when the connection fails."""
    out = out or sys.stdout.buffer
    path = output_path(backend, job_id)
    remote = getattr(backend, "remote", None)
    if follow:
        if remote is not None:
            remote.stream(follow_script(path, job_id), "logs", out)
        else:
            _follow_local(backend, path, job_id, out)
        return None
    if remote is None:
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except FileNotFoundError:
            raise OutputMissing(f"job {job_id}: its output {path} does not exist (yet): the job may still be "
                                "pending (use --follow)", path) from None
        except OSError as exc:
            raise LogsError(f"job {job_id}: cannot read {path} ({exc.strerror})") from None
        out.write(data)
        out.flush()
        return len(data)
    script = f"test -r {shlex.quote(path)} || exit 3; cat -- {shlex.quote(path)}"
    res = remote.shell(script, "logs", check=False)
    if res.returncode == 3:
        raise OutputMissing(f"job {job_id}: its output {path} on {remote.host} does not exist (yet): the job may "
                            "still be pending (use --follow)", path, remote.host)
    if res.returncode != 0:
        raise LogsError(f"job {job_id}: cannot read {path} on {remote.host} (exit {res.returncode})")
    data = res.stdout.encode(errors="surrogateescape")   # the file's bytes as they are, UTF-8 or not
    out.write(data)
    out.flush()
    return len(data)
