"""Fabric captures: ``ibstat``, ``ibv_devinfo`` (plain or ``-v``) and ``ibdev2netdev`` outputs read
into the fabric snapshot a live sysfs read gives.

:func:`parse_ibstat`, :func:`parse_ibv_devinfo` and :func:`parse_ibdev2netdev` are pure functions
over the text (tabs or spaces; ``ibstat`` output cut short by ``ibpanic`` keeps the devices it
printed and names the one it stopped at). Captures as people paste them are read: shell prompt
lines (``$ ibstat``, ``user@host:~$ ...``, ``[root@n1 ~]# ...``), ``# ibstat`` command and
``#`` comment lines, ``...`` elisions and ``ibdev2netdev``'s trailing ``# comments`` are
skipped (:func:`paste_lines`), and the notes say which lines were. A capture cut inside a port
or an HCA (a port without its ``State`` / ``Physical state`` / ``Rate`` / ``Link layer``, an
HCA with fewer ports than its ``Number of ports``) is unreadable, naming the file and line. Each gives ``{hca: {port: {"state", "phys_state",
"rate_gbps", "link_layer", "netdev"}}}`` with the kernel's words (``ACTIVE``, ``LinkUp``,
``InfiniBand``); a field the tool does not print is absent. :func:`capture_ports` writes the
devices as the kernel shows them under ``class/infiniband/<hca>/ports/<n>/`` in a temporary
tree and reads it with :func:`slurmkit.health.fabric.read_ib_ports`, so a capture gives exactly
the port records (and verdicts) a live read of the same ports gives; what the capture does not
hold (``ibv_devinfo`` without ``-v`` has no physical state or rate; no tool here prints the PCI
address or the error counters) is said in the returned notes, never invented.

Standard library only (and slurmkit's errors). A capture that cannot be read raises
:class:`CaptureFormatError`, a :class:`~slurmkit.health.errors.CaptureError` (an
:class:`~slurmkit.errors.InputError`) naming the file and line.
"""

from __future__ import annotations

import os
import re
import tempfile

from slurmkit.health.errors import CaptureError

#: ``ibstat``'s ``State:`` words and ``ibv_devinfo``'s ``PORT_*`` -> sysfs ``state`` (number, word).
STATES = {"down": (1, "DOWN"), "initializing": (2, "INIT"), "init": (2, "INIT"), "armed": (3, "ARMED"),
          "active": (4, "ACTIVE"), "active_defer": (5, "ACTIVE_DEFER")}
#: ``Physical state:`` / ``phys_state:`` words -> sysfs ``phys_state`` (number, word).
PHYS = {"sleep": (1, "Sleep"), "polling": (2, "Polling"), "disabled": (3, "Disabled"),
        "portconfigurationtraining": (4, "PortConfigurationTraining"), "linkup": (5, "LinkUp"),
        "link_up": (5, "LinkUp"), "linkerrorrecovery": (6, "LinkErrorRecovery"),
        "link_error_recovery": (6, "LinkErrorRecovery"), "phytest": (7, "Phy Test")}


class CaptureFormatError(CaptureError):
    """A fabric capture that is none of the three formats, or a line that breaks one: ``file``
    (also ``origin``), ``line`` (1-based) and what was expected; ``str()`` is ``file:line:
    message``. An :class:`~slurmkit.errors.InputError` (exit 2) and a ``ValueError``."""

    @property
    def origin(self) -> str:
        """The capture's file (``file``)."""
        return self.file


def _word(table: dict, text: str):
    key = text.strip().split("(")[0].strip().lower().replace("port_", "", 1).replace(" ", "")
    return table.get(key)


#: A shell prompt, with or without a command after it: ``$ ibstat``, ``user@host:~$ ibstat``,
#: ``[root@n1 ~]# ibstat``, ``root@f51fec68bf55:~# ibv_devinfo`` (``#`` lines: :func:`paste_lines`).
_PROMPT = re.compile(r"(?:\$|\[[^\]]*\]\s?[$#]|[\w.-]+@[\w.-]+(?::\S*)?\s?[$#])(?:\s|$)")
_ELISION = re.compile(r"(?:\.{3,}|…|\[\.{3}\]|<snip>|\[snip\])$", re.I)


