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
line counts as Xid 79 on that GPU; a GSP timeout / heartbeat line as Xid 119, a failed GPU
initialisation (``RmInitAdapter failed!``) as Xid 143 (see :func:`_parse`). How each Xid is
judged: :mod:`slurmkit.health.xidcatalog`.

The first read with no cursor file (the first run after install) takes what the kernel still
buffers from the current boot as a *baseline*: those XIDs come back with ``origin``
``baseline:<device>`` (logged and shown, not a drain: :func:`slurmkit.health.checks.check_xid`).
Each consumer (prolog, epilog, health check) keeps its own cursor file, so one does not hide
another's XIDs.

When a line was logged (``Xid.time_s``, epoch seconds, to attribute it to the job that ran on
its GPU then): ``/dev/kmsg`` gives each record's sequence number (``Xid.seq``, exact order within
a boot) and the kernel's timestamp in microseconds since boot, which :func:`read_kmsg` turns into
wall-clock time as ``dmesg -T`` does (util-linux): the boot's wall-clock time is now minus
``CLOCK_MONOTONIC`` (:func:`boot_time`; the printk clock does not count a suspend either). Like
``dmesg -T``'s, that time can drift from the wall clock by seconds over a long uptime (the printk
clock is not NTP-disciplined), so where both sides have a sequence number, slurmkit compares
those (:mod:`slurmkit.hooks.attribution`). Saved ``dmesg`` text has ``[  123.456789]`` (seconds
since boot: a time only when the boot's time is given) or ``dmesg -T``'s ``[Fri Aug 30 11:43:09
2024]`` (local time).
"""

from __future__ import annotations

import errno
import os
import re
import time

from slurmkit.atomicfile import atomic_write
from slurmkit.health.state import Xid, normalise_bus_id
from slurmkit.health.xidcatalog import SEVERITY_XIDS, judged_as  # noqa: F401  (kmsg's names, kept)

XID_RE = re.compile(r"NVRM: Xid \((?:PCI:)?(?P<bus>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)\):"
                    r"\s*(?P<xid>\d+),?\s*(?P<msg>.*)$")
_TS_RE = re.compile(r"^\[(?P<ts>[^\]]+)\]\s*")
OFF_BUS_RE = re.compile(r"NVRM: (?:The NVIDIA )?GPU (?:at )?(?:PCI:)?"
                        r"(?P<bus>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?):?"
                        r"\s*(?P<msg>.*fallen off the bus.*)$", re.IGNORECASE)
OFF_BUS_XID = 79
#: GSP (the GPU's firmware) stopped answering, logged without an Xid number: judged as Xid 119
#: (GSP RPC timeout) on the GPU the line names, e.g. ``NVRM: Rate limiting GSP RPC error prints
#: for GPU at PCI:0000:9b:00 (printing 1 of every 30).  The GPU likely needs to be reset.``, and
#: the driver's GSP heartbeat / timeout report (NVIDIA/open-gpu-kernel-modules#1230: ``NVRM: GPU6
#: _kgspIsHeartbeatTimedOut: Heartbeat timed out, ...``, ``NVRM: GPU6 kgmmuCheckMemSubsysError_IMPL:
#: Memory Subsystem Error detected. ...``, ``NVRM: GPU6 _kgspLogRpcTimeout: ****** GSP Timeout
#: ******``, ``_kgspRpcRecvPoll: GSP RM heartbeat timed out``).
GSP_RE = re.compile(r"NVRM: (?P<msg>(?:.*\bGSP\b.*(?:timeout|heartbeat|likely needs to be reset)"
                    r"|.*_kgspIsHeartbeatTimedOut|.*heartbeat timed out|.*Memory Subsystem Error detected).*)$",
                    re.IGNORECASE)
_BUS_IN_RE = re.compile(r"PCI:(?P<bus>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)")
GSP_XID = 119
#: The driver failed to initialise a GPU (``NVRM: GPU 0000:09:00.0: RmInitAdapter failed!
#: (0x22:0x56:894)`` and its twin ``NVRM: GPU 0000:09:00.0: rm_init_adapter failed, device minor
#: number 0``, NVIDIA/open-gpu-kernel-modules#1151): judged as Xid 143, the catalog's GPU
#: initialisation error (``GPU_INIT_ERROR``), on the GPU the line names.
INIT_RE = re.compile(r"NVRM: (?:GPU (?P<bus>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?):\s*)?"
                     r"(?P<msg>(?:RmInitAdapter failed!|rm_init_adapter failed).*)$")
INIT_XID = 143
#: ``NVRM: GPU<n> ...``: the driver's GPU instance, which follows NVML's enumeration order; a line
#: naming no PCI address is mapped to the GPU through this index (:func:`slurmkit.health.checks.check_xid`).
_GPU_INDEX_RE = re.compile(r"NVRM: GPU(?P<index>\d+)\b")
BASELINE = "baseline:"


def boot_time() -> float:
    """This boot's wall-clock time (epoch s) as ``dmesg -T`` reckons it: now minus
    ``CLOCK_MONOTONIC`` (the kernel's printk timestamps count from boot, without suspend)."""
    return time.time() - time.clock_gettime(time.CLOCK_MONOTONIC)


def _time_of(ts: str, boot_time_s: float | None) -> float | None:
    """Epoch seconds of a ``[...]`` kernel timestamp: seconds since boot (with ``boot_time_s``)
    or ``dmesg -T``'s ``Fri Aug 30 11:43:09 2024`` (local time); None otherwise."""
    ts = ts.strip()
    try:
        up = float(ts)
    except ValueError:
        try:
            return time.mktime(time.strptime(" ".join(ts.split()), "%a %b %d %H:%M:%S %Y"))
        except (ValueError, OverflowError):
            return None
    return boot_time_s + up if boot_time_s is not None else None


def _parse(line: str, origin: str, lineno: int, boot_time_s: float | None) -> tuple[Xid | None, bool]:
    """One log line (a multi-line message joined first: :func:`join_continuations`) ->
    ``(Xid or None, derived)``: None when it is not an NVRM Xid line. Lines without a number
    count as the Xid they are (``derived`` True): "fallen off the bus" (either wording) as Xid
    79, ``RmInitAdapter failed!`` / ``rm_init_adapter failed`` as Xid 143, a GSP timeout /
    heartbeat / needs-reset / "Memory Subsystem Error" line as Xid 119. Such a line without a
    PCI address keeps the driver's ``GPU<n>`` as ``gpu_index`` (None: it names no GPU, a
    node-level event). ``boot_time_s``:
    the boot's epoch time, to turn a ``[seconds since boot]`` prefix into ``Xid.time_s``."""
    derived = False
    index = None
    m = XID_RE.search(line)
    if m:
        xid, bus_text, msg = int(m.group("xid")), m.group("bus"), m.group("msg")
    else:
        off = OFF_BUS_RE.search(line)
        init = None if off else INIT_RE.search(line)
        gsp = None if off or init else GSP_RE.search(line)
        if off:
            xid, bus_text, msg = OFF_BUS_XID, off.group("bus"), off.group("msg")
        elif init:
            xid, bus_text, msg = INIT_XID, init.group("bus"), init.group("msg")
        elif gsp:
            bus_in = _BUS_IN_RE.search(line)
            xid, bus_text, msg = GSP_XID, bus_in.group("bus") if bus_in else None, gsp.group("msg")
        else:
            return None, False
        derived = True
        if bus_text is None:  # no PCI address: the GPU<n> the driver names, else the node
            gi = _GPU_INDEX_RE.search(line)
            index = int(gi.group("index")) if gi else None
    ts = _TS_RE.match(line)
    try:
        bus = normalise_bus_id(bus_text) if bus_text else None
    except ValueError:
        bus = None
    return Xid(xid=xid, pci_bus_id=bus, message=msg.strip(), origin=origin, line=lineno, gpu_index=index,
               timestamp=ts.group("ts") if ts else "",
               time_s=_time_of(ts.group("ts"), boot_time_s) if ts else None), derived


_CONT_RE = re.compile(r"^\s+NVRM:\s?")


def join_continuations(lines: list[str]) -> list[tuple[int, str]]:
    """Kernel-log text lines with each multi-line NVRM message joined into one ``(first line
    number, text)``, as the driver printed it in one record. ``dmesg`` and ``journalctl -k`` print
    a record's further lines indented, each starting ``NVRM:`` (NVIDIA/NVSentinel#155:
    ``[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0`` / ``               NVRM: (PCI ID:
    10de:26b5) installed in this system has`` / ``... NVRM: fallen off the bus and is not
    responding to commands.``); syslog files repeat the record's prefix and ``[timestamp]`` on
    each line, so a line with the same prefix up to ``NVRM:`` as the previous NVRM line, a
    kernel timestamp included, continues it."""
    out: list[tuple[int, str]] = []
    prev_prefix = None
    for n, line in enumerate(lines, 1):
        if out and _CONT_RE.match(line) and out[-1][1].find("NVRM:") >= 0:
            out[-1] = (out[-1][0], out[-1][1].rstrip() + " " + _CONT_RE.sub("", line, count=1).strip())
            continue
        at = line.find("NVRM:")
        prefix = line[:at] if at > 0 else None
        if prefix is not None and prefix == prev_prefix and _TS_IN_PREFIX.search(prefix) and out:
            out[-1] = (out[-1][0], out[-1][1].rstrip() + " " + line[at + 5:].strip())
            continue
        prev_prefix = prefix
        out.append((n, line))
    return out


_TS_IN_PREFIX = re.compile(r"\[\s*\d+\.\d{6}\]\s*$")


def once(events: list[tuple[Xid, bool]]) -> list[Xid]:
    """One event counted once: an event told without an Xid number (``derived``: a "fallen off
    the bus" line, a GSP timeout line) on a GPU for which the same read has the numbered Xid
    (Xid 79's own twin line, NVIDIA/NVSentinel#195) is dropped."""
    numbered = {(x.xid, x.pci_bus_id) for x, derived in events if not derived}
    return [x for x, derived in events if not (derived and (x.xid, x.pci_bus_id) in numbered)]


def parse_log(text: str, origin: str = "", boot_time_s: float | None = None) -> list[Xid]:
    """Every Xid in a saved kernel log (dmesg / journalctl text, multi-line messages joined:
    :func:`join_continuations`; each event once: :func:`once`), in order (``boot_time_s``:
    the boot's epoch time, to turn a ``[seconds since boot]`` prefix into ``Xid.time_s``)."""
    events = []
    for n, line in join_continuations(text.splitlines()):
        x, derived = _parse(line, origin, n, boot_time_s)
        if x is not None:
            events.append((x, derived))
    return once(events)


def name_gpus(xids: list[Xid], gpus) -> None:
    """Give each line of ``xids`` that names its GPU only as the driver's ``GPU<n>``
    (``Xid.gpu_index``, no PCI address) the PCI bus id of the GPU NVML enumerates at ``n``
    (``gpus``: :class:`~slurmkit.health.state.GpuState` list), in place; a line whose index NVML
    does not have keeps none (judged node-level: :func:`slurmkit.health.checks.check_xid`)."""
    by_index = {g.index: g.pci_bus_id for g in gpus if g.pci_bus_id}
    for x in xids:
        if x.pci_bus_id is None and x.gpu_index is not None and x.gpu_index in by_index:
            x.pci_bus_id = by_index[x.gpu_index]


def logged_before(x: Xid, seq: int | None, at_s: float | None) -> bool | None:
    """Whether Xid line ``x`` was logged before (or at) a moment known by its ``/dev/kmsg``
    sequence number ``seq`` (exact; both of this boot) or else its epoch time ``at_s`` (compared
    with ``x.time_s``); None when neither can be compared."""
    if x.seq is not None and seq is not None:
        return x.seq <= seq
    if x.time_s is not None and at_s is not None:
        return x.time_s <= at_s
    return None


def cursor_seq(cursor_file: str | os.PathLike) -> int | None:
    """The ``/dev/kmsg`` sequence number a cursor file holds (the last record read), None when
    absent or unreadable."""
    try:
        with open(cursor_file) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def write_cursor(cursor_file: str | os.PathLike, seq: int) -> None:
    """Set a cursor file to sequence number ``seq`` (atomically; raises OSError)."""
    atomic_write(cursor_file, f"{int(seq)}\n")


def kmsg_records(device: str | os.PathLike = "/dev/kmsg") -> list[tuple[int, int | None, str]]:
    """Every record buffered in the kernel log ``device`` (``/dev/kmsg`` format
    ``<prio>,<seq>,<usec since boot>,<flags>;<message>``) as ``(seq, usec or None, message)``,
    oldest first; continuation (`` KEY=value``) lines skipped, records overwritten while reading
    (EPIPE) passed over. Keeps no cursor. Raises OSError when ``device`` cannot be opened or read
    (e.g. not root)."""
    fd = os.open(str(device), os.O_RDONLY | os.O_NONBLOCK)
    records: list[tuple[int, int | None, str]] = []
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
            for rec in chunk.decode("utf-8", errors="replace").splitlines():  # kmsg escapes most bytes itself; a record that is not UTF-8 must not stop the read
                if rec.startswith(" ") or ";" not in rec:
                    continue  # continuation (KEY=value) lines
                head, _, msg = rec.partition(";")
                parts = head.split(",")
                try:
                    seq = int(parts[1])
                except (IndexError, ValueError):
                    continue
                try:
                    usec = int(parts[2])
                except (IndexError, ValueError):
                    usec = None
                records.append((seq, usec, msg))
    finally:
        os.close(fd)
    return records


def read_kmsg(cursor_file: str | os.PathLike | None, device: str | os.PathLike = "/dev/kmsg",
              boot_time_s: float | None = None, errors: list[str] | None = None) -> list[Xid]:
    """Xids logged since the sequence number saved in ``cursor_file`` (all buffered ones when the
    kernel's sequence restarted, e.g. after a reboot; when the file is absent, all buffered ones
    as the baseline, ``origin`` ``baseline:<device>``). Updates the cursor. Each Xid carries the
    record's ``seq`` (also its ``line``), the kernel's seconds since boot as ``timestamp`` and
    ``time_s`` = ``boot_time_s`` (default :func:`boot_time`) + that.
    Raises OSError when ``device`` cannot be opened (e.g. not root): slurmkit's own trouble.
    A cursor that cannot be written (a read-only or full state directory) loses no Xid: the
    lines read are returned, and the trouble is appended to ``errors`` (raised as OSError when
    ``errors`` is None); the next read starts from the old cursor again."""
    boot = boot_time() if boot_time_s is None else boot_time_s
    last = -1
    first_run = cursor_file is not None and not os.path.exists(cursor_file)
    if cursor_file is not None:
        try:
            with open(cursor_file) as f:
                last = int(f.read().strip() or -1)
        except (OSError, ValueError):
            last = -1
    records = kmsg_records(device)
    if records and last >= 0 and records[-1][0] < last:
        last = -1  # sequence restarted (reboot): everything is new
    events = []
    for seq, usec, msg in records:
        if seq <= last:
            continue
        if "\\x0a" in msg:  # a multi-line record: /dev/kmsg escapes its newlines
            msg = " ".join(part.strip().removeprefix("NVRM:").strip() if i else part.rstrip()
                           for i, part in enumerate(msg.split("\\x0a")))
        x, derived = _parse(msg, (BASELINE if first_run else "") + str(device), seq, None)
        if x is not None:
            x.seq = seq
            if usec is not None:
                x.timestamp, x.time_s = f"{usec / 1e6:.6f}", boot + usec / 1e6
            events.append((x, derived))
    if cursor_file is not None and records:
        try:
            write_cursor(cursor_file, records[-1][0])
        except OSError as exc:
            if errors is None:
                raise
            errors.append(f"kernel-log cursor {cursor_file}: {exc.strerror or exc}")
    return once(events)
