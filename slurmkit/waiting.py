"""Waiting for a condition with a deadline: the one "poll until" helper of the sandbox, the demo
and the tests. Imports nothing of slurmkit's but :mod:`slurmkit.errors`."""

from __future__ import annotations

import time

from slurmkit.errors import SlurmkitError


class WaitTimeout(SlurmkitError, TimeoutError):
    """A condition did not hold before its deadline. ``what``: the condition, as the caller
    named it; ``timeout_s``: the deadline (s); ``last``: the predicate's last value."""

    def __init__(self, what: str, timeout_s: float, last=None, hint: str = ""):
        self.what, self.timeout_s, self.last = what, timeout_s, last
        super().__init__(f"timed out after {timeout_s:g} s waiting for {what}" + (f"; {hint}" if hint else ""))


def wait_until(predicate, timeout_s: float, interval_s: float = 0.5, what: str = "the condition", hint=""):
    """Call ``predicate()`` every ``interval_s`` seconds until it returns something true, and
    return that value. ``predicate`` is called at least once, and once more at the deadline.

    Raises :class:`WaitTimeout` naming ``what`` when ``timeout_s`` seconds (monotonic clock)
    pass first; ``hint`` (a str, or a callable giving one, called then) is appended to its
    message (where the logs are, the state last seen). Exceptions of ``predicate`` propagate.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        got = predicate()
        if got:
            return got
        left = deadline - time.monotonic()
        if left <= 0:
            raise WaitTimeout(what, timeout_s, got, hint() if callable(hint) else hint)
        time.sleep(min(interval_s, left))
