"""Site profiles: load, layer and validate the TOML that describes a cluster
(schema: ``docs/site-profile.md``). Light to import: tomllib, dataclasses and python-hostlist only.

    >>> from slurmkit.profile import load_profile
    >>> p = load_profile("sandbox")
    >>> p.node_type_for().compute_nics()[0].device
    'mlx5_0'
"""

from slurmkit.profile.errors import ProfileError
from slurmkit.profile.load import load_profile, load_profile_data, resolve, shipped_names, site_dir
from slurmkit.profile.model import (Block, Cluster, Fabric, Gpu, Health, Leaf, Nccl, Nic, NodeType,
                                    Partition, Profile, Report, SlurmNode, Spine, Submit)

__all__ = ["ProfileError", "load_profile", "load_profile_data", "resolve", "shipped_names", "site_dir",
           "Profile", "Cluster", "Partition", "NodeType", "Gpu", "Nic", "SlurmNode", "Fabric", "Leaf",
           "Spine", "Block", "Nccl", "Submit", "Health", "Report"]
