"""Split sacct text into tables of strings (pyarrow), counting every row it cannot split.

One reader for every input: the bytes the live ingest gets from ``sacct`` and captured files
(``report weekly --from-sacct``). :func:`stream_sacct_file` and :func:`stream_sacct_bytes`
read their input in blocks that end at a newline; :func:`read_sacct_bytes` and
:func:`read_sacct_file` are the one-block case, gathered into one table. Either way there is
one header detection (:func:`_layout`), one block reader and one bad-row path
(:func:`_bad_rows`), so the same text gives the same rows, the same listed problems and the
same messages, with the same line numbers, whichever way it comes.

Input: with or without a header line, ``|`` or any other delimiter (one or more characters,
e.g. ``☃``), ``--parsable``'s trailing delimiter, ``#`` comment lines, blank lines, CRLF line
ends, and a field list given separately when there is no header. Output: ``pyarrow.Table`` s
with one string column per field (canonical names from :mod:`slurmkit.accounting.fields`) and
a :class:`~slurmkit.accounting.quality.DataQuality`.

Rows that do not split into the expected number of fields are skipped with a reason and their
physical line (1-based, in the input as given: comment lines and the header count); when
JobName is the last field, extra delimiters are a delimiter inside the job name and are joined
back (counted, listed as repaired); two consecutive short lines whose fields add up to one
row, split inside JobName, are joined (``newline inside JobName (two lines joined)``); a short
row that starts with a JobID lacks its last fields (``too few fields (short by its last N:
...)``), any other short line is most likely the tail of a value with an embedded newline
(``too few fields (continuation of a field with a newline?)``). A field listed twice in the
header is read once (differing copies counted as repaired). Binary input and sacct's
fixed-width table are refused (:data:`NOT_PARSABLE`). Bad UTF-8 is
replaced by U+FFFD and the rows are listed as repaired. Comment and blank (or whitespace-only)
lines are counted in ``ignored_lines``, not as rows.
"""

from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from slurmkit.accounting.fields import DELIMITER, canonical, looks_like_header
from slurmkit.accounting.parse import NO_TIME
from slurmkit.accounting.quality import DataQuality
from slurmkit.errors import InputError
from slurmkit.slurm import duration, memory, tres

_CANDIDATES = (DELIMITER, "|", "\u2603", "\t", ";", ",")
_SEP = DELIMITER.encode()
#: Block size of :func:`stream_sacct_file` (64 MiB: each block has a fixed cost in the typing
#: that follows, about 30 ms; a 1M-job capture is ~15 blocks).
BLOCK_BYTES = 64 << 20
#: pyarrow's own block size inside one of ours (its threads split on these).
_ARROW_BLOCK = 4 << 20

_NO_HEADER = "no header line and no field list (give the sacct -o fields, e.g. --sacct-fields FILE)"


class AccountingInputError(InputError):
    """sacct input that cannot be read at all: ``file``, ``line`` (1-based or None) and what is
    wrong. The CLI prints ``file:line: message`` and exits 2."""


def read_field_list(text: str) -> list[str]:
    """A field list as given to ``sacct -o`` or saved beside a capture: comma, ``|``, tab or
    whitespace separated; ``%N`` width suffixes are dropped. Returns canonical names."""
    parts = [p for p in re.split(r"[,|\s]+", text.strip()) if p]
    return [canonical(p.split("%")[0]) for p in parts]


_HEAD_DELIM = re.compile(r"^[A-Za-z][A-Za-z0-9_]*([^A-Za-z0-9_\s][^A-Za-z0-9_]{0,7}|\t)(?=[A-Za-z])")
_PREFIX = re.compile(r"^([^A-Za-z0-9]+)(?=[A-Za-z])")


def _header_delimiter(line: str) -> str | None:
    """The delimiter a header line is written with, read from the text between its first two
    field names (``|``, ``|#`` as facebookresearch/gcm asks sacct for, ``"|"``, ``☃``), when
    the line split on it is a header; else None."""
    m = _HEAD_DELIM.match(line)
    if m and looks_like_header(line.split(m.group(1))):
        return m.group(1)
    return None


def _guess_delimiter(line: str, nfields: int | None) -> str:
    head = _header_delimiter(line) if nfields is None else None
    if head is not None:
        return head
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


def _is_ignored(line: bytes) -> str | None:
    """``"comment"`` or ``"blank"`` for a line that is not a row (no line end), else None."""
    if line.startswith(b"#"):
        return "comment"
    return None if line.strip() else "blank"


# --- the layout: header, field names, delimiter --------------------------------------------

@dataclass(frozen=True)
class _Layout:
    """How an input splits. ``names``: canonical field names; ``delim``: the delimiter as
    given or detected; ``sep``: the one byte pyarrow splits on (``delim`` itself, or
    :data:`DELIMITER` that a longer delimiter is rewritten to); ``trailing``: every row ends
    with the delimiter (``--parsable``); ``start``: byte offset of the first line after the
    header (or of the first row when there is none)."""

    names: list
    delim: str
    sep: str
    trailing: bool
    start: int
    dups: dict = None

    @property
    def col_names(self) -> list:
        return self.names + (["_trailing"] if self.trailing else [])


