"""GPU identity: Slurm's GPU index -> gres.conf ``File=`` path -> device minor -> NVML GPU.

Slurm numbers a node's GPUs by their position in its gres.conf ``File=`` list (ranges such as
``/dev/nvidia[0-3]`` expanded by :mod:`slurmkit.hostlist`, lines in file order); ``SLURM_JOB_GPUS`` in
the prolog / epilog environment holds those positions. Which position each line's GPUs get is
slurmd's merge of slurm.conf and gres.conf (:func:`node_gpu_files`): types in the order the node's
``Gres=`` names them, so interleaved lines of two types are not numbered in line order. The device file's minor number
(``os.stat(path).st_rdev``) is what NVML reports as ``nvmlDeviceGetMinorNumber``; from that we
find the NVML GPU and its PCI bus id and UUID. Index, minor and NVML order are never assumed
equal (the sandbox makes all three differ).

With ``AutoDetect=nvml`` (or ``nvidia``) slurmd finds the GPUs itself and sorts all it keeps by
``File`` (natural order, ``_sort_gpu_by_file``), then by their NVLink matrix's self position
(``_sort_gpu_by_links_order``; gpu_nvml.c puts ``-1`` at the GPU's NVML index, gpu_nvidia.c gives
no matrix), so with ``nvml`` Slurm's index ``k`` is the GPU with the ``k``-th smallest NVML index
(NVML enumerates by PCI bus id), with ``nvidia`` the ``k``-th smallest minor, whatever the types
and ``File=`` lines; such an
entry is None in :func:`node_gpu_files` and mapped through NVML by :func:`map_job_gpus`. How many
to expect: a line's ``Count=``, else the node's ``Gres=gpu[:type]:N`` in slurm.conf
(:func:`slurm_conf_gres`, the count slurmctld holds the node to), for a gres.conf that says only
``AutoDetect=nvml`` as for ``Name=gpu Type=h100`` without a count. A gres.conf slurmd itself
refuses (two ``Name=gpu`` records for one node and type with AutoDetect: ``fatal: gres.conf
duplicate records for gpu``) is refused with that reason.

gres.conf's records are read by :mod:`slurmkit.slurm.gres_conf` (through
:mod:`slurmkit.slurm.conf`: Slurm's own syntax, quotes, ``\\#``, continuation lines, ``Include``,
comments as slurmd reads them; hostlists and ``File=`` ranges expanded).

Pure reading (:func:`load_gres_conf`, :func:`node_gpu_files`); :func:`device_minor` and
:func:`map_job_gpus` touch the device files (stat only).
"""

from __future__ import annotations

import os

from slurmkit.records import GpuIdentity, record
from slurmkit.slurm import gres_conf
from slurmkit.slurm.gres_conf import GresConfError as GresError
from slurmkit.slurm.gres_conf import GresConfRecord, autodetect

__all__ = ["GresError", "GresConfRecord", "load_gres_conf", "slurm_conf_only", "autodetect", "slurm_conf_gres",
           "node_gpu_files", "by_slurm_conf_types", "node_shares_gpus", "device_minor", "parse_job_gpus",
           "map_job_gpus", "AUTODETECT_GPU", "node_mig_instances"]


def load_gres_conf(path) -> list[GresConfRecord]:
    """The records of the gres.conf at ``path`` and of the files it ``Include``s
    (:func:`slurmkit.slurm.gres_conf.load`); a missing file is an empty gres.conf (no GPUs
    configured). Raises :class:`GresError` (file and line) for a line slurmd would not read, a
    bad hostlist, ``File=`` range or ``Count=``, or a missing included file."""
    if not os.path.exists(path):
        return []
    return gres_conf.load(path)


AUTODETECT_GPU = ("nvml", "nvidia")


def slurm_conf_only(where: str) -> list[GresConfRecord]:
    """The records the hooks judge a node by when its gres.conf cannot be read but slurm.conf's
    ``Gres=`` gives it GPUs: those of a gres.conf that says only ``AutoDetect=nvml`` (``where``
    names the slurm.conf in messages), so the count comes from ``Gres=`` (:func:`node_gpu_files`
    with ``slurm_gres``) and Slurm's GPU index ``k`` is taken as the ``k``-th NVML GPU."""
    return gres_conf.records([(where, 0, [("AutoDetect", "nvml")])])


