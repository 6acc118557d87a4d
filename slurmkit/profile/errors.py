"""The one error type of the profile loader: :class:`ProfileError` (file, dotted key, line, message)."""

from __future__ import annotations


class ProfileError(ValueError):
    """A site profile is unreadable or invalid.

    ``file``: the profile file (str, "" for in-memory data or an override); ``key``: the dotted
    key that is wrong (``node_types.dgx-a100.gpus[3].cpus``, "" for the whole file); ``line``: the
    1-based line in ``file`` where that key is written (None when unknown); ``message``: what is
    wrong. ``str(err)`` is ``file:line: key: message``.
    """

    def __init__(self, file: str, key: str, message: str, line: int | None = None):
        self.file = str(file or "")
        self.key = key
        self.message = message
        self.line = line
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = self.file or "<profile>"
        if self.line:
            where += f":{self.line}"
        return f"{where}: {self.key}: {self.message}" if self.key else f"{where}: {self.message}"