def _layout(fh, source: str, fields, delimiter, dq: DataQuality) -> _Layout | None:
    """Read the head of ``fh`` (a binary file at offset 0): comment and blank lines before the
    first row or header (counted in ``dq``), the header when the first line is one, and the
    first row (the trailing delimiter). None when the input holds no row or header at all. A
    field listed twice gets a second column ``<name>#2`` (:func:`_drop_duplicate_fields`).

    Raises :class:`AccountingInputError`: no header and no field list (the first line), no
    JobID in the field list (the header line, or None for ``fields``), output that is not
    parsable (binary, sacct's fixed-width table, no delimiter: :data:`NOT_PARSABLE`)."""
    offset = skipped = 0
    while True:
        raw = fh.readline()
        if not raw:
            return None
        line = raw.rstrip(b"\r\n")
        kind = _is_ignored(line)
        if kind is None:
            break
        dq.ignored_lines[kind] += 1
        offset += len(raw)
        skipped += 1
    if b"\x00" in raw or _mostly_binary(raw):
        raise AccountingInputError(source, skipped + 1, NOT_PARSABLE)
    first = line.decode("utf-8", errors="replace")  # only to guess the delimiter
    delim = delimiter or _guess_delimiter(first, len(fields) if fields else None)
    first_fields = first.split(delim)
    if len(first_fields) == 1 and looks_like_header(first.split()):
        raise AccountingInputError(source, skipped + 1, NOT_PARSABLE + " (this is sacct's fixed-width table)")
    header_trailing = False
    pre = _PREFIX.match(first)
    if not delimiter and pre and not looks_like_header(first_fields):
        rest = first[pre.end():]
        d2 = _header_delimiter(rest)
        if d2 is not None:
            raise AccountingInputError(
                source, skipped + 1,
                f"a header after a prefix: the line starts with {pre.group(1)!r} before {rest[:24]!r}... "
                f"(fields delimited by {d2!r}); sacct prints no prefix: remove it from every line "
                f"(e.g. sed 's/^{re.escape(pre.group(1))}//') and read again with --delimiter {d2!r}")
    if looks_like_header(first_fields):
        names = [canonical(f) for f in first_fields]
        if names and names[-1] == "":
            names.pop()   # a trailing delimiter's empty last field
            header_trailing = True   # --parsable ends its header with the delimiter too
        header_line = skipped + 1
        start = offset + len(raw)
        sample = b""
        while True:   # the first row after the header (comments are the blocks' to count)
            raw = fh.readline()
            if not raw or _is_ignored(raw.rstrip(b"\r\n")) is None:
                sample = raw.rstrip(b"\r\n")
                break
        if re.fullmatch(rb"[-|+ \t]*-{3,}[-|+ \t]*", sample):
            raise AccountingInputError(source, header_line + 1, NOT_PARSABLE + " (this is sacct's fixed-width table)")
    elif fields:
        names = [canonical(f) for f in fields]
        header_line = None
        start, sample = offset, line
        if len(names) > 1 and not delimiter and delim.encode() not in line:
            raise AccountingInputError(source, skipped + 1, NOT_PARSABLE + " (no delimiter in the first row)")
    else:
        raise AccountingInputError(source, skipped + 1, _NO_HEADER)
    if "JobID" not in names:
        raise AccountingInputError(source, header_line, "the field list has no JobID")
    dups, seen = {}, {}
    for i, n in enumerate(names):
        if n in seen:
            seen[n] += 1
            dups[f"{n}#{seen[n]}"] = n
            names[i] = f"{n}#{seen[n]}"
        else:
            seen[n] = 1
    bdelim = delim.encode()
    trailing = header_trailing or _votes_trailing(fh, sample, bdelim, len(names))
    direct = len(bdelim) == 1 and delim not in ('"', "\n", "\r")
    return _Layout(names, delim, delim if direct else DELIMITER, trailing, start, dups)


def _votes_trailing(fh, sample: bytes, bdelim: bytes, nnames: int, lines: int = 100) -> bool:
    """True when the rows end with ``--parsable``'s trailing delimiter: of the first row
    (``sample``) and the next ``lines`` data lines of ``fh``, more have ``nnames`` delimiters and
    end with one than have ``nnames - 1``. One row alone cannot tell a trailing delimiter from a
    delimiter inside a field when the last field is empty; a few rows do."""
    ends = whole = 0
    line = sample
    for _ in range(lines + 1):
        if _is_ignored(line) is None:
            n = line.count(bdelim)
            if n == nnames and line.endswith(bdelim):
                ends += 1
            elif n == nnames - 1:
                whole += 1
        raw = fh.readline()
        if not raw:
            break
        line = raw.rstrip(b"\r\n")
    return ends > whole


#: The message for output that is not sacct's parsable form.
NOT_PARSABLE = "not parsable output: run sacct with -P / --parsable2"


def _mostly_binary(raw: bytes) -> bool:
    """True when a first line is not text: more than a tenth control bytes (tab, the unit
    separator and line ends aside), or not UTF-8 with more than a third of its bytes non-ASCII
    (a Latin-1 name here and there is still text)."""
    control = sum(c < 0x20 and c not in (9, 10, 13, 0x1f) for c in raw)
    if control > len(raw) // 10:
        return True
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return sum(c >= 0x80 for c in raw) > len(raw) // 3
    return False


