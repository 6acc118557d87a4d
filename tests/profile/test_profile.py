"""Site profile loader: layering, validation errors (file, key, line), helpers others use."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from slurmkit.profile import ProfileError, load_profile, load_profile_data
from slurmkit.profile.layers import merge, parse_override

SITE = Path(__file__).resolve().parents[2] / "site"


def _sandbox_text() -> str:
    return (SITE / "sandbox.toml").read_text()


def _write(tmp_path, text, name="p.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_sandbox_profile_helpers():
    raw = tomllib.loads(_sandbox_text())
    p = load_profile("sandbox")
    assert p.name == raw["cluster"]["name"]
    part = p.default_partition
    assert part.name == "gpu" and part.default
    assert p.partition().node_names == ("n1", "n2", "n3", "n4")
    nt = p.node_type_for("gpu")
    assert nt.name == raw["partitions"]["gpu"]["node_type"]
    assert nt.gpu_count == len(raw["node_types"][nt.name]["gpus"])
    want_compute = [n["device"] for n in raw["node_types"][nt.name]["nics"] if n["role"] == "compute"]
    assert [n.device for n in nt.compute_nics()] == want_compute
    assert [n.device for n in p.compute_nics(nt.name)] == want_compute
    for g in raw["node_types"][nt.name]["gpus"]:
        assert p.gpu_cpus(nt.name, g["index"]) == tuple(g["cpus"])
        assert nt.gpu(g["index"]).numa_node == g["numa_node"]
    assert p.leaf_of("n1") == "leaf1" and p.leaf_of("n4") == "leaf2" and p.leaf_of("zz") is None
    assert p.leaves() == {"leaf1": ("n1", "n2"), "leaf2": ("n3", "n4")}
    assert p.node_type_of("n3").name == nt.name
    assert p.nccl.socket_ifname == "lo"            # NCCL_SOCKET_IFNAME text, as NCCL reads it
    assert p.nccl.version == raw["nccl"]["version"]
    assert p.report.pue == raw["report"]["pue"]
    assert p.source.endswith("sandbox.toml")


def test_unknown_partition_names_known_ones():
    p = load_profile("sandbox")
    with pytest.raises(KeyError, match="known: gpu"):
        p.partition("nope")


def test_preset_fills_defaults(tmp_path):
    drop = ("price_per_gpu_hour", "switch_wait", "deadline_s")
    text = "\n".join(l for l in _sandbox_text().splitlines() if not l.startswith(drop))
    p = load_profile(_write(tmp_path, text))
    assert p.report.price_per_gpu_hour is None  # no preset invents a price
    assert p.report.pue == tomllib.loads(text)["report"]["pue"]
    assert p.submit.switch_wait == "5:00"  # the model's defaults (docs/site-profile.md)
    assert p.health.deadline_s == 8.0 and p.health.per_call_deadline_s == 3.0
    assert p.layers[0] == "preset"


def test_overrides_key_value_file_and_dict(tmp_path):
    ov = _write(tmp_path, '[nccl]\nversion = "2.23.4"\n', "ov.toml")
    p = load_profile("sandbox", overrides=["submit.cpus_per_gpu=8", ov, {"report": {"currency": "USD"}}])
    assert p.submit.cpus_per_gpu == 8
    assert p.nccl.version == "2.23.4"
    assert p.report.currency == "USD"
    assert p.nccl.fabric == "infiniband"  # untouched keys survive the merge
    assert p.layers[-3:] == ("<override submit.cpus_per_gpu=8>", str(ov), "<override>")


def test_override_bare_string_value():
    assert parse_override("cluster.name=abc") == {"cluster": {"name": "abc"}}
    assert parse_override("a.b=[1, 2]") == {"a": {"b": [1, 2]}}
    with pytest.raises(ProfileError, match="dotted.key=value"):
        parse_override("nonsense")


def test_merge_replaces_arrays_and_merges_tables():
    assert merge({"a": {"x": 1, "y": [1, 2]}}, {"a": {"y": [3]}}) == {"a": {"x": 1, "y": [3]}}


def test_extends_layers_a_shipped_profile(tmp_path):
    p = load_profile(_write(tmp_path, 'extends = "sandbox"\n[cluster]\nname = "mine"\n'))
    assert p.name == "mine"
    assert p.node_type_for().gpu_count == 4
    assert "sandbox.toml" in p.layers[1]


def test_extends_loop_is_an_error(tmp_path):
    _write(tmp_path, 'extends = "./b.toml"\n', "a.toml")
    _write(tmp_path, 'extends = "./a.toml"\n', "b.toml")
    with pytest.raises(ProfileError, match="loop"):
        load_profile(tmp_path / "a.toml")


@pytest.mark.parametrize("old,new,key,msg", [
    ('link_layer = "InfiniBand"', 'link_layer = "Infiniband"', "node_types.sandbox-h100x4.nics[0].link_layer",
     "not one of"),
    ("gpu_count = 4", "gpu_count = 5", "node_types.sandbox-h100x4.gpu_count", "4 [[gpus]]"),
    ('node_type = "sandbox-h100x4"', 'node_type = "h100x8"', "partitions.gpu.node_type", "not a node type"),
    ('nodes = "n[1-4]"', 'nodes = "n[1-4"', "partitions.gpu.nodes", "bad hostlist"),
    ("cpus = [1]", "cpus = [9]", "node_types.sandbox-h100x4.gpus[2].cpus", "outside the node's 2 CPUs"),
    ('nearest_nics = ["mlx5_3"]', 'nearest_nics = ["mlx5_9"]', "node_types.sandbox-h100x4.gpus[3].nearest_nics",
     "not one of the node type's NICs"),
    ("pue = 1.3", "pue = 0.8", "report.pue", "below 1.0"),
    ('switches = ["leaf1", "leaf2"]', 'switches = ["leaf1", "leaf3"]', "fabric.spines[0].switches", "'leaf3'"),
    ("memory_mib = 16000", 'memory_mib = "16G"', "node_types.sandbox-h100x4.memory_mib", "expected an integer"),
    ("p2p = true", "p2p = true\np2q = 1", "node_types.sandbox-h100x4.p2q", "unknown key"),
    ('mode = "enforce"', 'mode = "strict"', "health.mode", "not one of"),
    ("cpus = 8,", "cpus = 9,", "node_types.sandbox-h100x4.slurm_node.cpus", "threads_per_core = 8"),
    ('device = "mlx5_0"', 'device = "mlx5_0"\n  netdev = "ib 0"', "node_types.sandbox-h100x4.nics[0].netdev",
     "not a Linux interface name"),
    ('device = "mlx5_1"', 'device = "mlx5_1"\n  netdev = "mlx5_0"', "node_types.sandbox-h100x4.nics[1].netdev",
     "named by two NICs"),
])
def test_validation_errors_name_file_key_and_line(tmp_path, old, new, key, msg):
    text = _sandbox_text()
    assert old in text
    bad = text.replace(old, new, 1)
    path = _write(tmp_path, bad)
    with pytest.raises(ProfileError) as ei:
        load_profile(path)
    err = ei.value
    assert err.file == str(path)
    assert err.key == key
    assert msg in err.message
    # the line the error points at is where the bad value is written
    assert err.line is not None
    assert new.splitlines()[-1].strip() in bad.splitlines()[err.line - 1]
    assert str(err).startswith(f"{path}:{err.line}: {key}: ")


def test_toml_syntax_error_has_line(tmp_path):
    text = _sandbox_text().splitlines()
    text[10] = "this is = = broken"
    path = _write(tmp_path, "\n".join(text))
    with pytest.raises(ProfileError) as ei:
        load_profile(path)
    assert ei.value.line == 11 and "TOML syntax error" in ei.value.message


def test_missing_file_and_unknown_name(tmp_path):
    with pytest.raises(ProfileError, match="cannot read"):
        load_profile(tmp_path / "none.toml")
    with pytest.raises(ProfileError, match="not a shipped profile"):
        load_profile("no-such-profile")


def test_two_default_partitions(tmp_path):
    text = _sandbox_text() + '\n[partitions.debug]\nnodes = "n1"\nnode_type = "sandbox-h100x4"\ndefault = true\n'
    with pytest.raises(ProfileError) as ei:
        load_profile(_write(tmp_path, text))
    assert ei.value.key == "partitions.debug.default"


def test_leaf_with_node_outside_partitions(tmp_path):
    text = _sandbox_text().replace('name = "leaf2"\nnodes = "n[3-4]"', 'name = "leaf2"\nnodes = "n[3-5]"')
    with pytest.raises(ProfileError) as ei:
        load_profile(_write(tmp_path, text))
    assert ei.value.key == "fabric.leaves[1].nodes" and "n5" in ei.value.message


def test_in_memory_data():
    data = tomllib.loads(_sandbox_text())
    data["cluster"]["name"] = "two words"
    with pytest.raises(ProfileError, match="one word"):
        load_profile_data(data)


def test_node_with_two_node_types(tmp_path):
    text = _sandbox_text().replace("[node_types.sandbox-h100x4]", """[partitions.big]
