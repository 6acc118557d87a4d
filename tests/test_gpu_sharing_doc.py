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


@pytest.mark.corpus
def test_the_health_example_on_the_real_mig_capture(profile, tmp_path, corpus):
    """The page's mig node (AutoDetect=nvml, four 1g.20gb on an A100-SXM4-80GB) judged on the
    real capture (one <gpu> section of 4 attached: read through a copy saying 1, as
    tests/health/test_health_mig.py does), and on an EDIT of it with its last instance removed."""
    from slurmkit.health.checks import evaluate
    from slurmkit.health.config import load_config
    from slurmkit.health.mig import physical_gpu_count
    from slurmkit.health.result import CheckResult
    from slurmkit.health.source import load_capture
    from slurmkit.hooks import gres

    (tmp_path / "slurm.conf").write_text(render_slurm_conf(profile))
    (tmp_path / "gres.conf").write_text(render_gres_conf(profile, warn=lambda m: None))
    lines = gres.load_gres_conf(tmp_path / "gres.conf")
    whole, inst = gres.node_mig_instances(lines, "mig1",
                                          slurm_gres=lambda: gres.slurm_conf_gres(tmp_path / "slurm.conf", "mig1"))
    cfg = load_config(gpu_count=physical_gpu_count(whole, inst))
    cfg.expect["mig_instances"] = inst
    text = (corpus / "nvidia-smi-q" / "a100-sxm4-v12.xml").read_text() \
        .replace("<attached_gpus>4</attached_gpus>", "<attached_gpus>1</attached_gpus>")
    (tmp_path / "ok.xml").write_text(text)
    rep = evaluate(load_capture(tmp_path / "ok.xml"), cfg)
    got = {r["check"]: (r["status"], r["value"], r["limit"]) for r in rep["results"]
           if r["check"] in ("gpu_count", "mig_instances")}
    assert got["gpu_count"] == ("pass", 1, 1) and got["mig_instances"][:2] == ("pass", "4 of 4")
    start = text.rindex("<mig_device>")
    (tmp_path / "edit.xml").write_text(text[:start] + text[text.index("</mig_device>", start) + len("</mig_device>"):])
    rep = evaluate(load_capture(tmp_path / "edit.xml"), cfg)
    [fail] = [r for r in rep["results"] if r["status"] == "fail"]
    assert CheckResult(**fail).reason() == blocks()["drain reason"].strip()


def test_the_report_views_are_the_tres_parsers():
    from fractions import Fraction

    from slurmkit.slurm import tres

    head, *rows = blocks()["report views"].splitlines()
    assert head.split() == ["AllocTRES", "GPUs", "physical", "GPUs"]
    for row in rows:
        alloc, gpus, physical = row.split()
        assert tres.gpu_count(alloc) == int(gpus)
        assert tres.physical_gpus(alloc) == Fraction(physical)
    assert tres.gpu_count("cpu=4,gres/shard=2") is None and tres.physical_gpus("cpu=4,gres/mps=50") is None
