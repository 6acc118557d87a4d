"""InfiniBand / RoCE ports (and plain Ethernet NICs): read from sysfs, judged against the node
type's NICs.

Read (:func:`read_ib_ports`): for each NIC the profile lists, every port under
``<sysfs>/class/infiniband/<hca>/ports/<n>/`` — ``state`` (``4: ACTIVE``), ``phys_state``
(``5: LinkUp``), ``rate`` (``400 Gb/sec (4X NDR)`` -> 400.0 Gbit/s), ``link_layer``
(``InfiniBand`` | ``Ethernet`` for RoCE) and the error counters of :data:`COUNTERS` from
``counters/``. A NIC the profile calls ``Ethernet`` that is not an RDMA device (no
``class/infiniband/<dev>``) is read as a netdev: ``class/net/<dev>/operstate`` and ``speed``
(Mbit/s). The sysfs root is a parameter (tests fill fake trees under a temporary directory).

Identity: the kernel numbers HCAs (``mlx5_0``, ``mlx5_1`` ...) in probe order, so when a card is
lost the others are renumbered and a name names another card. Each port therefore also carries
its PCI address (``class/infiniband/<hca>/device`` -> the PCI function, e.g. ``0000:0c:00.0``)
and its netdev (``device/net/<netdev>``, the one whose ``dev_port`` is the port's index when the
function has several; else ``ports/<n>/gid_attrs/ndevs/0``, RoCE). When the profile gives an
HCA's PCI address (``pci = "0000:0c:00.0"`` in ``node_types.<t>.nics``) the HCA is found by it
(whatever the kernel calls it now) and one that is not there is reported missing by its PCI
address; without it, by name.

Judged (one function per check, NHC style, over the ``ib_ports`` of a
:class:`~slurmkit.health.state.NodeState` and the previous run's counters in
``state.baseline``):

* ``ib_port``: the HCA exists, each judged port is ACTIVE / LinkUp (a netdev: ``up``) with the
  expected link layer -> else fail (a ``warn`` tier port: warn);
* ``ib_rate``: the port's rate is below the profile's ``rate_gbps`` -> fail (``warn`` tier: warn);
* ``ib_counters`` (InfiniBand link layer only): an error counter rose since the previous run ->
  warn; by ``ib_counter_rise_fail`` or more (``link_downed``: ``ib_link_downed_rise_fail``) ->
  fail; a counter stuck at its maximum (:data:`COUNTER_BITS`) -> warn, rises cannot be judged.

Which NICs, in tiers (``HealthConfig.expect["hcas"]``,
:func:`slurmkit.health.config.judged_hcas`): the node type's NICs with link layer InfiniBand,
RoCE or Ethernet. Role ``compute``: what is wrong fails (drains). Any other role (storage,
management): it warns, never drains, unless ``[health] ib_judge_other_nics`` (then it fails like
a compute port). A node without a node type: every port under ``class/infiniband`` must be
ACTIVE / LinkUp, warn-level (``device = "*"``; no link layer or rate is expected). A device
written ``mlx5_0:1`` judges that port only; ``mlx5_0`` judges every port of the HCA. EFA devices
are not judged here.

A file that cannot be read in a port that exists, or a sysfs root without ``class/``, is
slurmkit's own trouble (recorded in ``NodeState.errors``), never a drain. The reads run in one
daemon thread bounded by the hook's deadline (:func:`read_node_fabric`). Standard library only,
plus :func:`slurmkit.topology.sysfs.class_device_pci` and the deadline's default
(:mod:`slurmkit.profile.health`).
"""

from __future__ import annotations

import os

from slurmkit.profile.health import Health
from slurmkit.health.result import FAIL, PASS, WARN, CheckResult

