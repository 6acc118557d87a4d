"""A job's state as it changes, for ``submit --wait`` and ``logs --follow``: on a terminal one
live status line rewritten in place, elsewhere (a pipe, a CI log) one plain line per change."""

from __future__ import annotations

import sys

from slurmkit.errors import SlurmkitError

#: states in which a job has not started yet (``logs --follow`` waits through them)
NOT_STARTED = frozenset({"PENDING", "REQUEUED", "CONFIGURING", "REQUEUE_HOLD", "REQUEUE_FED", "SUSPENDED"})


def describe(job_id: str, info) -> str:
    """``job 12: PENDING (Resources), expected start 2026-12-02T04:10:00`` from a
    :class:`~slurmkit.submit.backend.JobInfo` (None: not known to Slurm yet)."""
    if info is None:
        return f"job {job_id}: not known to Slurm yet"
    text = f"job {job_id}: {info.state}"
    if info.reason:
        text += f" ({info.reason})"
    if info.start:
        text += f", expected start {info.start}"
    if info.nodes and info.state not in NOT_STARTED:
        text += f" on {','.join(info.nodes)}"
    return text


#: pending reasons with which Slurm keeps a job pending for ever (it is never started; Slurm
#: cancels it only under SchedulerParameters=kill_invalid_depend): slurm.conf(5), squeue(1)
#: "DependencyNeverSatisfied: the job's dependency can never be satisfied"
NEVER_STARTS = frozenset({"DependencyNeverSatisfied"})


class NeverStarts(SlurmkitError):
    """The job waits for something that will not happen (``NEVER_STARTS``): the message names
    the job, its reason and what to do (exit 1)."""


class StateLine:
    """Callable for :meth:`slurmkit.submit.api.Job.wait`'s ``callback``: writes each change to
    ``stream`` (default stderr); :meth:`close` ends a live line. Raises :class:`NeverStarts`
    after writing a pending reason in :data:`NEVER_STARTS` (the wait would never end)."""

    def __init__(self, job_id: str, stream=None):
        self.job_id = job_id
        self.stream = stream or sys.stderr
        self.live = bool(getattr(self.stream, "isatty", lambda: False)())
        self.written = False

    def __call__(self, info) -> None:
        text = describe(self.job_id, info)
        if self.live:
            self.stream.write("\r\x1b[K" + text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
        self.written = True
        if info is not None and info.state == "PENDING" and info.reason in NEVER_STARTS:
            self.close()
            raise NeverStarts(f"job {self.job_id} will never start: PENDING ({info.reason}): a job it depends on "
                              f"ended without meeting the dependency, and Slurm keeps it pending; "
                              f"cancel it with 'scancel {self.job_id}'")

    def close(self) -> None:
        if self.live and self.written:
            self.stream.write("\n")
            self.stream.flush()
            self.written = False


class _Started:
    """``until`` for a wait that ends once the job has left the not-started states."""

    def __contains__(self, state) -> bool:
        return state not in NOT_STARTED and state != "UNKNOWN"


STARTED = _Started()
