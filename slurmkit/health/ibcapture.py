"""Fabric captures: ``ibstat``, ``ibv_devinfo`` (plain or ``-v``) and ``ibdev2netdev`` outputs read
into the fabric snapshot a live sysfs read gives.

:func:`parse_ibstat`, :func:`parse_ibv_devinfo` and :func:`parse_ibdev2netdev` are pure functions
over the text (tabs or spaces; ``ibstat`` output cut short by ``ibpanic`` keeps the devices it
printed and says where it stopped). Each gives ``{hca: {port: {"state", "phys_state",
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


def kind_of(text: str) -> str | None:
    """``ibstat`` | ``ibv_devinfo`` | ``ibdev2netdev`` from the text's first meaningful line, or
    None."""
    for line in text.splitlines():
        s = line.strip()
        if not s:
            continue
        if s.startswith("CA '"):
            return "ibstat"
        if s.startswith("hca_id:"):
            return "ibv_devinfo"
        if "==>" in s and " port " in f" {s} ":
            return "ibdev2netdev"
        return None
    return None


def parse_ibstat(text: str, origin: str = "ibstat") -> tuple[dict, list[str]]:
    """``({hca: {port: {"state", "phys_state", "rate_gbps", "link_layer"}}}, notes)`` from
    ``ibstat`` output. ``notes``: an ``ibpanic`` line (ibstat stopped there: the device it names
    could not be read, devices after it were not printed). Raises :class:`CaptureFormatError`
    for a port line outside a ``CA '<name>'`` section or an unreadable value."""
    devices: dict = {}
    notes: list[str] = []
    hca = port = None
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s:
            continue
        if s.startswith("ibpanic:"):
            notes.append(f"{origin}:{n}: ibstat stopped: {s}")
            m = re.search(r"IB device '([^']+)'", s)
            if m:  # the device it could not stat; the ones after it (ibstat's order) were never printed
                devices.setdefault(STOPPED, m.group(1))
            break
        m = re.match(r"CA '([^']+)'$", s)
        if m:
            hca, port = m.group(1), None
            devices[hca] = {}
            continue
        m = re.match(r"Port (\d+):$", s)
        if m:
            if hca is None:
                raise CaptureFormatError(origin, n, f"a port before any CA '<name>' line: {s!r}")
            port = int(m.group(1))
            devices[hca][port] = {}
            continue
        key, sep, value = s.partition(":")
        if not sep or port is None or hca is None:
            continue  # the CA's own lines (CA type, firmware, GUIDs)
        rec = devices[hca][port]
        key, value = key.strip(), value.strip()
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
    return devices, notes


def parse_ibv_devinfo(text: str, origin: str = "ibv_devinfo") -> tuple[dict, list[str]]:
    """Ports from ``ibv_devinfo`` (``state: PORT_ACTIVE (4)``, ``link_layer``) and, with ``-v``,
    ``phys_state: LINK_UP (5)`` and the rate (``active_width: 4X (2)`` times ``active_speed:
    100.0 Gbps (128)`` -> 400 Gb/s). Raises :class:`CaptureFormatError` for a port line outside
    an ``hca_id:`` section or an unreadable value."""
    devices: dict = {}
    hca = port = None
    width: dict = {}
    speed: dict = {}
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        key, sep, value = s.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "hca_id":
            hca, port = value, None
            devices[hca] = {}
        elif key == "port" and value.isdigit():
            if hca is None:
                raise CaptureFormatError(origin, n, f"a port before any hca_id line: {s!r}")
            port = int(value)
            devices[hca][port] = {}
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
    for (h, p), w in width.items():
        if (h, p) in speed:
            devices[h][p]["rate_gbps"] = w * speed[(h, p)]
    return devices, []


def parse_ibdev2netdev(text: str, origin: str = "ibdev2netdev") -> tuple[dict, list[str]]:
    """``{hca: {port: {"netdev", "netdev_up"}}}`` from ``ibdev2netdev`` (``mlx5_0 port 1 ==>
    ibp24s0 (Up)``). Raises :class:`CaptureFormatError` for any other line."""
    devices: dict = {}
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s:
            continue
        m = re.match(r"(\S+)\s+port\s+(\d+)\s+==>\s+(\S+)(?:\s+\((\w+)\))?$", s)
        if not m:
            raise CaptureFormatError(origin, n, f"want '<hca> port <n> ==> <netdev> (Up|Down)', got {s!r}")
        devices.setdefault(m.group(1), {})[int(m.group(2))] = {"netdev": m.group(3),
                                                                "netdev_up": (m.group(4) or "").lower() == "up"}
    return devices, []


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
    from slurmkit.health.fabric import read_ib_ports

    if hcas is None:
        hcas = [{"device": h, "link_layer": None, "rate_gbps": None, "role": "compute", "pci": None}
                for h in sorted(devices)]
    # the tools name HCAs, never their PCI addresses: the profile's HCAs are matched by name
    hcas = [{**h, "pci": None} for h in hcas]
    devices = dict(devices)
    stopped = devices.pop(STOPPED, None)
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
    for e in errors:
        rel = e.replace(os.path.join(root, "class", "infiniband") + os.sep, "")
        path, _, _ = rel.partition(":")
        bits = path.split(os.sep)
        what = bits[-1] if bits else rel
        if what == "rate":  # ibv_devinfo without -v has none: not judged, as a value NVML lacks
            continue
        where = f"{bits[0]}/{bits[2]}" if len(bits) >= 3 else bits[0]
        notes.append(f"{origin}: {where}: {what} not in the capture")
    for p in ports:
        p.pop("timed_out", None)
    return ports, notes
