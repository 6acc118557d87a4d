"""``slurmkit submit TEMPLATE [options] -- COMMAND [ARGS...]``: render a job template for the
site and submit it (prints only the job id), or print the script (``--dry-run``) or where
every option comes from (``--explain``)."""

from __future__ import annotations

import sys

import click

from slurmkit.cli.remote import submit_options


def bad_input_errors() -> tuple[type, ...]:
    """Exception types that mean bad input (exit 2 with the message, never a traceback)."""
    from slurmkit.submit.escape import EscapeError
    from slurmkit.submit.site import SiteError
    from slurmkit.submit.templates import TemplateError

    errors = [EscapeError, SiteError, TemplateError]
    try:
        from slurmkit.profile import ProfileError

        errors.append(ProfileError)
    except ImportError:
        pass
    return tuple(errors)


def fail(message: str, code: int = 2):
    """Print ``slurmkit: error: message`` to stderr and exit with ``code``."""
    click.echo(f"slurmkit: error: {message}", err=True)
    sys.exit(code)


def _parse_sets(values) -> dict:
    out = {}
    for item in values:
        if "=" not in item:
            fail(f"--set {item!r}: expected key=value")
        key, value = item.split("=", 1)
        out[key.strip()] = value
    return out


@click.command("submit", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("template")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@click.option("--site", help="Site profile: shipped name (site/NAME.toml) or a TOML path. Default: $SLURMKIT_SITE or sandbox.")
@click.option("--partition", "-p", help="Partition (default: the profile's default partition).")
@click.option("--nodes", "-N", type=int, default=1, show_default=True, help="Number of nodes.")
@click.option("--gpus-per-node", type=int, help="GPUs per node (default: all of the node type; 1 for single-GPU templates).")
@click.option("--time", "-t", "time_", help="Time limit (Slurm format, e.g. 1:00:00).")
@click.option("--name", "-J", help="Job name (any text except newline/NUL).")
@click.option("--comment", help="Job comment.")
@click.option("--output", "-o", help="Batch output path (sbatch --output).")
@click.option("--error", "-e", help="Batch error path (sbatch --error).")
@click.option("--chdir", "-D", help="Working directory of the job (sbatch --chdir).")
@click.option("--nodelist", "-w", help="Run on these nodes (Slurm hostlist; overrides --prefer-locality).")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="A template parameter (see 'slurmkit templates show').")
@click.option("--prefer-locality", is_flag=True, help="Pick a --nodelist of idle nodes under one leaf switch (sinfo + profile).")
@click.option("--no-switches", is_flag=True, help="Do not ask Slurm for --switches.")
@click.option("--switch-wait", help="Max wait for --switches (default: profile submit.switch_wait).")
@click.option("--nccl-debug", metavar="LEVEL", help="Export NCCL_DEBUG=LEVEL (none by default).")
@click.option("--preempt-warning", "signal_s", type=int, default=120, show_default=True,
              help="Seconds before the time limit the job is told to checkpoint (USR2) and requeue; 0: off.")
@click.option("--dry-run", is_flag=True, help="Print the script instead of submitting it.")
@click.option("--explain", is_flag=True, help="Print where every #SBATCH option and variable comes from.")
@click.option("--test-only", is_flag=True, help="sbatch --test-only: print Slurm's start estimate, queue nothing.")
@submit_options
def cli(template, command, site, partition, nodes, gpus_per_node, time_, name, comment, output, error, chdir,
        nodelist, sets, prefer_locality, no_switches, switch_wait, nccl_debug, signal_s, dry_run, explain, test_only,
        **remote):
    """Render job TEMPLATE for the site and submit it; prints the job id.

    Everything after '--' is the command each rank runs.
    """
    from slurmkit.slurm.commands import SlurmError
    from slurmkit.submit import api, render
    from slurmkit.submit.backend import get_backend

    req = render.SubmitRequest(
        template=template, command=tuple(command), site=site, partition=partition, nodes=nodes,
        gpus_per_node=gpus_per_node, time=time_, name=name, comment=comment, output=output, error=error,
        chdir=chdir, nodelist=nodelist, sets=_parse_sets(sets), prefer_locality=prefer_locality, switches=not no_switches,
        switch_wait=switch_wait, nccl_debug=nccl_debug, signal_s=signal_s, test_only=test_only)
    if remote["remote"] or any(remote.values()):
        from slurmkit.cli.remote import run_submit

        return run_submit(req, explain=explain, dry_run=dry_run, test_only=test_only, **remote)
    try:
        backend = get_backend()
        plan = api.prepare(req, backend)
        if explain:
            click.echo(render.explain(plan), nl=False)
            return
        script = render.render(plan)
        if dry_run:
            click.echo(script, nl=False)
            return
        result = backend.submit(script, test_only=test_only)
    except bad_input_errors() as exc:
        fail(str(exc))
    except SlurmError as exc:
        fail(str(exc), 1)
    click.echo(result)
