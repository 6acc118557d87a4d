"""The error type of the topology parsers and discovery."""

from __future__ import annotations


class TopoError(ValueError):
    """Input that cannot be read as a topology: ``file`` (str, "" for in-memory text), ``line``
    (1-based, None when not about one line), ``message``. ``str(err)`` is ``file:line: message``."""

    def __init__(self, file: str, line: int | None, message: str):
        self.file, self.line, self.message = str(file or ""), line, message
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = self.file or "<input>"
        if self.line:
            where += f":{self.line}"
        return f"{where}: {self.message}"
