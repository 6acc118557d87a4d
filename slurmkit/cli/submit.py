"""``slurmkit submit TEMPLATE [options] -- COMMAND [ARGS...]``: render a job template for the
site and submit it (prints only the job id), or print the script (``--dry-run``) or where
every option comes from (``--explain``). Everything goes through the Python API
(:mod:`slurmkit.submit.api`); its errors reach the root group's one handler (exit 2 for bad
input, 1 when Slurm fails)."""

from __future__ import annotations

import click

from slurmkit.cli.remote import submit_options
from slurmkit.submit.request import SubmitRequest, cli_fields


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
                    _warn_trailing_options(args[i:])
                    args = args[:i] + ["--"] + args[i:]
                    break
                i += 1
        return super().parse_args(ctx, args)


#: slurmkit options that change what submit does: after the program (without ``--``) they are the
#: program's, so submit warns
TRAILING = ("--dry-run", "--explain", "--test-only", "--wait", "-t", "--time")


def _warn_trailing_options(program: list[str]) -> None:
    """On stderr, one warning per :data:`TRAILING` option among the program's arguments (``-t5``,
    ``--time=5`` too): they go to the program, and the job is submitted as written; the line
    names the ``--`` form that says so without a warning."""
    for word in program[1:]:
        name = word.split("=", 1)[0]
        if name not in TRAILING and not (word.startswith("-t") and not word.startswith("--") and len(word) > 2):
            continue
        name = name if name in TRAILING else "-t"
        click.echo(f"slurmkit: warning: {name} comes after the program ({program[0]}), so it is the program's "
                   f"argument, not slurmkit's; put slurmkit's {name} before the program, or write "
                   f"'slurmkit submit TEMPLATE [options] -- {program[0]} ...' to pass it on without this warning",
                   err=True)


def request_options(f):
    """One click option per :class:`~slurmkit.submit.request.SubmitRequest` field that has a CLI
    spelling (:func:`~slurmkit.submit.request.cli_fields`), each passing the field's name."""
    for fld in reversed(cli_fields()):
        meta = fld.metadata
        kw = {"help": meta["help"], "metavar": meta["metavar"]}
        if meta["flag"]:
            kw["is_flag"] = True
        elif meta["multiple"]:
            kw["multiple"] = True
        else:
            kw["type"] = int if int in meta["types"] else None
            if fld.default is not None and not isinstance(fld.default, (dict, tuple)):
                kw["default"], kw["show_default"] = fld.default, meta["show_default"]
        f = click.option(*meta["cli"], fld.name, **kw)(f)
    return f


def request_kwargs(values: dict) -> dict:
    """The CLI's option values (field name -> click's value) as ``slurmkit.submit`` keywords:
    ``--set`` items parsed, a flag on a field that defaults to True (``--no-switches``) turns it
    off, repeated options as tuples."""
    kw = {}
    for fld in cli_fields():
        value = values[fld.name]
        if fld.name == "sets":
            value = _parse_sets(value)
        elif fld.metadata["flag"] and fld.default is True:
            value = not value
        elif fld.metadata["multiple"]:
            value = tuple(value)
        kw[fld.name] = value
    return kw


@click.command("submit", cls=_ProgramArgs, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("template")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@request_options
@click.option("--dry-run", is_flag=True, help="Print the script instead of submitting it.")
@click.option("--explain", is_flag=True, help="Print where every #SBATCH option and variable comes from.")
@click.option("--wait", "wait_", is_flag=True,
              help="After printing the job id, show its state and pending reason as they change (stderr) until it "
                   "ends; exit 0 when it COMPLETED, else 1.")
@submit_options
def cli(template, command, dry_run, explain, wait_, remote, ssh_config, sync_dir, remote_dir, no_sync, excludes,
        **values):
    """Render job TEMPLATE for the site and submit it; prints the job id.

    The command each rank runs starts at the first word after TEMPLATE that is not an option
    (or after '--'): every argument from there on is the program's.
    """
    from slurmkit.submit import api

    kw = request_kwargs(values)
    test_only = kw["test_only"]
    remote = dict(remote=remote, ssh_config=ssh_config, sync_dir=sync_dir, remote_dir=remote_dir, no_sync=no_sync,
                  excludes=excludes)
    if any(remote.values()):
        from slurmkit.cli.remote import run_submit

        if wait_:
            from slurmkit.errors import UsageError

            raise UsageError("--wait", "not with --remote yet: follow the job with 'slurmkit logs --remote HOST -f ID'")
        req = SubmitRequest(template=template, command=tuple(command), **kw)
        return run_submit(req, explain=explain, dry_run=dry_run, test_only=test_only, **remote)
    if explain:
        click.echo(api.explain(template, command, **kw), nl=False)
    elif dry_run:
        click.echo(_warning_lines(api.render_script, template, command, **kw), nl=False)
    else:
        result = _warning_lines(api.submit, template, command, **kw)
        click.echo(result if test_only else result.id)
        if wait_ and not test_only:
            _wait_visibly(result)


def _warning_lines(call, *args, **kw):
    """``call(*args, **kw)``'s result; the :class:`~slurmkit.errors.SlurmkitWarning` it raised
    go to stderr as ``slurmkit: warning: ...`` lines (submit and --dry-run say the same),
    other warnings on as Python's."""
    import warnings

    from slurmkit.errors import SlurmkitWarning

    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always", SlurmkitWarning)
        result = call(*args, **kw)
    for w in said:
        if issubclass(w.category, SlurmkitWarning):
            click.echo(f"slurmkit: warning: {w.message}", err=True)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return result


def _wait_visibly(job) -> None:
    """``--wait``: the job's state changes on stderr until it ends; a job that did not
    complete is an error (exit 1) naming its state and exit code."""
    from slurmkit.cli.watch import StateLine
    from slurmkit.errors import SlurmkitError

    line = StateLine(job.id)
    try:
        state = job.wait(callback=line)
    finally:
        line.close()
    if state != "COMPLETED":
        raise SlurmkitError(f"job {job.id} ended {state} (exit code {job.exit_code or 'unknown'})")