def slurm_conf_gres(slurm_conf, node: str) -> list[tuple[str | None, int]] | None:
    """The GPUs slurm.conf gives ``node`` (``NodeName=... Gres=gpu:h100:4,gpu:a100:2``; a
    ``NodeName=DEFAULT`` line's Gres applies to the lines after it): ``[(type or None, count)]``;
    None when no NodeName line names the node. Raises :class:`GresError` for a file or ``Gres=``
    that cannot be read."""
    from slurmkit.hostlist import BadHostlist, expand_hostlist
    from slurmkit.slurm import conf, gres

    try:
        entries = conf.read_lines(slurm_conf)
    except conf.ConfError as exc:
        raise GresError(exc.file, exc.line, exc.message) from None
    default, found = None, None
    for file, no, pairs in entries:
        fields = {k.lower(): v for k, v in pairs}
        name = fields.get("nodename")
        if name is None:
            continue
        if name.upper() == "DEFAULT":
            default = fields.get("gres", default)
            continue
        try:
            if node not in expand_hostlist(name):
                continue
        except BadHostlist as exc:
            raise GresError(file, no, f"bad NodeName hostlist {name!r}: {exc}") from None
        try:
            spec = gres.parse(fields.get("gres", default) or "", file)
        except gres.GresSpecError as exc:
            raise GresError(file, no, f"Gres=: {exc.message}") from None
        found = [(gtype, n) for (name, gtype), n in spec.items() if name == "gpu"]
    return found


def node_gpu_files(lines: list[GresConfRecord], node: str, path="gres.conf",
                   slurm_gres=None) -> list[str | None] | None:
    """Device files of the GPUs of ``node``, in Slurm's index order (index = position); None
    entries: GPUs slurmd autodetects, matched through NVML by :func:`map_job_gpus`.

    Lines with ``NodeName=`` apply to the nodes their hostlist names, others to every node;
    only ``Name=gpu`` lines count. The order is slurmd's (Slurm 22.05-24.11 src/common|interfaces/
    gres.c ``_merge_config``, src/plugins/gres/gpu/gres_gpu.c ``_merge_system_gres_conf``):

    - without AutoDetect, gres.conf's records are taken per type in the order the node's
      slurm.conf ``Gres=`` first names the types (``Gres=gpu:b:2,gpu:a:1``: every ``b`` line,
      then every ``a`` line; within a type, line order), each type cut to slurm.conf's count;
      lines of a type slurm.conf does not give the node are dropped (slurmd discards them). An
      untyped ``Gres=gpu:N`` takes the first N GPUs in line order. ``slurm_gres()``
      (:func:`slurm_conf_gres`'s list) is called only when the node's lines have more than one
      type; without ``slurm_gres`` line order is kept;
    - with ``AutoDetect=nvml|nvidia`` slurmd sorts every GPU it keeps by NVML's enumeration
      (its NVLink matrix's self position, i.e. NVML index / PCI bus order), whatever the types
      and ``File=`` order, so every entry is None. How many: a line's ``Count=`` or its
      ``File=`` range; else the node's slurm.conf ``Gres=`` (of the line's ``Type=`` when it
      has one); a line without either is one GPU.

    Returns None when nothing gives this node GPUs (a CPU-only node).

    ``lines``: :func:`load_gres_conf`'s records (their hostlists, ranges and counts already read).
    Raises :class:`GresError` for two ``Name=gpu`` records of one type for the node with AutoDetect (slurmd: ``fatal: gres.conf
    duplicate records for gpu``), for an AutoDetect node whose GPU count nothing gives, and for a
    node with GPUs of several types that slurm.conf does not name (their order is unknown).
    """
    auto = autodetect(lines, node) in AUTODETECT_GPU
    records: list[tuple[str | None, list[str | None]]] = []  # (type, files) per line, line order
    found = False
    seen_types: dict = {}
    known = None

    def conf_gres(line: int | None, why: str):
        nonlocal known
        if known is None:
            known = slurm_gres() if slurm_gres is not None else None
            if known is None:
                raise GresError(path, line, f"{why} comes from its Gres= in slurm.conf, which names no such "
                                f"node: GPU checks cannot run")
        return known

    for r in lines:
        if r.name != "gpu" or not r.applies_to(node):
            continue
        found = True
        gtype = (r.type or "").lower() or None
        if not r.files:  # AutoDetect: Slurm finds the files through NVML
            if auto and gtype in seen_types:
                raise GresError(r.file, r.line, f"a second Name=gpu{' Type=' + gtype if gtype else ''} record for "
                                f"{node} (first on line {seen_types[gtype]}) with AutoDetect: slurmd refuses this "
                                "file ('fatal: gres.conf duplicate records for gpu')")
            seen_types[gtype] = r.line
            count = r.count
            if count is None and auto:
                have = conf_gres(r.line, f"AutoDetect: how many GPUs {node} has")
                count = sum(n for t, n in have if gtype is None or (t or "").lower() == gtype)
            records.append((gtype, [None] * (1 if count is None else count)))
            continue
        # a MultipleFiles= record (a MIG instance: its GPU's /dev/nvidiaN, then the GI / CI
        # capability files) is one gres: its GPU is the first file
        records.append((gtype, [r.files[0]] if r.multiple else list(r.files)))
    if not found and auto and slurm_gres is not None:  # gres.conf says only AutoDetect: slurm.conf says how many
        n = sum(c for _, c in conf_gres(None, f"AutoDetect: how many GPUs {node} has"))
        return [None] * n if n else None  # a node slurm.conf gives no gpu: CPU-only
    if not found:
        return None
    if auto:  # slurmd orders what it keeps by NVML enumeration
        return [None] * sum(len(files) for _, files in records)
    if len({t for t, _ in records}) > 1 and slurm_gres is not None:
        return by_slurm_conf_types(records, conf_gres(None, f"the order of {node}'s GPUs of several types"))
    return [x for _, files in records for x in files]