class Skipped(str):
    """A note of :func:`paste_lines`: the lines of a capture left out as not the tool's output
    (a ``str``; its own type so that a caller keeps it apart from what the capture lacks)."""


def paste_lines(text: str, origin: str = "capture") -> tuple[list[tuple[int, str]], list[str]]:
    """``([(line number, line)], notes)``: the lines of a pasted capture that are the tool's
    output (1-based numbers of the file), leaving out blank lines, shell prompts (with the
    command typed after them), ``#`` lines (a root prompt's command such as ``# ibstat``, or a
    comment), ``set -x`` traces (``+ ibstat``), ``ibwarn:`` debug lines, ``...`` elisions, and an ``ibdev2netdev`` line's trailing ``# comment`` (cut off
    the line). ``notes``: one :class:`Skipped` line saying what was skipped (``origin: skipped 2 lines that are
    not ibstat output: 1 (shell prompt '$ ibstat'), 5 ('...' elision)``), none when nothing was."""
    out: list[tuple[int, str]] = []
    skipped: list[str] = []
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s:
            continue
        if _PROMPT.match(s):
            skipped.append(f"{n} (shell prompt {s[:40]!r})")
        elif s.startswith("#"):
            skipped.append(f"{n} (command or comment {s[:40]!r})")
        elif re.match(r"\++ \S", s):
            skipped.append(f"{n} (shell trace {s[:40]!r})")
        elif s.startswith("ibwarn:"):
            skipped.append(f"{n} (ibstat's debug line {s[:40]!r})")
        elif _ELISION.match(s):
            skipped.append(f"{n} ('{s}' elision)")
        else:
            if "==>" in s and "#" in s:  # ibdev2netdev | column -t, annotated: mlx5_0 port 1 ==> ib0 (Up)  # note
                cut = s.index("#")
                skipped.append(f"{n} (comment {s[cut:][:40]!r})")
                line = s[:cut].rstrip()
            out.append((n, line))
    notes = []
    if skipped:
        shown = ", ".join(skipped[:4]) + (f", and {len(skipped) - 4} more" if len(skipped) > 4 else "")
        notes.append(Skipped(f"{origin}: skipped {len(skipped)} line{'s' if len(skipped) > 1 else ''} that "
                             f"{'are' if len(skipped) > 1 else 'is'} not the tool's output: {shown}"))
    return out, notes


def kind_of(text: str) -> str | None:
    """``ibstat`` | ``ibv_devinfo`` | ``ibdev2netdev`` from the text's first line of a tool's
    output (:func:`paste_lines`: prompts, comments and elisions before it do not count), or
    None."""
    for _n, line in paste_lines(text)[0]:
        s = line.strip()
        if s.startswith("CA '"):
            return "ibstat"
        if s.startswith("hca_id:"):
            return "ibv_devinfo"
        if "==>" in s and " port " in f" {s} ":
            return "ibdev2netdev"
        return None
    return None


#: What ``ibstat`` prints for every port (``Link layer`` last): a port without one of them was cut.
IBSTAT_PORT_KEYS = {"state": "State", "phys_state": "Physical state", "rate_gbps": "Rate",
                    "link_layer": "Link layer"}
#: What ``ibv_devinfo`` prints for every port (``link_layer`` last without ``-v``).
DEVINFO_PORT_KEYS = {"state": "state", "link_layer": "link_layer"}


