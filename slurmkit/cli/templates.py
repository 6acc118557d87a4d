"""``slurmkit templates list|show NAME``: the job templates and the parameters they declare."""

from __future__ import annotations

import json

import click

from slurmkit.cli import want_json


@click.group("templates", context_settings={"help_option_names": ["-h", "--help"]})
def cli():
    """List and show the job templates."""


@cli.command("list")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@click.pass_context
def list_(ctx, as_json):
    """Each template with its launch shape and description."""
    from slurmkit.submit import templates

    rows = [templates.get(n) for n in templates.names()]
    if want_json(ctx, as_json):
        click.echo(json.dumps([{"name": t.name, "tasks": t.tasks, "description": t.description,
                                "params": sorted(t.params)} for t in rows], indent=2))
        return
    width = max(len(t.name) for t in rows)
    for t in rows:
        click.echo(f"{t.name:<{width}}  {t.tasks:<8}  {t.description}")


@cli.command("show")
@click.argument("name")
@click.option("--source", is_flag=True, help="Print the template's jinja2 source.")
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@click.pass_context
def show(ctx, name, source, as_json):
    """A template's parameters (with defaults) and run-time variables."""
    from slurmkit.submit import templates

    t = templates.get(name)   # TemplateError (unknown name): exit 2
    if source:
        click.echo(t.source, nl=False)
        return
    if want_json(ctx, as_json):
        click.echo(json.dumps({"name": t.name, "tasks": t.tasks, "description": t.description,
                               "params": {p.name: {"default": p.default, "help": p.help} for p in t.params.values()},
                               "runtime_env": t.runtime_env}, indent=2))
        return
    click.echo(f"{t.name}: {t.description}")
    click.echo(f"tasks: {t.tasks}")
    click.echo("parameters (--set KEY=VALUE):")
    for p in t.params.values():
        click.echo(f"  {p.name} = {p.default!r}  {p.help}")
    for name, help_ in templates.JOB_PARAMS.items():
        click.echo(f"  {name}  {help_}")
    if t.runtime_env:
        click.echo("run-time variables:")
        for k, v in t.runtime_env.items():
            click.echo(f"  {k}: {v}")
