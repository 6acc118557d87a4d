"""Golden scripts: every template x a few shipped profiles, rendered with a fixed request.

A change to generated scripts shows up as a diff under tests/submit/golden/ in review. Regenerate with
``SLURMKIT_REGEN_GOLDEN=1 .venv/bin/pytest tests/submit/test_submit_golden.py``.
"""

import os
from pathlib import Path

import pytest

from slurmkit.submit import render, site, templates

REPO = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent / "golden"
REGEN = os.environ.get("SLURMKIT_REGEN_GOLDEN") == "1"
#: Shipped profiles with golden scripts (those present in site/; sandbox always). Not the
#: one-node workstation-2gpu: the multi-node templates are rendered for 2 nodes.
PROFILES = [p for p in ("sandbox", "dgx-a100", "dgx-h100", "aws-p5", "azure-ndh100v5", "rtx4090-8x")
            if (REPO / "site" / f"{p}.toml").is_file()]


def request_for(name: str) -> render.SubmitRequest:
    t = templates.get(name)
    sets = {"sets": '[{"lr": 0.1}, {"lr": 0.01}]'} if name == "array" else {}
    return render.SubmitRequest(
        template=name, command=("python3", "train.py", "--config", "conf/a b.yaml", "--lr={lr}"),
        nodes=1 if t.tasks == "single" else 2, time="2:00:00", name=f"golden {name} #1",
        comment="it's a \"test\" $HOME", output="logs/%x-%j.out", sets=sets)


def _compute_nics_as(layer: str) -> list[dict]:
    """The sandbox node type's NICs with its compute NICs' link layer made ``layer`` (an EFA or
    RoCE fabric over InfiniBand NICs is refused by the profile check, as submit refuses it)."""
    import tomllib

    nics = tomllib.loads((REPO / "site" / "sandbox.toml").read_text())["node_types"]["sandbox-h100x4"]["nics"]
    return [{**n, "link_layer": layer} if n["role"] == "compute" else n for n in nics]


#: Fabric variants of the sandbox profile (load_profile overrides), for the launchers.
VARIANTS = {
    "sandbox+roce-nccl2.18": {"nccl": {"fabric": "roce", "version": "2.18.3", "gid_index": 3},
                              "node_types": {"sandbox-h100x4": {"nics": _compute_nics_as("RoCE")}}},
    "sandbox+tcp": {"nccl": {"fabric": "tcp", "socket_ifname": "=lo"}},   # exact names (NCCL syntax)
    "sandbox+efa": {"nccl": {"fabric": "efa", "efa_plugin_version": "1.6.0"},
                    "node_types": {"sandbox-h100x4": {"nics": _compute_nics_as("EFA")}}},
    "sandbox+pcie-nop2p": {"nccl": {"fabric": "pcie"}, "node_types": {"sandbox-h100x4": {"p2p": False}},
                           "submit": {"container": True, "rendezvous_interface": "ib0"}},
}


def _check(name, profile, overrides=()):
    from slurmkit.profile import load_profile

    from slurmkit.submit.check import checked_facts

    facts = checked_facts(load_profile(profile.split("+")[0], overrides=overrides))   # what submit checks
    sets = {"container_image": "nvcr.io#nvidia/pytorch:24.01-py3"} if "pcie" in profile else {}
    req = request_for(name)
    req = render.SubmitRequest(**{**req.__dict__, "sets": {**req.sets, **sets}})
    text = render.render(render.plan(req, facts, templates.get(name)))
    path = GOLDEN / f"{name}--{profile}.sbatch"
    if REGEN:
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"{path} missing: regenerate with SLURMKIT_REGEN_GOLDEN=1 (a new shipped profile or template needs its goldens committed)"
    assert text == path.read_text(encoding="utf-8"), f"{path} differs (review, then SLURMKIT_REGEN_GOLDEN=1)"


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("name", templates.names())
def test_golden_script(name, profile):
    _check(name, profile)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("name", ["torchrun", "srun"])
def test_golden_fabric_variant(name, variant):
    _check(name, variant, (VARIANTS[variant],))


def _cli_args(name: str, profile: str) -> list[str]:
    """``slurmkit submit`` flags giving :func:`request_for`'s request."""
    req = request_for(name)
    args = ["submit", name, "--site", profile, "-N", str(req.nodes), "-t", req.time, "-J", req.name,
            "--comment", req.comment, "-o", req.output]
    for k, v in req.sets.items():
        args += ["--set", f"{k}={v}"]
    return args + ["--", *req.command]


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("name", templates.names())
def test_cli_dry_run_prints_the_golden_script_and_the_api_agrees(name, profile):
    from click.testing import CliRunner

    from slurmkit.cli import cli
    from slurmkit.submit import api

    path = GOLDEN / f"{name}--{profile}.sbatch"
    assert path.is_file(), f"{path} missing: regenerate with SLURMKIT_REGEN_GOLDEN=1"
    args = _cli_args(name, profile)
    res = CliRunner().invoke(cli, args[:2] + ["--dry-run"] + args[2:], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert res.output == path.read_text(encoding="utf-8")
    req = request_for(name)
    kw = dict(site=profile, nodes=req.nodes, time=req.time, name=req.name, comment=req.comment,
              output=req.output, sets=req.sets)
    assert api.render_script(name, req.command, **kw) == res.output
    res = CliRunner().invoke(cli, args[:2] + ["--explain"] + args[2:], catch_exceptions=False)
    assert res.exit_code == 0 and res.output == api.explain(name, req.command, **kw)
    assert "<- CLI --name" in res.output


#: Node kinds of tests/topology/kinds/kinds.toml: a node type without a GPU model (dgx1x4's
#: ``Gres=gpu:8``) gets an untyped request (``--gpus-per-node=8``); a mixed
#: node (ocotillo's visualizacion1) asked for one of its types gets that type.
KINDS = Path(__file__).resolve().parents[1] / "topology" / "kinds" / "kinds.toml"
KIND_CASES = {"kinds-untyped": ("gpus", None), "kinds-mixed-gtx1060": ("vis", "gtx1060")}


@pytest.mark.parametrize("case", sorted(KIND_CASES))
@pytest.mark.parametrize("name", ["torchrun", "srun"])
def test_golden_node_kinds(name, case):
    from slurmkit.profile import load_profile

    partition, gpu_type = KIND_CASES[case]
    facts = site.site_facts(load_profile(KINDS), partition, gpu_type=gpu_type)
    req = render.SubmitRequest(**{**request_for(name).__dict__, "nodes": 1})
    text = render.render(render.plan(req, facts, templates.get(name))).replace(str(KINDS), "kinds.toml")
    path = GOLDEN / f"{name}--{case}.sbatch"
    if REGEN:
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"{path} missing: regenerate with SLURMKIT_REGEN_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), f"{path} differs (review, then SLURMKIT_REGEN_GOLDEN=1)"
    want = "--gpus-per-node=8" if gpu_type is None else f"--gpus-per-node={gpu_type}:1"
    assert f"#SBATCH {want}\n" in text
