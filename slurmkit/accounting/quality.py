"""Data-quality accounting: every sacct row read is either counted or skipped with a reason.

A :class:`DataQuality` travels from the reader (rows that do not split into the expected
fields, bad UTF-8, comment lines) through the frame builder (unparsable job ids, duplicate
keys) to the report (rows outside the window). The invariant
``rows_read == rows_counted + rows_skipped`` holds at every stage (:meth:`DataQuality.check`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

#: How many individual problem rows are listed (counts by reason are always complete).
MAX_LISTED = 10_000

#: Skip reasons that are not a problem with the input: a row of another window, or a second
#: copy of a row already counted (overlapping captures, the store's daily pulls).
OUTSIDE_WINDOW = "outside the window"
SAME_ROW_CAPTURE = "same row in another capture (the later capture's copy kept)"
SAME_ROW_PULL = "same row in another day's pull"
STARTED_LATER = "pending in an earlier capture, started in a later one"
AFTER_AS_OF = "submitted (or a step started) after --as-of: not yet in the capture then"
#: Repeats within one capture that are sacct's, not the input's fault: the same record printed
#: again (every field equal), and a step row printed under its job's JobID (its suffix lost, no
#: User) beside the job's own row.
IDENTICAL_REPEAT = "identical row repeated in the capture (counted once)"
LOST_SUFFIX = "step row without its suffix (a repeated JobID/Submit/Start without User; the job's own row kept)"
#: A requeued job's earlier attempts in a capture without Submit and Start (``sacct -D`` prints
#: a row per attempt; nothing tells the attempts apart): the job's last row kept, as sacct
#: without ``-D`` prints it; a problem, as the earlier attempts' hours are not counted.
UNTOLD_ATTEMPTS = ("earlier attempt of a requeued job, not told apart (no Submit or Start in the capture; "
                   "the job's last row kept)")
NOT_PROBLEMS = frozenset((OUTSIDE_WINDOW, SAME_ROW_CAPTURE, SAME_ROW_PULL, STARTED_LATER, AFTER_AS_OF,
                          IDENTICAL_REPEAT, LOST_SUFFIX))


@dataclass
class Problem:
    """One listed row: ``source`` (file name or ``sacct <day>``), ``line`` (1-based physical
    line, or None when not known), ``reason`` (short key), ``detail`` (text, at most 200
    characters of the row), ``counted`` (True: kept after a repair, False: skipped)."""

    source: str
    line: int | None
    reason: str
    detail: str
    counted: bool = False

    def as_dict(self) -> dict:
        return {"source": self.source, "line": self.line, "reason": self.reason,
                "detail": self.detail, "counted": self.counted}

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}" if self.line else self.source
        return f"{where}: {self.reason}: {self.detail}"


@dataclass
class DataQuality:
    """Row counts and reasons. ``rows_read``: data rows the reader saw (a physical line that is
    not a header, comment or blank); ``rows_counted``: rows used by the model (allocations,
    steps, pending array records); ``rows_skipped``: the rest, by reason in ``skipped``;
    ``repaired``: counted rows that needed a fix (reason -> count); ``ignored_lines``: comment
    and blank lines (not rows); ``problems``: up to :data:`MAX_LISTED` rows with file and line."""

    rows_read: int = 0
    rows_skipped: int = 0
    skipped: Counter = field(default_factory=Counter)
    repaired: Counter = field(default_factory=Counter)
    ignored_lines: Counter = field(default_factory=Counter)
    problems: list = field(default_factory=list)
    #: GPU-hours of jobs whose steps are in the input but whose allocation row is not (not
    #: counted: the largest step's AllocTRES GPUs x its ElapsedRaw, per job)
    gpu_hours_at_stake: float = 0.0

    @property
    def rows_counted(self) -> int:
        return self.rows_read - self.rows_skipped

    def skip(self, reason: str, n: int = 1, source: str = "", line: int | None = None,
             detail: str = "") -> None:
        """Record ``n`` skipped rows for ``reason``; with ``source``, also list one row (``n=0``
        lists a row already counted in a bulk call)."""
        if n > 0:
            self.rows_skipped += n
            self.skipped[reason] += n
        if source and len(self.problems) < MAX_LISTED:
            self.problems.append(Problem(source, line, reason, detail[:200], False))

    def repair(self, reason: str, source: str = "", line: int | None = None, detail: str = "",
               n: int = 1) -> None:
        """Record a counted row that needed a fix (bad UTF-8 replaced, delimiter in a name)."""
        self.repaired[reason] += n
        if source and len(self.problems) < MAX_LISTED:
            self.problems.append(Problem(source, line, reason, detail[:200], True))

    def merge(self, other: "DataQuality") -> None:
        """Add another source's counts into this one."""
        self.rows_read += other.rows_read
        self.rows_skipped += other.rows_skipped
        self.skipped.update(other.skipped)
        self.repaired.update(other.repaired)
        self.ignored_lines.update(other.ignored_lines)
        self.gpu_hours_at_stake += other.gpu_hours_at_stake
        room = MAX_LISTED - len(self.problems)
        self.problems.extend(other.problems[:max(room, 0)])

    @property
    def rows_rejected(self) -> int:
        """Rows skipped because of a problem with them (every reason but :data:`NOT_PROBLEMS`)."""
        return self.rows_skipped - sum(self.skipped[r] for r in NOT_PROBLEMS)

    @property
    def rejected_share(self) -> float:
        """:attr:`rows_rejected` over the rows that were the window's to count (0.0 when none)."""
        base = self.rows_read - (self.rows_skipped - self.rows_rejected)
        return self.rows_rejected / base if base > 0 else 0.0

    def check(self) -> None:
        """Raise AssertionError when the counts do not add up (a bug, never bad input)."""
        assert self.rows_skipped == sum(self.skipped.values()), (self.rows_skipped, self.skipped)
        assert 0 <= self.rows_skipped <= self.rows_read, (self.rows_skipped, self.rows_read)

    def as_dict(self) -> dict:
        """The JSON ``data_quality`` section (:func:`rejected_text` reads it)."""
        return {"rows_read": self.rows_read, "rows_counted": self.rows_counted,
                "rows_skipped": self.rows_skipped, "rows_rejected": self.rows_rejected,
                "rejected_share": round(self.rejected_share, 9), "skipped_reasons": dict(sorted(self.skipped.items())),
                "repaired_reasons": dict(sorted(self.repaired.items())),
                "ignored_lines": dict(sorted(self.ignored_lines.items())),
                "gpu_hours_at_stake": round(self.gpu_hours_at_stake, 9),
                "problems": [p.as_dict() for p in self.problems]}


def first_problem(dq: dict) -> str:
    """The first row skipped for a problem in a ``data_quality`` dict (:meth:`DataQuality.as_dict`)
    as ``"first: <file>:<line>: <reason>"``, "" when none is listed."""
    for p in dq.get("problems") or ():
        if not p.get("counted"):
            where = f"{p.get('source') or '<input>'}" + (f":{p['line']}" if p.get("line") else "")
            return f"first: {where}: {p.get('reason')}"
    return ""


def rejected_text(dq: dict) -> str:
    """How many rows were skipped for a problem, in words, from a ``data_quality`` dict
    (:meth:`DataQuality.as_dict`): the share is of the rows the window had to count (those read
    less the ones skipped by rule: repeats, rows outside the window), which the text names, so
    "1 of 6 rows ... 25 %" reads as the arithmetic it is."""
    base = dq["rows_read"] - (dq["rows_skipped"] - dq["rows_rejected"])
    other = dq["rows_read"] - base
    return (f"{dq['rows_rejected']} of {dq['rows_read']} input rows were skipped for a problem "
            f"({100 * dq['rejected_share']:.3g} % of the {base} rows the window had to count"
            + (f"; the {other} other(s) were not its to count: repeats, outside the window ..." if other else "")
            + ")")
