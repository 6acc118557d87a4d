"""The hooks' fast path to a profile's ``[health]`` section, the node's NICs and the clock
policies: :func:`load_health`, :func:`load_for_node`, :func:`load_clock_policies`.

A hook runs on every job; loading, layering and validating the whole profile (and importing the
model and validator) costs more than the checks themselves. So the section that
:func:`~slurmkit.profile.load.load_profile` built is kept as JSON in the hooks' state directory,
keyed by the path, modification time (ns) and size of every file the profile was layered from
(the site file and the profiles it ``extends``). While none of them changes, a hook reads that
JSON and imports nothing but :mod:`slurmkit.profile.health`; any change reloads the profile
through ``load_profile``, the one reader, with its full validation.
"""

from __future__ import annotations

import os

from slurmkit import stampcache
from slurmkit.profile.health import Health

CACHE_NAME = "profile-health.json"
#: Bumped when the cached JSON's shape changes (an older cache is then rebuilt).
SHAPE = 5


def load_health(profile, cache_dir=None) -> Health:
    """The ``[health]`` section of site profile ``profile`` (a path or shipped name).

    ``cache_dir``: where the section is cached (``<cache_dir>/profile-health.json``; None: no
    cache, always ``load_profile``). A cache that is missing, unreadable, stale or of another
    profile is rebuilt; failing to write it is not an error (the next run loads again).
    Raises :class:`~slurmkit.profile.errors.ProfileError` (file, line, key) for a bad profile.
    """
    return load_for_node(profile, cache_dir)[0]


def load_for_node(profile, cache_dir=None, node: str | None = None, *,
                  last_good: bool = False) -> tuple[Health, dict | None]:
    """``(health, node_type)``: the ``[health]`` section (as :func:`load_health`) and what the
    checks need of ``node``'s node type: ``{"node_type": name, "nics": [{"device", "link_layer",
    "rate_gbps" (Gbit/s), "role", "pci"}], "nvswitch": bool, "nvlinks": int | None, "pcie": {"width",
    "gen", "gpus": {"<index>": lanes}}, "gpu_count": physical GPUs of the node type (0: CPU-only),
    "mig": bool (a GPU group has MIG on)}`` (profile ``node_types.<t>.nics``, ``gpu_groups``;
    :func:`slurmkit.profile.health.has_nvswitch`, :func:`~slurmkit.profile.health.expected_nvlinks`,
    :meth:`~slurmkit.profile.model.NodeType.pcie_expect`, its GPU indexes as JSON strings); None
    when ``node`` is None or in no partition. Same cache and errors as :func:`load_health`;
    ``last_good``: the values of the last profile that loaded (the cache, even when the files
    changed since), for when loading it now fails; LookupError when there is none."""
    data = _cached(profile, cache_dir, last_good)
    facts = None
    if node is not None:
        for nt, names in data["nodes"].items():
            if node in names:
                facts = {"node_type": nt, "nics": data["nics"].get(nt, []),
                         "nvswitch": bool(data["nvswitch"].get(nt)), "nvlinks": data["nvlinks"].get(nt),
                         "pcie": data["pcie"].get(nt), **data["gpus"].get(nt, {"gpu_count": 0, "mig": False})}
                break
    return Health.from_json(data["health"]), facts


def load_clock_policies(profile, cache_dir=None, node: str | None = None,
                        partition: str | None = None, *, last_good: bool = False) -> dict:
    """The clock policies that concern one job on one node: ``{"node_type": name of ``node``'s
    node type (None when the node is in no partition), "resting": its ``clock_policy``
    (:class:`~slurmkit.profile.clock_policy.ClockPolicy`, the state the epilog puts back; None
    when it names none), "job": the ``clock_policy`` of partition ``partition``
    (SLURM_JOB_PARTITION; None when the partition names none or is not in the profile)}``.
    Same cache, errors and ``last_good`` as :func:`load_for_node`."""
    from slurmkit.profile.clock_policy import ClockPolicy

    data = _cached(profile, cache_dir, last_good)
    node_type = next((nt for nt, names in data["nodes"].items() if node in names), None)
    policies = data["clock_policies"]
    rest = data["node_type_policy"].get(node_type) if node_type else None
    job = data["partition_policy"].get(partition) if partition else None
    return {"node_type": node_type, "resting": ClockPolicy.from_json(policies[rest]) if rest else None,
            "job": ClockPolicy.from_json(policies[job]) if job else None}


def _cached(profile, cache_dir, last_good: bool = False) -> dict:
    cache = os.path.join(os.fspath(cache_dir), CACHE_NAME) if cache_dir is not None else None
    key = f"{SHAPE}:{os.fspath(profile)}"
    if last_good:
        data = stampcache.read_last(cache, key) if cache is not None else None
        if data is None:
            raise LookupError(f"no earlier good load of site profile {os.fspath(profile)} is cached")
        return data
    if cache is not None:
        data = stampcache.read(cache, key)
        if data is not None:
            return data
    from slurmkit.profile.health import expected_nvlinks, has_nvswitch
    from slurmkit.profile.load import load_profile

    prof = load_profile(profile)
    nodes: dict[str, list[str]] = {}
    for part in prof.partitions.values():
        nodes.setdefault(part.node_type, [])
        nodes[part.node_type].extend(n for n in part.node_names if n not in nodes[part.node_type])
    data = {"health": prof.health.to_json(),
            "nics": {name: [{"device": n.device, "link_layer": n.link_layer, "rate_gbps": n.rate_gbps,
                             "role": n.role, "pci": n.pci} for n in nt.nics] for name, nt in prof.node_types.items()},
            "nodes": nodes, "nvswitch": {name: has_nvswitch(nt) for name, nt in prof.node_types.items()},
            "nvlinks": {name: expected_nvlinks(nt) for name, nt in prof.node_types.items()},
            "clock_policies": {name: cp.to_json() for name, cp in prof.clock_policies.items()},
            "node_type_policy": {name: nt.clock_policy for name, nt in prof.node_types.items() if nt.clock_policy},
            "partition_policy": {name: p.clock_policy for name, p in prof.partitions.items() if p.clock_policy},
            "pcie": {name: nt.pcie_expect() for name, nt in prof.node_types.items()},
            "gpus": {name: {"gpu_count": nt.gpu_count, "mig": any(g.mig for g in nt.gpu_groups)}
                     for name, nt in prof.node_types.items()}}
    if cache is not None:
        stampcache.write(cache, key, [f for f in prof.layers if f != "preset"], data)
    return data
