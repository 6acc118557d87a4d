"""Slurm's config-file syntax (slurm.conf, gres.conf, cgroup.conf): the pure tokenizer.

One reader for every file in Slurm's ``Key=Value`` syntax, as slurmd reads it (``slurm.conf(5)``,
``gres.conf(5)``):

- ``#`` starts a comment anywhere on a line unless escaped as ``\\#`` or inside double quotes;
- a trailing ``\\`` continues the logical line on the next physical line;
- a logical line is blank, ``Include PATH`` (any case; ``PATH`` relative to the including file's
  directory, glob patterns expanded in sorted order), or ``Key=Value`` pairs separated by blanks;
  a value may be double-quoted (the quotes are removed);
- anything else raises :class:`ConfError` naming the file and line.

:mod:`slurmkit.slurm.conf` (the editable text model that install uses) and
:mod:`slurmkit.hooks.gres` (gres.conf on every hook run) both tokenize through here. It keeps to
the hooks' fast-import rules (docs/hooks.md): ``os`` and ``re`` only, patterns compiled where used;
a plain line (ASCII ``Key=Value`` words, no quote or backslash: every line of the usual gres.conf)
is read with string methods, so a hook compiles no pattern for it.
"""

from __future__ import annotations

import os

from slurmkit.errors import InputError, reading_failure


class ConfError(InputError):
    """A Slurm config line that cannot be parsed. ``file`` (str), ``line`` (1-based int), ``message``."""


_PAIR = r'\s*([A-Za-z][A-Za-z0-9_]*)=("(?:[^"\\]|\\.)*"|(?:[^\s"\\]|\\.)*)'


def split_comment(text: str) -> tuple[str, str]:
    """``(content, comment)`` of one logical line: the comment is what follows the first ``#``
    that is neither escaped (``\\#``) nor inside double quotes."""
    i = 0
    in_quote = False
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == '"':
            in_quote = not in_quote
        elif c == "#" and not in_quote:
            return text[:i], text[i + 1:]
        i += 1
    return text, ""


def parse_content(content: str, file, lineno: int) -> tuple[list, str | None]:
    """``(pairs, include)`` of a line's content (comment removed): ``pairs`` ``[(key as written,
    value unquoted)]``; ``include`` the raw path of an ``Include`` line, else None. Raises
    :class:`ConfError` (``file``, ``lineno``) for anything else."""
    stripped = content.strip()
    if not stripped:
        return [], None
    plain = _plain_pairs(stripped)
    if plain is not None:
        return plain
    import re

    m = re.match(r"include\s+(\S.*)$", stripped, re.IGNORECASE)
    if m and "=" not in stripped.split(None, 1)[0]:
        return [], m.group(1).strip()
    pairs = []
    pos = 0
    while pos < len(content):
        if not content[pos:].strip():
            break
        m = re.compile(_PAIR).match(content, pos)
        if not m:
            rest = content[pos:].strip()
            raise ConfError(file, lineno, f"expected Key=Value or 'Include PATH', found {rest[:40]!r}")
        value = m.group(2)
        if value.startswith('"'):
            value = value[1:-1]
        pairs.append((m.group(1), value))
        pos = m.end()
        if pos < len(content) and not content[pos].isspace():
            raise ConfError(file, lineno, f"unexpected {content[pos:pos + 20]!r} after {m.group(1)}=")
    return pairs, None


def _plain_pairs(stripped: str) -> tuple[list, str | None] | None:
    """:func:`parse_content`'s answer for the usual line, with string methods only (no pattern
    to compile on a hook's start-up): ASCII, no double quote, no backslash, every blank-separated
    word ``Key=Value`` with a key of ``[A-Za-z][A-Za-z0-9_]*``, or ``Include PATH``. None for any
    other line (quotes, escapes, non-ASCII, a word that is not a pair), which the patterns read
    (and refuse, with the error)."""
    if not stripped.isascii() or '"' in stripped or "\\" in stripped:
        return None
    words = stripped.split()
    if words[0].lower() == "include" and len(words) > 1:
        return [], stripped.split(None, 1)[1]
    pairs = []
    for word in words:
        key, eq, value = word.partition("=")
        if not eq or not key[:1].isalpha() or not key.replace("_", "").isalnum():
            return None
        pairs.append((key, value))
    return pairs, None


def logical_lines(lines: list) -> list[tuple[int, int, str]]:
    """Physical lines joined at a trailing ``\\``: ``[(index of the first physical line, count,
    logical text)]``."""
    out = []
    i = 0
    while i < len(lines):
        start = i
        logical = lines[i]
        while logical.endswith("\\") and not logical.endswith("\\\\") and i + 1 < len(lines):
            i += 1
            logical = logical[:-1] + " " + lines[i]
        out.append((start, i - start + 1, logical))
        i += 1
    return out


def parse_logical(logical: str, file, lineno: int) -> tuple[list, str | None, str]:
    """``(pairs, include, comment)`` of one logical line (see :func:`parse_content`); raises
    :class:`ConfError` for an unterminated double quote or a line that is not understood."""
    content, comment = split_comment(logical)
    if content.replace('\\"', "").count('"') % 2:
        raise ConfError(file, lineno, "unterminated double quote")
    pairs, include = parse_content(content, file, lineno)
    return pairs, include, comment


def include_paths(including_file: str, raw: str) -> list[str]:
    """Files an ``Include`` names: relative to the including file's directory; glob patterns
    expanded in sorted order."""
    p = raw.strip('"')
    if not os.path.isabs(p):
        p = os.path.join(os.path.dirname(os.fspath(including_file)), p)
    if any(c in p for c in "*?["):
        import glob

        return sorted(glob.glob(p))
    return [p]


def read_file(path) -> list[tuple[str, int, list]]:
    """Every ``Key=Value`` line of the config file ``path`` and of the files it ``Include``s
    (in reading order, includes expanded in place): ``[(file, line number, pairs)]``. Raises
    :class:`ConfError` for a line not understood, a missing included file (naming the including
    file and line), an include cycle, or a file that cannot be read (OSError's text)."""
    out: list[tuple[str, int, list]] = []
    seen: set = set()

    def visit(p: str, origin: tuple | None) -> None:
        key = os.path.realpath(p)
        if key in seen:
            raise ConfError(origin[0], origin[1], f"Include cycle: {p} is already included")
        seen.add(key)
        try:
            with open(p) as fh:
                text = fh.read()
        except FileNotFoundError:
            if origin:
                raise ConfError(origin[0], origin[1], f"included file {p} does not exist") from None
            raise ConfError(p, None, "file does not exist") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfError(origin[0] if origin else p, origin[1] if origin else None,
                            f"cannot read {p if origin else 'it'}: {reading_failure(exc, p)}") from None
        for start, _, logical in logical_lines(text.splitlines()):
            pairs, include, _ = parse_logical(logical, p, start + 1)
            if include:
                for child in include_paths(p, include):
                    visit(child, (p, start + 1))
            elif pairs:
                out.append((p, start + 1, pairs))

    visit(os.fspath(path), None)
    return out
