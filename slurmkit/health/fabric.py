"""InfiniBand / RoCE ports: read from sysfs, judged against the node type's HCAs.

Read (:func:`read_ib_ports`): for each HCA the profile lists, every port under
``<sysfs>/class/infiniband/<hca>/ports/<n>/`` — ``state`` (``4: ACTIVE``), ``phys_state``
(``5: LinkUp``), ``rate`` (``400 Gb/sec (4X NDR)`` -> 400.0 Gbit/s), ``link_layer``
(``InfiniBand`` | ``Ethernet`` for RoCE) and the error counters of :data:`COUNTERS` from
``counters/``. The sysfs root is a parameter (tests fill fake trees under a temporary directory).

Judged (one function per check, NHC style, over the ``ib_ports`` of a
:class:`~slurmkit.health.state.NodeState` and the previous run's counters in
``state.baseline``):

* ``ib_port``: the HCA exists, each judged port is ACTIVE / LinkUp with the expected link layer
  -> else fail;
* ``ib_rate``: the port's rate is below the profile's ``rate_gbps`` -> fail;
* ``ib_counters``: an error counter rose since the previous run -> warn; by
  ``ib_counter_rise_fail`` or more (``link_downed``: ``ib_link_downed_rise_fail``) -> fail.

Which HCAs: ``HealthConfig.expect["hcas"]`` (the node type's NICs with link layer InfiniBand or
RoCE; role ``compute`` only unless ``[health] ib_judge_other_nics``). A device written
``mlx5_0:1`` judges that port only; ``mlx5_0`` judges every port of the HCA. EFA devices and
plain Ethernet NICs are not judged here.

A file that cannot be read in a port that exists, or a sysfs root without ``class/``, is
slurmkit's own trouble (recorded in ``NodeState.errors``), never a drain. Standard library only.
"""

from __future__ import annotations

import os

#: The error counters read from ``ports/<n>/counters/`` (Linux ib_core names). Congestion
#: counters (``port_xmit_discards``, ``port_xmit_wait``) are not faults and are not read.
COUNTERS = ("link_downed", "link_error_recovery", "symbol_error", "port_rcv_errors",
            "local_link_integrity_errors", "excessive_buffer_overrun_errors",
            "port_rcv_remote_physical_errors")
#: Profile ``link_layer`` -> the ``link_layer`` sysfs shows.
SYSFS_LINK_LAYER = {"InfiniBand": "InfiniBand", "RoCE": "Ethernet"}


def _text(path: str) -> str:
    with open(path, encoding="ascii", errors="replace") as fh:
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


def read_ib_ports(sysfs: str | os.PathLike, hcas: list[dict]) -> tuple[list[dict], list[str]]:
    """Read the ports of ``hcas`` (``[{"device", "link_layer", "rate_gbps"}]``, from the profile).

    Returns ``(ports, errors)``. ``ports``: one dict per port, in profile then port order:
    ``{"hca", "port", "expected_link_layer", "expected_rate_gbps", "state", "phys_state",
    "rate_gbps", "link_layer", "counters": {name: int}}``; an HCA that is absent gives one
    ``{"hca", "port": None, "missing": True, ...}``. A value that could not be read is None and
    its file named in ``errors`` (slurmkit's own trouble); a counter file that does not exist
    (older kernels, RoCE) is simply left out. ``errors`` also names a root without ``class/``.
    """
    root = os.path.join(os.fspath(sysfs), "class")
    if not os.path.isdir(root):
        return [], [f"sysfs {root} is not readable (no sysfs at {os.fspath(sysfs)})"]
    ib = os.path.join(root, "infiniband")
    ports: list[dict] = []
    errors: list[str] = []
    for hca in hcas:
        name, only = hca_spec(hca["device"])
        expect = {"expected_link_layer": SYSFS_LINK_LAYER.get(hca.get("link_layer", ""), None),
                  "expected_rate_gbps": float(hca.get("rate_gbps") or 0) or None}
        pdir = os.path.join(ib, name, "ports")
        try:
            numbers = sorted(int(p) for p in os.listdir(pdir) if p.isdigit())
        except FileNotFoundError:
            ports.append({"hca": name, "port": only, "missing": True, **expect})
            continue
        except OSError as exc:
            errors.append(f"{pdir}: {exc.strerror or exc}")
            continue
        if only is not None:
            if only not in numbers:
                ports.append({"hca": name, "port": only, "missing": True, **expect})
                continue
            numbers = [only]
        for n in numbers:
            ports.append(_read_port(os.path.join(pdir, str(n)), name, n, expect, errors))
    return ports, errors


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
            port["counters"][c] = int(_text(path))
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as exc:
            errors.append(f"{path}: {getattr(exc, 'strerror', None) or exc}")
    return port


