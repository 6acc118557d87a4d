"""slurmkit.waiting.wait_until: the value that ended the wait, the deadline and its message."""

from __future__ import annotations

import time

import pytest

from slurmkit.errors import SlurmkitError
from slurmkit.waiting import WaitTimeout, wait_until


def test_returns_the_first_true_value_after_polling():
    calls = []

    def third_time():
        calls.append(1)
        return len(calls) >= 3 and {"state": "idle"}

    assert wait_until(third_time, 10, 0.01, "the third call") == {"state": "idle"}
    assert len(calls) == 3


def test_timeout_names_what_was_awaited_with_the_hint_and_last_value():
    t0 = time.monotonic()
    with pytest.raises(WaitTimeout) as info:
        wait_until(lambda: [], 0.2, 0.05, "n3 drained", hint=lambda: "nodes: {'n3': 'idle'}")
    assert time.monotonic() - t0 >= 0.2
    err = info.value
    assert str(err) == "timed out after 0.2 s waiting for n3 drained; nodes: {'n3': 'idle'}"
    assert err.what == "n3 drained" and err.timeout_s == 0.2 and err.last == []
    assert isinstance(err, SlurmkitError) and isinstance(err, TimeoutError)


def test_the_predicate_runs_at_least_once_and_its_errors_propagate():
    assert wait_until(lambda: 7, 0, 1, "at once") == 7

    def broken():
        raise OSError("no such socket")

    with pytest.raises(OSError, match="no such socket"):
        wait_until(broken, 5, 0.01, "a broken probe")
