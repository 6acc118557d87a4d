"""NVRM Xid events from the kernel log.

Two inputs, one parser:

* :func:`read_kmsg` reads ``/dev/kmsg`` (records ``PRI,SEQ,USEC,FLAGS;MESSAGE``) from the
  sequence number saved in a cursor file, so each hook run sees only the XIDs logged since the
  previous one; the cursor is written atomically after the read.
* :func:`parse_log` parses saved text (``dmesg``, ``dmesg -T``, ``journalctl -k`` lines), as in
  ``../shared/corpus/logs/``; each :class:`~slurmkit.health.state.Xid` keeps its line number.

The line format is the driver's: ``NVRM: Xid (PCI:0000:9b:00): 119, pid=..., <text>``. A
GPU that fell off the bus may be logged without an Xid number (``NVRM: GPU at PCI:0000:3b:00:
GPU has fallen off the bus.``, ``NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.``): such a
line counts as Xid 79 on that GPU.

The first read with no cursor file (the first run after install) takes what the kernel still
buffers from the current boot as a *baseline*: those XIDs come back with ``origin``
``baseline:<device>`` (logged and shown, not a drain: :func:`slurmkit.health.checks.check_xid`).
Each consumer (prolog, epilog, health check) keeps its own cursor file, so one does not hide
another's XIDs.
"""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

from slurmkit.atomicfile import atomic_write
from slurmkit.health.state import Xid, normalise_bus_id

XID_RE = re.compile(r"NVRM: Xid \((?:PCI:)?(?P<bus>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)\):"
                    r"\s*(?P<xid>\d+),?\s*(?P<msg>.*)$")
_TS_RE = re.compile(r"^\[(?P<ts>[^\]]+)\]\s*")
OFF_BUS_RE = re.compile(r"NVRM: GPU (?:at )?(?:PCI:)?(?P<bus>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?):?"
                        r"\s*(?P<msg>.*fallen off the bus.*)$", re.IGNORECASE)
OFF_BUS_XID = 79
BASELINE = "baseline:"


def parse_line(line: str, origin: str = "", lineno: int = 0) -> Xid | None:
    """One log line -> Xid, or None when it is not an NVRM Xid line (a "fallen off the bus" line
    without a number: Xid 79)."""
    m = XID_RE.search(line)
    if not m:
        off = OFF_BUS_RE.search(line)
        if not off:
            return None
        ts = _TS_RE.match(line)
        try:
            bus = normalise_bus_id(off.group("bus"))
        except ValueError:
            bus = None
        return Xid(xid=OFF_BUS_XID, pci_bus_id=bus, message=off.group("msg").strip(), origin=origin, line=lineno,
                   timestamp=ts.group("ts") if ts else "")
    ts = _TS_RE.match(line)
    try:
        bus = normalise_bus_id(m.group("bus"))
    except ValueError:
        bus = None
    return Xid(xid=int(m.group("xid")), pci_bus_id=bus, message=m.group("msg").strip(),
               origin=origin, line=lineno, timestamp=ts.group("ts") if ts else "")


def parse_log(text: str, origin: str = "") -> list[Xid]:
    """Every Xid in a saved kernel log (dmesg / journalctl text), in order."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        x = parse_line(line, origin, n)
        if x is not None:
            out.append(x)
    return out


def read_kmsg(cursor_file: str | Path | None, device: str | Path = "/dev/kmsg") -> list[Xid]:
    """Xids logged since the sequence number saved in ``cursor_file`` (all buffered ones when the
    kernel's sequence restarted, e.g. after a reboot; when the file is absent, all buffered ones
    as the baseline, ``origin`` ``baseline:<device>``). Updates the cursor.
    Raises OSError when ``device`` cannot be opened (e.g. not root): slurmkit's own trouble."""
    last = -1
    first_run = cursor_file is not None and not os.path.exists(cursor_file)
    if cursor_file is not None:
        try:
            last = int(Path(cursor_file).read_text().strip() or -1)
        except (OSError, ValueError):
            last = -1
    fd = os.open(str(device), os.O_RDONLY | os.O_NONBLOCK)
    records: list[tuple[int, str]] = []
    try:
        while True:
            try:
                chunk = os.read(fd, 8192)
            except OSError as exc:
                if exc.errno == errno.EAGAIN:
                    break
                if exc.errno == errno.EPIPE:  # records overwritten while reading: go on
                    continue
                raise
            if not chunk:
                break
            for rec in chunk.decode("utf-8", errors="replace").splitlines():
                if rec.startswith(" ") or ";" not in rec:
                    continue  # continuation (KEY=value) lines
                head, _, msg = rec.partition(";")
                parts = head.split(",")
                try:
                    seq = int(parts[1])
                except (IndexError, ValueError):
                    continue
                records.append((seq, msg))
    finally:
        os.close(fd)
    if records and last >= 0 and records[-1][0] < last:
        last = -1  # sequence restarted (reboot): everything is new
    out = []
    for seq, msg in records:
        if seq <= last:
            continue
        x = parse_line(msg, (BASELINE if first_run else "") + str(device), seq)
        if x is not None:
            out.append(x)
    if cursor_file is not None and records:
        atomic_write(cursor_file, f"{records[-1][0]}\n")
    return out
