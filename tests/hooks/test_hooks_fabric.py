"""The InfiniBand checks inside the hooks (no Slurm: observe mode, scontrol not reachable): the
profile's node type names the HCAs, ``[nodes.n1] sysfs`` the fake tree beside the replayed GPU
snapshot; counters kept between runs in the state directory; an unreadable tree is own trouble."""

from __future__ import annotations

import json
from pathlib import Path

from fake_sysfs import healthy_tree, sandbox_tree, set_port

HCAS = ("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3")  # the sandbox profile's compute HCAs


def _setup(node, healthy, tmp_path, mode="observe"):
    path, _ = healthy
    site = tmp_path / "site.toml"
    site.write_text(f'extends = "sandbox"\n[health]\nmode = "{mode}"\n')
    root = sandbox_tree(tmp_path / "sys")
    node.write_config({"n1": path}, mode=None, extra=f'profile = "{site}"\n', sysfs={"n1": root})
    return root


def test_port_down_would_drain_naming_the_port(node, healthy, tmp_path):
    root = _setup(node, healthy, tmp_path)
    r = node.run(node.healthcheck, job_id=None, gpus=None)
    assert r.returncode == 0 and "would drain" not in r.stderr and "own trouble" not in r.stderr, r.stderr
    assert node.metric("n1", "healthcheck", "slurmkit_health_check_status", check="ib_port", gpu="") == 0
    set_port(root, "mlx5_2", state="DOWN", phys="Polling")
    r = node.run(node.healthcheck, job_id=None, gpus=None)
    assert "observe mode: would drain n1: slurmkit: ib mlx5_2/1: down (DOWN/Polling)" in r.stderr
    assert "fail: ib_port mlx5_2/1: down (DOWN/Polling)" in r.stderr  # the log names the check id
    # the result names the HCA and port as node_exporter's infiniband collector labels them
    assert node.metric("n1", "healthcheck", "slurmkit_health_check_status", check="ib_port", gpu="",
                       device="mlx5_2", port="1") == 2


def test_prolog_fails_the_job_start_on_a_slow_port_in_enforce_mode(node, healthy, tmp_path):
    root = _setup(node, healthy, tmp_path, mode="enforce")
    set_port(root, "mlx5_0", rate=200)
    r = node.run(node.prolog)
    assert r.returncode == 1  # hardware evidence; the drain itself is own trouble here (no scontrol)
    assert "could not drain n1 (slurmkit: ib mlx5_0/1: 200 of 400 Gb/s)" in r.stderr


def test_counters_rise_between_hook_runs(node, healthy, tmp_path):
    root = _setup(node, healthy, tmp_path)
    node.run(node.healthcheck, job_id=None, gpus=None)
    kept = json.loads((node.state_dir / "n1" / "port-counters.json").read_text())
    assert set(kept["ib"]) == {f"{h}/1" for h in (*HCAS, "mlx5_4")}  # the storage NIC's counters too
    set_port(root, "mlx5_3", counters={"symbol_error": 3})
    r = node.run(node.prolog)
    assert "warn: ib_counters mlx5_3/1: symbol_error +3" in r.stderr and "would drain" not in r.stderr
    # the thresholds in words, not a Python dict
    assert "limit ib_counter_rise_fail 100, ib_link_downed_rise_fail " in r.stderr and "{'" not in r.stderr, r.stderr
    r = node.run(node.healthcheck, job_id=None, gpus=None)
    assert "ib_counters" not in r.stderr  # no new errors since the prolog


def test_a_node_the_profile_does_not_list_is_said_not_passed_in_silence(node, healthy, tmp_path):
    path, _ = healthy
    site = tmp_path / "site.toml"
    site.write_text('extends = "sandbox"\n[health]\nmode = "observe"\n[partitions.gpu]\nnodes = "n[2-4]"\n'
                    'node_type = "sandbox-h100x4"\ndefault = true\n[fabric]\n[[fabric.leaves]]\nname = "leaf1"\n'
                    'nodes = "n[2-4]"\n[[fabric.spines]]\nname = "spine1"\nswitches = ["leaf1"]\n')
    root = healthy_tree(tmp_path / "sys", hcas=HCAS)
    set_port(root, "mlx5_2", state="DOWN", phys="Polling")  # would drain n1, were its HCAs known
    node.write_config({"n1": path}, mode=None, extra=f'profile = "{site}"\n', sysfs={"n1": root})
    r = node.run(node.healthcheck, job_id=None, gpus=None)
    assert r.returncode == 0 and "would drain" not in r.stderr, r.stderr
    assert "warn: node_type: no node type for this node: fabric judged by what the kernel lists" in r.stderr
    assert node.metric("n1", "healthcheck", "slurmkit_health_check_status", check="node_type", gpu="") == 1
    # its ports are judged by what the kernel lists: the one down warns, names itself, drains nothing
    assert "warn: ib_port mlx5_2/1: down (DOWN/Polling)" in r.stderr, r.stderr
    assert node.metric("n1", "healthcheck", "slurmkit_health_check_status", check="ib_port", gpu="",
                       device="mlx5_2", port="1") == 1