def _mig_record(r: GresConfRecord) -> str | None | bool:
    """A ``Name=gpu`` record's MIG profile (``3g.20gb``) when it lists MIG instances, True for
    an instance whose type names no profile (``MultipleFiles=/dev/nvidiaN,...``), False for
    whole GPUs."""
    from slurmkit.health.mig import parent_minor

    if r.type and "g." in r.type.lower():  # a profile's "<N>g.<M>gb": slurmkit.mig only then
        from slurmkit.mig import profile_in_type

        found = profile_in_type(r.type)
        if found is not None:
            return found[1]
    return True if r.multiple and parent_minor(r.files) is not None else False


def node_mig_instances(lines: list[GresConfRecord], node: str,
                       slurm_gres=None) -> tuple[int, list[dict]]:
    """``node``'s GPUs in gres.conf told apart: ``(whole GPUs, expected MIG instances)``.

    A ``Name=gpu`` record lists MIG instances, each an instance of a parent GPU and not a GPU,
    when its ``Type=`` names a MIG profile (:func:`slurmkit.mig.profile_in_type`:
    ``nvidia_a100_3g.20gb`` as Slurm's NVML AutoDetect names it, Magic Castle's ``3g.20gb`` or
    ``a100_3g.20gb``) or its ``MultipleFiles=`` starts with the parent's ``/dev/nvidiaN``. One
    instance per ``MultipleFiles=`` record, per ``File=`` device, else ``Count=``, else (with
    ``AutoDetect=nvml|nvidia``) the node's slurm.conf ``Gres=`` count of its type
    (``slurm_gres()``: :func:`slurm_conf_gres`'s list), else one. A gres.conf that gives the
    node no ``Name=gpu`` record under AutoDetect takes slurm.conf's ``Gres=`` entries: a typed
    MIG entry (``gpu:a100_3g.20gb:2``) is that many instances.

    Each instance: ``{"type", "profile" (None when the type names none), "files" (the
    record's ``MultipleFiles`` / its one ``File`` device; [] for AutoDetect), "where"
    (``gres.conf:LINE`` or ``slurm.conf Gres=``)}``, the shape the ``mig_instances`` check
    reads (:mod:`slurmkit.health.mig`). The whole GPUs counted here are the records of no MIG
    instance (as :func:`node_gpu_files` counts them; used only beside instances)."""
    auto = autodetect(lines, node) in AUTODETECT_GPU
    whole, out, found = 0, [], False
    conf = [None]

    def conf_count(gtype: str | None) -> int | None:
        if slurm_gres is None:
            return None
        if conf[0] is None:
            conf[0] = slurm_gres() or []
        return sum(n for t, n in conf[0] if gtype is None or (t or "").lower() == gtype.lower()) or None

    for r in lines:
        if r.name != "gpu" or not r.applies_to(node):
            continue
        found = True
        prof = _mig_record(r)
        where = f"{os.path.basename(r.file)}:{r.line}"
        if r.multiple:
            n, files = 1, [list(r.files)]
        elif r.files:
            n, files = len(r.files), [[f] for f in r.files]
        else:
            n = r.count if r.count is not None else (conf_count(r.type) if auto else None) or 1
            files = [[] for _ in range(n)]
        if prof is False:
            whole += n
            continue
        out += [{"type": r.type, "profile": prof if isinstance(prof, str) else None, "files": f, "where": where}
                for f in files]
    if not found and auto:
        for gtype, n in (slurm_gres() or []) if slurm_gres is not None else []:
            hit = None
            if gtype and "g." in gtype.lower():
                from slurmkit.mig import profile_in_type

                hit = profile_in_type(gtype)
            if hit is None:
                whole += n
                continue
            out += [{"type": gtype, "profile": hit[1], "files": [], "where": "slurm.conf Gres="} for _ in range(n)]
    return whole, out


