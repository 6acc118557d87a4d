"""The sandbox: a real local Slurm cluster (munge, MariaDB, slurmdbd, slurmctld, N slurmd) from
Debian's packages, for tests and demos. See :class:`slurmkit.sandbox.cluster.Sandbox`."""

from slurmkit.sandbox.cluster import Sandbox, SandboxError, default_dir

__all__ = ["Sandbox", "SandboxError", "default_dir"]
