"""``slurmkit cancel [--remote HOST] JOBID... [--signal S]``: cancel jobs or array tasks with
``scancel`` (one call), or send them a signal (``scancel --signal``); through ssh on HOST's login
node with ``--remote``."""

from __future__ import annotations

import re
import signal as signals

import click

from slurmkit.cli.remote import host_options

#: scancel's job ids: a job (``123``), an array task (``123_4``) or tasks (``123_[1-3,7]``)
_JOB_ID = re.compile(r"\d+(?:_(?:\d+|\[[\d,\-]+\]))?")


def signal_name(text: str) -> str:
    """``text`` as the signal scancel is given: a name with or without ``SIG`` in any case
    (``usr1``, ``SIGUSR1``) -> ``USR1``, or a number 1..64 kept as is. Raises UsageError
    (``--signal``) for anything else. Names: Python's :class:`signal.Signals` of this machine."""
    from slurmkit.errors import UsageError

    word = text.strip().upper()
    if word.isdigit() and 1 <= int(word) <= 64:
        return word
    name = word.removeprefix("SIG")
    if f"SIG{name}" in signals.Signals.__members__:
        return name
    raise UsageError("--signal", f"{text!r} is not a signal name or number (e.g. USR1, SIGTERM, 10)")


@click.command("cancel", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("job_ids", nargs=-1, required=True)
@click.option("-s", "--signal", "sig", metavar="S",
              help="Send signal S (USR1, SIGTERM, 10) to the job's steps instead of cancelling it "
                   "(scancel --signal; Slurm's job state does not change).")
@click.option("-f", "--full", is_flag=True,
              help="With --signal: send it to the batch shell too, not only to the job's steps (scancel --full).")
@host_options
def cli(job_ids, sig, full, remote, ssh_config):
    """Cancel jobs or array tasks (JOBID: 123, 123_4 or 123_[1-3]), or signal them with --signal.

    A job that has ended is said to be so and left alone. Exit 2 for a JOBID or signal that is
    not one, 1 for a job Slurm does not know or when scancel fails."""
    from slurmkit.cli.remote import backend_for
    from slurmkit.errors import SlurmkitError, UsageError
    from slurmkit.submit.backend import TERMINAL

    for j in job_ids:
        if not _JOB_ID.fullmatch(j):
            raise UsageError("JOBID", f"{j!r} is not a job id (123, an array task 123_4, or 123_[1-3])")
    name = signal_name(sig) if sig is not None else None
    if full and name is None:
        raise UsageError("--full", "only with --signal S")
    backend = backend_for(remote, ssh_config)
    # scancel exits 0 for a job slurmctld does not know: ask first (one squeue call), so that
    # an unknown id is an error and an ended job is said to be so
    plain = [j for j in job_ids if "[" not in j]
    infos = backend.states(plain)   # SlurmError: exit 1
    unknown = [j for j in plain if j not in infos]
    if unknown:
        raise SlurmkitError(f"unknown job id(s): {', '.join(unknown)} (not in squeue or sacct)")
    for j in job_ids:
        if j in infos and infos[j].state in TERMINAL:
            click.echo(f"job {j}: already ended ({infos[j].state})")
            continue
        backend.cancel(j, name, full=full)   # SlurmError: exit 1
        click.echo(f"job {j}: sent {name}" if name else f"job {j}: cancelled")
