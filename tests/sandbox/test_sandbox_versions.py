"""A sandbox of the release under test (``scripts/test --slurm VERSION``; 22.05 by default) runs a
2-node GPU job that sacct records COMPLETED with gres/gpu=4; ``sandbox up --slurm`` / ``status`` /
``env`` / ``down --purge`` through the CLI leave no daemon, mount or rootfs lock behind; a rootfs that
cannot be built says why and where (tests/sandbox/test_slurm_releases.py), and a half-built one is
never used."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from slurmkit.sandbox import rootfs
from slurmkit.sandbox.releases import major, release
from slurmkit.slurm.commands import run
from slurmkit.waiting import wait_until

pytestmark = pytest.mark.versions


@pytest.mark.slurm
def test_two_node_gpu_job_is_recorded_completed(sandbox, slurm_release, tmp_path):
    said = run([sandbox.exe("scontrol"), "version"], slurm_conf=str(sandbox.slurm_conf)).stdout.split()
    assert major(said[-1]) == slurm_release.name, said
    job = run([sandbox.exe("sbatch"), "--parsable", "-N2", "--gres=gpu:2", "-o", str(tmp_path / "out"),
               "--wrap", "srun sh -c 'echo $SLURMD_NODENAME $CUDA_VISIBLE_DEVICES'"],
              slurm_conf=str(sandbox.slurm_conf)).stdout.strip()

    def recorded():
        out = run([sandbox.exe("sacct"), "-n", "-X", "-P", "-j", job, "-o", "State,AllocTRES"],
                  slurm_conf=str(sandbox.slurm_conf)).stdout.strip()
        return out if out.startswith(("COMPLETED", "FAILED", "CANCELLED")) else None

    state, alloc = wait_until(recorded, 60, 0.5, f"job {job} recorded by sacct").split("|")
    assert state == "COMPLETED" and "gres/gpu=4" in alloc.split(","), (state, alloc)
    assert sorted((tmp_path / "out").read_text().split("\n")[:2]) == ["n1 0,1", "n2 0,1"]


@pytest.mark.slurm
def test_cli_up_status_env_down_purge_leave_nothing(sandbox, slurm_release, free_sandbox_ports, tmp_path):
    root = tmp_path / "sb"
    cli = [sys.executable, "-m", "slurmkit", "sandbox"]
    up = subprocess.run(cli + ["up", "--slurm", slurm_release.name, "--dir", str(root), "--nodes", "1",
                               "--gpus-per-node", "1", "--port-base", str(free_sandbox_ports), "--no-warmup"],
                        capture_output=True, text=True, timeout=300)
    try:
        assert up.returncode == 0, up.stderr
        status = json.loads(subprocess.run(cli + ["status", "--dir", str(root), "--json"], capture_output=True,
                                           text=True, timeout=60).stdout)
        assert status["up"] and status["slurm"] == slurm_release.name
        assert major(status["slurm_version"]) == slurm_release.name
        env = subprocess.run(cli + ["env", "--dir", str(root)], capture_output=True, text=True, timeout=60).stdout
        if slurm_release.host:
            assert "PATH" not in env
        else:
            # the release's own clients: a 22.05 client is too old for a 24.11 slurmctld
            assert f"export PATH={root}/bin:\"$PATH\"" in env.splitlines()
            ver = subprocess.run(["sh", "-c", f"{env}\nsinfo -V"], capture_output=True, text=True, timeout=60)
            assert major(ver.stdout.split()[-1]) == slurm_release.name, ver
    finally:
        down = subprocess.run(cli + ["down", "--purge", "--dir", str(root)], capture_output=True, text=True,
                              timeout=120)
    assert down.returncode == 0, down.stderr
    assert not root.exists()
    assert subprocess.run(["pgrep", "-f", str(root)], capture_output=True, text=True).stdout.split() == []
    # every rootfs mount lived in a daemon's own mount namespace, gone with it
    assert "slurmkit-" not in Path("/proc/self/mounts").read_text()
    if not slurm_release.host:
        kept = sorted(p.name for p in rootfs.cache_dir().iterdir())
        assert all(n in ("trixie", "sid") or n.endswith(".log") for n in kept), kept   # no lock, no partial


def test_a_rootfs_without_its_manifest_is_never_used(tmp_path):
    """A build cut short (mmdebstrap killed, a full disk) leaves a tree without the manifest that
    _finish writes last: find() does not take it, and ensure() would build anew."""
    (tmp_path / "trixie" / "usr" / "sbin").mkdir(parents=True)
    (tmp_path / "trixie.partial-123" / "usr").mkdir(parents=True)
    assert rootfs.find(release("24.11"), tmp_path) is None
    (tmp_path / "trixie" / rootfs.MANIFEST).parent.mkdir(parents=True)
    (tmp_path / "trixie" / rootfs.MANIFEST).write_text('{"suite": "trixie"}')   # cut mid-write
    assert rootfs.find(release("24.11"), tmp_path) is None
