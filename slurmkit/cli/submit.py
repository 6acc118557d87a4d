"""``slurmkit submit TEMPLATE [options] -- COMMAND [ARGS...]``: render a job template for the
site and submit it (prints only the job id), or print the script (``--dry-run``) or where
every option comes from (``--explain``). Everything goes through the Python API
(:mod:`slurmkit.submit.api`); its errors reach the root group's one handler (exit 2 for bad
input, 1 when Slurm fails)."""

from __future__ import annotations

import click

from slurmkit.cli.remote import submit_options


def _parse_sets(values) -> dict:
    """``--set KEY=VALUE`` items -> {key: text value}; raises UsageError for an item without '='."""
    from slurmkit.errors import UsageError

    out = {}
    for item in values:
        if "=" not in item:
            raise UsageError(f"--set {item!r}", "expected key=value")
        key, value = item.split("=", 1)
        out[key.strip()] = value
    return out


class _ProgramArgs(click.Command):
    """A command whose second positional argument starts the program: from there on every
    argument is the program's (``slurmkit submit torchrun python train.py -o x`` keeps ``-o x``
    for train.py), as if ``--`` had been written before it."""

    def parse_args(self, ctx, args):
        if "--" not in args:
            takes_value = {}
            for param in self.params:
                if isinstance(param, click.Option):
                    for opt in param.opts + param.secondary_opts:
                        takes_value[opt] = not (param.is_flag or param.count)
            positionals, i = 0, 0
            while i < len(args):
                arg = args[i]
                if arg.startswith("-") and arg != "-":
                    name = arg.split("=", 1)[0]
                    if name in takes_value:
                        if takes_value[name] and "=" not in arg:
                            i += 1
                    elif not arg.startswith("--") and arg[:2] in takes_value and takes_value[arg[:2]]:
                        pass                       # -N2: value attached
                    i += 1
                    continue
                positionals += 1
                if positionals == 2:
                    args = args[:i] + ["--"] + args[i:]
                    break
                i += 1
        return super().parse_args(ctx, args)


@click.command("submit", cls=_ProgramArgs, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("template")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@click.option("--site", help="Site profile: shipped name (site/NAME.toml) or a TOML path. Default: $SLURMKIT_SITE or sandbox.")
@click.option("--partition", "-p", help="Partition (default: the profile's default partition).")
@click.option("--nodes", "-N", type=int, default=1, show_default=True, help="Number of nodes.")
@click.option("--gpus-per-node", type=int, help="GPUs per node (default: all of the node type; 1 for single-GPU templates).")
@click.option("--gpu-type", help="On a node type with several GPU models: the gres type to ask for (default: any GPU, untyped).")
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
              help="Seconds before the time limit the job is told to checkpoint (USR2) and requeue; 0: off. "
                   "Clamped to half of --time when not shorter; requeues capped by --set max_restarts=N.")
@click.option("--account", "-A", help="Account to charge (sbatch --account).")
@click.option("--qos", "-q", help="Quality of service (sbatch --qos).")
@click.option("--mem", help="Memory per node, Slurm size (e.g. 200G; 0: all of it).")
@click.option("--mem-per-gpu", help="Memory per allocated GPU, Slurm size (e.g. 64G).")
@click.option("--exclusive", is_flag=True, help="Whole nodes only (sbatch --exclusive).")
@click.option("--constraint", "-C", help="Node features (sbatch --constraint, e.g. 'h100&ib').")
@click.option("--exclude", "-x", help="Never run on these nodes (Slurm hostlist).")
@click.option("--reservation", help="Run in this reservation.")
@click.option("--dependency", "-d", help="Slurm dependency, e.g. afterok:1234.")
@click.option("--mail-type", help="Mail events (e.g. END,FAIL).")
@click.option("--mail-user", help="Mail address.")
@click.option("--sbatch", "sbatch_args", multiple=True, metavar="OPTION",
              help="Any other sbatch option, passed through as its own escaped #SBATCH line (e.g. --sbatch=--gres-flags=enforce-binding).")
@click.option("--dry-run", is_flag=True, help="Print the script instead of submitting it.")
@click.option("--explain", is_flag=True, help="Print where every #SBATCH option and variable comes from.")
@click.option("--test-only", is_flag=True, help="sbatch --test-only: print Slurm's start estimate, queue nothing.")
@submit_options
def cli(template, command, site, partition, nodes, gpus_per_node, gpu_type, time_, name, comment, output, error, chdir,
        nodelist, sets, prefer_locality, no_switches, switch_wait, nccl_debug, signal_s, account, qos, mem,
        mem_per_gpu, exclusive, constraint, exclude, reservation, dependency, mail_type, mail_user, sbatch_args,
        dry_run, explain, test_only, **remote):
    """Render job TEMPLATE for the site and submit it; prints the job id.

    The command each rank runs starts at the first word after TEMPLATE that is not an option
    (or after '--'): every argument from there on is the program's.
    """
    from slurmkit.submit import api

    kw = dict(site=site, partition=partition, nodes=nodes, gpus_per_node=gpus_per_node, gpu_type=gpu_type, time=time_,
              name=name, comment=comment, output=output, error=error, chdir=chdir, nodelist=nodelist,
              sets=_parse_sets(sets), prefer_locality=prefer_locality, switches=not no_switches,
              switch_wait=switch_wait, nccl_debug=nccl_debug, signal_s=signal_s, test_only=test_only,
              account=account, qos=qos, mem=mem, mem_per_gpu=mem_per_gpu, exclusive=exclusive,
              constraint=constraint, exclude=exclude, reservation=reservation, dependency=dependency,
              mail_type=mail_type, mail_user=mail_user, sbatch_args=tuple(sbatch_args))
    if remote["remote"] or any(remote.values()):
        from slurmkit.cli.remote import run_submit
        from slurmkit.submit.render import SubmitRequest

        req = SubmitRequest(template=template, command=tuple(command), **kw)
        return run_submit(req, explain=explain, dry_run=dry_run, test_only=test_only, **remote)
    if explain:
        click.echo(api.explain(template, command, **kw), nl=False)
    elif dry_run:
        click.echo(api.render_script(template, command, **kw), nl=False)
    else:
        result = api.submit(template, command, **kw)
        click.echo(result if test_only else result.id)
