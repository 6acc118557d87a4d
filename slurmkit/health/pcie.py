"""PCIe error counters of each GPU: AER counters from sysfs
(``<sysfs>/bus/pci/devices/<bus>/aer_dev_correctable`` / ``aer_dev_nonfatal`` /
``aer_dev_fatal``, their ``TOTAL_ERR_*`` line) and NVML's replay counter
(``nvmlDeviceGetPcieReplayCounter``), kept as the GPU values ``pcie_aer_correctable``,
``pcie_aer_nonfatal``, ``pcie_aer_fatal`` and ``pcie_replay_counter``.

``pcie_errors`` check against the previous run (``state.baseline["gpu"]``): a rise of the
non-fatal or fatal AER count fails; a rise of correctable errors or replays warns, and fails at
``pcie_correctable_rise_fail`` / ``pcie_replay_rise_fail`` (a correctable-error storm). Kernels
without AER files (or without AER) give no value: not judged. Standard library only.
"""

from __future__ import annotations

import os
from slurmkit.health.result import FAIL, PASS, WARN, result, usable_gpus

AER_FILES = {"pcie_aer_correctable": ("aer_dev_correctable", "TOTAL_ERR_COR"),
             "pcie_aer_nonfatal": ("aer_dev_nonfatal", "TOTAL_ERR_NONFATAL"),
             "pcie_aer_fatal": ("aer_dev_fatal", "TOTAL_ERR_FATAL")}


def read_aer(sysfs, bus_id: str | None) -> dict[str, tuple]:
    """``{value key: (count | None, source, rc)}`` for the GPU at ``bus_id`` (sysfs form). A
    missing file is NOT_SUPPORTED (no AER); an unreadable or odd one NOT_AVAILABLE."""
    out = {}
    for key, (name, total) in AER_FILES.items():
        src = f"sysfs:bus/pci/devices/*/{name}"
        if not bus_id:
            out[key] = (None, src, "NOT_AVAILABLE")
            continue
        path = os.path.join(os.fspath(sysfs), "bus", "pci", "devices", bus_id, name)
        try:
            with open(path, encoding="ascii", errors="replace") as fh:  # sysfs attributes are ASCII; a stray byte must not raise in a hook
                text = fh.read()
        except FileNotFoundError:
            out[key] = (None, src, "NOT_SUPPORTED")
            continue
        except OSError:
            out[key] = (None, src, "NOT_AVAILABLE")
            continue
        n = None
        for line in text.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == total and parts[1].isdigit():
                n = int(parts[1])
        out[key] = (n, src, "SUCCESS" if n is not None else "NOT_AVAILABLE")
    return out


def reread_aer(state, sysfs) -> None:
    """Replace the AER values of ``state``'s GPUs with those under the sysfs root ``sysfs`` (a
    replay with a sysfs root: the capture's GPUs, this root's counters, so a fake tree can make
    them rise). A GPU whose PCI function is not under ``<sysfs>/bus/pci/devices`` keeps the
    capture's values."""
    for g in state.gpus:
        if not g.pci_bus_id or not os.path.isdir(os.path.join(os.fspath(sysfs), "bus", "pci", "devices", g.pci_bus_id)):
            continue
        for key, (v, src, rc) in read_aer(sysfs, g.pci_bus_id).items():
            g.put(key, v, source=src, rc=rc)


def check_pcie_errors(state, cfg, **_) -> list:
    """PCIe AER and replay counters rising between runs (see the module docstring)."""
    from slurmkit.health.nvlink import rises

    limits = {"aer_correctable": cfg.t("pcie_correctable_rise_fail"), "pcie_replay": cfg.t("pcie_replay_rise_fail"),
              "aer_nonfatal": 1, "aer_fatal": 1}
    out = []
    for g in usable_gpus(state):
        if all(g.get(k) is None for k in (*AER_FILES, "pcie_replay_counter")):
            continue
        r = rises(state, g)
        if r is None:
            continue
        failed, warned = [], []
        for k in ("aer_fatal", "aer_nonfatal", "aer_correctable", "pcie_replay"):
            if k in r:
                (failed if r[k] >= limits[k] else warned).append(f"{k} +{r[k]}")
        words = failed + warned  # the deciding rise first: the drain reason leads with it
        worst = FAIL if failed else (WARN if warned else PASS)
        out.append(result("pcie_errors", worst, g, ", ".join(words) or "no new errors",
                      {"pcie_correctable_rise_fail": limits["aer_correctable"],
                       "pcie_replay_rise_fail": limits["pcie_replay"]},
                      "PCIe errors rising since the last check" if words else ""))
    return out
