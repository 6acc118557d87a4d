"""The sandbox's GPU snapshots: healthy at ``up``, broken and fixed by ``slurmkit sandbox gpu``,
each fault an edit of a real capture, replayed by ``hooks install`` on the sandbox's slurm.conf.

Faults are checked against their captures in ../shared/corpus (the ``corpus`` fixture):
gpu-logs/akash-support-209_* (Xid 79, nvidia-smi's Unknown Error), gpu-logs/q_excerpt_ECC_SRAM-
uncorrectable_L139-149.txt (SRAM uncorrectable counts), nvidia-smi-q/a10_row_remap_pending.txt
(remapped rows, pending)."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from slurmkit.cli import cli as cli_main
from slurmkit.health import checks as C
from slurmkit.health.config import load_config
from slurmkit.health.source import load_capture
from slurmkit.health.state import NodeState
from slurmkit.sandbox import Sandbox, gpus


def _fails(state) -> dict[str, str]:
    return {r.check: r.reason() for r in C.run_checks(state, load_config()) if r.status.name == "FAIL"}


def test_a_healthy_snapshot_passes_every_check():
    state = gpus.node_state("n1", 4)
    assert _fails(state) == {}
    assert NodeState.from_json(state.to_json(), "x").gpus[2].get("utilization_gpu_pct") == 0


@pytest.mark.parametrize("fault, check, reason", [
    ("xid79", "xid", "slurmkit: xid GPU1 0000:3b:00.0: Xid 79 GPU fell off the bus"),
    ("dbe", "ecc_volatile_uncorrectable", "slurmkit: ecc_volatile_uncorrectable GPU1 0000:3b:00.0: "
                                          "1 uncorrectable ECC errors since boot"),
    ("row-remap", "row_remap_pending", "slurmkit: row_remap_pending GPU1 0000:3b:00.0: "
                                       "4 uncorrectable rows pending remap"),
])
def test_each_fault_fails_its_check_with_the_drain_reason(fault, check, reason):
    got = _fails(gpus.node_state("n3", 4, fault=fault, fault_gpu=1))
    assert got[check] == reason


def test_off_bus_loses_the_gpu_and_logs_xid79():
    state = gpus.node_state("n3", 4, fault="off-bus", fault_gpu=2, fault_at_s=1000.0)
    got = _fails(state)
    assert set(got) == {"gpu_lost", "xid"} and "GPU2 0000:4c:00.0" in got["xid"]
    assert state.gpus[2].values == {} and state.gpus[2].handle_rc == "UNKNOWN"
    assert [(x.xid, x.pci_bus_id, x.time_s) for x in state.xids] == [(79, "0000:4c:00.0", 1000.0)]


def test_faults_are_the_values_of_their_real_captures(corpus):
    akash = next((corpus / "gpu-logs").glob("akash-support-209_*")).read_text()
    assert "Unable to determine the device handle for GPU0000:A1:00.0: Unknown Error" in akash
    xid = re.search(r"NVRM: Xid \(PCI:[0-9a-f:]+\): (\d+), .*?, (GPU has fallen off the bus\.)", akash)
    for name in ("xid79", "off-bus"):
        assert (gpus.FAULTS[name].xid, gpus.FAULTS[name].xid_message) == (int(xid.group(1)), xid.group(2))
    sram = (corpus / "gpu-logs" / "q_excerpt_ECC_SRAM-uncorrectable_L139-149.txt").read_text()
    volatile, aggregate = (int(v) for v in re.findall(r"SRAM Uncorrectable\s+:\s+(\d+)", sram))
    assert gpus.FAULTS["dbe"].values == {"ecc_volatile_uncorrectable": volatile,
                                         "ecc_aggregate_uncorrectable": aggregate}
    a10 = load_capture(corpus / "nvidia-smi-q" / "a10_row_remap_pending.txt").gpus[0]
    for key, value in gpus.FAULTS["row-remap"].values.items():
        assert a10.get(key) == value, key


def test_faults_kept_and_applied_by_every_writer(tmp_path):
    d = tmp_path / "gpus"
    gpus.write_node_snapshots(d, ["n1", "n2"], 2)
    assert gpus.set_fault(d, "n2", "dbe", gpu=0, at_s=5.0) is None
    # up again writes only missing files; a full rewrite applies the fault
    gpus.write_node_snapshots(d, ["n1", "n2"], 2, only_missing=True)
    assert json.loads((d / "n2.json").read_text())["gpus"][0]["values"]["ecc_volatile_uncorrectable"]["value"] == 0
    gpus.write_node_snapshots(d, ["n1", "n2"], 2)
    assert json.loads((d / "n2.json").read_text())["gpus"][0]["values"]["ecc_volatile_uncorrectable"]["value"] == 1
    with pytest.raises(KeyError):
        gpus.set_fault(d, "n1", "melted")
    assert gpus.set_fault(d, "n2", None) == {"fault": "dbe", "gpu": 0, "at_s": 5.0}
    assert gpus.load_faults(d) == {}


def test_simulator_advances_energy_and_utilization_with_accounting_records(tmp_path):
    d = tmp_path / "gpus"
    gpus.write_node_snapshots(d, ["n1"], 2)
    sim = gpus.GpuSimulator(d, ["n1"], 2, period_s=0.5, faults={"n1": "row-remap"})
    sim._t0 -= 2.0  # two seconds in: four finished half-second processes
    sim.write_all()
    state = NodeState.from_json(json.loads((d / "n1.json").read_text()), "x")
    g = state.gpus[0]
    assert g.get("utilization_gpu_pct") == gpus.BUSY_UTILIZATION_PCT
    assert g.get("power_draw_w") == gpus.BUSY_POWER_W
    assert g.get("total_energy_mj") >= int(gpus.BUSY_POWER_W * 2.0 * 1000)
    recs = g.get("accounting")
    assert len(recs) == 4 and {r["gpu_util_pct"] for r in recs} == {gpus.BUSY_UTILIZATION_PCT}
    assert all(r["time_ms"] == 500 for r in recs) and len({r["pid"] for r in recs}) == 4
    assert state.gpus[1].get("remap_pending") is True  # the fault, kept in faults.json


def _sandbox_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(Sandbox, "_make_devices", lambda self: None)  # mknod needs root
    sb = Sandbox(tmp_path / "sb")
    sb._write_configs()
    return sb


def test_sandbox_configs_come_with_healthy_snapshots_hooks_install_replays(tmp_path, monkeypatch):
    sb = _sandbox_dir(tmp_path, monkeypatch)
    snaps = sb.dir / "hooks" / "gpus"
    assert sorted(p.name for p in snaps.glob("n*.json")) == [f"{n}.json" for n in sb.node_names]
    r = CliRunner().invoke(cli_main, ["hooks", "install", "--slurm-conf", str(sb.slurm_conf)])
    assert r.exit_code == 0, r.output
    assert f"sandbox {sb.dir}: nodes n1, n2, n3, n4 replay their GPUs' snapshots in {snaps}" in r.output
    toml = (sb.etc / "slurmkit-hooks.toml").read_text()
    assert f'state_dir = "{sb.dir}/hooks/state"' in toml and "log_file = true" in toml
    for n in sb.node_names:
        assert f'[nodes.{n}]\nsnapshot = "{snaps}/{n}.json"' in toml


def test_sandbox_gpu_breaks_and_fixes_and_says_how_to_bring_the_node_back(tmp_path, monkeypatch):
    sb = _sandbox_dir(tmp_path, monkeypatch)
    run = CliRunner().invoke
    r = run(cli_main, ["sandbox", "gpu", "n3", "--break", "xid79", "--dir", str(sb.dir)])
    assert r.exit_code == 0, r.output
    assert "n3: NVML GPU1 (0000:3b:00.0) broken: xid79" in r.output
    assert "slurmkit hooks gpu-reset 0000:3b:00.0 --done --node n3" in r.output
    assert "the hooks are not installed" in r.output
    state = NodeState.from_json(json.loads((sb.dir / "hooks" / "gpus" / "n3.json").read_text()), "x")
    assert [x.xid for x in state.xids] == [79]
    r = run(cli_main, ["sandbox", "gpu", "n3", "--fix", "--dir", str(sb.dir)])
    assert r.exit_code == 0 and "it had xid79 on NVML GPU1" in r.output and "gpu-reset 0000:3b:00.0 --done" in r.output
    assert _fails(NodeState.from_json(json.loads((sb.dir / "hooks" / "gpus" / "n3.json").read_text()), "x")) == {}
    r = run(cli_main, ["sandbox", "gpu", "n2", "--break", "row-remap", "--gpu", "0", "--dir", str(sb.dir)])
    assert "resumes it after resume_after clean runs" in r.output
    for args, word in ((["n9", "--fix"], "'n9': the sandbox in"), (["n2", "--break", "melt"], "'melt': not a fault"),
                       (["n2", "--break", "dbe", "--gpu", "4"], "--gpu: 4: n2 has NVML GPUs 0 to 3"),
                       (["n2"], "one of --break FAULT or --fix")):
        r = run(cli_main, ["sandbox", "gpu", *args, "--dir", str(sb.dir)])
        assert r.exit_code == 2 and word in r.output, (args, r.output)


def test_sandbox_gpu_help_and_list_name_every_fault():
    help_ = CliRunner().invoke(cli_main, ["sandbox", "gpu", "--help"]).output
    listed = CliRunner().invoke(cli_main, ["sandbox", "gpu", "--list"]).output
    for name, f in gpus.FAULTS.items():
        assert name in " ".join(help_.split()).replace("- ", "-") and f"{name:<10} {f.summary}" in listed


def test_the_sandbox_simulators_gpus_give_a_job_energy_and_utilization(node, tmp_path):
    """The sandbox's simulated GPUs (:class:`slurmkit.sandbox.gpus.GpuSimulator`) through a real
    prolog and epilog: the spool line has the job's energy and its GPUs' utilization."""
    from slurmkit.hooks import spool
    from slurmkit.sandbox import gpus

    sim = gpus.GpuSimulator(tmp_path / "gpus", ["n1"], 4, period_s=1.0)
    sim.write_all()
    node.write_config({"n1": sim.path("n1")})
    assert node.run(node.prolog).returncode == 0
    sim._t0 -= 3.0  # three seconds on: three more finished processes, 3 s more energy
    sim.write_all()
    assert node.run(node.epilog).returncode == 0
    (rec,), problems = spool.read(node.spool_dir / spool.file_name("n1"))
    assert problems == [] and rec.measured
    assert {g.index for g in rec.gpus} == {0, 2}  # SLURM_JOB_GPUS of Node.run
    assert all(g.energy_mj >= int(gpus.BUSY_POWER_W * 3.0 * 1000) for g in rec.gpus)
    assert rec.gpu_util_pct == gpus.BUSY_UTILIZATION_PCT
    assert all(a.processes >= 3 and a.max_memory_mib == gpus.BUSY_MEMORY_MIB for a in rec.accounting.values())
