"""slurm.conf as text: parse, look up and edit lines without losing anything (a pure text model).

A :class:`ConfFile` keeps every line byte for byte (comments, blank lines, spacing, the line
ending); edits replace, insert or delete whole lines, so a file written back unchanged is
identical to the one read. ``Include`` lines are recorded (:attr:`ConfFile.includes`) and
followed by :func:`load_tree`, the one function here that reads files.

What is understood (Slurm's ``slurm.conf(5)`` syntax, tokenized by :mod:`slurmkit.slurm.syntax`, the
one reader gres.conf goes through too):

- ``#`` starts a comment anywhere on a line unless escaped as ``\\#``;
- a line is blank, a comment, ``Include PATH`` (``include`` in any case; ``PATH`` relative to the
  directory of the including file), or one or more ``Key=Value`` pairs separated by blanks
  (``NodeName=n1 CPUs=8 ...``); keys are case-insensitive; a value may be double-quoted;
- a trailing ``\\`` continues the logical line on the next physical line.

Anything else (a bare word, ``=value`` without a key, an unterminated quote) raises
:class:`ConfError` naming the file and line, so that an edit never writes into a file it did not
understand.
"""

from __future__ import annotations

import os

from slurmkit.errors import reading_failure
from slurmkit.records import field, record
from slurmkit.slurm import syntax
from slurmkit.slurm.syntax import ConfError, logical_lines, parse_logical

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["ConfError", "Entry", "ConfFile", "parse", "include_paths", "load_tree", "find_effective",
           "read_lines", "key_value_lines", "SECTION_KEYS"]

#: Keys that open a node / partition / nodeset definition: global keys go before the first one.
SECTION_KEYS = ("nodename", "partitionname", "nodeset", "downnodes", "frontendname", "switchname")

@record
class Entry:
    """One logical line: ``index`` of its first physical line in :attr:`ConfFile.lines`, ``count``
    physical lines, ``pairs`` as ``[(key, value)]`` with keys as written (``value`` unquoted),
    ``include`` (the raw path of an ``Include`` line, else None), ``comment`` (text after ``#``)."""

    index: int
    count: int
    pairs: list = field(default_factory=list)
    include: str | None = None
    comment: str = ""

    @property
    def lineno(self) -> int:
        """1-based line number of the entry's first physical line."""
        return self.index + 1

    def get(self, key: str) -> str | None:
        """Value of ``key`` (case-insensitive) on this line, or None."""
        for k, v in self.pairs:
            if k.lower() == key.lower():
                return v
        return None

    @property
    def first_key(self) -> str | None:
        return self.pairs[0][0].lower() if self.pairs else None


@record
class ConfFile:
    """One slurm.conf-syntax file: ``path`` (Path), ``lines`` (physical lines without their line
    ending), ``newline`` (the file's line ending), ``final_newline`` (bool), ``entries`` (parsed
    :class:`Entry` per logical line). Build with :func:`parse`; edit with :meth:`replace`,
    :meth:`insert`, :meth:`delete`; :meth:`text` gives the file's text back."""

    path: Path
    lines: list
    newline: str = "\n"
    final_newline: bool = True
    entries: list = field(default_factory=list)

    def text(self) -> str:
        """The file's text with the edits applied (identical to the input when unedited)."""
        body = self.newline.join(self.lines)
        return body + (self.newline if self.final_newline and self.lines else "")

    def reparse(self) -> None:
        """Re-parse :attr:`lines` after an edit (raises :class:`ConfError`)."""
        self.entries = _entries(self.lines, self.path)

    @property
    def includes(self) -> list[tuple[int, str]]:
        """``[(lineno, raw path)]`` of the file's ``Include`` lines."""
        return [(e.lineno, e.include) for e in self.entries if e.include]

    def find(self, key: str) -> Entry | None:
        """The last global line setting ``key`` (case-insensitive) as its first key, or None
        (Slurm uses the last value when a key is repeated)."""
        found = None
        for e in self.entries:
            if e.first_key == key.lower():
                found = e
        return found

    def raw(self, entry: Entry) -> str:
        """The raw text of an entry (its physical lines joined with newlines)."""
        return "\n".join(self.lines[entry.index:entry.index + entry.count])

    def replace(self, entry: Entry, text: str) -> None:
        """Replace the entry's physical lines by ``text`` (one or more lines)."""
        self.lines[entry.index:entry.index + entry.count] = text.split("\n")
        self.reparse()

    def delete(self, entry: Entry) -> None:
        """Remove the entry's physical lines."""
        del self.lines[entry.index:entry.index + entry.count]
        self.reparse()

    def insert(self, index: int, text: str) -> None:
        """Insert ``text`` (one or more lines) before physical line ``index`` (0-based)."""
        self.lines[index:index] = text.split("\n")
        self.reparse()

    def global_end(self) -> int:
        """Physical index where global settings end: before the first NodeName/PartitionName/...
        line, skipping back over the comment block directly above it; the end of file if none."""
        for e in self.entries:
            if e.first_key in SECTION_KEYS:
                i = e.index
                while i > 0 and self.lines[i - 1].lstrip().startswith("#"):
                    i -= 1
                return i
        return len(self.lines)


