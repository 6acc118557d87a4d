"""Two real sshd on loopback for the remote tests: a jump host and a login node behind it.

:func:`start` makes, in a fresh temporary directory: host keys for both daemons, one user key,
``authorized_keys``, an sshd_config per daemon and a client SSH config (``Host jump``,
``Host login`` with ``ProxyJump jump``, ``Host nosbatch``: the login node with an empty PATH,
``Host deadjump``: the login node behind a jump host that accepts TCP and never speaks;
``Host via-<jump>``: the login node behind a broken jump host, for each of :data:`BROKEN_JUMPS`).
Nothing of the machine's own SSH configuration or ``~/.ssh`` is read or written: the client
always runs with ``-F <dir>/client/config``, the daemons with ``-f <dir>/<name>/sshd_config``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from slurmkit.remote import Remote
from slurmkit.waiting import wait_until

SSHD = "/usr/sbin/sshd"

#: Broken jump hosts (``Host via-<name>`` reaches the login node through each): ``downjump``
#: (no sshd on its port), ``jmup`` (a typo: no such Host, no such name), ``badjump`` (its
#: HostName does not resolve), ``strangerjump`` (our key is refused there), ``strictjump``
#: (its host key is not in known_hosts, strict checking).
BROKEN_JUMPS = ("downjump", "jmup", "badjump", "strangerjump", "strictjump")


def missing_reason() -> str | None:
    """Why the pair cannot start here (None when it can)."""
    if os.geteuid() != 0:
        return "the sshd pair needs root (sshd's privilege separation)"
    for exe, pkg in ((SSHD, "openssh-server"), ("ssh", "openssh-client"), ("ssh-keygen", "openssh-client"),
                     ("rsync", "rsync")):
        if shutil.which(exe) is None:
            return f"{exe} is missing (Debian package {pkg})"
    return None


def free_port(addr: str) -> int:
    with socket.socket() as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


@dataclass
class SshPair:
    root: Path
    config: Path            # the client's SSH config (-F)
    jump_log: Path
    login_log: Path
    pids: list = field(default_factory=list)
    blackhole: socket.socket | None = None

    def accepted(self, which: str = "login") -> int:
        """How many public-key authentications that sshd accepted so far (from its log)."""
        log = self.login_log if which == "login" else self.jump_log
        return log.read_text(errors="replace").count("Accepted publickey") if log.exists() else 0

    def stop(self):
        for pid_file in self.pids:
            try:
                os.kill(int(Path(pid_file).read_text()), 15)
            except (OSError, ValueError):
                pass
        if self.blackhole is not None:
            self.blackhole.close()
        shutil.rmtree(self.root, ignore_errors=True)


SSHD_CONFIG = """\
{listen}
HostKey {dir}/host_key
PidFile {dir}/sshd.pid
AuthorizedKeysFile {root}/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
AllowTcpForwarding yes
LogLevel INFO
{extra}
"""

CLIENT_HOST = """\
Host {name}
  HostName {addr}
  Port {port}
  User {user}
  IdentityFile {root}/client/id_ed25519
  IdentitiesOnly yes
  StrictHostKeyChecking accept-new
  UserKnownHostsFile {root}/client/known_hosts
{extra}
"""


def _keygen(path: Path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True,
                   capture_output=True, timeout=30)


def start(login_env: dict | None = None) -> SshPair:
    """Start the jump host (127.0.0.5) and the login node (127.0.0.6, sessions get
    ``login_env`` through sshd's ``SetEnv``) on free ports; return the :class:`SshPair`."""
    root = Path(tempfile.mkdtemp(prefix="skr-", dir="/tmp"))   # short: ControlPath limit
    (root / "client").mkdir()
    _keygen(root / "client" / "id_ed25519")
    auth = root / "authorized_keys"
    auth.write_text((root / "client" / "id_ed25519.pub").read_text())
    auth.chmod(0o600)
    # a second key that no server accepts
    _keygen(root / "client" / "stranger")
    os.makedirs("/run/sshd", exist_ok=True)

    jump_port, login_port, nosbatch_port = free_port("127.0.0.5"), free_port("127.0.0.6"), free_port("127.0.0.6")
    pair = SshPair(root, root / "client" / "config", root / "jump" / "log", root / "login" / "log")
    env_line = ""
    if login_env:
        env_line = "SetEnv " + " ".join(f'"{k}={v}"' for k, v in login_env.items())
    daemons = [
        ("jump", f"ListenAddress 127.0.0.5:{jump_port}", ""),
        ("login", f"ListenAddress 127.0.0.6:{login_port}\nListenAddress 127.0.0.6:{nosbatch_port}",
         f"{env_line}\nMatch LocalPort {nosbatch_port}\n  SetEnv PATH=/nonexistent"),
    ]
    for name, listen, extra in daemons:
        d = root / name
        d.mkdir()
        _keygen(d / "host_key")
        (d / "sshd_config").write_text(SSHD_CONFIG.format(listen=listen, dir=d, root=root, extra=extra))
        subprocess.run([SSHD, "-f", str(d / "sshd_config"), "-E", str(d / "log")], check=True,
                       capture_output=True, timeout=30)
        pair.pids.append(d / "sshd.pid")
    # a "jump host" that accepts TCP connections and never says a word
    hole = socket.socket()
    hole.bind(("127.0.0.7", 0))
    hole.listen(16)
    pair.blackhole = hole
    hole_port = hole.getsockname()[1]

    user = "root"
    cm = f"  ControlPath {root}/client/cm-%C\n"
    hosts = [
        ("jump", "127.0.0.5", jump_port, ""),
        ("login", "127.0.0.6", login_port, "  ProxyJump jump\n"),
        ("nosbatch", "127.0.0.6", nosbatch_port, "  ProxyJump jump\n"),
        ("deadjump-gw", "127.0.0.7", hole_port, ""),
        ("deadjump", "127.0.0.6", login_port, "  ProxyJump deadjump-gw\n"),
        ("stranger", "127.0.0.6", login_port, "  ProxyJump jump\n"),
        ("closedport", "127.0.0.6", free_port("127.0.0.6"), ""),
    ]
    text = "".join(CLIENT_HOST.format(name=n, addr=a, port=p, user=user, root=root, extra=e + (cm if n == "login" else ""))
                   for n, a, p, e in hosts)
    text = text.replace(f"Host stranger\n  HostName 127.0.0.6\n  Port {login_port}\n  User root\n"
                        f"  IdentityFile {root}/client/id_ed25519",
                        f"Host stranger\n  HostName 127.0.0.6\n  Port {login_port}\n  User root\n"
                        f"  IdentityFile {root}/client/stranger")
    (root / "client" / "empty_known_hosts").write_text("")
    key = f"  User {user}\n  IdentitiesOnly yes\n"
    text += (f"Host downjump\n  HostName 127.0.0.5\n  Port {free_port('127.0.0.5')}\n{key}"
             f"Host badjump\n  HostName nosuch.invalid\n{key}"
             f"Host strangerjump\n  HostName 127.0.0.5\n  Port {jump_port}\n{key}  IdentityFile {root}/client/stranger\n"
             f"  StrictHostKeyChecking accept-new\n  UserKnownHostsFile {root}/client/known_hosts\n"
             f"Host strictjump\n  HostName 127.0.0.5\n  Port {jump_port}\n{key}  IdentityFile {root}/client/id_ed25519\n"
             f"  StrictHostKeyChecking yes\n  UserKnownHostsFile {root}/client/empty_known_hosts\n")
    text += "".join(CLIENT_HOST.format(name=f"via-{j}", addr="127.0.0.6", port=login_port, user=user, root=root,
                                       extra=f"  ProxyJump {j}\n") for j in BROKEN_JUMPS)
    pair.config.write_text(text)
    for pid in pair.pids:       # sshd daemonizes after binding; its pid file says it is up
        wait_until(Path(pid).exists, 10, 0.05, f"sshd's pid file {pid}")
    return pair


@contextmanager
def running(login_env: dict | None = None, hosts=("login",)):
    """The pair for one test module's fixture: skipped (a failure under ``CI=true``, by the
    skip policy) when :func:`missing_reason` says it cannot start; on exit each of ``hosts``'
    shared ssh connection is closed, then both daemons are stopped."""
    import pytest

    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    p = start(login_env=login_env)
    try:
        yield p
    finally:
        for host in hosts:
            Remote(host, str(p.config)).close()
        p.stop()
