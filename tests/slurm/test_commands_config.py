"""A Slurm command without a usable configuration fails at once, naming SLURM_CONF and the
sandbox's ``eval "$(slurmkit sandbox env)"`` (Slurm's own clients retry a missing SLURM_CONF
for 60 s)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from slurmkit.slurm import commands

# squeue 22.05 (Debian 12) run here with SLURM_CONF unset and no /etc/slurm/slurm.conf
# (`env -u SLURM_CONF squeue`, exit 1): the configless DNS SRV lookup fails.
NO_CONFIG_STDERR = """squeue: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host
squeue: error: fetch_config: DNS SRV lookup failed
squeue: error: _establish_config_source: failed to fetch config
squeue: fatal: Could not establish a configuration source
"""


def _slurmkit(*args, env):
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "slurmkit", *args], capture_output=True, text=True,
                          env=env, timeout=60)
    return proc, time.monotonic() - start


def test_missing_slurm_conf_fails_fast_with_the_hint(tmp_path):
    env = {**os.environ, "SLURM_CONF": str(tmp_path / "missing" / "slurm.conf")}
    proc, took = _slurmkit("status", "1", env=env)
    assert proc.returncode == 1
    assert took < 5
    assert proc.stderr.strip() == (
        f"slurmkit: error: SLURM_CONF={tmp_path}/missing/slurm.conf does not exist: run "
        "eval \"$(slurmkit sandbox env)\" for the sandbox, or set SLURM_CONF to the cluster's slurm.conf")


@pytest.mark.parametrize("value, problem", [("", "is empty"), ("DIR", "is not a file")])
def test_slurm_conf_that_is_no_file_is_refused_before_running(tmp_path, value, problem):
    conf = str(tmp_path) if value == "DIR" else value
    with pytest.raises(commands.SlurmError) as err:
        commands.run(["squeue", "-h"], env={"SLURM_CONF": conf}, check=False)
    assert str(err.value).startswith(f"SLURM_CONF={conf} {problem}: run eval \"$(slurmkit sandbox env)\"")


def test_no_configuration_at_all_names_sandbox_env(tmp_path, monkeypatch):
    monkeypatch.delenv("SLURM_CONF", raising=False)
    fake = tmp_path / "bin" / "squeue"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\ncat >&2 <<'X'\n{NO_CONFIG_STDERR}X\nexit 1\n")
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "SLURM_CONF"}
    env["PATH"] = f"{fake.parent}{os.pathsep}{env['PATH']}"
    proc, took = _slurmkit("status", "1", env=env)
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        "slurmkit: error: squeue: no Slurm configuration (SLURM_CONF unset, no slurm.conf, no DNS SRV record): "
        "run eval \"$(slurmkit sandbox env)\" for the sandbox, or set SLURM_CONF to the cluster's slurm.conf")
    # unchecked calls too: nothing can work without a configuration
    with pytest.raises(commands.SlurmError, match="no Slurm configuration"):
        commands.run([str(fake), "-h"], check=False, env={"PATH": env["PATH"]})