def _drop_duplicate_fields(t: pa.Table, dups: dict, dq: DataQuality, source: str) -> pa.Table:
    """Without the second copies of a field the header lists twice (the first is read); the
    rows where the copies differ are counted (repaired: ``field X listed twice, copies differ``)."""
    for dup, name in dups.items():
        a, b = t.column(name), t.column(dup)
        if a.type != b.type:
            a, b = a.cast(pa.string()), b.cast(pa.string())
        differ = pc.sum(pc.fill_null(pc.not_equal(a, b), False)).as_py() or 0
        if differ:
            dq.repair(f"field {name} listed twice, copies differ (the first read)", source, None,
                      f"{differ} row(s)", n=differ)
        t = t.drop_columns([dup])
    return t


# --- blocks --------------------------------------------------------------------------------

def _blocks(fh, start: int, block_bytes: int):
    """``(offset, bytes or memoryview)`` of ``fh`` from ``start`` in blocks of about
    ``block_bytes`` that end at a newline (a line longer than a block makes a longer one)."""
    fh.seek(start)
    while True:
        offset = fh.tell()
        buf = fh.read(block_bytes)
        while len(buf) >= block_bytes and b"\n" not in buf:
            more = fh.read(block_bytes)
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


class _LineCounter:
    """Physical lines of the input before a byte offset, counted on demand (only a block with
    a problem needs its first line) and incrementally (offsets come in increasing order)."""

    def __init__(self, opener):
        self.opener, self.offset, self.lines = opener, 0, 0

    def before(self, offset: int) -> int:
        if offset < self.offset:
            self.offset, self.lines = 0, 0
        if offset > self.offset:
            with self.opener() as fh:
                fh.seek(self.offset)
                left = offset - self.offset
                while left > 0:
                    chunk = fh.read(min(left, BLOCK_BYTES))
                    if not chunk:
                        break
                    self.lines += chunk.count(b"\n")
                    left -= len(chunk)
            self.offset = offset
        return self.lines


class _BlockLines:
    """Line numbers of one block: its line ``k`` (1-based, after comment lines were taken out)
    -> physical line of the input."""

    def __init__(self, counter: _LineCounter, offset: int, kept: list | None):
        self.counter, self.offset, self.kept, self._base = counter, offset, kept, None

    def __call__(self, k: int | None) -> int | None:
        if k is None:
            return None
        if self._base is None:
            self._base = self.counter.before(self.offset)
        if self.kept is not None:
            k = self.kept[k - 1] + 1 if 0 < k <= len(self.kept) else None
        return None if k is None else self._base + k


def _prepare(buf, layout: _Layout, dq: DataQuality) -> tuple[bytes, list | None]:
    """A block made ready for pyarrow: CRLF -> LF, ``#`` comment lines taken out (counted;
    ``kept``: the block's 0-based line of each line left, None when none was taken out) and a
    delimiter pyarrow cannot split on rewritten to :data:`DELIMITER`. The checks look at the
    block's whole buffer (a memoryview's too): cheap scans for one byte, no copy when clean."""
    whole = buf.obj if isinstance(buf, memoryview) else buf
    data, kept = buf, None
    if b"\r" in whole:
        data = bytes(data).replace(b"\r\n", b"\n")
    if b"#" in whole:
        data = bytes(data)
        if data.startswith(b"#") or b"\n#" in data:
            lines = data.split(b"\n")
            if lines and lines[-1] == b"":
                lines.pop()
            out, kept = [], []
            for i, raw in enumerate(lines):
                if raw.startswith(b"#"):
                    dq.ignored_lines["comment"] += 1
                else:
                    out.append(raw)
                    kept.append(i)
            data = b"\n".join(out) + b"\n" if out else b""
    if layout.sep != layout.delim:
        data = bytes(data)
        if _SEP in data:
            data = data.replace(_SEP, b" ")
        data = data.replace(layout.delim.encode(), _SEP)
    return data, kept


# --- UTF-8 ---------------------------------------------------------------------------------

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


def _repair_utf8(data: bytes, dq: DataQuality, source: str, line_of) -> bytes:
    """``data`` with each run of invalid UTF-8 bytes replaced by one U+FFFD; each row touched is
    listed as repaired (its line: ``line_of(line in data)``). Done before splitting: pyarrow
    cannot hand a row with bad UTF-8 and the wrong number of fields to the bad-row handler (it
    fails decoding it)."""
    text = data.decode("utf-8", errors="surrogateescape")
    line, pos = 1, 0
    for m in re.finditer(r"[^\n]*[\udc80-\udcff][^\n]*", text):
        line += text.count("\n", pos, m.start())
        pos = m.start()
        dq.repair("bad UTF-8 (replaced by U+FFFD)", source, line_of(line),
                  m.group(0).encode("utf-8", "surrogateescape").decode("utf-8", "replace"))
    return re.sub("[\udc80-\udcff]+", "\ufffd", text).encode("utf-8")


# --- bad rows ------------------------------------------------------------------------------

