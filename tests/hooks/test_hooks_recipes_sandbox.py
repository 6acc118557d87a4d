"""docs/hooks.md's recipes on a real Slurm: the hooks installed on the sandbox with the command
the docs give, a GPU broken and fixed with ``slurmkit sandbox gpu``, and each way a node comes
back ("Bringing a node back"): a fault seen on each run returns by itself, a held Xid needs the
GPU's reset recorded (``hooks gpu-reset --done``), an admin's drain stays until the admin resumes.
Every command runs as a shell would run it, with the sandbox's environment."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from sandbox_nodes import backups, drop_new_backups, hooks_cli, reconfigure, show_node
from slurmkit.health.result import fit_reason
from slurmkit.waiting import wait_until

pytestmark = pytest.mark.slurm

BUS = "0000:3b:00.0"  # the sandbox's NVML GPU 1 (minor 2: /dev/nvidia0, gres index 0), which --break breaks unless --gpu


def _sh(sandbox, *argv, check=True) -> subprocess.CompletedProcess:
    """``slurmkit <argv>`` (``scontrol`` when argv starts with it) in the sandbox's environment."""
    cmd = list(argv) if argv[0] == "scontrol" else [sys.executable, "-m", "slurmkit", *argv]
    r = subprocess.run([str(a) for a in cmd], env=dict(os.environ, **sandbox.env()), capture_output=True,
                       text=True, timeout=120)
    assert not check or r.returncode == 0, (argv, r.stdout, r.stderr)
    return r


@pytest.fixture
def hooked(sandbox):
    conf = Path(sandbox.slurm_conf)
    before = backups(conf)
    work = Path(tempfile.mkdtemp(prefix="hooks-recipes-", dir=sandbox.dir))
    for n in sandbox.node_names:
        _sh(sandbox, "sandbox", "gpu", n, "--fix", "--dir", sandbox.dir)
    # the docs' command; the hooks' folders of the test's own
    r = hooks_cli(conf, "install", "--mode", "enforce", "--interval", "10", "--resume-after", "2", "--state-dir",
                  work / "state", "--spool-dir", work / "spool", "--textfile-dir", work / "textfile")
    assert r.returncode == 0, r.stderr
    assert f"nodes n1, n2, n3, n4 replay their GPUs' snapshots in {sandbox.dir}/hooks/gpus" in r.stdout
    reconfigure(sandbox)
    yield {"conf": conf, "state": work / "state"}
    for n in sandbox.node_names:
        _sh(sandbox, "sandbox", "gpu", n, "--fix", "--dir", sandbox.dir)
        _sh(sandbox, "scontrol", "update", f"NodeName={n}", "State=RESUME", check=False)
    assert hooks_cli(conf, "uninstall").returncode == 0
    drop_new_backups(conf, before)
    reconfigure(sandbox)
    shutil.rmtree(work, ignore_errors=True)


def _health_runs(state: Path, node: str) -> int:
    """Health checks the node's hook log shows so far."""
    try:
        return (state / node / "hooks.log").read_text().count("healthcheck done in")
    except FileNotFoundError:
        return 0


def _drained(conf, node: str, reason: str | None = None):
    got = show_node(conf, node)
    return "DRAIN" in got["state"] and (reason is None or (got["reason"] or "").startswith(reason)) and got


def test_each_way_back_of_the_docs(sandbox, hooked):
    conf, state, d = hooked["conf"], hooked["state"], sandbox.dir
    # a fault seen on each run: drained, and back by itself once fixed
    out = _sh(sandbox, "sandbox", "gpu", "n3", "--break", "dbe", "--dir", d).stdout
    assert "then the health check resumes it after resume_after clean runs" in out
    want = fit_reason(f"slurmkit: ecc_volatile_uncorrectable GPU1 (gres index 0, {BUS}): 1 uncorrectable ECC errors since boot")
    wait_until(lambda: _drained(conf, "n3", want), 60, what="n3 drained for the ECC error")
    log = _sh(sandbox, "hooks", "log", "--node", "n3", "--drains").stdout
    assert f"drained n3: {want}" in log, log
    _sh(sandbox, "sandbox", "gpu", "n3", "--fix", "--dir", d)
    wait_until(lambda: not _drained(conf, "n3"), 90, what="n3 resumed by the health check")
    assert show_node(conf, "n3")["reason"] is None

    # a held Xid: fixed, it stays drained until the GPU's reset is recorded
    out = _sh(sandbox, "sandbox", "gpu", "n3", "--break", "xid79", "--dir", d).stdout
    assert f"slurmkit hooks gpu-reset {BUS} --done --node n3" in out
    want = f"slurmkit: xid GPU1 (gres index 0, {BUS}): Xid 79 GPU fell off the bus"
    wait_until(lambda: _drained(conf, "n3", want), 60, what="n3 drained for Xid 79")
    _sh(sandbox, "sandbox", "gpu", "n3", "--fix", "--dir", d)
    runs = _health_runs(state, "n3")
    wait_until(lambda: _health_runs(state, "n3") >= runs + 3, 90, what="three health checks on n3")
    assert _drained(conf, "n3", want)
    assert "stays drained until it reboots, the GPU is reset" in _sh(sandbox, "hooks", "log", "--node", "n3").stdout
    # (no --config: the config beside $SLURM_CONF, as the docs' recipe runs it)
    _sh(sandbox, "hooks", "gpu-reset", BUS, "--done", "--node", "n3")
    wait_until(lambda: not _drained(conf, "n3"), 90, what="n3 resumed after the recorded reset")

    # an admin's drain: slurmkit leaves it, the admin's resume ends it
    _sh(sandbox, "scontrol", "update", "NodeName=n3", "State=DRAIN", "Reason=admin: PSU swap")
    runs = _health_runs(state, "n3")
    wait_until(lambda: _health_runs(state, "n3") >= runs + 3, 90, what="three health checks on n3")
    assert _drained(conf, "n3", "admin: PSU swap")
    _sh(sandbox, "scontrol", "update", "NodeName=n3", "State=RESUME")
    assert not _drained(conf, "n3")


def test_the_demos_drained_node_comes_back_with_the_documented_command(sandbox, hooked):
    conf, d = hooked["conf"], sandbox.dir
    _sh(sandbox, "sandbox", "gpu", "n2", "--break", "row-remap", "--dir", d)  # what the demo gives n2
    want = fit_reason(f"slurmkit: row_remap_pending GPU1 (gres index 0, {BUS}): 4 uncorrectable rows pending remap")
    wait_until(lambda: _drained(conf, "n2", want), 60, what="n2 drained for the row remap")
    # a resume by hand with the fault still there: drained again (the docs say why)
    _sh(sandbox, "scontrol", "update", "NodeName=n2", "State=RESUME")
    wait_until(lambda: _drained(conf, "n2", want), 60, what="n2 drained again")
    _sh(sandbox, "sandbox", "gpu", "n2", "--fix", "--dir", d)
    wait_until(lambda: not _drained(conf, "n2"), 90, what="n2 resumed by the health check")
