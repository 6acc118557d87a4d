"""The health package's errors: slurmkit's own trouble reading GPU state (:class:`SourceError`),
an unreadable capture (:class:`CaptureError`), an NVML set call that failed
(:class:`ActionFailed`) and an NVML hang (:class:`NvmlTimeout`).

Apart from the sources so that every parser (``nvsmi``, ``source``) imports them without
importing each other.
"""

from __future__ import annotations

from slurmkit.errors import InputError, SlurmkitError


class SourceError(SlurmkitError):
    """slurmkit's own trouble reading GPU state (NVML absent or NOT_SUPPORTED where needed, a
    worker that answered nonsense, a bug; :class:`CaptureError` for a bad snapshot or capture):
    never hardware evidence. ``detail``: the message. CLI exit status 2 (``health check``:
    "unreadable input or slurmkit's own trouble")."""

    exit_code = 2

    def __init__(self, message: str):
        self.detail = message
        super().__init__(message)


class CaptureError(SourceError, InputError):
    """A snapshot or ``nvidia-smi -q`` capture that cannot be read: ``file``, ``line`` (1-based,
    None when not about one line), ``message``. slurmkit's own trouble for a hook (never
    hardware evidence); exit 2 for ``health check --from``."""

    def __init__(self, file, line: int | None, message: str, key: str | None = None):
        self.detail = message
        InputError.__init__(self, file, line, message, key)


class ActionFailed(SourceError):
    """An action on a GPU (an NVML set or reset call) that NVML refused: ``rc`` is the NVML
    return code's name without ``NVML_ERROR_`` (``NOT_SUPPORTED``, ``NO_PERMISSION``,
    ``FUNCTION_NOT_FOUND`` for an older driver, ...). slurmkit's own trouble, never hardware
    evidence: the hooks log and count it and carry on with the next action."""

    def __init__(self, message: str, rc: str):
        self.rc = rc
        super().__init__(message)


class NvmlTimeout(SlurmkitError):
    """NVML did not answer in time: hardware evidence (the hooks drain with reason
    ``slurmkit: nvml-timeout``). ``call`` is the NVML call in flight, ``elapsed_s`` seconds,
    ``abandoned_pid`` the worker left behind when SIGKILL did not end it (else None).
    CLI exit status 1 (a failed check)."""

    def __init__(self, call: str, elapsed_s: float, deadline_s: float, abandoned_pid: int | None = None):
        self.call, self.elapsed_s, self.deadline_s = call, elapsed_s, deadline_s
        self.abandoned_pid = abandoned_pid
        fate = (f"killed after {elapsed_s:.1f} s" if abandoned_pid is None else
                f"worker pid {abandoned_pid} did not exit when killed after {elapsed_s:.1f} s "
                f"(uninterruptible sleep in the driver?): abandoned")
        super().__init__(f"NVML call {call} did not return within {deadline_s:g} s ({fate})")