def _entries(lines: list, path) -> list:
    entries = []
    for start, count, logical in logical_lines(lines):
        pairs, include, comment = parse_logical(logical, path, start + 1)
        entries.append(Entry(start, count, pairs, include, comment))
    return entries


def parse(text: str, path="slurm.conf") -> ConfFile:
    """Parse slurm.conf-syntax ``text`` read from ``path`` into a :class:`ConfFile`.

    Raises :class:`ConfError` (file, line, message) on a line that is not understood.
    """
    from pathlib import Path

    newline = "\r\n" if "\r\n" in text else "\n"
    final = text.endswith(newline) or text == ""
    body = text[: -len(newline)] if text.endswith(newline) else text
    lines = body.split(newline) if body else []
    conf = ConfFile(Path(path), lines, newline, final)
    conf.reparse()
    return conf


def include_paths(conf: ConfFile, raw: str) -> list[Path]:
    """Files an ``Include`` names (:func:`slurmkit.slurm.syntax.include_paths`) as Paths."""
    from pathlib import Path

    return [Path(p) for p in syntax.include_paths(str(conf.path), raw)]


def load_tree(path) -> list[ConfFile]:
    """Read ``path`` and every file it ``Include``s (recursively, depth-first in file order).

    Returns ``[main, included...]``. Raises :class:`ConfError` for an unparseable line, a
    missing included file (naming the including file and line) or an include cycle.
    """
    from pathlib import Path

    path = Path(path)
    out: list[ConfFile] = []
    seen: set = set()

    def visit(p: Path, origin: tuple | None):
        key = os.path.realpath(p)
        if key in seen:
            raise ConfError(origin[0], origin[1], f"Include cycle: {p} is already included")
        seen.add(key)
        try:
            text = p.read_text()
        except FileNotFoundError:
            if origin:
                raise ConfError(origin[0], origin[1], f"included file {p} does not exist") from None
            raise ConfError(p, 0, "file does not exist") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfError(origin[0] if origin else p, origin[1] if origin else 0,
                            f"cannot read {p if origin else 'it'}: {reading_failure(exc, p)}") from None
        conf = parse(text, p)
        out.append(conf)
        for lineno, raw in conf.includes:
            for child in include_paths(conf, raw):
                visit(child, (p, lineno))

    visit(path, None)
    return out


def _precise(conf: ConfFile, by_path: dict) -> list:
    """Flatten into per-entry order: ``[ConfFile]`` repeated so that find() over a file yields
    its last definition in the right place. Implemented as an ordered list of single-entry views."""
    views = []
    for e in conf.entries:
        if e.include:
            for child in include_paths(conf, e.include):
                if child in by_path:
                    views.extend(_precise(by_path[child], by_path))
        elif e.pairs:
            views.append(_View(conf, e))
    return views


class _View:
    """One entry of one file, seen as a one-line file by :func:`find_effective`."""

    def __init__(self, conf: ConfFile, entry: Entry):
        self.conf = conf
        self.entry = entry

    def find(self, key):
        return self.entry if self.entry.first_key == key.lower() else None


def entries_in_order(tree: list[ConfFile]) -> list[tuple[ConfFile, Entry]]:
    """Every Key=Value entry of a :func:`load_tree` result in the order Slurm reads them
    (each ``Include`` expanded in place), with the file it is in."""
    if not tree:
        return []
    by_path = {conf.path: conf for conf in tree}
    return [(view.conf, view.entry) for view in _precise(tree[0], by_path)]


def find_effective(tree: list[ConfFile], key: str) -> tuple[ConfFile, Entry] | None:
    """The file and entry of the definition of a global ``key`` that Slurm ends up using (the last),
    walking a :func:`load_tree` result in reading order with includes expanded in place; or None."""
    if not tree:
        return None
    by_path = {conf.path: conf for conf in tree}
    found = None
    for view in _precise(tree[0], by_path):
        if view.find(key) is not None:
            found = (view.conf, view.entry)
    return found


def key_value_lines(tree: list[ConfFile]) -> list[tuple[str, int, list]]:
    """The ``Key=Value`` lines of a :func:`load_tree` result in Slurm's reading order
    (:func:`entries_in_order`) as ``[(file, line number, [(key as written, value)])]``: the
    shape :func:`read_lines` gives and the readers of one file's records
    (:func:`slurmkit.slurm.gres_conf.records`) take."""
    return [(str(conf.path), e.lineno, e.pairs) for conf, e in entries_in_order(tree)]


def read_lines(path) -> list[tuple[str, int, list]]:
    """:func:`key_value_lines` of the file at ``path`` and the files it ``Include``s, read
    without keeping the text model (:func:`slurmkit.slurm.syntax.read_file`: what a hook does
    on every job; no ``pathlib``). Raises :class:`ConfError` for a line not understood, a
    missing file or included file, or an include cycle."""
    return syntax.read_file(path)
