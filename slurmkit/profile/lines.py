"""Best-effort mapping of a dotted profile key to the line of the TOML text that writes it.

tomllib gives no positions for keys, so :func:`key_line` scans the text: it follows table
headers (``[a.b]``, ``[[a.b.c]]`` counted per array element) and then looks for ``key =`` (or
``"key" =``) inside that table, also inside inline tables written on one line.
"""

from __future__ import annotations

import re

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_PART = re.compile(r"([^.\[\]]+)(?:\[(\d+)\])?")


def _split_key(dotted: str) -> list[tuple[str, int | None]]:
    """``a.b[2].c`` -> [("a", None), ("b", 2), ("c", None)]."""
    out = []
    for m in _PART.finditer(dotted):
        out.append((m.group(1), int(m.group(2)) if m.group(2) is not None else None))
    return out


def _norm_header(h: str) -> tuple[str, ...]:
    return tuple(p.strip().strip('"').strip("'") for p in h.split("."))


def key_line(text: str, dotted: str) -> int | None:
    """1-based line in ``text`` where ``dotted`` (``node_types.x.gpus[1].cpus``) is written;
    the table header's line when only the table is found; None when nothing matches."""
    if not text or not dotted:
        return None
    parts = _split_key(dotted)
    lines = text.splitlines()
    # try the longest table prefix that appears as a header, then the rest as keys
    for cut in range(len(parts), 0, -1):
        table = parts[:cut]
        rest = [p for p, _ in parts[cut:]]
        names = tuple(p for p, _ in table)
        want_index = table[-1][1]
        seen = -1
        for i, line in enumerate(lines):
            m = _HEADER.match(line)
            if not m or _norm_header(m.group(2)) != names:
                continue
            seen += 1
            if want_index is not None and seen != want_index:
                continue
            if not rest:
                return i + 1
            found = _find_key(lines, i + 1, rest)
            return found if found else i + 1
    # no header: a top-level dotted or inline key
    found = _find_key(lines, 0, [p for p, _ in parts])
    return found


def _find_key(lines: list[str], start: int, rest: list[str]) -> int | None:
    """Line of ``rest[0] =`` between ``start`` and the next table header."""
    if not rest:
        return None
    first = re.escape(rest[0])
    pat = re.compile(rf'^\s*(?:"{first}"|\'{first}\'|{first})\s*[=.]')
    inner = re.compile(rf'(?:[{{,]\s*)(?:"{re.escape(rest[-1])}"|{re.escape(rest[-1])})\s*=')
    for i in range(start, len(lines)):
        if _HEADER.match(lines[i]):
            break
        if pat.match(lines[i]):
            return i + 1
    for i in range(start, len(lines)):
        if _HEADER.match(lines[i]):
            break
        if inner.search(lines[i]):
            return i + 1
    return None
