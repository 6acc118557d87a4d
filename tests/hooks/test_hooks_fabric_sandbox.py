"""In the real Slurm sandbox: n3's InfiniBand port goes down (a fake sysfs tree the healthcheck
hook reads beside n3's replayed GPU snapshot), the periodic health check drains n3 with a reason
naming the HCA and port; the port comes back, but n3 returns only once the active check (a
recorded ``dcgmi diag -r 1 -j``) passes: while it fails, n3 stays drained with the failing test
as its reason."""

import os
import shutil
import sys
from pathlib import Path

import pytest

from fake_sysfs import sandbox_tree, set_port
from nodeenv import record_snapshot
from slurmkit.atomicfile import atomic_write
from slurmkit.hooks import install as inst
from slurmkit.hooks.config import render as render_config
from slurmkit.slurm import conf as sconf
from slurmkit.slurm.commands import run
from sandbox_nodes import reconfigure, show_node as _node
from slurmkit.waiting import wait_until

pytestmark = pytest.mark.slurm

INTERVAL_S = 5
RESUME_AFTER = 2
DCGMI = Path(__file__).resolve().parent.parent / "health" / "dcgmi"


@pytest.fixture
def fabric_hooked(sandbox, fake_nvml):
    conf = Path(sandbox.slurm_conf)
    work = Path(sandbox.dir) / "hooks-fabric-test"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    snaps = {}
    for n in sandbox.node_names:
        snaps[n] = work / f"{n}.json"
        record_snapshot(fake_nvml, snaps[n], node=n)
    sys3 = sandbox_tree(work / "n3-sys")
    diag3 = work / "n3-diag.json"
    shutil.copy(DCGMI / "dcgm3-pass.txt", diag3)
    dirs = {k: work / k for k in ("state", "spool", "textfile")}
    text = render_config(conf, gres_conf=conf.parent / "gres.conf", profile=sandbox.profile_path,
                         state_dir=dirs["state"], spool_dir=dirs["spool"], textfile_dir=dirs["textfile"],
                         resume_after=RESUME_AFTER, snapshots=snaps, sysfs={"n3": sys3}, dcgm_diag={"n3": diag3},
                         slurm_bin_dir=os.path.dirname(shutil.which("scontrol")))
    spec = inst.InstallSpec(python=sys.executable, config=text, interval_s=INTERVAL_S, timeout_s=60)
    inst.apply(inst.plan_install(sconf.load_tree(conf), spec), conf, installing=True)
    (conf.parent / inst.CONFIG).write_text(text)
    reconfigure(sandbox)
    yield {"conf": conf, "sys3": sys3, "diag3": diag3, **dirs}
    for n in sandbox.node_names:
        run(["scontrol", "update", f"nodename={n}", "state=resume"], slurm_conf=str(conf), timeout=30, check=False)
    inst.apply(inst.plan_uninstall(sconf.load_tree(conf), inst.read_manifest(conf)), conf, installing=False)
    reconfigure(sandbox)


def test_ib_port_down_drains_naming_the_port_and_resumes_only_after_the_active_check(sandbox, fabric_hooked):
    conf, sys3, diag3 = fabric_hooked["conf"], fabric_hooked["sys3"], fabric_hooked["diag3"]
    hc3 = fabric_hooked["textfile"] / "slurmkit_n3_healthcheck.prom"
    wait_until(hc3.exists, 60, what="a health check on n3")
    assert _node(conf, "n3")["reason"] is None
    # the ports passed: a pass writes no per-check series, only the run's passed count (the port
    # going down below shows they are judged)
    text = hc3.read_text()
    assert 'check="ib_port"' not in text and "slurmkit_health_checks_passed" in text, text
    set_port(sys3, "mlx5_2", state="DOWN", phys="Polling")
    want = "slurmkit: ib mlx5_2/1: down (DOWN/Polling)"
    got = wait_until(lambda: (_node(conf, "n3")["reason"] or "").startswith("slurmkit:")
                and _node(conf, "n3"), 60, what="n3 drained by slurmkit")
    assert got["reason"] == want and "DRAIN" in got["state"]
    # the port comes back, but the GPU self-test now fails: n3 stays out, the failing test its reason
    atomic_write(diag3, (DCGMI / "dcgm3-fail-memory.json").read_text())
    set_port(sys3, "mlx5_2")
    got = wait_until(lambda: "dcgm_diag" in (_node(conf, "n3")["reason"] or "")
                and _node(conf, "n3"), INTERVAL_S * (RESUME_AFTER + 4) + 30, what="the active check's reason")
    assert got["reason"].startswith("slurmkit: dcgm_diag: GPU1 GPU Memory: fail (") and "DRAIN" in got["state"]
    # the self-test passes: n3 returns after resume_after clean checks and a passing active check
    atomic_write(diag3, (DCGMI / "dcgm3-pass.txt").read_text())
    wait_until(lambda: "DRAIN" not in _node(conf, "n3")["state"], INTERVAL_S * (RESUME_AFTER + 4) + 30, what="n3 resumed")
    assert _node(conf, "n3")["reason"] is None
    for n in ("n1", "n2", "n4"):
        assert _node(conf, n)["reason"] is None  # no sysfs tree: their ports are not judged