#: The error counters read from ``ports/<n>/counters/`` (Linux ib_core names) and their width in
#: bits: they saturate at ``2**bits - 1`` (the PortCounters attribute, 0x0012, of the InfiniBand
#: Architecture Specification vol. 1, chapter 16.1 Performance Management; Linux
#: ``drivers/infiniband/core/sysfs.c``: ``PORT_PMA_ATTR(name, counter, width, offset)``, e.g.
#: ``PORT_PMA_ATTR(symbol_error, 0, 16, 32)``, ``PORT_PMA_ATTR(link_downed, 2, 8, 56)``,
#: ``PORT_PMA_ATTR(local_link_integrity_errors, 9, 4, 152)``). The 64-bit
#: PortCountersExtended attribute covers only the data and packet counters, never these.
#: Congestion counters (``port_xmit_discards``, ``port_xmit_wait``) are not faults, not read.
COUNTER_BITS = {"link_downed": 8, "link_error_recovery": 8, "symbol_error": 16, "port_rcv_errors": 16,
                "local_link_integrity_errors": 4, "excessive_buffer_overrun_errors": 4,
                "port_rcv_remote_physical_errors": 16}
COUNTERS = tuple(COUNTER_BITS)
#: Profile ``link_layer`` -> the ``link_layer`` sysfs shows (RoCE and Ethernet ports: Ethernet).
SYSFS_LINK_LAYER = {"InfiniBand": "InfiniBand", "RoCE": "Ethernet", "Ethernet": "Ethernet"}
#: The share of one NVML call's deadline (``[health] per_call_deadline_s``) that the reads beside
#: NVML (ports, fabric manager, GPUDirect module) may take together: under the NVML worker they
#: time out on their own, before the runner would take them for a hung NVML call.
DEADLINE_SHARE = 0.75
#: Their bound when no deadline is given (s): the share of the default per-call deadline
#: (:class:`slurmkit.profile.health.Health`, the one default: 3 s -> 2.25 s).
FABRIC_READ_TIMEOUT_S = Health.per_call_deadline_s * DEADLINE_SHARE


def counter_max(name: str) -> int:
    """The value counter ``name`` (:data:`COUNTER_BITS`) saturates at: 65535 for
    ``symbol_error``, 255 for ``link_downed``, 15 for ``local_link_integrity_errors``."""
    return (1 << COUNTER_BITS[name]) - 1


def read_timeout_s(per_call_deadline_s: float) -> float:
    """How long the reads beside NVML may take (s): :data:`DEADLINE_SHARE` of one NVML call's
    deadline (``[health] per_call_deadline_s``, or the hook's ``deadline_s`` when smaller)."""
    return float(per_call_deadline_s) * DEADLINE_SHARE


def _text(path: str) -> str:
    with open(path, encoding="ascii", errors="replace") as fh:  # sysfs attributes are ASCII; a stray byte must not raise in a hook
        return fh.read().strip()


def _word(text: str) -> str:
    """``4: ACTIVE`` -> ``ACTIVE`` (sysfs prints the number, a colon and the name)."""
    return text.split(":", 1)[1].strip() if ":" in text else text


def parse_rate(text: str) -> float:
    """``400 Gb/sec (4X NDR)`` -> 400.0 (Gbit/s); ``2.5 Gb/sec (1X SDR)`` -> 2.5. Raises
    ValueError for anything else."""
    head = text.split()
    if len(head) < 2 or not head[1].startswith("Gb/s"):
        raise ValueError(f"not an ib rate: {text!r}")
    return float(head[0])


def hca_spec(device: str) -> tuple[str, int | None]:
    """``mlx5_0`` -> (``mlx5_0``, None: every port); ``mlx5_0:1`` -> (``mlx5_0``, 1)."""
    name, _, port = device.partition(":")
    return name, (int(port) if port.isdigit() else None)


class _Tree:
    """The sysfs root being read, with the PCI address -> device name maps of
    ``class/infiniband`` and ``class/net`` built on first use."""

    def __init__(self, sysfs):
        self.sysfs = os.fspath(sysfs)
        self.cls = os.path.join(self.sysfs, "class")
        self.ib = os.path.join(self.cls, "infiniband")
        self._by_pci: dict[str, dict[str, str]] = {}

    def pci(self, cls: str, name: str) -> str | None:
        from slurmkit.topology.sysfs import class_device_pci

        return class_device_pci(self.sysfs, cls, name) or None

    def named(self, cls: str, pci: str) -> str | None:
        """The ``class/<cls>`` device whose PCI function is ``pci`` (None: none)."""
        if cls not in self._by_pci:
            try:
                names = sorted(os.listdir(os.path.join(self.cls, cls)))
            except OSError:
                names = []
            table: dict[str, str] = {}
            for n in names:
                table.setdefault(self.pci(cls, n) or "", n)
            self._by_pci[cls] = table
        return self._by_pci[cls].get(pci)


