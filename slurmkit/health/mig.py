"""MIG instances on a node: what a capture or NVML shows on each physical GPU, which instances
the node's gres.conf expects, the one mapping of an expected instance to its parent GPU, and
the ``mig_instances`` check.

A MIG instance is never a GPU here: a node's GPUs are its physical GPUs (NVML's
``nvmlDeviceGetCount``, a capture's ``<gpu>`` sections), and each keeps its instances in its
``mig_devices`` value (:data:`slurmkit.health.state.FIELDS`), a list of dicts (:func:`mig_device`).
The per-GPU checks (ECC, row remapping, Xid, ...) judge the parent; this module judges the
instances.

An instance's profile is named through :mod:`slurmkit.mig` (the one table of NVIDIA's MIG
geometry) from what every source reports: its GPU-instance compute slices (NVML's
``gpuInstanceSliceCount``; a capture's copy engines, which equal the slices for every profile
but the whole-GPU one, decided by its memory anyway) and its memory slots (the model's slots
times the instance's memory over the GPU's, rounded). The ``+me`` profiles take the memory and
slices of their plain twin: they read as the plain profile.

The expected instances (``expect["mig_instances"]``, from gres.conf:
:func:`slurmkit.hooks.gres.node_mig_instances`) are dicts: ``type`` (the gres type as written),
``profile`` (its MIG profile, :func:`slurmkit.mig.profile_in_type`; None when the type names
none), ``files`` (the record's device files, ``MultipleFiles`` or ``File``; [] for AutoDetect),
``where`` (``gres.conf:LINE`` or ``slurm.conf Gres=``).

Standard library only (the hooks import it); :mod:`slurmkit.mig` is imported where an
instance is named or placed, so a node without MIG never loads it (nor its ``dataclasses``).
"""

from __future__ import annotations

from slurmkit.health.config import HealthConfig
from slurmkit.health.result import FAIL, PASS, WARN, CheckResult, result
from slurmkit.health.state import RC_SUCCESS, GpuState, NodeState

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from slurmkit.mig import MigModel

__all__ = ["instance_profile", "mig_device", "instances", "parent_minor", "min_parents", "physical_gpu_count",
           "place_instances", "check_mig_instances"]


def instance_profile(model: MigModel | None, slices: int | None, memory_mib: int | None,
                     gpu_memory_mib: int | None) -> str | None:
    """The profile name (``1g.20gb``) of an instance of ``model`` with ``slices`` GPU-instance
    compute slices and ``memory_mib`` of the GPU's ``gpu_memory_mib`` (both MiB: a capture's
    ``fb_memory_usage/total`` of the instance and of the GPU; NVML's ``memorySizeMB`` and
    ``nvmlDeviceGetMemoryInfo`` total). The memory slots are ``round(model.slots * memory /
    gpu memory)``; an instance of all the slots is the whole-GPU profile whatever its slices.
    None when a value is unknown or no profile of the model has those slices and slots."""
    if model is None or not slices or not memory_mib or not gpu_memory_mib:
        return None
    slots = round(model.slots * memory_mib / gpu_memory_mib)
    for p in model.profiles:
        if "+" in p.name or p.size != slots:
            continue
        if p.slices == slices or slots == model.slots:
            return p.name
    return None


def mig_device(index: int, gpu_instance_id: int | None, compute_instance_id: int | None, slices: int | None,
               memory_mib: int | None, sm_count: int | None, uuid: str | None, gpu_name: str | None,
               gpu_memory_mib: int | None, ci_slices: int | None = None) -> dict:
    """One MIG device of a GPU as ``mig_devices`` keeps it: ``{"index", "gpu_instance_id",
    "compute_instance_id", "profile", "slices", "ci_slices", "memory_mib", "sm_count", "uuid"}``.
    ``index``: the MIG device's index on its GPU (NVML's ``nvmlDeviceGetMigDeviceHandleByIndex``
    slot, a capture's ``<index>``); ``slices``: GPU-instance compute slices; ``ci_slices``: the
    compute instance's (NVML only; None from a capture); ``memory_mib``: the instance's memory;
    ``sm_count``: its multiprocessors; ``uuid``: its ``MIG-`` UUID (NVML only); ``profile``:
    :func:`instance_profile` over the parent's name and memory (``gpu_name``, ``gpu_memory_mib``)."""
    from slurmkit.mig import model_for

    model = model_for(gpu_name) if gpu_name else None
    return {"index": index, "gpu_instance_id": gpu_instance_id, "compute_instance_id": compute_instance_id,
            "profile": instance_profile(model, slices, memory_mib, gpu_memory_mib), "slices": slices,
            "ci_slices": ci_slices, "memory_mib": memory_mib, "sm_count": sm_count, "uuid": uuid}


def instances(g: GpuState) -> list[dict]:
    """The MIG devices read on GPU ``g`` (``mig_devices``; [] when none or not read)."""
    return list(g.get("mig_devices") or [])


