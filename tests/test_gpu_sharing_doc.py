"""docs/gpu-sharing.md's worked example: the profile it shows loads, and the slurm.conf and
gres.conf it shows are what `slurmkit site` writes for it (and stay so)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from slurmkit.profile import load_profile
from slurmkit.profile.slurmconf import render_gres_conf, render_slurm_conf

DOC = Path(__file__).resolve().parents[1] / "docs" / "gpu-sharing.md"


def blocks() -> dict[str, str]:
    """The page's ``<!-- example: NAME -->`` blocks: {NAME: the fenced text after it}."""
    text = DOC.read_text()
    return {m.group(1): m.group(2) for m in
            re.finditer(r"<!-- example: ([\w.\- ]+) -->\n```\w*\n(.*?)```", text, flags=re.S)}


@pytest.fixture
def profile(tmp_path):
    path = tmp_path / "shared.toml"
    path.write_text(blocks()["profile"])
    return load_profile(path)


def _body(text: str) -> str:
    return "".join(line + "\n" for line in text.splitlines() if not line.startswith("#"))


def test_the_example_writes_the_files_the_page_shows(profile):
    b = blocks()
    assert _body(render_slurm_conf(profile)) == b["slurm.conf"]
    assert _body(render_gres_conf(profile, warn=lambda m: None)) == b["gres.conf"]


def test_the_example_has_one_partition_per_mode(profile):
    nts = {p: profile.node_types[profile.partitions[p].node_type] for p in ("mig", "shard", "mps")}
    assert nts["mig"].gpu_groups[0].mig == {"1g.20gb": 4}
    assert nts["shard"].gpu_groups[0].shards == 4 and nts["mps"].gpu_groups[0].mps == 100


def test_what_the_page_says_is_refused_is(tmp_path):
    from slurmkit.profile import ProfileError

    text = blocks()["profile"]
    for bad, why in (('"1g.20gb" = 5', "5x 1g.20gb: one A100 80GB / H100 80GB GPU holds at most 4"),
                     ('"7g.80gb" = 2', "holds at most 1"), ('"3g.40gb" = 3', "holds at most 2"),
                     ('"3g.40gb" = 2, "1g.10gb" = 1', "takes 9 of 8 memory slices")):
        path = tmp_path / "bad.toml"
        path.write_text(text.replace('"1g.20gb" = 4', bad))
        with pytest.raises(ProfileError, match=re.escape(why)):
            load_profile(path)


@pytest.mark.parametrize("name", ["submit mig", "submit shard", "submit mps", "submit refused"])
def test_the_submit_examples_are_what_submit_writes(tmp_path, name):
    import shlex

    from click.testing import CliRunner

    from slurmkit.cli import cli

    (tmp_path / "shared.toml").write_text(blocks()["profile"])
    cmd, *shown = blocks()[name].splitlines()
    args = shlex.split(cmd.removeprefix("$ slurmkit "))
    cut = args.index("--")
    args[cut:cut] = ["--site", str(tmp_path / "shared.toml"), "--dry-run"]
    res = CliRunner().invoke(cli, args)
    if name == "submit refused":
        assert res.exit_code == 2 and res.output.strip() == shown[0]
        return
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert all(line in lines for line in shown), (shown, [x for x in lines if x.startswith("#SBATCH")])