def _check_whole(devices: dict, counts: dict, last: dict, keys: dict, origin: str, tool: str) -> None:
    """Raise :class:`CaptureFormatError` at the last line of the first port that lacks one of
    ``keys`` ({record key: the tool's word}) or HCA with fewer ports than it says it has
    (``counts``: {hca: (ports said, line)}); ``last``: {(hca, port) or hca: its last line}."""
    for hca, ports in devices.items():
        for port, rec in ports.items():
            lacking = [word for k, word in keys.items() if k not in rec]
            if lacking:
                raise CaptureFormatError(origin, last[(hca, port)], f"{hca} port {port} has no {lacking[0]!r} "
                                         f"line: the {tool} capture is cut (or elided) inside the port")
        said = counts.get(hca)
        if said is not None and len(ports) < said[0] or said is None and not ports:
            raise CaptureFormatError(origin, last[hca], f"{hca} has {len(ports)} of its "
                                     f"{said[0] if said else 'any'} ports: the {tool} capture is cut (or elided) "
                                     "inside the HCA")


def parse_ibstat(text: str, origin: str = "ibstat") -> tuple[dict, list[str]]:
    """``({hca: {port: {"state", "phys_state", "rate_gbps", "link_layer"}}}, notes)`` from
    ``ibstat`` output, pasted or not (:func:`paste_lines`). ``notes``: the lines skipped, and an
    ``ibpanic`` line (ibstat stopped there: the device it names could not be read, devices after
    it were not printed; the device is kept under :data:`STOPPED`). Raises
    :class:`CaptureFormatError` for a port line outside a ``CA '<name>'`` section, an unreadable
    value, or a capture cut inside a port or an HCA (:data:`IBSTAT_PORT_KEYS`, ``Number of
    ports``)."""
    devices: dict = {}
    lines, notes = paste_lines(text, origin)
    counts: dict = {}
    last: dict = {}
    hca = port = None
    for n, line in lines:
        s = line.strip()
        if s.startswith("ibpanic:"):
            notes.append(f"{origin}:{n}: ibstat stopped: {s}")
            m = re.search(r"IB device '([^']+)'", s)
            if m:  # the device it could not stat; the ones after it (ibstat's order) were never printed
                devices.setdefault(STOPPED, m.group(1))
            break
        m = re.match(r"CA '([^']+)'$", s)
        if m:
            hca, port = m.group(1), None
            devices[hca], last[hca] = {}, n
            continue
        m = re.match(r"Port (\d+):$", s)
        if m:
            if hca is None:
                raise CaptureFormatError(origin, n, f"a port before any CA '<name>' line: {s!r}")
            port = int(m.group(1))
            devices[hca][port] = {}
            last[hca] = last[(hca, port)] = n
            continue
        key, sep, value = s.partition(":")
        if hca is not None:
            last[hca] = n
        if sep and hca is not None and port is None and key.strip() == "Number of ports" and value.strip().isdigit():
            counts[hca] = (int(value), n)
        if not sep or port is None or hca is None:
            continue  # the CA's own lines (CA type, firmware, GUIDs)
        last[(hca, port)] = n
        _ibstat_field(devices[hca][port], key.strip(), value.strip(), origin, n)
    stopped = devices.pop(STOPPED, None)
    _check_whole(devices, counts, last, IBSTAT_PORT_KEYS, origin, "ibstat")
    if stopped is not None:
        devices[STOPPED] = stopped
    return devices, notes


def _ibstat_field(rec: dict, key: str, value: str, origin: str, n: int) -> None:
    if key == "State":
        got = _word(STATES, value)
        if got is None:
            raise CaptureFormatError(origin, n, f"unknown port state {value!r}")
        rec["state"] = got
    elif key == "Physical state":
        got = _word(PHYS, value)
        if got is None:
            raise CaptureFormatError(origin, n, f"unknown physical state {value!r}")
        rec["phys_state"] = got
    elif key == "Rate":
        try:
            rec["rate_gbps"] = float(value)
        except ValueError:
            raise CaptureFormatError(origin, n, f"want a rate in Gb/s, got {value!r}") from None
    elif key == "Link layer":
        rec["link_layer"] = value


