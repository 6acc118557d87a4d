"""Start, inspect and stop the sandbox: a real Slurm cluster on this host.

munged, mariadbd, slurmdbd, slurmctld and one slurmd per node (``slurmd -N nX`` in its own UTS
namespace so that ``hostname`` is the node name), all as root, all state and configuration under
one directory, every daemon tracked by its pid file so that ``down`` stops exactly what ``up``
started. Debian 12's packages (Slurm 22.05) are the reference; ``--install`` apt-gets them.
A newer Slurm (``SandboxSpec.slurm``: 24.11, 26.05) runs from a Debian root filesystem
(:mod:`slurmkit.sandbox.rootfs`): its daemons and clients are started through the wrapper
scripts in ``<dir>/bin``; munge and MariaDB stay this machine's.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import signal
import socket
import stat
import subprocess
import time
from dataclasses import asdict
from pathlib import Path

from slurmkit.atomicfile import atomic_write
from slurmkit.profile import load_profile
from slurmkit.profile.slurmconf import render_gres_conf, render_topology_conf
from slurmkit.sandbox import config, gpus, releases, rootfs
from slurmkit.sandbox.errors import SandboxError
from slurmkit.slurm import commands
from slurmkit.waiting import WaitTimeout, wait_until

log = logging.getLogger("slurmkit.sandbox")

#: Debian packages the sandbox runs on.
PACKAGES = ("slurm-wlm", "slurmdbd", "munge", "mariadb-server")
#: Binaries that must be on PATH, and the package that brings each.
BINARIES = {"munged": "munge", "mungekey": "munge", "munge": "munge", "mariadbd": "mariadb-server",
            "mariadb-install-db": "mariadb-server", "mariadb": "mariadb-server",
            "mariadb-admin": "mariadb-server", "slurmdbd": "slurmdbd", "slurmctld": "slurm-wlm",
            "slurmd": "slurm-wlm", "sacctmgr": "slurm-wlm", "scontrol": "slurm-wlm",
            "sinfo": "slurm-wlm", "srun": "slurm-wlm", "unshare": "util-linux"}
#: The BINARIES a newer Slurm's root filesystem brings (the rest stay this machine's).
SLURM_BINARIES = ("slurmdbd", "slurmctld", "slurmd", "sacctmgr", "scontrol", "sinfo", "srun")
NVIDIA_MAJOR = 195


def missing_packages(release: releases.SlurmRelease) -> list[str]:
    """Debian packages of this machine that a sandbox of ``release`` needs and lacks (Slurm's
    own only for this machine's release; mmdebstrap when a newer one has no rootfs yet)."""
    need = {b: pkg for b, pkg in BINARIES.items() if release.host or b not in SLURM_BINARIES}
    if not release.host and rootfs.find(release) is None:
        need["mmdebstrap"] = "mmdebstrap"
    return sorted({pkg for b, pkg in need.items() if commands.which(b) is None})


def default_dir() -> Path:
    """Per-user state directory: $XDG_STATE_HOME/slurmkit/sandbox (~/.local/state/...)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "slurmkit" / "sandbox"


def registry_path() -> Path:
    """The file of the sandboxes ``slurmkit sandbox up`` started, one absolute directory a line:
    $XDG_STATE_HOME/slurmkit/sandboxes (~/.local/state/slurmkit/sandboxes)."""
    return default_dir().parent / "sandboxes"


def _registered() -> list[Path]:
    """The directories in :func:`registry_path` that still hold a ``sandbox.json``."""
    try:
        lines = registry_path().read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        d = Path(line.strip())
        if line.strip() and d not in out and (d / "sandbox.json").is_file():
            out.append(d)
    return out


def known_dirs() -> list[Path]:
    """The sandbox directories this user's ``sandbox up`` remembered (:func:`registry_path`),
    then :func:`default_dir` when it holds a sandbox; each once, only those still holding a
    ``sandbox.json``."""
    dirs = _registered()
    default = default_dir().absolute()
    if default not in dirs and (default / "sandbox.json").is_file():
        dirs.append(default)
    return dirs


def _write_registry(dirs: list[Path]) -> None:
    path = registry_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, "".join(f"{d}\n" for d in dirs))


def remember(directory: Path) -> None:
    """Add ``directory`` (a sandbox's) to :func:`registry_path`, dropping the directories that
    no longer hold a sandbox. Raises ``OSError`` when the file cannot be written."""
    directory = Path(directory).absolute()
    dirs = [d for d in _registered() if d != directory]
    _write_registry([*dirs, directory])


def forget(directory: Path) -> None:
    """Remove ``directory`` from :func:`registry_path` (after ``down --purge``)."""
    directory = Path(directory).absolute()
    if registry_path().exists():
        _write_registry([d for d in _registered() if d != directory])


def running_sandboxes() -> list["Sandbox"]:
    """The :func:`known_dirs` sandboxes with at least one daemon alive (by their pid files)."""
    found = [Sandbox(d) for d in known_dirs()]
    return [sb for sb in found if any(d["alive"] for d in sb.daemons())]


def pid_alive(pid: int | None) -> bool:
    """True when process ``pid`` exists and is not a zombie (``kill(pid, 0)`` and
    ``/proc/<pid>/stat``); False for None / 0."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie is not alive
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when a TCP socket can bind ``host:port`` now (SO_REUSEADDR, as the daemons do);
    raises OSError for a failure other than EADDRINUSE."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return False
            raise
    return True


def _tcp_open(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


#: Seconds a one-off setup command may take (mariadb-install-db, mungekey, a daemon forking).
SETUP_TIMEOUT_S = 120
#: Seconds for apt-get (update, then the install of :data:`PACKAGES`).
APT_TIMEOUT_S = 1800


def _wait_for(what: str, predicate, timeout: float, hint="") -> None:
    """:func:`slurmkit.waiting.wait_until` every 0.1 s; its timeout raised as SandboxError."""
    try:
        wait_until(predicate, timeout, 0.1, what, hint)
    except WaitTimeout as exc:
        raise SandboxError(str(exc)) from None


class Sandbox:
    """One local Slurm cluster living under ``root``.

    Attributes: ``dir`` (Path), ``slurm_conf`` (Path of slurm.conf), ``profile_path`` (the
    rendered site profile TOML), ``device_dir`` (where the fake ``nvidiaN`` devices are),
    ``node_names`` (``["n1", ...]``), ``spec`` (:class:`config.SandboxSpec`).
    The spec of a sandbox that has been brought up is kept in ``<dir>/sandbox.json``; a
    ``Sandbox(dir)`` without a spec reads it from there.
    """

    DAEMONS = ("munged", "mysqld", "slurmdbd", "slurmctld")

    def __init__(self, root: Path | str | None = None, spec: config.SandboxSpec | None = None):
        self.dir = Path(root or default_dir()).absolute()
        saved = self._saved_spec()
        self.spec = spec or saved or config.SandboxSpec(host_cpus=tuple(sorted(os.sched_getaffinity(0))))
        if spec is not None and saved is not None:
            # keep the database password of the existing MariaDB datadir
            self.spec = config.SandboxSpec(**{**asdict(spec), "db_password": saved.db_password})
        self.etc = self.dir / "etc"
        self.var = self.dir / "var"
        self.run_dir = self.var / "run"
        self.slurm_conf = self.etc / "slurm.conf"
        self.profile_path = self.etc / "site.toml"
        self.device_dir = self.dir / "dev"
        self.release = releases.release(self.spec.slurm)
        #: wrapper scripts of a newer release's commands (None: this machine's Slurm)
        self.bin_dir = None if self.release.host else self.dir / "bin"

    # ------------------------------------------------------------------ facts
    @property
    def node_names(self) -> list[str]:
        return self.spec.node_names

    def node_addr(self, name: str) -> str:
        """Loopback NodeAddr of a node (``n3`` -> ``127.0.1.3``)."""
        return self.spec.node_addr(int(name.lstrip("n")))

    def env(self) -> dict[str, str]:
        """Variables a shell or subprocess needs to use this sandbox: SLURM_CONF, SLURMKIT_SITE
        and, for a newer release, PATH with ``<dir>/bin`` (its Slurm commands) first."""
        env = {"SLURM_CONF": str(self.slurm_conf), "SLURMKIT_SITE": str(self.profile_path)}
        if self.bin_dir is not None:
            env["PATH"] = os.pathsep.join([str(self.bin_dir), os.environ.get("PATH") or "/usr/bin:/bin"])
        return env

    def exe(self, name: str) -> str:
        """The command to run Slurm's program ``name`` (``sbatch``, ``slurmd``) of this
        sandbox's release: the name itself (found on PATH) for this machine's Slurm, else the
        wrapper in ``<dir>/bin``."""
        return name if self.bin_dir is None else str(self.bin_dir / name)

    def slurm_version(self) -> str | None:
        """Slurm's full version the sandbox runs (``"24.11.5"``): ``slurmctld -V``, or the
        rootfs's manifest; None when neither can be read."""
        if not self.release.host:
            fs = rootfs.find(self.release)
            return fs.version if fs else None
        try:
            out = commands.run(["slurmctld", "-V"], timeout=10).stdout.split()
        except commands.SlurmError:
            return None
        return out[-1] if out else None

    def _saved_spec(self) -> config.SandboxSpec | None:
        try:
            data = json.loads((self.dir / "sandbox.json").read_text())
            data["host_cpus"] = tuple(data["host_cpus"])
            return config.SandboxSpec(**data)
        except (OSError, ValueError, TypeError, KeyError):
            return None

    def _pidfiles(self) -> dict[str, Path]:
        files = {d: self.run_dir / f"{d}.pid" for d in self.DAEMONS}
        files.update({f"slurmd-{n}": self.run_dir / f"slurmd-{n}.pid" for n in self.node_names})
        return files

    def _ours(self, pid: int | None) -> bool:
        """True when ``pid`` is alive and one of this sandbox's processes (its command line or
        environment names this sandbox's directory): a stale pid file whose pid the kernel has
        since given to another process is never signalled."""
        if not pid_alive(pid):
            return False
        mark = str(self.dir).encode()
        for part in ("cmdline", "environ"):
            try:
                if mark in Path(f"/proc/{pid}/{part}").read_bytes():
                    return True
            except OSError:
                continue
        return False

    def daemons(self) -> list[dict]:
        """Each daemon this sandbox runs: ``[{"name", "pid" (int|None), "alive" (bool)}]``."""
        out = []
        for name, path in self._pidfiles().items():
            pid = _read_pid(path)
            out.append({"name": name, "pid": pid, "alive": self._ours(pid)})
        return out

    def is_up(self) -> bool:
        return all(d["alive"] for d in self.daemons())

    def _slurm(self, *argv, timeout=30.0, check=True):
        return commands.run([self.exe(argv[0]), *argv[1:]], timeout=timeout, check=check,
                            slurm_conf=str(self.slurm_conf))

    # ------------------------------------------------------------------ checks
    def _preflight(self) -> None:
        if os.geteuid() != 0:
            raise SandboxError("the sandbox runs Slurm's daemons as root: run as root (sudo)")
        missing = missing_packages(self.release)
        if missing:
            raise SandboxError("missing Debian packages: " + " ".join(missing)
                               + " (run 'slurmkit sandbox up --install' or apt-get install them)")
        running = {d["name"] for d in self.daemons() if d["alive"]}
        wanted = self.spec.ports.all(self.spec.nodes)
        owners = {"slurmctld": "slurmctld", "slurmdbd": "slurmdbd", "mariadb": "mysqld"}
        for name, port in wanted.items():
            if owners.get(name, name) in running:
                continue
            host = "127.0.0.1"
            if name.startswith("slurmd-"):
                host = self.node_addr(name.split("-", 1)[1])
            if not port_free(port, host) or not port_free(port, "127.0.0.1"):
                raise SandboxError(
                    f"port {port} ({name}) is already in use: another sandbox or Slurm is running on "
                    f"these ports. Stop it ('slurmkit sandbox down --dir DIR') or pick other ports "
                    f"with --port-base")

    @staticmethod
    def install_packages(packages=PACKAGES) -> None:
        """apt-get the Debian packages, with a policy-rc.d so package scripts start no daemon."""
        policy = Path("/usr/sbin/policy-rc.d")
        created = False
        if not policy.exists():
            policy.write_text("#!/bin/sh\nexit 101\n")
            policy.chmod(0o755)
            created = True
        try:
            env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
            subprocess.run(["apt-get", "update", "-q"], check=True, env=env, timeout=APT_TIMEOUT_S)
            subprocess.run(["apt-get", "install", "-y", "-q", "--no-install-recommends", *packages],
                           check=True, env=env, timeout=APT_TIMEOUT_S)
        except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            raise SandboxError(f"installing {' '.join(packages)} failed: {exc}") from None
        finally:
            if created:
                policy.unlink(missing_ok=True)

    # ------------------------------------------------------------------ up
    def up(self, install: bool = False, warmup: bool = True, progress=None) -> None:
        """Bring the cluster up (idempotent): configs, munge, MariaDB, slurmdbd, slurmctld, slurmd
        per node; wait until every node is idle and run a warm-up job.

        ``progress``: a callable taking one line of text, called at each step.
        Raises :class:`SandboxError` with the reason and the log file to read.
        """
        say = progress or (lambda msg: log.info(msg))
        t0 = time.monotonic()
        missing = missing_packages(self.release)
        if install and missing:
            packages = PACKAGES if self.release.host else tuple(missing)
            say("installing Debian packages: " + " ".join(packages))
            self.install_packages(packages)
        saved = self._saved_spec()
        if saved and saved != self.spec and any(d["alive"] for d in self.daemons()):
            differ = ", ".join(f"{k} {v} (asked: {getattr(self.spec, k)})" for k, v in asdict(saved).items()
                               if k != "db_password" and v != getattr(self.spec, k))
            raise SandboxError(f"a sandbox with other options is running in {self.dir}: {differ}; "
                               f"run 'slurmkit sandbox down --dir {self.dir}' first")
        if saved and saved.slurm != self.spec.slurm and self._has_state():
            raise SandboxError(
                f"the sandbox in {self.dir} holds Slurm {saved.slurm}'s state and accounting database: Slurm "
                f"{self.spec.slurm}'s daemons would refuse them or convert them for good (24.11's slurmdbd "
                "refuses 22.05's database as too old to upgrade; 24.11's slurmctld cannot read 26.05's state; "
                f"a newer release converts an older one's in place). Use another --dir for Slurm "
                f"{self.spec.slurm}, or delete this one first: 'slurmkit sandbox down --purge --dir {self.dir}' "
                "(its jobs and accounting are lost)")
        self.spec.validate()
        self._preflight()
        if not self.release.host:
            # rewritten at every up: the rootfs may have been rebuilt since
            rootfs.write_wrappers(rootfs.ensure(self.release, say), self.bin_dir)
        if self.is_up():
            # one started by an earlier slurmkit has no GPU snapshots yet
            gpus.write_node_snapshots(self.dir / gpus.SNAPSHOT_SUBDIR, self.node_names, self.spec.gpus_per_node,
                                      self.spec.gpu_type, only_missing=True)
            say(f"sandbox already up in {self.dir}")
            return
        daemons = self.daemons()
        partly = any(d["alive"] for d in daemons)
        if partly:
            # a daemon died: restart what is missing with the configuration the running daemons
            # use (it may carry installed hooks); rewriting it under a slurmd that re-reads it
            # could hand that slurmd a different file
            self._write_configs(keep_existing=True)
            say(f"sandbox partly up in {self.dir}: restarting "
                + ", ".join(d["name"] for d in daemons if not d["alive"]))
        else:
            self._write_configs()
            say(f"configuration written to {self.etc}")
        self._start_munge()
        self._start_mariadb()
        say("munge and MariaDB up")
        self._start_slurmdbd()
        self._start_slurmctld()
        say("slurmdbd and slurmctld up")
        self._start_slurmds()
        kept = []
        if not partly:
            self._resume_left_over(say)
            kept = [line.strip() for line in self._slurm("squeue", "-h", "-o", "%i %T %N", check=False,
                                                         timeout=10).stdout.splitlines() if line.strip()]
            if kept:
                # the daemons had died under running jobs (a crash, kill -9): slurmctld recovered
                # them from its state
                say(f"{len(kept)} job(s) recovered from before the stop (squeue: {'; '.join(kept)}): "
                    "no warm-up; cancel them with scancel if they are not wanted")
        if partly or kept:
            # nodes may be drained or running jobs: wait for every slurmd to answer, no warm-up
            self._wait_responding(60)
            say(f"sandbox ready in {time.monotonic() - t0:.1f} s")
            return
        self._wait_idle(60)
        say(f"{len(self.node_names)} nodes idle")
        if warmup:
            self._slurm("srun", "-N", str(self.spec.nodes), "-J", "warmup", "-t", "1", "true", timeout=60)
            self._wait_idle(30)
            say("warm-up job ran on every node")
        say(f"sandbox ready in {time.monotonic() - t0:.1f} s")

    def _has_state(self) -> bool:
        """True when slurmctld's state directory or MariaDB's datadir holds anything."""
        return any(any(d.iterdir()) for d in (self.var / "spool" / "ctld", self.var / "mysql") if d.is_dir())

    def _write_configs(self, keep_existing: bool = False) -> None:
        """Write sandbox.json, site.toml, slurm.conf, cgroup.conf, gres.conf, topology.conf and
        slurmdbd.conf under the sandbox directory (each atomically), and make the GPU device
        nodes. ``keep_existing``: leave files that exist as they are."""
        for d in (self.etc, self.device_dir, self.run_dir, self.var / "log", self.var / "spool" / "ctld",
                  self.var / "munge", self.var / "mysql"):
            d.mkdir(parents=True, exist_ok=True)
        for n in self.node_names:
            (self.var / "spool" / f"d-{n}").mkdir(parents=True, exist_ok=True)
        (self.var / "munge").chmod(0o700)
        def write(path: Path, text: str, mode: int = 0o644) -> None:
            if not (keep_existing and path.exists()):
                atomic_write(path, text, mode)

        write(self.dir / "sandbox.json", json.dumps(asdict(self.spec), indent=1) + "\n", 0o600)
        ctx = config.context(self.spec, self.dir, socket.gethostname().split(".")[0])
        write(self.profile_path, config.render("site.toml", ctx))
        profile = load_profile(self.profile_path)
        write(self.etc / "slurm.conf", config.render("slurm.conf", ctx))
        write(self.etc / "cgroup.conf", config.render("cgroup.conf", ctx))
        write(self.etc / "gres.conf", render_gres_conf(profile, device_dir=str(self.device_dir)))
        write(self.etc / "topology.conf", render_topology_conf(profile))
        # slurmdbd refuses a world-readable file
        write(self.etc / "slurmdbd.conf", config.render("slurmdbd.conf", ctx), 0o600)
        self._make_devices()
        # what NVML would say of the fake GPUs: healthy, with the faults given (sandbox gpu)
        gpus.write_node_snapshots(self.dir / gpus.SNAPSHOT_SUBDIR, self.node_names, self.spec.gpus_per_node,
                                  self.spec.gpu_type, only_missing=keep_existing)

    def _make_devices(self) -> None:
        minors = config.device_minors(self.spec.gpus_per_node)
        for k, minor in enumerate(minors):
            path = self.device_dir / f"nvidia{k}"
            try:
                st = path.lstat()
                if stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) == NVIDIA_MAJOR and os.minor(st.st_rdev) == minor:
                    continue
                path.unlink()
            except FileNotFoundError:
                pass
            os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(NVIDIA_MAJOR, minor))

    def _spawn(self, argv, **kw) -> None:
        env = commands.slurm_env(slurm_conf=str(self.slurm_conf))
        try:
            proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=SETUP_TIMEOUT_S, **kw)
        except subprocess.TimeoutExpired:
            raise SandboxError(f"{argv[0]} did not return within {SETUP_TIMEOUT_S} s") from None
        if proc.returncode != 0:
            raise SandboxError(f"{argv[0]} failed to start (exit {proc.returncode}): "
                               f"{(proc.stderr or proc.stdout).strip()}")

    def _running(self, name: str) -> bool:
        return self._ours(_read_pid(self._pidfiles()[name]))

    def _start_munge(self) -> None:
        key = self.var / "munge" / "munge.key"
        if not key.exists():
            self._spawn(["mungekey", "-c", "-k", str(key)])
        if not self._running("munged"):
            self._spawn(["munged", f"--key-file={key}", f"--socket={self.run_dir / 'munge.sock'}",
                         f"--pid-file={self.run_dir / 'munged.pid'}", f"--log-file={self.var / 'log' / 'munged.log'}",
                         f"--seed-file={self.var / 'munge' / 'munged.seed'}", "--force"])

    def _mariadb(self, sql: str) -> None:
        try:
            proc = subprocess.run(["mariadb", "--no-defaults", f"--socket={self.run_dir / 'mysqld.sock'}"],
                                  input=sql, capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            raise SandboxError("MariaDB setup did not return within 60 s") from None
        if proc.returncode != 0:
            raise SandboxError(f"MariaDB setup failed: {proc.stderr.strip()}")

    def _start_mariadb(self) -> None:
        datadir = self.var / "mysql"
        mlog = self.var / "log" / "mysqld.log"
        if not (datadir / "mysql").is_dir():
            install_log = self.var / "log" / "mariadb-install.log"
            with open(install_log, "w") as fh:
                try:
                    rc = subprocess.run(["mariadb-install-db", "--no-defaults", "--user=root", f"--datadir={datadir}",
                                         "--auth-root-authentication-method=socket", "--skip-test-db"],
                                        stdout=fh, stderr=subprocess.STDOUT, timeout=SETUP_TIMEOUT_S).returncode
                except subprocess.TimeoutExpired:
                    raise SandboxError(f"mariadb-install-db did not return within {SETUP_TIMEOUT_S} s; "
                                       f"see {install_log}") from None
            if rc != 0:
                raise SandboxError(f"mariadb-install-db failed; see {install_log}")
        if not self._running("mysqld"):
            subprocess.Popen(
                ["mariadbd", "--no-defaults", "--user=root", f"--datadir={datadir}",
                 f"--socket={self.run_dir / 'mysqld.sock'}", f"--pid-file={self.run_dir / 'mysqld.pid'}",
                 f"--port={self.spec.ports.mariadb}", "--bind-address=127.0.0.1", "--skip-name-resolve",
                 f"--log-error={mlog}", "--skip-log-bin", "--innodb-buffer-pool-size=128M",
                 "--innodb-log-file-size=48M", "--innodb-lock-wait-timeout=900",
                 "--innodb-flush-log-at-trx-commit=0", "--innodb-doublewrite=0"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True)

        def ping():
            try:
                return subprocess.run(["mariadb-admin", "--no-defaults", f"--socket={self.run_dir / 'mysqld.sock'}",
                                       "--connect-timeout=5", "ping"], capture_output=True,
                                      timeout=10).returncode == 0 and self._running("mysqld")
            except subprocess.TimeoutExpired:
                return False

        _wait_for("MariaDB start", ping, 60, f"see {mlog}")
        pw = self.spec.db_password
        self._mariadb(
            "CREATE DATABASE IF NOT EXISTS slurm_acct_db;\n"
            + "".join(f"CREATE USER IF NOT EXISTS 'slurm'@'{h}' IDENTIFIED BY '{pw}';\n"
                      f"ALTER USER 'slurm'@'{h}' IDENTIFIED BY '{pw}';\n"
                      f"GRANT ALL ON slurm_acct_db.* TO 'slurm'@'{h}';\n" for h in ("127.0.0.1", "localhost")))

    def _start_slurmdbd(self) -> None:
        if not self._running("slurmdbd"):
            self._spawn([self.exe("slurmdbd")])
        _wait_for("slurmdbd listening", lambda: _tcp_open(self.spec.ports.slurmdbd), 60,
                  f"see {self.var / 'log' / 'slurmdbd.log'}")
        clusters = self._slurm("sacctmgr", "-n", "-P", "show", "cluster", "format=cluster").stdout.split()
        if self.spec.cluster not in clusters:
            self._slurm("sacctmgr", "-i", "add", "cluster", self.spec.cluster)
            self._slurm("sacctmgr", "-i", "add", "account", "research", "Description=research",
                        f"Organization={self.spec.cluster}")
            self._slurm("sacctmgr", "-i", "add", "user", "root", "Account=research", "DefaultAccount=research")

    def _start_slurmctld(self) -> None:
        if not self._running("slurmctld"):
            self._spawn([self.exe("slurmctld")])
        _wait_for("slurmctld answering 'scontrol ping'",
                  lambda: self._slurm("scontrol", "ping", check=False, timeout=10).returncode == 0, 60,
                  f"see {self.var / 'log' / 'slurmctld.log'}")

    def _start_slurmds(self) -> None:
        for n in self.node_names:
            if self._running(f"slurmd-{n}"):
                continue
            # own UTS namespace: `hostname` inside the node (and in its jobs) is the node name
            self._spawn(["unshare", "--uts", "sh", "-c", 'hostname "$1" && exec "$2" -N "$1"', "sh", n,
                         self.exe("slurmd")])

    def _node_states(self) -> dict[str, str]:
        res = self._slurm("sinfo", "-h", "-N", "-o", "%N %T", check=False, timeout=10)
        if res.returncode != 0:
            return {}
        return dict(line.split(None, 1) for line in res.stdout.splitlines() if line.strip())

    def _wait_responding(self, timeout: float, down_ok: bool = False) -> None:
        """Wait until every slurmd has registered and answers (no ``*``, not ``unknown`` or
        ``not_responding``), and, unless ``down_ok``, no node is ``down``."""
        bad = ("unknown", "not_responding") + (() if down_ok else ("down",))

        def responding():
            states = self._node_states()
            return len(states) == len(self.node_names) and not any(
                s.endswith("*") or s.startswith(bad) for s in states.values())

        _wait_for("every slurmd answering", responding, timeout,
                  lambda: f"nodes: {self._node_states()}; see {self.var / 'log'}/slurmd-*.log")

    def _resume_left_over(self, say, timeout: float = 60) -> None:
        """A sandbox started again from its saved state (every daemon had stopped): slurmctld
        recovers its nodes as they were (``var/spool/ctld/node_state``), so a node the demo's
        health check drained, or one set down, would keep ``up`` from ever seeing every node
        idle. Once every slurmd has registered (:meth:`_wait_responding`, down nodes allowed),
        each node left drained, draining or down is resumed (``scontrol update state=resume``)
        and ``say`` is told which, in what state and with what reason (``sinfo %E``)."""
        self._wait_responding(timeout, down_ok=True)
        res = self._slurm("sinfo", "-h", "-N", "-o", "%N|%T|%E", check=False, timeout=10)
        for line in res.stdout.splitlines():
            node, _, rest = line.partition("|")
            state, _, reason = rest.partition("|")
            if state.startswith(("drain", "down")):
                self._slurm("scontrol", "update", f"nodename={node}", "state=resume", timeout=10)
                say(f"{node} was {state} when the sandbox last stopped (reason: {reason or 'none'}): resumed")

    def _wait_idle(self, timeout: float) -> None:
        def all_idle():
            states = self._node_states()
            return len(states) == len(self.node_names) and all(s == "idle" for s in states.values())

        _wait_for("every node idle", all_idle, timeout,
                  lambda: f"nodes: {self._node_states()}; see {self.var / 'log'}/slurmd-*.log")

    # ------------------------------------------------------------------ status / down
    def sinfo(self) -> str:
        """``sinfo -N`` of the running sandbox (node, state, gres), or '' when it is down."""
        if not self._running("slurmctld"):
            return ""
        return self._slurm("sinfo", "-N", "-o", "%N %P %T %G %E", check=False, timeout=10).stdout

    def down(self, purge: bool = False, progress=None) -> None:
        """Stop everything ``up`` started, by pid file: cancel jobs, stop the slurmds, slurmctld,
        slurmdbd, MariaDB and munged (SIGTERM, then SIGKILL after a grace period), and kill any
        slurmstepd left by this sandbox. ``purge`` also deletes the directory."""
        say = progress or (lambda msg: log.info(msg))
        if self._running("slurmctld") and self.slurm_conf.exists():
            jobs = self._slurm("squeue", "-h", "-o", "%i", check=False, timeout=10).stdout.split()
            if jobs:
                self._slurm("scancel", *jobs, check=False, timeout=10)
                try:
                    wait_until(lambda: not self._slurm("squeue", "-h", "-o", "%i", check=False, timeout=10).stdout.strip(),
                               15, 0.2, "the cancelled jobs to leave squeue")
                except WaitTimeout:
                    pass  # stopping the daemons ends them; slurmstepds left are killed below
                say(f"cancelled jobs {' '.join(jobs)}")
        files = self._pidfiles()
        groups = [[k for k in files if k.startswith("slurmd-")] + ["slurmctld"], ["slurmdbd"], ["mysqld", "munged"]]
        for group in groups:
            stopped = self._stop([files[k] for k in group], timeout=20)
            if stopped:
                say("stopped " + ", ".join(stopped))
        self._kill_stray_stepds()
        if purge and self.dir.exists():
            shutil.rmtree(self.dir)
            say(f"removed {self.dir}")

    def _stop(self, pidfiles: list[Path], timeout: float) -> list[str]:
        pids = {}
        for path in pidfiles:
            pid = _read_pid(path)
            if self._ours(pid):
                os.kill(pid, signal.SIGTERM)
                pids[pid] = path
        try:
            wait_until(lambda: not any(pid_alive(p) for p in pids), timeout, 0.1, "the daemons to exit on SIGTERM")
        except WaitTimeout:
            pass  # SIGKILL below
        names = []
        for pid, path in pids.items():
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
            names.append(f"{path.stem}({pid})")
        for path in pidfiles:
            path.unlink(missing_ok=True)
        return names

    def _kill_stray_stepds(self) -> None:
        mark = f"SLURM_CONF={self.slurm_conf}".encode()
        for proc in Path("/proc").glob("[0-9]*"):
            try:
                if "slurmstepd" not in os.readlink(proc / "exe"):
                    continue
                if mark in (proc / "environ").read_bytes().split(b"\0"):
                    os.kill(int(proc.name), signal.SIGKILL)
            except (OSError, ValueError):
                continue