def _find_line(data: bytes, text: bytes, start: int) -> int | None:
    """Byte offset, at or after ``start``, of the first line of ``data`` that is exactly
    ``text`` (else of the first place that contains it); None when not found."""
    if start == 0 and (data.startswith(text + b"\n") or data == text):
        return 0
    pos = data.find(b"\n" + text + b"\n", max(start - 1, 0))
    if pos >= 0:
        return pos + 1
    if data.endswith(b"\n" + text) and len(data) - len(text) >= start:
        return len(data) - len(text)
    pos = data.find(text, start)
    return pos if pos >= 0 else None


def _locate(data: bytes, texts: list[bytes]) -> list[tuple[int, int | None]]:
    """``(sort key, 1-based line in data or None)`` of each of ``texts`` (rows pyarrow could
    not split, in any order): a row repeated in the data gets each of its lines in turn."""
    found, nxt = [], {}
    for t in texts:
        pos = _find_line(data, t, nxt.get(t, 0))
        if pos is None and nxt.get(t):
            pos = _find_line(data, t, 0)
        if pos is not None:
            nxt[t] = pos + 1
        found.append(pos)
    order = sorted(p for p in found if p is not None)
    lines, line, prev = {}, 1, 0
    for p in order:
        line += data.count(b"\n", prev, p)
        prev = p
        lines[p] = line
    end = len(data) + 1
    return [(end, None) if p is None else (p, lines[p]) for p in found]


#: Free-text fields that may hold the delimiter (a job name, a command line, a path, a comment):
#: where an extra delimiter in a row may be put back.
FREE_TEXT = ("JobName", "SubmitLine", "WorkDir", "Comment", "AdminComment", "SystemComment",
             "Constraints", "Extra", "StdOut", "StdErr", "StdIn")

_TIME = r"|[0-9]+|[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}|Unknown|None|N/A"
_INT = r"|-?[0-9]+"


def _is_duration(v: str) -> bool:
    """A duration as sacct prints one (:func:`slurmkit.slurm.duration.seconds`: with a colon,
    ``[D-][HH:]MM:SS``), a word for none or no limit, or nothing."""
    try:
        s = duration.seconds(v, "s")
    except duration.DurationError:
        return False
    return s is None or s == math.inf or ":" in v


def _is_limit_raw(v: str) -> bool:
    """TimelimitRaw: whole minutes, or a word for none or no limit."""
    try:
        s = duration.seconds(v, "min")
    except duration.DurationError:
        return False
    return s is None or s == math.inf or v.isdigit()


def _reads_as(read, error: type[Exception]):
    """A check of a typed field: True when ``read(value)`` (one of slurm's readers) does not raise
    ``error``; the empty value reads as nothing."""
    def ok(v: str) -> bool:
        try:
            read(v)
        except error:
            return False
        return True
    return ok


#: A TRES string (:func:`slurmkit.slurm.tres.parse`) or nothing.
_is_tres = _reads_as(tres.parse, tres.TresError)
#: A memory size (:func:`slurmkit.slurm.memory.mib`) or nothing.
_is_memory = _reads_as(memory.mib, memory.MemorySizeError)


_JOBID = r"[0-9]+[0-9_+.\[\]%\-A-Za-z]*"
#: A row's JobID field (``123``, ``123_4``, ``123+0``, ``123.batch``, ``123_[1-5%2]``): what tells a
#: row cut short from the rest of a value with a newline in it.
_JOBID_ROW = re.compile(_JOBID)
#: What a typed field holds (a pattern's fullmatch, or for a Slurm format its reader in
#: :mod:`slurmkit.slurm`): the check that an extra delimiter was put back in the right field
#: (the fields after it would otherwise be shifted by one).
_TYPED = {
    **{f: _TIME for f in ("Submit", "Eligible", "Start", "End")},
    **{f: _INT for f in ("ElapsedRaw", "NCPUS", "NNodes", "AllocCPUS", "ReqCPUS", "AllocNodes", "ReqNodes",
                         "NTasks", "UID", "GID", "CPUTimeRAW", "ConsumedEnergyRaw", "DBIndex", "AssocID",
                         "QOSRAW", "WCKeyID", "Restarts", "ResvCPURAW", "PlannedCPURAW", "Priority")},
    "TimelimitRaw": _is_limit_raw,
    **{f: _is_duration for f in ("Elapsed", "Timelimit", "Suspended", "TotalCPU", "UserCPU", "SystemCPU",
                              "CPUTime", "AveCPU", "MinCPU", "Reserved", "Planned", "PlannedCPU", "ResvCPU")},
    **{f: _is_tres for f in ("AllocTRES", "ReqTRES", "TRESUsageInAve", "TRESUsageInMax", "TRESUsageInMaxNode",
                          "TRESUsageInMaxTask", "TRESUsageInMin", "TRESUsageInMinNode", "TRESUsageInMinTask",
                          "TRESUsageInTot", "TRESUsageOutAve", "TRESUsageOutMax", "TRESUsageOutMaxNode",
                          "TRESUsageOutMaxTask", "TRESUsageOutMin", "TRESUsageOutMinNode",
                          "TRESUsageOutMinTask", "TRESUsageOutTot")},
    **{f: _is_memory for f in ("ReqMem", "MaxRSS", "AveRSS", "MaxVMSize", "AveVMSize")},
    "JobID": _JOBID, "JobIDRaw": _JOBID,
    "State": r"|[A-Z_]+( by [0-9]+)?",
    "ExitCode": r"|[0-9]+:[0-9]+", "DerivedExitCode": r"|[0-9]+:[0-9]+",
}
_TYPED_OK = {f: re.compile(p).fullmatch if isinstance(p, str) else p for f, p in _TYPED.items()}


