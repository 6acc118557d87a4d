"""The one place in :mod:`slurmkit.topology` that talks to NVML (pynvml, from nvidia-ml-py).

:func:`read_gpus` returns plain records; everything else works on them. Calls used:
``nvmlDeviceGetCount``, ``nvmlDeviceGetHandleByIndex``, ``nvmlDeviceGetName``,
``nvmlDeviceGetPciInfo`` (busId), ``nvmlDeviceGetCpuAffinity``, ``nvmlDeviceGetNvLinkState`` and
``nvmlDeviceGetNvLinkRemotePciInfo`` per link, ``nvmlDeviceGetTopologyCommonAncestor``.
"""

from __future__ import annotations

from slurmkit.pci import normalise_bus_id
from slurmkit.topology.errors import TopoError

# nvmlGpuTopologyLevel_t -> nvidia-smi token
_LEVEL = {0: "X", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}


def sysfs_bdf(bus_id) -> str:
    """NVML busId (``00000000:18:00.0``, str or bytes) -> sysfs form (``0000:18:00.0``, lower
    case): :func:`slurmkit.pci.normalise_bus_id`. Raises ``ValueError`` for anything else."""
    if isinstance(bus_id, bytes):
        bus_id = bus_id.decode()
    return normalise_bus_id(bus_id)


def _bits(masks, word_bits=64) -> list[int]:
    out = []
    for w, m in enumerate(masks):
        m = int(m)
        for b in range(word_bits):
            if m >> b & 1:
                out.append(w * word_bits + b)
    return out


def read_gpus(ncpus: int) -> list[dict]:
    """One record per GPU in NVML index order: ``{"index", "name", "bdf", "minor" (device minor,
    nvmlDeviceGetMinorNumber; None when NVML cannot say), "cpus" (OS CPU ids,
    nvmlDeviceGetCpuAffinity), "nvlink_remote" (sysfs bus ids of the far end of each active
    NVLink), "ancestor" ({other index: PIX/PXB/PHB/NODE/SYS})}``. ``ncpus``: CPUs of the node
    (sizes the affinity mask). TopoError when NVML cannot be loaded or there is no GPU."""
    try:
        import pynvml
    except ImportError as exc:
        raise TopoError("NVML", None, f"pynvml is not installed ({exc})") from None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise TopoError("NVML", None, f"cannot initialise NVML ({exc}): no NVIDIA driver or GPU on this "
                        "machine; capture `nvidia-smi topo -m` on a GPU node and use `slurmkit topo import`") from None
    try:
        n = pynvml.nvmlDeviceGetCount()
        if n == 0:
            raise TopoError("NVML", None, "NVML reports no GPU on this machine")
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
        words = max(1, (ncpus + 63) // 64)
        out = []
        for i, h in enumerate(handles):
            name = pynvml.nvmlDeviceGetName(h)
            name = name.decode() if isinstance(name, bytes) else name
            rec = {"index": i, "name": name, "bdf": sysfs_bdf(pynvml.nvmlDeviceGetPciInfo(h).busId),
                   "minor": None, "cpus": [], "nvlink_remote": [], "ancestor": {}}
            try:
                rec["minor"] = int(pynvml.nvmlDeviceGetMinorNumber(h))
            except pynvml.NVMLError:
                pass
            try:
                rec["cpus"] = _bits(pynvml.nvmlDeviceGetCpuAffinity(h, words))
            except pynvml.NVMLError:
                pass
            for link in range(pynvml.NVML_NVLINK_MAX_LINKS):
                try:
                    if pynvml.nvmlDeviceGetNvLinkState(h, link) != pynvml.NVML_FEATURE_ENABLED:
                        continue
                    rec["nvlink_remote"].append(sysfs_bdf(pynvml.nvmlDeviceGetNvLinkRemotePciInfo(h, link).busId))
                except pynvml.NVMLError:
                    break  # no such link (or NVLink unsupported)
            for j, h2 in enumerate(handles):
                if j != i:
                    try:
                        rec["ancestor"][j] = _LEVEL.get(int(pynvml.nvmlDeviceGetTopologyCommonAncestor(h, h2)), "SYS")
                    except pynvml.NVMLError:
                        rec["ancestor"][j] = "SYS"
            out.append(rec)
        return out
    except pynvml.NVMLError as exc:
        raise TopoError("NVML", None, f"NVML query failed: {exc}") from None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