def read_ib_ports(sysfs: str | os.PathLike, hcas: list[dict]) -> tuple[list[dict], list[str]]:
    """Read the ports of ``hcas`` (``[{"device", "link_layer", "rate_gbps", "pci"?}]``, from the
    profile).

    Returns ``(ports, errors)``. ``ports``: one dict per port, in profile then port order:
    ``{"hca" (the kernel's name now), "port", "pci", "netdev", "expected_link_layer",
    "expected_rate_gbps", "state", "phys_state", "rate_gbps", "link_layer", "counters": {name:
    int}}``, plus ``"profile_hca"`` when the HCA was found by its PCI address under another name,
    ``"kind": "netdev"`` for a plain Ethernet NIC (``state`` its ``operstate`` in capitals,
    ``port`` None). An HCA that is absent gives one ``{"hca", "port", "pci", "missing": True,
    ...}``. A value that could not be read is None and its file named in ``errors`` (slurmkit's
    own trouble); a counter file that does not exist (older kernels) or reads ``N/A`` is simply
    left out. ``errors`` also names a root without ``class/``.
    """
    tree = _Tree(sysfs)
    if not os.path.isdir(tree.cls):
        return [], [f"sysfs {tree.cls} is not readable (no sysfs at {tree.sysfs})"]
    ports: list[dict] = []
    errors: list[str] = []
    for hca in hcas:
        _read_hca(tree, hca, ports, errors)
    return ports, errors


def _read_hca(tree: _Tree, hca: dict, ports: list[dict], errors: list[str]) -> None:
    if hca["device"] == "*":  # no node type: every HCA the kernel lists (none: nothing to judge)
        try:
            names = sorted(os.listdir(tree.ib))
        except OSError:
            names = []
        for n in names:
            _read_hca(tree, {**hca, "device": n}, ports, errors)
        return
    name, only = hca_spec(hca["device"])
    want_pci = hca.get("pci") or None
    expect = {"expected_link_layer": SYSFS_LINK_LAYER.get(hca.get("link_layer", ""), None),
              "expected_rate_gbps": float(hca.get("rate_gbps") or 0) or None,
              "profile_link_layer": hca.get("link_layer"), "role": hca.get("role") or "compute",
              "tier": hca.get("tier") or "fail"}
    ethernet = hca.get("link_layer") == "Ethernet"
    if want_pci:
        found = tree.named("infiniband", want_pci)
        if found is None:
            nd = tree.named("net", want_pci) if ethernet else None
            if nd is not None:
                ports.append(_read_netdev(tree, nd, name, want_pci, expect, errors))
            else:
                ports.append({"hca": name, "port": only, "pci": want_pci, "missing": True, **expect})
            return
        if found != name:
            expect["profile_hca"] = name
            name = found
    pdir = os.path.join(tree.ib, name, "ports")
    try:
        numbers = sorted(int(p) for p in os.listdir(pdir) if p.isdigit())
    except FileNotFoundError:
        if ethernet and os.path.isdir(os.path.join(tree.cls, "net", name)):
            ports.append(_read_netdev(tree, name, name, None, expect, errors))
        else:
            ports.append({"hca": name, "port": only, "pci": want_pci, "missing": True, **expect})
        return
    except OSError as exc:
        errors.append(f"{pdir}: {exc.strerror or exc}")
        return
    if only is not None:
        if only not in numbers:
            ports.append({"hca": name, "port": only, "pci": want_pci or tree.pci("infiniband", name),
                          "missing": True, **expect})
            return
        numbers = [only]
    pci = want_pci or tree.pci("infiniband", name)
    for n in numbers:
        port = _read_port(os.path.join(pdir, str(n)), name, n, expect, errors)
        port["pci"], port["netdev"] = pci, _netdev_of(tree, name, n)
        ports.append(port)