def _mig_on(g: GpuState) -> bool:
    return bool(g.get("mig_current")) or bool(instances(g))


def parent_minor(files) -> int | None:
    """The parent GPU's device minor of a gres.conf MIG record whose first file is
    ``/dev/nvidiaN`` (``MultipleFiles=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap21,...``, as
    Slurm's NVML AutoDetect and slurmkit's gres.conf write it; any directory, as a test's
    device directory): ``N`` (the NVIDIA driver creates ``/dev/nvidiaN`` with minor ``N``); None
    when the record does not name its GPU (custom ``File=`` paths, AutoDetect)."""
    if not files:
        return None
    base = str(files[0]).rsplit("/", 1)[-1]
    if base.startswith("nvidia") and base[6:].isdigit():
        return int(base[6:])
    return None


def _slices(profile: str | None) -> int:
    """GPU-instance compute slices of ``profile`` (:func:`slurmkit.mig.gi_slices`); 1 when unknown."""
    if not profile:
        return 1
    from slurmkit.mig import gi_slices

    return gi_slices(profile) or 1


def _gi_slices(unnamed: list[dict]) -> int:
    """Compute slices of the GPU instances that carry ``unnamed`` instances: a GPU-instance
    type (``3g.40gb``) its slices; compute-instance types (``1c.3g.40gb``, several in one GPU
    instance) as many GPU instances of their profile as their compute slices fill."""
    from slurmkit.mig import split_profile

    total, ci = 0, {}
    for e in unnamed:
        c, gi = split_profile(e["profile"]) if e.get("profile") else (None, "")
        if c is None:
            total += _slices(e.get("profile"))
        else:
            ci[gi] = ci.get(gi, 0) + c
    for gi, c in ci.items():
        g = _slices(gi)
        total += -(-c // g) * g
    return total


def min_parents(expected: list[dict]) -> int:
    """The fewest physical GPUs that carry the ``expected`` instances: one per GPU their files
    name (:func:`parent_minor`), plus, for those that name none, enough GPUs for their GPU
    instances' compute slices (:func:`_gi_slices`; 7 a GPU at most; at least one)."""
    named = {m for m in (parent_minor(e.get("files")) for e in expected) if m is not None}
    unnamed = [e for e in expected if parent_minor(e.get("files")) is None]
    extra = -(-_gi_slices(unnamed) // 7) if unnamed else 0
    return len(named) + max(extra, 1 if unnamed else 0)


def physical_gpu_count(whole: int, expected: list[dict]) -> int:
    """The physical GPUs a node is expected to show: its ``whole`` GPUs (gres.conf records of no
    MIG instance) and the parents of its ``expected`` MIG instances (:func:`min_parents`)."""
    return whole + (min_parents(expected) if expected else 0)


def place_instances(expected: list[dict], state: NodeState) -> list[tuple[dict, GpuState | None, dict | None]]:
    """The one mapping of expected MIG instances to their parent GPU and the instance found
    there: ``[(expected, parent or None, instance dict or None)]`` in ``expected``'s order.

    The parent: the GPU whose device minor the record's ``/dev/nvidiaN`` names
    (:func:`parent_minor`, ``GpuState.minor_number``); else (custom ``File=`` paths, AutoDetect)
    one of ``state``'s GPUs in MIG mode (current MIG mode on, or instances seen): the first in
    NVML order with an unclaimed instance of the profile, else the only such GPU, else None.
    An instance matches when its profile is the expected one (an expected type without a
    profile, or an instance whose profile is unknown, matches any); each instance is claimed
    once. Instances with a named parent are placed first."""
    from slurmkit.mig import split_profile

    claimed: set[tuple[int, int]] = set()
    out: list = [None] * len(expected)
    mig_gpus = [g for g in state.gpus if _mig_on(g)]

    def take(g: GpuState | None, want: str | None) -> dict | None:
        if g is None:
            return None
        # a capture cannot tell a +me instance from its plain twin (same slices and memory):
        # both sides are compared without the media-extension suffix
        want = split_profile(want)[1].split("+", 1)[0] if want else None
        for d in instances(g):
            key = (g.index, d["index"])
            if key in claimed:
                continue
            if want is None or d.get("profile") is None or d["profile"] == want:
                claimed.add(key)
                return d
        return None

    order = sorted(range(len(expected)), key=lambda i: parent_minor(expected[i].get("files")) is None)
    for i in order:
        e = expected[i]
        minor = parent_minor(e.get("files"))
        if minor is not None:
            g = state.gpu_by_minor(minor)
            out[i] = (e, g, take(g, e.get("profile")) if g is not None and _mig_on(g) else None)
            continue
        for g in mig_gpus:
            d = take(g, e.get("profile"))
            if d is not None:
                out[i] = (e, g, d)
                break
        else:
            out[i] = (e, mig_gpus[0] if len(mig_gpus) == 1 else None, None)
    return out


def _named(e: dict, peers: list[dict] | None = None) -> str:
    """``1g.20gb instance (gres.conf:4, /dev/nvidia-caps/nvidia-cap192)``: the instance by its
    profile and record. Among ``peers`` (the expected instances of its profile on its GPU) a
    capture does not say which one is gone: then the records of all of them are named."""
    what = e.get("profile") or e.get("type") or "gpu"
    peers = peers or [e]
    if len(peers) > 1:
        wheres = list(dict.fromkeys(str(p.get("where", "gres.conf")) for p in peers))
        return f"{what} instance (one of {len(peers)}: {', '.join(wheres)})"
    files = e.get("files") or []
    dev = next((f for f in files if "caps" in str(f) or "mig" in str(f)), files[0] if files else None)
    return f"{what} instance ({e.get('where', 'gres.conf')}" + (f", {dev}" if dev else "") + ")"


def check_mig_instances(state: NodeState, cfg: HealthConfig, **_) -> list[CheckResult]:
    """The MIG instances gres.conf expects (``expect["mig_instances"]``) exist, on a GPU in MIG
    mode, in the expected profile (:func:`place_instances`). One result per parent GPU: pass
    (``4 of 4``, the profiles), or fail: the GPU is not in MIG mode; the GPU the record names
    is not seen; an instance is missing (named by its profile, its gres.conf record and device
    file, and its parent GPU; an unclaimed instance of another profile on that GPU is named by
    its GPU instance id); warn: the GPU's MIG devices could not be read (an NVML error, a capture
    without them), so they are not judged. No result on a node that expects no instance or
    whose NVML did not start (``nvml_init`` judges that)."""
    expected = cfg.expect.get("mig_instances") or []
    if not expected or state.init_rc != "SUCCESS":
        return []
    placed = place_instances(expected, state)
    out: list[CheckResult] = []
    by_parent: dict = {}
    for e, g, d in placed:
        by_parent.setdefault(g.index if g is not None else None, (g, []))[1].append((e, d))
    for key, (g, rows) in sorted(by_parent.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
        want = sorted(e.get("profile") or e.get("type") or "?" for e, _ in rows)
        if g is None:
            out.extend(_no_parent(rows, state))
            continue
        if not _mig_on(g):
            out.append(result("mig_instances", FAIL, g, "MIG off", f"{len(rows)} instances",
                              f"GPU{g.index} should carry {len(rows)} MIG instances ({', '.join(want)}: "
                              f"{rows[0][0].get('where', 'gres.conf')}) but is not in MIG mode"))
            continue
        if g.rc("mig_devices") != RC_SUCCESS:  # the instances were not read: not judged, said so
            out.append(result("mig_instances", WARN, g, f"MIG devices not read ({g.rc('mig_devices')})",
                              f"{len(rows)} instances", f"GPU{g.index}'s MIG devices could not be read "
                              f"({g.values['mig_devices'].source if 'mig_devices' in g.values else 'not in the capture'}): "
                              f"its {len(rows)} expected instances are not judged"))
            continue
        missing = [e for e, d in rows if d is None]
        if not missing:
            out.append(result("mig_instances", PASS, g, f"{len(rows)} of {len(rows)}", ", ".join(want)))
            continue
        used = {d["index"] for _, d in rows if d is not None}
        spare = [d for d in instances(g) if d["index"] not in used]
        for e in missing:
            other = spare.pop(0) if spare else None
            seen = (f"; GPU instance {other['gpu_instance_id']} is {other.get('profile') or 'of an unknown profile'}"
                    if other else "")
            out.append(result("mig_instances", FAIL, g, f"{e.get('profile') or e.get('type')} missing",
                              f"{len(rows)} instances",
                              f"{_named(e, [x for x, _ in rows if x.get('profile') == e.get('profile')])} "
                              f"missing on GPU{g.index} {g.pci_bus_id}: "
                              f"{len(rows) - len(missing)} of {len(rows)} expected instances seen{seen}"))
    return out


def _no_parent(rows, state: NodeState) -> list[CheckResult]:
    """Expected instances no GPU of ``state`` can carry: the GPU their record names is not seen,
    or (no GPU named) no GPU is in MIG mode, or several are and none holds the instance."""
    out = []
    mig = [g for g in state.gpus if _mig_on(g)]
    for e, _ in rows:
        minor = parent_minor(e.get("files"))
        if minor is not None:
            why = f"no GPU with minor number {minor} (/dev/nvidia{minor}) is seen"
        elif not mig:
            why = "no GPU is in MIG mode"
        else:
            why = "missing on every GPU in MIG mode (" + ", ".join(f"GPU{g.index} {g.pci_bus_id}" for g in mig) + ")"
        r = result("mig_instances", FAIL, None, f"{e.get('profile') or e.get('type')} missing", None,
                   f"{_named(e)}: {why}")
        out.append(r)
    return out