def parse_ibv_devinfo(text: str, origin: str = "ibv_devinfo") -> tuple[dict, list[str]]:
    """Ports from ``ibv_devinfo`` (``state: PORT_ACTIVE (4)``, ``link_layer``) and, with ``-v``,
    ``phys_state: LINK_UP (5)`` and the rate (``active_width: 4X (2)`` times ``active_speed:
    100.0 Gbps (128)`` -> 400 Gb/s), pasted or not (:func:`paste_lines`; notes: the lines
    skipped). Raises :class:`CaptureFormatError` for a port line outside an ``hca_id:`` section,
    an unreadable value, or a capture cut inside a port or an HCA (:data:`DEVINFO_PORT_KEYS`,
    ``phys_port_cnt``)."""
    devices: dict = {}
    hca = port = None
    width: dict = {}
    speed: dict = {}
    lines, notes = paste_lines(text, origin)
    counts: dict = {}
    last: dict = {}
    for n, line in lines:
        s = line.strip()
        key, sep, value = s.partition(":")
        if hca is not None:
            last[hca] = n
            if port is not None:
                last[(hca, port)] = n
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "hca_id":
            hca, port = value, None
            devices[hca], last[hca] = {}, n
        elif key == "port" and value.isdigit():
            if hca is None:
                raise CaptureFormatError(origin, n, f"a port before any hca_id line: {s!r}")
            port = int(value)
            devices[hca][port] = {}
            last[(hca, port)] = n
        elif key == "phys_port_cnt" and hca is not None and value.isdigit():
            counts[hca] = (int(value), n)
        elif port is None or hca is None:
            continue
        elif key == "state":
            got = _word(STATES, value)
            if got is None:
                raise CaptureFormatError(origin, n, f"unknown port state {value!r}")
            devices[hca][port]["state"] = got
        elif key == "phys_state":
            got = _word(PHYS, value)
            if got is None:
                raise CaptureFormatError(origin, n, f"unknown physical state {value!r}")
            devices[hca][port]["phys_state"] = got
        elif key == "link_layer":
            devices[hca][port]["link_layer"] = value
        elif key == "active_width":
            m = re.match(r"(\d+)X", value)
            if m:
                width[(hca, port)] = int(m.group(1))
        elif key == "active_speed":
            m = re.match(r"([\d.]+) Gbps", value)
            if m:
                speed[(hca, port)] = float(m.group(1))
    _check_whole(devices, counts, last, DEVINFO_PORT_KEYS, origin, "ibv_devinfo")
    for (h, p), w in width.items():
        if (h, p) in speed:
            devices[h][p]["rate_gbps"] = w * speed[(h, p)]
    return devices, notes


#: ``ibdev2netdev``'s ``(Up)`` / ``(Down)`` is the carrier of the port's netdev
#: (``/sys/class/net/<netdev>/carrier``: mlnx-tools' ``ibdev2netdev``, ``get_link_state``). Up:
#: the port's link is up (ACTIVE). Down on an Ethernet netdev: a RoCE port is DOWN while its
#: netdev has no carrier (mlx5's RoCE port state follows its netdev). Down on an IPoIB netdev
#: (``ib*``) says nothing of the InfiniBand port (an IPoIB interface not brought up reads Down
#: over an ACTIVE port): not judged, and said.
CARRIER = {"up": (4, "ACTIVE"), "down": (1, "DOWN")}


#: ``ibdev2netdev -v``: ``<pci> <hca> (<device id> - <part id>) <description> fw <version> port <n>
#: (<STATE>) ==> <netdev> (Up|Down)`` (mlnx-tools' ``print_verbose_info``; the state padded to 6).
_VERBOSE = re.compile(r"(?:[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.\d\s+)?(?P<hca>\S+)\s+\(.*\bport\s+"
                      r"(?P<port>\d+)\s+\((?P<state>\w+)\s*\)\s+==>\s+(?P<netdev>\S+)\s+\((?P<word>\w+)\)"
                      r"(?:\s+\(\S+\))?$")
_PLAIN = re.compile(r"(?P<hca>\S+)\s+port\s+(?P<port>\d+)\s+==>\s+(?P<netdev>\S+)(?:\s+\((?P<word>\w+)\))?$")