def _netdev_of(tree: _Tree, hca: str, n: int) -> str | None:
    """The netdev of port ``n`` of ``hca``: the PCI function's ``net/<netdev>`` (the one whose
    ``dev_port`` is ``n - 1`` when there are several), else ``ports/<n>/gid_attrs/ndevs/0``."""
    net = os.path.join(tree.ib, hca, "device", "net")
    try:
        names = sorted(os.listdir(net))
    except OSError:
        names = []
    if len(names) > 1:
        for nd in names:
            try:
                if int(_text(os.path.join(net, nd, "dev_port"))) == n - 1:
                    return nd
            except (OSError, ValueError):
                continue
    if names:
        return names[0]
    try:
        return _text(os.path.join(tree.ib, hca, "ports", str(n), "gid_attrs", "ndevs", "0")) or None
    except OSError:
        return None


def _read_port(d: str, hca: str, n: int, expect: dict, errors: list[str]) -> dict:
    port = {"hca": hca, "port": n, **expect, "state": None, "phys_state": None, "rate_gbps": None,
            "link_layer": None, "counters": {}}
    for key, conv in (("state", _word), ("phys_state", _word), ("rate", parse_rate), ("link_layer", str)):
        path = os.path.join(d, key)
        try:
            port["rate_gbps" if key == "rate" else key] = conv(_text(path))
        except (OSError, ValueError) as exc:
            errors.append(f"{path}: {getattr(exc, 'strerror', None) or exc}")
    for c in COUNTERS:
        path = os.path.join(d, "counters", c)
        try:
            text = _text(path)
            if text.startswith("N/A"):
                continue  # "N/A (no PMA)": the device has no performance management agent
            port["counters"][c] = int(text)
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as exc:
            errors.append(f"{path}: {getattr(exc, 'strerror', None) or exc}")
    return port


def _read_netdev(tree: _Tree, dev: str, profile_name: str, pci: str | None, expect: dict,
                 errors: list[str]) -> dict:
    """A plain Ethernet NIC: ``class/net/<dev>/operstate`` (``up``) and ``speed`` (Mbit/s; -1 or
    unreadable while the link is down: no rate)."""
    d = os.path.join(tree.cls, "net", dev)
    port = {"hca": dev, "port": None, "kind": "netdev", "netdev": dev, "pci": pci or tree.pci("net", dev),
            **expect, "state": None, "phys_state": None, "rate_gbps": None, "link_layer": "Ethernet",
            "counters": {}}
    if dev != profile_name:
        port["profile_hca"] = profile_name
    try:
        port["state"] = _text(os.path.join(d, "operstate")).upper()
    except OSError as exc:
        errors.append(f"{os.path.join(d, 'operstate')}: {exc.strerror or exc}")
    try:
        mbit = int(_text(os.path.join(d, "speed")))
        port["rate_gbps"] = mbit / 1000.0 if mbit > 0 else None
    except (OSError, ValueError):
        pass  # no speed while the link is down (EINVAL): ib_port judges the state
    return port


def state_only_hcas(names) -> list[dict]:
    """HCAs ``names`` (``mlx5_0``, ...) as :func:`read_ib_ports` takes them when no site profile
    says what to expect: each a compute HCA judged on its ports' state only (no link layer, rate
    or PCI address expected)."""
    return [{"device": h, "link_layer": None, "rate_gbps": None, "role": "compute", "pci": None} for h in names]


def sysfs_hcas(sysfs) -> list[dict]:
    """:func:`state_only_hcas` of every HCA under ``<sysfs>/class/infiniband`` (none when the
    directory is absent or unreadable)."""
    try:
        names = sorted(os.listdir(os.path.join(os.fspath(sysfs), "class", "infiniband")))
    except OSError:
        names = []
    return state_only_hcas(names)


def spec_of(expect: dict) -> dict | None:
    """What :func:`read_node_fabric` reads for a config's ``expect``: ``{"hcas": [...],
    "fabric_manager": bool, "gpudirect_rdma": bool}``; None when there is nothing to read. The
    runner adds ``"timeout_s"`` (:func:`read_timeout_s` of the hook's deadline)."""
    spec = {"hcas": list(expect.get("hcas") or []), "fabric_manager": bool(expect.get("fabric_manager")),
            "gpudirect_rdma": bool(expect.get("gpudirect_rdma"))}
    return spec if spec["hcas"] or spec["fabric_manager"] or spec["gpudirect_rdma"] else None


