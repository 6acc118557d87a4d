"""Submit from a laptop: connect, sync, render here with the cluster's profile, sbatch there.

:func:`prepare_remote` runs the connect step (one ssh connection, shared by every later step)
and plans the job: the site profile from ``--site`` or the login node's ``SLURMKIT_SITE``, the
job's working directory = this submit's run folder ``<remote dir>/slurmkit-runs/<run id>/``
(plus the subfolder the submit was made from; :mod:`slurmkit.remote.sync`), a snapshot of the
synced tree, unless ``chdir`` is absolute. :func:`run_remote` then syncs the project into the
remote directory and the run folder (unless ``sync=False``: the run folder is copied from the
tree already there) and submits the script. Order: connect -> (sbatch present?) -> sync ->
submit, so a failure never leaves a job queued.
"""

from __future__ import annotations

import dataclasses
import posixpath
import shlex

from slurmkit.remote import sync as _sync
from slurmkit.remote.backend import RemoteBackend, open_backend
from slurmkit.remote.site import load_remote_site
from slurmkit.submit import api, render
from slurmkit.submit.outputs import output_dirs


@dataclasses.dataclass(frozen=True)
class RemotePlan:
    """A planned remote submit: ``backend`` (:class:`RemoteBackend`), ``plan`` (the
    :class:`~slurmkit.submit.render.Plan`), ``site`` (:class:`~slurmkit.remote.site.RemoteSite`),
    ``remote_dir`` (absolute, on the login node: the synced tree), ``source``
    (:class:`~slurmkit.remote.sync.SyncSource`: the local root and the job's subfolder),
    ``run_id`` and ``run_dir`` (this submit's run folder there: the snapshot the job runs
    in), ``sync`` (bool), ``excludes`` (patterns)."""

    backend: RemoteBackend
    plan: object
    site: object
    remote_dir: str
    source: _sync.SyncSource
    run_id: str
    run_dir: str
    sync: bool
    excludes: tuple[str, ...] = ()
    #: where the job's working directory came from (for ``--explain``)
    chdir_source: str = "the run folder"

    @property
    def sync_dir(self) -> str:
        """The local directory synced (the project root)."""
        return self.source.root


def prepare_remote(req, remote, *, ssh_config=None, sync_dir=None, remote_dir=None, sync=True,
                   excludes=(), timeout=None, cwd=None) -> RemotePlan:
    """Connect to ``remote`` (host name or :class:`~slurmkit.remote.ssh.Remote`) and plan
    ``req`` (a :class:`~slurmkit.submit.render.SubmitRequest`) for it. ``sync_dir``: the local
    project root to send (default: the git work tree of ``cwd``, else ``cwd``; ``cwd``
    defaults to the current directory). The job's working directory is this submit's run
    folder ``<remote dir>/slurmkit-runs/<run id>/`` plus the subfolder of the root that
    ``cwd`` is in; a relative ``req.chdir`` is taken from there. Raises ``RemoteError``
    (connect), ``UsageError`` (no site profile) or the planner's input errors."""
    backend = open_backend(remote, ssh_config, timeout)
    facts = backend.probe()
    source = _sync.find_source(sync_dir, cwd)
    rdir = _sync.resolve_remote_dir(remote_dir, source.name, facts.home)
    run_id = _sync.new_run_id()
    run = _sync.run_dir(rdir, run_id)
    workdir = posixpath.join(run, source.subdir) if source.subdir else run
    site = load_remote_site(backend, req.site)
    chdir, chdir_source = req.chdir, "CLI --chdir"
    where = f"run folder {_sync.RUNS}/{run_id}" + (f", subfolder {source.subdir}" if source.subdir else "")
    if chdir is None:
        chdir, chdir_source = workdir, f"{where} (snapshot of the synced tree)"
    elif not chdir.startswith("/"):
        chdir = posixpath.normpath(posixpath.join(workdir, chdir))
        chdir_source = f"CLI --chdir, in the {where}"
    req = dataclasses.replace(req, chdir=chdir, site=site.spec)
    plan = api.prepare(req, backend, profile=site.profile)
    return RemotePlan(backend, plan, site, rdir, source, run_id, run, bool(sync), tuple(excludes), chdir_source)


