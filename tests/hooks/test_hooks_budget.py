"""The HealthCheckProgram's time budget: slurmd kills it at 60 s, so slurmkit's check runs first,
a chained site check (NHC) gets only its bound and what is left, the active check is cut to its
share, and install warns when the configured parts can add up past it."""

import json
import re
import sys
import time

from nodeenv import nvml_gpu_of
from recording_scontrol import dbe_snapshot, install_recorder
from slurmkit.hooks import install as inst
from slurmkit.slurm import conf as sconf

#: A chained NHC that hangs: a child that sleeps (as a stuck `nhc` check's command would), whose
#: pid it writes down, and the script waiting on it.
HUNG_NHC = "#!/bin/sh\nsleep 600 &\necho $! > {pidfile}\nwait\n"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


def test_hung_chained_nhc_does_not_stop_the_gpu_check(node, healthy, corpus, tmp_path):
    """The site's NHC hangs; the node has a GPU with a DBE. The one health-check run drains the
    node (slurmkit's check runs first), NHC is stopped at its bound with its whole process group
    (its sleeping child too), and the program ends long before slurmd's 60 s."""
    path, snap = healthy
    g = nvml_gpu_of(node, snap, 2)
    bad, volatile = dbe_snapshot(corpus, snap, g["index"])
    snapshot = tmp_path / "dbe.json"
    snapshot.write_text(json.dumps(bad))
    pidfile = tmp_path / "nhc-child.pid"
    nhc = tmp_path / "nhc"
    nhc.write_text(HUNG_NHC.format(pidfile=pidfile))
    nhc.chmod(0o755)
    # the site had NHC as its HealthCheckProgram: install again with --chain and a 3 s bound
    inst.apply(inst.plan_uninstall(sconf.load_tree(node.slurm_conf), inst.read_manifest(node.slurm_conf)),
               node.slurm_conf, installing=False)
    node.slurm_conf.write_text(f"HealthCheckProgram={nhc}\n" + node.slurm_conf.read_text())
    log = tmp_path / "scontrol.log"
    node.write_config({"n1": snapshot}, bin_dir=str(install_recorder(tmp_path / "fake-bin", log).parent))
    spec = inst.InstallSpec(python=sys.executable, config=node.cfg_path.read_text(), chain=True, chain_timeout_s=3)
    plan = inst.plan_install(sconf.load_tree(node.slurm_conf), spec)
    inst.apply(plan, node.slurm_conf, installing=True)
    assert str(nhc) in node.healthcheck.read_text()
    t0 = time.monotonic()
    r = node.run(node.healthcheck, job_id=None, gpus=None, timeout=60)
    took = time.monotonic() - t0
    # (the reason names the GPU's gres index too; a long reason is cut at a word)
    want = (rf"slurmkit: ecc_volatile_uncorrectable GPU{g['index']} \(gres index \d+, {g['pci_bus_id']}\): "
            rf"{volatile} uncorrectable ECC")
    assert r.returncode == 0, r.stderr
    assert re.search(f"update nodename=n1 state=drain reason={want}", log.read_text())  # drained in this run
    assert f"the site's health check {nhc} ran past 3 s: stopped (its process group killed)" in r.stderr
    assert r.stderr.index("healthcheck done") < r.stderr.index("ran past 3 s")  # slurmkit's check first
    assert took < 3 + 2 + 10, took  # NHC's bound, timeout's 2 s SIGKILL grace, the hooks' run
    child = int(pidfile.read_text())
    for _ in range(50):
        if not _alive(child):
            break
        time.sleep(0.1)
    assert not _alive(child), "NHC's child outlived the health check"


class _Run:
    """What the active check's budget reads of a run: its hook and the time left."""

    def __init__(self, left):
        self.hook, self._left = "healthcheck", left

    def time_left(self):
        return self._left


def test_active_check_is_cut_to_its_share_and_a_cut_overrun_is_not_a_fail():
    from slurmkit.health.active import ERROR, DiagReport
    from slurmkit.hooks import gate
    from slurmkit.profile.health import Health

    health = Health()  # active_timeout_s 45
    assert gate._share(_Run(100.0), 45.0) == 45.0
    assert gate._share(_Run(30.0), 45.0) == 30.0
    short = gate._share(_Run(3.0), 45.0)
    assert short.status == ERROR and "only 3 s left" in short.message
    over = DiagReport("fail", message="timed out", check="dcgm_diag", timed_out=True)
    assert gate._within(over, 30.0, health).status == ERROR  # cut by the budget: tried again later
    assert gate._within(over, 45.0, health).status == "fail"  # its own deadline: evidence, as before


def test_install_warns_when_the_parts_add_up_past_slurmds_60_s(tmp_path):
    path = tmp_path / "slurm.conf"
    path.write_text("ClusterName=t\nHealthCheckProgram=/usr/sbin/nhc\nHealthCheckNodeState=IDLE\n"
                    "NodeName=n1 CPUs=2 Gres=gpu:4\n")
    spec = inst.InstallSpec(python=sys.executable, chain=True, chain_timeout_s=30)
    notes = inst.plan_install(sconf.load_tree(path), spec).notes
    # the defaults (8 s NVML deadline, 45 s active check, 2 s start) fit 55 s; NHC's 30 s does not
    assert not any(n.startswith("warning: slurmkit's health check may take") for n in notes)
    chain = next(n for n in notes if n.startswith("warning: slurmkit's health check (55 s at most"))
    assert "/usr/sbin/nhc (30 s, --chain-timeout) can add up to 85 s" in chain and "as little as 0 s" in chain
    slow = inst.InstallSpec(python=sys.executable, chain=True, chain_timeout_s=5, deadline_s=20.0)
    mine = next(n for n in inst.plan_install(sconf.load_tree(path), slow).notes
                if n.startswith("warning: slurmkit's health check may take 67 s"))
    assert "as little as 33 s of its 45 s" in mine
    busy = next(n for n in notes if "leaves ALLOC and MIXED (busy) nodes unchecked" in n)
    assert busy.startswith("warning: HealthCheckNodeState=IDLE (") and "metrics go stale" in busy
    # no active check, a short NVML deadline and a short chain: nothing to warn of the budget
    spec = inst.InstallSpec(python=sys.executable, chain=True, chain_timeout_s=20, active_timeout_s=None)
    notes = inst.plan_install(sconf.load_tree(path), spec).notes
    assert not any(n.startswith("warning: slurmkit") for n in notes)
    path.write_text(path.read_text().replace("HealthCheckNodeState=IDLE", "HealthCheckNodeState=IDLE,ALLOC,MIXED"))
    assert not any("(busy) nodes unchecked" in n for n in inst.plan_install(sconf.load_tree(path), spec).notes)
