"""Which job an Xid belongs to: the job whose GPUs include the PCI bus id in the kernel line
(``NVRM: Xid (PCI:0000:3b:00): 79, pid=...``) and whose run window contains the line.

A job's window (:class:`JobWindow`) comes from its prolog record (``job-<id>.json``,
:class:`slurmkit.hooks.nodestate.JobStart`): the GPUs' bus ids (``SLURM_JOB_GPUS`` -> gres.conf ->
device minor -> NVML), the start (``start_s``, and ``kmsg_seq``, the last ``/dev/kmsg`` record
the prolog read) and, for the job whose epilog runs, its end. A line is inside the window:

- by ``/dev/kmsg`` sequence number when the line and the prolog record have one of the same
  boot: exact (``seq > kmsg_seq``);
- else by time (``Xid.time_s``, the kernel's timestamp turned into wall-clock time, against the
  prolog's and epilog's clocks);
- a line with no time at all (a replayed snapshot without one) is the job's that holds the GPU.

On a shared node this is what keeps job B's GPU XID out of job A's spool record: A's epilog
reports only the lines attributed to A; the drain reason still names the GPU. A line outside
every window is attributed to no job ("no job" in the log). Pure functions; standard library only.
"""

from __future__ import annotations

from slurmkit.records import record


@record(frozen=True)
class JobWindow:
    """One job's GPUs and run window on this node: ``bus_ids`` (sysfs form), ``start_s`` /
    ``end_s`` (epoch s; ``end_s`` None: still running), ``start_seq`` (the prolog's last
    ``/dev/kmsg`` sequence number this boot; None: not read live or another boot)."""

    job_id: str
    bus_ids: frozenset
    start_s: float | None = None
    end_s: float | None = None
    start_seq: int | None = None

    def contains(self, x) -> bool:
        """Whether Xid line ``x`` is this job's: its GPU, logged inside the window (see the
        module docstring for how the moment is compared)."""
        if not x.pci_bus_id or x.pci_bus_id not in self.bus_ids:
            return False
        if x.seq is not None and self.start_seq is not None:
            return x.seq > self.start_seq
        if x.time_s is not None and self.start_s is not None:
            return self.start_s <= x.time_s and (self.end_s is None or x.time_s <= self.end_s)
        return True  # no time to compare: the job that holds the GPU


def window_of(job_id: str, rec, boot_id: str | None, end_s: float | None = None) -> JobWindow | None:
    """The :class:`JobWindow` of prolog record ``rec`` (a ``JobStart``); its ``kmsg_seq`` counts
    only when ``rec.boot_id`` is ``boot_id``. None for a record of another boot (a job does not
    outlive a reboot: a ghost)."""
    if rec.boot_id is not None and boot_id is not None and rec.boot_id != boot_id:
        return None
    buses = frozenset(g.pci_bus_id for g in rec.gpus if g.pci_bus_id)
    seq = rec.kmsg_seq if rec.boot_id is not None and rec.boot_id == boot_id else None
    return JobWindow(str(job_id), buses, rec.start_s, end_s, seq)


def attribute(x, windows) -> list[str]:
    """The ids of the jobs (of ``windows``) line ``x`` is attributed to, in order; [] for none."""
    return [w.job_id for w in windows if w.contains(x)]


def describe(jobs: list[str]) -> str:
    """``job 123`` / ``jobs 123, 124`` (GPUs shared by design) / ``no job``."""
    if not jobs:
        return "no job"
    return ("job " if len(jobs) == 1 else "jobs ") + ", ".join(jobs)
