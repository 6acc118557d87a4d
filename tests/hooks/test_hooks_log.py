"""Hook log lines in a file under the state directory (where syslog is absent, or with
``log_file = true``) and ``slurmkit hooks log``, which shows them."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from nodeenv import nvml_gpu_of, set_value, where

from slurmkit.health.result import fit_reason
from slurmkit.cli import cli as cli_main
from slurmkit.hooks import log as hlog
from slurmkit.hooks.config import HookConfigError, parse

LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} slurmkit-(prolog|epilog|healthcheck)\[\d+\] "
                  r"(info|warning|error): node=n\d job=\S+ .+$")


def test_log_file_key_is_a_bool():
    assert parse('slurm_conf = "/x"\nlog_file = true\n', "/e/h.toml").log_file is True
    assert parse('slurm_conf = "/x"\nlog_file = false\n', "/e/h.toml").log_file is False
    assert parse('slurm_conf = "/x"\n', "/e/h.toml").log_file is None
    for bad in ('log_file = "yes"', "log_file = 1", "resume_after = true"):
        with pytest.raises(HookConfigError, match="wrong type"):
            parse(f'slurm_conf = "/x"\n{bad}\n', "/e/h.toml")


def test_wants_file_follows_the_setting_else_syslogs_socket(tmp_path, monkeypatch):
    monkeypatch.setattr(hlog, "SYSLOG_SOCKET", str(tmp_path / "log"))
    assert (hlog.wants_file(None), hlog.wants_file(True), hlog.wants_file(False)) == (True, True, False)
    (tmp_path / "log").touch()
    assert hlog.wants_file(None) is False


def _failing(node, snap, tmp_path):
    g = nvml_gpu_of(node, snap, 2)
    p = tmp_path / "failing.json"
    p.write_text(json.dumps(set_value(snap, g["index"], "ecc_volatile_uncorrectable", 3)))
    return p, g


def test_hook_runs_append_their_lines_and_hooks_log_shows_them(node, healthy, tmp_path, monkeypatch):
    path, snap = healthy
    bad, g = _failing(node, snap, tmp_path)
    node.write_config({"n1": bad, "n2": path}, mode="observe", extra="log_file = true\n")
    assert node.run(node.healthcheck, job_id=None, gpus=None).returncode == 0
    assert node.run(node.prolog, node="n2").returncode == 0
    n1 = (node.state_dir / "n1" / "hooks.log").read_text().splitlines()
    assert all(LINE.match(line) for line in n1), n1
    would = "observe mode: would drain n1: " + fit_reason(f"slurmkit: ecc_volatile_uncorrectable {where(node, g)}: "
                                                          "3 uncorrectable ECC errors since boot")
    assert any(line.endswith(would) for line in n1)
    assert re.search(r"healthcheck done in [\d.]+ s, exit 0, drain reason: slurmkit: ecc_volatile", n1[-1])
    n2 = (node.state_dir / "n2" / "hooks.log").read_text().splitlines()
    assert "node=n2 job=101 prolog done in" in n2[-1] and all("node=n2 job=101" in line for line in n2)

    monkeypatch.setenv("SLURMKIT_HOOKS_CONFIG", str(node.cfg_path))
    run = CliRunner().invoke
    r = run(cli_main, ["hooks", "log"])
    merged = sorted(n1 + n2, key=lambda s: s.split(" ", 1)[0])  # by time, each file's order kept
    assert r.exit_code == 0 and r.output.splitlines() == merged
    r = run(cli_main, ["hooks", "log", "--node", "n1", "--drains"])
    lines = r.output.splitlines()
    assert any(line.endswith(would) for line in lines) and all("n1" in line for line in lines)
    assert not any("prolog done" in line for line in lines)
    assert run(cli_main, ["hooks", "log", "-n", "1"]).output.splitlines() == merged[-1:]
    r = run(cli_main, ["hooks", "log", "--node", "n3"])
    assert r.exit_code == 1 and "journalctl -t slurmkit-healthcheck" in r.output


def test_no_file_with_log_file_false_and_a_full_file_moves_aside(node, healthy, tmp_path):
    path, _ = healthy
    node.write_config({"n1": path}, extra="log_file = false\n")
    node.run(node.healthcheck, job_id=None, gpus=None)
    assert not (node.state_dir / "n1" / "hooks.log").exists()
    log = hlog.HookLog("healthcheck", "n1", None, echo=False)
    log.info("first")
    target = tmp_path / "st" / "n1" / "hooks.log"
    log.append_to(str(target))
    target.write_text("x" * (hlog.MAX_BYTES + 1))
    log.append_to(str(target))
    assert (tmp_path / "st" / "n1" / "hooks.log.1").stat().st_size == hlog.MAX_BYTES + 1
    assert target.read_text().endswith("info: node=n1 job=- first\n") and target.stat().st_mode & 0o777 == 0o600


def test_hooks_log_without_a_config_says_to_install(tmp_path, monkeypatch):
    monkeypatch.delenv("SLURMKIT_HOOKS_CONFIG", raising=False)
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "slurm.conf"))
    r = CliRunner().invoke(cli_main, ["hooks", "log"])
    assert r.exit_code == 2 and "slurmkit-hooks.toml" in r.output and "slurmkit hooks install" in r.output



def test_gpu_reset_finds_the_config_beside_slurm_conf_as_hooks_log_does(tmp_path, monkeypatch):
    """``hooks gpu-reset`` without --config reads slurmkit-hooks.toml beside $SLURM_CONF (where
    install writes it); none there is a clear error naming the path it looked at."""
    from click.testing import CliRunner

    from slurmkit.cli import cli

    monkeypatch.delenv("SLURMKIT_HOOKS_CONFIG", raising=False)
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "slurm.conf"))
    res = CliRunner().invoke(cli, ["hooks", "gpu-reset", "0000:3b:00.0", "--done", "--node", "n3"])
    assert res.exit_code == 2, res.output
    assert f"--config: no hooks config at {tmp_path / 'slurmkit-hooks.toml'} (install writes" in res.output


def test_hooks_log_on_a_configless_node_finds_the_config_beside_the_built_in_path(tmp_path, monkeypatch):
    """In a job's shell on a configless node ``$SLURM_CONF`` names slurmd's conf cache, which
    holds no hooks config: ``hooks log`` reads the one beside slurm.conf's built-in path."""
    from click.testing import CliRunner

    from slurmkit.cli import cli
    from slurmkit.cli import hooks as cli_hooks
    from slurmkit.hooks.config import render

    etc, cache = tmp_path / "etc", tmp_path / "spool" / "conf-cache"
    for d in (etc, cache):
        d.mkdir(parents=True)
    (cache / "slurm.conf").write_text("ClusterName=t\n")
    (etc / "slurmkit-hooks.toml").write_text(render(etc / "slurm.conf", state_dir=tmp_path / "state"))
    (tmp_path / "state" / "n1").mkdir(parents=True)
    (tmp_path / "state" / "n1" / "hooks.log").write_text("2026-12-08T00:00:00 slurmkit-healthcheck: info: node=n1 "
                                                          "job=- healthcheck done in 0.1 s, exit 0\n")
    monkeypatch.delenv("SLURMKIT_HOOKS_CONFIG", raising=False)
    monkeypatch.setenv("SLURM_CONF", str(cache / "slurm.conf"))
    monkeypatch.setattr(cli_hooks, "DEFAULT_SLURM_CONF", str(etc / "slurm.conf"))
    r = CliRunner().invoke(cli, ["hooks", "log"])
    assert r.exit_code == 0, r.output
    assert "healthcheck done in 0.1 s" in r.output
