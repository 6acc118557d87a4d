"""Prolog + epilog on the live path: real pynvml against the fake libnvidia-ml, real processes."""

import json
import os
import shutil
import subprocess

import pytest

from fake_sysfs import sandbox_tree
from nodeenv import Node
from slurmkit.hooks import spool


@pytest.fixture
def node(tmp_path):
    return Node(tmp_path / "node")


def _nvml_index_of(node, slurm_index, gpus=4):
    # the fake library's default minors are reversed NVML order: NVML i has minor gpus-1-i
    minor = os.minor(os.stat(node.dev / f"nvidia{slurm_index}").st_rdev)
    return gpus - 1 - minor


def test_live_prolog_epilog_cleanup_energy_and_accounting(node, fake_nvml, tmp_path):
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) missing")
    acts = tmp_path / "actions.log"
    node.write_config()  # live NVML for every node
    r = node.run(node.prolog, gpus="0", user=("alice", 1000), env=fake_nvml.env("healthy", log=acts, base={}))
    assert r.returncode == 0, r.stderr
    nv = _nvml_index_of(node, 0)
    assert f"set_accounting_mode {nv}" in acts.read_text().replace(":", " ")

    def spawn(uid, job=None):
        env = {"PATH": "/usr/bin:/bin", **({"SLURM_JOB_ID": job} if job else {})}
        prefix = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"] if uid else []
        return subprocess.Popen([*prefix, "sleep", "300"], env=env)

    mine = spawn(1000, "101")          # the job's own leftover
    theirs = spawn(65534, "101")       # another user's
    second = spawn(1000, "202")        # the same user's other job sharing the GPU (shard / MPS)
    unknown = spawn(1000)              # the user's, job unknown
    rooted = spawn(0, "101")           # root's, with the job's id
    procs = [mine, theirs, second, unknown, rooted]
    try:
        env = fake_nvml.env("healthy", log=acts, base={}, energy_mj=123456789 + 9_000_000,
                            procs=",".join(f"{nv}:{p.pid}:100" for p in procs),
                            accounting=f"{nv}:{mine.pid}:80:40:2000:10000")
        r = node.run(node.epilog, gpus="0", user=("alice", 1000), env=env)
        assert r.returncode == 0, r.stderr
        assert mine.wait(timeout=10) == -9           # the job's own leftover process was killed
        for p in procs[1:]:
            assert p.poll() is None, r.stderr        # everything else was left alone, and said so
            assert f"leaving pid {p.pid}" in r.stderr
        assert f"pid {second.pid} belongs to job 202, not 101" in r.stderr
        assert f"pid {unknown.pid} of uid 1000: its job is unknown" in r.stderr
        assert f"pid {rooted.pid} belongs to root: never killed" in r.stderr
        # a job run as root: its root-owned processes are never killed either
        r = node.run(node.epilog, job_id="101", gpus="0", user=("root", 0), env=env)
        assert rooted.poll() is None and f"pid {rooted.pid} belongs to root" in r.stderr
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    log = acts.read_text()
    assert "reset_app_clocks" in log and "reset_locked_clocks" in log
    rec = spool.read(node.spool_dir / spool.file_name("n1"))[0][0]
    assert rec.state_source == "live" and rec.source == "measured"
    assert rec.gpus[0].nvml_index == nv and rec.gpus[0].energy_mj == 9_000_000
    assert rec.accounting == {0: spool.GpuAccounting(gpu_util_pct=80.0, max_memory_mib=2000, processes=1)}
    line = json.loads((node.spool_dir / spool.file_name("n1")).read_text().splitlines()[0])
    assert line["accounting"] == {"0": {"gpu_util_pct": 80.0, "max_memory_mib": 2000, "processes": 1}}


def test_live_gpu_lost_drains_in_observe_reports(node, fake_nvml):
    node.write_config(mode="observe")
    r = node.run(node.prolog, env=fake_nvml.env("gpu_is_lost", lost=2, base={}))
    assert r.returncode == 0
    assert "would drain n1: slurmkit: gpu_lost GPU2" in r.stderr
    assert node.metric("n1", "prolog", "slurmkit_health_check_status", check="gpu_lost", gpu="2") == 2


