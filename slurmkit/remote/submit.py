"""Submit from a laptop: connect, sync, render here with the cluster's profile, sbatch there.

:func:`prepare_remote` runs the connect step (one ssh connection, shared by every later step)
and plans the job: the site profile from ``--site`` or the login node's ``SLURMKIT_SITE``, the
job's working directory = the remote directory (``--remote-dir``, default
``~/slurmkit-remote/<project name>``) unless ``chdir`` is given. :func:`submit_remote` then
syncs the working directory (unless ``sync=False``) and submits the script there. Order:
connect -> (sbatch present?) -> sync -> submit, so a failure never leaves a job queued.
"""

from __future__ import annotations

import dataclasses
import os
import posixpath

from slurmkit.remote import sync as _sync
from slurmkit.remote.backend import RemoteBackend, as_remote
from slurmkit.remote.site import load_remote_site


@dataclasses.dataclass(frozen=True)
class RemotePlan:
    """A planned remote submit: ``backend`` (:class:`RemoteBackend`), ``plan`` (the
    :class:`~slurmkit.submit.render.Plan`), ``site`` (:class:`~slurmkit.remote.site.RemoteSite`),
    ``remote_dir`` (absolute, on the login node), ``sync_dir`` (local, absolute),
    ``sync`` (bool), ``excludes`` (patterns)."""

    backend: RemoteBackend
    plan: object
    site: object
    remote_dir: str
    sync_dir: str
    sync: bool
    excludes: tuple[str, ...] = ()
    #: where the job's working directory came from (for ``--explain``)
    chdir_source: str = "--remote-dir (the synced directory)"


def prepare_remote(req, remote, *, ssh_config=None, sync_dir=None, remote_dir=None, sync=True,
                   excludes=(), timeout=None) -> RemotePlan:
    """Connect to ``remote`` (host name or :class:`~slurmkit.remote.ssh.Remote`) and plan
    ``req`` (a :class:`~slurmkit.submit.render.SubmitRequest`) for it. ``sync_dir``: the local
    directory to send (default: the current directory). Raises ``RemoteError`` (connect),
    ``UsageError`` (no site profile) or the planner's input errors."""
    from slurmkit.submit import api

    backend = RemoteBackend(as_remote(remote, ssh_config, timeout))
    facts = backend.probe()
    sync_dir = os.path.abspath(sync_dir or os.getcwd())
    rdir = _sync.resolve_remote_dir(remote_dir, sync_dir, facts.home)
    site = load_remote_site(backend, req.site)
    chdir, chdir_source = req.chdir, "CLI --chdir"
    if chdir is None:
        chdir = rdir
        chdir_source = "--remote-dir" if remote_dir else "default remote dir ~/slurmkit-remote/<project name>"
    elif not chdir.startswith("/"):
        chdir = posixpath.normpath(posixpath.join(rdir, chdir))
    req = dataclasses.replace(req, chdir=chdir, site=site.spec)
    plan = api.prepare(req, backend, profile=site.profile)
    return RemotePlan(backend, plan, site, rdir, sync_dir, bool(sync), tuple(excludes), chdir_source)


def run_remote(rp: RemotePlan, test_only: bool = False) -> str:
    """Sync (or, without sync, check that the remote directory exists) and submit ``rp``;
    the job id (``test_only``: Slurm's start estimate). sbatch's presence is checked first,
    so nothing is synced to a host that cannot submit."""
    from slurmkit.submit import render

    rp.backend.require_sbatch()
    if rp.sync:
        _sync.sync(rp.backend.remote, rp.sync_dir, rp.remote_dir, rp.excludes)
    else:
        _sync.check_exists(rp.backend.remote, rp.remote_dir)
    return rp.backend.submit(render.render(rp.plan), test_only=test_only)


def submit_remote(template: str, command=(), *, remote, ssh_config=None, sync_dir=None, remote_dir=None,
                  sync=True, excludes=(), timeout=None, **kw):
    """``slurmkit.submit(..., remote=HOST)``: render ``template`` with the cluster's profile,
    sync ``sync_dir`` to ``remote_dir`` there, submit; a :class:`~slurmkit.submit.api.Job`
    whose ``state()``/``wait()``/``cancel()`` go through the same SSH connection (with
    ``test_only=True``: Slurm's start estimate, str). Keywords as
    :func:`slurmkit.submit.api.submit`; ``timeout``: seconds per step (default 60)."""
    from slurmkit.submit import api

    req = api._request(template, command, kw)
    rp = prepare_remote(req, remote, ssh_config=ssh_config, sync_dir=sync_dir, remote_dir=remote_dir,
                        sync=sync, excludes=excludes, timeout=timeout)
    result = run_remote(rp, test_only=req.test_only)
    return result if req.test_only else api.Job(result, rp.backend)


def explain_remote(rp: RemotePlan) -> str:
    """The ``--explain`` table of a remote submit: a header saying which host, profile and
    directories, then the plan's table with every profile-sourced value marked as coming from
    the remote cluster's profile."""
    from slurmkit.submit import render

    host = rp.backend.remote.host
    src = getattr(rp.site.profile, "source", "") or rp.site.spec
    head = [f"# remote: {host}" + (f" (SSH config {rp.backend.remote.ssh_config})" if rp.backend.remote.ssh_config else ""),
            f"# site profile: {src}  <- {rp.site.origin}",
            f"# working directory: {rp.remote_dir} on {host}  <- "
            + (f"synced from {rp.sync_dir}" if rp.sync else "--no-sync (not synced)")]
    body = []
    for line in render.explain(rp.plan).splitlines():
        if "  <- profile " in line:
            line = line.replace("  <- profile ", f"  <- remote profile ({host}) ", 1)
        elif line.startswith("#SBATCH --chdir=") and "<- CLI --chdir" in line:
            line = line.replace("<- CLI --chdir", f"<- {rp.chdir_source}")
        body.append(line)
    return "\n".join(head + body) + "\n"
