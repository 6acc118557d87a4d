"""Writing values so that Slurm's ``#SBATCH`` parser and bash read exactly what the user gave.

Slurm's batch-script parser (``_get_argument`` in sbatch's ``opt.c``) splits an ``#SBATCH``
line at unquoted whitespace, treats a backslash as an escape *even inside quotes*, strips one
level of single or double quotes and cuts the line at an unquoted ``#``. A value is therefore
written inside double quotes with ``\\`` and ``"`` backslash-escaped; everything else (spaces,
``#``, ``$``, backticks, single quotes, unicode) is then literal. sbatch also blanks the words
``packjob``/``hetjob`` anywhere on the line; an escape inside the word avoids that. A newline
would end the line and a NUL the C string, so both are refused with :class:`EscapeError`.

Shell lines are quoted with :func:`shlex.quote` / :func:`shlex.join` (never concatenation).
"""

from __future__ import annotations

import re
import shlex

from slurmkit.errors import UsageError

#: Values made only of these characters are written bare (``--nodes=2``); others are quoted.
_BARE = re.compile(r"[A-Za-z0-9_.,:@%/=+\-\[\]]+")
#: sbatch blanks these words (case-insensitive) anywhere on an #SBATCH line: they mark
#: heterogeneous-job components. A backslash inside the word hides it from that scan and is
#: then removed by the parser like any escape.
_HET_WORDS = re.compile(r"(?i)(p)(ackjob)|(h)(etjob)")


class EscapeError(UsageError):
    """A value cannot be written into a batch script (it holds a newline, CR or NUL).

    ``option`` (also ``.what``): the option or variable the value was for (``--comment``);
    ``message``: why, with the value's repr; ``value``: the value itself. CLI exit status 2.
    """

    def __init__(self, option: str, message: str, key: str | None = None, value: str | None = None):
        super().__init__(option, message, key)
        self.what = option
        self.value = value

    def __reduce__(self):
        return (type(self), (self.file, self.message, self.key, self.value))


def _refuse(what: str, value: str, reason: str) -> EscapeError:
    return EscapeError(what, f"{reason}: {value!r}", value=value)


_C_SPACE = " \t\n\v\f\r"  # C isspace() in the C locale (sbatch reads bytes)
_FORBIDDEN = {"\n": "newline", "\r": "carriage return", "\0": "NUL byte"}


def check_line_safe(what: str, value: str) -> str:
    """Return ``value`` unchanged, or raise :class:`EscapeError` if it holds a newline, CR or NUL."""
    for ch, name in _FORBIDDEN.items():
        if ch in value:
            raise _refuse(what, value, f"a {name} cannot be written into a batch script line")
    return value


def sbatch_quote(value: str, what: str = "value") -> str:
    """``value`` written for an ``#SBATCH`` line: bare when made only of safe characters, else
    double-quoted with ``\\`` and ``"`` escaped; the words ``packjob``/``hetjob`` (which sbatch
    blanks out) get an escape inside them.

    Inverse of Slurm's parser: ``parse_sbatch_arguments(sbatch_quote(v)) == [v]`` for every
    non-empty string without newline/CR/NUL.
    """
    check_line_safe(what, value)
    if value == "":
        raise _refuse(what, value, "an empty value cannot be written (sbatch drops it); leave the option out")
    if _BARE.fullmatch(value) and not _HET_WORDS.search(value):
        return value
    body = value.replace("\\", "\\\\").replace('"', '\\"')
    body = _HET_WORDS.sub(lambda m: (m.group(1) or m.group(3)) + "\\" + (m.group(2) or m.group(4)), body)
    return '"' + body + '"'


def sbatch_line(option: str, value: str | None) -> str:
    """One ``#SBATCH --option=value`` line (``value`` None: a flag such as ``--requeue``)."""
    if value is None:
        return f"#SBATCH --{option}"
    return f"#SBATCH --{option}={sbatch_quote(str(value), '--' + option)}"


def parse_sbatch_arguments(line: str) -> list[str]:
    """The arguments Slurm reads from the text after ``#SBATCH`` (a port of ``_get_argument``).

    Used by the tests as a model of sbatch; the sandbox tests check the real sbatch agrees.
    """
    line = _HET_WORDS.sub(lambda m: " " * len(m.group(0)), line)
    args, i, n = [], 0, len(line)
    while True:
        while i < n and line[i] in _C_SPACE:
            i += 1
        if i >= n:
            return args
        out, quoted, q, esc = [], False, "", False
        while i < n and (quoted or line[i] not in _C_SPACE) and line[i] != "\n":
            ch = line[i]
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
                i += 1
                continue
            elif quoted:
                if ch == q:
                    quoted = False
                    i += 1
                    continue
            elif ch in "\"'":
                quoted, q = True, ch
                i += 1
                continue
            elif ch == "#":
                if out:
                    args.append("".join(out))
                return args
            out.append(ch)
            i += 1
        args.append("".join(out))


def shell_quote(value: str, what: str = "value") -> str:
    """``value`` as one bash word (:func:`shlex.quote`); a newline inside quotes is fine for
    bash, a NUL cannot be passed in argv and is refused."""
    value = str(value)
    if "\0" in value:
        raise _refuse(what, value, "a NUL byte cannot be passed to a command")
    return shlex.quote(value)


def shell_join(argv, what: str = "command") -> str:
    """A command line as bash words (:func:`shlex.quote` per word), refusing NUL in any word."""
    return " ".join(shell_quote(str(a), what) for a in argv)


_VAR_REF = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


def shell_expand_word(value: str, what: str = "value") -> str:
    """``value`` as one bash word in which ``$NAME`` and ``${NAME}`` expand when the script runs
    (on the node; an unset variable gives "", even under ``set -u``) and everything else is
    literal: no command substitution, globbing or word splitting. ``"/a:$X"`` ->
    ``'/a:'"${X-}"``. Refuses NUL and newlines (one ``export`` line)."""
    value = check_line_safe(what, str(value))
    parts, pos = [], 0
    for m in _VAR_REF.finditer(value):
        if m.start() > pos:
            parts.append((value[pos:m.start()], False))
        parts.append((m.group(1) or m.group(2), True))
        pos = m.end()
    if pos < len(value):
        parts.append((value[pos:], False))
    return shell_word(parts, what)


def shell_word(parts, what: str = "value") -> str:
    """One bash word from ``parts``: ``[(text, is_variable)]``, a variable's value (by name,
    expanded when the script runs; unset gives "", even under ``set -u``) or literal text.
    ``[("/a:", False), ("X", True)]`` -> ``'/a:'"${X-}"``; no parts -> ``''``. Refuses NUL and
    newlines in literal text (one line)."""
    out = []
    for text, is_var in parts:
        out.append('"${' + text + '-}"' if is_var else shlex.quote(check_line_safe(what, text)))
    return "".join(out) or "''"
