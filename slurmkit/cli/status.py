"""``slurmkit status [--remote HOST] JOBID... [--json]``: state, nodes, GPUs and exit code of jobs
(one squeue call, one sacct call for jobs squeue no longer knows, one for exit codes; through
ssh on HOST's login node with ``--remote``), and each job's restarts, excluded nodes and last
pending reason (:mod:`slurmkit.submit.history`: one more sacct call, one scontrol per job)."""

from __future__ import annotations

import json

import click

from slurmkit.cli import want_json
from slurmkit.cli.remote import host_options


@click.command("status", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("job_ids", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help='JSON: {"job_id", "state", "nodes", "gpus", "exit_code", '
              '"restarts", "excluded_nodes", "last_reason"} (exit_code: Slurm\'s ExitCode status:signal; restarts: '
              'runs before this one, null when unknown; last_reason: why it last waited, "" when it never did), for '
              'a pending job also "reason" and "expected_start" (a list for several jobs).')
@host_options
@click.pass_context
def cli(ctx, job_ids, as_json, remote, ssh_config):
    """Show jobs' state, nodes and GPUs; for a pending job Slurm's reason and expected start."""
    from slurmkit.cli.remote import backend_for
    from slurmkit.errors import SlurmkitError, UsageError
    from slurmkit.submit.backend import TERMINAL, describe_exit_code, exit_codes
    from slurmkit.submit.history import histories

    for j in job_ids:
        if not j.replace("_", "").isdigit():
            raise UsageError("JOBID", f"{j!r} is not a job id (digits, or ARRAYID_TASK)")
    backend = backend_for(remote, ssh_config)
    infos = backend.states(job_ids)   # SlurmError: exit 1
    codes = exit_codes(backend, [j for j in job_ids if j in infos])
    unknown = [j for j in job_ids if j not in infos]
    if unknown:
        raise SlurmkitError(f"unknown job id(s): {', '.join(unknown)} (not in squeue or sacct)")
    # sacct reports 0:0 for jobs that have not ended: an exit code only for finished jobs
    past = histories(backend, job_ids)
    rows = []
    for j in job_ids:
        row = {**infos[j].as_dict(), "exit_code": codes.get(j) if infos[j].state in TERMINAL else None,
               "restarts": past[j].restarts, "excluded_nodes": list(past[j].excluded),
               "last_reason": past[j].last_reason}
        if infos[j].state == "PENDING":      # squeue's %r and %S: why it waits, when Slurm expects it to start
            row.update(reason=infos[j].reason or None, expected_start=infos[j].start or None)
        rows.append(row)
    if want_json(ctx, as_json):
        click.echo(json.dumps(rows[0] if len(rows) == 1 else rows))
        return
    for r in rows:
        code = f"{r['exit_code']} ({describe_exit_code(r['exit_code'])})" if r["exit_code"] else "-"
        line = f"{r['job_id']}  {r['state']}  nodes={','.join(r['nodes']) or '-'}  gpus={r['gpus']}  exit={code}"
        if r["state"] == "PENDING":
            line += f"  reason={r['reason'] or '-'}  expected_start={r['expected_start'] or '-'}"
        restarts = "-" if r["restarts"] is None else r["restarts"]
        line += (f"  restarts={restarts}  excluded={','.join(r['excluded_nodes']) or '-'}"
                 f"  last_reason={r['last_reason'] or '-'}")
        click.echo(line)
