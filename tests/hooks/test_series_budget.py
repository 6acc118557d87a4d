"""The series a healthy 8-GPU node with 8 HCAs exports, counted: every textfile the hooks write
for it (prolog, epilog and health check files, the node, GPU and fabric files) with an 8-GPU job
running, rendered by the hooks' own writers (slurmkit.hooks.main.write_textfile and
slurmkit.hooks.metrics.node_files) from real inputs:

- GPUs: ../shared/corpus/nvidia-smi-q/8xH100_hw_slowdown_power_brake.txt (leptonai/gpud test
  data: `nvidia-smi -q` of an 8x H100 node), read by slurmkit's own capture reader. That capture
  has HW Slowdown and HW Power Brake active on every GPU; for the healthy node they are cleared
  (clock event reasons = GPU idle, nvmlClocksEventReasonGpuIdle 0x1), every other value as read.
- HCAs: the eight compute HCAs of the shipped dgx-h100 node type (site/dgx-h100.toml: device,
  PCI address, InfiniBand at 400 Gb/s) in a sysfs tree laid out as the kernel's
  (tests/fake_sysfs.py; ConnectX-7 identity from ../shared/corpus/fabric/ibstat.47.0.h100.*),
  every port ACTIVE / LinkUp, read by slurmkit's sysfs reader.

docs/hooks.md gives the figure and what it makes for 1,000 and 10,000 nodes."""

from __future__ import annotations

import re
import types

from prometheus_client.parser import text_string_to_metric_families

from fake_sysfs import healthy_tree

from slurmkit.health.checks import run_checks
from slurmkit.health.config import judged_hcas, load_config
from slurmkit.health.fabric import read_ib_ports
from slurmkit.health.source import load_capture
from slurmkit.hooks import main as hooks_main
from slurmkit.hooks import nodestate
from slurmkit.hooks.flows import Verdict
from slurmkit.profile.load import load_profile

from conftest import REPO

#: At most this many series per healthy 8-GPU, 8-HCA node (the figure in docs/hooks.md).
BUDGET = 150


def _compute_nics() -> list:
    """The dgx-h100 node type's compute HCAs (its storage NICs left out: 8 HCAs)."""
    return [n for n in next(iter(load_profile("dgx-h100").node_types.values())).nics if n.role == "compute"]


def _healthy_node(corpus, tmp_path):
    state = load_capture(corpus / "nvidia-smi-q" / "8xH100_hw_slowdown_power_brake.txt", node="n1")
    assert len(state.gpus) == 8
    for g in state.gpus:
        assert g.get("clock_event_reasons") & 0x8  # HW Slowdown, as captured
        g.put("clock_event_reasons", 0x1)
    nics = _compute_nics()
    assert len(nics) == 8
    cfg = load_config(None, nics=nics)
    root = healthy_tree(tmp_path / "sys", hcas=[n.device for n in nics], pcis={n.device: n.pci for n in nics if n.pci})
    state.ib_ports, errors = read_ib_ports(root, judged_hcas(nics))
    assert errors == [] and len(state.ib_ports) == 8
    results = run_checks(state, cfg)
    return state, results


def _write_node(state, results, tmp_path, hcns="ANY"):
    """The files of the three hooks' latest runs, with an 8-GPU job running (its prolog record)."""
    cfg = types.SimpleNamespace(state_dir=str(tmp_path / "state"), textfile_dir=str(tmp_path / "textfile"),
                                deadline_s=8.0, health_check_node_state=hcns)
    gpus = [nodestate.JobGpuStart(g.index, g.index, g.index, g.uuid, g.pci_bus_id) for g in state.gpus]
    for hook in ("epilog", "prolog", "healthcheck"):
        if hook == "prolog":
            nodestate.save_job(cfg.state_dir, "n1", "4242", nodestate.JobStart(start_s=1.0, gpus=gpus, user="alice"))
        run = types.SimpleNamespace(cfg=cfg, node="n1", hook=hook, state=state,
                                    verdict=Verdict(results=list(results)),
                                    node_gpus=types.SimpleNamespace(files=[None] * 8, gpuless=False))
        hooks_main.write_textfile(run, 0, 1.5, 0)
    return tmp_path / "textfile"


def _series(textfile_dir) -> dict:
    """{file name: [(metric, labels), ...]} of every sample in the directory."""
    out = {}
    for p in sorted(textfile_dir.glob("*.prom")):
        out[p.name] = [(s.name, tuple(sorted(s.labels.items())))
                       for fam in text_string_to_metric_families(p.read_text()) for s in fam.samples]
    return out


def test_a_healthy_8_gpu_8_hca_node_exports_at_most_150_series(corpus, tmp_path):
    state, results = _healthy_node(corpus, tmp_path)
    bad = [(r.check, r.status.value, r.gpu_index, r.place) for r in results if r.status.value != "pass"]
    assert bad == []  # a healthy node: every result passes
    files = _series(_write_node(state, results, tmp_path))
    per_file = {name: len(s) for name, s in files.items()}
    total = sum(per_file.values())
    assert total <= BUDGET, per_file
    # the figure the docs give, and no result series for the passes (one count per hook instead)
    assert total == 122, per_file
    names = [m for s in files.values() for m, _ in s]
    assert "slurmkit_health_check_status" not in names
    assert names.count("slurmkit_health_checks_passed") == 3
    assert names.count("slurmkit_fabric_port_expected_rate_bytes_per_second") == 8
    assert names.count("slurmkit_gpu_job_info") == 8
    # `nvidia-smi -q` shows no energy counter: a live NVML read adds slurmkit_gpu_energy_joules_total
    # per GPU (nvmlDeviceGetTotalEnergyConsumption), the figure the docs give for a fleet
    assert "slurmkit_gpu_energy_joules_total" not in names
    live = total + 8
    assert live <= BUDGET
    doc = (REPO / "docs" / "hooks.md").read_text()
    assert re.search(rf"\b{total} series\b", doc) and re.search(rf"\b{live} series\b", doc), "the per-node figures"
    assert f"{live * 1000:,}" in doc and f"{live * 10000:,}" in doc


def test_a_fault_adds_its_detail_with_device_and_port(corpus, tmp_path):
    """A port down on the same node: one more series per hook naming its HCA and port, beside the count."""
    from fake_sysfs import set_port

    state, _ = _healthy_node(corpus, tmp_path)
    set_port(tmp_path / "sys", "mlx5_4", state="DOWN", phys="Polling")
    nics = _compute_nics()
    state.ib_ports, _ = read_ib_ports(tmp_path / "sys", judged_hcas(nics))
    results = run_checks(state, load_config(None, nics=nics))
    files = _series(_write_node(state, results, tmp_path))
    status = [dict(lab) for s in files.values() for m, lab in s if m == "slurmkit_health_check_status"]
    assert {(d["hook"], d["check"], d["device"], d["port"]) for d in status} == {
        (h, "ib_port", "mlx5_4", "1") for h in ("prolog", "epilog", "healthcheck")}
