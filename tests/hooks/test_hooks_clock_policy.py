"""The site's clock and power policy through the installed hooks, on the live path: the real
pynvml against the fake libnvidia-ml, which logs every setter it is given (NVML index and the
values). A partition's policy is set on the job's own GPUs only; the epilog puts them back to
the node type's resting policy; observe mode sets nothing; a refused set call is own trouble."""

import json
import os

import pytest

from fake_sysfs import sandbox_tree
from nodeenv import Node
from slurmkit.hooks import clock_policy as cp
from slurmkit.hooks import spool

SITE = """extends = "sandbox"

[clock_policies.rest]
app_clock_mem_mhz = 2619
app_clock_graphics_mhz = 1755
power_limit_w = 650

[clock_policies.steady]
locked_clocks_mhz = [1215, 1410]
locked_mem_clocks_mhz = [2619, 2619]
power_limit_w = 500

[node_types.sandbox-h100x4]
clock_policy = "rest"

[partitions.steady]
nodes = "n[1-4]"
node_type = "sandbox-h100x4"
clock_policy = "steady"
"""


@pytest.fixture
def node(tmp_path):
    n = Node(tmp_path / "node")
    site = tmp_path / "site.toml"
    site.write_text(SITE)
    # the sandbox node type lists four InfiniBand HCAs: give the node healthy ones
    n.sysfs = sandbox_tree(tmp_path / "sys")
    n.site = site
    n.configure = lambda mode="enforce": n.write_config(mode=mode, extra=f'profile = "{site}"\n',
                                                        sysfs={"n1": n.sysfs})
    n.configure()
    return n


def _nv(node, slurm_index, gpus=4):
    # the fake library's default minors are reversed NVML order: NVML i has minor gpus-1-i
    return gpus - 1 - os.minor(os.stat(node.dev / f"nvidia{slurm_index}").st_rdev)


def _log(path):
    return path.read_text().splitlines() if path.exists() else []


def _run(node, fake_nvml, shim, acts, *, job_id, gpus, partition, mode="healthy", **knobs):
    env = {**fake_nvml.env(mode, log=acts, base={}, **knobs), "SLURM_JOB_PARTITION": partition}
    return node.run(shim, job_id=job_id, gpus=gpus, env=env)


def test_partition_policy_on_the_jobs_gpu_only_and_the_epilog_puts_back_the_resting_one(node, fake_nvml, tmp_path):
    """Shared node: job 102 (partition gpu, no policy) holds GPU1 and has a process on it; job
    101 (partition steady) gets GPU0. The prolog sets steady's clocks and power limit on GPU0's
    NVML device only; the epilog sets rest's application clocks and power limit, resets the
    locked GPU and memory clocks, again on that device only."""
    acts = tmp_path / "actions.log"
    mine, other = _nv(node, 0), _nv(node, 1)
    busy = f"{other}:999999:20480"  # job 102's process on its own GPU: normal on a shared node
    r = _run(node, fake_nvml, node.prolog, acts, job_id="102", gpus="1", partition="gpu")
    assert r.returncode == 0, r.stderr
    assert [line for line in _log(acts) if "clocks" in line or "power" in line] == []  # no policy: nothing set
    rec102 = json.loads((node.state_dir / "n1" / "job-102.json").read_text())["policy"]
    assert (rec102["name"], rec102["origin"], rec102["status"]) == ("rest", "node type sandbox-h100x4", "resting")
    acts.unlink(missing_ok=True)

    r = _run(node, fake_nvml, node.prolog, acts, job_id="101", gpus="0", partition="steady", procs=busy)
    assert r.returncode == 0, r.stderr
    assert "own trouble" not in r.stderr, r.stderr
    assert _log(acts) == [f"set_accounting_mode {mine} 1", f"set_locked_clocks {mine} 1215 1410",
                          f"set_mem_locked_clocks {mine} 2619 2619", f"set_power_limit_mw {mine} 500000"]
    rec = json.loads((node.state_dir / "n1" / "job-101.json").read_text())["policy"]
    want = {"locked_clocks_mhz": [1215, 1410], "locked_mem_clocks_mhz": [2619, 2619], "power_limit_w": 500}
    assert rec == {"name": "steady", "origin": "partition steady", "status": "applied", "requested": want,
                   "applied": {"0": want}, "not_applied": {}, "reason": None}
    acts.unlink()

    r = _run(node, fake_nvml, node.epilog, acts, job_id="101", gpus="0", partition="steady", procs=busy)
    assert r.returncode == 0, r.stderr
    assert "own trouble" not in r.stderr, r.stderr
    assert _log(acts) == [f"set_app_clocks_mem {mine} 2619", f"set_app_clocks_graphics {mine} 1755",
                          f"reset_locked_clocks {mine} 0", f"reset_mem_locked_clocks {mine} 0",
                          f"set_power_limit_mw {mine} 650000"]
    assert not any(line.split()[1] == str(other) for line in _log(acts))
    (got,), problems = spool.read(node.spool_dir / spool.file_name("n1"))
    assert problems == [] and got.job_id == "101"
    assert got.policy == cp.JobPolicy(name="steady", origin="partition steady", status="applied",
                                      requested=want, applied={0: want})
    assert got.policy.label == "steady"


