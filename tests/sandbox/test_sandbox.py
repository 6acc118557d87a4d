"""The sandbox: a real Slurm cluster on this machine (tests marked ``slurm`` need root + packages)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from slurmkit.sandbox import config
from slurmkit.sandbox.errors import SpecError
from slurmkit.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]


# ----------------------------------------------------------------- pure parts

def test_device_minor_numbers_differ_from_names_and_positions():
    for gpus in (2, 4, 8):
        minors = config.device_minors(gpus)
        assert sorted(minors) == list(range(gpus))
        assert all(minor != k for k, minor in enumerate(minors)), minors
    assert config.device_minors(4)[:2] == [2, 0]  # nvidia0 is minor 2, nvidia1 minor 0


def test_ports_from_one_base():
    ports = config.Ports(7000)
    assert ports.all(2) == {"slurmctld": 7000, "slurmdbd": 7002, "mariadb": 7004, "slurmd-n1": 7011, "slurmd-n2": 7012}


def test_layout_binds_gpus_to_cpus_that_exist():
    spec = config.SandboxSpec(host_cpus=(0, 1))
    layout = config._layout(spec)
    assert [g["cpus"] for g in layout["gpus"]] == [[0], [0], [1], [1]]
    assert [g["numa_node"] for g in layout["gpus"]] == [0, 0, 1, 1]
    wide = config._layout(config.SandboxSpec(host_cpus=tuple(range(8))))
    assert [g["cpus"] for g in wide["gpus"]] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert wide["slurm_node"]["cpus"] == 8


def test_shipped_sandbox_profile_is_the_default_rendering():
    ctx = config.context(config.SandboxSpec(host_cpus=(0, 1)), Path("/x"), "host")
    ctx["device_dir"] = "/dev"
    assert config.render("site.toml", ctx) == (REPO / "site" / "sandbox.toml").read_text()


def test_slurm_conf_uses_loopback_only_and_has_hook_slots():
    ctx = config.context(config.SandboxSpec(nodes=3, port_base=7000, host_cpus=(0, 1)), Path("/sb"), "host")
    text = config.render("slurm.conf", ctx)
    assert "NodeName=n3 NodeAddr=127.0.1.3 Port=7013" in text
    assert "SchedulerParameters=nohold_on_prolog_fail" in text
    assert "cred_expire=10" in text
    assert "#Prolog=" in text and "#HealthCheckProgram=" in text
    import re
    addrs = set(re.findall(r"\b\d+\.\d+\.\d+\.\d+\b", text))
    assert addrs and all(a.startswith("127.") for a in addrs)


def test_bad_counts_are_refused(tmp_path):
    with pytest.raises(ValueError, match="--nodes"):
        config.SandboxSpec(nodes=0).validate()
    with pytest.raises(SpecError, match="--gpu-type"):
        config.SandboxSpec(gpu_type="h100 x").validate()
    # the CLI: one line, exit 1, before anything is started or installed
    r = subprocess.run([sys.executable, "-m", "slurmkit", "sandbox", "up", "--nodes", "0", "--dir", str(tmp_path / "sb")],
                       capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == "slurmkit: error: --nodes must be between 1 and 64, not 0\n"


# ----------------------------------------------------------------- real Slurm

def _slurm(sb, *argv, check=True, timeout=60):
    env = dict(os.environ, **sb.env())
    return subprocess.run(argv, env=env, capture_output=True, text=True, check=check, timeout=timeout)


@pytest.mark.slurm
def test_two_node_gpu_job_sees_its_gpus_and_is_accounted(sandbox, tmp_path):
    script = tmp_path / "two.sh"
    script.write_text("#!/bin/bash\n#SBATCH -N 2\n#SBATCH --ntasks-per-node=1\n#SBATCH --gpus-per-node=2\n"
                      "srun bash -c 'echo \"$(hostname) $SLURMD_NODENAME CVD=$CUDA_VISIBLE_DEVICES\"'\n")
    out = tmp_path / "out.txt"
    job = _slurm(sandbox, "sbatch", "--parsable", "--wait", "-o", str(out), str(script)).stdout.strip()
    lines = sorted(out.read_text().splitlines())
    assert len(lines) == 2
    for line in lines:
        host, node, cvd = line.split()
        assert host == node  # own UTS namespace: hostname is the node name
        assert node in sandbox.node_names
        assert len(cvd.removeprefix("CVD=").split(",")) == 2

    def alloc_tres():
        res = _slurm(sandbox, "sacct", "-n", "-X", "-P", "-j", job, "-o", "State,AllocTRES", check=False)
        return res.stdout.strip() if "COMPLETED" in res.stdout else None

    state, tres = wait_until(alloc_tres, 30, what="sacct record").split("|")
    assert "gres/gpu=4" in tres.split(",")


@pytest.mark.slurm
def test_drain_and_resume_a_node(sandbox):
    _slurm(sandbox, "scontrol", "update", "nodename=n4", "state=drain", "reason=test: drain me")
    wait_until(lambda: "n4|test: drain me" in _slurm(sandbox, "sinfo", "-h", "-R", "-o", "%N|%E").stdout, 10, what="n4 drained")
    _slurm(sandbox, "scontrol", "update", "nodename=n4", "state=resume")
    # back in service (idle, or running another test's job)
    wait_until(lambda: _slurm(sandbox, "sinfo", "-h", "-n", "n4", "-o", "%T").stdout.strip() in ("idle", "mixed", "allocated"), 20, what="n4 back in service")
    assert "n4|" not in _slurm(sandbox, "sinfo", "-h", "-R", "-o", "%N|%E").stdout


@pytest.mark.slurm
def test_up_again_is_idempotent_and_a_second_sandbox_on_the_same_ports_is_refused(sandbox, tmp_path):
    from slurmkit.sandbox import Sandbox, SandboxError

    before = sandbox.daemons()
    Sandbox(sandbox.dir).up()
    assert sandbox.daemons() == before
    other = Sandbox(tmp_path / "other", config.SandboxSpec(port_base=sandbox.spec.port_base,
                                                           host_cpus=sandbox.spec.host_cpus))
    with pytest.raises(SandboxError, match=f"port {sandbox.spec.port_base} .*already in use"):
        other.up()
    assert not (tmp_path / "other" / "var").exists()


@pytest.mark.slurm
def test_cli_up_down_up_leaves_nothing_behind(sandbox):
    """A second, small sandbox through the CLI: up, down (no process left), up again, down --purge."""
    root = Path(tempfile.mkdtemp(prefix="slurmkit-updown-"))
    base = sandbox.spec.port_base + 50
    cli = [sys.executable, "-m", "slurmkit", "sandbox"]
    up = cli + ["up", "--dir", str(root), "--nodes", "2", "--gpus-per-node", "1", "--port-base", str(base), "--no-warmup"]
    try:
        res = subprocess.run(up, capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        assert f"export SLURM_CONF={root}/etc/slurm.conf" in res.stdout
        from slurmkit.sandbox import Sandbox
        small = Sandbox(root)
        pids = [d["pid"] for d in small.daemons()]
        assert len(pids) == 6 and all(pids)
        # a slurmd dies: up restarts only it and keeps the running configuration (with what was
        # added to it, e.g. installed hooks)
        conf = root / "etc" / "slurm.conf"
        conf.write_text(conf.read_text() + "# added after up\n")
        dead = {d["name"]: d["pid"] for d in small.daemons()}["slurmd-n2"]
        os.kill(dead, 9)
        wait_until(lambda: not small.is_up(), 10, what="slurmd-n2 seen dead")
        res = subprocess.run(up, capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        assert "restarting slurmd-n2" in res.stdout + res.stderr
        assert conf.read_text().endswith("# added after up\n")
        again = {d["name"]: d for d in small.daemons()}
        assert all(d["alive"] for d in again.values()) and again["slurmd-n2"]["pid"] != dead
        assert [d["pid"] for n, d in again.items() if n != "slurmd-n2"] == [p for p in pids if p != dead]
        pids = [d["pid"] for d in again.values()]
        status = subprocess.run(cli + ["status", "--dir", str(root), "--json"], capture_output=True, text=True)
        assert status.returncode == 0 and '"up": true' in status.stdout
        # a node left drained (as the demo's health check leaves one) when the sandbox stops:
        # slurmctld recovers it drained; the next up resumes it and says so
        small._slurm("scontrol", "update", "nodename=n2", "state=drain", "reason=test: left drained")
        subprocess.run(cli + ["down", "--dir", str(root)], check=True, capture_output=True, timeout=120)
        from slurmkit.sandbox.cluster import pid_alive
        assert [p for p in pids if pid_alive(p)] == []  # (a zombie awaiting its reaper is not alive)
        stray = subprocess.run(["pgrep", "-f", str(root)], capture_output=True, text=True).stdout.split()
        assert stray == []
        status = subprocess.run(cli + ["status", "--dir", str(root)], capture_output=True, text=True)
        assert status.returncode == 1
        res = subprocess.run(up, capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        assert "n2 was drained when the sandbox last stopped (reason: test: left drained): resumed" \
            in res.stdout + res.stderr
        assert small._node_states() == {"n1": "idle", "n2": "idle"}
        # the daemons die under a running job (kill -9, as a crash): up brings the sandbox back
        # with the job slurmctld recovered, says so, and does not wait for idle nodes
        job = small._slurm("sbatch", "--parsable", "-o", "/dev/null", "--wrap", "sleep 300").stdout.strip()
        wait_until(lambda: small._slurm("squeue", "-h", "-j", job, "-o", "%T").stdout.strip() == "RUNNING", 30,
                   what="the job running")
        # (slurmctld writes its job state a moment after a change: the crash comes after the
        # write that followed a change made once the job ran)
        state = root / "var" / "spool" / "ctld" / "job_state"
        changed = state.stat().st_mtime
        small._slurm("scontrol", "update", f"jobid={job}", "comment=before the crash")
        wait_until(lambda: state.stat().st_mtime > changed, 30, what="job_state saved")
        for d in small.daemons():
            os.kill(d["pid"], 9)
        wait_until(lambda: not any(d["alive"] for d in small.daemons()), 10, what="every daemon dead")
        res = subprocess.run(up, capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stdout + res.stderr
        assert f"1 job(s) recovered from before the stop (squeue: {job} " in res.stdout + res.stderr
        assert small.is_up()
    finally:
        subprocess.run(cli + ["down", "--dir", str(root), "--purge"], capture_output=True, timeout=120)
    assert not root.exists()


def test_profile_of_a_host_whose_usable_cpus_do_not_start_at_zero_loads(tmp_path):
    from slurmkit.profile import load_profile

    ctx = config.context(config.SandboxSpec(host_cpus=(2, 3)), tmp_path, "host")
    path = tmp_path / "site.toml"
    path.write_text(config.render("site.toml", ctx))
    nt = load_profile(path).node_type_for()
    assert [list(g.cpus) for g in nt.gpus] == [[2], [2], [3], [3]]
    assert [g.numa_node for g in nt.gpus] == [1, 1, 1, 1]
