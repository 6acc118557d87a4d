"""Site profiles: load, layer and validate the TOML that describes a cluster
(schema: ``docs/site-profile.md``). Light to import: tomllib, dataclasses and python-hostlist only,
and each name is imported on first use, so ``slurmkit.profile.health`` / ``.cache`` (what the
hooks read on every job) pull in nothing else.

    >>> from slurmkit.profile import load_profile
    >>> p = load_profile("sandbox")
    >>> p.node_type_for().compute_nics()[0].device
    'mlx5_0'
"""

from __future__ import annotations

_WHERE = {
    "ProfileError": "errors",
    "load_profile": "load", "load_profile_data": "load", "resolve": "load", "shipped_names": "load",
    "site_dir": "load",
    "Health": "health", "ClockPolicy": "clock_policy",
    **{name: "model" for name in ("Block", "Cluster", "Fabric", "Gpu", "Leaf", "Nccl", "Nic", "NodeType",
                                  "Partition", "Profile", "Report", "SlurmNode", "Spine", "Submit")},
}

__all__ = ["ProfileError", "load_profile", "load_profile_data", "resolve", "shipped_names", "site_dir",
           "Profile", "Cluster", "Partition", "NodeType", "Gpu", "Nic", "SlurmNode", "Fabric", "Leaf",
           "Spine", "Block", "Nccl", "Submit", "Health", "Report", "ClockPolicy"]


def __getattr__(name: str):
    """Import ``name`` from its module on first use (PEP 562)."""
    mod = _WHERE.get(name)
    if mod is None:
        raise AttributeError(f"module 'slurmkit.profile' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"slurmkit.profile.{mod}"), name)
    globals()[name] = value
    return value
