"""The sandbox: a real local Slurm cluster (munge, MariaDB, slurmdbd, slurmctld, N slurmd) from
Debian's packages, for tests and demos. See :class:`slurmkit.sandbox.cluster.Sandbox`."""

from slurmkit.sandbox.cluster import Sandbox, default_dir
from slurmkit.sandbox.errors import DemoError, SandboxError, SpecError

__all__ = ["DemoError", "Sandbox", "SandboxError", "SpecError", "default_dir"]
