"""Slurm on a login node through ssh: the same commands as the local backend, run there.

:class:`RemoteBackend` is a :class:`~slurmkit.submit.backend.CliBackend` (so a
:class:`~slurmkit.submit.backend.Backend`) whose commands run on
``remote`` (a :class:`~slurmkit.remote.ssh.Remote`), so ``Job.state()``, ``.wait()``,
``.cancel()`` and ``slurmkit status`` work unchanged. Only Slurm's client commands (and a POSIX
shell) are needed on the login node. Its :meth:`~RemoteBackend.submit` never leaves a job
behind that the caller does not know of: see the method.
"""

from __future__ import annotations

import shlex
import uuid
from dataclasses import dataclass

from slurmkit.remote.ssh import Remote, RemoteError
from slurmkit.slurm.commands import Result, env_unset_argv
from slurmkit.submit.backend import CliBackend

#: Where submitted scripts and their job-id markers are kept on the login node (under $HOME).
SPOOL = ".slurmkit/remote-submit"

#: How many submitted scripts (with their job-id markers) are kept there; older ones are removed.
SPOOL_KEEP = 50


def spool_dir(home: str) -> str:
    """The absolute spool directory on the login node: ``<home>/.slurmkit/remote-submit``
    (``home``: the login node's ``$HOME``, read by the connect step; never relative to the
    directory an ssh session starts in)."""
    return f"{home.rstrip('/')}/{SPOOL}"


def prune_script(spool: str, keep: int = SPOOL_KEEP) -> str:
    """POSIX shell that removes all but the newest ``keep`` submits' files
    (``<token>.sbatch``/``.jobid``/...) in ``spool``."""
    q = shlex.quote(spool)
    return (f"cd {q} 2>/dev/null && ls -1t -- *.sbatch 2>/dev/null | tail -n +{int(keep) + 1} | "
            "while read -r f; do rm -f -- \"${f%.sbatch}\".*; done; true")

_STEP = {"sbatch": "submit", "scancel": "cancel", "squeue": "status", "sacct": "status", "sinfo": "submit",
         "scontrol": "status"}


@dataclass(frozen=True)
class LoginFacts:
    """What the connect step learnt of the login node: ``home`` (``$HOME``), ``site``
    (``$SLURMKIT_SITE``, "" when unset), ``sbatch`` (its path, "" when not on PATH)."""

    home: str
    site: str
    sbatch: str


def as_remote(remote, ssh_config=None, timeout=None) -> Remote:
    """``remote`` as a :class:`Remote`: a Remote is returned as is, a host name is wrapped
    (``ssh_config``: its SSH config file; ``timeout``: seconds per step)."""
    if isinstance(remote, Remote):
        return remote
    kw = {} if timeout is None else {"timeout": float(timeout)}
    return Remote(str(remote), ssh_config, **kw)


def open_backend(remote, ssh_config=None, timeout=None) -> RemoteBackend:
    """A :class:`RemoteBackend` for ``remote`` (a host of the SSH config or a :class:`Remote`;
    ``ssh_config``, ``timeout``: as :func:`as_remote`). Nothing is connected yet. The
    ``remote`` provider's backend (``slurmkit.submit.backend.provider``)."""
    return RemoteBackend(as_remote(remote, ssh_config, timeout))


