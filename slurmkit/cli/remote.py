"""Command-line pieces of remote submission: the ``--remote`` options that ``submit``,
``status`` and ``logs`` share, and ``submit --remote``'s run (explain / dry-run / submit)."""

from __future__ import annotations

import click


def host_options(f):
    """``--remote HOST`` and ``--ssh-config FILE`` (for status and logs)."""
    f = click.option("--ssh-config", metavar="FILE", help="SSH config to read HOST from (default: ~/.ssh/config).")(f)
    f = click.option("--remote", metavar="HOST", help="Run on this host of your SSH config (ProxyJump, user, key from it).")(f)
    return f


def submit_options(f):
    """``host_options`` plus ``--sync-dir``, ``--remote-dir``, ``--no-sync``, ``--sync-exclude`` (``--exclude`` is sbatch's node exclusion)."""
    f = click.option("--sync-exclude", "excludes", multiple=True, metavar="PATTERN",
                     help="With --remote: do not sync files matching PATTERN (.gitignore files are honoured too).")(f)
    f = click.option("--no-sync", is_flag=True, help="With --remote: do not sync; the remote directory must exist.")(f)
    f = click.option("--remote-dir", metavar="DIR",
                     help="With --remote: where the project is synced there (default ~/slurmkit-remote/<project name>); each submit runs in its own snapshot slurmkit-runs/<run id>/ under it.")(f)
    f = click.option("--sync-dir", metavar="DIR", help="With --remote: the local project root to sync (default: the git work tree of ., else .).")(f)
    return host_options(f)


def backend_for(remote, ssh_config):
    """The backend for ``status`` / ``logs``: through ssh with ``--remote``, else local."""
    if remote:
        from slurmkit.remote.backend import RemoteBackend, as_remote

        return RemoteBackend(as_remote(remote, ssh_config))
    if ssh_config:
        from slurmkit.errors import UsageError

        raise UsageError("--ssh-config", "only with --remote HOST")
    from slurmkit.submit.backend import get_backend

    return get_backend()


def run_submit(req, *, remote, ssh_config, sync_dir, remote_dir, no_sync, excludes, explain, dry_run, test_only):
    """``slurmkit submit --remote``: print the explanation, the script or the job id. Bad
    input exits 2, a failed step 1, each with one ``slurmkit: error:`` line."""
    from slurmkit.errors import UsageError
    from slurmkit.remote import submit as rs
    from slurmkit.submit import render

    if not remote:
        given = [o for o, v in (("--ssh-config", ssh_config), ("--sync-dir", sync_dir), ("--remote-dir", remote_dir),
                                ("--no-sync", no_sync), ("--sync-exclude", excludes)) if v]
        raise UsageError(given[0], "only with --remote HOST")
    # bad input (InputError, exit 2) and a failed step (RemoteError, exit 1) reach the one CLI handler
    rp = rs.prepare_remote(req, remote, ssh_config=ssh_config, sync_dir=sync_dir, remote_dir=remote_dir,
                           sync=not no_sync, excludes=excludes)
    if explain:
        click.echo(rs.explain_remote(rp), nl=False)
        return
    if dry_run:
        for text in rp.plan.warnings:
            click.echo(f"slurmkit: warning: {text}", err=True)
        click.echo(render.render(rp.plan), nl=False)
        return
    click.echo(rs.run_remote(rp, test_only=test_only))