def _ipoib(netdev: str) -> bool:
    return netdev.startswith("ib")


def parse_ibdev2netdev(text: str, origin: str = "ibdev2netdev") -> tuple[dict, list[str]]:
    """``{hca: {port: {"netdev", "netdev_up", "carrier_state", "state"}}}`` from ``ibdev2netdev``
    (``mlx5_0 port 1 ==> ibp24s0 (Up)``; ``| column -t`` spacing, a trailing ``# comment`` cut)
    or ``ibdev2netdev -v`` (:data:`_VERBOSE`: ``state`` is the port's own, ``(ACTIVE)``), pasted
    or not (:func:`paste_lines`); ``carrier_state`` (:data:`CARRIER`): the port's state as its
    ``(Up)`` / ``(Down)`` gives it, absent for ``(NA)`` and for ``(Down)`` on an IPoIB netdev (the
    notes name those ports when ``-v`` gives no state). Raises :class:`CaptureFormatError` for any
    other line."""
    devices: dict = {}
    lines, notes = paste_lines(text, origin)
    ipoib_down = []
    for n, line in lines:
        s = line.strip()
        m = _PLAIN.match(s)
        v = None if m else _VERBOSE.match(s)
        if v:  # -v: the port's own state is printed too
            m = v
        elif not m:
            raise CaptureFormatError(origin, n, f"want '<hca> port <n> ==> <netdev> (Up|Down)' (or ibdev2netdev "
                                                f"-v's '<pci> <hca> (<ids>) ... port <n> (<STATE>) ==> ...'), "
                                                f"got {s!r}")
        word, netdev, hca, port = (m["word"] or "").lower(), m["netdev"], m["hca"], int(m["port"])
        rec = {"netdev": netdev, "netdev_up": word == "up"}
        if v and _word(STATES, v["state"]):
            rec["state"] = _word(STATES, v["state"])
        if word == "up" or word == "down" and not _ipoib(netdev):
            rec["carrier_state"] = CARRIER[word]
        elif word == "down" and "state" not in rec:
            ipoib_down.append(f"{hca}/{port}")
        devices.setdefault(hca, {})[port] = rec
    if ipoib_down:
        notes.append(f"{origin}: {', '.join(ipoib_down)}: (Down) is the carrier of an IPoIB interface, not the "
                     "InfiniBand port's state (an IPoIB interface not brought up reads Down over an ACTIVE "
                     "port): their state is not judged without ibstat, ibv_devinfo or ibdev2netdev -v")
    return devices, notes


#: The key of a device table that names the device ``ibstat`` stopped at (``ibpanic``).
STOPPED = "(ibstat stopped at)"

PARSERS = {"ibstat": parse_ibstat, "ibv_devinfo": parse_ibv_devinfo, "ibdev2netdev": parse_ibdev2netdev}


def read_captures(files: dict) -> tuple[dict, list[str]]:
    """Merge captures ``{path: text}`` (each of any of the three kinds) into one device table;
    a later capture fills the fields an earlier one lacks (ibstat's rate, ibdev2netdev's
    netdev). Raises :class:`CaptureFormatError` naming a file that is none of them."""
    merged: dict = {}
    notes: list[str] = []
    for path, text in files.items():
        kind = kind_of(text)
        if kind is None:
            raise CaptureFormatError(path, 1, "not ibstat, ibv_devinfo or ibdev2netdev output")
        devices, more = PARSERS[kind](text, path)
        notes.extend(more)
        if STOPPED in devices:
            merged[STOPPED] = devices.pop(STOPPED)
        for hca, ports in devices.items():
            d = merged.setdefault(hca, {})
            for port, rec in ports.items():
                have = d.setdefault(port, {})
                for k, v in rec.items():
                    have.setdefault(k, v)
    for ports in merged.values():  # ibdev2netdev's carrier: the state where no ibstat / ibv_devinfo gave one
        for rec in ports.values() if isinstance(ports, dict) else ():
            if "state" not in rec and "carrier_state" in rec:
                rec["state"] = rec["carrier_state"]
    return merged, notes