def test_observe_mode_sets_no_policy_and_counts_what_it_would(node, fake_nvml, tmp_path):
    acts = tmp_path / "actions.log"
    node.configure(mode="observe")
    nv = _nv(node, 0)
    r = _run(node, fake_nvml, node.prolog, acts, job_id="101", gpus="0", partition="steady")
    assert r.returncode == 0, r.stderr
    assert f"observe mode: would lock GPU clocks to 1215-1410 MHz on NVML GPU{nv}" in r.stderr
    assert f"observe mode: would set the power limit to 500 W on NVML GPU{nv}" in r.stderr
    for action in ("set_locked_clocks", "set_mem_locked_clocks", "set_power_limit"):
        assert node.metric("n1", "prolog", "slurmkit_hook_observed_actions", action=action) == 1
    r = _run(node, fake_nvml, node.epilog, acts, job_id="101", gpus="0", partition="steady")
    assert r.returncode == 0, r.stderr
    assert f"observe mode: would set the power limit to 650 W on NVML GPU{nv}" in r.stderr
    assert node.metric("n1", "epilog", "slurmkit_hook_observed_actions", action="reset_mem_locked_clocks") == 1
    assert _log(acts) == []  # nothing reached NVML's setters
    (got,), _ = spool.read(node.spool_dir / spool.file_name("n1"))
    assert (got.policy.status, got.policy.applied, got.policy.label) == ("not applied", {}, "steady (not applied)")
    assert got.policy.not_applied == {0: {k: "observe mode" for k in ("locked_clocks_mhz", "locked_mem_clocks_mhz",
                                                                       "power_limit_w")}}
    assert got.policy.reason == "requested, not applied: observe mode"


def test_a_refused_set_call_is_own_trouble_and_never_fails_the_job(node, fake_nvml, tmp_path):
    """NO_PERMISSION on the locked clocks: logged and counted as slurmkit's own trouble, no
    drain (scontrol is unreachable here: a drain would show), the prolog exits 0, the other
    settings are still made and the record says what was not applied. At the epilog, a reset
    NVML answers NOT_SUPPORTED has nothing to reset: logged, not trouble."""
    acts = tmp_path / "actions.log"
    nv = _nv(node, 0)
    r = _run(node, fake_nvml, node.prolog, acts, job_id="101", gpus="0", partition="steady",
             set_fail="set_locked_clocks:4")
    assert r.returncode == 0, r.stderr
    assert f"slurmkit's own trouble (no drain): lock GPU clocks to [1215, 1410] MHz (min, max) on GPU{nv}: " \
           "nvmlDeviceSetGpuLockedClocks: NO_PERMISSION" in r.stderr
    assert "drain" not in r.stderr.replace("no drain", "")
    assert node.metric("n1", "prolog", "slurmkit_hook_own_errors_total") == 1
    assert _log(acts) == [f"set_accounting_mode {nv} 1", f"set_mem_locked_clocks {nv} 2619 2619",
                          f"set_power_limit_mw {nv} 500000"]
    rec = json.loads((node.state_dir / "n1" / "job-101.json").read_text())["policy"]
    assert rec["status"] == "partly applied" and rec["not_applied"] == {"0": {"locked_clocks_mhz": "NO_PERMISSION"}}
    assert rec["applied"] == {"0": {"locked_mem_clocks_mhz": [2619, 2619], "power_limit_w": 500}}
    assert rec["reason"] == "requested, partly applied: NO_PERMISSION"
    acts.unlink()

    r = _run(node, fake_nvml, node.epilog, acts, job_id="101", gpus="0", partition="steady",
             set_fail="reset_mem_locked_clocks:3")
    assert r.returncode == 0, r.stderr
    assert "reset locked memory clocks on GPU" in r.stderr and "(nothing to reset)" in r.stderr
    assert "own trouble" not in r.stderr, r.stderr
    assert f"set_power_limit_mw {nv} 650000" in _log(acts) and f"reset_locked_clocks {nv} 0" in _log(acts)
    (got,), _ = spool.read(node.spool_dir / spool.file_name("n1"))
    assert got.policy.label == "steady (partly applied)"


