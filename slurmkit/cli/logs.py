"""``slurmkit logs [--remote HOST] JOBID [--follow]``: a job's output (its ``-o`` file), here or
on HOST's login node through ssh; ``--follow`` keeps printing until the job leaves the queue."""

from __future__ import annotations

import click

from slurmkit.cli.remote import host_options


@click.command("logs", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("job_id")
@click.option("--follow", "-f", is_flag=True, help="Keep printing new output until the job has ended.")
@host_options
def cli(job_id, follow, remote, ssh_config):
    """Print job JOBID's output (sbatch --output; default slurm-JOBID.out)."""
    from slurmkit.cli.remote import backend_for
    from slurmkit.errors import UsageError
    from slurmkit.remote.logs import show

    if not job_id.replace("_", "").isdigit():
        raise UsageError("JOBID", f"{job_id!r} is not a job id (digits, or ARRAYID_TASK)")
    show(backend_for(remote, ssh_config), job_id, follow=follow)