def by_slurm_conf_types(records: list[tuple[str | None, list[str | None]]],
                        conf: list[tuple[str | None, int]]) -> list[str | None]:
    """gres.conf GPUs (``records``: (lower-case type or None, files) per line, line order) in the
    order slurmd numbers them: per type in the order slurm.conf's ``Gres=`` (``conf``: (type or
    None, count) as :func:`slurm_conf_gres` gives) first names it, line order within a type, each
    type cut to its count (gres.c ``_merge_config`` / ``_merge_gres2`` / ``_match_type``); an
    untyped ``conf`` entry takes any line. Lines no entry takes are dropped, as slurmd drops them."""
    counts: dict = {}
    for t, n in conf:  # gres_add_type: one entry per type, counts summed, first-seen order
        key = (t or "").lower() or None
        counts[key] = counts.get(key, 0) + n
    left = [list(files) for _, files in records]
    out: list[str | None] = []
    for want, n in counts.items():
        for i, (t, _) in enumerate(records):
            if n <= 0:
                break
            if want is not None and t != want:
                continue
            take = left[i][:n]
            del left[i][:n]
            out.extend(take)
            n -= len(take)
    return out


def node_shares_gpus(lines: list[GresConfRecord], node: str) -> bool:
    """True when gres.conf gives ``node`` GPUs that jobs share by design (``Name=shard`` or
    ``Name=mps`` lines for it): several jobs may then hold one GPU at once."""
    return any(r.name in ("shard", "mps") and r.applies_to(node) for r in lines)


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


def map_job_gpus(indexes: list[int], files: list[str | None], state, minor_of=device_minor,
                 autodetect: str | None = "nvml") -> list[JobGpu]:
    """Map Slurm GPU ``indexes`` to NVML GPUs of ``state`` (a health ``NodeState``).

    ``files`` from :func:`node_gpu_files`; ``minor_of(path)`` reads a device's minor number. An
    AutoDetect entry (None) is, with ``autodetect`` ``"nvml"`` (gpu_nvml.c gives each GPU an NVLink
    matrix, which slurmd sorts by), the GPU with the k-th smallest NVML index; otherwise
    (``"nvidia"``: gpu_nvidia.c gives no links, so slurmd's ``File`` sort stands) the k-th smallest
    minor number (k: its place among the None entries); its file ``/dev/nvidia<minor>``. Raises ValueError when an index
    is beyond the gres.conf list (slurmkit's own trouble: the config and Slurm disagree).
    """
    out = []
    nvml_order = sorted((g for g in (state.gpus if state is not None else []) if g.minor_number is not None),
                        key=(lambda g: g.index) if autodetect == "nvml" else (lambda g: g.minor_number))
    for i in indexes:
        if i >= len(files):
            raise ValueError(f"GPU index {i} is not in gres.conf (the node has {len(files)} GPU files)")
        path = files[i]
        if path is None:
            k = sum(1 for f in files[:i] if f is None)
            minor = nvml_order[k].minor_number if k < len(nvml_order) else None
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
