"""The SSH adapter and the remote submit's failures against two real sshd (a jump host and a
login node behind it, ``tests/sshpair.py``): every failure is one line naming the host and the
step, and nothing is synced or queued after a failed step. No Slurm needed here."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import sshpair
from slurmkit.errors import UsageError
from slurmkit.remote import Remote, RemoteError
from slurmkit.remote.submit import submit_remote
from slurmkit.waiting import wait_until


@pytest.fixture(scope="module")
def pair():
    with sshpair.running(hosts=("login", "nosbatch", "stranger", "deadjump")) as p:
        yield p


def slurmkit(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "slurmkit", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd)


@pytest.mark.parametrize("host,says", [
    ("nosuchhost", "nosuchhost: connect: unknown host nosuchhost"),
    ("stranger", "stranger: connect: the key was refused (publickey)"),
    ("deadjump", "deadjump: connect: the jump host deadjump-gw (ProxyJump) did not answer"),
    ("closedport", "closedport: connect: 127.0.0.6 port"),
])
def test_connect_failures_are_one_line_naming_the_step(pair, host, says):
    remote = Remote(host, str(pair.config), timeout=20, connect_timeout=3)
    with pytest.raises(RemoteError) as err:
        remote.shell("true", "connect")
    assert str(err.value).startswith(says) and err.value.step == "connect"
    proc = slurmkit("status", "--remote", host, "--ssh-config", str(pair.config), "1")
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("slurmkit: error: " + says.split(":")[0] + ": ")


@pytest.mark.parametrize("jump,says", [
    ("downjump", r"the jump host downjump \(ProxyJump\) refused the connection \(127\.0\.0\.5 port \d+: is its sshd running\?\)"),
    ("jmup", r"the jump host jmup \(ProxyJump\) is not a Host of the SSH config and its name does not resolve"),
    ("badjump", r"the jump host badjump \(ProxyJump\): its HostName nosuch\.invalid does not resolve"),
    ("strangerjump", r"the jump host strangerjump \(ProxyJump\) refused the key \(publickey\) for root@127\.0\.0\.5"),
    ("strictjump", r"the jump host strictjump \(ProxyJump\): host key verification failed: its host key "
                   r"\(\[127\.0\.0\.5\]:\d+\) is not in known_hosts"),
])
def test_each_jump_host_failure_gets_its_own_line(pair, jump, says):
    host = f"via-{jump}"
    with pytest.raises(RemoteError) as err:
        Remote(host, str(pair.config), timeout=20, connect_timeout=3).shell("true", "connect")
    assert re.match(rf"^{host}: connect: {says}", str(err.value)), str(err.value)
    # the CLI: the same line, whichever command connects
    for args in (["status", "1"], ["logs", "1"]):
        proc = slurmkit(args[0], "--remote", host, "--ssh-config", str(pair.config), *args[1:])
        assert proc.returncode == 1 and proc.stderr.count("\n") == 1
        assert re.match(rf"^slurmkit: error: {host}: connect: {says}", proc.stderr), proc.stderr


def test_a_long_tmpdir_keeps_the_control_socket_path_short(pair, tmp_path):
    # macOS: $TMPDIR is /var/folders/xx/yyyyyyyy/T/ (about 49 characters); here longer still
    long = Path("/tmp") / ("t" * 60) / "var-folders-T"
    long.mkdir(parents=True)
    try:
        proc = subprocess.run([sys.executable, "-m", "slurmkit", "status", "--remote", "login", "--ssh-config",
                               str(pair.config), "999999"], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "TMPDIR": str(long)})
        # connected (the job id is unknown to the login node's Slurm, or Slurm is not set up there)
        assert "connect:" not in proc.stderr and "ControlPath" not in proc.stderr, proc.stderr
        assert not list(long.iterdir())               # the socket went to /tmp/slurmkit-ssh-<uid>
        assert os.path.isdir(f"/tmp/slurmkit-ssh-{os.getuid()}")
    finally:
        import shutil
        Remote("login", str(pair.config)).close()
        shutil.rmtree(Path("/tmp") / ("t" * 60), ignore_errors=True)
    with pytest.raises(RemoteError, match=r"^login: connect: the SSH control socket path /tmp/x+/[0-9a-f]{16} is too long"):
        Remote("login", str(pair.config), control_dir="/tmp/" + "x" * 90).ssh_argv()


def test_commands_run_on_the_login_node_through_the_jump_host(pair):
    remote = Remote("login", str(pair.config))
    remote.close()
    before = (pair.accepted("jump"), pair.accepted("login"))
    # a quoted argument survives the remote shell word for word
    assert remote.run(["printf", "%s|", "a b", "$HOME", "it's"], "status").stdout == "a b|$HOME|it's|"
    assert remote.shell("echo $SSH_CONNECTION", "status").stdout.split()[2] == "127.0.0.6"
    assert remote.run(["cat"], "status", input="via stdin\n").stdout == "via stdin\n"
    # three commands, one authentication on each server (the ControlMaster connection is shared)
    assert (pair.accepted("jump"), pair.accepted("login")) == (before[0] + 1, before[1] + 1)
    with pytest.raises(RemoteError, match=r"^login: status: false failed \(exit 1\)"):
        remote.run(["false"], "status")
    with pytest.raises(RemoteError, match="no-such-command not found on the host's PATH"):
        remote.run(["no-such-command"], "submit")


def _project(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    (proj / "data").mkdir(parents=True)
    (proj / "src").mkdir()
    (proj / ".git").mkdir()
    (proj / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (proj / ".gitignore").write_text("data/\n*.ckpt\n")
    (proj / "train.py").write_text("print('train')\n")
    (proj / "src" / "model.py").write_text("x = 1\n")
    (proj / "src" / "model.ckpt").write_text("weights")
    (proj / "data" / "big.bin").write_bytes(b"0" * 1000)
    (proj / "notes.tmp").write_text("scratch")
    return proj


def test_sync_honours_gitignore_and_never_sends_git(pair, tmp_path):
    from slurmkit.remote.sync import sync

    proj = _project(tmp_path)
    dest = tmp_path / "remote" / "proj"
    remote = Remote("login", str(pair.config))
    sync(remote, str(proj), str(dest), excludes=["*.tmp"])
    sent = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.relative_to(dest).parts[0] not in (".slurmkit", "slurmkit-runs"))
    assert sent == [".gitignore", "src", "src/model.py", "train.py"]
    # jobs' outputs in the remote directory survive the next sync
    (dest / "job-1.out").write_text("output")
    sync(remote, str(proj), str(dest))
    assert (dest / "job-1.out").read_text() == "output"


def test_a_full_remote_disk_fails_the_sync_step(pair, tmp_path):
    dest = tmp_path / "full"
    dest.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(dest)], capture_output=True).returncode:
        pytest.skip("cannot mount a small tmpfs to fill (needs CAP_SYS_ADMIN)")
    try:
        proj = tmp_path / "big"
        proj.mkdir()
        (proj / "blob.bin").write_bytes(os.urandom(512 * 1024))
        with pytest.raises(RemoteError) as err:
            submit_remote("single-gpu", ["true"], remote=Remote("login", str(pair.config)), site="sandbox",
                          sync_dir=str(proj), remote_dir=str(dest))
        assert err.value.step == "sync"
        assert str(err.value) == f"login: sync: the remote disk is full (No space left on device) writing {dest}"
    finally:
        subprocess.run(["umount", str(dest)], check=True)


def test_no_sbatch_on_the_login_node_fails_submit_before_syncing(pair, tmp_path):
    proj = _project(tmp_path)
    dest = tmp_path / "never"
    with pytest.raises(RemoteError) as err:
        submit_remote("single-gpu", ["true"], remote=Remote("nosbatch", str(pair.config)), site="sandbox",
                      sync_dir=str(proj), remote_dir=str(dest))
    assert err.value.step == "submit"
    assert "sbatch not found on the login node's PATH" in str(err.value) and "nothing was submitted" in str(err.value)
    assert not dest.exists()
    proc = slurmkit("submit", "single-gpu", "--remote", "nosbatch", "--ssh-config", str(pair.config),
                    "--site", "sandbox", "--sync-dir", str(proj), "--remote-dir", str(dest), "--", "true")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith("slurmkit: error: nosbatch: submit: sbatch not found") and proc.stderr.count("\n") == 1


def test_no_site_profile_anywhere_is_bad_input(pair, tmp_path):
    # this login node sets no SLURMKIT_SITE and no --site is given
    with pytest.raises(UsageError, match="no site profile for login: pass --site, or set SLURMKIT_SITE"):
        submit_remote("single-gpu", ["true"], remote=Remote("login", str(pair.config)), sync_dir=str(tmp_path))
    proc = slurmkit("submit", "single-gpu", "--remote", "login", "--ssh-config", str(pair.config), "--explain",
                    "--", "true", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.startswith("slurmkit: error: --site: no site profile for login")


def test_no_sync_needs_an_existing_remote_dir(pair, tmp_path):
    with pytest.raises(RemoteError, match=r"^login: sync: .*/gone does not exist there \(--no-sync"):
        submit_remote("single-gpu", ["true"], remote=Remote("login", str(pair.config)), site="sandbox",
                      sync=False, remote_dir=str(tmp_path / "gone"))


def test_an_unknown_host_without_any_ssh_config_says_the_file_does_not_exist(tmp_path):
    from slurmkit.remote.ssh import explain_ssh_failure, no_config_hint

    reason = explain_ssh_failure("ssh: Could not resolve hostname mycluster: Name or service not known\n")
    missing = str(tmp_path / ".ssh" / "config")
    assert no_config_hint(reason, None, missing) == (
        f"unknown host mycluster (its name does not resolve, and there is no SSH config to name it: {missing} "
        "does not exist; pass --ssh-config FILE)")
    (tmp_path / ".ssh").mkdir()
    Path(missing).write_text("Host other\n")
    assert no_config_hint(reason, None, missing) == reason == (
        "unknown host mycluster (not a Host of the SSH config, and its name does not resolve)")
    assert no_config_hint(reason, "/etc/cfg", str(tmp_path / "nope")) == reason


def test_a_missing_ssh_config_is_named(tmp_path):
    with pytest.raises(RemoteError, match=r"^login: connect: SSH config .*/nope does not exist"):
        Remote("login", str(tmp_path / "nope"))


def _procs_mentioning(text: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmd:
            found.append(f"{pid}: {cmd[:120]}")
    return found


def test_ctrl_c_during_sync_stops_rsync_and_ssh_and_queues_nothing(pair, tmp_path):
    import signal

    proj = tmp_path / "big"
    proj.mkdir()
    with open(proj / "weights.bin", "wb") as fh:       # incompressible: the sync takes a while
        for _ in range(48):
            fh.write(os.urandom(8 << 20))
    dest = tmp_path / "remote-upload-target"
    # the real rsync, held to 16 MiB/s (--bwlimit): on loopback an idle machine copies the 384 MiB
    # in about a second, so the Ctrl-C below could come after the sync (then sbatch runs) instead
    # of during it; at 16 MiB/s the copy lasts ~24 s
    slow = tmp_path / "slow-bin"
    slow.mkdir()
    (slow / "rsync").write_text(f"#!/bin/sh\nexec {shutil.which('rsync')} --bwlimit=16384 \"$@\"\n")
    (slow / "rsync").chmod(0o755)
    cli = subprocess.Popen([sys.executable, "-m", "slurmkit", "submit", "single-gpu", "--remote", "login",
                            "--ssh-config", str(pair.config), "--site", "sandbox", "--sync-dir", str(proj),
                            "--remote-dir", str(dest), "--", "true"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, env={**os.environ, "PATH": f"{slow}:{os.environ['PATH']}"},
                           # Ctrl-C reaches a program in a terminal's foreground, where SIGINT is
                           # never ignored; a test run started in the background by a shell without
                           # job control inherits SIGINT ignored (Python then installs no handler)
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    wait_until(lambda: any("rsync" in p for p in _procs_mentioning(str(dest))), 60, 0.1, "the sync to start")
    # rsync under way: some of the file has landed in its temporary file on the login side
    wait_until(lambda: any(f.stat().st_size for f in dest.rglob("*weights.bin*") if f.is_file()), 60, 0.05,
               "rsync to have written part of weights.bin")
    cli.send_signal(signal.SIGINT)                     # what Ctrl-C sends to the foreground process
    out, err = cli.communicate(timeout=60)
    assert cli.returncode != 0 and out == "" and "Aborted" in err
    # nothing of the step survives here or on the login node (the same machine)
    wait_until(lambda: _procs_mentioning(str(dest)) == [], 15, 0.2, "every process of the sync to end",
               lambda: f"left: {_procs_mentioning(str(dest))}")
    assert not (dest / "weights.bin").exists()
    # the run folder was never completed, so nothing was submitted
    assert not list((dest / ".slurmkit").glob("snapshots/*"))


def test_the_submit_spool_keeps_a_bounded_number_of_scripts(pair, tmp_path):
    from slurmkit.remote.backend import SPOOL_KEEP, prune_script, spool_dir

    spool = Path(spool_dir(str(tmp_path)))
    assert spool == tmp_path / ".slurmkit" / "remote-submit"
    spool.mkdir(parents=True)
    for i in range(SPOOL_KEEP + 5):
        for ext in ("sbatch", "jobid"):
            f = spool / f"tok{i:03d}.{ext}"
            f.write_text(f"0 {i}\n")
            os.utime(f, (1_700_000_000 + i, 1_700_000_000 + i))
    Remote("login", str(pair.config)).shell(prune_script(str(spool)), "submit")
    left = sorted(p.name for p in spool.iterdir())
    assert len(left) == 2 * SPOOL_KEEP and left[0] == "tok005.jobid" and left[-1] == f"tok{SPOOL_KEEP + 4:03d}.sbatch"


def test_a_job_handle_names_its_ssh_config(pair):
    from slurmkit.submit import api

    job = api.Job("1", remote="login", ssh_config=str(pair.config))
    assert job.backend.remote.host == "login" and job.backend.remote.ssh_config == str(pair.config)
    assert job.backend.remote.shell("echo $SSH_CONNECTION", "status").stdout.split()[2] == "127.0.0.6"


def test_a_failed_squeue_or_ssh_reaches_the_caller_of_the_job_state_query(pair):
    from slurmkit.remote.backend import RemoteBackend
    from slurmkit.submit import api

    # nosbatch's login shell has no Slurm on its PATH: squeue's failure is the error (not sacct's
    # after squeue's was taken for "no jobs")
    nosbatch = RemoteBackend(Remote("nosbatch", str(pair.config)))
    with pytest.raises(RemoteError, match=r"^nosbatch: status: squeue not found on the host's PATH") as err:
        nosbatch.states(["1"])
    assert err.value.returncode == 127
    # ssh itself failing: the job's state is an error, not UNKNOWN
    job = api.Job("1", RemoteBackend(Remote("closedport", str(pair.config), timeout=20, connect_timeout=3)))
    with pytest.raises(RemoteError, match=r"^closedport: connect: 127\.0\.0\.6 port") as err:
        job.state()
    assert err.value.connection


def test_the_login_node_s_output_keeps_bytes_that_are_not_utf8(pair):
    remote = Remote("login", str(pair.config))
    out = remote.shell("printf 'caf\\351 \\377\\n'", "logs").stdout   # Latin-1 é, a stray 0xff
    assert out.encode(errors="surrogateescape") == b"caf\xe9 \xff\n"
