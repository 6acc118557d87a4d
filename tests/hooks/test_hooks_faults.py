"""The fault matrix of docs/hooks.md, each with the outcome documented in slurmkit/hooks/flows.py."""

import json
import os
import shutil
import sys
import socket
import threading

import pytest

from nodeenv import set_value, where

from slurmkit.hooks import spool


def _failing(snap, tmp_path):
    bad = set_value(snap, 1, "retired_pages_pending", True)
    p = tmp_path / "failing.json"
    p.write_text(json.dumps(bad))
    return p, next(g for g in bad["gpus"] if g["index"] == 1)


def test_corrupt_snapshot_is_own_trouble(node, healthy, tmp_path):
    path, _ = healthy
    bad = tmp_path / "corrupt.json"
    bad.write_text(path.read_text()[:200])
    node.write_config({"n1": bad})
    for shim, hook in ((node.prolog, "prolog"), (node.healthcheck, "healthcheck")):
        r = node.run(shim)
        assert r.returncode == 0, r.stderr
        assert "own trouble" in r.stderr and str(bad) in r.stderr and "drain" not in r.stderr.replace("no drain", "")
        assert node.metric("n1", hook, "slurmkit_hook_own_errors_total") == 1
    r = node.run(node.prolog)
    assert node.metric("n1", "prolog", "slurmkit_hook_own_errors_total") == 2  # a counter


def test_nvml_hang_drains_with_nvml_timeout_and_returns(node, fake_nvml):
    text = node.cfg_path.read_text().replace("deadline_s = 8.0", "deadline_s = 2.0")
    node.cfg_path.write_text(text.replace('mode = "enforce"', 'mode = "observe"'))
    env = fake_nvml.env("hang_init", base={})
    r = node.run(node.prolog, env=env, timeout=30)  # 30 s: a hook that did not return would fail here
    assert r.returncode == 0, r.stderr
    assert "would drain n1: slurmkit: nvml-timeout" in r.stderr and "nvmlInit" in r.stderr
    assert node.metric("n1", "prolog", "slurmkit_health_check_status", check="nvml_timeout", gpu="") == 2
    # enforce: the drain is attempted (scontrol unreachable here: counted), the job is requeued
    node.cfg_path.write_text(text)
    r = node.run(node.prolog, env=env, timeout=30)
    assert r.returncode == 1
    assert "could not drain n1 (slurmkit: nvml-timeout)" in r.stderr


def test_nvml_missing_on_gpu_node_is_evidence_on_cpu_node_is_not(node):
    node.write_config(mode="observe")  # live NVML: there is no libnvidia-ml on this machine
    if any(os.path.exists(p) for p in ("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", "/usr/lib64/libnvidia-ml.so.1")):
        pytest.skip("this machine has a real NVML")
    r = node.run(node.prolog, timeout=60)
    assert r.returncode == 0 and "would drain n1: slurmkit: nvml_init" in r.stderr
    # a CPU-only node (not in gres.conf: no GPU expected) skips the GPU checks on every run:
    # an info line, never own trouble (SlurmkitHookOwnTrouble would fire forever on every CPU node)
    for shim, hook, env in ((node.prolog, "prolog", {}), (node.healthcheck, "healthcheck", {"job_id": None}),
                            (node.epilog, "epilog", {}), (node.healthcheck, "healthcheck", {"job_id": None})):
        r = node.run(shim, node="cpu1", gpus=None, timeout=60, **env)
        assert r.returncode == 0 and "would drain" not in r.stderr, r.stderr
        assert "own trouble" not in r.stderr and "NVML library not found" not in r.stderr, r.stderr
        assert "no GPUs expected on cpu1 (gres.conf and slurm.conf's Gres= list none): GPU checks skipped" in r.stderr
        assert node.metric("cpu1", hook, "slurmkit_hook_own_errors_total") == 0
        assert node.metric("cpu1", hook, "slurmkit_hook_exit_code") == 0
    assert not (node.textfile_dir / "slurmkit_cpu1_gpus.prom").exists()
    assert not list(node.spool_dir.glob("*.jsonl"))  # a CPU job has no GPU energy to record


