"""Node services the GPUs depend on: the NVIDIA fabric manager (NVSwitch systems) and the
GPUDirect RDMA kernel module (``nvidia_peermem``, or the older ``nv_peer_mem``).

Read (:func:`read_fabric_manager`, :func:`read_peermem`; in the hooks through
:func:`slurmkit.health.fabric.read_node_fabric`, bounded by the hook's deadline) from the same
filesystem root as sysfs: ``<sysfs>/module/<name>``
exists while a kernel module is loaded; the fabric manager is a process whose ``comm`` (in
``<proc>/<pid>/comm``, ``<proc>`` being ``proc`` beside the sysfs root: ``/proc`` for ``/sys``)
is ``nv-fabricmanager`` (the kernel keeps 15 characters: ``nv-fabricmanage``).

Judged (checks, NHC style):

* ``fabric_manager``: the node type has NVSwitches (``[health] fabric_manager = true``; unset:
  8 or more GPUs all NVLinked to each other in the node type's matrix) and no fabric manager
  process runs -> fail. NVML's own view, the GPU's fabric registration
  (``nvmlDeviceGetGpuFabricInfo``, Hopper and later), is the ``fabric_state`` check; on A100
  NVML does not report it, so this process check is what catches a stopped fabric manager there.
* ``gpudirect_rdma``: ``[health] gpudirect_rdma = true`` and neither ``nvidia_peermem`` nor
  ``nv_peer_mem`` is loaded -> fail (NCCL would silently stage through host memory).

A root that cannot be listed is slurmkit's own trouble. Standard library only.
"""

from __future__ import annotations

import os
from slurmkit.health.result import FAIL, PASS, CheckResult

PEERMEM_MODULES = ("nvidia_peermem", "nv_peer_mem")
FM_COMM = "nv-fabricmanage"  # "nv-fabricmanager" cut to the kernel's 15-character comm


#: What each service read gives, in words, and where it comes from (own-trouble messages).
WHAT = {"fabric_manager": "fabric manager state", "peermem": "GPUDirect RDMA module state"}
SOURCE = {"fabric_manager": "the /proc scan for nv-fabricmanager", "peermem": "<sysfs>/module"}


def read_peermem(sysfs: str | os.PathLike) -> tuple[dict | None, list[str]]:
    """``({"module": "nvidia_peermem" | "nv_peer_mem" | None}, errors)`` from
    ``<sysfs>/module/<name>`` (present while the module is loaded); ``(None, [message])`` when
    ``<sysfs>/module`` is not there (slurmkit's own trouble: not judged)."""
    root = os.fspath(sysfs)
    mod = os.path.join(root, "module")
    if not os.path.isdir(mod):
        return None, [f"sysfs {mod} is not readable (no sysfs at {root})"]
    return {"module": next((m for m in PEERMEM_MODULES if os.path.isdir(os.path.join(mod, m))), None)}, []


def read_fabric_manager(sysfs: str | os.PathLike) -> tuple[dict | None, list[str]]:
    """``({"running": bool, "pids": [int]}, errors)``: the processes whose
    ``<proc>/<pid>/comm`` is ``nv-fabricmanager`` (cut to 15 characters), ``<proc>`` being
    ``proc`` beside the sysfs root. ``(None, [message])`` when ``<proc>`` cannot be listed.
    Not ``systemctl``: a /proc scan needs no subprocess nor D-Bus, and finds the daemon however
    it was started."""
    proc = os.path.join(os.path.dirname(os.path.abspath(os.fspath(sysfs))), "proc")
    try:
        pids = [p for p in os.listdir(proc) if p.isdigit()]
    except OSError as exc:
        return None, [f"{proc}: {exc.strerror or exc}"]
    running = []
    for pid in pids:
        try:
            with open(os.path.join(proc, pid, "comm"), encoding="ascii", errors="replace") as fh:  # a process name is any bytes; only compared with nv-fabricmanager
                if fh.read().strip().startswith(FM_COMM):
                    running.append(int(pid))
        except OSError:
            continue  # the process ended while we looked
    return {"running": bool(running), "pids": sorted(running)}, []


def check_fabric_manager(state, cfg, **_) -> list:
    """Fabric manager expected and not running -> fail; running -> pass."""
    fm = (state.services or {}).get("fabric_manager")
    if fm is None:
        return []
    if fm["running"]:
        return [CheckResult("fabric_manager", PASS, value=f"nv-fabricmanager running (pid {fm['pids'][0]})",
                            limit="running")]
    return [CheckResult("fabric_manager", FAIL, value="nv-fabricmanager not running", limit="running",
                        message="NVSwitch node without the fabric manager: CUDA cannot use its GPUs")]


def check_gpudirect_rdma(state, cfg, **_) -> list:
    """GPUDirect RDMA expected and no ``nvidia_peermem`` / ``nv_peer_mem`` module -> fail."""
    pm = (state.services or {}).get("peermem")
    if pm is None:
        return []
    if pm["module"]:
        return [CheckResult("gpudirect_rdma", PASS, value=f"{pm['module']} loaded", limit="nvidia_peermem")]
    return [CheckResult("gpudirect_rdma", FAIL, value="nvidia_peermem not loaded", limit="nvidia_peermem",
                        message="GPUDirect RDMA off: NCCL stages through host memory")]
