"""``slurmkit status JOBID... [--json]``: state, nodes and GPUs of jobs (one squeue call, and
one sacct call for jobs squeue no longer knows)."""

from __future__ import annotations

import json

import click

from slurmkit.cli import want_json


@click.command("status", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("job_ids", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help='JSON: {"job_id", "state", "nodes", "gpus"} (a list for several jobs).')
@click.pass_context
def cli(ctx, job_ids, as_json):
    """Show jobs' state, nodes and GPUs."""
    from slurmkit.errors import SlurmkitError, UsageError
    from slurmkit.submit.backend import get_backend

    for j in job_ids:
        if not j.replace("_", "").isdigit():
            raise UsageError("JOBID", f"{j!r} is not a job id (digits, or ARRAYID_TASK)")
    infos = get_backend().states(job_ids)   # SlurmError: exit 1
    unknown = [j for j in job_ids if j not in infos]
    if unknown:
        raise SlurmkitError(f"unknown job id(s): {', '.join(unknown)} (not in squeue or sacct)")
    rows = [infos[j].as_dict() for j in job_ids]
    if want_json(ctx, as_json):
        click.echo(json.dumps(rows[0] if len(rows) == 1 else rows))
        return
    for r in rows:
        click.echo(f"{r['job_id']}  {r['state']}  nodes={','.join(r['nodes']) or '-'}  gpus={r['gpus']}")
