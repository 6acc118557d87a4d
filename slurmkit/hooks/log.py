"""Hook logging: syslog (journald picks it up) with the job id, echoed to stderr, and where
syslog is absent (or the hooks config says ``log_file = true``) a file under the state directory.

Uses the C ``syslog`` module, not ``logging`` (whose import alone costs ~28 ms per hook run).
Identity ``slurmkit-<hook>``, facility DAEMON; every message starts with ``node=<n> job=<id>``.
Slurm keeps a prolog's stderr only in slurmd's debug log; the echo is for admins running a hook by
hand and for tests.

The file, ``<state_dir>/<node>/hooks.log`` (:func:`log_path`), gets each run's lines in one append
at the end of the run, one line each: ``<local time ISO 8601> slurmkit-<hook>[<pid>] <level>:
node=<n> job=<id> <message>``; past :data:`MAX_BYTES` it is moved to ``hooks.log.1`` first (one
old file kept). ``slurmkit hooks log`` reads it.
"""

from __future__ import annotations

import os
import sys
import time

#: the file's name under ``<state_dir>/<node>/``
FILE_NAME = "hooks.log"
#: size (bytes) past which the file is moved to ``hooks.log.1`` before the next append
MAX_BYTES = 1 << 20
#: syslog's socket: without it (containers, the sandbox) syslog lines go nowhere
SYSLOG_SOCKET = "/dev/log"


def log_path(state_dir: str, node: str) -> str:
    """``<state_dir>/<node>/hooks.log``."""
    return os.path.join(state_dir, node, FILE_NAME)


def wants_file(setting: bool | None) -> bool:
    """Whether a run writes its lines to the file: the hooks config's ``log_file`` (True /
    False), else (None) when syslog's socket :data:`SYSLOG_SOCKET` is absent."""
    return setting if setting is not None else not os.path.exists(SYSLOG_SOCKET)


class HookLog:
    """Collects and emits a hook's log lines. ``lines`` keeps ``(level, text)`` for the caller."""

    def __init__(self, hook: str, node: str, job_id: str | None, echo: bool = True):
        self.hook, self.node, self.job_id, self.echo = hook, node, job_id, echo
        self.lines: list[tuple[str, str]] = []
        #: ``(time.time(), level, text)`` of each line, for :meth:`append_to`
        self.stamped: list[tuple[float, str, str]] = []
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
        self.stamped.append((time.time(), level, text))
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

    def append_to(self, path: str) -> None:
        """Append this run's lines to ``path`` in one write (its folder made, mode 0700), moving
        a file past :data:`MAX_BYTES` to ``<path>.1`` first. Raises OSError."""
        if not self.stamped:
            return
        pid = os.getpid()
        out = "".join(f"{time.strftime('%Y-%m-%dT%H:%M:%S%z', time.localtime(t))} slurmkit-{self.hook}[{pid}] "
                      f"{level}: {text.replace(chr(10), ' ')}\n" for t, level, text in self.stamped)
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        try:
            if os.stat(path).st_size > MAX_BYTES:
                os.replace(path, path + ".1")
        except FileNotFoundError:
            pass
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, out.encode("utf-8", "replace"))
        finally:
            os.close(fd)