def _place_extra(parts: list, names: list, delim: str) -> tuple[list, str] | None:
    """``parts`` (a row split into more fields than ``names``) with its extra delimiters put
    back into the one free-text field (:data:`FREE_TEXT`) where every typed field then reads as
    its type, and that field's name; None when no field, or more than one, fits."""
    extra = len(parts) - len(names)
    fits = []
    for c, name in enumerate(names):
        if name.split("#")[0] not in FREE_TEXT:
            continue
        cand = parts[:c] + [delim.join(parts[c:c + extra + 1])] + parts[c + extra + 1:]
        if all(ok(cand[i].strip()) for i, n in enumerate(names)
               if (ok := _TYPED_OK.get(n.split("#")[0])) is not None):
            fits.append((cand, name.split("#")[0]))
            if len(fits) > 1:
                return None
    return fits[0] if fits else None


#: A line a Slurm command or the shell printed into a capture (``sacct: error: ...``): never
#: the rest of a job name.
_MESSAGE = re.compile(r"^\s*[\w./-]+: (?:error|warning|fatal|debug\w*|info):", re.I)


def _bad_rows(bad: list, data, layout: _Layout, dq: DataQuality, source: str, line_of
              ) -> tuple[list, int, tuple | None, list]:
    """Rows of one block that pyarrow did not split (``(columns, text)`` pairs), in the
    block's order: whitespace-only lines counted as blank, a delimiter in a trailing JobName
    joined (listed as repaired), a line without a delimiter right after a whole row whose last
    field is JobName taken as the rest of that job name (a newline inside it), every other row
    skipped with its reason and line. Returns ``(repaired rows as lists of fields, rows read,
    (columns, line) of the first row, continuations)``: ``continuations`` are ``(JobID,
    JobName as split, text to append after a newline)`` of the block's good rows to patch
    (:func:`_join_continuations`)."""
    rows = [(n, t) for n, t in bad if t.strip()]
    if len(rows) < len(bad):
        dq.ignored_lines["blank"] += len(bad) - len(rows)
    if not rows:
        return [], 0, None
    data = bytes(data)
    names, delim, sep = layout.names, layout.delim, layout.sep
    expected = len(layout.col_names)
    extra_col = 1 if layout.trailing else 0
    where = _locate(data, [t.encode() for _, t in rows])
    placed = sorted(zip(where, rows), key=lambda x: x[0][0])
    repaired = []
    first = None
    nrows = len(rows)
    jcol = names.index("JobID")
    tail_name = names[-1] == "JobName" and not layout.trailing and len(names) > 1
    bad_lines = {k for (_, k), _ in placed if k is not None}
    conts: list = []       # [JobID, JobName, appended text] of good rows to patch
    cont_at: dict = {}     # block line of a continuation -> its entry in conts
    i = 0
    while i < len(placed):
        (pos, k), (ncols, text) = placed[i]
        line = line_of(k)
        shown = text.replace(sep, delim) if sep != delim else text
        if tail_name and ncols == 1 and k is not None and k > 1 and not _MESSAGE.match(text):
            # a newline inside a trailing JobName: this line is the rest of the row above
            target = cont_at.get(k - 1)
            if target is None and (k - 1) not in bad_lines:
                lo = data.rfind(b"\n", 0, max(pos - 1, 0)) + 1
                prev = data[lo:max(pos - 1, 0)].decode("utf-8", "replace").rstrip("\r").split(sep)
                if len(prev) == len(names) and _JOBID_ROW.fullmatch(prev[jcol].strip()):
                    conts.append([prev[jcol], prev[-1], ""])
                    target = len(conts) - 1
                    dq.repair("newline inside JobName (two lines joined)", source, line_of(k - 1),
                              f"JobID {prev[jcol]}: JobName {prev[-1]!r} + newline + {text.rstrip(chr(13))!r}")
            if target is not None:
                conts[target][2] += ("\n" if conts[target][2] else "") + text.rstrip("\r")
                cont_at[k] = target
                nrows -= 1
                i += 1
                continue
        if ncols < expected and i + 1 < len(placed) and k is not None:
            joined = _join_lines(placed, i, layout)
            if joined is not None:
                parts, used, where_nl = joined
                repaired.append(parts)
                what = "two lines" if used == 2 else f"{used} lines"
                dq.repair(f"newline inside {'/'.join(dict.fromkeys(where_nl))} ({what} joined)", source, line, shown)
                nrows -= used - 1
                i += used
                continue
        i += 1
        if first is None:
            first = (ncols - extra_col, line)
        parts = text.split(sep)
        if layout.trailing and parts and parts[-1] == "":
            parts.pop()   # --parsable's trailing delimiter
        placed_row = _place_extra(parts, names, delim) if len(parts) > len(names) else None
        if placed_row is not None:
            repaired.append(placed_row[0])
            dq.repair(f"delimiter inside {placed_row[1]} (joined)", source, line, shown)
        elif layout.trailing and len(parts) == len(names):
            repaired.append(parts)   # a whole row without the trailing delimiter: not short
        elif ncols < expected:
            parts = text.split(sep)
            looks_like_row = len(parts) > jcol and _JOBID_ROW.fullmatch(parts[jcol].strip())
            if looks_like_row:
                missing = names[ncols - extra_col:]
                dq.skip(f"too few fields (short by its last {len(missing)}: {','.join(missing[:3])}"
                        f"{',...' if len(missing) > 3 else ''})", 1, source, line, shown)
            else:
                dq.skip("too few fields (continuation of a field with a newline?)", 1, source, line, shown)
        else:
            dq.skip(f"wrong number of fields ({ncols - extra_col} for {len(names)})", 1, source, line, shown)
    return repaired, nrows, first, [tuple(c) for c in conts]


