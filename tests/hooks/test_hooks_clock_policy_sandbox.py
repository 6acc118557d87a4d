"""In the real Slurm sandbox: the site profile gives partition ``gpu`` a clock policy; a job runs
there through slurmd with the hooks installed, and its spool line records the policy it was
given (SLURM_JOB_PARTITION reached the prolog), per GPU: the nodes replay recorded snapshots, so
the prolog set nothing on the host and says so ("requested, not applied")."""

import os
import shutil
import sys
from pathlib import Path

import pytest

from nodeenv import record_snapshot
from sandbox_nodes import reconfigure
from slurmkit.hooks import install as inst, spool
from slurmkit.hooks.config import render as render_config
from slurmkit.slurm import conf as sconf
from slurmkit.slurm.commands import run
from slurmkit.waiting import wait_until

pytestmark = pytest.mark.slurm


@pytest.fixture
def policy_hooked(sandbox, fake_nvml):
    conf = Path(sandbox.slurm_conf)
    work = Path(sandbox.dir) / "hooks-policy-test"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    site = work / "site.toml"
    site.write_text(f'extends = "{sandbox.profile_path}"\n\n[clock_policies.steady]\n'
                    'locked_clocks_mhz = [1215, 1410]\npower_limit_w = 500\n\n'
                    '[partitions.gpu]\nclock_policy = "steady"\n')
    snaps = {n: work / f"{n}.json" for n in sandbox.node_names}
    for n, path in snaps.items():
        record_snapshot(fake_nvml, path, node=n)
    dirs = {k: work / k for k in ("state", "spool", "textfile")}
    text = render_config(conf, gres_conf=conf.parent / "gres.conf", profile=site, state_dir=dirs["state"],
                         spool_dir=dirs["spool"], textfile_dir=dirs["textfile"], snapshots=snaps,
                         slurm_bin_dir=os.path.dirname(shutil.which("scontrol")))
    spec = inst.InstallSpec(python=sys.executable, config=text, interval_s=30, timeout_s=60)
    inst.apply(inst.plan_install(sconf.load_tree(conf), spec), conf, installing=True)
    (conf.parent / inst.CONFIG).write_text(text)
    # (waits for every slurmd: a job started at once on n2 once ran the slurmd's old Prolog,
    # none, and only its epilog the new one: a spool line without the prolog's policy)
    reconfigure(sandbox)
    yield {"conf": conf, **dirs}
    inst.apply(inst.plan_uninstall(sconf.load_tree(conf), inst.read_manifest(conf)), conf, installing=False)
    reconfigure(sandbox)


def test_partition_policy_is_recorded_in_the_jobs_spool_line(sandbox, policy_hooked):
    conf = policy_hooked["conf"]
    job = run(["srun", "-p", "gpu", "-w", "n2", "--gres=gpu:1", "-t", "1", "sh", "-c", "echo $SLURM_JOB_ID"],
              slurm_conf=str(conf), timeout=90).stdout.strip()
    path = policy_hooked["spool"] / spool.file_name("n2")
    rec = wait_until(lambda: path.exists()
                and next((r for r in spool.read(path)[0] if r.job_id == job), None), 30, what="the job's spool line")
    (gpu,) = rec.gpus
    p = rec.policy
    assert (p.name, p.origin, p.status) == ("steady", "partition gpu", "not applied")
    assert p.requested == {"locked_clocks_mhz": [1215, 1410], "power_limit_w": 500}
    why = "replayed snapshot: nothing set on the host"
    assert p.applied == {} and p.not_applied == {gpu.index: {"locked_clocks_mhz": why, "power_limit_w": why}}
    assert p.reason == f"requested, not applied: {why}" and p.label == "steady (not applied)"
