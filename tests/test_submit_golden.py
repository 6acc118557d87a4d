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
PROFILES = [p for p in ("sandbox", "dgx-a100", "dgx-h100", "hgx-h100", "aws-p5")
            if (REPO / "site" / f"{p}.toml").is_file()]


def request_for(name: str) -> render.SubmitRequest:
    t = templates.get(name)
    sets = {"sets": '[{"lr": 0.1}, {"lr": 0.01}]'} if name == "array" else {}
    return render.SubmitRequest(
        template=name, command=("python3", "train.py", "--config", "conf/a b.yaml", "--lr={lr}"),
        nodes=1 if t.tasks == "single" else 2, time="2:00:00", name=f"golden {name} #1",
        comment="it's a \"test\" $HOME", output="logs/%x-%j.out", sets=sets)


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("name", templates.names())
def test_golden_script(name, profile):
    facts = site.site_facts(site.load(profile), source=profile)
    text = render.render(render.plan(request_for(name), facts, templates.get(name)))
    path = GOLDEN / f"{name}--{profile}.sbatch"
    if REGEN:
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"{path} missing: regenerate with SLURMKIT_REGEN_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), f"{path} differs (review, then SLURMKIT_REGEN_GOLDEN=1)"