def test_plan_on_shared_gpus_sets_nothing_and_says_why():
    from slurmkit.hooks.gres import JobGpu
    from slurmkit.profile import ClockPolicy

    steady = ClockPolicy("steady", locked_clocks_mhz=(1215, 1410))
    gpus = [JobGpu(0, nvml_index=1, minor=2, uuid="GPU-a", pci_bus_id="0000:19:00.0", file="/dev/nvidia0"),
            JobGpu(2, minor=3, file="/dev/nvidia2")]
    plan, why = cp.plan_job(steady, gpus, shared=False)
    assert plan == [(0, ("set_locked_clocks", 1, None, (1215, 1410)))] and why is None  # GPU2: not in NVML
    plan, why = cp.plan_job(steady, gpus, shared=True)
    assert plan == [] and "shared between jobs" in why
    rec = cp.job_record({"node_type": "t", "resting": None, "job": steady}, "steady", plan, [], why)
    assert (rec.status, rec.applied, rec.label) == ("not applied", {}, "steady (not applied)")
    assert "gres/shard or MPS" in rec.reason
    none = cp.job_record({"node_type": None, "resting": None, "job": None}, "gpu", [], [])
    assert (none.name, none.origin, none.status, none.label) == (None, "none", "resting", "none configured")


def test_spool_policy_round_trip_and_older_lines_still_read(tmp_path):
    steady = cp.JobPolicy(name="steady", origin="partition steady", status="partly applied",
                          requested={"locked_clocks_mhz": [1215, 1410], "power_limit_w": 500},
                          applied={0: {"power_limit_w": 500}, 2: {"locked_clocks_mhz": [1215, 1410], "power_limit_w": 500}},
                          not_applied={0: {"locked_clocks_mhz": "NOT_SUPPORTED"}},
                          reason="requested, partly applied: NOT_SUPPORTED")
    rows = [spool.GpuEnergy(0, 3, 2, "GPU-a", "0000:19:00.0", 1000, 4000), spool.GpuEnergy(2, 1, 3, "GPU-b", "0000:4c:00.0", 10, 20)]
    rec = spool.record("7", "n1", "alice", 1000, 100.0, 200.0, rows, "live", policy=steady)
    path = spool.append(tmp_path, rec)
    # a line written before policies were recorded (no "policy" key), and one whose policy is damaged
    old = {"v": 1, "job_id": "8", "node": "n1", "start_s": 300.0, "end_s": 400.0, "source": "measured",
           "energy_mj_total": 5, "gpus": [{"index": 1, "start_energy_mj": 0, "end_energy_mj": 5, "energy_mj": 5}]}
    with open(path, "a") as fh:
        fh.write(json.dumps(old) + "\n")
        fh.write(json.dumps({**old, "job_id": "9", "policy": {"applied": [1, 2]}}) + "\n")
    recs, problems = spool.read(path)
    assert problems == []
    assert recs[0] == rec and recs[0].policy == steady and recs[0].policy.label == "steady (partly applied)"
    line = json.loads(open(path).readline())
    assert line["policy"]["applied"] == {"0": {"power_limit_w": 500},
                                         "2": {"locked_clocks_mhz": [1215, 1410], "power_limit_w": 500}}
    assert (recs[1].job_id, recs[1].policy, recs[1].energy_mj_total) == ("8", None, 5)
    assert (recs[2].job_id, recs[2].policy, recs[2].measured) == ("9", None, True)  # the energy still counts
    from slurmkit.report.energy import read_spool

    df, _ = read_spool(str(tmp_path))
    assert list(df["policy"]) == ["steady (partly applied)", "none recorded", "none recorded"]


def test_nvml_hanging_in_a_set_call_drains_as_a_hanging_read_does(node, fake_nvml, tmp_path):
    node.write_config(extra=f'profile = "{node.site}"\ndeadline_s = 2.0\n', sysfs={"n1": node.sysfs})
    nv = _nv(node, 0)
    # accounting already on (a record on the job's GPU): the first action is the policy's
    r = _run(node, fake_nvml, node.prolog, tmp_path / "acts.log", job_id="101", gpus="0", partition="steady",
             mode="hang_set", accounting=f"{nv}:1:0:0:0:0")
    assert r.returncode == 1, r.stderr  # enforce: the job is requeued
    assert "nvmlDeviceSetGpuLockedClocks" in r.stderr and "could not drain n1 (slurmkit: nvml-timeout)" in r.stderr
    assert not (node.state_dir / "n1" / "job-101.json").exists()