def test_nvml_no_permission_is_own_trouble(node, fake_nvml):
    r = node.run(node.prolog, env=fake_nvml.env("no_permission", base={}), timeout=60)
    assert r.returncode == 0, r.stderr
    assert "NO_PERMISSION" in r.stderr and "own trouble" in r.stderr and "drain" not in r.stderr.replace("no drain", "")


def test_permission_denied_on_config_is_own_trouble(node, healthy):
    path, _ = healthy
    node.write_config({"n1": path})
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) missing")
    os.chmod(node.cfg_path, 0o600)  # root only (and pytest's tmp dir is 0700): unreadable for nobody
    import tempfile

    pub = tempfile.mkdtemp(prefix="slurmkit-test-shim-")
    try:
        os.chmod(pub, 0o755)
        shim = shutil.copy(node.prolog, pub)
        # the shim's Python part straight from setpriv (nobody could not exec root's interpreter from
        # the shim's /bin/sh guard; slurmd runs hooks as root)
        r = node.run(shim, prefix=("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-I"))
    finally:
        shutil.rmtree(pub)
    assert r.returncode == 0
    assert "Permission denied" in r.stderr and str(node.cfg_path) in r.stderr and "Traceback" not in r.stderr


def test_scontrol_missing_prolog_still_exits_1_on_evidence(node, healthy, tmp_path):
    path, snap = healthy
    bad, g = _failing(snap, tmp_path)
    node.write_config({"n1": bad})
    r = node.run(node.prolog)
    assert r.returncode == 1
    assert f"slurmkit: retired_pages_pending {where(node, g)}: page retirement pending" in r.stderr
    assert "could not drain" in r.stderr and "not found" in r.stderr
    assert node.metric("n1", "prolog", "slurmkit_hook_own_errors_total") == 1
    assert node.metric("n1", "prolog", "slurmkit_hook_exit_code") == 1
    # the periodic check: never exit 1, still counted
    r = node.run(node.healthcheck, job_id=None, gpus=None)
    assert r.returncode == 0 and "could not drain" in r.stderr


@pytest.fixture
def hanging_controller(tmp_path):
    """A slurm.conf whose controller (127.0.0.1) and munge socket accept connections and never answer."""
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(16)
    sock_path = str(tmp_path / "munge.sock")
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(sock_path)
    unix.listen(16)
    held, stop = [], threading.Event()

    def accept(s):
        s.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(s.accept()[0])
            except OSError:
                pass

    threads = [threading.Thread(target=accept, args=(s,), daemon=True) for s in (tcp, unix)]
    for t in threads:
        t.start()
    conf = tmp_path / "hang.conf"
    conf.write_text(f"ClusterName=t\nSlurmctldHost=hang(127.0.0.1)\nSlurmctldPort={tcp.getsockname()[1]}\n"
                    f"AuthType=auth/munge\nAuthInfo=socket={sock_path}\nMessageTimeout=60\n"
                    f"NodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n")
    yield conf
    stop.set()
    for t in threads:
        t.join()
    for c in held + [tcp, unix]:
        c.close()


def test_scontrol_hanging_is_bounded(node, healthy, tmp_path, hanging_controller):
    if shutil.which("scontrol") is None:
        pytest.skip("Slurm client (scontrol) not installed")
    path, snap = healthy
    bad, _ = _failing(snap, tmp_path)
    node.write_config({"n1": bad}, bin_dir=os.path.dirname(shutil.which("scontrol")),
                      extra="scontrol_timeout_s = 2.0\n")
    r = node.run(node.prolog, env={"SLURM_CONF": str(hanging_controller)}, timeout=30)
    assert r.returncode == 1
    assert "could not drain" in r.stderr and "timed out after 2 s" in r.stderr


def test_spool_disk_full_leaves_no_partial_line(node, healthy):
    path, _ = healthy
    node.write_config({"n1": path})
    assert node.run(node.prolog).returncode == 0
    node.spool_dir.mkdir(mode=0o700)
    os.symlink("/dev/full", node.spool_dir / spool.file_name("n1"))  # every write: ENOSPC
    r = node.run(node.epilog)
    assert r.returncode == 0
    assert "energy spool" in r.stderr and "No space left on device" in r.stderr
    assert node.metric("n1", "epilog", "slurmkit_hook_own_errors_total") == 1


