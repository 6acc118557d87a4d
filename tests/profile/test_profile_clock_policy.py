"""Clock and power policies in a site profile: ``[clock_policies.<name>]`` named by node types
(the resting state) and partitions (applied for their jobs), validated with file:line:key errors,
and what the hooks' cache gives a job on a node."""

from __future__ import annotations

import pytest

from slurmkit.profile import ClockPolicy, ProfileError, load_profile
from slurmkit.profile.cache import load_clock_policies

GOOD = """extends = "sandbox"

[clock_policies.rest]
app_clock_mem_mhz = 2619
app_clock_graphics_mhz = 1755
power_limit_w = 700

[clock_policies.steady]
locked_clocks_mhz = [1215, 1410]
locked_mem_clocks_mhz = [2619, 2619]

[clock_policies.eco]
power_limit_w = 450.5

[node_types.sandbox-h100x4]
clock_policy = "rest"

[partitions.steady]
nodes = "n[1-2]"
node_type = "sandbox-h100x4"
clock_policy = "steady"

[partitions.eco]
nodes = "n[3-4]"
node_type = "sandbox-h100x4"
clock_policy = "eco"
"""


def _write(tmp_path, text):
    p = tmp_path / "site.toml"
    p.write_text(text)
    return p


def test_policies_per_node_type_and_partition(tmp_path):
    p = load_profile(_write(tmp_path, GOOD))
    assert p.clock_policies["steady"] == ClockPolicy(name="steady", locked_clocks_mhz=(1215, 1410),
                                                     locked_mem_clocks_mhz=(2619, 2619))
    rest = p.resting_policy("n3")
    assert (rest.name, rest.app_clocks_mhz, rest.power_limit_w, rest.locked_clocks_mhz) == ("rest", (2619, 1755), 700, None)
    assert p.partition_policy("eco").power_limit_w == 450.5
    assert p.partition_policy("gpu") is None          # the shipped partition names none
    assert p.node_types["sandbox-h100x4"].clock_policy == "rest"
    assert p.clock_policies["steady"].settings() == {"locked_clocks_mhz": [1215, 1410],
                                                     "locked_mem_clocks_mhz": [2619, 2619]}
    # a profile without any: no policy anywhere (the defaults live in the model)
    plain = load_profile("sandbox")
    assert plain.clock_policies == {} and plain.resting_policy("n1") is None and plain.partition_policy("gpu") is None


def test_hooks_cache_gives_the_nodes_resting_and_the_jobs_partition_policy(tmp_path):
    site = _write(tmp_path, GOOD)
    for _ in range(2):  # built, then read back from the cache file
        got = load_clock_policies(site, tmp_path / "state", "n1", "steady")
        assert got["node_type"] == "sandbox-h100x4"
        assert got["resting"] == load_profile(site).clock_policies["rest"]
        assert got["job"] == ClockPolicy(name="steady", locked_clocks_mhz=(1215, 1410),
                                         locked_mem_clocks_mhz=(2619, 2619))
    assert (tmp_path / "state" / "profile-health.json").exists()
    assert load_clock_policies(site, tmp_path / "state", "n3", "gpu")["job"] is None
    assert load_clock_policies(site, tmp_path / "state", "n3", "no-such-partition")["job"] is None
    nowhere = load_clock_policies(site, tmp_path / "state", "n9", "eco")
    assert nowhere["node_type"] is None and nowhere["resting"] is None and nowhere["job"].power_limit_w == 450.5


@pytest.mark.parametrize("old,new,key,msg", [
    ("locked_clocks_mhz = [1215, 1410]", "locked_clocks_mhz = [1410, 1215]",
     "clock_policies.steady.locked_clocks_mhz", "min 1410 MHz is above max 1215 MHz"),
    ("locked_mem_clocks_mhz = [2619, 2619]", "locked_mem_clocks_mhz = [-5, 2619]",
     "clock_policies.steady.locked_mem_clocks_mhz", "positive MHz"),
    ("locked_clocks_mhz = [1215, 1410]", "locked_clocks_mhz = [1215]",
     "clock_policies.steady.locked_clocks_mhz", "expected [min, max]"),
    ("locked_clocks_mhz = [1215, 1410]", 'locked_clocks_mhz = ["1215", "1410"]',
     "clock_policies.steady.locked_clocks_mhz", "two integers"),
    ("power_limit_w = 450.5", "power_limit_w = -450", "clock_policies.eco.power_limit_w", "watts > 0"),
    ("power_limit_w = 450.5", "power_limit_w = 0", "clock_policies.eco.power_limit_w", "watts > 0"),
    ("app_clock_graphics_mhz = 1755", "app_clock_graphics_mhz = -1755",
     "clock_policies.rest.app_clock_graphics_mhz", "must be >= 1"),
    ("power_limit_w = 450.5", "power_limit_watts = 450", "clock_policies.eco.power_limit_watts", "unknown key"),
    ("app_clock_graphics_mhz = 1755\n", "", "clock_policies.rest.app_clock_mem_mhz",
     "app_clock_graphics_mhz is missing"),
    ('clock_policy = "eco"', 'clock_policy = "ecoo"', "partitions.eco.clock_policy", "'ecoo' is not a clock policy"),
    ('clock_policy = "rest"', 'clock_policy = "resting"', "node_types.sandbox-h100x4.clock_policy",
     "'resting' is not a clock policy (known: rest, steady, eco)"),
    ('clock_policy = "rest"', "clock_policy = 3", "node_types.sandbox-h100x4.clock_policy", "expected a string"),
    ("power_limit_w = 450.5", "", "clock_policies.eco", "sets at least one of"),
])
def test_bad_policy_names_file_line_and_key(tmp_path, old, new, key, msg):
    assert old in GOOD
    bad = GOOD.replace(old, new, 1)
    path = _write(tmp_path, bad)
    with pytest.raises(ProfileError) as ei:
        load_profile(path)
    err = ei.value
    assert (err.file, err.key) == (str(path), key) and msg in err.message, str(err)
    assert err.line is not None and str(err).startswith(f"{path}:{err.line}: {key}: ")
    written = bad.splitlines()[err.line - 1]
    # the line is the bad key's own (with the bad value), or its table's header for a whole table
    assert written.startswith(f"[{key}]") or (written.split("=")[0].strip() == key.split(".")[-1]
                                               and (not new or new.strip() == written.strip())), written


def test_policies_table_must_be_tables(tmp_path):
    with pytest.raises(ProfileError) as ei:
        load_profile(_write(tmp_path, 'extends = "sandbox"\nclock_policies = 3\n'))
    assert ei.value.key == "clock_policies" and "expected a table" in ei.value.message
