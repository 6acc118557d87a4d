"""Clock and power actions through the one GPU-state interface: the live source (real pynvml
against the test-built fake libnvidia-ml, which logs each setter's NVML index and values) and
the replay source (which sets nothing and keeps what it was given)."""

from __future__ import annotations

import pytest

from slurmkit.health.runner import apply_actions, run_actions
from slurmkit.health.source import Action, SnapshotSource, SourceError

ACTS = [Action("set_locked_clocks", gpu_index=1, clocks_mhz=[1215, 1410]),
        Action("set_mem_locked_clocks", gpu_index=0, clocks_mhz=[2619, 2619]),
        Action("set_power_limit", gpu_index=1, power_limit_w=450.0),
        Action("reset_mem_locked_clocks", gpu_index=1),
        Action("set_app_clocks", gpu_index=0, clocks_mhz=[2619, 1755])]


def test_live_set_calls_reach_nvml_with_their_values_and_one_refusal_stops_nothing(fake_nvml, tmp_path):
    log = tmp_path / "nvml-actions.log"
    env = fake_nvml.env("healthy", gpus=2, log=log, set_fail="set_power_limit:4:1")
    out = apply_actions(ACTS, "live", env=env)
    assert [rc for _, rc in out] == ["SUCCESS", "SUCCESS", "NO_PERMISSION", "SUCCESS", "SUCCESS"]
    assert out[2][0] == "set power limit to 450.0 W on GPU1: nvmlDeviceSetPowerManagementLimit: NO_PERMISSION"
    assert log.read_text().splitlines() == ["set_locked_clocks 1 1215 1410", "set_mem_locked_clocks 0 2619 2619",
                                            "reset_mem_locked_clocks 1 0", "set_app_clocks_mem 0 2619",
                                            "set_app_clocks_graphics 0 1755"]
    with pytest.raises(SourceError, match="NO_PERMISSION"):  # the line API still says it failed
        run_actions(ACTS, "live", env=env)


def test_live_not_supported_and_no_permission_are_outcomes_not_crashes(fake_nvml, tmp_path):
    out = apply_actions(ACTS[:2], "live", env=fake_nvml.env("not_supported", gpus=2))
    assert [rc for _, rc in out] == ["NOT_SUPPORTED", "NOT_SUPPORTED"]
    out = apply_actions(ACTS[:1], "live", env=fake_nvml.env("no_permission", gpus=2))
    assert out == [("lock GPU clocks to [1215, 1410] MHz (min, max) on GPU1: nvmlInit: NO_PERMISSION", "NO_PERMISSION")]


def test_replay_sets_nothing_and_keeps_the_values_per_gpu(healthy):
    path, _ = healthy
    src = SnapshotSource(path)
    out = [src.apply(a) for a in ACTS]
    assert [rc for _, rc in out] == ["REPLAY"] * len(ACTS)
    assert out[0][0] == f"would lock GPU clocks to [1215, 1410] MHz (min, max) on GPU1 (replay of {path})"
    assert [(a.kind, a.gpu_index, a.clocks_mhz or a.power_limit_w) for a in src.acted] == [
        ("set_locked_clocks", 1, [1215, 1410]), ("set_mem_locked_clocks", 0, [2619, 2619]),
        ("set_power_limit", 1, 450.0), ("reset_mem_locked_clocks", 1, None), ("set_app_clocks", 0, [2619, 1755])]
    assert [rc for _, rc in apply_actions(ACTS, path)] == ["REPLAY"] * len(ACTS)
