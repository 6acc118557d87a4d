"""Docs that run: every shell block marked as a recipe (opened with ```` ```bash recipe ````) in
README.md and then in docs/*.md (by file name), in order, each in its own ``bash -euo
pipefail``, on a fresh sandbox of this module (``own_sandbox``): the docs cannot drift from the
product.

The blocks run as a newcomer would run them after ``scripts/demo``: from a scratch folder that
has the repository's ``.venv`` (linked), with no SLURM_CONF or SLURMKIT_SITE set, and a state
directory (``XDG_STATE_HOME``) whose sandbox registry names this module's sandbox, so that
``eval "$(slurmkit sandbox env)"`` finds it. A block that takes the sandbox down
(``sandbox down --purge``) leaves the next block a sandbox brought up again.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^```bash recipe[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)


def recipes() -> list[tuple[str, int, str]]:
    """``(file relative to the repository, line of the fence, block text)`` of every recipe, README
    first, then docs/*.md by name."""
    files = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    out = []
    for path in files:
        text = path.read_text()
        for m in FENCE.finditer(text):
            out.append((str(path.relative_to(REPO)), text.count("\n", 0, m.start()) + 1, m.group(1)))
    return out


def test_recipes_are_found():
    found = recipes()
    assert found and found[0][0] == "README.md"
    # a fence left unmarked by a typo ("bash  recipe", "bash-recipe") would silently not run
    for path in [REPO / "README.md", *(REPO / "docs").glob("*.md")]:
        for line in path.read_text().splitlines():
            if "recipe" in line and line.startswith("```"):
                assert re.fullmatch(r"```bash recipe[ \t]*", line), f"{path.name}: {line!r}"


@pytest.mark.slurm
@pytest.mark.timeout(600)
def test_recipes_run_in_order(own_sandbox, tmp_path, monkeypatch):
    from slurmkit.sandbox.cluster import remember

    sb = own_sandbox
    state = tmp_path / "state"
    work = tmp_path / "work"
    work.mkdir()
    venv = REPO / ".venv"
    assert (venv / "bin" / "activate").is_file(), f"{venv} is missing: the README's quick start activates it"
    (work / ".venv").symlink_to(venv)
    env = {k: v for k, v in os.environ.items() if k not in ("SLURM_CONF", "SLURMKIT_SITE", "VIRTUAL_ENV")}
    env["XDG_STATE_HOME"] = str(state)
    monkeypatch.setenv("XDG_STATE_HOME", str(state))      # the registry remember() writes
    for where, line, block in recipes():
        if not sb.is_up():
            sb.up(warmup=False)
        remember(sb.dir)
        r = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=work, env=env, capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0, (f"{where}:{line}: the recipe failed (exit {r.returncode})\n"
                                   f"--- stdout\n{r.stdout}--- stderr\n{r.stderr}")
