"""The node type's expected PCIe link width and generation reach the hooks through the site
profile (its cached facts), on snapshots recorded from the fake NVML."""

import json

from nodeenv import set_value, where

SITE = """[cluster]
name = "t"
[partitions.gpu]
nodes = "n[1-2]"
node_type = "x16"
[node_types.x16]
gpu_model = "h100"
gpu_count = 4
pcie_width = 16
pcie_gen = 5
{gpus}
"""


def _site(tmp_path, slot_x8: int | None = None):
    gpus = "".join(f"  [[node_types.x16.gpus]]\n  index = {i}\n" + ("  pcie_width = 8\n" if i == slot_x8 else "")
                   for i in range(4))
    p = tmp_path / "site.toml"
    p.write_text(SITE.format(gpus=gpus))
    return p


def _narrow(snap, tmp_path, nvml_index):
    bad = set_value(snap, nvml_index, "pcie_link_width", 8)
    p = tmp_path / f"x8-gpu{nvml_index}.json"
    p.write_text(json.dumps(bad))
    return p, next(g for g in bad["gpus"] if g["index"] == nvml_index)


def test_x8_link_where_the_node_type_expects_x16_fails_the_prolog(node, healthy, tmp_path):
    path, snap = healthy
    p, g = _narrow(snap, tmp_path, 1)
    node.write_config({"n1": p}, mode=None, extra=f'profile = "{_site(tmp_path)}"\n')
    r = node.run(node.prolog)
    assert r.returncode == 1, r.stderr  # enforce: hardware evidence (scontrol is unreachable here)
    assert f"slurmkit: pcie_width {where(node, g)}: x8 of x16" in r.stderr
    assert node.metric("n1", "prolog", "slurmkit_health_check_status", check="pcie_width", gpu="1") == 2


def test_x8_slot_declared_x8_in_the_profile_passes(node, healthy, tmp_path):
    path, snap = healthy
    p, _ = _narrow(snap, tmp_path, 1)
    node.write_config({"n1": p}, mode=None, extra=f'profile = "{_site(tmp_path, slot_x8=1)}"\n')
    r = node.run(node.prolog)
    assert r.returncode == 0, r.stderr
    assert "pcie_width" not in r.stderr and "own trouble" not in r.stderr
    assert node.metric("n1", "prolog", "slurmkit_health_check_status", check="pcie_width", gpu="1") == 0
    # the facts the hook used came from the cached profile: the declared slot, the expected gen
    cache = json.loads((node.state_dir / "profile-health.json").read_text())
    assert cache["value"]["pcie"]["x16"] == {"width": 16, "gen": 5, "gpus": {"1": 8}}