def run_remote(rp: RemotePlan, test_only: bool = False) -> str:
    """Sync (or, without sync, check that the remote directory exists), make the run folder,
    clean old runs' code, and submit ``rp``; the job id (``test_only``: Slurm's start
    estimate). sbatch's presence is checked first, so nothing is synced to a host that cannot
    submit."""
    remote = rp.backend.remote
    rp.backend.require_sbatch()
    if rp.sync:
        _sync.sync(remote, rp.source, rp.remote_dir, rp.excludes, run_id=rp.run_id)
    else:
        _sync.check_exists(remote, rp.remote_dir)   # nothing is sent: any project may reuse it
    _sync.finish_run(remote, rp.remote_dir, rp.run_id, copy_tree=not rp.sync)
    opts = {o.name: o.value for o in rp.plan.options}
    dirs = output_dirs({"--output": opts.get("output"), "--error": opts.get("error")}, opts["chdir"])
    if dirs and not test_only:   # Slurm creates the files, never their directories
        remote.shell("mkdir -p -- " + " ".join(shlex.quote(d) for d in dirs), "submit")
    return rp.backend.submit(render.render(rp.plan), test_only=test_only)


def submit_remote(template: str, command=(), *, remote, ssh_config=None, sync_dir=None, remote_dir=None,
                  sync=True, excludes=(), timeout=None, **kw):
    """``slurmkit.submit(..., remote=HOST)``: render ``template`` with the cluster's profile,
    sync ``sync_dir`` to ``remote_dir`` there, submit; a :class:`~slurmkit.submit.api.Job`
    whose ``state()``/``wait()``/``cancel()`` go through the same SSH connection (with
    ``test_only=True``: Slurm's start estimate, str). Keywords as
    :func:`slurmkit.submit.api.submit`; ``timeout``: seconds per step (default 60)."""
    req = api.build_request(template, command, kw)
    rp = prepare_remote(req, remote, ssh_config=ssh_config, sync_dir=sync_dir, remote_dir=remote_dir,
                        sync=sync, excludes=excludes, timeout=timeout)
    result = run_remote(rp, test_only=req.test_only)
    return result if req.test_only else api.Job(result, rp.backend, remote=rp.backend.remote)


def explain_remote(rp: RemotePlan) -> str:
    """The ``--explain`` table of a remote submit: a header saying which host, profile and
    directories, then the plan's table with every profile-sourced value marked as coming from
    the remote cluster's profile (``remote profile (HOST)``, the login node's ``SLURMKIT_SITE``)
    or from the ``--site`` profile read on this machine (``--site FILE profile``)."""
    host = rp.backend.remote.host
    src = getattr(rp.site.profile, "source", "") or rp.site.spec
    head = [f"# remote: {host}" + (f" (SSH config {rp.backend.remote.ssh_config})" if rp.backend.remote.ssh_config else ""),
            f"# site profile: {src}  <- {rp.site.origin}",
            f"# remote directory: {rp.remote_dir} on {host}  <- "
            + (f"synced from {rp.sync_dir}" if rp.sync else "--no-sync (not synced)"),
            f"# run folder: {rp.run_dir}  <- snapshot of the synced tree for this submit (outputs land here)"]
    # the login node's SLURMKIT_SITE names the remote cluster's profile; --site is read here
    label = f"remote profile ({host}) " if rp.site.origin != "--site" else f"--site {rp.site.spec} profile "
    body = []
    for line in render.explain(rp.plan).splitlines():
        if "  <- profile " in line:
            line = line.replace("  <- profile ", f"  <- {label}", 1)
        elif line.startswith("#SBATCH --chdir=") and "<- CLI --chdir" in line:
            line = line.replace("<- CLI --chdir", f"<- {rp.chdir_source}")
        body.append(line)
    return "\n".join(head + body) + "\n"
