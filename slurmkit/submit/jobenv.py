"""A job's own environment (``--env NAME=VALUE``, ``--env-file FILE``): parse the assignments.

The values are written into the batch script as ``export NAME=...`` lines in which ``$OTHER``
and ``${OTHER}`` expand on the node when the job runs, as in a shell (so
``LD_LIBRARY_PATH=/opt/efa/lib:$LD_LIBRARY_PATH`` prepends), and nothing else does
(:func:`slurmkit.submit.escape.shell_expand_word`).
"""

from __future__ import annotations

import re
from typing import NamedTuple

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


class EnvLine(NamedTuple):
    """One assignment of an env file: ``name``; ``parts``, the value as
    :func:`slurmkit.submit.escape.shell_word` takes it (``[(text, is_variable)]``: literal text,
    or a variable's name expanded on the node); ``line``, its 1-based line number."""

    name: str
    parts: tuple[tuple[str, bool], ...]
    line: int

    @property
    def value(self) -> str:
        """The value as bash would write it back, variables as ``${NAME}`` (for --explain)."""
        return "".join("${%s}" % t if v else t for t, v in self.parts)


#: Characters that end or change a shell word when unquoted (bash(1) "metacharacters"), which an
#: env file line has no use for.
_META = set(";&|<>()`")
_DQ_ESCAPES = set('$`"\\')


def _var_ref(text: str, i: int, fail) -> tuple[str | None, int]:
    """At ``text[i] == "$"``: ``(NAME, index after it)`` for ``$NAME`` / ``${NAME}``; ``(None,
    i + 1)`` for a ``$`` bash keeps literal (at the end, before a space, ``/``, ``:``...);
    refuses what bash would do more with (``$(...)``, ``${X:-def}``, ``$1``, ``$$``)."""
    m = _NAME.match(text, i + 1)
    if m:
        return m.group(0), m.end()
    if text.startswith("{", i + 1):
        m = _NAME.match(text, i + 2)
        if m and text.startswith("}", m.end()):
            return m.group(0), m.end() + 1
        fail("${...} other than ${NAME} (defaults, substrings and the like are not read here: "
             "write $NAME, or the value itself)")
    nxt = text[i + 1:i + 2]
    if nxt == "(":
        fail("$(...) (slurmkit does not run commands from an env file: write the value itself)")
    if nxt and (nxt.isdigit() or nxt in "$!?#*@-"):
        fail(f"${nxt} (a special parameter: write $NAME or the value itself)")
    return None, i + 1


def parse_env_line(line: str, where: str) -> EnvLine | None:
    """One line of an env file read as bash reads a simple assignment: ``[export ]NAME=VALUE``
    where VALUE is a shell word: single quotes keep everything literal (``'$HOME'`` stays
    ``$HOME``), double quotes and unquoted text expand ``$NAME`` / ``${NAME}`` on the node
    (``\\`` escapes ``$ ` " \\`` inside double quotes, any character outside), the quotes
    themselves are removed, and an unquoted ``#`` after whitespace starts a comment. None for a
    blank or comment line. Raises :class:`UsageError` naming ``where`` (``file:line``) and what
    was expected for anything else: unquoted whitespace inside the value (a second word: a
    command in bash), an unterminated quote (values span one line), command substitution,
    ``${X:-def}`` forms, special parameters, unquoted ``; & | < > ( )``, a leading unquoted ``~``."""
    s = line.strip()
    if not s or s.startswith("#"):
        return None

    def fail(expected: str):
        raise UsageError(f"{where} {line.strip()!r}", "expected NAME=VALUE as a shell assignment; not handled: "
                         + expected)

    if s.startswith("export") and s[6:7] in (" ", "\t"):
        s = s[6:].lstrip()
    m = _NAME.match(s)
    if not m or not s.startswith("=", m.end()):
        raise UsageError(f"{where} {line.strip()!r}", "expected NAME=VALUE with NAME a shell variable name "
                         "(letters, digits, _; not starting with a digit), optionally after export")
    name, text, i = m.group(0), s, m.end() + 1
    parts: list[tuple[str, bool]] = []
    lit: list[str] = []

    def flush():
        if lit:
            parts.append(("".join(lit), False))
            lit.clear()

    def var(n: str):
        flush()
        parts.append((n, True))

    if text.startswith("~", i):
        fail("a leading unquoted ~ (bash would put your home directory there: write $HOME)")
    while i < len(text):
        c = text[i]
        if c in " \t":
            rest = text[i:].lstrip()
            if rest and not rest.startswith("#"):
                fail(f"unquoted whitespace before {rest!r} (quote the value: {name}=\"...\")")
            break
        if c == "'":
            end = text.find("'", i + 1)
            if end < 0:
                fail("an unterminated ' (a value on one line, quotes closed)")
            lit.append(text[i + 1:end])
            i = end + 1
        elif c == '"':
            i += 1
            while True:
                if i >= len(text):
                    fail('an unterminated " (a value on one line, quotes closed)')
                c = text[i]
                if c == '"':
                    i += 1
                    break
                if c == "\\" and text[i + 1:i + 2] in _DQ_ESCAPES:
                    lit.append(text[i + 1])
                    i += 2
                elif c == "$":
                    n, i2 = _var_ref(text, i, fail)
                    var(n) if n else lit.append("$")
                    i = i2
                elif c == "`":
                    fail("`...` (slurmkit does not run commands from an env file: write the value itself)")
                else:
                    lit.append(c)
                    i += 1
        elif c == "\\":
            if i + 1 >= len(text):
                fail("a trailing \\ (values span one line)")
            lit.append(text[i + 1])
            i += 2
        elif c == "$":
            n, i2 = _var_ref(text, i, fail)
            var(n) if n else lit.append("$")
            i = i2
        elif c in _META:
            fail(f"an unquoted {c!r} (quote the value: {name}=\"...\")")
        else:
            lit.append(c)
            i += 1
    flush()
    return EnvLine(name, tuple(parts), 0)


def parse_env_file(text: str, path: str) -> list[EnvLine]:
    """An env file's assignments, one a line, each read as bash reads it
    (:func:`parse_env_line`; blank lines and ``#`` comments skipped) -> ``[EnvLine]`` in file
    order, with their line numbers. Raises :class:`UsageError` naming ``path:line`` and what was
    expected for a line it does not handle."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        got = parse_env_line(line, f"{path}:{n}")
        if got is not None:
            out.append(got._replace(line=n))
    return out