def _write_tree(root: str, devices: dict) -> None:
    for hca, ports in devices.items():
        if hca == STOPPED:
            continue
        for port, rec in ports.items():
            d = os.path.join(root, "class", "infiniband", hca, "ports", str(port))
            os.makedirs(d, exist_ok=True)
            if "state" in rec:
                _put(d, "state", f"{rec['state'][0]}: {rec['state'][1]}")
            if "phys_state" in rec:
                _put(d, "phys_state", f"{rec['phys_state'][0]}: {rec['phys_state'][1]}")
            elif rec.get("state", (0, ""))[1] == "ACTIVE":
                _put(d, "phys_state", "5: LinkUp")  # a port is ACTIVE only over a physical link up
            elif "state" in rec:  # not ACTIVE is judged as it is; the physical state stays unknown
                _put(d, "phys_state", "0: not in the capture")
            if "rate_gbps" in rec:
                _put(d, "rate", f"{rec['rate_gbps']:g} Gb/sec")
            if "link_layer" in rec:
                _put(d, "link_layer", rec["link_layer"])
            if rec.get("netdev"):
                nd = os.path.join(d, "gid_attrs", "ndevs")
                os.makedirs(nd, exist_ok=True)
                _put(nd, "0", rec["netdev"])


def _put(d: str, name: str, text: str) -> None:
    with open(os.path.join(d, name), "w", encoding="ascii") as fh:
        fh.write(text + "\n")


def capture_ports(devices: dict, hcas: list[dict] | None, origin: str = "capture") -> tuple[list[dict], list[str]]:
    """The port records :func:`slurmkit.health.fabric.read_ib_ports` gives for ``devices`` (a
    :func:`read_captures` table) and ``hcas`` (the profile's judged HCAs,
    :func:`slurmkit.health.config.judged_hcas`; None: every device of the capture, without
    expectations). Returns ``(ports, notes)``: notes name what the capture does not hold, with
    ``origin`` in place of the temporary tree."""
    from slurmkit.health.fabric import read_ib_ports, state_only_hcas

    devices = dict(devices)
    stopped = devices.pop(STOPPED, None)
    if hcas is None:  # the HCA ibstat stopped at is one of the node's: judged (missing), by its name
        hcas = state_only_hcas(sorted(set(devices) | ({stopped} if stopped else set())))
    # the tools name HCAs, never their PCI addresses: the profile's HCAs are matched by name
    hcas = [{**h, "pci": None} for h in hcas]
    notes = []
    if stopped is not None:  # ibstat lists HCAs in name order: those after its stop are unknown, not missing
        later = [h["device"] for h in hcas if h["device"].split(":")[0] > stopped]
        hcas = [h for h in hcas if h["device"].split(":")[0] <= stopped]
        if later:
            notes.append(f"{origin}: {', '.join(later)} not reported (ibstat stopped at {stopped}): not judged")
    with tempfile.TemporaryDirectory(prefix="slurmkit-fabric-") as root:
        os.makedirs(os.path.join(root, "class", "infiniband"))
        _write_tree(root, devices)
        ports, errors = read_ib_ports(root, hcas)
    expected_layer = {h["device"].split(":")[0]: h.get("link_layer") for h in hcas}
    for e in errors:
        rel = e.replace(os.path.join(root, "class", "infiniband") + os.sep, "")
        path, _, _ = rel.partition(":")
        bits = path.split(os.sep)
        what = bits[-1] if bits else rel
        if what == "rate":  # ibv_devinfo without -v has none: not judged, as a value NVML lacks
            continue
        if what == "link_layer" and bits and not expected_layer.get(bits[0]):
            continue  # ibdev2netdev prints none; nothing expects one (no site): not needed for the verdict
        where = f"{bits[0]}/{bits[2]}" if len(bits) >= 3 else bits[0]
        notes.append(f"{origin}: {where}: {what} not in the capture")
    for p in ports:
        p.pop("timed_out", None)
    return ports, notes
