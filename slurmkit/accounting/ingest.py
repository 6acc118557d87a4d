"""Live ingest: one ``sacct`` call per UTC day of the window, never one per job.

Each call is ``sacct -a -D -P -n --noconvert --delimiter=<US> -S <day> -E <day+1> -o FIELDS``
run through :func:`slurmkit.slurm.commands.run` with ``TZ=UTC`` and ``SLURM_TIME_FORMAT=%s``
(the runner drops the user's SACCT_FORMAT / SLURM_TIME_FORMAT first), so times arrive as epoch
seconds and columns in our order with JobName last. ``-D`` keeps requeued attempts; steps come
too (usage). A job that spans days appears in each day's output; the store keeps one copy.
The output goes through the same reader and typing as a captured file
(:func:`slurmkit.accounting.frame.load_sacct_bytes`).
"""

from __future__ import annotations

import datetime as dt

from slurmkit.accounting.fields import DELIMITER, FIELDS
from slurmkit.accounting.frame import JobRows, load_sacct_bytes
from slurmkit.accounting.quality import DataQuality
from slurmkit.slurm.commands import run


def _fmt(t: dt.datetime) -> str:
    return t.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


def sacct_argv(start: dt.datetime, end: dt.datetime, cluster: str | None = None) -> list[str]:
    """The sacct command line for ``[start, end)`` (aware datetimes, printed in UTC)."""
    argv = ["sacct", "-a", "-D", "-P", "-n", "--noconvert", f"--delimiter={DELIMITER}",
            "-S", _fmt(start), "-E", _fmt(end), "-o", ",".join(FIELDS)]
    if cluster:
        argv += ["-M", cluster]
    return argv


SACCT_ENV = {"TZ": "UTC", "SLURM_TIME_FORMAT": "%s"}


def pull_day(start: dt.datetime, end: dt.datetime, cluster: str | None = None,
             timeout: float = 300.0, slurm_conf: str | None = None
             ) -> tuple[JobRows, DataQuality]:
    """Run one day's sacct call and parse it: ``(typed rows, data quality)``, the rows' source
    ``sacct <YYYY-MM-DD>``. Raises :class:`slurmkit.slurm.commands.SlurmError` when sacct
    fails, :class:`~slurmkit.accounting.read.AccountingInputError` when its output has no row
    with the fields asked for."""
    res = run(sacct_argv(start, end, cluster), timeout=timeout, env=dict(SACCT_ENV),
              slurm_conf=slurm_conf)
    data = res.stdout.encode("utf-8", errors="surrogateescape")
    source = f"sacct {start:%Y-%m-%d}"
    return load_sacct_bytes(data, source, fields=list(FIELDS), delimiter=DELIMITER,
                            cluster=cluster or "")
