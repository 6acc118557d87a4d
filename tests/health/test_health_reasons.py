"""Drain reasons fit Slurm: ``sinfo -R`` shows the first 20 characters (its default ``%20E``), so
every reason of the checks beyond NVML leads with ``slurmkit: <tag> <where>``; none is longer
than the one cap (``REASON_MAX``), cut at a word by the one helper (``fit_reason``) that the GPU
checks, the active check and ``scontrol update`` all use."""

from __future__ import annotations

import pytest

from fake_sysfs import healthy_tree, set_identity, set_port
from slurmkit.health import checks as C
from slurmkit.health.result import REASON_LEAD, REASON_MAX, CheckResult, fit_reason
from slurmkit.health.config import load_config
from slurmkit.health.fabric import COUNTERS, read_ib_ports
from slurmkit.health.state import NodeState
from slurmkit.hooks import drain


def test_fit_reason_keeps_short_text_and_cuts_long_text_at_a_word():
    assert fit_reason("slurmkit: ib mlx5_0/1: down (DOWN/Polling)") == "slurmkit: ib mlx5_0/1: down (DOWN/Polling)"
    long = "slurmkit: dcgm_diag: GPU1 GPU Memory: fail (" + "word " * 40 + ")"
    cut = fit_reason(long)
    assert len(cut) <= REASON_MAX and cut.endswith("word...") and cut.startswith("slurmkit: dcgm_diag: GPU1")
    more = fit_reason(long + " (+3 more)", 60)
    assert len(more) <= 60 and more.endswith("... (+3 more)")  # the count of other failures is kept
    assert fit_reason("a\nb\tc") == "a b c"  # one printable line
    assert len(fit_reason("x" * 500)) == REASON_MAX  # no word boundary: cut hard, still within the cap


def test_scontrol_gets_the_same_rule():
    text = "slurmkit: nvsmi_error GPU1 0000:1a:00.0: " + "Unknown Error " * 30
    assert drain.sanitize(text) == fit_reason(text) and len(drain.sanitize(text)) <= REASON_MAX


def _ports(tmp_path, hca, pci, netdev):
    root = healthy_tree(tmp_path / "sys", hcas=(hca,))
    set_identity(root, hca, pci, netdevs=[netdev])
    return root


@pytest.mark.parametrize("hca,pci,netdev", [("mlx5_0", "0000:18:00.0", "ibp24s0"),
                                            ("mlx5_11", "0000:dc:00.0", "ibp220s0"),
                                            ("mlx5_bond_0", "0000:81:00.1", "enp129s0f1np1")])
def test_fabric_reasons_lead_with_the_tag_and_the_place(tmp_path, hca, pci, netdev):
    root = _ports(tmp_path, hca, pci, netdev)
    nics = [{"device": hca, "link_layer": "InfiniBand", "rate_gbps": 400, "role": "compute"}]
    cfg = load_config(nics=nics)
    lead = f"slurmkit: ib {hca}/1 {netdev}"[:REASON_LEAD]
    # down, slow, every counter rising at once (the longest counters reason), missing
    cases = [dict(state="DOWN", phys="Polling"), dict(rate=200),
             dict(counters={c: 200 for c in COUNTERS})]
    for kw in cases:
        set_port(root, hca, **kw)
        state = NodeState(node="n1", source="t")
        state.ib_ports, _ = read_ib_ports(root, cfg.expect["hcas"])
        state.baseline = {"ib": {f"{pci}/1": {c: 0 for c in COUNTERS}}}
        fails = [r for r in C.run_checks(state, cfg) if r.status is C.FAIL]
        assert fails, kw
        reason = fails[0].reason(more=len(fails) - 1)
        assert reason.startswith(f"slurmkit: ib {hca}/1 {netdev}: ") and reason[:REASON_LEAD] == lead, reason
        assert len(reason) <= (60 if len(hca + netdev) <= 16 else 70), reason  # DGX names: within 60
        set_port(root, hca)
    state = NodeState(node="n1", source="t")
    state.ib_ports, _ = read_ib_ports(root, [dict(cfg.expect["hcas"][0], device="mlx5_9", pci="0000:9a:00.0")])
    (r,) = [r for r in C.run_checks(state, cfg) if r.status is C.FAIL]
    assert r.reason() == "slurmkit: ib mlx5_9 0000:9a:00.0: missing"


def test_counters_reason_names_the_deciding_counter_first():
    r = CheckResult("ib_counters", C.FAIL, value="link_downed +3, symbol_error +12, port_rcv_errors +1",
                    place="mlx5_0/1 ibp24s0")
    assert r.reason() == "slurmkit: ib mlx5_0/1 ibp24s0: link_downed +3 and 2 more"
    assert r.line() == "ib_counters mlx5_0/1 ibp24s0: link_downed +3 and 2 more"  # the log keeps the check id


def test_gpu_reasons_keep_their_shape():
    r = CheckResult("pcie_width", C.FAIL, 3, "GPU-x", "0000:3b:00.0", 8, 16, "PCIe x8 of x16")
    assert r.reason() == "slurmkit: pcie_width GPU3 0000:3b:00.0: x8 of x16"
    assert r.reason(more=2) == "slurmkit: pcie_width GPU3 0000:3b:00.0: x8 of x16 (+2 more)"
    r = CheckResult("nvlink_down", C.FAIL, 3, "GPU-x", "0000:3b:00.0", 16, 18, "2 NVLink(s) down")
    assert r.reason() == "slurmkit: nvlink GPU3 0000:3b:00.0: 2 NVLink(s) down"


def test_reason_names_nvml_and_gres_index_when_both_are_known():
    from slurmkit.health.result import CheckResult

    r = CheckResult("xid", "fail", 1, "GPU-u", "0000:3b:00.0", 79, None, "Xid 79 (GPU fell off the bus) x1", gres_index=3)
    assert r.reason() == "slurmkit: xid GPU1 (gres index 3, 0000:3b:00.0): Xid 79 GPU fell off the bus"
    r.gres_index = None  # slurmkit health check reads no gres.conf: NVML's index alone
    assert r.reason() == "slurmkit: xid GPU1 0000:3b:00.0: Xid 79 GPU fell off the bus"