def test_unreadable_sysfs_is_own_trouble_not_a_drain(node, healthy, tmp_path):
    _setup(node, healthy, tmp_path)
    node.write_config({"n1": healthy[0]}, mode=None, extra=f'profile = "{tmp_path / "site.toml"}"\n',
                      sysfs={"n1": tmp_path / "nowhere"})
    r = node.run(node.healthcheck, job_id=None, gpus=None)
    assert r.returncode == 0 and "would drain" not in r.stderr
    assert "own trouble (no drain): sysfs" in r.stderr
    assert node.metric("n1", "healthcheck", "slurmkit_hook_own_errors_total") == 1


DCGMI = Path(__file__).resolve().parent.parent / "health" / "dcgmi"


def _idle_active_check(node, healthy, tmp_path, recorded: str):
    """Observe mode, the active check due every hour on an idle node, replaying ``recorded``
    (tests/health/dcgmi); returns (site profile, the replayed output's path)."""
    path, _ = healthy
    site = tmp_path / "site.toml"
    site.write_text('extends = "sandbox"\n[health]\nmode = "observe"\nactive_interval_s = 3600\n')
    diag = tmp_path / "diag.json"
    diag.write_text((DCGMI / recorded).read_text())
    node.write_config({"n1": path}, mode=None, extra=f'profile = "{site}"\n', dcgm_diag={"n1": diag})
    return site, diag


def test_active_check_on_an_idle_node_at_its_interval(node, healthy, tmp_path):
    site, _ = _idle_active_check(node, healthy, tmp_path, "dcgm3-fail-memory.json")
    (node.state_dir / "n1").mkdir(parents=True)
    (node.state_dir / "n1" / "job-55.json").write_text('{"gpus": []}')  # a job is running here
    r = node.run(node.healthcheck, job_id=None, gpus=None)
    assert "node is busy" in r.stderr and "would drain" not in r.stderr
    (node.state_dir / "n1" / "job-55.json").unlink()
    r = node.run(node.healthcheck, job_id=None, gpus=None)
    assert "would drain n1: slurmkit: dcgm_diag: GPU1 GPU Memory: fail (" in r.stderr, r.stderr
    assert json.loads((node.state_dir / "n1" / "active.json").read_text())["status"] == "fail"
    r = node.run(node.healthcheck, job_id=None, gpus=None)
    assert "dcgm_diag" not in r.stderr  # not again before active_interval_s
    site.write_text(site.read_text().replace("3600", "0"))
    (node.state_dir / "n1" / "active.json").unlink()
    r = node.run(node.healthcheck, job_id=None, gpus=None)
    assert "dcgm_diag" not in r.stderr  # 0: only before a resume


def test_active_check_dcgm4_setting_warns_and_no_result_is_retried_next_run(node, healthy, tmp_path):
    _, diag = _idle_active_check(node, healthy, tmp_path, "no-hostengine.txt")
    r = node.run(node.healthcheck, job_id=None, gpus=None)
    assert "active check: dcgmi" not in r.stderr and "Unable to connect to host engine" in r.stderr, r.stderr
    rec = json.loads((node.state_dir / "n1" / "active.json").read_text())
    assert rec["status"] == "error" and rec["last_s"] == 0 and rec["error_s"] > 0
    # the next health check tries again (no whole interval lost); DCGM 4 on a GB10 with
    # persistence mode off: a setting (severity CONFIG) warns, nothing is drained
    diag.write_text((DCGMI / "dcgm4-gb10-r1-persistence-off.json").read_text())
    r = node.run(node.healthcheck, job_id=None, gpus=None)
    assert "active check warn on an idle node" in r.stderr and "persistence mode" in r.stderr.lower(), r.stderr
    assert "would drain" not in r.stderr
    assert json.loads((node.state_dir / "n1" / "active.json").read_text())["status"] == "warn"


def test_bandwidth_floor_joins_the_active_check(node, healthy, tmp_path):
    from pathlib import Path

    data = Path(__file__).resolve().parent.parent / "health"
    path, _ = healthy
    site = tmp_path / "site.toml"
    site.write_text('extends = "sandbox"\n[health]\nmode = "observe"\nactive_interval_s = 60\n'
                    'nccl_busbw_min_gbps = 350\n')
    node.write_config({"n1": path}, mode=None, extra=f'profile = "{site}"\n',
                      dcgm_diag={"n1": data / "dcgmi" / "dcgm3-pass.txt"})
    text = node.cfg_path.read_text() + f'nccl_allreduce = "{data / "nccl" / "h100x8-slow.txt"}"\n'
    node.cfg_path.write_text(text)  # appended to the [nodes.n1] table, which comes last
    r = node.run(node.healthcheck, job_id=None, gpus=None)
    assert "would drain n1: slurmkit: nccl_allreduce: nccl all_reduce busbw: fail (191.69 GB/s below 350 GB/s)" \
        in r.stderr, r.stderr
    assert "active check part dcgm_diag: pass" in r.stderr
