"""Golden scripts: every template x a few shipped profiles, rendered with a fixed request.

A change to generated scripts shows up as a diff under tests/golden/ in review. Regenerate with
``SLURMKIT_REGEN_GOLDEN=1 .venv/bin/pytest tests/test_submit_golden.py``.
"""

import os
from pathlib import Path

import pytest

from slurmkit.submit import render, site, templates

REPO = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden"
REGEN = os.environ.get("SLURMKIT_REGEN_GOLDEN") == "1"
#: Shipped profiles with golden scripts (those present in site/; sandbox always).
PROFILES = [p for p in ("sandbox", "dgx-a100", "dgx-h100", "aws-p5", "rtx4090-8x")
            if (REPO / "site" / f"{p}.toml").is_file()]


def request_for(name: str) -> render.SubmitRequest:
    t = templates.get(name)
    sets = {"sets": '[{"lr": 0.1}, {"lr": 0.01}]'} if name == "array" else {}
    return render.SubmitRequest(
        template=name, command=("python3", "train.py", "--config", "conf/a b.yaml", "--lr={lr}"),
        nodes=1 if t.tasks == "single" else 2, time="2:00:00", name=f"golden {name} #1",
        comment="it's a \"test\" $HOME", output="logs/%x-%j.out", sets=sets)


#: Fabric variants of the sandbox profile (load_profile overrides), for the launchers.
VARIANTS = {
    "sandbox+roce-nccl2.18": {"nccl": {"fabric": "roce", "version": "2.18.3", "gid_index": 3}},
    "sandbox+tcp": {"nccl": {"fabric": "tcp", "socket_ifname": ["eth0", "eth1"]}},
    "sandbox+efa": {"nccl": {"fabric": "efa", "efa_plugin_version": "1.6.0"}},
    "sandbox+pcie-nop2p": {"nccl": {"fabric": "pcie"}, "node_types": {"sandbox-h100x4": {"p2p": False}},
                           "submit": {"container": True, "rendezvous_interface": "ib0"}},
}


def _check(name, profile, overrides=()):
    from slurmkit.profile import load_profile

    facts = site.site_facts(load_profile(profile.split("+")[0], overrides=overrides))
    sets = {"container_image": "nvcr.io#nvidia/pytorch:24.01-py3"} if "pcie" in profile else {}
    req = request_for(name)
    req = render.SubmitRequest(**{**req.__dict__, "sets": {**req.sets, **sets}})
    text = render.render(render.plan(req, facts, templates.get(name)))
    path = GOLDEN / f"{name}--{profile}.sbatch"
    if REGEN:
        path.write_text(text, encoding="utf-8")
    if not path.is_file() and profile != "sandbox" and "+" not in profile:
        pytest.skip(f"{path.name}: no golden script yet for shipped profile {profile} "
                    "(SLURMKIT_REGEN_GOLDEN=1 once the profile is committed)")
    assert path.is_file(), f"{path} missing: regenerate with SLURMKIT_REGEN_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), f"{path} differs (review, then SLURMKIT_REGEN_GOLDEN=1)"


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("name", templates.names())
def test_golden_script(name, profile):
    _check(name, profile)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("name", ["torchrun", "srun"])
def test_golden_fabric_variant(name, variant):
    _check(name, variant, (VARIANTS[variant],))
