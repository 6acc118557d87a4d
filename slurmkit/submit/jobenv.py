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


def parse_env_line(line: str, where: str) -> list[EnvLine]:
    """One line of an env file read as bash reads simple assignments: ``[export ]NAME=VALUE
    [NAME=VALUE ...]`` (several on one line, as ``export FI_EFA_USE_HUGE_PAGE=0 NCCL_DEBUG=INFO``
    in public sbatch scripts, in order) where each VALUE is a shell word: single quotes keep
    everything literal (``'$HOME'`` stays ``$HOME``), double quotes and unquoted text expand
    ``$NAME`` / ``${NAME}`` on the node (``\\`` escapes ``$ ` " \\`` inside double quotes, any
    character outside), the quotes themselves are removed, and an unquoted ``#`` after
    whitespace starts a comment. ``[]`` for a blank or comment line; else ``[EnvLine]`` (line
    0: :func:`parse_env_file` numbers them). Raises :class:`UsageError` naming ``where``
    (``file:line``) and what was expected for anything else: a word after a value that is not
    an assignment (a command in bash), on an ``export`` line a value reading a name assigned
    earlier on that line (bash expands the whole line first, so it would read the name's
    previous value), an unterminated quote (values span one line), command substitution,
    ``${X:-def}`` forms, special parameters, unquoted ``; & | < > ( )``, a leading unquoted ``~``."""
    s = line.strip()
    if not s or s.startswith("#"):
        return []

    def fail(expected: str):
        raise UsageError(f"{where} {line.strip()!r}", "expected NAME=VALUE as a shell assignment; not handled: "
                         + expected)

    exported = s.startswith("export") and s[6:7] in (" ", "\t")
    if exported:
        s = s[6:].lstrip()
    out: list[EnvLine] = []
    i = 0
    while True:
        got, i = _assignment(s, i, where, line, fail, out[-1].name if out else None)
        if exported:
            early = {a.name for a in out}
            read = [n for n, is_var in got.parts if is_var and n in early]
            if read:
                fail(f"${read[0]} after {read[0]}= on the same export line (bash expands the whole line "
                     f"before it assigns, so it reads {read[0]}'s earlier value): put {got.name}=... on a "
                     "line of its own")
        out.append(got)
        rest = s[i:].lstrip()
        if not rest or rest.startswith("#"):
            return out
        i = len(s) - len(rest)


def _assignment(s: str, i: int, where: str, line: str, fail, prev: str | None) -> tuple[EnvLine, int]:
    """The assignment ``NAME=WORD`` at ``s[i]`` (see :func:`parse_env_line`; ``prev``: the name
    assigned before it on the line, if any) -> (it, the index after its word: the end, or
    unquoted whitespace)."""
    m = _NAME.match(s, i)
    if not m or not s.startswith("=", m.end()):
        if prev is None:
            raise UsageError(f"{where} {line.strip()!r}", "expected NAME=VALUE with NAME a shell variable name "
                             "(letters, digits, _; not starting with a digit), optionally after export")
        fail(f"unquoted whitespace before {s[i:]!r} (quote the value: {prev}=\"...\"; a word that is not "
             "NAME=VALUE is a command to bash)")
    name, text, i = m.group(0), s, m.end() + 1
    parts: list[tuple[str, bool]] = []
    lit: list[str] = []

    def flush():
        if lit:
            parts.append(("".join(lit), False))
            lit.clear()

    def dollar(at: int) -> int:
        """``$NAME`` / ``${NAME}`` at ``text[at]`` (as bash expands it, on the node), or a lone
        ``$``: recorded; returns the index after it."""
        n, after = _var_ref(text, at, fail)
        if n:
            flush()
            parts.append((n, True))
        else:
            lit.append("$")
        return after

    if text.startswith("~", i):
        fail("a leading unquoted ~ (bash would put your home directory there: write $HOME)")
    while i < len(text):
        c = text[i]
        if c in " \t":
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
                    i = dollar(i)
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
            i = dollar(i)
        elif c in _META:
            fail(f"an unquoted {c!r} (quote the value: {name}=\"...\")")
        else:
            lit.append(c)
            i += 1
    flush()
    return EnvLine(name, tuple(parts), 0), i


def parse_env_file(text: str, path: str) -> list[EnvLine]:
    """An env file's assignments (one or more a line), read as bash reads them
    (:func:`parse_env_line`; blank lines and ``#`` comments skipped) -> ``[EnvLine]`` in file
    order, with their line numbers. Raises :class:`UsageError` naming ``path:line`` and what was
    expected for a line it does not handle."""
    return [a._replace(line=n) for n, line in enumerate(text.splitlines(), 1)
            for a in parse_env_line(line, f"{path}:{n}")]
