"""``sandbox env|status|down`` without ``--dir`` find the sandbox that is running among those
``sandbox up`` remembered (``slurmkit.sandbox.cluster.registry_path``); with none or several they
say so in one line and exit 2. Runs without Slurm: a "running" sandbox here is a directory with
a ``sandbox.json`` and a live process (``sleep``, its environment naming the directory, which is
how the sandbox tells its own daemons) behind its slurmctld pid file."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import asdict

import pytest
from click.testing import CliRunner

from slurmkit.cli import cli
from slurmkit.sandbox import cluster
from slurmkit.sandbox.config import SandboxSpec


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state"


@pytest.fixture
def procs():
    started = []
    yield started
    for p in started:
        p.kill()
        p.wait()


def _sandbox_dir(path, procs, running: bool):
    (path / "var" / "run").mkdir(parents=True)
    spec = SandboxSpec(host_cpus=(0,))
    (path / "sandbox.json").write_text(json.dumps(asdict(spec)))
    if running:
        p = subprocess.Popen(["sleep", "60"], env={**os.environ, "SANDBOX_DIR": str(path.absolute())})
        procs.append(p)
        (path / "var" / "run" / "slurmctld.pid").write_text(f"{p.pid}\n")
    cluster.remember(path)
    return path.absolute()


def _run(*args):
    return CliRunner().invoke(cli, ["sandbox", *args])


def test_the_one_running_sandbox_is_found(state, procs, tmp_path):
    stopped = _sandbox_dir(tmp_path / "a", procs, running=False)
    live = _sandbox_dir(tmp_path / "b", procs, running=True)
    assert cluster.registry_path() == state / "slurmkit" / "sandboxes"
    assert cluster.registry_path().read_text() == f"{stopped}\n{live}\n"
    r = _run("env")
    assert r.exit_code == 0, r.output
    assert f"export SLURM_CONF={live}/etc/slurm.conf" in r.output.splitlines()
    r = _run("status")
    assert r.exit_code == 1      # slurmctld alive, the other daemons not: "down"
    assert r.output.splitlines()[0].startswith(f"sandbox in {live}: down")


def test_none_running_lists_the_stopped_ones(state, procs, tmp_path):
    a = _sandbox_dir(tmp_path / "a", procs, running=False)
    for cmd in ("env", "status", "down"):
        r = _run(cmd)
        assert r.exit_code == 2, (cmd, r.output)
        assert r.output.strip() == (f"slurmkit: error: --dir: no sandbox is running (stopped: {a}); "
                                    "start one with 'slurmkit sandbox up [--dir DIR]'")


def test_none_known(state):
    r = _run("env")
    assert r.exit_code == 2
    assert r.output.strip() == ("slurmkit: error: --dir: no sandbox is running; "
                                "start one with 'slurmkit sandbox up [--dir DIR]'")


def test_several_running_are_listed(state, procs, tmp_path):
    a = _sandbox_dir(tmp_path / "a", procs, running=True)
    b = _sandbox_dir(tmp_path / "b", procs, running=True)
    for cmd in ("env", "status", "down", "demo"):
        r = _run(cmd)
        assert r.exit_code == 2, (cmd, r.output)
        assert r.output.strip() == (f"slurmkit: error: --dir: 2 sandboxes are running: {a}, {b}; "
                                    "choose one with --dir DIR")
    # --dir still names one
    r = _run("env", "--dir", str(a))
    assert f"export SLURM_CONF={a}/etc/slurm.conf" in r.output.splitlines()


def test_registry_drops_purged_dirs(state, procs, tmp_path):
    a = _sandbox_dir(tmp_path / "a", procs, running=False)
    b = _sandbox_dir(tmp_path / "b", procs, running=False)
    cluster.forget(a)
    assert cluster.registry_path().read_text() == f"{b}\n"
    (b / "sandbox.json").unlink()           # deleted by hand
    assert cluster.known_dirs() == []