def spec_of(expect: dict) -> dict | None:
    """What :func:`read_node_fabric` reads for a config's ``expect``: ``{"hcas": [...],
    "fabric_manager": bool, "gpudirect_rdma": bool}``; None when there is nothing to read."""
    spec = {"hcas": list(expect.get("hcas") or []), "fabric_manager": bool(expect.get("fabric_manager")),
            "gpudirect_rdma": bool(expect.get("gpudirect_rdma"))}
    return spec if spec["hcas"] or spec["fabric_manager"] or spec["gpudirect_rdma"] else None


def read_node_fabric(state, sysfs, spec: dict | None) -> None:
    """Fill ``state.ib_ports`` (:func:`read_ib_ports`) and ``state.services``
    (:func:`slurmkit.health.services.read_services`) for ``spec`` (:func:`spec_of`), adding
    what could not be read to ``state.errors``. Nothing is read for a None spec."""
    if not spec:
        return
    if spec.get("hcas"):
        state.ib_ports, errors = _read_ib_ports_bounded(sysfs, spec["hcas"], float(spec.get("timeout_s") or
                                                                                  FABRIC_READ_TIMEOUT_S))
        state.errors.extend(errors)
    if spec.get("fabric_manager") or spec.get("gpudirect_rdma"):
        from slurmkit.health.services import read_services

        state.services, errors = read_services(sysfs, fabric_manager=bool(spec.get("fabric_manager")),
                                               gpudirect_rdma=bool(spec.get("gpudirect_rdma")))
        state.errors.extend(errors)


#: How long the InfiniBand sysfs read may take (s): a file that blocks (a hung driver) is not
#: NVML's trouble; the ports read by then are kept and the HCA in flight is marked ``timed_out``.
FABRIC_READ_TIMEOUT_S = 2.0


def _read_ib_ports_bounded(sysfs, hcas: list[dict], timeout_s: float) -> tuple[list[dict], list[str]]:
    """:func:`read_ib_ports` one HCA at a time in a daemon thread, at most ``timeout_s`` in all;
    at the deadline the HCA being read gives ``{"hca", "port": None, "timed_out": True}`` and
    the rest are not read (the blocked thread is abandoned)."""
    import threading

    ports: list[dict] = []
    errors: list[str] = []
    current: dict = {}

    def work():
        for hca in hcas:
            current["hca"] = hca
            p, e = read_ib_ports(sysfs, [hca])
            ports.extend(p)
            errors.extend(e)
            if e and not p and e[0].startswith("sysfs "):
                break
        current.pop("hca", None)

    t = threading.Thread(target=work, name="slurmkit-sysfs", daemon=True)
    t.start()
    t.join(timeout_s)
    if t.is_alive():
        name = hca_spec(current.get("hca", {}).get("device", "?"))[0]
        done = [p for p in list(ports) if p["hca"] != name]
        return done + [{"hca": name, "port": None, "timed_out": True, "timeout_s": timeout_s,
                        "state": None, "phys_state": None, "rate_gbps": None, "link_layer": None,
                        "counters": {}}], list(errors)
    return ports, errors


def where(port: dict) -> str:
    """``mlx5_0 port 1`` (``mlx5_0`` when the port is not known): the words drain reasons use."""
    return port["hca"] + (f" port {port['port']}" if port.get("port") is not None else "")


def ib_baseline(state) -> dict:
    """The counters to keep for the next run: ``{"mlx5_0/1": {counter: int}}``."""
    return {f"{p['hca']}/{p['port']}": dict(p["counters"]) for p in state.ib_ports or []
            if p.get("counters")}


# ---- checks (signature of slurmkit.health.checks.CHECKS) ---------------------------------------

def _result(check, status, port, value, limit, message=""):
    from slurmkit.health.checks import CheckResult

    return CheckResult(check, status, value=f"{where(port)}: {value}", limit=limit, message=message)