def _typed_ok(parts: list, names: list) -> bool:
    """True when every typed field of a row (:data:`_TYPED`) reads as its type."""
    return all(ok(parts[i].strip()) for i, n in enumerate(names)
               if (ok := _TYPED_OK.get(n.split("#")[0])) is not None)


def _join_lines(placed: list, i: int, layout: _Layout):
    """A record sacct printed over several physical lines (it does not escape a newline inside
    a field: SubmitLine, Comment, AdminComment, JobName ...): the short lines ``placed[i:]``
    that follow one another and whose fields add up to one row, each break inside a free-text
    field (:data:`FREE_TEXT`), every typed field of the joined row reading as its type.
    Returns ``(fields, lines used, names of the fields the newlines were in)`` or None."""
    names, sep = layout.names, layout.sep
    expected = len(layout.col_names)
    (_, k), (ncols, text) = placed[i]
    total, texts, at, breaks = ncols, [text], ncols - 1, []
    j = i
    while total < expected and j + 1 < len(placed):
        (_, kn), (nn, tn) = placed[j + 1]
        if kn is None or kn != k + len(texts):
            return None
        if at >= len(names) or names[at].split("#")[0] not in FREE_TEXT:
            return None
        breaks.append(names[at].split("#")[0])
        total += nn - 1
        at += nn - 1
        texts.append(tn)
        j += 1
    if total != expected or len(texts) < 2:
        return None
    parts = "\n".join(t.rstrip("\r") for t in texts).split(sep)
    if layout.trailing and parts and parts[-1] == "":
        parts.pop()
    if len(parts) != len(names) or not _typed_ok(parts, names):
        return None
    return parts, len(texts), breaks


def _join_continuations(t: pa.Table, conts: list) -> pa.Table:
    """``t`` with each ``(JobID, JobName, rest)`` of ``conts`` applied: the rows with that
    JobID and JobName get ``JobName + "\\n" + rest`` (the job name a newline had split)."""
    if not conts or "JobName" not in t.column_names:
        return t
    jid, name = t.column("JobID"), t.column("JobName")
    if not pa.types.is_string(jid.type):
        jid = pc.cast(jid, pa.string())
    new = name
    for j, n, rest in conts:
        hit = pc.and_(pc.equal(jid, j), pc.equal(name, n))
        new = pc.if_else(hit, pa.scalar(n + "\n" + rest, pa.string()), new)
    return t.set_column(t.column_names.index("JobName"), "JobName", new)


def _drop_blank_rows(t: pa.Table, dq: DataQuality) -> pa.Table:
    """Without the rows pyarrow made of empty lines (every field empty; ``ignore_empty_lines``
    would drop them uncounted), counted as blank lines. A cheap test of JobID first: it is
    empty on no real row (that row is a bad JobID later, and stays)."""
    jid = t.column("JobID")
    empty = pc.equal(jid, "")
    if not pc.any(empty).as_py():
        return t
    for name in t.column_names:
        col = t.column(name)
        empty = pc.and_(empty, pc.is_null(col) if pa.types.is_integer(col.type) else pc.equal(col, ""))
    n = pc.sum(empty).as_py() or 0
    if n == 0:
        return t
    dq.ignored_lines["blank"] += n
    return t.filter(pc.invert(empty))


# --- the reader ----------------------------------------------------------------------------

def _cut_off_row(opener, layout: _Layout, counter: _LineCounter) -> tuple[int, int] | None:
    """``(line, fields)`` of the input's last line when the input ends inside a row: no line end
    after it (sacct ends every row with one), a JobID where the field list has it, and fewer
    fields than the field list, as a capture cut while it was written or copied ends; None
    otherwise (a last line that is the rest of a value with a newline in it is joined to its row
    by the reader). A file that cannot seek: None."""
    try:
        with opener() as fh:
            size = fh.seek(0, io.SEEK_END)
            if size == 0:
                return None
            start = max(0, size - (1 << 16))
            fh.seek(start)
            tail = fh.read()
    except (OSError, ValueError):
        return None
    if tail.endswith(b"\n") or b"\n" not in tail and start > 0:
        return None
    last = tail.rsplit(b"\n", 1)[-1].rstrip(b"\r")
    if not last.strip() or last.lstrip().startswith(b"#"):
        return None
    parts = last.decode("utf-8", "replace").split(layout.sep)
    if layout.trailing and parts and parts[-1] == "":
        parts.pop()
    jcol = layout.names.index("JobID")
    if len(parts) >= len(layout.names) or len(parts) <= jcol or not _JOBID_ROW.fullmatch(parts[jcol].strip()):
        return None   # whole, or the tail of a field with a newline in it (the last row's SubmitLine ...)
    return counter.before(size - len(last)) + 1, len(parts)


