"""The installed package carries its data (templates, profiles, hook shim, check table) and the
CLI works from any directory, without the checkout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    target = tmp_path_factory.mktemp("site-packages")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--target", str(target), str(REPO)], check=True, capture_output=True, timeout=300)
    return target


def _run(installed, code, cwd="/"):
    env = dict(os.environ, PYTHONPATH=str(installed))
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_package_data_ships_inside_the_installed_package(installed):
    code = """
import importlib.resources as r, slurmkit
print(slurmkit.__file__)
for pkg, name in [("slurmkit.job_templates", "torchrun.sbatch.j2"), ("slurmkit.site", "sandbox.toml"),
                  ("slurmkit.site", "dgx-a100.toml"), ("slurmkit.prolog_epilog", "hook.py.in"),
                  ("slurmkit.sandbox", "templates/slurm.conf.j2"), ("slurmkit.health", "checks.toml")]:
    print(pkg, name, r.files(pkg).joinpath(name).is_file())
"""
    res = _run(installed, code)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith(str(installed))  # not the checkout
    assert all(line.endswith(" True") for line in lines[1:]), lines


def test_cli_help_and_version_from_any_directory(installed, tmp_path):
    res = _run(installed, "from slurmkit.cli import main; main(['--version'])", cwd=tmp_path)
    assert "slurmkit, version" in res.stdout
    res = _run(installed, "from slurmkit.cli import main; main(['--help'])", cwd=tmp_path)
    for cmd in ("sandbox", "submit", "topo", "site", "health", "hooks", "report", "templates", "status"):
        assert f"  {cmd} " in res.stdout
    res = _run(installed, "from slurmkit.cli import main; main(['templates', 'list'])", cwd=tmp_path)
    assert res.returncode == 0 and "torchrun" in res.stdout, res.stderr


def test_sandbox_refuses_to_start_when_not_root(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to switch to an unprivileged user")
    tmp_path.chmod(0o777)
    res = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                          sys.executable, "-m", "slurmkit", "sandbox", "up", "--dir", str(tmp_path / "sb")],
                         capture_output=True, text=True, timeout=60, cwd="/",
                         env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert res.returncode == 1
    assert "run as root" in res.stderr and "Traceback" not in res.stderr


# third-party module -> the distribution that provides it (what setup.cfg declares)
DISTS = {"click": "click", "jinja2": "jinja2", "numpy": "numpy", "pandas": "pandas", "pyarrow": "pyarrow",
         "matplotlib": "matplotlib", "pynvml": "nvidia-ml-py", "hostlist": "python-hostlist",
         "duckdb": "duckdb"}
#: imported on purpose without being a requirement: the demo's training script, which runs
#: inside sandbox jobs with the demo's torch
NOT_REQUIRED = {"torch"}


def test_setup_cfg_declares_exactly_the_third_party_modules_slurmkit_imports():
    import configparser
    import re
    import sys

    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    declared = {re.split(r"[<>=!~ ]", line.strip())[0].lower()
                for line in cfg["options"]["install_requires"].strip().splitlines()}
    import ast

    imported = set()
    for path in (REPO / "slurmkit").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.add(node.module.split(".")[0])
    third = {m for m in imported if m not in sys.stdlib_module_names and m not in ("slurmkit", "__future__")}
    assert third - NOT_REQUIRED <= set(DISTS), f"imported but not mapped to a distribution: {third - set(DISTS)}"
    assert {DISTS[m] for m in third - NOT_REQUIRED} == declared
