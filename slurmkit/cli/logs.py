"""``slurmkit logs [--remote HOST] JOBID [--follow]``: a job's output (its ``-o`` file), here or
on HOST's login node through ssh; ``--follow`` keeps printing until the job leaves the queue.
``--rank N``: one rank's own output, from the job's log folder. The file is the one the job's
record names (:mod:`slurmkit.submit.jobrecord`, written at submit), so a job slurmctld has
forgotten still shows its ``-o`` file; without a record, the one Slurm names."""

from __future__ import annotations

import click

from slurmkit.cli.remote import host_options
from slurmkit.remote.logs import LogsError, OutputMissing, show


@click.command("logs", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("job_id")
@click.option("--follow", "-f", is_flag=True, help="Keep printing new output until the job has ended.")
@click.option("--rank", type=click.IntRange(min=0), default=None, metavar="N",
              help="Only rank N's output (stdout here, its stderr on stderr): <log_dir>/JOBID/rankN.out and "
                   ".err, which a torchrun job's ranks link to their torchrun logs.")
@click.option("--log-dir", "log_dir", default=None, metavar="DIR",
              help="With --rank: the job's log_dir parameter (default: slurmkit-logs in the job's working directory).")
@host_options
def cli(job_id, follow, rank, log_dir, remote, ssh_config):
    """Print job JOBID's output (sbatch --output; default slurm-JOBID.out), or one rank's (--rank N).

    An array's JOBID prints every task's output; ARRAYID_TASK one task's."""
    from slurmkit.cli.remote import backend_for
    from slurmkit.errors import UsageError

    if not job_id.replace("_", "").isdigit():
        raise UsageError("JOBID", f"{job_id!r} is not a job id (digits, or ARRAYID_TASK)")
    if rank is None and log_dir is not None:
        raise UsageError("--log-dir", "only with --rank N")
    backend = backend_for(remote, ssh_config)
    if rank is not None:
        if follow or remote:
            raise UsageError("--rank", "not with --follow or --remote yet")
        show_rank(backend, job_id, rank, log_dir)
        return
    if not follow and show_recorded(backend, job_id):
        return
    if follow:
        wait_until_started(backend, job_id)
    try:
        written = show(backend, job_id, follow=follow)
    except OutputMissing as exc:
        raise ended_without_output(backend, job_id, exc) or exc from None
    if written == 0:
        said = ended(backend, job_id)
        if said:
            click.echo(f"slurmkit: job {job_id} {said}: the job wrote no output (its output file is empty)", err=True)


def show_recorded(backend, job_id: str) -> bool:
    """Print the output of job ``job_id`` from the file its record names
    (:mod:`slurmkit.submit.jobrecord`, written at submit: right at any age, after slurmctld
    forgot the job too); for an array's job id every task's in task order, each after a
    ``==> PATH <==`` line on stderr. False when there is no record (a job submitted elsewhere or
    through ``--remote``: Slurm is asked instead) or its pattern needs what only Slurm knows
    (``%N``). Raises :class:`LogsError` naming the recorded path when the file is missing
    (pending: Slurm's reason)."""
    import sys

    from slurmkit.submit.api import Job

    if getattr(backend, "remote", None) is not None:
        return False
    rec = Job(job_id, backend).record()
    if rec is None:
        return False
    ids = [f"{job_id}_{t}" for t in rec.tasks] if rec.tasks and "_" not in job_id else [job_id]
    paths = [(j, Job(j, backend).paths()[0]) for j in ids]
    if any(p is None for _, p in paths):
        return False
    for j, path in paths:
        if len(ids) > 1:
            click.echo(f"==> {path} <==", err=True)
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except FileNotFoundError:
            missing = OutputMissing(f"job {j}: its output {path} does not exist (yet)", path)
            raise ended_without_output(backend, j, missing) or LogsError(
                f"job {j}: its output {path} does not exist (yet): the job may still be pending (use --follow)") \
                from None
        except OSError as exc:
            raise LogsError(f"job {j}: cannot read {path} ({exc.strerror})") from None
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        if not data and len(ids) == 1:
            said = ended(backend, j)
            if said:
                click.echo(f"slurmkit: job {j} {said}: the job wrote no output (its output file is empty)", err=True)
    return True


def wait_until_started(backend, job_id: str) -> None:
    """While the job has not started, show its state and pending reason as they change (on
    stderr: a live line on a terminal, plain lines elsewhere)."""
    from slurmkit.cli.watch import STARTED, StateLine
    from slurmkit.submit.api import Job

    info = backend.states([job_id]).get(job_id)
    if info is None or info.state in STARTED:
        return
    line = StateLine(job_id)
    try:
        Job(job_id, backend).wait(until=STARTED, callback=line)
    finally:
        line.close()


def ended(backend, job_id: str) -> str | None:
    """``"ended FAILED (ExitCode 1:0, exit 1)"`` for a finished job (squeue / sacct ``State``,
    sacct ``ExitCode`` explained by :func:`~slurmkit.submit.backend.describe_exit_code`); None
    while it is pending or running, or when Slurm does not know it."""
    from slurmkit.submit.backend import TERMINAL, describe_exit_code, exit_codes

    info = backend.states([job_id]).get(job_id)
    if info is None or info.state not in TERMINAL:
        return None
    code = exit_codes(backend, [job_id]).get(job_id)
    return f"ended {info.state} (ExitCode {code}, {describe_exit_code(code)})" if code else \
        f"ended {info.state} (ExitCode unknown)"


def job_start(backend, job_id: str) -> str | None:
    """When the job started (sacct ``Start``); None when it never did (``Unknown``, ``None``)
    or sacct does not know it."""
    res = backend.run(["sacct", "-X", "-n", "-P", "-j", str(job_id), "-o", "JobID,Start"], check=False)
    for line in res.stdout.splitlines():
        jid, _, start = line.partition("|")
        if jid == str(job_id) and start.strip() and start.strip() not in ("Unknown", "None"):
            return start.strip()
    return None


def ended_without_output(backend, job_id: str, missing: OutputMissing):
    """For a job whose output file does not exist: a :class:`LogsError` saying why. Pending:
    Slurm's reason (squeue ``%r``) and that ``--follow`` waits for it. Ended (:func:`ended`):
    it never started (sacct ``Start``); or its output's directory does not exist (checked here,
    for a local job: Slurm creates the file, never its directory); or it started and the file
    is missing (deleted or moved since). None while it runs, or when Slurm does not know it."""
    import os

    info = backend.states([job_id]).get(job_id)
    if info is not None and info.state == "PENDING":
        why = f" ({info.reason})" if info.reason else ""
        return LogsError(f"job {job_id} is PENDING{why}: no output yet; `slurmkit logs --follow {job_id}` "
                         "waits for it to start")
    said = ended(backend, job_id)
    if said is None:
        return None
    where = f" on {missing.host}" if missing.host else ""
    start = job_start(backend, job_id)
    if start is None:
        return LogsError(f"job {job_id} {said} without any output: it never started")
    folder = os.path.dirname(missing.path)
    if missing.host is None and folder and not os.path.isdir(folder):
        return LogsError(f"job {job_id} {said} without any output: the directory of its output {missing.path} "
                         "does not exist (Slurm creates the file, never its directory)")
    return LogsError(f"job {job_id} {said}: its output {missing.path}{where} is missing (the job started at "
                     f"{start}; the file was deleted or moved since)")


def job_workdir(backend, job_id: str) -> str | None:
    """The job's working directory: ``WorkDir=`` of ``scontrol show job -o`` while slurmctld knows
    the job, else sacct's ``WorkDir``; None when neither knows it."""
    import re

    res = backend.run(["scontrol", "show", "job", "-o", job_id], check=False)
    found = re.search(r"(?:^|\s)WorkDir=(\S+)", res.stdout) if res.returncode == 0 else None
    if found:
        return found.group(1)
    res = backend.run(["sacct", "-X", "-n", "-P", "-j", job_id, "-o", "JobID,WorkDir"], check=False)
    for line in res.stdout.splitlines():
        jid, _, workdir = line.partition("|")
        if jid == job_id and workdir.strip():
            return workdir.strip()
    return None


def show_rank(backend, job_id: str, rank: int, log_dir: str | None) -> None:
    """Print rank ``rank``'s output of job ``job_id``: ``<log dir>/<job>/rank<N>.out`` (stdout)
    and ``.err`` (on stderr). ``log_dir``: the job's ``log_dir`` parameter (relative to the job's
    working directory, :func:`job_workdir`), default the job's record's
    (:mod:`slurmkit.submit.jobrecord`), else the templates' (``slurmkit-logs``). Raises
    LogsError naming the folder and the ranks it has when rank N has no log there."""
    import os
    import re
    import sys

    from slurmkit.submit import templates

    from slurmkit.submit.jobrecord import read

    job = job_id.split("_")[0]                  # an array's tasks share their array job's folder
    rec = read(job, backend) if log_dir is None else None
    if rec is not None and rec.log_dir:
        base = os.path.dirname(rec.log_dir)     # the record's folder is <log_dir>/<job>
    else:
        base = log_dir or templates.get("torchrun").params["log_dir"].default
    if not os.path.isabs(base):
        workdir = job_workdir(backend, job)
        if workdir is None:
            raise LogsError(f"job {job_id}: unknown to scontrol and sacct, so its log folder cannot be found "
                            "(give --log-dir)")
        base = os.path.join(workdir, base)
    folder = os.path.join(base, job)
    out, err = (os.path.join(folder, f"rank{rank}.{ext}") for ext in ("out", "err"))
    if not os.path.exists(out):
        try:
            have = sorted({int(m.group(1)) for f in os.listdir(folder) if (m := re.fullmatch(r"rank(\d+)\.out", f))})
        except OSError:
            raise LogsError(f"job {job_id}: no log folder {folder} (a template's log_dir elsewhere? give --log-dir)") \
                from None
        ranks = f"ranks with logs: {', '.join(map(str, have))}" if have else "no rank logs there (a torchrun job's ranks write them)"
        raise LogsError(f"job {job_id}: no log of rank {rank} in {folder}; {ranks}")
    for path, stream in ((out, sys.stdout), (err, sys.stderr)):
        try:
            with open(path, errors="replace") as fh:
                stream.write(fh.read())
        except FileNotFoundError:
            continue
        stream.flush()
