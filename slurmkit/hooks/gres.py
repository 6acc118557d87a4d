"""GPU identity: Slurm's GPU index -> gres.conf ``File=`` path -> device minor -> NVML GPU.

Slurm numbers a node's GPUs by their position in its gres.conf ``File=`` list (ranges such as
``/dev/nvidia[0-3]`` expanded by :mod:`slurmkit.hostlist`, lines in file order); ``SLURM_JOB_GPUS`` in
the prolog / epilog environment holds those positions. The device file's minor number
(``os.stat(path).st_rdev``) is what NVML reports as ``nvmlDeviceGetMinorNumber``; from that we
find the NVML GPU and its PCI bus id and UUID. Index, minor and NVML order are never assumed
equal (the sandbox makes all three differ).

A gres.conf written for ``AutoDetect=nvml`` names no files (``Name=gpu Type=h100 Count=8``):
Slurm then numbers the GPUs NVML finds in the order of their device files ``/dev/nvidia<minor>``,
so Slurm's index ``k`` among those lines is the GPU with the ``k``-th smallest NVML minor number;
such an entry is None in :func:`node_gpu_files` and mapped through NVML by :func:`map_job_gpus`.

Pure parsing (:func:`parse_gres_conf`, :func:`node_gpu_files`); :func:`device_minor` and
:func:`map_job_gpus` touch the device files (stat only).
"""

from __future__ import annotations

from slurmkit.errors import InputError

import os

from slurmkit.records import GpuIdentity, record


class GresError(InputError):
    """gres.conf cannot be used: ``file``, ``line`` (1-based, None when not about a line), ``message``."""


@record(frozen=True)
class GresLine:
    """One gres.conf line: ``lineno``, ``fields`` {lower-case key: value as written}."""

    lineno: int
    fields: dict


def parse_gres_conf(text: str, path="gres.conf") -> list[GresLine]:
    """Every ``Key=Value ...`` line of a gres.conf (comments and blank lines skipped).

    Raises :class:`GresError` naming the line for a token that is not ``Key=Value``.
    """
    out = []
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = {}
        for tok in line.split():
            key, eq, value = tok.partition("=")
            if not eq or not key:
                raise GresError(path, no, f"expected Key=Value, found {tok!r}")
            fields[key.lower()] = value
        out.append(GresLine(no, fields))
    return out


def node_gpu_files(lines: list[GresLine], node: str, path="gres.conf") -> list[str | None] | None:
    """Device files of the GPUs of ``node``, in Slurm's index order (index = position); None
    entries: GPUs of a line without ``File=`` (``AutoDetect=nvml``: ``Count=`` of them, default
    1), matched through NVML.

    Lines with ``NodeName=`` apply to the nodes their hostlist names, others to every node;
    only ``Name=gpu`` lines count. Returns None when no line gives this node GPUs (a CPU-only
    node); raises :class:`GresError` for a bad hostlist, ``File=`` range or ``Count=``.
    """
    from slurmkit.hostlist import BadHostlist, expand_hostlist

    files: list[str] = []
    found = False
    for gl in lines:
        f = gl.fields
        if f.get("name", "").lower() != "gpu":
            continue
        if "nodename" in f:
            try:
                if node not in expand_hostlist(f["nodename"]):
                    continue
            except BadHostlist as exc:
                raise GresError(path, gl.lineno, f"bad NodeName hostlist {f['nodename']!r}: {exc}") from None
        found = True
        if "file" not in f:  # AutoDetect: Slurm finds the files through NVML
            count = f.get("count", "1")
            if not count.isdigit():
                raise GresError(path, gl.lineno, f"Count={count!r}: want a whole number of GPUs")
            files.extend([None] * int(count))
            continue
        try:
            files.extend(expand_hostlist(f["file"]))
        except BadHostlist as exc:
            raise GresError(path, gl.lineno, f"bad File= range {f['file']!r}: {exc}") from None
    return files if found else None


def node_shares_gpus(lines: list[GresLine], node: str) -> bool:
    """True when gres.conf gives ``node`` GPUs that jobs share by design (``Name=shard`` or
    ``Name=mps`` lines for it): several jobs may then hold one GPU at once. A bad hostlist reads
    as not naming the node (:func:`node_gpu_files` reports it)."""
    from slurmkit.hostlist import BadHostlist, expand_hostlist

    for gl in lines:
        f = gl.fields
        if f.get("name", "").lower() not in ("shard", "mps"):
            continue
        try:
            if "nodename" not in f or node in expand_hostlist(f["nodename"]):
                return True
        except BadHostlist:
            continue
    return False


def device_minor(path: str) -> int:
    """Minor number of a character device file (``os.stat().st_rdev``); OSError when absent."""
    return os.minor(os.stat(path).st_rdev)


def parse_job_gpus(value: str | None) -> list[int]:
    """``SLURM_JOB_GPUS`` (``"0,2"``; empty / unset when the job has no GPU) -> ``[0, 2]``.

    Raises ValueError for anything but comma-separated non-negative integers.
    """
    if not value or not value.strip():
        return []
    out = []
    for part in value.split(","):
        part = part.strip()
        if not part.isdigit():
            raise ValueError(f"SLURM_JOB_GPUS={value!r}: {part!r} is not a GPU index")
        out.append(int(part))
    return out


@record(frozen=True)
class JobGpu(GpuIdentity):
    """One of the job's GPUs: its :class:`~slurmkit.records.GpuIdentity` (Slurm ``index``: gres
    position; ``minor``: the device file's minor; from NVML: ``nvml_index``, ``uuid``,
    ``pci_bus_id``, None when no NVML GPU has that minor number), then ``file`` (device path)."""

    file: str = ""


def map_job_gpus(indexes: list[int], files: list[str | None], state, minor_of=device_minor) -> list[JobGpu]:
    """Map Slurm GPU ``indexes`` to NVML GPUs of ``state`` (a health ``NodeState``).

    ``files`` from :func:`node_gpu_files`; ``minor_of(path)`` reads a device's minor number. An
    AutoDetect entry (None) is the GPU with the k-th smallest NVML minor number (k: its place
    among the None entries), its file ``/dev/nvidia<minor>``. Raises ValueError when an index
    is beyond the gres.conf list (slurmkit's own trouble: the config and Slurm disagree).
    """
    out = []
    nvml_minors = sorted(g.minor_number for g in (state.gpus if state is not None else [])
                         if g.minor_number is not None)
    for i in indexes:
        if i >= len(files):
            raise ValueError(f"GPU index {i} is not in gres.conf (the node has {len(files)} GPU files)")
        path = files[i]
        if path is None:
            k = sum(1 for f in files[:i] if f is None)
            minor = nvml_minors[k] if k < len(nvml_minors) else None
            path = f"/dev/nvidia{minor}" if minor is not None else f"(AutoDetect GPU {k}: not seen by NVML)"
            g = state.gpu_by_minor(minor) if minor is not None else None
            out.append(JobGpu(i, g.index if g else None, minor, g.uuid if g else None, g.pci_bus_id if g else None,
                              path))
            continue
        try:
            minor = minor_of(path)
        except OSError:
            minor = None
        g = state.gpu_by_minor(minor) if minor is not None and state is not None else None
        out.append(JobGpu(i, g.index if g else None, minor, g.uuid if g else None, g.pci_bus_id if g else None,
                          path))
    return out