def read_node_fabric(state, sysfs, spec: dict | None) -> None:
    """Fill ``state.ib_ports`` (:func:`read_ib_ports`) and ``state.services``
    (:func:`slurmkit.health.services.read_fabric_manager`,
    :func:`~slurmkit.health.services.read_peermem`) for ``spec`` (:func:`spec_of`), adding what
    could not be read to ``state.errors``. Nothing is read for a None spec.

    Every read runs in one daemon thread, one part after another (each HCA, then the GPUDirect
    module, then the fabric manager), for at most ``spec["timeout_s"]`` seconds in all (the
    runner sets it from the hook's deadline, :func:`read_timeout_s`; default
    :data:`FABRIC_READ_TIMEOUT_S`): a file that blocks (a hung driver, a stuck ``/proc``) is
    abandoned with its thread. The parts read by then are kept. An HCA in flight gives
    ``{"hca", "port": None, "timed_out": True}`` (``ib_port`` fails it: a hung HCA driver is
    hardware evidence, not NVML's); a service in flight is not judged and its timeout is
    slurmkit's own trouble (``state.errors``), as is each part never reached."""
    if not spec:
        return
    from slurmkit.health import services

    timeout_s = float(spec.get("timeout_s") or FABRIC_READ_TIMEOUT_S)
    tree = _Tree(sysfs)
    parts: list[tuple[str, object]] = []
    if spec.get("hcas"):
        state.ib_ports = []
        parts.append(("root", None))
        parts.extend(("hca", h) for h in spec["hcas"])
    if spec.get("fabric_manager") or spec.get("gpudirect_rdma"):
        state.services = {}
    if spec.get("gpudirect_rdma"):
        parts.append(("peermem", services.read_peermem))
    if spec.get("fabric_manager"):
        parts.append(("fabric_manager", services.read_fabric_manager))
    ports: list[dict] = []
    errors: list[str] = []
    found: dict = {}
    progress: dict = {"pos": (0, 0)}  # (part in flight, ports read before it), set in one step

    def work():
        no_root = False
        for i, (kind, what) in enumerate(parts):
            progress["pos"] = (i, len(ports))
            if kind == "root":
                no_root = not os.path.isdir(tree.cls)
                if no_root:
                    errors.append(f"sysfs {tree.cls} is not readable (no sysfs at {tree.sysfs})")
            elif kind == "hca":
                if not no_root:
                    _read_hca(tree, what, ports, errors)
            else:
                value, errs = what(sysfs)
                errors.extend(errs)
                if value is not None:
                    found[kind] = value
        progress["pos"] = (None, len(ports))

    import threading

    t = threading.Thread(target=work, name="slurmkit-sysfs", daemon=True)
    t.start()
    t.join(timeout_s)
    at, kept = progress["pos"] if t.is_alive() else (None, len(ports))
    ports, errors = ports[:kept], list(errors)
    if at is not None:
        kind, what = parts[at]
        if kind == "hca":
            ports.append({"hca": hca_spec(what["device"])[0], "port": None, "pci": what.get("pci") or None,
                          "timed_out": True, "timeout_s": timeout_s, "state": None, "phys_state": None,
                          "rate_gbps": None, "link_layer": None, "counters": {}})
            late = f"the sysfs read of {ports[-1]['hca']} ran past the deadline ({timeout_s:g} s)"
        else:
            what_read = f"sysfs {tree.cls}" if kind == "root" else services.WHAT[kind]
            source = tree.cls if kind == "root" else services.SOURCE[kind]
            errors.append(f"{what_read} not read: {source} took longer than {timeout_s:g} s (the hook's deadline)")
            late = f"{source} ran past the deadline ({timeout_s:g} s)"
        for kind, what in parts[at + 1:]:  # never reached: said, not judged
            what_read = f"HCA {what['device']}" if kind == "hca" else services.WHAT[kind]
            errors.append(f"{what_read} not read: {late}")
    if spec.get("hcas"):
        state.ib_ports = list(ports)
    if state.services is not None:
        state.services.update(dict(found))
    state.errors.extend(list(errors))


def place(port: dict) -> str:
    """The words drain reasons use for a port: ``mlx5_0/1 ibp12s0`` (HCA/port and netdev),
    ``mlx5_0/1 0000:0c:00.0`` (no netdev known: the PCI address), ``mlx5_2 0000:4c:00.0`` (a
    missing HCA), ``eth1`` (a plain netdev), ``mlx5_0`` (the port not known)."""
    if port.get("kind") == "netdev":
        return port["hca"]
    head = port["hca"] + (f"/{port['port']}" if port.get("port") is not None else "")
    tail = port.get("netdev") if not port.get("missing") else None
    tail = tail or port.get("pci")
    return f"{head} {tail}" if tail else head