def check_ib_port(state, cfg, **_) -> list:
    """Each judged HCA exists and each of its ports is ACTIVE / LinkUp on the expected link layer
    (``state``, ``phys_state``, ``link_layer`` in sysfs) -> else fail; one result per port."""
    from slurmkit.health.checks import FAIL, PASS

    out = []
    for p in state.ib_ports or []:
        if p.get("timed_out"):
            from slurmkit.health.checks import CheckResult

            out.append(CheckResult("ib_port", FAIL, value=f"sysfs read of {p['hca']} timed out",
                                   limit=f"{p.get('timeout_s', FABRIC_READ_TIMEOUT_S):g} s",
                                   message="a sysfs file of the HCA blocked (hung driver or HCA): not NVML"))
            continue
        if p.get("missing"):
            out.append(_result("ib_port", FAIL, p, "not found in /sys/class/infiniband", "present",
                               "an HCA the node type lists is absent (driver not loaded, card dead)"))
            continue
        if p["state"] is None or p["phys_state"] is None:
            continue  # unreadable: own trouble, recorded by the reader
        bad = []
        if p["state"] != "ACTIVE" or p["phys_state"] != "LinkUp":
            bad.append(f"{p['state']}/{p['phys_state']}")
        want_ll = p.get("expected_link_layer")
        if want_ll and p.get("link_layer") and p["link_layer"] != want_ll:
            bad.append(f"link layer {p['link_layer']}, expected {want_ll}")
        out.append(_result("ib_port", FAIL if bad else PASS, p, ", ".join(bad) if bad else "ACTIVE/LinkUp",
                           "ACTIVE/LinkUp", "port down or not trained" if bad else ""))
    return out


def check_ib_rate(state, cfg, **_) -> list:
    """A port's ``rate`` below the profile's ``rate_gbps`` (trained at a lower speed or width:
    a bad cable or transceiver) -> fail. Ports that are down are judged by ``ib_port`` only."""
    from slurmkit.health.checks import FAIL, PASS

    out = []
    for p in state.ib_ports or []:
        want, got = p.get("expected_rate_gbps"), p.get("rate_gbps")
        if p.get("missing") or p.get("timed_out") or want is None or got is None or p.get("state") != "ACTIVE":
            continue
        st = FAIL if got < want else PASS
        out.append(_result("ib_rate", st, p, f"{got:g} Gb/s" + (f" instead of {want:g} Gb/s" if st == FAIL else ""),
                           f"{want:g} Gb/s", "link trained below its rate (cable, transceiver?)" if st == FAIL else ""))
    return out


def check_ib_counters(state, cfg, **_) -> list:
    """Error counters (:data:`COUNTERS`) against the previous run (``state.baseline["ib"]``): a
    rise warns; a rise of ``ib_counter_rise_fail`` or more (``link_downed``:
    ``ib_link_downed_rise_fail``, a flapping link) fails. A counter below its previous value was
    reset (reboot, driver reload) and counts from 0. No previous run: nothing is judged."""
    from slurmkit.health.checks import FAIL, PASS, WARN

    prev_all = (getattr(state, "baseline", None) or {}).get("ib")
    if prev_all is None:
        return []
    out = []
    for p in state.ib_ports or []:
        prev = prev_all.get(f"{p['hca']}/{p['port']}")
        if p.get("missing") or p.get("timed_out") or not p.get("counters") or prev is None:
            continue
        rises = {}
        for name, now in p["counters"].items():
            before = prev.get(name)
            if before is None:
                continue
            rise = now - before if now >= before else now
            if rise > 0:
                rises[name] = rise
        worst, words = PASS, []
        for name, rise in rises.items():
            limit = cfg.t("ib_link_downed_rise_fail" if name == "link_downed" else "ib_counter_rise_fail")
            words.append(f"{name} +{rise}")
            if rise >= limit:
                worst = FAIL
            elif worst == PASS:
                worst = WARN
        out.append(_result("ib_counters", worst, p, ", ".join(words) if words else "no new errors",
                           {"ib_counter_rise_fail": cfg.t("ib_counter_rise_fail"),
                            "ib_link_downed_rise_fail": cfg.t("ib_link_downed_rise_fail")},
                           "error counters rising since the last check" if words else ""))
    return out
