"""The hooks config's plain-subset reader agrees with tomllib wherever it answers."""

from __future__ import annotations

import tomllib

from hypothesis import given, settings
from hypothesis import strategies as st

from slurmkit.hooks import config as hconfig
from slurmkit.hooks.config import simple_toml

LINE = st.sampled_from(["", "# c", "[nodes]", "[nodes.n1]", "[nodes.n2]", "[a.b-c]", "[ x ]", "[a]", "x = 1",
                        'mode = "observe"', 'p = "/etc/slurm/x y.toml"', "d = 8.0", "d = 8.", "n = -3", "n = 01",
                        "n = +1", "b = true", "b = True", 'q = "a\\"b"', 'q = "a', "k=2", "k = 2 # two",
                        "a.b = 1", "e = 1e3", "u = 1_000", 'w = "tab\there"', 'z = "\x01"', "=", "v = ",
                        "n1 = 3", "\tindented = 4", "x = 1\r", "# c\x01", "#\x7f", "\r", "a\r= 1", "# \xa0é"])


@settings(max_examples=400, deadline=None)
@given(st.lists(LINE, max_size=8))
def test_the_subset_reader_never_disagrees_with_tomllib(lines):
    text = "\n".join(lines) + "\n"
    fast = simple_toml(text)
    if fast is None:
        return  # tomllib decides (and reports errors with their line)
    assert fast == tomllib.loads(text)


def test_what_install_writes_is_read_without_tomllib(tmp_path):
    text = hconfig.render(tmp_path / "slurm.conf", gres_conf=tmp_path / "gres.conf", profile=tmp_path / "site.toml",
                          mode="observe", state_dir=tmp_path / "state", spool_dir=tmp_path / "spool",
                          textfile_dir=tmp_path / "tf", deadline_s=6.5,
                          snapshots={"n1": tmp_path / "n1.json", "gpu-07": tmp_path / "n7.json"},
                          slurm_bin_dir="/usr/bin", health_check_node_state="IDLE,CYCLE")
    fast = simple_toml(text)
    assert fast is not None and fast == tomllib.loads(text)
    assert fast["mode"] == "observe" and fast["deadline_s"] == 6.5
    assert hconfig.parse(text, tmp_path / "h.toml").health_check_node_state == "IDLE,CYCLE"
    assert fast["nodes"]["gpu-07"]["snapshot"] == str(tmp_path / "n7.json")


def test_an_edited_config_outside_the_subset_still_parses_and_errors_keep_their_line():
    cfg = hconfig.parse('slurm_conf = "/etc/slurm/slurm.conf"  # edited by hand\nresume_after = 5\n', "/x.toml")
    assert cfg.resume_after == 5 and str(cfg.slurm_conf) == "/etc/slurm/slurm.conf"
    try:
        hconfig.parse('slurm_conf = "/s"\nmode = observe\n', "/x.toml")
    except hconfig.HookConfigError as exc:
        assert exc.file == "/x.toml" and exc.line == 2 and "not valid TOML" in exc.message
    else:
        raise AssertionError("a bare word value must be a TOML error")
