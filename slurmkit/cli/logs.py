"""``slurmkit logs [--remote HOST] JOBID [--follow]``: a job's output (its ``-o`` file), here or
on HOST's login node through ssh; ``--follow`` keeps printing until the job leaves the queue."""

from __future__ import annotations

import click

from slurmkit.cli.remote import host_options
from slurmkit.remote.logs import LogsError, show


@click.command("logs", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("job_id")
@click.option("--follow", "-f", is_flag=True, help="Keep printing new output until the job has ended.")
@host_options
def cli(job_id, follow, remote, ssh_config):
    """Print job JOBID's output (sbatch --output; default slurm-JOBID.out)."""
    from slurmkit.cli.remote import backend_for
    from slurmkit.errors import UsageError

    if not job_id.replace("_", "").isdigit():
        raise UsageError("JOBID", f"{job_id!r} is not a job id (digits, or ARRAYID_TASK)")
    backend = backend_for(remote, ssh_config)
    if follow:
        wait_until_started(backend, job_id)
    try:
        show(backend, job_id, follow=follow)
    except LogsError as exc:
        raise ended_without_output(backend, job_id) or exc from None


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


def ended_without_output(backend, job_id: str):
    """For a job without its output file: a :class:`LogsError` saying why. Ended: its state and
    exit code (squeue / sacct ``State``, sacct ``ExitCode``); pending: Slurm's reason (squeue
    ``%r``) and that ``--follow`` waits for it. None while it runs, or when Slurm does not know
    it."""
    from slurmkit.submit.backend import TERMINAL, exit_codes

    info = backend.states([job_id]).get(job_id)
    if info is not None and info.state == "PENDING":
        why = f" ({info.reason})" if info.reason else ""
        return LogsError(f"job {job_id} is PENDING{why}: no output yet; `slurmkit logs --follow {job_id}` "
                         "waits for it to start")
    if info is None or info.state not in TERMINAL:
        return None
    code = exit_codes(backend, [job_id]).get(job_id) or "unknown"
    return LogsError(f"job {job_id} ended {info.state} (exit code {code}) without any output: its output file "
                     "was never written (a missing directory in -o/-e, or the job failed before it started)")
