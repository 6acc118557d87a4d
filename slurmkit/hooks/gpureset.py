"""Evidence that a GPU was reset: the record ``slurmkit hooks gpu-reset`` writes, which ends the
drain a hardware XID of that GPU holds (a reboot, a new boot id, ends every one).

Why slurmkit's own record: the NVIDIA driver writes nothing to the kernel log when a GPU is
reset. ``nvidia-smi --gpu-reset`` makes the kernel module trigger a PCIe function-level reset,
which it logs only at its info debug level, off by default (open-gpu-kernel-modules
``kernel-open/nvidia/os-pci.c`` ``os_pci_trigger_flr``: "NVRM: %s() Start to trigger FLR", and
``kernel-open/nvidia/nv.c``: "NVRM: Trigger FLR!", both ``NV_DBG_INFO``). The line ``NVRM: GPU
at PCI:0000:3b:00: GPU-<uuid>`` that precedes Xids is printed once per driver initialisation of
the GPU, before its first Xid (``src/nvidia/src/kernel/gpu/rc/kernel_rc.c``
``_krcLogUuidOnce``), so it says nothing about a reset either; the GPU's UUID does not change.
NVIDIA's own NVSentinel came to the same conclusion ("there does not exist a corresponding
syslog entry nor a DCGM module which exposes GPU resets", ``docs/designs/020-nvsentinel-gpu-reset.md``)
and has its reset job log ``GPU reset occurred: GPU-<uuid>`` itself. slurmkit does the same:

- ``slurmkit hooks gpu-reset GPU`` runs ``nvidia-smi --gpu-reset -i <bus id>`` (:func:`reset`)
  and, when it exits 0, records the reset (:func:`record`); ``--done`` records a reset made
  another way (by hand, a BMC, a vendor tool) without running one;
- the record, ``<state_dir>/<node>/gpu-resets.json``, is ``{"slurmkit_gpu_resets": 1,
  "boot_id": str, "gpus": {pci bus id: {"at_s": epoch s, "kmsg_seq": int | None, "uuid": str |
  None, "how": str}}}``; ``kmsg_seq`` is the last ``/dev/kmsg`` sequence number at the reset
  (live nodes), so an Xid line is placed before or after it exactly
  (:func:`slurmkit.health.kmsg.logged_before`), else by time. A record of an earlier boot is
  ignored (the reboot already ended those drains);
- the reset is also written to the kernel log (``slurmkit: GPU 0000:3b:00.0 GPU-<uuid> reset
  (nvidia-smi --gpu-reset)``, best effort), so ``dmesg`` shows it beside the Xids.

Only the GPU that was reset is cleared: another GPU's hardware XID keeps holding the drain
(:mod:`slurmkit.hooks.xidhold`). Standard library only.
"""

from __future__ import annotations

import json
import os
import time

VERSION = 1
FILE = "gpu-resets.json"
#: The command that resets one GPU (nvidia-smi's ``-r`` / ``--gpu-reset``, ``-i`` a PCI bus id).
NVIDIA_SMI = "/usr/bin/nvidia-smi"


def path(state_dir, node: str) -> str:
    """``<state_dir>/<node>/gpu-resets.json``."""
    return os.path.join(os.fspath(state_dir), node, FILE)


def load(state_dir, node: str, boot_id: str | None) -> dict[str, dict]:
    """The resets recorded this boot: ``{pci bus id: {"at_s", "kmsg_seq", "uuid", "how"}}``
    ({} when there is no record, it is unreadable, or it is of another boot). Never raises."""
    try:
        with open(path(state_dir, node), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}
    if (not isinstance(data, dict) or data.get("slurmkit_gpu_resets") != VERSION
            or not isinstance(data.get("gpus"), dict)):
        return {}
    if boot_id is not None and data.get("boot_id") != boot_id:
        return {}
    out = {}
    for bus, rec in data["gpus"].items():
        if isinstance(rec, dict) and isinstance(rec.get("at_s"), (int, float)):
            seq = rec.get("kmsg_seq")
            out[str(bus)] = {"at_s": float(rec["at_s"]), "kmsg_seq": seq if isinstance(seq, int) else None,
                             "uuid": rec.get("uuid"), "how": str(rec.get("how") or "")}
    return out


def record(state_dir, node: str, bus_id: str, *, boot_id: str | None, uuid: str | None = None,
           how: str = "", kmsg_seq: int | None = None, at_s: float | None = None) -> dict:
    """Record that the GPU at ``bus_id`` (sysfs form) was reset now (``at_s``, default the
    current time), keeping this boot's other records. Returns the entry. Raises OSError when
    the state directory cannot be written."""
    from slurmkit.atomicfile import atomic_write
    from slurmkit.hooks.nodestate import node_dir

    node_dir(state_dir, node)
    gpus = load(state_dir, node, boot_id)
    entry = {"at_s": time.time() if at_s is None else float(at_s), "kmsg_seq": kmsg_seq, "uuid": uuid, "how": how}
    gpus[bus_id] = entry
    atomic_write(path(state_dir, node), json.dumps({"slurmkit_gpu_resets": VERSION, "boot_id": boot_id,
                                                    "gpus": gpus}))
    return entry