def test_a_running_jobs_policy_is_what_the_checks_expect_on_its_gpus(node, fake_nvml, tmp_path):
    """Shared node: job 101 (partition steady, power limit 500 W) holds Slurm GPU0. While it
    runs, a health check must not warn that GPU0's power limit is not the resting 650 W; the
    other GPUs are still judged against the resting policy, and a GPU whose job's policy was
    not applied is expected at the resting value."""
    from slurmkit.health.checks import check_power_limit
    from slurmkit.health.config import load_config
    from slurmkit.health.state import GpuState, NodeState
    from slurmkit.hooks import nodestate
    from slurmkit.profile.health import Health

    acts = tmp_path / "actions.log"
    mine, other = _nv(node, 0), _nv(node, 1)
    r = _run(node, fake_nvml, node.prolog, acts, job_id="101", gpus="0", partition="steady")
    assert r.returncode == 0, r.stderr
    records = nodestate.job_records(node.state_dir, "n1")
    assert [j for j, _ in records] == ["101"]
    assert cp.running_expect(records) == {mine: {"power_limit_w": 500}}

    cfg = load_config(Health(power_limit_w=650))
    cfg.expect["gpu_policy"] = cp.running_expect(records)
    gpus = []
    for i, watts in ((mine, 500.0), (other, 500.0)):
        g = GpuState(index=i, uuid=f"GPU-{i}", pci_bus_id=f"0000:{0x19 + i:02x}:00.0")
        g.put("power_limit_w", watts)
        g.put("default_power_limit_w", 700.0)
        gpus.append(g)
    state = NodeState(node="n1", source="test", gpus=gpus, gpu_count=2)
    got = {r.gpu_index: (r.status.value, r.limit) for r in check_power_limit(state, cfg)}
    assert got == {mine: ("pass", 500), other: ("warn", 650)}

    # a policy that was not applied (observe mode) leaves the resting value expected
    rec = records[0][1]
    rec.policy = cp.JobPolicy(name="steady", origin="partition steady", status="not applied",
                              requested={"power_limit_w": 500},
                              not_applied={0: {"power_limit_w": "observe mode"}}).to_json()
    assert cp.running_expect([("101", rec)]) == {}
    # an older record (no policy) or a damaged one: nothing
    rec.policy = None
    assert cp.running_expect([("101", rec)]) == {}
    rec.policy = {"applied": "garbage"}
    assert cp.running_expect([("101", rec)]) == {}


def test_the_hook_gives_its_checks_the_running_jobs_policies(node, fake_nvml, tmp_path):
    """The health check run during job 101 reads the job's record: its checks expect 500 W on
    the job's GPU (the log's power_limit line for that GPU says so), the resting 650 W on the others."""
    acts = tmp_path / "actions.log"
    mine = _nv(node, 0)
    assert _run(node, fake_nvml, node.prolog, acts, job_id="101", gpus="0", partition="steady").returncode == 0
    env = {**fake_nvml.env("healthy", log=acts, base={})}
    r = node.run(node.healthcheck, env=env)
    lines = [ln for ln in r.stderr.splitlines() if "power_limit" in ln]
    assert any(f"GPU{mine}" in ln and "500" in ln for ln in lines), r.stderr
    assert not any(f"GPU{mine}" in ln and "650" in ln for ln in lines), r.stderr


def test_an_unreadable_profile_never_seen_good_leaves_clocks_alone(node, fake_nvml, tmp_path):
    """A typo in the profile on a node that never loaded it: the checks still run (defaults),
    and the epilog does not put NVML's defaults over the site's clocks it cannot know. With a
    profile that loaded before, the epilog restores the last good resting policy."""
    acts = tmp_path / "actions.log"
    mine = _nv(node, 0)
    good = node.site.read_text()
    node.site.write_text(good.replace("[1215, 1410]", "[1410, 1215]"))
    r = _run(node, fake_nvml, node.epilog, acts, job_id="101", gpus="0", partition="steady")
    assert "min 1410 MHz is above max 1215 MHz" in r.stderr and "checking with the defaults" in r.stderr, r.stderr
    assert [ln for ln in _log(acts) if "clock" in ln or "power" in ln] == []
    assert node.metric("n1", "epilog", "slurmkit_health_check_status", check="gpu_count", gpu="") == 0  # judged

    node.site.write_text(good)
    assert _run(node, fake_nvml, node.prolog, acts, job_id="102", gpus="0", partition="gpu").returncode == 0
    node.site.write_text(good.replace("[1215, 1410]", "[1410, 1215]"))
    acts.unlink(missing_ok=True)
    r = _run(node, fake_nvml, node.epilog, acts, job_id="102", gpus="0", partition="gpu")
    assert "checking with the last site profile that loaded" in r.stderr, r.stderr
    assert f"set_power_limit_mw {mine} 650000" in _log(acts)  # the resting policy "rest": 650 W
