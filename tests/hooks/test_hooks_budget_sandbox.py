"""A hung chained NHC under a real slurmd (the sandbox): the site's HealthCheckProgram is a script
that hangs (a sleeping child it waits on); ``hooks install --chain --chain-timeout 5`` keeps it
after slurmkit's check. A GPU with an uncorrectable ECC error (``sandbox gpu --break dbe``, the
values of a real capture) drains its node within one HealthCheckInterval, and the hung script is
stopped with its child each run instead of piling up."""

import os
import re
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from sandbox_nodes import backups, drop_new_backups, hooks_cli, reconfigure, show_node

from slurmkit.atomicfile import atomic_write
from slurmkit.waiting import wait_until

pytestmark = pytest.mark.slurm

INTERVAL_S = 10
BUS = "0000:3b:00.0"  # the sandbox's NVML GPU 1, which --break breaks unless --gpu


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


def test_hung_nhc_under_slurmd_does_not_stop_the_gpu_drain(sandbox):
    import subprocess
    import sys

    conf = Path(sandbox.slurm_conf)
    original = conf.read_text()
    before = backups(conf)
    work = Path(tempfile.mkdtemp(prefix="hooks-budget-", dir=sandbox.dir))
    pids = work / "nhc-children"
    nhc = work / "nhc"
    nhc.write_text(f"#!/bin/sh\nsleep 600 &\necho $! >> {pids}\nwait\n")
    nhc.chmod(0o755)

    def sh(*argv):
        r = subprocess.run([sys.executable, "-m", "slurmkit", *argv], env=dict(os.environ, **sandbox.env()),
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, (argv, r.stdout, r.stderr)
        return r

    assert "\n#HealthCheckProgram=\n" in original
    site = original.replace("\n#HealthCheckProgram=\n", f"\n#HealthCheckProgram=\nHealthCheckProgram={nhc}\n")
    try:
        for n in sandbox.node_names:
            sh("sandbox", "gpu", n, "--fix", "--dir", sandbox.dir)
        atomic_write(conf, site)
        reconfigure(sandbox)
        r = hooks_cli(conf, "install", "--chain", "--chain-timeout", "5", "--mode", "enforce", "--interval",
                      str(INTERVAL_S), "--state-dir", work / "state", "--spool-dir", work / "spool",
                      "--textfile-dir", work / "textfile")
        assert r.returncode == 0, r.stderr
        assert f"the site's HealthCheckProgram {nhc} keeps running" in r.stdout
        reconfigure(sandbox)
        sh("sandbox", "gpu", "n3", "--break", "dbe", "--dir", sandbox.dir)
        broke = time.monotonic()
        want = rf"slurmkit: ecc_volatile_uncorrectable GPU1 \(gres index \d+, {BUS}\)"   # (the gres index named)

        def drained():
            got = show_node(conf, "n3")
            return "DRAIN" in got["state"] and re.match(want, got["reason"] or "") is not None

        # within one interval (and the run that sees it: slurmkit's check runs before NHC's)
        wait_until(drained, INTERVAL_S + 20, what="n3 drained for the ECC error with a hung NHC")
        took = time.monotonic() - broke
        assert took < INTERVAL_S + 20
        # NHC did run (its children were started) and each was stopped at its bound
        wait_until(lambda: pids.exists() and pids.read_text().split(), 30, what="the chained NHC ran")
        time.sleep(5 + 2 + 1)  # its bound, timeout's SIGKILL grace
        started = [int(p) for p in pids.read_text().split()]
        alive = [p for p in started[:-4] if _alive(p)]  # the newest may still be within their bound
        assert not alive, f"NHC children outlived their health check: {alive} of {started}"
    finally:
        for n in sandbox.node_names:
            subprocess.run([sys.executable, "-m", "slurmkit", "sandbox", "gpu", n, "--fix", "--dir", sandbox.dir],
                           env=dict(os.environ, **sandbox.env()), capture_output=True, timeout=120)
            subprocess.run(["scontrol", "update", f"NodeName={n}", "State=RESUME"],
                           env=dict(os.environ, **sandbox.env()), capture_output=True, timeout=60)
        hooks_cli(conf, "uninstall")
        atomic_write(conf, original)
        drop_new_backups(conf, before)
        reconfigure(sandbox)
        shutil.rmtree(work, ignore_errors=True)
