"""Run Slurm client commands with a timeout, a clean environment and one error type.

Every Slurm client command slurmkit runs on this machine goes through :func:`run` (the sandbox
starts Slurm's daemons itself); on a login node, :mod:`slurmkit.remote` runs them through ssh
behind :func:`env_unset_argv`, with its own timeouts. Light on imports: the hooks use it to drain
and resume nodes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

from slurmkit.errors import SlurmkitError

#: Environment variables that change what Slurm's clients print; overridden or removed so that
#: parsers always see the same format whatever the user's shell has set (here, and on a login
#: node through ssh: ``slurmkit.remote``).
FORMAT_VARS = (
    "SACCT_FORMAT", "SQUEUE_FORMAT", "SQUEUE_FORMAT2", "SINFO_FORMAT", "SLURM_TIME_FORMAT",
    "SQUEUE_SORT", "SLURM_CLUSTERS", "SACCT_FEDERATION", "SQUEUE_FEDERATION",
)


def env_unset_argv() -> list[str]:
    """``env -u VAR ...`` for each of :data:`FORMAT_VARS`: the prefix that runs a Slurm client
    with the same clean format where slurmkit cannot set its environment (a login node's shell,
    through ssh)."""
    return ["env", *[w for v in FORMAT_VARS for w in ("-u", v)]]


class SlurmError(SlurmkitError, RuntimeError):
    """A Slurm command failed, timed out or is not installed (CLI exit status 1).

    Attributes: ``argv`` (list[str]), ``returncode`` (int, or None when it did not run or timed
    out), ``stderr`` (str), ``timed_out`` (bool), ``missing`` (bool: the binary is not on PATH).
    """

    def __init__(self, message, argv=(), returncode=None, stderr="", timed_out=False, missing=False):
        super().__init__(message)
        self.argv = list(argv)
        self.returncode = returncode
        self.stderr = stderr
        self.timed_out = timed_out
        self.missing = missing


@dataclass(frozen=True)
class Result:
    """What a finished command printed: ``stdout`` and ``stderr`` as text, ``returncode``."""

    argv: list
    stdout: str
    stderr: str
    returncode: int


# Slurm gives hooks no PATH; look in the usual places too.
_EXTRA_PATH = ("/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin", "/bin", "/sbin")


def which(name: str) -> str | None:
    """Absolute path of a Slurm binary, searching PATH and then the standard system dirs."""
    found = shutil.which(name)
    if found:
        return found
    return shutil.which(name, path=os.pathsep.join(_EXTRA_PATH))


def slurm_env(extra: dict | None = None, slurm_conf: str | None = None) -> dict:
    """The environment for a Slurm client: ours, minus format overrides, plus ``extra``.

    ``slurm_conf`` (a path) sets SLURM_CONF; otherwise the inherited SLURM_CONF is kept.
    """
    env = {k: v for k, v in os.environ.items() if k not in FORMAT_VARS}
    if slurm_conf:
        env["SLURM_CONF"] = str(slurm_conf)
    if "PATH" not in env:
        env["PATH"] = os.pathsep.join(_EXTRA_PATH)
    if extra:
        env.update(extra)
    return env


#: The one hint for a shell without a usable Slurm configuration.
ENV_HINT = 'eval "$(slurmkit sandbox env)" for the sandbox, or set SLURM_CONF to the cluster\'s slurm.conf'

#: What Slurm's clients print when they find no slurm.conf and no configless controller (DNS SRV
#: record); their own words, from squeue/sbatch 22.05..26.05.
_NO_CONFIG_MARKS = ("DNS SRV lookup failed", "Could not establish a configuration source")


def check_slurm_conf(env: dict) -> None:
    """Raise :class:`SlurmError` at once when ``env`` (a client's environment) sets SLURM_CONF to a
    path that is not a readable file: Slurm's clients would retry it for 60 s
    (``s_p_parse_file: cannot stat file ... retrying in 1sec up to 60sec``) before failing.
    An unset SLURM_CONF is left to Slurm (its built-in path, or a configless controller)."""
    conf = env.get("SLURM_CONF")
    if conf is None:
        return
    if not conf:
        problem = "is empty"
    elif not os.path.isfile(conf):
        problem = "is not a file" if os.path.exists(conf) else "does not exist"
    elif not os.access(conf, os.R_OK):
        problem = "is not readable"
    else:
        return
    raise SlurmError(f"SLURM_CONF={conf} {problem}: run {ENV_HINT}")


def run(argv, *, timeout: float = 30.0, check: bool = True, input: str | None = None,
        env: dict | None = None, slurm_conf: str | None = None) -> Result:
    """Run one Slurm command and return its :class:`Result`.

    ``argv``: the command and its arguments (never a shell string). ``timeout`` in seconds.
    Raises :class:`SlurmError` when the binary is missing, the command runs past ``timeout``
    (the process is killed), or, with ``check``, it exits non-zero (the message carries stderr);
    before running, when SLURM_CONF names no readable file (:func:`check_slurm_conf`), and, even
    without ``check``, when the client found no Slurm configuration at all; these two messages
    name SLURM_CONF and ``slurmkit sandbox env``.
    """
    argv = [str(a) for a in argv]
    exe = which(argv[0])
    if exe is None:
        raise SlurmError(f"{argv[0]}: not found (is Slurm installed? try 'slurmkit sandbox up --install')",
                         argv, missing=True)
    full_env = slurm_env(env, slurm_conf)
    check_slurm_conf(full_env)
    try:
        proc = subprocess.run([exe, *argv[1:]], input=input, capture_output=True, text=True,
                              errors="surrogateescape", timeout=timeout, env=full_env,
                              stdin=None if input is not None else subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise SlurmError(f"{argv[0]} timed out after {timeout:g} s", argv, timed_out=True,
                         stderr=(exc.stderr or b"").decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")) from None  # stderr: shown in the message only
    result = Result(argv, proc.stdout, proc.stderr, proc.returncode)
    if proc.returncode != 0 and any(m in proc.stderr for m in _NO_CONFIG_MARKS):   # even unchecked: nothing works
        raise SlurmError(f"{argv[0]}: no Slurm configuration (SLURM_CONF unset, no slurm.conf, no DNS SRV record): "
                         f"run {ENV_HINT}", argv, returncode=proc.returncode, stderr=proc.stderr)
    if check and proc.returncode != 0:
        msg = proc.stderr.strip() or proc.stdout.strip() or "no output"
        raise SlurmError(f"{' '.join(argv[:3])} failed (exit {proc.returncode}): {msg}", argv,
                         returncode=proc.returncode, stderr=proc.stderr)
    return result
