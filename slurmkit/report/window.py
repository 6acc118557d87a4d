"""The report window: ``[start, end)`` in UTC, from an ISO week or ISO dates/datetimes."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from slurmkit.errors import UsageError


class WindowError(UsageError):
    """A window option that does not parse: ``option`` names it (``--week``, ``--start``,
    ``--end``); the CLI exits 2 with ``option: message``."""


@dataclass(frozen=True)
class Window:
    """``start`` inclusive, ``end`` exclusive; both timezone-aware UTC datetimes."""

    start: dt.datetime
    end: dt.datetime

    @property
    def hours(self) -> float:
        """Length in hours."""
        return (self.end - self.start).total_seconds() / 3600.0

    def previous(self) -> "Window":
        """The window of the same length just before this one (week-over-week deltas)."""
        span = self.end - self.start
        return Window(self.start - span, self.start)

    def days(self) -> list[tuple[dt.datetime, dt.datetime]]:
        """UTC calendar days ``[d, d+1)`` covering the window (clipped to it): the ingest
        makes one sacct call per day."""
        out = []
        day = self.start.replace(hour=0, minute=0, second=0, microsecond=0)
        while day < self.end:
            nxt = day + dt.timedelta(days=1)
            out.append((max(day, self.start), min(nxt, self.end)))
            day = nxt
        return out

    def as_dict(self) -> dict:
        """``{"start": "...Z", "end": "...Z"}`` (ISO-8601 UTC, end exclusive)."""
        return {"start": iso_z(self.start), "end": iso_z(self.end)}


def iso_z(t) -> str:
    """ISO-8601 UTC with a ``Z`` suffix, whole seconds (``2026-11-23T00:00:00Z``)."""
    t = t.astimezone(dt.timezone.utc).replace(microsecond=0, tzinfo=None)
    return t.isoformat() + "Z"


def parse_when(text: str, option: str = "--start") -> dt.datetime:
    """``2026-11-23``, ``2026-11-23T12:00``, ``2026-11-23 12:00:00+01:00`` or ``...Z`` -> aware
    UTC datetime; UTC unless a zone is given. Raises :class:`WindowError` naming ``option``."""
    s = text.strip()
    if s.endswith(("Z", "z")):
        s = s[:-1] + "+00:00"
    try:
        t = dt.datetime.fromisoformat(s)
    except ValueError:
        raise WindowError(option, f"not an ISO date or datetime: {text!r} (e.g. 2026-11-23 or "
                                  f"2026-11-23T08:00Z)") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.timezone.utc)
    return t.astimezone(dt.timezone.utc)


def parse_week(text: str) -> Window:
    """ISO week ``2026-W48`` -> Monday 00:00 UTC to the next Monday 00:00 UTC."""
    m = re.fullmatch(r"(\d{4})-?W(\d{1,2})", text.strip(), re.I)
    if not m:
        raise WindowError("--week", f"not an ISO week: {text!r} (expected e.g. 2026-W48)")
    try:
        monday = dt.date.fromisocalendar(int(m.group(1)), int(m.group(2)), 1)
    except ValueError as exc:
        raise WindowError("--week", f"not an ISO week: {text!r} ({exc})") from None
    start = dt.datetime.combine(monday, dt.time(), dt.timezone.utc)
    return Window(start, start + dt.timedelta(days=7))


def last_full_week(now: dt.datetime | None = None) -> Window:
    """The last complete ISO week before ``now`` (default: the current time)."""
    now = now or dt.datetime.now(dt.timezone.utc)
    this_monday = dt.datetime.combine(now.date() - dt.timedelta(days=now.weekday()), dt.time(),
                                      dt.timezone.utc)
    return Window(this_monday - dt.timedelta(days=7), this_monday)


def make_window(week: str | None, start: str | None, end: str | None,
                now: dt.datetime | None = None) -> Window:
    """From the CLI options: ``--week`` or ``--start``/``--end`` (end defaults to start + 7
    days); neither: the last full week. Raises :class:`WindowError`."""
    if week and (start or end):
        raise WindowError("--week", "give either --week or --start/--end, not both")
    if week:
        return parse_week(week)
    if start:
        s = parse_when(start, "--start")
        e = parse_when(end, "--end") if end else s + dt.timedelta(days=7)
        if e <= s:
            raise WindowError("--end", f"{iso_z(e)} is not after --start ({iso_z(s)})")
        return Window(s, e)
    if end:
        e = parse_when(end, "--end")
        return Window(e - dt.timedelta(days=7), e)
    return last_full_week(now)
