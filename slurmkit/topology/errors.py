"""The error type of the topology parsers and discovery."""

from __future__ import annotations

from slurmkit.errors import InputError


class TopoError(InputError):
    """Input that cannot be read as a topology: ``file`` (str, "" for in-memory text), ``line``
    (1-based, None when not about one line), ``message``. ``str(err)`` is ``file:line: message``."""
