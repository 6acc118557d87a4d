"""Hook logging: syslog (journald picks it up) with the job id, echoed to stderr.

Uses the C ``syslog`` module, not ``logging`` (whose import alone costs ~28 ms per hook run).
Identity ``slurmkit-<hook>``, facility DAEMON; every message starts with ``node=<n> job=<id>``.
Slurm keeps a prolog's stderr only in slurmd's debug log; the echo is for admins running a hook by
hand and for tests.
"""

from __future__ import annotations

import sys


class HookLog:
    """Collects and emits a hook's log lines. ``lines`` keeps ``(level, text)`` for the caller."""

    def __init__(self, hook: str, node: str, job_id: str | None, echo: bool = True):
        self.hook, self.node, self.job_id, self.echo = hook, node, job_id, echo
        self.lines: list[tuple[str, str]] = []
        self._syslog = None
        try:
            import syslog

            syslog.openlog(f"slurmkit-{hook}", syslog.LOG_PID, syslog.LOG_DAEMON)
            self._syslog = syslog
        except Exception:  # no syslog on this platform: stderr only
            self._syslog = None

    def _emit(self, level: str, prio_name: str, msg: str) -> None:
        text = f"node={self.node} job={self.job_id or '-'} {msg}"
        self.lines.append((level, msg))
        if self._syslog is not None:
            try:
                self._syslog.syslog(getattr(self._syslog, prio_name), text)
            except Exception:
                pass
        if self.echo:
            try:
                sys.stderr.write(f"slurmkit-{self.hook}: {level}: {text}\n")
            except Exception:
                pass

    def info(self, msg: str) -> None:
        self._emit("info", "LOG_INFO", msg)

    def warning(self, msg: str) -> None:
        self._emit("warning", "LOG_WARNING", msg)

    def error(self, msg: str) -> None:
        self._emit("error", "LOG_ERR", msg)
