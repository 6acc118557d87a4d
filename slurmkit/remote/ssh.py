"""The one place that runs ``ssh`` and ``rsync`` for remote submission.

A :class:`Remote` names a host of the user's SSH configuration (``~/.ssh/config``, or the file
given as ``ssh_config``), so ``ProxyJump``, ports, users and keys come from the user's own setup.
Every command shares one connection: ``ControlMaster=auto`` with a private ``ControlPath``
(``<control dir>/<16 hex of a hash of the config file and alias>``, kept within a Unix
socket's path limit whatever ``$TMPDIR`` is: :func:`control_dir`) that persists
``control_persist`` seconds, so a submit (probe, rsync, sbatch) costs one authentication.
``BatchMode=yes``: never a prompt. A failed connect through a jump host is diagnosed with one
more attempt without the master, whose stderr names the jump host's own failure.

Every step has a timeout (seconds); on expiry, on Ctrl-C or any other exception the whole
process group (ssh and its ProxyJump child, rsync and its ssh) is killed. Failures raise
:class:`RemoteError` naming the host and the step (``connect`` whenever ssh itself could not
connect, whatever the command was for; ``sync``, ``submit``, ``status``, ``cancel``, ``logs``
for the command's own failures) with one line saying what went wrong (unknown host, key
refused, host not answering, ...).
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass

from slurmkit.errors import SlurmkitError
from slurmkit.slurm.commands import Result, SlurmError, env_unset_argv

#: Steps a remote failure can be about, in the order a submit runs them.
STEPS = ("connect", "sync", "submit", "status", "cancel", "logs")



class RemoteError(SlurmError, SlurmkitError):
    """A remote step failed. ``str()``: ``<host>: <step>: <what>`` (one line).

    Attributes: ``host``, ``step`` (one of :data:`STEPS`), ``reason`` (the one-line cause),
    ``returncode`` (ssh's or the remote command's exit status, None on timeout),
    ``timed_out`` (bool), ``connection`` (True when ssh itself failed: the command may not have
    run, or its end was not seen). CLI exit status 1.
    """

    exit_code = 1

    def __init__(self, host: str, step: str, reason: str, *, argv=(), returncode=None, stderr="",
                 timed_out=False, connection=False):
        self.host, self.step, self.reason = host, step, " ".join(str(reason).split())
        self.connection = connection
        SlurmError.__init__(self, f"{host}: {step}: {self.reason}", argv, returncode=returncode,
                            stderr=stderr, timed_out=timed_out)


# ssh's own messages (exit 255) -> what they mean, for the connect step's one line.
_SSH_FAILURES = (
    (re.compile(r"Could not resolve hostname ([^:\s]+)"),
     "unknown host {0} (not a Host of the SSH config, and its name does not resolve)"),
    (re.compile(r"Permission denied \(([^)]*)\)"), "the key was refused ({0}): check IdentityFile and authorized_keys"),
    (re.compile(r"Host key verification failed"), "host key verification failed (known_hosts)"),
    (re.compile(r"connect to host (\S+) port (\d+): Connection refused"), "{0} port {1} refused the connection"),
    (re.compile(r"connect to host (\S+) port (\d+): (Connection timed out|No route to host|Network is unreachable)"),
     "{0} port {1} did not answer ({2})"),
    (re.compile(r"(?:Connection timed out during banner exchange|banner exchange: .*timed out)"),
     "no SSH answer (timed out during banner exchange)"),
    (re.compile(r"(?:kex_exchange_identification|Connection closed by UNKNOWN)"),
     "the jump host could not reach it (connection closed during the SSH handshake)"),
    (re.compile(r"Can't open user config file ([^:]+)"), "cannot read SSH config {0}"),
    (re.compile(r"Bad configuration option: (\S+)"), "bad SSH config option {0}"),
)


#: What ssh prints when the ProxyJump process ended before the login node's handshake: the
#: jump's own error, if any, comes in the lines before it.
_JUMP_CLOSED = re.compile(r"kex_exchange_identification: Connection closed by remote host|Connection closed by UNKNOWN")


def explain_jump_failure(stderr: str, jump: str) -> str | None:
    """One line naming the jump host ``jump`` and the cause, from the stderr of an ssh run
    without a control master (the jump process's errors come first); None when the stderr
    does not show a jump-host failure."""
    m = _JUMP_CLOSED.search(stderr)
    before = stderr[:m.start()] if m else ""
    j = f"the jump host {jump} (ProxyJump)"
    if re.search(r"banner exchange|UNKNOWN port 65535", stderr) and "timed out" in stderr:
        return f"{j} did not answer (timed out during the SSH banner exchange)"
    if not m:
        return None
    if r := re.search(r"Could not resolve hostname ([^:\s]+)", before):
        name = r.group(1)
        if name == jump.split("@")[-1].split(":")[0]:
            return (f"{j} is not a Host of the SSH config and its name does not resolve "
                    "(a typo in ProxyJump?)")
        return f"{j}: its HostName {name} does not resolve"
    if r := re.search(r"connect to host (\S+) port (\d+): Connection refused", before):
        return f"{j} refused the connection ({r.group(1)} port {r.group(2)}: is its sshd running?)"
    if r := re.search(r"connect to host (\S+) port (\d+): (Connection timed out|No route to host|Network is unreachable)",
                      before):
        return f"{j} did not answer ({r.group(1)} port {r.group(2)}: {r.group(3)})"
    if r := re.search(r"(\S+@\S+): Permission denied \(([^)]*)\)", before):
        return f"{j} refused the key ({r.group(2)}) for {r.group(1)}: check its IdentityFile and authorized_keys"
    if re.search(r"No \S+ host key is known for (\S+)", before) or "Host key verification failed" in before:
        r = re.search(r"No \S+ host key is known for (\S+)", before)
        what = f"its host key ({r.group(1)}) is not in known_hosts" if r else "its host key does not match known_hosts"
        return f"{j}: host key verification failed: {what} (StrictHostKeyChecking)"
    if before.strip():
        return f"{j} failed: {before.strip().splitlines()[-1]}"
    return f"{j} could not reach the login node (connection closed during the SSH handshake)"


def explain_ssh_failure(stderr: str, jump: str | None = None) -> str:
    """One line saying why ssh (exit 255) failed, from its stderr; its last line when unknown.
    ``jump``: the host's ProxyJump (``ssh -G``), named when the failure is the jump's."""
    if jump:
        reason = explain_jump_failure(stderr, jump)
        if reason:
            return reason
    for pattern, text in _SSH_FAILURES:
        m = pattern.search(stderr)
        if m:
            return text.format(*m.groups())
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip() and not ln.startswith("Warning: Permanently")]
    return lines[-1] if lines else "ssh failed without a message"


#: The longest ControlPath a Unix socket takes everywhere (sun_path: 104 bytes on macOS and
#: the BSDs, 108 on Linux; one for the NUL) ...
SOCKET_PATH_MAX = 103
#: ... less what ssh appends while it binds the master's socket ("." and 16 random characters).
_SSH_TMP_SUFFIX = 17
#: Characters of the socket's name (hex of a hash of the SSH config and the host alias).
_KEY_LEN = 16


def _private_dir(path: str) -> str | None:
    """``path`` made (mode 700) and checked to be our own private directory; None when it is
    not (another user's, a symlink, group/world-accessible) or cannot be made."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.lstat(path)
    except OSError:
        return None
    import stat

    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None
    return path


def control_dir(host: str = "?") -> str:
    """Where the ControlMaster sockets live: ``$TMPDIR/slurmkit-ssh-<uid>`` when a socket path
    there fits :data:`SOCKET_PATH_MAX` (macOS's ``/var/folders/.../T/`` may not), else
    ``/tmp/slurmkit-ssh-<uid>``; mode 700, ours. Raises :class:`RemoteError` (connect) when
    neither fits or is usable."""
    name = f"slurmkit-ssh-{os.getuid()}"
    tried = []
    for parent in dict.fromkeys((tempfile.gettempdir(), "/tmp")):
        path = os.path.join(parent, name)
        tried.append(path)
        if len(path) + 1 + _KEY_LEN + _SSH_TMP_SUFFIX <= SOCKET_PATH_MAX and _private_dir(path):
            return path
    raise RemoteError(host, "connect", f"no usable directory for the SSH control socket ({' or '.join(tried)}: "
                      f"too long for a Unix socket path of {SOCKET_PATH_MAX} characters, or not a private "
                      "directory of this user)")


def control_path(directory: str, ssh_config: str | None, host: str) -> str:
    """The ControlPath for ``host`` of ``ssh_config``: ``<directory>/<16 hex>`` (a hash of
    both: two aliases with different jump hosts or keys get different sockets). Raises
    :class:`RemoteError` (connect) when the path would be too long for a Unix socket."""
    key = hashlib.sha256(f"{ssh_config}\0{host}".encode()).hexdigest()[:_KEY_LEN]
    path = os.path.join(directory, key)
    if len(path) + _SSH_TMP_SUFFIX > SOCKET_PATH_MAX:
        raise RemoteError(host, "connect", f"the SSH control socket path {path} is too long "
                          f"({len(path)} + {_SSH_TMP_SUFFIX} > {SOCKET_PATH_MAX} characters): use a shorter "
                          "control_dir")
    return path


@dataclass
class Remote:
    """A cluster login node reached with ssh.

    ``host``: a Host of the SSH config (or any name ssh accepts); ``ssh_config``: the config
    file (None: ssh's default, ``~/.ssh/config``); ``timeout``: seconds each step may take
    (the connection is opened within ``connect_timeout`` seconds); ``control_persist``:
    seconds the shared connection stays open after the last command; ``control_dir``: where
    the ControlMaster socket lives (default :func:`control_dir`: ``$TMPDIR/slurmkit-ssh-<uid>``,
    or ``/tmp/slurmkit-ssh-<uid>`` when that is too long for a socket path; mode 700).
    """

    host: str
    ssh_config: str | None = None
    timeout: float = 60.0
    connect_timeout: float = 15.0
    control_persist: int = 60
    control_dir: str | None = None

    def __post_init__(self):
        if not self.host or self.host.startswith("-") or any(c.isspace() for c in self.host):
            raise RemoteError(str(self.host), "connect", "not a host name")
        if self.ssh_config is not None:
            self.ssh_config = os.path.abspath(os.path.expanduser(str(self.ssh_config)))
            if not os.path.isfile(self.ssh_config):
                raise RemoteError(self.host, "connect", f"SSH config {self.ssh_config} does not exist")

    # -- argv -------------------------------------------------------------------------------
    def ssh_argv(self, master: bool = True) -> list[str]:
        """``ssh`` and its options (without the host): ``-F``, BatchMode, ConnectTimeout,
        the shared ControlMaster connection (none with ``master=False``) and keep-alives that
        bound a dead link."""
        exe = shutil.which("ssh")
        if exe is None:
            raise RemoteError(self.host, "connect", "ssh is not installed here (Debian: openssh-client)")
        argv = [exe]
        if self.ssh_config:
            argv += ["-F", self.ssh_config]
        if master:
            control = control_path(self.control_dir or control_dir(self.host), self.ssh_config, self.host)
            shared = ("ControlMaster=auto", f"ControlPath={control}", f"ControlPersist={int(self.control_persist)}")
        else:
            shared = ("ControlMaster=no", "ControlPath=none")
        for opt in ("BatchMode=yes", f"ConnectTimeout={max(1, int(self.connect_timeout))}", *shared,
                    "ServerAliveInterval=15", "ServerAliveCountMax=3", "LogLevel=ERROR"):
            argv += ["-o", opt]
        return argv

    def jump(self) -> str | None:
        """The host's ``ProxyJump`` as ssh resolves it from the config (``ssh -G``); None when none."""
        try:
            argv = [shutil.which("ssh") or "ssh", *(["-F", self.ssh_config] if self.ssh_config else []), "-G", self.host]
            out = subprocess.run(argv, capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL).stdout
        except (OSError, subprocess.TimeoutExpired):
            return None
        for line in out.splitlines():
            key, _, value = line.partition(" ")
            if key == "proxyjump" and value.strip() not in ("", "none"):
                return value.strip()
        return None

    def rsh(self) -> str:
        """The ``-e`` value for rsync: the same ssh, options and shared connection."""
        return shlex.join(self.ssh_argv())

    # -- running ----------------------------------------------------------------------------
    def _exec(self, argv, step, input=None, timeout=None) -> subprocess.CompletedProcess:
        timeout = self.timeout if timeout is None else timeout
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        try:
            data = input.encode() if isinstance(input, str) else input
            out, err = proc.communicate(data, timeout=timeout)
        except subprocess.TimeoutExpired:
            # a shared master may hold copies of our pipes: do not wait for their end
            _kill_group(proc)
            proc.wait()
            proc.stdout.close()
            proc.stderr.close()
            raise RemoteError(self.host, step, f"timed out after {timeout:g} s (no answer from the host, "
                              "or the command did not finish)", argv=argv, timed_out=True, connection=True) from None
        except BaseException:
            # Ctrl-C (KeyboardInterrupt) or any other exception: the step's processes run in
            # their own session, so the terminal's SIGINT never reached them; stop them all
            _kill_group(proc)
            proc.wait()
            raise
        # stdout as the local runner reads Slurm's output (slurmkit.slurm.commands.run): bytes
        # that are not UTF-8 (a path, a job name, a job's log) survive a round trip
        # (``.encode(errors="surrogateescape")``); stderr is only ever shown in messages
        return subprocess.CompletedProcess(argv, proc.returncode, out.decode(errors="surrogateescape"),
                                           err.decode(errors="replace"))

    def shell(self, script: str, step: str, *, input: str | None = None, check: bool = True,
              timeout: float | None = None) -> Result:
        """Run ``script`` (a POSIX shell command line) on the host; its :class:`Result`.

        Raises :class:`RemoteError` for ``step`` when ssh fails (exit 255: connection, key,
        host), on timeout, or with ``check`` when the command exits non-zero (its stderr).
        """
        argv = [*self.ssh_argv(), self.host, "--", script]
        proc = self._exec(argv, step, input=input, timeout=timeout)
        if proc.returncode == 255:
            raise RemoteError(self.host, "connect", _connect_reason(proc.stderr, self), argv=argv, returncode=255,
                              stderr=proc.stderr, connection=True)
        result = Result(argv, proc.stdout, proc.stderr, proc.returncode)
        if check and proc.returncode != 0:
            msg = proc.stderr.strip().splitlines()[-1:] or proc.stdout.strip().splitlines()[-1:] or ["no output"]
            raise RemoteError(self.host, step, f"exit {proc.returncode}: {msg[0]}", argv=argv,
                              returncode=proc.returncode, stderr=proc.stderr)
        return result

    def run(self, argv, step: str, *, input: str | None = None, check: bool = True,
            timeout: float | None = None) -> Result:
        """Run one command (``argv``, never a shell string) on the host with Slurm's format
        variables unset (``env -u ...``); as :meth:`shell`. Exit 127 (not found) is reported as
        ``<command> not found on the host's PATH``."""
        words = [*env_unset_argv(), *[str(a) for a in argv]]
        result = self.shell(shlex.join(words), step, input=input, check=False, timeout=timeout)
        if result.returncode == 127:
            raise RemoteError(self.host, step, f"{argv[0]} not found on the host's PATH "
                              "(Slurm's client commands must be installed on the login node)",
                              argv=result.argv, returncode=127, stderr=result.stderr)
        if check and result.returncode != 0:
            msg = (result.stderr.strip() or result.stdout.strip() or "no output").splitlines()[-1]
            raise RemoteError(self.host, step, f"{' '.join(map(str, argv[:2]))} failed (exit {result.returncode}): {msg}",
                              argv=result.argv, returncode=result.returncode, stderr=result.stderr)
        return result

    def stream(self, script: str, step: str, out) -> int:
        """Run ``script`` on the host and copy its stdout to the binary file ``out`` as it
        comes (for ``logs --follow``); its exit status. No overall timeout: the keep-alives
        (45 s) end a dead connection. Raises :class:`RemoteError` when ssh fails."""
        argv = [*self.ssh_argv(), self.host, "--", script]
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        try:
            for chunk in iter(lambda: proc.stdout.read1(65536), b""):
                out.write(chunk)
                out.flush()
            err = proc.stderr.read().decode(errors="replace")  # ssh's stderr: shown in the message only
            rc = proc.wait()
        except BaseException:
            _kill_group(proc)
            proc.wait()
            raise
        if rc == 255:
            raise RemoteError(self.host, "connect", _connect_reason(err, self), argv=argv, returncode=255, stderr=err,
                              connection=True)
        return rc

    def rsync(self, src: str, dest: str, options=(), step: str = "sync", timeout: float | None = None,
              input: bytes | None = None) -> Result:
        """``rsync -a [options] src HOST:dest`` over the shared ssh connection (``input``: its
        stdin, e.g. a ``--files-from=-`` list).

        Raises :class:`RemoteError` (``step``) when rsync is missing here or there, the disk
        there is full, the destination cannot be written, or the connection fails."""
        exe = shutil.which("rsync")
        if exe is None:
            raise RemoteError(self.host, step, "rsync is not installed here (Debian: rsync)")
        argv = [exe, "-a", "-e", self.rsh(), *options, src, f"{self.host}:{dest}"]
        proc = self._exec(argv, step, input=input, timeout=timeout)
        if proc.returncode == 255:
            raise RemoteError(self.host, "connect", _connect_reason(proc.stderr, self), argv=argv, returncode=255,
                              stderr=proc.stderr, connection=True)
        if proc.returncode != 0:
            raise RemoteError(self.host, step, _rsync_reason(proc, dest), argv=argv, returncode=proc.returncode,
                              stderr=proc.stderr, connection=proc.returncode == 255)
        return Result(argv, proc.stdout, proc.stderr, proc.returncode)

    def diagnose(self) -> str:
        """The stderr of one ``ssh HOST true`` without the control master (``ControlMaster=no
        -o ControlPath=none``, otherwise the same options, BatchMode), for a failed connect
        whose master lost the jump host's message; "" when it could not run."""
        argv = [*self.ssh_argv(master=False), self.host, "true"]
        try:
            proc = self._exec(argv, "connect", timeout=max(5.0, self.connect_timeout * 2 + 5))
        except RemoteError:
            return ""
        return proc.stderr if proc.returncode == 255 else ""

    def close(self) -> None:
        """Close the shared connection (``ssh -O exit``); nothing when none is open."""
        try:
            argv = [*self.ssh_argv(), "-O", "exit", self.host]
            subprocess.run(argv, capture_output=True, timeout=10, stdin=subprocess.DEVNULL)
        except (RemoteError, subprocess.TimeoutExpired):
            pass


def _kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _connect_reason(stderr: str, remote: Remote) -> str:
    """The one line for a failed connection (ssh exit 255). A control master that failed to
    come up loses its ProxyJump process's stderr (only "connection closed during the
    handshake" is left): then one diagnostic attempt without the master (same options,
    BatchMode) says why."""
    jump = remote.jump()
    if jump and _JUMP_CLOSED.search(stderr) and not explain_jump_failure_detail(stderr):
        stderr = remote.diagnose() or stderr
    return no_config_hint(explain_ssh_failure(stderr, jump), remote.ssh_config, default_ssh_config())


def default_ssh_config() -> str:
    """The SSH config ssh reads without ``-F``: ``~/.ssh/config`` of the user's passwd home
    (ssh takes it from the passwd entry, not from ``$HOME``)."""
    import pwd

    try:
        home = pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:
        home = os.path.expanduser("~")
    return os.path.join(home, ".ssh", "config")


def no_config_hint(reason: str, ssh_config: str | None, default: str) -> str:
    """``reason`` for an unknown host, saying so when no ``--ssh-config`` was given and the
    default config ``default`` does not exist (so no Host of it could have matched)."""
    if ssh_config is None and reason.startswith("unknown host ") and not os.path.exists(default):
        host = reason.split()[2]
        return (f"unknown host {host} (its name does not resolve, and there is no SSH config to name it: "
                f"{default} does not exist; pass --ssh-config FILE)")
    return reason


def explain_jump_failure_detail(stderr: str) -> bool:
    """True when ``stderr`` already carries the jump process's own error before the
    handshake failure (then no diagnostic attempt is needed)."""
    m = _JUMP_CLOSED.search(stderr)
    return bool(m and stderr[:m.start()].strip())


def _rsync_reason(proc, dest) -> str:
    err, dest = proc.stderr, dest.rstrip("/") or "/"
    if "No space left on device" in err:
        return f"the remote disk is full (No space left on device) writing {dest}"
    if "Disk quota exceeded" in err:
        return f"the remote disk quota is exceeded writing {dest}"
    if re.search(r"rsync: (?:command )?not found|rsync: not found|command not found", err):
        return "rsync is not installed on the remote host"
    if "connection unexpectedly closed" in err and "ssh" in err.lower():
        return "the connection was lost: " + explain_ssh_failure(err)
    lines = [ln.strip() for ln in err.splitlines() if ln.strip().startswith("rsync") or "failed" in ln]
    return f"rsync failed (exit {proc.returncode}): " + (lines[0] if lines else explain_ssh_failure(err))
