"""The ``slurmkit`` command line: a click group whose subcommands are imported on first use.

Each subcommand lives in its own module under ``slurmkit/cli/`` and exposes a click command or
group named ``cli``; it only parses flags, calls the library and prints. Registering a command
is one line in ``COMMANDS``. Lazy loading keeps ``slurmkit --help`` and each command fast: a
command pays only for its own imports.

The plain install (``pip install slurmkit``) is what the hooks, health checks and submit need; a
command whose work imports a package of an extra (``EXTRAS``) that is not installed says which
extra in one line and exits 2 (:func:`need_extra`).
"""

from __future__ import annotations

import importlib
import logging
import sys

import click

from slurmkit import __version__
from slurmkit.errors import SlurmkitError

# name -> (module, one-line help shown by ``slurmkit --help`` without importing the module)
COMMANDS: dict[str, tuple[str, str]] = {
    "sandbox": ("slurmkit.cli.sandbox", "Run a real local Slurm cluster (munge, slurmdbd, slurmctld, N slurmd)."),
    "topo": ("slurmkit.cli.topo", "Parse, discover and import GPU/NIC/NUMA topology."),
    "site": ("slurmkit.cli.site", "Site profiles: check, and generate gres.conf / topology.conf."),
    "submit": ("slurmkit.cli.submit", "Render a job template into an sbatch script and submit it."),
    "templates": ("slurmkit.cli.templates", "List and show the job templates."),
    "status": ("slurmkit.cli.status", "Show a job's state, nodes and GPUs."),
    "cancel": ("slurmkit.cli.cancel", "Cancel jobs or array tasks, or send them a signal."),
    "logs": ("slurmkit.cli.logs", "Print (or follow) a job's output, here or through ssh (--remote HOST)."),
    "health": ("slurmkit.cli.health", "GPU health checks, snapshots and imports."),
    "hooks": ("slurmkit.cli.hooks", "Prolog / epilog / healthcheck hooks and their slurm.conf install."),
    "report": ("slurmkit.cli.report", "Utilization and energy reports from Slurm accounting."),
}

#: top-level module -> the extra of setup.cfg (``[options.extras_require]``) that installs it
EXTRAS: dict[str, str] = {"numpy": "report", "pandas": "report", "pyarrow": "report", "duckdb": "report",
                          "matplotlib": "report"}


def need_extra(command: str, exc: ModuleNotFoundError) -> None:
    """When ``exc`` (raised while ``slurmkit <command>`` was loaded or ran) is a module of one of
    :data:`EXTRAS`, print ``slurmkit <command> needs the <extra> extra: pip install
    'slurmkit[<extra>]'`` (one line) to stderr and exit 2; otherwise return (the caller re-raises)."""
    extra = EXTRAS.get((exc.name or "").partition(".")[0])
    if extra is None:
        return
    click.echo(f"slurmkit {command} needs the {extra} extra: pip install 'slurmkit[{extra}]'", err=True)
    raise click.exceptions.Exit(2)


def fail(exc: SlurmkitError) -> None:
    """The one CLI error handler: print ``slurmkit: error: <exc>`` (one line) to stderr and exit
    with ``exc.exit_code`` (2 for :class:`~slurmkit.errors.InputError`, 1 otherwise)."""
    message = " ".join(str(exc).split("\n")).strip() or type(exc).__name__
    click.echo(f"slurmkit: error: {message}", err=True)
    raise click.exceptions.Exit(exc.exit_code)


class LazyGroup(click.Group):
    """A click group that imports a subcommand's module only when that subcommand runs, turns
    every :class:`~slurmkit.errors.SlurmkitError` a command raises into :func:`fail`, and a
    package of an extra that is not installed into :func:`need_extra`'s line."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except SlurmkitError as exc:
            fail(exc)
        except ModuleNotFoundError as exc:
            need_extra(ctx.invoked_subcommand or "", exc)
            raise

    def list_commands(self, ctx):
        return sorted(COMMANDS)

    def get_command(self, ctx, name):
        if name not in COMMANDS:
            return None
        module_name, short_help = COMMANDS[name]
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                need_extra(name, exc)
                raise
            # Not built yet: show it in --help but say so when run.
            @click.command(name, short_help=short_help, context_settings={"ignore_unknown_options": True})
            @click.argument("args", nargs=-1, type=click.UNPROCESSED)
            def missing(args):
                raise SlurmkitError(f"'slurmkit {name}' is not available in this build")

            return missing
        cmd = module.cli
        if cmd.short_help is None:
            cmd.short_help = short_help
        return cmd

    def format_commands(self, ctx, formatter):
        # Use the static help lines so that --help imports nothing.
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="slurmkit")
@click.option("-v", "--verbose", count=True, help="More log output (-vv for debug).")
@click.option("--json", "as_json", is_flag=True, help="Print data as JSON where a command prints data.")
@click.pass_context
def cli(ctx, verbose, as_json):
    """slurmkit: topology-aware submission, GPU health hooks and reports for Slurm GPU clusters.

    Shell completion: eval "$(_SLURMKIT_COMPLETE=bash_source slurmkit)" (zsh_source, fish_source).
    """
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="slurmkit: %(levelname)s: %(message)s", stream=sys.stderr)
    ctx.ensure_object(dict)
    ctx.obj["json"] = as_json
    ctx.obj["verbose"] = verbose


def want_json(ctx: click.Context, local_flag: bool = False) -> bool:
    """True when ``--json`` was given to the group (``slurmkit --json X``) or to the command."""
    root = ctx.find_root()
    return bool(local_flag or (root.obj or {}).get("json"))


def main(argv=None):
    """Console-script entry point (``slurmkit = slurmkit.cli:main``)."""
    return cli.main(args=argv, prog_name="slurmkit")
