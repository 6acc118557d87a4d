"""The one error type of the profile loader: :class:`ProfileError` (file, line, message, key)."""

from __future__ import annotations

from slurmkit.errors import InputError


class ProfileError(InputError):
    """A site profile is unreadable or invalid.

    ``file``: the profile file (str, "" for in-memory data or an override); ``line``: the 1-based
    line in ``file`` where ``key`` is written (None when unknown); ``message``: what is wrong;
    ``key``: the dotted key that is wrong (``node_types.dgx-a100.gpus[3].cpus``, None for the
    whole file). ``str(err)`` is ``file:line: key: message`` (``<profile>`` when unnamed).
    """

    @property
    def where(self) -> str:
        where = self.file or "<profile>"
        return f"{where}:{self.line}" if self.line else where