def _stream(opener, source: str, fields, delimiter, block_bytes: int, int_fields):
    """The reader behind every entry point: ``(iterator of Tables, DataQuality, field names)``
    over the binary file ``opener()`` opens. See :func:`stream_sacct_file`."""
    dq = DataQuality()
    with opener() as fh:
        layout = _layout(fh, source, fields, delimiter, dq)
    if layout is None:
        return iter(()), dq, [canonical(f) for f in (fields or ["JobID"])]
    col_names = layout.col_names
    ints = [n for n in int_fields if n in col_names]
    counter = _LineCounter(opener)

    def read_block(buf, bad, as_int=()):
        def on_invalid(row):
            bad.append((row.actual_columns, row.text))
            return "skip"

        return pacsv.read_csv(
            pa.py_buffer(buf),
            read_options=pacsv.ReadOptions(column_names=col_names, block_size=_ARROW_BLOCK),
            parse_options=pacsv.ParseOptions(delimiter=layout.sep, quote_char=False, double_quote=False,
                                             escape_char=False, newlines_in_values=False,
                                             ignore_empty_lines=False, invalid_row_handler=on_invalid),
            convert_options=pacsv.ConvertOptions(
                column_types={n: pa.int64() if n in as_int else pa.string() for n in col_names},
                # null_values apply to the int64 columns only (strings are never null); the
                # block is valid UTF-8 (checked, or repaired, before)
                check_utf8=False, strings_can_be_null=False, quoted_strings_can_be_null=False,
                null_values=list(NO_TIME)))

    def read_text(buf):
        if ints:
            bad = []
            try:
                return read_block(buf, bad, ints), bad
            except pa.ArrowInvalid:
                pass   # not all integers: read as text (its bad rows are reported again)
        bad = []
        return read_block(buf, bad), bad

    def gen():
        cut = _cut_off_row(opener, layout, counter)
        if cut is not None:   # before any row is given out: nothing of a cut capture is stored
            raise AccountingInputError(
                source, cut[0], f"the capture ends inside a row ({cut[1]} of {len(layout.names)} fields and no "
                                "line end after them): it was cut off while written or copied; capture it again")
        good = nread = 0
        first_bad = None
        with opener() as fh:
            for offset, buf in _blocks(fh, layout.start, block_bytes):
                data, kept = _prepare(buf, layout, dq)
                del buf
                if not data:
                    continue   # comment lines only
                line_of = _BlockLines(counter, offset, kept)
                if not _is_utf8(data):
                    data = _repair_utf8(bytes(data), dq, source, line_of)
                try:
                    t, bad = read_text(data)
                except pa.ArrowInvalid as exc:
                    raise AccountingInputError(source, None, f"cannot split the text: {exc}") from None
                if layout.trailing:
                    t = t.drop_columns(["_trailing"])
                if layout.dups:
                    t = _drop_duplicate_fields(t, layout.dups, dq, source)
                t = _drop_blank_rows(t, dq)
                extra, n, first, conts = _bad_rows(bad, data, layout, dq, source, line_of) if bad else ([], 0, None, [])
                if conts:
                    t = _join_continuations(t, conts)
                good += t.num_rows
                nread += t.num_rows
                if t.num_rows:
                    yield t
                del t
                if bad:
                    nread += n
                    first_bad = first_bad or first
                    if extra:
                        t = pa.table({c: pa.array([r[i] for r in extra], pa.string())
                                      for i, c in enumerate(layout.names)})
                        yield _drop_duplicate_fields(t, layout.dups, DataQuality(), source) if layout.dups else t
                del data
        dq.rows_read = nread
        if good == 0 and first_bad:
            ncols, line = first_bad
            raise AccountingInputError(
                source, line, f"rows have {ncols} fields but the field list has {len(layout.names)} "
                              f"({','.join(layout.names)}); give the field list the file was written with")

    return gen(), dq, [n for n in layout.names if n not in (layout.dups or {})]


def locate_job_ids(path, job_ids, fields: list[str] | None = None, delimiter: str | None = None
                   ) -> dict[str, list[int]]:
    """The physical lines (1-based, in order) of the rows whose JobID is one of ``job_ids``
    in the sacct file ``path`` (read as :func:`stream_sacct_file` reads it): how the report
    names the line of a row whose value was repaired or skipped after splitting. One pass over
    the file, only when such rows exist; ids not found are absent."""
    want = set(job_ids)
    out: dict[str, list[int]] = {}
    if not want:
        return out
    opener = _file_opener(path)
    with opener() as fh:
        layout = _layout(fh, str(path), fields, delimiter, DataQuality())
    if layout is None:
        return out
    col = layout.names.index("JobID")
    delim = layout.delim.encode()
    with opener() as fh:
        head = fh.read(layout.start)
        line = head.count(b"\n")
        for raw in fh:
            line += 1
            parts = raw.rstrip(b"\r\n").split(delim, col + 1)
            if len(parts) > col:
                jid = parts[col].decode("utf-8", "replace").strip()
                if jid in want:
                    out.setdefault(jid, []).append(line)
    return out


