"""``slurmkit submit --remote`` end to end: a laptop-side submit through a real jump host to a
real login node (two sshd, ``tests/sshpair.py``) whose sessions reach the Slurm sandbox
(sshd ``SetEnv SLURM_CONF=... SLURMKIT_SITE=...``): a 2-node torchrun job, then status, logs
and cancel through the same jump host."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import sshpair
from conftest import _unavailable
from slurmkit.remote import Remote
from slurmkit.submit import api
from ranks import REPORT, check_ranks, profile  # noqa: F401  (profile: a fixture)

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(400)]


@pytest.fixture(scope="module")
def pair(sandbox):
    reason = sshpair.missing_reason()
    if reason:
        _unavailable(reason)
    p = sshpair.start(login_env=sandbox.env())
    yield p
    Remote("login", str(p.config)).close()
    p.stop()


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
    assert f"#SBATCH --chdir={rdir}" in ex.stdout and "<- --remote-dir" in ex.stdout
    assert "#SBATCH --partition=gpu" in ex.stdout and "<- remote profile (login) partitions.gpu" in ex.stdout
    assert not rdir.exists()                     # explaining syncs nothing

    sub = slurmkit("submit", "torchrun", *common, "-N", "2", "-t", "5:00", "-o", "job-%j.out",
                   "--", sys.executable, "report.py", ".")
    assert sub.returncode == 0, sub.stderr
    job_id = sub.stdout.strip()
    assert job_id.isdigit()
    assert (rdir / "report.py").read_text() == REPORT and not (rdir / "data").exists()

    job = api.Job(job_id, remote=Remote("login", cfg))
    assert job.wait(timeout=240, poll_s=2) == "COMPLETED", (rdir / f"job-{job_id}.out").read_text()[-3000:]
    check_ranks(rdir, profile, 2, gpn)

    st = slurmkit("status", "--remote", "login", "--ssh-config", cfg, job_id, "--json")
    assert st.returncode == 0, st.stderr
    got = json.loads(st.stdout)
    assert got["state"] == "COMPLETED" and got["exit_code"] == "0:0" and got["gpus"] == 2 * gpn
    assert len(got["nodes"]) == 2 and set(got["nodes"]) <= set(sandbox.node_names)

    logs = slurmkit("logs", "--remote", "login", "--ssh-config", cfg, job_id)
    assert logs.returncode == 0, logs.stderr
    assert f"rank 0 of {2 * gpn} reporting" in logs.stdout
    assert logs.stdout == (rdir / f"job-{job_id}.out").read_text()
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


def test_sbatch_refusal_is_a_submit_step_error(sandbox, pair, tmp_path):
    cfg = str(pair.config)
    proc = slurmkit("submit", "single-gpu", "--remote", "login", "--ssh-config", cfg, "--sync-dir", str(tmp_path),
                    "--remote-dir", str(tmp_path / "r"), "-w", "n9", "--", "true")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith("slurmkit: error: login: submit: sbatch refused the job (exit 1): ")
    assert "Invalid node name" in proc.stderr and proc.stderr.count("\n") == 1