def test_live_not_supported_is_not_evidence(node, fake_nvml):
    r = node.run(node.prolog, env=fake_nvml.env("not_supported", base={}))
    assert r.returncode == 0, r.stderr
    assert "drain" not in r.stderr.replace("no drain", "")
    # the energy counter is one of the NOT_SUPPORTED values: recorded as unknown, not as 0
    rows = json.loads((node.state_dir / "n1" / "job-101.json").read_text())["gpus"]
    assert [r["start_energy_mj"] for r in rows] == [None, None]


def test_observe_mode_changes_nothing_on_the_node(node, fake_nvml, tmp_path):
    """Observe mode on the live path: no kill, no clock / power-limit / accounting-mode change
    reaches NVML (the fake library logs every setter); each is logged and counted instead."""
    acts = tmp_path / "actions.log"
    node.write_config(mode="observe")
    nv = _nvml_index_of(node, 0)
    r = node.run(node.prolog, gpus="0", user=("alice", 1000), env=fake_nvml.env("healthy", log=acts, base={}))
    assert r.returncode == 0, r.stderr
    assert f"observe mode: would enable accounting on NVML GPU{nv}" in r.stderr
    assert node.metric("n1", "prolog", "slurmkit_hook_observed_actions", action="enable_accounting") == 1
    leftover = subprocess.Popen(["setpriv", "--reuid=1000", "--regid=1000", "--clear-groups", "sleep", "300"],
                                env={"PATH": "/usr/bin:/bin", "SLURM_JOB_ID": "101"})  # the job's own
    try:
        env = fake_nvml.env("healthy", log=acts, base={}, procs=f"{nv}:{leftover.pid}:100")
        r = node.run(node.epilog, gpus="0", user=("alice", 1000), env=env)
        assert r.returncode == 0, r.stderr
        assert leftover.poll() is None  # not killed
        assert f"observe mode: would kill pid {leftover.pid} on NVML GPU{nv}" in r.stderr
        assert "observe mode: would reset app clocks" in r.stderr
        assert node.metric("n1", "epilog", "slurmkit_hook_observed_actions", action="kill") == 1
    finally:
        leftover.kill()
        leftover.wait()
    # nothing reached NVML's setters
    log = acts.read_text() if acts.exists() else ""
    for setter in ("set_accounting_mode", "reset_app_clocks", "reset_locked_clocks", "set_power_limit", "kill"):
        assert setter not in log, log


def test_epilog_restores_the_sites_clock_policy_not_nvmls_defaults(node, fake_nvml, tmp_path):
    """[health] app_clock_*_mhz and power_limit_w: the epilog sets those (never resets the GPU to
    NVML's defaults over the site's values)."""
    acts = tmp_path / "actions.log"
    site = tmp_path / "site.toml"
    site.write_text('extends = "sandbox"\n[health]\napp_clock_mem_mhz = 2619\napp_clock_graphics_mhz = 1755\n'
                    'power_limit_w = 500\n')
    # the sandbox node type lists four InfiniBand HCAs: give the node healthy ones
    sysfs = sandbox_tree(tmp_path / "sys")
    node.write_config(extra=f'profile = "{site}"\n', sysfs={"n1": sysfs})
    nv = _nvml_index_of(node, 0)
    r = node.run(node.epilog, gpus="0", env=fake_nvml.env("healthy", log=acts, base={}))
    assert r.returncode == 0, r.stderr
    log = acts.read_text().splitlines()
    assert f"set_app_clocks_mem {nv} 2619" in log and f"set_app_clocks_graphics {nv} 1755" in log
    assert "reset_app_clocks" not in acts.read_text()
    assert f"set_power_limit_mw {nv} 500000" in log
    assert f"reset_locked_clocks {nv} 0" in log