def device_port(text: str) -> tuple[str, str]:
    """``(device, port)`` of a :func:`place` text, as node_exporter's infiniband collector labels
    the port: ``mlx5_0/1 ibp12s0`` -> ``("mlx5_0", "1")``, ``mlx5_2 0000:4c:00.0`` -> ``("mlx5_2",
    "")``, ``eth1`` -> ``("eth1", "")``; ``("", "")`` for "" (a result with no place)."""
    head = text.split(" ", 1)[0]
    device, _, port = head.partition("/")
    return device, port


def port_key(port: dict) -> str:
    """The key of a port's counters between runs: ``<PCI address>/<port>`` when the PCI address
    is known (stable when the kernel renumbers HCAs), else ``<hca>/<port>``."""
    return f"{port.get('pci') or port['hca']}/{port['port']}"


def ib_baseline(state) -> dict:
    """The counters to keep for the next run: ``{port_key: {counter: int}}`` (:func:`port_key`:
    ``"0000:0c:00.0/1"`` or ``"mlx5_0/1"``)."""
    return {port_key(p): dict(p["counters"]) for p in state.ib_ports or [] if p.get("counters")}


# ---- checks (signature of slurmkit.health.checks.CHECKS) ---------------------------------------

def _result(check, status, port, value, limit, message=""):
    return CheckResult(check, status, value=value, limit=limit, message=message, place=place(port))


def _tiered(p: dict, status):
    """``status`` for a port of the ``fail`` tier; a ``warn`` tier port (role other without
    ``ib_judge_other_nics``, or a node without a node type) gives WARN for FAIL."""
    return WARN if status == FAIL and p.get("tier") == "warn" else status


def _tier_words(p: dict) -> str:
    """Why a ``warn`` tier port warns (the text after the check's message), else ''."""
    if p.get("tier") != "warn":
        return ""
    if p.get("role") == "unlisted":
        return " (no node type for this node: every port the kernel lists is expected ACTIVE; warns, never drains)"
    return (f" (role {p.get('role')}: warns, never drains; drains with [health] ib_judge_other_nics = true)")


def _up(p: dict) -> bool:
    if p.get("kind") == "netdev":
        return p.get("state") == "UP"
    return p.get("state") == "ACTIVE" and p.get("phys_state") == "LinkUp"


def check_ib_port(state, cfg, **_) -> list:
    """Each judged HCA exists and each of its ports is ACTIVE / LinkUp (a plain Ethernet NIC:
    ``operstate`` up) on the expected link layer (``state``, ``phys_state``, ``link_layer`` in
    sysfs) -> else fail; one result per port. The value is the meaning in words (``down
    (DOWN/Polling)``, ``missing``, ``link layer Ethernet, not InfiniBand``)."""
    out = []
    for p in state.ib_ports or []:
        renamed = f" (the profile's {p['profile_hca']}: the kernel renumbered the HCAs)" if p.get("profile_hca") else ""
        if p.get("timed_out"):
            out.append(_result("ib_port", FAIL, p, "sysfs read timed out",
                               f"{p.get('timeout_s', FABRIC_READ_TIMEOUT_S):g} s",
                               f"a sysfs file of {p['hca']} blocked (hung driver or HCA): not NVML"))
            continue
        if p.get("missing"):
            where = f"no HCA at PCI {p['pci']}" if p.get("pci") else f"no {p['hca']}"
            out.append(_result("ib_port", _tiered(p, FAIL), p, "missing", "present",
                               f"{where} in /sys/class/infiniband: an HCA the node type lists is absent "
                               "(driver not loaded, card dead)" + _tier_words(p)))
            continue
        if p["state"] is None or (p["phys_state"] is None and p.get("kind") != "netdev"):
            continue  # unreadable: own trouble, recorded by the reader
        bad = []
        seen = p["state"] if p.get("kind") == "netdev" else f"{p['state']}/{p['phys_state']}"
        if not _up(p):
            bad.append(("down" if p.get("phys_state") != "LinkUp" else "not active") + f" ({seen})")
        want_ll = p.get("expected_link_layer")
        if want_ll and p.get("link_layer") and p["link_layer"] != want_ll:
            bad.append(f"link layer {p['link_layer']}, not {want_ll}")
        out.append(_result("ib_port", _tiered(p, FAIL) if bad else PASS, p, ", ".join(bad) if bad else seen,
                           "UP" if p.get("kind") == "netdev" else "ACTIVE/LinkUp",
                           ("port down, not trained or on the wrong link layer" + _tier_words(p) if bad else "")
                           + renamed))
    return out


