"""Where a command's text output goes: stdout, or a file given with ``-o`` (written atomically,
so a slurmd or a reader never sees half a gres.conf or profile section)."""

from __future__ import annotations

import click

from slurmkit.errors import InputError


def write_output(text: str, output: str | None) -> None:
    """Print ``text`` as is (no newline added) when ``output`` is None or "", else replace the
    file ``output`` with it (:func:`slurmkit.atomicfile.atomic_write`; a new file gets mode
    0644). Raises :class:`~slurmkit.errors.InputError` ``output: <strerror>`` (exit 2) when the
    file cannot be written."""
    if not output:
        click.echo(text, nl=False)
        return
    from slurmkit.atomicfile import atomic_write

    try:
        atomic_write(output, text)
    except OSError as exc:
        raise InputError(output, None, exc.strerror or str(exc)) from None
