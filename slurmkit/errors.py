"""slurmkit's error types: every error it raises on purpose is a :class:`SlurmkitError`.

- :class:`InputError` — input that cannot be used (a file, a line of it, an option value): one
  argument order ``(file, line, message, key=None)`` and one rendering ``file:line: key: message``.
  Each reader's own error (``ProfileError``, ``TopoError``, ``AccountingInputError``, ...) is a
  subclass, so callers may catch the specific one or this.
- Any other :class:`SlurmkitError` is trouble met while working (a Slurm command failed, the
  sandbox cannot start): its message says what failed.

:meth:`InputError.reading` is the one wrapper of a reader's boundary: the errors of reading a
file (``OSError``, ``UnicodeDecodeError``, a JSON syntax error, and the errors a reader names,
such as pyarrow's or DuckDB's) become the reader's ``InputError`` naming the file, the line
where there is one, and what was expected.

The command line turns either into one line on stderr, ``slurmkit: error: <message>``, and the
exit status :attr:`SlurmkitError.exit_code` (2 for bad input, 1 otherwise); see
:func:`slurmkit.cli.fail`. Nothing here imports anything: hooks import it on every job.
"""

from __future__ import annotations


class SlurmkitError(Exception):
    """Base of the errors slurmkit raises on purpose. ``exit_code``: the CLI's exit status (1)."""

    exit_code = 1


class InputError(SlurmkitError, ValueError):
    """Input that cannot be used.

    ``file``: where the input came from (a path, an option such as ``--week``, "" when in
    memory); ``line``: 1-based line in ``file`` (None or 0 when not about one line);
    ``message``: what is wrong and, where it helps, what was expected; ``key``: the dotted key or
    field that is wrong (``node_types.dgx.gpus[3].cpus``, ``JobID``), None when not about one.
    ``str(err)`` is ``file:line: key: message`` (absent parts left out; ``<input>`` stands for
    an unnamed file when there is no key). CLI exit status 2.
    """

    exit_code = 2

    def __init__(self, file, line: int | None, message: str, key: str | None = None):
        self.file = "" if file is None else str(file)
        self.line = line or None
        self.message = str(message)
        self.key = key or None
        super().__init__(self.__str__())

    @property
    def where(self) -> str:
        """``file:line`` (or ``file``; ``<input>`` when the input has no name)."""
        where = self.file or "<input>"
        return f"{where}:{self.line}" if self.line else where

    def __str__(self) -> str:
        parts = [self.where] if (self.file or self.line or not self.key) else []
        if self.key:
            parts.append(self.key)
        return ": ".join(parts + [self.message])

    def __reduce__(self):  # picklable across the NVML worker's process boundary
        return (type(self), (self.file, self.line, self.message, self.key))

    @classmethod
    def reading(cls, file, expected: str, *errors: type[BaseException]) -> "_Reading":
        """A context manager for the code that reads ``file``: an ``OSError``,
        ``UnicodeDecodeError``, ``json.JSONDecodeError`` (a ``ValueError`` with ``lineno``) or
        one of ``errors`` (e.g. ``pyarrow.ArrowException``, ``duckdb.Error``) raised inside it
        becomes ``cls(file, line, "cannot read <expected>: <what went wrong>")``; ``line``: the
        error's ``lineno`` where it has one. An ``InputError`` passes unchanged. ``expected``
        says what the file should be ("the store's manifest (JSON: day -> entry)")."""
        return _Reading(cls, file, expected, errors)


def reading_failure(exc: BaseException, file) -> str:
    """What went wrong reading ``file`` in ``exc`` (an ``OSError``, ``UnicodeDecodeError``,
    JSON or library error), one line, without the file's name (the error names it):
    ``not UTF-8 text (byte 302)``, ``Permission denied``."""
    return _first_line(exc, "" if file is None else str(file))


def _first_line(exc: BaseException, file: str) -> str:
    """What went wrong in ``exc``, one line, without the file's name (the error names it)."""
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text (byte {exc.start})"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    if type(exc).__name__ == "JSONDecodeError":
        return f"not valid JSON: {exc.msg} (column {exc.colno})"  # type: ignore[attr-defined]
    text = " ".join(str(exc).split()) or type(exc).__name__
    for quoted in (f"'{file}'", f'"{file}"', file):
        text = text.replace(quoted, "it")
    head, sep, rest = text.partition(" it: ")   # "Could not open ... it: <why>": the why
    return rest if sep and rest and len(head) < 60 else text


class _Reading:
    """:meth:`InputError.reading`'s context manager (a class: this module imports nothing)."""

    def __init__(self, cls, file, expected: str, errors: tuple):
        self.cls, self.file, self.expected = cls, "" if file is None else str(file), expected
        self.errors = (OSError, UnicodeDecodeError, *errors)

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if exc is None or isinstance(exc, InputError):
            return False
        json_error = type(exc).__name__ == "JSONDecodeError"
        if not (json_error or isinstance(exc, self.errors)):
            return False
        line = getattr(exc, "lineno", None) if json_error else None
        raise self.cls(self.file, line, f"cannot read {self.expected}: {_first_line(exc, self.file)}") from None


class UsageError(InputError):
    """A command-line or API argument that cannot be used: ``file`` names the option or
    parameter (``--week``, ``-t``), ``line`` is None. CLI exit status 2."""

    def __init__(self, option: str, message: str, key: str | None = None):
        super().__init__(option, None, message, key)

    def __reduce__(self):
        return (type(self), (self.file, self.message, self.key))


class SlurmkitWarning(UserWarning):
    """Something that will work, but probably not as the user expects (e.g. a checkpoint signal
    that may arrive before the program can handle it). ``slurmkit submit`` prints it as
    ``slurmkit: warning: ...`` on stderr; API callers get it through :mod:`warnings`."""