def check_ib_rate(state, cfg, **_) -> list:
    """A port's ``rate`` (a netdev's ``speed``) below the profile's ``rate_gbps`` (trained at a
    lower speed or width: a bad cable or transceiver) -> fail. Ports that are down are judged by
    ``ib_port`` only."""
    out = []
    for p in state.ib_ports or []:
        want, got = p.get("expected_rate_gbps"), p.get("rate_gbps")
        if p.get("missing") or p.get("timed_out") or want is None or got is None or not _up(p):
            continue
        low = got < want
        out.append(_result("ib_rate", _tiered(p, FAIL) if low else PASS, p,
                           f"{got:g} of {want:g} Gb/s" if low else f"{got:g} Gb/s", f"{want:g} Gb/s",
                           "link trained below its rate (cable, transceiver?)" + _tier_words(p) if low else ""))
    return out


def check_ib_counters(state, cfg, **_) -> list:
    """Error counters (:data:`COUNTERS`) of InfiniBand ports against the previous run
    (``state.baseline["ib"]``, by :func:`port_key`): a rise warns; a rise of
    ``ib_counter_rise_fail`` or more (``link_downed``: ``ib_link_downed_rise_fail``, a flapping
    link) fails. A counter below its previous value was reset (reboot, driver reload,
    ``perfquery -R``) and counts from 0. A counter at its maximum (:func:`counter_max`) has
    saturated: it cannot rise any more, so it warns (even on the first run) and names the reset
    (``perfquery -C <hca> -P <port> -R``). Rises are per run: between two runs of the hooks
    (prolog, epilog, health check), whatever the time between them. No previous run: only
    saturation is judged. A ``warn`` tier port (:func:`_tiered`) warns where a compute port
    fails. Ethernet (RoCE) ports are not judged: mlx5 fills ``counters/`` from the
    InfiniBand port counters group, which an Ethernet port does not keep."""
    prev_all = (getattr(state, "baseline", None) or {}).get("ib")
    limits = {"ib_counter_rise_fail": cfg.t("ib_counter_rise_fail"),
              "ib_link_downed_rise_fail": cfg.t("ib_link_downed_rise_fail")}
    out = []
    for p in state.ib_ports or []:
        if (p.get("missing") or p.get("timed_out") or not p.get("counters")
                or (p.get("link_layer") or p.get("expected_link_layer")) == "Ethernet"):
            continue
        saturated = [c for c, v in p["counters"].items() if c in COUNTER_BITS and v >= counter_max(c)]
        prev = prev_all.get(port_key(p)) if prev_all is not None else None
        if prev is None and not saturated:
            continue
        failed, warned = [], []
        for name, now in p["counters"].items():
            before = (prev or {}).get(name)
            if before is None:
                continue
            rise = now - before if now >= before else now
            if rise <= 0:
                continue
            limit = limits["ib_link_downed_rise_fail" if name == "link_downed" else "ib_counter_rise_fail"]
            (failed if rise >= limit else warned).append(f"{name} +{rise}")
        rose = {w.split(" ", 1)[0] for w in failed + warned}
        words = failed + warned + [f"{c} saturated" for c in saturated if c not in rose]
        worst = _tiered(p, FAIL) if failed else (WARN if warned or saturated else PASS)
        msg = "error counters rising since the last check" if failed or warned else ""
        if saturated:
            sat = ", ".join(f"{c} at {counter_max(c)}" for c in saturated)
            msg = (msg + "; " if msg else "") + (f"counter saturated ({sat}), cannot judge rises; reset with "
                                                 f"perfquery -C {p['hca']} -P {p['port']} -R")
        out.append(_result("ib_counters", worst, p, ", ".join(words) if words else "no new errors", limits, msg))
    return out
