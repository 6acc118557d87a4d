"""Fake sysfs trees for the checks that read sysfs (InfiniBand / RoCE ports): laid out like
``/sys/class/infiniband/<hca>/ports/<n>/`` on a real node (files as the kernel prints them).

Imported by tests/health and tests/hooks; no pytest needed.
"""

from __future__ import annotations

from pathlib import Path

from slurmkit.atomicfile import atomic_write
from slurmkit.health.fabric import COUNTERS

STATES = {"ACTIVE": "4: ACTIVE", "DOWN": "1: DOWN", "INIT": "2: INIT", "ARMED": "3: ARMED"}
PHYS = {"LinkUp": "5: LinkUp", "Polling": "2: Polling", "Disabled": "3: Disabled"}
RATES = {400: "400 Gb/sec (4X NDR)", 200: "200 Gb/sec (4X HDR)", 100: "100 Gb/sec (4X EDR)",
         25: "25 Gb/sec (1X EDR)"}


def set_port(root: Path, hca: str, port: int = 1, *, state: str = "ACTIVE", phys: str = "LinkUp",
             rate: int = 400, link_layer: str = "InfiniBand", counters: dict | None = None) -> Path:
    """Write (or rewrite) one port under ``<root>/class/infiniband/<hca>/ports/<port>``; every
    counter of :data:`COUNTERS` is written (0 unless ``counters`` gives it), each file replaced
    atomically (a hook may be reading the tree). Returns the port dir."""
    d = root / "class" / "infiniband" / hca / "ports" / str(port)
    (d / "counters").mkdir(parents=True, exist_ok=True)
    atomic_write(d / "state", STATES[state] + "\n")
    atomic_write(d / "phys_state", PHYS[phys] + "\n")
    atomic_write(d / "rate", RATES[rate] + "\n")
    atomic_write(d / "link_layer", link_layer + "\n")
    for c in COUNTERS:
        atomic_write(d / "counters" / c, f"{(counters or {}).get(c, 0)}\n")
    return d


def healthy_tree(root: Path, hcas=("mlx5_0", "mlx5_1"), rate: int = 400, link_layer: str = "InfiniBand") -> Path:
    """A sysfs root with every HCA of ``hcas`` ACTIVE / LinkUp at ``rate`` Gb/s on port 1."""
    (root / "class").mkdir(parents=True, exist_ok=True)
    for h in hcas:
        set_port(root, h, rate=rate, link_layer=link_layer)
    return root


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
