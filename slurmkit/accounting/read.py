"""Split sacct text into a table of strings (pyarrow), counting every row it cannot split.

Input: the bytes sacct printed (live ingest) or a captured file: with or without a header line,
``|`` or any other delimiter (one or more characters, e.g. ``☃``), ``--parsable``'s trailing
delimiter, ``#`` comment lines, blank lines, and a field list given separately when there is no
header. Output: a ``pyarrow.Table`` with one string column per field (canonical names from
:mod:`slurmkit.accounting.fields`) and a :class:`~slurmkit.accounting.quality.DataQuality`.

Rows that do not split into the expected number of fields are skipped with a reason and line;
when JobName is the last field, extra delimiters are a delimiter inside the job name and are
joined back (counted, listed as repaired); a short line after a good one is the tail of a name
with an embedded newline (skipped: ``newline in a field``). Bad UTF-8 is replaced by U+FFFD and
the rows are listed as repaired.
"""

from __future__ import annotations

from slurmkit.errors import InputError

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv

from slurmkit.accounting.fields import DELIMITER, canonical, looks_like_header
from slurmkit.accounting.parse import NO_TIME
from slurmkit.accounting.quality import DataQuality

_CANDIDATES = (DELIMITER, "|", "\u2603", "\t", ";", ",")
_SEP = DELIMITER.encode()


class AccountingInputError(InputError):
    """sacct input that cannot be read at all: ``file``, ``line`` (1-based or None) and what is
    wrong. The CLI prints ``file:line: message`` and exits 2."""



def _header_names(first_fields: list[str]) -> list[str]:
    """Canonical field names of a header line split on the delimiter (a trailing delimiter's
    empty last field dropped)."""
    names = [canonical(f) for f in first_fields]
    return names[:-1] if names and names[-1] == "" else names

def read_field_list(text: str) -> list[str]:
    """A field list as given to ``sacct -o`` or saved beside a capture: comma, ``|``, tab or
    whitespace separated; ``%N`` width suffixes are dropped. Returns canonical names."""
    parts = [p for p in re.split(r"[,|\s]+", text.strip()) if p]
    return [canonical(p.split("%")[0]) for p in parts]


def _line_no(data: bytes, pos: int) -> int:
    return data.count(b"\n", 0, pos) + 1


def _locate(data: bytes, text: bytes, start_hint: int = 0) -> int | None:
    """1-based line of the first line of ``data`` that is exactly ``text`` (else that contains
    it); None when not found."""
    if data.startswith(text + b"\n") or data == text:
        return 1
    pos = data.find(b"\n" + text + b"\n")
    if pos < 0 and data.endswith(b"\n" + text):
        pos = len(data) - len(text) - 1
    if pos >= 0:
        return _line_no(data, pos + 1)
    pos = data.find(text)
    return _line_no(data, pos) if pos >= 0 else None


def _guess_delimiter(line: str, nfields: int | None) -> str:
    best, best_n = "|", -1
    for cand in _CANDIDATES:
        n = line.count(cand)
        if n == 0:
            continue
        if nfields is not None and n + 1 in (nfields, nfields + 1):
            return cand
        if n > best_n:
            best, best_n = cand, n
    return best


