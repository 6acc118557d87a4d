"""The sandbox's errors, apart from the cluster so that the spec (:mod:`.config`), the cluster
and the demo raise them without importing each other. All are
:class:`~slurmkit.errors.SlurmkitError` (CLI exit status 1)."""

from __future__ import annotations

from slurmkit.errors import SlurmkitError


class SandboxError(SlurmkitError, RuntimeError):
    """The sandbox cannot be started or stopped; the message says why and what to do."""


class SpecError(SandboxError, ValueError):
    """Sandbox options it cannot lay out (``--nodes 0``, a GPU type that is not a plain name,
    no usable CPU); the message names the option."""


class DemoError(SlurmkitError, RuntimeError):
    """A demo step did not have the outcome it should; the message says which and why."""