def field_names(path, fields: list[str] | None = None, delimiter: str | None = None) -> list[str] | None:
    """The canonical field names the sacct file ``path`` is read with (its header, else
    ``fields``); None when it holds no header or row. Raises :class:`AccountingInputError` as
    :func:`stream_sacct_file` does for a head that cannot be read."""
    with _file_opener(path)() as fh:
        layout = _layout(fh, str(path), fields, delimiter, DataQuality())
    return None if layout is None else [n for n in layout.names if n not in (layout.dups or {})]


def capture_layout(path, fields: list[str] | None = None, delimiter: str | None = None) -> dict:
    """How the sacct file ``path`` is read, for the report's record of its inputs:
    ``{"delimiter"`` (as given or detected), ``"delimiter_given"``, ``"header"`` (True: the
    first line names the fields; False: ``fields`` were given), ``"fields"`` (canonical names),
    ``"trailing_delimiter"`` (``--parsable``)``}``; None for a file with no row. Raises
    :class:`AccountingInputError` as :func:`stream_sacct_file` does."""
    with _file_opener(path)() as fh:
        layout = _layout(fh, str(path), fields, delimiter, DataQuality())
    if layout is None:
        return None
    return {"delimiter": layout.delim, "delimiter_given": delimiter is not None,
            "header": fields is None or layout.start > 0 and _first_is_header(path),
            "fields": [n for n in layout.names if n not in (layout.dups or {})],
            "trailing_delimiter": bool(layout.trailing)}


def _first_is_header(path) -> bool:
    """True when the first non-comment line of ``path`` is a header (names JobID)."""
    with _file_opener(path)() as fh:
        for raw in fh:
            line = raw.rstrip(b"\r\n")
            if _is_ignored(line) is None:
                text = line.decode("utf-8", "replace")
                d = _header_delimiter(text)
                return d is not None or looks_like_header(text.split(_guess_delimiter(text, None)))
    return False


def _file_opener(path):
    p = Path(path)
    try:
        p.open("rb").close()
    except OSError as exc:
        raise AccountingInputError(str(path), None, exc.strerror or str(exc)) from None
    return lambda: p.open("rb")


def stream_sacct_file(path, fields: list[str] | None = None, delimiter: str | None = None,
                      block_bytes: int = BLOCK_BYTES, int_fields=()):
    """Read a sacct file in blocks: ``(iterator of pyarrow Tables, DataQuality)``: string
    columns, except ``int_fields`` (below). ``source`` in messages: the path as given.

    The text is never held whole in memory (large captures, the benchmark). The
    ``DataQuality`` is complete once the iterator is exhausted. ``fields``: the field list when
    the text has no header (a header line wins). ``delimiter``: None to detect it from the
    first line. ``block_bytes``: the size of a block (:data:`BLOCK_BYTES`).

    ``int_fields``: fields the CSV reader converts to int64 itself (epoch times, counts), with
    :data:`~slurmkit.accounting.parse.NO_TIME` (``Unknown``, ``None``, "" ...) as null; a block
    where one of them holds anything else (an ISO time, a sign-less overflow, spaces) is read
    again with every column as a string, so a block's column is int64 or string.

    Raises :class:`AccountingInputError` (the path, the line): the file cannot be opened, no
    field list is known, the field list repeats a field or lacks JobID (at once); no row
    matches the field list (when the iterator ends).
    """
    batches, dq, _ = _stream(_file_opener(path), str(path), fields, delimiter, block_bytes, int_fields)
    return batches, dq


def stream_sacct_bytes(data: bytes, source: str = "<sacct>", fields: list[str] | None = None,
                       delimiter: str | None = None, block_bytes: int | None = None, int_fields=()):
    """:func:`stream_sacct_file` over bytes already in memory (what the live ingest gets from
    ``sacct``), named ``source`` in messages; one block unless ``block_bytes`` is given."""
    batches, dq, _ = _stream(lambda: io.BytesIO(data), source, fields, delimiter,
                             block_bytes or max(len(data), 1), int_fields)
    return batches, dq


def _gather(batches, names) -> pa.Table:
    tables = list(batches)
    if not tables:
        return pa.table({n: pa.array([], pa.string()) for n in names})
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


def read_sacct_bytes(data: bytes, source: str = "<sacct>", fields: list[str] | None = None,
                     delimiter: str | None = None) -> tuple[pa.Table, DataQuality]:
    """Split sacct output into one table of string columns (the one-block case of
    :func:`stream_sacct_bytes`; see the module docstring). Raises
    :class:`AccountingInputError` as :func:`stream_sacct_file` does, naming ``source``."""
    batches, dq, names = _stream(lambda: io.BytesIO(data), source, fields, delimiter,
                                 max(len(data), 1), ())
    return _gather(batches, names), dq


def read_sacct_file(path, fields: list[str] | None = None, delimiter: str | None = None
                    ) -> tuple[pa.Table, DataQuality]:
    """:func:`read_sacct_bytes` on a file (``source`` = the path as given)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise AccountingInputError(str(path), None, exc.strerror or str(exc)) from None
    return read_sacct_bytes(data, str(path), fields, delimiter)
