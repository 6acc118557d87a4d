"""``slurmkit submit --remote`` end to end: a laptop-side submit through a real jump host to a
real login node (two sshd, ``tests/sshpair.py``) whose sessions reach the Slurm sandbox
(sshd ``SetEnv SLURM_CONF=... SLURMKIT_SITE=...``): a 2-node torchrun job, then status, logs
and cancel through the same jump host."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import sshpair
from slurmkit.remote import Remote
from slurmkit.submit import api
from ranks import REPORT, check_ranks, profile  # noqa: F401  (profile: a fixture)

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(400)]


@pytest.fixture(scope="module")
def login_home(tmp_path_factory):
    """The login sessions' $HOME: not the folder sshd starts them in (the passwd home)."""
    return tmp_path_factory.mktemp("login-home")


@pytest.fixture(scope="module")
def pair(sandbox, login_home):
    with sshpair.running(login_env={**sandbox.env(), "HOME": str(login_home)}) as p:
        yield p


def slurmkit(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "slurmkit", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def test_remote_torchrun_two_nodes_then_status_and_logs(sandbox, pair, profile, tmp_path):  # noqa: F811
    gpn = profile[1]["gpu_count"]
    proj = tmp_path / "proj"
    (proj / "data").mkdir(parents=True)
    (proj / "report.py").write_text(REPORT)
    (proj / ".gitignore").write_text("data/\n")
    (proj / "data" / "shard0").write_text("not sent")
    rdir = tmp_path / "cluster-side" / "proj"
    cfg = str(pair.config)
    common = ["--remote", "login", "--ssh-config", cfg, "--sync-dir", str(proj), "--remote-dir", str(rdir)]
    Remote("login", cfg).close()
    logins = pair.accepted("login")

    # --explain: the profile is the one SLURMKIT_SITE names on the login node
    ex = slurmkit("submit", "torchrun", *common, "-N", "2", "--explain", "--", sys.executable, "report.py", ".")
    assert ex.returncode == 0, ex.stderr
    assert f"# site profile: login:{sandbox.profile_path}  <- SLURMKIT_SITE on login" in ex.stdout
    assert f"#SBATCH --chdir={rdir}/slurmkit-runs/" in ex.stdout and "(snapshot of the synced tree)" in ex.stdout
    assert "#SBATCH --partition=gpu" in ex.stdout and "<- remote profile (login) partitions.gpu" in ex.stdout
    assert not rdir.exists()                     # explaining syncs nothing

    sub = slurmkit("submit", "torchrun", *common, "-N", "2", "-t", "5:00", "-o", "job-%j.out",
                   "--", sys.executable, "report.py", ".")
    assert sub.returncode == 0, sub.stderr
    job_id = sub.stdout.strip()
    assert job_id.isdigit()
    assert (rdir / "report.py").read_text() == REPORT and not (rdir / "data").exists()
    [run] = (rdir / "slurmkit-runs").iterdir()         # the job's own snapshot: code and outputs
    assert (run / "report.py").read_text() == REPORT and not (run / "data").exists()

    job = api.Job(job_id, remote=Remote("login", cfg))
    assert job.wait(timeout=240, poll_s=2) == "COMPLETED", (run / f"job-{job_id}.out").read_text()[-3000:]
    check_ranks(run, profile, 2, gpn)

    st = slurmkit("status", "--remote", "login", "--ssh-config", cfg, job_id, "--json")
    assert st.returncode == 0, st.stderr
    got = json.loads(st.stdout)
    assert got["state"] == "COMPLETED" and got["exit_code"] == "0:0" and got["gpus"] == 2 * gpn
    assert len(got["nodes"]) == 2 and set(got["nodes"]) <= set(sandbox.node_names)

    logs = slurmkit("logs", "--remote", "login", "--ssh-config", cfg, job_id)
    assert logs.returncode == 0, logs.stderr
    assert f"rank 0 of {2 * gpn} reporting" in logs.stdout
    assert logs.stdout == (run / f"job-{job_id}.out").read_text()
    # every step above (explain, submit, wait, status, logs) rode one authenticated connection
    assert pair.accepted("login") == logins + 1


def test_api_remote_submit_follow_and_cancel(sandbox, pair, tmp_path):
    cfg = str(pair.config)
    remote = Remote("login", cfg)
    proj = tmp_path / "p"
    proj.mkdir()
    job = api.submit("single-gpu", ["bash", "-c", "echo started; echo done"], remote=remote, sync_dir=str(proj),
                     remote_dir=str(tmp_path / "r"), output="out-%j.txt", signal_s=0)
    follow = slurmkit("logs", "--remote", "login", "--ssh-config", cfg, job.id, "--follow")
    assert follow.returncode == 0, follow.stderr
    assert follow.stdout.splitlines()[-2:] == ["started", "done"]
    assert job.state() == "COMPLETED"

    sleeper = api.submit("single-gpu", ["sleep", "300"], remote=remote, sync=False, remote_dir=str(tmp_path / "r"),
                         output="/dev/null", signal_s=0)
    sleeper.wait(timeout=60, poll_s=1, until={"RUNNING"})
    sleeper.cancel()
    assert sleeper.wait(timeout=60, poll_s=1) == "CANCELLED"
    st = slurmkit("status", "--remote", "login", "--ssh-config", cfg, sleeper.id)
    assert st.returncode == 0 and st.stdout.split()[:2] == [sleeper.id, "CANCELLED"]


def test_local_logs_print_and_follow_through_slurms_commands(sandbox, tmp_path):
    """The same without --remote: squeue/scontrol/sacct through slurm.commands (local backend)."""
    env = {**os.environ, **sandbox.env()}
    job = api.submit("single-gpu", ["bash", "-c", "echo started; sleep 3; echo done"], env=sandbox.env(),
                     site=str(sandbox.profile_path), chdir=str(tmp_path), output=str(tmp_path / "out-%j.txt"),
                     signal_s=0)
    follow = subprocess.run([sys.executable, "-m", "slurmkit", "logs", job.id, "--follow"], capture_output=True,
                            text=True, timeout=120, env=env)
    assert follow.returncode == 0, follow.stderr
    assert follow.stdout.splitlines()[-2:] == ["started", "done"]
    printed = subprocess.run([sys.executable, "-m", "slurmkit", "logs", job.id], capture_output=True, text=True,
                             timeout=60, env=env)
    assert printed.returncode == 0 and printed.stdout == (tmp_path / f"out-{job.id}.txt").read_text() == "started\ndone\n"
    unknown = subprocess.run([sys.executable, "-m", "slurmkit", "logs", "999999"], capture_output=True, text=True,
                             timeout=60, env=env)
    assert unknown.returncode == 1 and "job 999999: unknown to scontrol and sacct" in unknown.stderr


def test_sbatch_refusal_is_a_submit_step_error(sandbox, pair, tmp_path):
    cfg = str(pair.config)
    proc = slurmkit("submit", "single-gpu", "--remote", "login", "--ssh-config", cfg, "--sync-dir", str(tmp_path),
                    "--remote-dir", str(tmp_path / "r"), "-w", "n9", "--", "true")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith("slurmkit: error: login: submit: sbatch refused the job (exit 1): ")
    assert "Invalid node name" in proc.stderr and proc.stderr.count("\n") == 1


SHOW = """\
import os
print("cwd", os.getcwd())
print("config", open("../config.yaml").read().strip())
"""


def test_a_queued_job_runs_the_code_it_was_submitted_with(sandbox, pair, profile, tmp_path, login_home):  # noqa: F811
    """Submit A behind a blocker, edit the config, submit B: A still reads the old config, from
    its own run folder; the job keeps the login shell's umask; the cleanup of old runs leaves
    a queued job's code and every run's outputs alone."""
    from slurmkit.remote import sync as rsync_

    gpn = profile[1]["gpu_count"]
    cfg = str(pair.config)
    remote = Remote("login", cfg)
    proj = tmp_path / "myproj"
    (proj / "scripts").mkdir(parents=True)
    env = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", "init", "-q", str(proj)], check=True, env=env, timeout=30)
    (proj / "config.yaml").write_text("version: A\n")
    (proj / "scripts" / "show.py").write_text(SHOW)
    rdir = tmp_path / "cluster" / "myproj"
    node = sandbox.node_names[0]
    (tmp_path / "b").mkdir()
    blocker = api.submit("single-gpu", ["sleep", "300"], remote=remote, sync=False, remote_dir=str(tmp_path / "b"),
                         nodelist=node, gpus_per_node=gpn, output="/dev/null", signal_s=0)
    assert blocker.remote is remote
    try:
        blocker.wait(timeout=60, poll_s=1, until={"RUNNING"})
        common = ["--remote", "login", "--ssh-config", cfg, "--remote-dir", str(rdir), "-o", "out-%j.txt"]
        cmd = ["--", "sh", "-c", f"umask; {sys.executable} show.py"]
        a = slurmkit("submit", "single-gpu", *common, "-w", node, *cmd, cwd=proj / "scripts")
        assert a.returncode == 0, a.stderr
        job_a = a.stdout.strip()
        assert api.Job(job_a, remote=remote).state() == "PENDING"
        pending = slurmkit("status", "--remote", "login", "--ssh-config", cfg, job_a)
        assert pending.stdout.split()[:2] == [job_a, "PENDING"] and "exit=-" in pending.stdout
        (proj / "config.yaml").write_text("version: B\n")
        b = slurmkit("submit", "single-gpu", *common, *cmd, cwd=proj / "scripts")
        assert b.returncode == 0, b.stderr
        job_b = api.Job(b.stdout.strip(), remote=remote)
        assert job_b.wait(timeout=120, poll_s=1) == "COMPLETED"
        # cleanup keeping only the newest run: B's code goes (its job ended), A's stays (queued)
        rsync_.finish_run(remote, str(rdir), "99999999T999999Z-zzzzzz", copy_tree=True, keep=1)
        runs = rdir / "slurmkit-runs"
        by_job = {}
        for out in runs.glob("*/scripts/out-*.txt"):
            by_job[out.name[4:-4]] = out.parent.parent
        assert not (by_job[job_b.id] / "config.yaml").exists()
        assert (by_job[job_b.id] / "scripts" / f"out-{job_b.id}.txt").exists()
        run_a = [r for r in runs.iterdir() if r.name not in (by_job[job_b.id].name, "99999999T999999Z-zzzzzz")]
        assert len(run_a) == 1 and (run_a[0] / "config.yaml").read_text() == "version: A\n"
    finally:
        blocker.cancel()
    job = api.Job(job_a, remote=remote)
    assert job.wait(timeout=120, poll_s=1) == "COMPLETED"
    out_a = slurmkit("logs", "--remote", "login", "--ssh-config", cfg, job_a).stdout.splitlines()
    out_b = (by_job[job_b.id] / "scripts" / f"out-{job_b.id}.txt").read_text().splitlines()
    login_umask = remote.shell("umask", "status").stdout.strip()
    assert out_a[0] == login_umask and out_b[0] == login_umask
    assert out_a[1] == f"cwd {run_a[0]}/scripts" and out_a[2] == "config version: A"
    assert out_b[2] == "config version: B"
    done = slurmkit("status", "--remote", "login", "--ssh-config", cfg, job_a)
    assert "exit=0:0" in done.stdout
    # the submitted scripts were kept under the login shell's $HOME, each with its job id
    markers = [f.read_text().split() for f in (login_home / ".slurmkit" / "remote-submit").glob("*.jobid")]
    jobids = {w[1] for w in markers if len(w) > 1}
    assert {job_a, job_b.id, blocker.id} <= jobids