nodes = "n[4-5]"
node_type = "other"

[node_types.other]
gpu_model = "a100"
gpu_count = 1

[node_types.sandbox-h100x4]""")
    with pytest.raises(ProfileError) as ei:
        load_profile(_write(tmp_path, text))
    assert ei.value.key == "partitions.big.nodes" and "node n4" in ei.value.message
    assert "n[4-5]" in text.splitlines()[ei.value.line - 1]


def test_partition_overlap_same_type_is_fine(tmp_path):
    text = _sandbox_text() + '\n[partitions.debug]\nnodes = "n1"\nnode_type = "sandbox-h100x4"\n'
    p = load_profile(_write(tmp_path, text))
    assert p.nodes() == ("n1", "n2", "n3", "n4") and p.nodes("debug") == ("n1",)
    assert p.default_partition.name == "gpu"


def test_a_partial_gpu_list_over_an_extended_profile_says_lists_are_replaced(tmp_path):
    # one GPU's slot is x8 by design: giving only that GPU replaces the base's four GPU tables
    text = ('extends = "sandbox"\n[[node_types.sandbox-h100x4.gpus]]\nindex = 2\n'
            'cpus = [0, 1]\npcie_width = 8\n')
    with pytest.raises(ProfileError) as ei:
        load_profile(_write(tmp_path, text))
    msg = str(ei.value)
    assert "expected index 0, got 2" in msg and "replaces the one of the profile it extends whole" in msg
    assert "p.toml:3: node_types.sandbox-h100x4.gpus[0].index" in msg  # the file and line of the index


@pytest.mark.parametrize("text,key,msg", [
    ("[node_types.sandbox-h100x4]\nnics = 3\n", "node_types.sandbox-h100x4.nics",
     "expected an array of tables [[...nics]]"),
    ('[fabric]\nspines = "leaf1"\n', "fabric.spines", "expected an array of tables [[fabric.spines]]"),
    ("[fabric]\nleaves = [1]\n", "fabric.leaves[0]", "expected a table, got"),
    ("[[node_types.sandbox-h100x4.gpus]]\nindex = 0\nbogus = 1\n", "node_types.sandbox-h100x4.gpus[0].bogus",
     "unknown key (expected one of: index, cpus,"),
])
def test_arrays_of_tables_are_checked_alike(tmp_path, text, key, msg):
    """nics, gpus, gpu_groups, fabric leaves/blocks/spines: one check of an array of tables (an
    array, each entry a table, only known keys), its errors naming the entry's key."""
    with pytest.raises(ProfileError) as ei:
        load_profile(_write(tmp_path, 'extends = "sandbox"\n' + text))
    assert (ei.value.key, msg in ei.value.message) == (key, True), str(ei.value)
