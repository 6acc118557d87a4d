"""Options shared by several commands, so each has one name, one variable and one help text.

:func:`site_option`: ``--site FILE|NAME`` / ``$SLURMKIT_SITE``, the site profile, with the older
``--profile`` (and, where it existed, ``$SLURMKIT_PROFILE``) kept as hidden deprecated aliases.
"""

from __future__ import annotations

import functools

import click

SITE_ENV = "SLURMKIT_SITE"

_ALIAS = "_site_deprecated_alias"


def site_option(param: str = "site", help: str = "Site profile (file or shipped name).",
                alias_envvar: str | None = None, path_only: bool = False):
    """Decorator adding ``--site`` (value in keyword ``param``; default ``$SLURMKIT_SITE``) and a
    hidden ``--profile`` alias (default ``$<alias_envvar>`` when given). Precedence: ``--site``,
    then ``--profile``, then ``$SLURMKIT_SITE``, then ``$<alias_envvar>``. ``path_only``: the
    value must be a file (click.Path, no directory), as for ``hooks install``."""
    kind = click.Path(dir_okay=False) if path_only else None

    def deco(f):
        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            alias = kwargs.pop(_ALIAS, None)
            ctx = click.get_current_context()
            from_cli = ctx.get_parameter_source(param) == click.core.ParameterSource.COMMANDLINE
            alias_cli = ctx.get_parameter_source(_ALIAS) == click.core.ParameterSource.COMMANDLINE
            if alias is not None and (kwargs.get(param) is None or (alias_cli and not from_cli)):
                kwargs[param] = alias
            return f(*args, **kwargs)

        wrapper = click.option("--profile", _ALIAS, type=kind, envvar=alias_envvar, hidden=True,
                               help="Deprecated name of --site.")(wrapper)
        wrapper = click.option("--site", param, type=kind, envvar=SITE_ENV, metavar="FILE|NAME",
                               help=f"{help} [env: {SITE_ENV}]")(wrapper)
        return wrapper

    return deco