def test_spool_append_truncates_a_failed_write(tmp_path, monkeypatch):
    d = tmp_path / "spool"
    spool.append(d, spool.record("1", "n1", "u", 1, 0.0, 1.0, [], "live"))
    before = (d / spool.file_name("n1")).read_bytes()
    real_write = os.write

    def short_write(fd, data):
        return real_write(fd, data[:10])  # a disk that fills up mid-line

    monkeypatch.setattr(os, "write", short_write)
    with pytest.raises(OSError):
        spool.append(d, spool.record("2", "n1", "u", 1, 0.0, 1.0, [], "live"))
    monkeypatch.undo()
    assert (d / spool.file_name("n1")).read_bytes() == before
    recs, problems = spool.read(d / spool.file_name("n1"))
    assert [r.job_id for r in recs] == ["1"] and problems == []


def test_unreadable_hooks_config_and_bad_toml(node):
    node.cfg_path.write_text("slurm_conf = \n")
    r = node.run(node.prolog)
    assert r.returncode == 0 and str(node.cfg_path) in r.stderr and "line 1" in r.stderr
    node.cfg_path.write_text('slurm_conf = "/x"\nmode = "sometimes"\n')
    r = node.run(node.prolog)
    assert r.returncode == 0 and "mode: want enforce or observe" in r.stderr
    node.cfg_path.unlink()
    r = node.run(node.prolog)
    assert r.returncode == 0 and "No such file" in r.stderr


def test_a_hooks_config_typo_is_counted_on_the_first_run(node, healthy):
    """A typo in the shared hooks config lets jobs run, and every run counts it in the textfile
    the config names (SlurmkitHookOwnTrouble fires on the first run, not after the stale alert)."""
    path, _ = healthy
    node.write_config({"n1": path})
    node.cfg_path.write_text(node.cfg_path.read_text().replace('mode = "enforce"', 'mode = "enforse"'))
    for want in (1, 2):
        r = node.run(node.prolog)
        assert r.returncode == 0 and "mode: want enforce or observe" in r.stderr
        assert node.metric("n1", "prolog", "slurmkit_hook_own_errors_total") == want
        assert node.metric("n1", "prolog", "slurmkit_hook_exit_code") == 0
    # not TOML at all: the folders are still read from their own lines
    node.cfg_path.write_text(f'state_dir = "{node.state_dir}"\ntextfile_dir = "{node.textfile_dir}"\nthis is not toml\n')
    r = node.run(node.prolog)
    assert r.returncode == 0 and "Traceback" not in r.stderr
    assert node.metric("n1", "prolog", "slurmkit_hook_own_errors_total") == 3


def test_bad_gres_conf_is_own_trouble(node, healthy):
    path, _ = healthy
    node.write_config({"n1": path})
    node.gres_conf.write_text("Name=gpu File=/dev/nvidia0\nthis-is-bad\n")
    r = node.run(node.prolog)
    assert r.returncode == 0 and f"{node.gres_conf}:2:" in r.stderr


def test_site_wide_gpu_count_never_drains_a_cpu_only_node(node, tmp_path):
    """[health] expected_gpu_count = 8 in the site profile: the GPU nodes expect 8, a node whose
    gres.conf lists no GPU expects none (no drain for a missing NVML there)."""
    if any(os.path.exists(p) for p in ("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", "/usr/lib64/libnvidia-ml.so.1")):
        pytest.skip("this machine has a real NVML")
    site = tmp_path / "site.toml"
    site.write_text('extends = "sandbox"\n[health]\nexpected_gpu_count = 8\n')
    node.write_config(mode="observe", extra=f'profile = "{site}"\n')
    r = node.run(node.prolog, node="cpu1", gpus=None, timeout=60)
    assert r.returncode == 0 and "would drain" not in r.stderr, r.stderr
    r = node.run(node.prolog, timeout=60)  # a GPU node: NVML missing is evidence
    assert "would drain n1: slurmkit: nvml_init" in r.stderr
