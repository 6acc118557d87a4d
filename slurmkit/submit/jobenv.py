"""A job's own environment (``--env NAME=VALUE``, ``--env-file FILE``): parse the assignments.

The values are written into the batch script as ``export NAME=...`` lines in which ``$OTHER``
and ``${OTHER}`` expand on the node when the job runs, as in a shell (so
``LD_LIBRARY_PATH=/opt/efa/lib:$LD_LIBRARY_PATH`` prepends), and nothing else does
(:func:`slurmkit.submit.escape.shell_expand_word`).
"""

from __future__ import annotations

import re

from slurmkit.errors import UsageError

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_assignment(text: str, where: str = "--env") -> tuple[str, str]:
    """``"NAME=VALUE"`` -> ``(NAME, VALUE)`` (the value as written, may be empty). Raises
    :class:`UsageError` naming ``where`` when there is no ``=`` or NAME is not a shell variable
    name."""
    name, eq, value = str(text).partition("=")
    if not eq or not _NAME.fullmatch(name):
        raise UsageError(f"{where} {text!r}", "expected NAME=VALUE with NAME a shell variable name "
                         "(letters, digits, _; not starting with a digit)")
    return name, value


def parse_env_file(text: str, path: str) -> list[tuple[str, str, int]]:
    """An env file's assignments, one ``NAME=VALUE`` a line (an optional leading ``export``;
    blank lines and lines starting with ``#`` skipped; the value taken as written, quotes
    included, as docker's ``--env-file`` reads it) -> ``[(NAME, VALUE, line number)]``. Raises
    :class:`UsageError` naming ``path:line`` for any other line."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        if s.startswith("export "):
            s = s[len("export "):].lstrip()
        name, value = parse_assignment(s, f"{path}:{n}")
        out.append((name, value, n))
    return out
