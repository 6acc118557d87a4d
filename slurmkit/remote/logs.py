"""A job's output (its ``-o`` file), printed once or followed while the job runs.

Where: ``scontrol show job`` (``StdOut=``) while slurmctld knows the job; after that, sacct's
``WorkDir`` and Slurm's default name ``slurm-<id>.out``. Read with ``cat`` or followed with
``tail -F`` until squeue no longer lists the job, on the login node through ssh
(:class:`~slurmkit.remote.backend.RemoteBackend`) or here (a local backend).
"""

from __future__ import annotations

import shlex
import subprocess
import sys

from slurmkit.errors import SlurmkitError


class LogsError(SlurmkitError):
    """The job's output cannot be found or read (message names the job and the path)."""


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


def follow_script(path: str, job_id: str) -> str:
    """POSIX shell that prints ``path`` from its start and follows it (``tail -F``) while
    squeue lists job ``job_id`` (pending jobs: until the file appears and the job ends)."""
    q = shlex.quote(path)
    j = shlex.quote(str(job_id))
    return (f"tail -n +1 -F {q} 2>/dev/null & t=$!; "
            f"while env -u SQUEUE_FORMAT squeue -h -j {j} -o %T 2>/dev/null | grep -q .; do sleep 2; done; "
            f"sleep 1; kill $t 2>/dev/null; wait $t 2>/dev/null; exit 0")


def show(backend, job_id: str, follow: bool = False, out=None) -> None:
    """Write job ``job_id``'s output to ``out`` (a binary file; default stdout), and with
    ``follow`` keep writing until the job has left the queue. Raises :class:`LogsError` when
    the file does not exist (yet) and the job is not followed, ``RemoteError`` (step
    ``logs``) when the connection fails."""
    out = out or sys.stdout.buffer
    path = output_path(backend, job_id)
    remote = getattr(backend, "remote", None)
    if follow:
        script = follow_script(path, job_id)
        if remote is not None:
            remote.stream(script, "logs", out)
        else:
            proc = subprocess.Popen(["sh", "-c", script], stdout=subprocess.PIPE)
            for chunk in iter(lambda: proc.stdout.read1(65536), b""):
                out.write(chunk)
                out.flush()
            proc.wait()
        return
    script = f"test -r {shlex.quote(path)} || exit 3; cat -- {shlex.quote(path)}"
    if remote is not None:
        res = remote.shell(script, "logs", check=False)
        rc, text = res.returncode, res.stdout
    else:
        proc = subprocess.run(["sh", "-c", script], capture_output=True, text=True, errors="surrogateescape",
                              timeout=60)
        rc, text = proc.returncode, proc.stdout
    if rc == 3:
        where = f" on {remote.host}" if remote is not None else ""
        raise LogsError(f"job {job_id}: its output {path}{where} does not exist (yet): the job may still be "
                        "pending (use --follow)")
    if rc != 0:
        raise LogsError(f"job {job_id}: cannot read {path} (exit {rc})")
    out.write(text.encode(errors="surrogateescape"))   # the file's bytes as they are, UTF-8 or not
    out.flush()
