"""OS CPU ids -> Slurm logical core indexes (gres.conf ``Cores=``).

Slurm numbers cores socket-major with SMT siblings collapsed: logical core
``socket * cores_per_socket + core``. nvidia-smi prints OS CPU ids, whose numbering depends on
the firmware: "linear" (socket 0's cores first, then socket 1's, SMT siblings after all cores:
DGX A100 cpu 48 and cpu 176 are the same core) or "interleaved" (sockets alternate: cpu0 on
socket 0, cpu1 on socket 1, ...). Pure functions over ints.
"""

from __future__ import annotations

NUMBERINGS = ("linear", "interleaved", "unknown")


def cpu_map(sockets: int, cores_per_socket: int, threads_per_core: int,
            numbering: str = "linear") -> dict[int, tuple[int, int]] | None:
    """OS CPU id -> (socket, core within socket) for a node of ``sockets`` x
    ``cores_per_socket`` x ``threads_per_core``; None when ``numbering`` is "unknown".

    linear: k = cpu % (sockets*cores); socket = k // cores, core = k % cores.
    interleaved: k = cpu % (sockets*cores); socket = k % sockets, core = k // sockets.
    """
    if numbering not in NUMBERINGS:
        raise ValueError(f"cpu numbering {numbering!r}: expected one of {', '.join(NUMBERINGS)}")
    if numbering == "unknown":
        return None
    per_thread = sockets * cores_per_socket
    out: dict[int, tuple[int, int]] = {}
    for cpu in range(per_thread * threads_per_core):
        k = cpu % per_thread
        if numbering == "linear":
            out[cpu] = (k // cores_per_socket, k % cores_per_socket)
        else:
            out[cpu] = (k % sockets, k // sockets)
    return out


def logical_cores(cpus, cmap: dict[int, tuple[int, int]], cores_per_socket: int) -> list[int]:
    """Sorted, deduplicated Slurm logical core indexes of OS CPU ids ``cpus`` under ``cmap``
    (from :func:`cpu_map` or sysfs ``topology/physical_package_id`` + ``core_id`` ranks).
    KeyError names a CPU the map does not know."""
    out = set()
    for cpu in cpus:
        if cpu not in cmap:
            raise KeyError(f"CPU {cpu} is not in the CPU map ({len(cmap)} CPUs)")
        socket, core = cmap[cpu]
        out.add(socket * cores_per_socket + core)
    return sorted(out)


def format_ranges(values) -> str:
    """Sorted ints as a Slurm range list: [0, 1, 2, 5, 7, 8] -> ``0-2,5,7-8``; [] -> ""."""
    vals = sorted(set(values))
    parts: list[str] = []
    i = 0
    while i < len(vals):
        j = i
        while j + 1 < len(vals) and vals[j + 1] == vals[j] + 1:
            j += 1
        parts.append(str(vals[i]) if i == j else f"{vals[i]}-{vals[j]}")
        i = j + 1
    return ",".join(parts)


def parse_ranges(text: str) -> list[int]:
    """A CPU list as printed by nvidia-smi / sysfs (``0-3,8,10-11``; strides ``6,14,22``) ->
    sorted ints; "" -> []. ValueError on anything else."""
    out: set[int] = set()
    text = text.strip()
    if not text:
        return []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            lo_i, hi_i = int(lo), int(hi)
            if hi_i < lo_i:
                raise ValueError(f"range {part!r} runs backwards")
            out.update(range(lo_i, hi_i + 1))
        else:
            out.add(int(part))
    return sorted(out)