def _is_utf8(data) -> bool:
    """True when ``data`` (bytes or a memoryview of bytes) is valid UTF-8: ASCII is checked
    without decoding (the usual case), anything else by decoding."""
    raw = data.obj if isinstance(data, memoryview) else data
    if raw.isascii():   # (the whole underlying buffer: a superset of the view)
        return True
    try:
        str(data, "utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _fix_utf8(data: bytes) -> bytes:
    """``data`` with each run of invalid UTF-8 bytes replaced by one U+FFFD."""
    text = data.decode("utf-8", errors="surrogateescape")
    return re.sub("[\udc80-\udcff]+", "\ufffd", text).encode("utf-8")


def _repair_utf8(data: bytes, dq: DataQuality, source: str, line_offset: int) -> bytes:
    """:func:`_fix_utf8`; each row touched is listed as repaired (its line: ``line_offset`` +
    its line in ``data``). Done before splitting: pyarrow cannot hand a row with bad UTF-8 and
    the wrong number of fields to the bad-row handler (it fails decoding it)."""
    text = data.decode("utf-8", errors="surrogateescape")
    for m in re.finditer(r"[^\n]*[\udc80-\udcff][^\n]*", text):
        line = text.count("\n", 0, m.start()) + 1 + line_offset
        dq.repair("bad UTF-8 (replaced by U+FFFD)", source, line,
                  m.group(0).encode("utf-8", "surrogateescape").decode("utf-8", "replace"))
    return _fix_utf8(data)


def read_sacct_bytes(data: bytes, source: str = "<sacct>", fields: list[str] | None = None,
                     delimiter: str | None = None) -> tuple[pa.Table, DataQuality]:
    """Split sacct output into string columns. See the module docstring.

    ``fields``: the field list when the text has no header (a header line wins when both are
    there and agree in length). ``delimiter``: None to detect from the first line. Raises
    :class:`AccountingInputError` (naming ``source`` and the line) when no field list is known
    or no row matches it.
    """
    dq = DataQuality()
    # 1. comment and blank lines (pyarrow has no comment support): drop, count, keep line map
    line_offset = 0  # physical lines dropped before the first data line (header, comments)
    if data.startswith(b"#") or b"\n#" in data or data.startswith(b"\n") or b"\r\n" in data:
        kept, first_seen = [], False
        lines = data.replace(b"\r\n", b"\n").split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        for raw in lines:
            if raw.startswith(b"#") or not raw.strip():
                dq.ignored_lines["comment" if raw.startswith(b"#") else "blank"] += 1
                if not first_seen:
                    line_offset += 1
                continue
            first_seen = True
            kept.append(raw)
        data = b"\n".join(kept) + b"\n"
    if not data.strip():
        return pa.table({n: pa.array([], pa.string()) for n in (fields or ["JobID"])}), dq

    # 3. header / field list / delimiter
    nl = data.find(b"\n")
    first = data[:nl if nl >= 0 else len(data)].decode("utf-8", errors="replace")
    delim = delimiter or _guess_delimiter(first, len(fields) if fields else None)
    first_fields = first.split(delim)
    header = looks_like_header(first_fields)
    if header:
        names = _header_names(first_fields)
        data = data[nl + 1:] if nl >= 0 else b""
        line_offset += 1
    elif fields:
        names = [canonical(f) for f in fields]
    else:
        raise AccountingInputError(source, line_offset + 1,
                                   "no header line and no field list (give the sacct -o fields, "
                                   "e.g. --sacct-fields FILE)")
    if len(set(names)) != len(names):
        raise AccountingInputError(source, line_offset, f"repeated field in the field list: {names}")
    if "JobID" not in names:
        raise AccountingInputError(source, line_offset or None, "the field list has no JobID")
    if len(delim.encode()) == 1 and delim not in ('"', "\n", "\r"):
        sep = delim              # pyarrow splits on it directly: no copy of the text
    else:
        sep = DELIMITER
        if _SEP in data:
            data = data.replace(_SEP, b" ")
        data = data.replace(delim.encode(), _SEP)
    bsep = sep.encode()

    # --parsable: every line ends with the delimiter -> one extra empty column
    nl = data.find(b"\n")
    sample = data[:nl if nl >= 0 else len(data)]
    ncols_first = sample.count(bsep) + 1
    trailing = sample.endswith(bsep) and ncols_first == len(names) + 1
    col_names = names + (["_trailing"] if trailing else [])
    expected = len(col_names)

    bad: list[tuple[int, str]] = []

    def on_invalid(row):
        bad.append((row.actual_columns, row.text))
        return "skip"

    def read(buf):
        return pacsv.read_csv(
            pa.py_buffer(buf),
            read_options=pacsv.ReadOptions(column_names=col_names, block_size=1 << 24),
            parse_options=pacsv.ParseOptions(delimiter=sep, quote_char=False,
                                              double_quote=False, escape_char=False,
                                              newlines_in_values=False, ignore_empty_lines=True,
                                              invalid_row_handler=on_invalid),
            # (valid UTF-8: checked, or repaired, below)
            convert_options=pacsv.ConvertOptions(column_types={n: pa.string() for n in col_names},
                                                 check_utf8=False, strings_can_be_null=False,
                                                 quoted_strings_can_be_null=False))

    if not _is_utf8(data):
        data = _repair_utf8(data, dq, source, line_offset)
    try:
        table = read(data)
    except pa.ArrowInvalid as exc:
        raise AccountingInputError(source, None, f"cannot split the text: {exc}") from None
    if trailing:
        table = table.drop_columns(["_trailing"])

    dq.rows_read = table.num_rows + len(bad)
    if table.num_rows == 0 and bad:
        ncols = bad[0][0] - (1 if trailing else 0)
        raise AccountingInputError(source, _locate(data, bad[0][1].encode()) + line_offset,
                                   f"rows have {ncols} fields but the field list has {len(names)} "
                                   f"({','.join(names)}); give the field list the file was written with")

    # 4. rows that did not split: repair a delimiter in a trailing JobName, else skip
    repaired_rows = []
    name_last = names[-1] == "JobName"
    prev_ok = True
    for ncols, text in bad:
        line = _locate(data, text.encode())
        line = line + line_offset if line else None
        if ncols > expected and name_last and not trailing:
            parts = text.split(sep)
            parts = parts[:len(names) - 1] + [delim.join(parts[len(names) - 1:])]
            repaired_rows.append(parts)
            dq.repair("delimiter inside JobName (joined)", source, line, text.replace(sep, delim))
            continue
        if ncols < expected and prev_ok:
            dq.skip("too few fields (continuation of a field with a newline?)", 1, source, line,
                    text.replace(sep, delim))
        else:
            dq.skip(f"wrong number of fields ({ncols - (1 if trailing else 0)} for {len(names)})", 1,
                    source, line, text.replace(sep, delim))
    if repaired_rows:
        extra = pa.table({n: pa.array([r[i] for r in repaired_rows], pa.string())
                          for i, n in enumerate(names)})
        table = pa.concat_tables([table, extra])
    return table, dq


def read_sacct_file(path, fields: list[str] | None = None, delimiter: str | None = None
                    ) -> tuple[pa.Table, DataQuality]:
    """:func:`read_sacct_bytes` on a file (``source`` = the path as given)."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise AccountingInputError(path, None, exc.strerror or str(exc)) from None
    return read_sacct_bytes(data, str(path), fields, delimiter)


def stream_sacct_file(path, fields: list[str] | None = None, delimiter: str | None = None,
                      block_bytes: int = 64 << 20, int_fields=()):
    """Read a sacct file in blocks: ``(iterator of pyarrow Tables, DataQuality)``: string
    columns, except ``int_fields`` (below).

    Same rules and data-quality accounting as :func:`read_sacct_bytes`, but the text is never
    held whole in memory (large captures, the benchmark). Files that need rewriting first
    (``#`` comments or blank lines at the top, CRLF, a delimiter of more than one byte) are read
    with :func:`read_sacct_file` and come as one table. The ``DataQuality`` is complete once
    the iterator is exhausted.

    ``block_bytes``: the size of a block (64 MiB: each block has a fixed cost in the typing
    that follows, about 30 ms; a 1M-job capture is ~15 blocks).

    ``int_fields``: fields the CSV reader converts to int64 itself (epoch times, counts), with
    :data:`~slurmkit.accounting.parse.NO_TIME` (``Unknown``, ``None``, "" ...) as null; a block
    where one of them holds anything else (an ISO time, a sign-less overflow, spaces) is read
    again with every column as a string, so a block's column is int64 or string.
    """
    p = Path(path)
    try:
        with open(p, "rb") as fh:
            head = fh.read(1 << 20)
    except OSError as exc:
        raise AccountingInputError(path, None, exc.strerror or str(exc)) from None
    nl = head.find(b"\n")
    first = head[:nl if nl >= 0 else len(head)].decode("utf-8", errors="replace")
    delim = delimiter or _guess_delimiter(first, len(fields) if fields else None)
    simple = (head and not head.startswith((b"#", b"\n")) and b"\n#" not in head and b"\r" not in head
              and len(delim.encode()) == 1 and delim not in ('"', "\n", "\r"))
    if not simple:
        table, dq = read_sacct_file(path, fields, delimiter)
        return iter([table]), dq
    first_fields = first.split(delim)
    header = looks_like_header(first_fields)
    if header:
        names = _header_names(first_fields)
    elif fields:
        names = [canonical(f) for f in fields]
    else:
        raise AccountingInputError(path, 1, "no header line and no field list (give the sacct -o "
                                            "fields, e.g. --sacct-fields FILE)")
    if "JobID" not in names or len(set(names)) != len(names):
        raise AccountingInputError(path, 1 if header else None,
                                   f"the field list needs JobID once and no repeats: {names}")
    start = nl + 1 if header else 0
    second_end = head.find(b"\n", start)
    sample = head[start:second_end if second_end >= 0 else len(head)]
    bsep = delim.encode()
    trailing = sample.endswith(bsep) and sample.count(bsep) + 1 == len(names) + 1
    col_names = names + (["_trailing"] if trailing else [])
    expected = len(col_names)
    dq = DataQuality()
    bad: list[tuple[int, str]] = []

    def on_invalid(row):
        bad.append((row.actual_columns, row.text))
        return "skip"

    ints = [n for n in int_fields if n in col_names]

    def read_block(buf, typ, as_int=()):
        return pacsv.read_csv(
            pa.py_buffer(buf),
            read_options=pacsv.ReadOptions(column_names=col_names, block_size=4 << 20),
            parse_options=pacsv.ParseOptions(delimiter=delim, quote_char=False, double_quote=False,
                                             escape_char=False, newlines_in_values=False,
                                             ignore_empty_lines=True, invalid_row_handler=on_invalid),
            convert_options=pacsv.ConvertOptions(
                column_types={n: pa.int64() if n in as_int else typ for n in col_names},
                # null_values apply to the int64 columns only (strings are never null); the
                # block is valid UTF-8 (checked, or repaired, before)
                check_utf8=False, strings_can_be_null=False, null_values=list(NO_TIME)))

    def read_text(buf):
        nbad = len(bad)
        if ints:
            try:
                return read_block(buf, pa.string(), ints)
            except pa.ArrowInvalid:
                # not all integers: read as text; its bad rows are reported again
                del bad[nbad:]
        return read_block(buf, pa.string())

    def blocks():
        """``(file offset, bytes)`` of the file in blocks of about ``block_bytes`` that end at
        a newline (the header line dropped)."""
        with open(p, "rb") as fh:
            if header:
                fh.readline()
            while True:
                offset = fh.tell()
                buf = fh.read(block_bytes)
                while len(buf) >= block_bytes and b"\n" not in buf:
                    more = fh.read(block_bytes)   # a line longer than a block (rare)
                    if not more:
                        break
                    buf += more
                if not buf:
                    return
                cut = buf.rfind(b"\n") + 1
                if cut == 0 or cut == len(buf):
                    yield offset, buf
                    continue
                fh.seek(cut - len(buf), 1)  # the unfinished last line starts the next block
                yield offset, memoryview(buf)[:cut]

    def lines_before(offset: int) -> int:
        """Lines of the file before byte ``offset`` (only for a block that needs repair)."""
        with open(p, "rb") as fh:
            return fh.read(offset).count(b"\n")

    def gen():
        nrows = 0
        any_repaired = False
        for offset, buf in blocks():
            # each block is split by pyarrow's multithreaded reader straight into strings; a
            # block with bad UTF-8 is repaired first (its rows listed with their lines)
            nbad = len(bad)
            if not _is_utf8(buf):
                buf = _repair_utf8(bytes(buf), dq, str(path), lines_before(offset))
                any_repaired = True
            try:
                t = read_text(buf)
            except pa.ArrowInvalid as exc:
                raise AccountingInputError(path, None, f"cannot split the text: {exc}") from None
            if len(bad) > nbad + 1:
                # the multithreaded reader reports bad rows in any order: keep the file's order
                data = buf.obj if isinstance(buf, memoryview) else buf
                bad[nbad:] = sorted(bad[nbad:], key=lambda b: data.find(
                    b[1].encode("utf-8", errors="surrogateescape")))
            del buf
            if trailing:
                t = t.drop_columns(["_trailing"])
            nrows += t.num_rows
            yield t
        dq.rows_read = nrows + len(bad)
        if nrows == 0 and bad:
            raise AccountingInputError(path, None, f"rows have {bad[0][0] - (1 if trailing else 0)} fields "
                                                   f"but the field list has {len(names)} ({','.join(names)})")
        if not bad:
            return
        data = p.read_bytes()
        if any_repaired:   # the bad rows' text is the repaired text
            data = _fix_utf8(data)
        extra = []
        prev_ok = True
        for ncols, text in bad:
            line = _locate(data, text.encode("utf-8", errors="surrogateescape"))
            if ncols > expected and names[-1] == "JobName" and not trailing:
                parts = text.split(delim)
                extra.append(parts[:len(names) - 1] + [delim.join(parts[len(names) - 1:])])
                dq.repair("delimiter inside JobName (joined)", str(path), line, text)
            elif ncols < expected and prev_ok:
                dq.skip("too few fields (continuation of a field with a newline?)", 1, str(path), line, text)
            else:
                dq.skip(f"wrong number of fields ({ncols - (1 if trailing else 0)} for {len(names)})", 1,
                        str(path), line, text)
        if extra:
            yield pa.table({n: pa.array([r[i] for r in extra], pa.string()) for i, n in enumerate(names)})

    return gen(), dq