def last_kmsg_seq(device: str = "/dev/kmsg") -> int | None:
    """The sequence number of the newest record in the kernel log (None when it cannot be read:
    not root, no ``/dev/kmsg``; :func:`slurmkit.health.kmsg.kmsg_records`). Keeps no cursor."""
    from slurmkit.health.kmsg import kmsg_records

    try:
        records = kmsg_records(device)
    except OSError:
        return None
    return records[-1][0] if records else None


def log_to_kernel(text: str, device: str = "/dev/kmsg") -> bool:
    """Write ``text`` as one kernel-log record (priority notice); False when that is refused."""
    try:
        fd = os.open(device, os.O_WRONLY)
    except OSError:
        return False
    try:
        os.write(fd, f"<5>{text}\n".encode())
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def resolve(gpu: str, state=None) -> tuple[str, str | None]:
    """``(pci bus id, uuid | None)`` of the GPU an admin named: a PCI bus id in any form
    (``0000:3b:00.0``, ``00000000:3B:00.0``, ``3b:00``), else an NVML index or a UUID looked up in
    ``state`` (a :class:`~slurmkit.health.state.NodeState`; None: only a bus id resolves).
    Raises ValueError naming what was not found."""
    from slurmkit.health.state import normalise_bus_id

    text = gpu.strip()
    gpus = state.gpus if state is not None else []
    if not text.isdigit():
        try:
            bus = normalise_bus_id(text)
        except ValueError:
            bus = None
        if bus is not None:
            g = next((g for g in gpus if g.pci_bus_id == bus), None)
            return bus, g.uuid if g else None
    g = next((g for g in gpus if (text.isdigit() and g.index == int(text)) or g.uuid == text), None)
    if g is None or not g.pci_bus_id:
        known = ", ".join(f"{g.index} {g.pci_bus_id} {g.uuid}" for g in gpus) or "none read"
        raise ValueError(f"no GPU {text!r} on this node (GPUs: {known}); give its PCI bus id, NVML index or UUID")
    return g.pci_bus_id, g.uuid


def check_present(bus: str, state=None, sysfs_root: str = "/") -> None:
    """Refuse a PCI bus id the node does not have: with a recorded ``state`` (a replayed
    snapshot) the bus id must be one of its GPUs'; live, the PCI device must exist
    (``<sysfs_root>/sys/bus/pci/devices/<bus id>``, there even when NVML cannot list a GPU that
    fell off the bus, as long as the kernel still has the device). Raises ValueError naming the
    GPUs the node has."""
    if state is not None:
        if any(g.pci_bus_id == bus for g in state.gpus):
            return
        known = ", ".join(f"{g.index} {g.pci_bus_id}" for g in state.gpus) or "none read"
        raise ValueError(f"no GPU at PCI {bus} on this node (GPUs: {known})")
    devices = os.path.join(sysfs_root, "sys", "bus", "pci", "devices")
    if not os.path.exists(os.path.join(devices, bus)):
        raise ValueError(f"no PCI device {bus} on this node ({devices}/{bus} does not exist); "
                         "give the bus id the drain reason or the Xid line names")


def nvsmi_bus_id(bus_id: str) -> str:
    """``0000:3b:00.0`` -> ``00000000:3B:00.0``, the form ``nvidia-smi -i`` prints and takes."""
    domain, rest = bus_id.split(":", 1)
    return f"{int(domain, 16):08X}:{rest.upper()}"


def reset(bus_id: str, nvidia_smi: str = NVIDIA_SMI, timeout_s: float = 120.0) -> tuple[bool, str]:
    """Run ``nvidia-smi --gpu-reset -i <bus id>``: ``(True, output)`` when it exits 0, else
    ``(False, output)`` (nvidia-smi refuses a GPU in use, with persistence mode on, or one that
    cannot be reset alone on an NVSwitch system; its message is the output). A missing
    ``nvidia_smi`` or a run past ``timeout_s`` is ``(False, why)``."""
    import subprocess

    try:
        p = subprocess.run([nvidia_smi, "--gpu-reset", "-i", nvsmi_bus_id(bus_id)], capture_output=True,
                           text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        return False, f"{nvidia_smi} not found"
    except subprocess.TimeoutExpired:
        return False, f"{nvidia_smi} --gpu-reset did not finish within {timeout_s:g} s"
    out = (p.stdout + p.stderr).strip()
    return p.returncode == 0, out or f"exit {p.returncode}"