class RemoteBackend(CliBackend):
    """Slurm's command-line tools on ``remote``'s login node (``timeout``: ``remote.timeout``)."""

    name = "remote"

    def __init__(self, remote: Remote):
        super().__init__({}, remote.timeout)
        self.remote = remote
        self._facts: LoginFacts | None = None

    def run(self, argv, check: bool = True, input: str | None = None) -> Result:
        """One Slurm command on the login node (:meth:`Remote.run`, the step named after the
        command: ``sbatch`` -> submit, ``scancel`` -> cancel, else status). Raises
        :class:`RemoteError`."""
        argv = [str(a) for a in argv]
        return self.remote.run(argv, _STEP.get(argv[0], "status"), input=input, check=check)

    def probe(self) -> LoginFacts:
        """The connect step (once per backend): open the shared connection and read ``$HOME``,
        ``$SLURMKIT_SITE`` and where sbatch is. Raises :class:`RemoteError` (connect)."""
        if self._facts is None:
            script = ('printf "slurmkit-home=%s\\n" "$HOME"; printf "slurmkit-site=%s\\n" "${SLURMKIT_SITE:-}"; '
                      'printf "slurmkit-sbatch=%s\\n" "$(command -v sbatch 2>/dev/null)"')
            res = self.remote.shell(script, "connect", check=False)
            seen = dict(line.split("=", 1) for line in res.stdout.splitlines() if line.startswith("slurmkit-"))
            if "slurmkit-home" not in seen:
                raise RemoteError(self.remote.host, "connect", "the login shell did not run a command "
                                  f"(exit {res.returncode}): {(res.stderr.strip().splitlines() or ['no output'])[-1]}")
            if not seen["slurmkit-home"].startswith("/"):
                raise RemoteError(self.remote.host, "connect", "the login shell's $HOME is not an absolute path "
                                  f"({seen['slurmkit-home']!r})")
            self._facts = LoginFacts(seen["slurmkit-home"], seen.get("slurmkit-site", ""), seen.get("slurmkit-sbatch", ""))
        return self._facts

    def require_sbatch(self) -> None:
        """Raise :class:`RemoteError` (submit) when the login node has no sbatch on its PATH."""
        if not self.probe().sbatch:
            raise RemoteError(self.remote.host, "submit", "sbatch not found on the login node's PATH "
                              "(Slurm's client commands must be installed there); nothing was submitted")

    def submit(self, script: str, test_only: bool = False) -> str:
        """Submit ``script`` (text) on the login node; return the job id (``test_only``:
        Slurm's start estimate).

        The script is written to ``$HOME/.slurmkit/remote-submit/<token>.sbatch`` there
        (mode 600; sbatch itself runs with the login shell's umask, which Slurm gives the
        job; the newest :data:`SPOOL_KEEP` submits are kept) and
        ``sbatch --parsable`` runs in the background of a remote shell that records sbatch's pid
        and then the job id in ``<token>.jobid``. When the step times out or the connection
        drops, a new connection stops an sbatch still running and cancels the job it may have
        queued; the :class:`RemoteError` says so."""
        self.require_sbatch()
        if test_only:
            return super().submit(script, test_only=True)
        token = uuid.uuid4().hex[:16]
        spool = spool_dir(self.probe().home)
        base = f"{spool}/{token}"
        q = shlex.quote
        env = shlex.join(env_unset_argv())
        # only the script is private (umask 077 in a subshell): sbatch, and so the job, keep the
        # login shell's umask (Slurm propagates the submitting umask to the job)
        wrapper = (f"(umask 077; mkdir -p {q(spool)} && cat > {q(base + '.sbatch')}) || exit 90; "
                   f"{env} sbatch --parsable {q(base + '.sbatch')} > {q(base + '.out')} 2> {q(base + '.err')} & "
                   f"echo $! > {q(base + '.pid')}; wait $!; rc=$?; "
                   f"echo \"$rc $(cat {q(base + '.out')})\" > {q(base + '.jobid')}; "
                   f"cat {q(base + '.out')}; cat {q(base + '.err')} >&2; exit $rc")
        try:
            res = self.remote.shell(wrapper, "submit", input=script, check=False)
        except RemoteError as exc:
            if not (exc.timed_out or exc.connection):
                raise
            raise RemoteError(self.remote.host, "submit", f"{exc.reason}; {self._recover(base)}",
                              timed_out=exc.timed_out, connection=True) from None
        if res.returncode == 90:
            raise RemoteError(self.remote.host, "submit", f"could not write the script under {spool}"
                              + ": " + (res.stderr.strip().splitlines() or ["?"])[-1] + "; nothing was submitted")
        if res.returncode != 0:
            msg = (res.stderr.strip() or res.stdout.strip() or "no output").splitlines()[-1]
            raise RemoteError(self.remote.host, "submit", f"sbatch refused the job (exit {res.returncode}): {msg}",
                              returncode=res.returncode, stderr=res.stderr)
        job_id = res.stdout.strip().split(";")[0]
        if not job_id.isdigit():
            raise RemoteError(self.remote.host, "submit", f"sbatch --parsable printed {res.stdout.strip()!r}, "
                              "not a job id")
        self.remote.shell(f"rm -f {q(base)}.out {q(base)}.err {q(base)}.pid; {prune_script(spool)}", "submit",
                          check=False)
        return job_id

    def _recover(self, base: str) -> str:
        """After a lost or timed-out submit: stop sbatch if it still runs, cancel what it
        queued. Returns the sentence the error ends with."""
        fresh = Remote(self.remote.host, self.remote.ssh_config, timeout=self.remote.timeout,
                       connect_timeout=self.remote.connect_timeout, control_persist=0,
                       control_dir=self.remote.control_dir)
        script = (f"b={shlex.quote(base)}; if [ ! -s \"$b.jobid\" ] && [ -s \"$b.pid\" ]; then "
                  f"kill $(cat \"$b.pid\") 2>/dev/null; "
                  f"i=0; while [ ! -s \"$b.jobid\" ] && [ $i -lt 20 ]; do sleep 0.5; i=$((i+1)); done; fi; "
                  f"cat \"$b.jobid\" 2>/dev/null")
        try:
            fresh.close()
            res = fresh.shell(script, "submit", check=False)
        except RemoteError:
            return (f"could not reconnect to check: a job may be queued there (see {base}.jobid on "
                    f"{self.remote.host})")
        words = res.stdout.split()
        job_id = words[1].split(";")[0] if len(words) > 1 else ""
        if job_id.isdigit():
            try:
                fresh.run(["scancel", job_id], "cancel")
            except RemoteError as exc:
                return f"job {job_id} was queued and could not be cancelled: {exc.reason}"
            return f"job {job_id}, which sbatch had queued, was cancelled"
        return "no job was queued"
