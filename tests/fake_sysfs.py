"""Fake sysfs trees for the checks that read sysfs (InfiniBand / RoCE ports): laid out like
``/sys/class/infiniband/<hca>/ports/<n>/`` on a real node (files as the kernel prints them), with
each HCA's identity where the kernel keeps it (``class/infiniband/<hca>/device`` -> the PCI
function under ``devices/``, its ``net/<netdev>/dev_port``; ``bus/pci/devices/<bdf>`` links),
plain netdevs (``class/net/<dev>/{operstate,speed,device}``) and the kernel renumbering HCAs
after a card is lost (:func:`lose_card`).

Imported by tests/health and tests/hooks; no pytest needed.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from slurmkit.atomicfile import atomic_write
from slurmkit.health.fabric import COUNTERS

STATES = {"ACTIVE": "4: ACTIVE", "DOWN": "1: DOWN", "INIT": "2: INIT", "ARMED": "3: ARMED"}
PHYS = {"LinkUp": "5: LinkUp", "Polling": "2: Polling", "Disabled": "3: Disabled"}
#: The HCA's own files (``class/infiniband/<hca>/``): ``hca_type`` and ``fw_ver`` as ibstat shows
#: them for a ConnectX-7 (../shared/corpus/fabric/ibstat.47.0.h100.some.down.0: ``CA type: MT4129``,
#: ``Firmware version: 28.39.1002``); ``board_id`` (the PSID) a placeholder of its form.
HCA_FILES = {"hca_type": "MT4129", "fw_ver": "28.39.1002", "board_id": "MT_0000000000"}
RATES = {400: "400 Gb/sec (4X NDR)", 200: "200 Gb/sec (4X HDR)", 100: "100 Gb/sec (4X EDR)",
         25: "25 Gb/sec (1X EDR)"}


def set_port(root: Path, hca: str, port: int = 1, *, state: str = "ACTIVE", phys: str = "LinkUp",
             rate: int = 400, link_layer: str = "InfiniBand", counters: dict | None = None) -> Path:
    """Write (or rewrite) one port under ``<root>/class/infiniband/<hca>/ports/<port>``; every
    counter of :data:`COUNTERS` is written (0 unless ``counters`` gives it; a string such as
    ``"N/A (no PMA)"`` is written as it is), each file replaced atomically (a hook may be
    reading the tree). Returns the port dir."""
    d = root / "class" / "infiniband" / hca / "ports" / str(port)
    (d / "counters").mkdir(parents=True, exist_ok=True)
    for name, text in HCA_FILES.items():  # what node_exporter's infiniband collector needs too
        if not (d.parent.parent / name).exists():
            atomic_write(d.parent.parent / name, text + "\n")
    atomic_write(d / "state", STATES[state] + "\n")
    atomic_write(d / "phys_state", PHYS[phys] + "\n")
    atomic_write(d / "rate", RATES[rate] + "\n")
    atomic_write(d / "link_layer", link_layer + "\n")
    for c in COUNTERS:
        atomic_write(d / "counters" / c, f"{(counters or {}).get(c, 0)}\n")
    return d


def healthy_tree(root: Path, hcas=("mlx5_0", "mlx5_1"), rate: int = 400, link_layer: str = "InfiniBand",
                 pcis: dict | None = None) -> Path:
    """A sysfs root with every HCA of ``hcas`` ACTIVE / LinkUp at ``rate`` Gb/s on port 1;
    ``pcis`` ({hca: PCI address}) also gives those HCAs their PCI function and netdev
    (:func:`set_identity`)."""
    (root / "class").mkdir(parents=True, exist_ok=True)
    for h in hcas:
        set_port(root, h, rate=rate, link_layer=link_layer)
        if pcis and h in pcis:
            set_identity(root, h, pcis[h])
    return root


#: The NICs of site/sandbox.toml's node type: four compute HCAs (InfiniBand, 400 Gb/s) and the
#: storage NIC ``mlx5_4`` (role other, link layer Ethernet, 100 Gb/s: a RoCE port, which sysfs
#: shows under class/infiniband with ``link_layer`` Ethernet, as gpud's real H100 tree shows its
#: ``mlx5_bond_0``: leptonai/gpud components/accelerator/nvidia/infiniband/class/testdata/
#: sys-class-infiniband-h100.0).
SANDBOX_HCAS = ("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3")
SANDBOX_STORAGE = "mlx5_4"


def sandbox_tree(root: Path, pcis: dict | None = None, storage: bool = True) -> Path:
    """A healthy sysfs root for a node of the sandbox profile's node type: :data:`SANDBOX_HCAS`
    ACTIVE / LinkUp at 400 Gb/s and (``storage``) its storage NIC :data:`SANDBOX_STORAGE`
    ACTIVE at 100 Gb/s on the Ethernet link layer; ``pcis`` as in :func:`healthy_tree`."""
    healthy_tree(root, hcas=SANDBOX_HCAS, pcis=pcis)
    if storage:
        set_port(root, SANDBOX_STORAGE, rate=100, link_layer="Ethernet")
        if pcis and SANDBOX_STORAGE in pcis:
            set_identity(root, SANDBOX_STORAGE, pcis[SANDBOX_STORAGE],
                         [netdev_name(pcis[SANDBOX_STORAGE], kind="en")])
    return root


def netdev_name(pci: str, port: int = 1, kind: str = "ib") -> str:
    """The predictable netdev name systemd gives the PCI function ``pci`` (bus in decimal):
    ``0000:18:00.0`` -> ``ibp24s0`` (InfiniBand), ``enp24s0f0np0`` for ``kind="en"`` (Ethernet)."""
    bus, dev, fn = int(pci[5:7], 16), int(pci[8:10], 16), int(pci[11])
    return f"ibp{bus}s{dev}" + (f"f{fn}" if fn else "") if kind == "ib" else f"enp{bus}s{dev}f{fn}np{port - 1}"


def set_identity(root: Path, hca: str, pci: str, netdevs: list[str] | None = None) -> None:
    """Give ``hca`` its PCI function: ``devices/pci0000:00/<pci>/`` (``bus/pci/devices/<pci>``
    links to it) with ``net/<netdev>/dev_port`` (``netdevs``, port order; default one IPoIB name
    from :func:`netdev_name`; ``[]``: none), and ``class/infiniband/<hca>/device`` -> it."""
    fn = root / "devices" / "pci0000:00" / pci
    fn.mkdir(parents=True, exist_ok=True)
    for i, nd in enumerate([netdev_name(pci)] if netdevs is None else netdevs):
        (fn / "net" / nd).mkdir(parents=True, exist_ok=True)
        (fn / "net" / nd / "dev_port").write_text(f"{i}\n")
    link = root / "bus" / "pci" / "devices" / pci
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.is_symlink():
        link.symlink_to(fn)
    dev = root / "class" / "infiniband" / hca / "device"
    dev.parent.mkdir(parents=True, exist_ok=True)
    if dev.is_symlink():
        dev.unlink()
    dev.symlink_to(fn)


def lose_card(root: Path, hca: str) -> dict[str, str]:
    """The card of ``hca`` is gone and, as after a reboot, the kernel numbers the remaining HCAs
    of its driver (``mlx5_``) again from 0 in PCI order: their directories are renamed. Returns
    {old name: new name} of the renamed ones."""
    ib = root / "class" / "infiniband"
    shutil.rmtree(ib / hca)
    prefix = hca.rstrip("0123456789")
    left = [d.name for d in ib.iterdir() if d.name.startswith(prefix)]
    by_pci = sorted(left, key=lambda n: os.path.basename(os.path.realpath(ib / n / "device")))
    moved = {}
    tmp = {n: ib / f".renumber-{n}" for n in by_pci}
    for n in by_pci:
        (ib / n).rename(tmp[n])
    for i, n in enumerate(by_pci):
        tmp[n].rename(ib / f"{prefix}{i}")
        if n != f"{prefix}{i}":
            moved[n] = f"{prefix}{i}"
    return moved


def set_netdev(root: Path, dev: str, *, operstate: str = "up", speed_mbit: int | None = 100000,
               pci: str | None = None) -> Path:
    """A plain Ethernet NIC (no RDMA device): ``class/net/<dev>/operstate`` and ``speed`` (Mbit/s;
    None: the file errors as the kernel's does while the link is down, here: absent), its
    ``device`` link to ``pci`` when given."""
    d = root / "class" / "net" / dev
    d.mkdir(parents=True, exist_ok=True)
    atomic_write(d / "operstate", operstate + "\n")
    if speed_mbit is None:
        (d / "speed").unlink(missing_ok=True)
    else:
        atomic_write(d / "speed", f"{speed_mbit}\n")
    if pci is not None:
        fn = root / "devices" / "pci0000:00" / pci
        fn.mkdir(parents=True, exist_ok=True)
        if not (d / "device").is_symlink():
            (d / "device").symlink_to(fn)
    return d


def load_module(root: Path, name: str) -> None:
    """``<root>/module/<name>/`` as the kernel shows a loaded module (refcnt file included)."""
    d = root / "module" / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "refcnt").write_text("0\n")


def start_process(root: Path, pid: int, comm: str) -> None:
    """``<root>/../proc/<pid>/comm`` (``proc`` beside the sysfs root, as /proc beside /sys),
    cut to the kernel's 15 characters."""
    d = root.parent / "proc" / str(pid)
    d.mkdir(parents=True, exist_ok=True)
    (d / "comm").write_text(comm[:15] + "\n")


def set_aer(root: Path, bus_id: str, correctable: int = 0, nonfatal: int = 0, fatal: int = 0) -> None:
    """``<root>/bus/pci/devices/<bus_id>/aer_dev_{correctable,nonfatal,fatal}`` as the kernel
    prints them (one line per error type, then the ``TOTAL_ERR_*`` line)."""
    d = root / "bus" / "pci" / "devices" / bus_id
    d.mkdir(parents=True, exist_ok=True)
    atomic_write(d / "aer_dev_correctable", f"RxErr {correctable}\nBadTLP 0\nBadDLLP 0\nRollover 0\nTimeout 0\n"
                 f"NonFatalErr 0\nCorrIntErr 0\nHeaderOF 0\nTOTAL_ERR_COR {correctable}\n")
    atomic_write(d / "aer_dev_nonfatal", f"Undefined 0\nDLP 0\nSDES 0\nTLP 0\nFCP 0\nCmpltTO {nonfatal}\n"
                 f"TOTAL_ERR_NONFATAL {nonfatal}\n")
    atomic_write(d / "aer_dev_fatal", f"Undefined 0\nDLP {fatal}\nSDES 0\nTOTAL_ERR_FATAL {fatal}\n")
