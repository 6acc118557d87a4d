"""The installed package carries its data (templates, profiles, hook shim, check table) and the
CLI works from any directory, without the checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def source_copy(dest: Path) -> Path:
    """A copy of the checkout's tracked and untracked-but-not-ignored files under ``dest``: pip
    builds in the source tree (``build/``, ``*.egg-info``), so each install builds from its own
    copy and two tests (or two xdist workers) never build in one folder, nor in the checkout."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            check=True, capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = REPO / rel
        if src.is_file() and not rel.startswith("tests/"):
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    target = tmp_path_factory.mktemp("site-packages")
    src = source_copy(tmp_path_factory.mktemp("src"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--target", str(target), str(src)], check=True, capture_output=True, timeout=300)
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
#: the modules only the report extra's commands load (the accounting readers, the reports and
#: their command); everything else is the plain install's
REPORT_MODULES = ("accounting/*", "report/*", "cli/report.py")


def _requirements(text: str) -> dict[str, str]:
    """``{distribution (lower case): lower bound}`` of setup.cfg requirement lines ``name>=X``."""
    import re

    out = {}
    for line in text.strip().splitlines():
        m = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)\s*>=\s*([0-9.]+)\s*", line)
        assert m, f"setup.cfg: {line!r}: want name>=lower-bound"
        out[m[1].lower()] = m[2]
    return out


def _setup_cfg():
    import configparser

    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    return cfg


def _third_party_imports(paths) -> set[str]:
    import ast

    imported = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.add(node.module.split(".")[0])
    return {m for m in imported if m not in sys.stdlib_module_names and m not in ("slurmkit", "__future__")}


def test_setup_cfg_declares_exactly_the_third_party_modules_slurmkit_imports():
    from slurmkit.cli import EXTRAS

    cfg = _setup_cfg()
    base = set(_requirements(cfg["options"]["install_requires"]))
    report = set(_requirements(cfg["options.extras_require"]["report"]))
    paths = list((REPO / "slurmkit").rglob("*.py"))
    in_report = [p for p in paths if any(p.relative_to(REPO / "slurmkit").match(g) for g in REPORT_MODULES)]
    plain = _third_party_imports(set(paths) - set(in_report)) - NOT_REQUIRED
    extra = _third_party_imports(in_report) - plain - NOT_REQUIRED
    assert plain | extra <= set(DISTS), f"imported but not mapped to a distribution: {(plain | extra) - set(DISTS)}"
    assert {DISTS[m] for m in plain} == base
    assert {DISTS[m] for m in extra} == report
    # the CLI names the report extra for exactly the modules only the report extra installs
    assert {DISTS[m] for m, e in EXTRAS.items() if e == "report"} == report


#: what ``pip install slurmkit`` puts in a fresh venv besides pip and setuptools: the
#: requirements and their own (MarkupSafe: jinja2's)
PLAIN_INSTALL = {"slurmkit", "click", "jinja2", "markupsafe", "nvidia-ml-py", "python-hostlist"}


def test_plain_install_runs_the_hooks_and_submit_and_names_the_report_extra(tmp_path, node, healthy):
    """``pip install <repo>`` (no extra, not editable) into a fresh venv, each requirement at the
    release series of its lower bound in setup.cfg (``click>=8.5`` installs the newest 8.5.x):
    none of the report extra's packages comes; the prolog runs through shims installed by that
    venv's ``slurmkit hooks install`` on a snapshot recorded from the fake NVML and maps the
    job's GPUs; ``slurmkit submit --dry-run`` prints the golden script of a shipped profile;
    ``slurmkit report weekly`` says in one line which extra it needs and exits 2."""
    from nodeenv import nvml_gpu_of

    # nothing of this environment's Python set-up or slurmkit settings reaches the plain venv
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURMKIT_", "PYTHON"))}
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=120, env=env)
    py, slurmkit = venv / "bin" / "python", venv / "bin" / "slurmkit"
    lower = _requirements(_setup_cfg()["options"]["install_requires"])
    constraints = tmp_path / "lower-bounds.txt"
    constraints.write_text("".join(f"{name}=={bound}.*\n" for name, bound in lower.items()))
    res = subprocess.run([py, "-m", "pip", "install", "-q", "--constraint", constraints,
                          str(source_copy(tmp_path / "src"))],
                         capture_output=True, text=True, timeout=600, env=env)
    assert res.returncode == 0, res.stderr
    # {normalized name (PEP 503): version} of every distribution in the venv
    res = subprocess.run([py, "-c", "import importlib.metadata as m, json, re; print(json.dumps("
                          "{re.sub(r'[-_.]+', '-', d.metadata['Name']).lower(): d.version for d in m.distributions()}))"],
                         capture_output=True, text=True, timeout=60, check=True, env=env)
    import json

    dists = json.loads(res.stdout)
    for name, bound in lower.items():
        assert dists[name] == bound or dists[name].startswith(bound + "."), (name, dists[name])
    assert set(dists) - {"pip", "setuptools"} == PLAIN_INSTALL

    def run(*args, **kw):
        return subprocess.run([str(slurmkit), *args], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                              env=env, **kw)

    # the hooks: installed by the plain venv's slurmkit, its python in the shims
    path, snap = healthy
    res = run("hooks", "uninstall", "--slurm-conf", str(node.slurm_conf))
    assert res.returncode == 0, res.stderr
    res = run("hooks", "install", "--slurm-conf", str(node.slurm_conf), "--python", str(py), "--timeout", "0",
              "--state-dir", str(node.state_dir), "--spool-dir", str(node.spool_dir),
              "--textfile-dir", str(node.textfile_dir))
    assert res.returncode == 0, res.stderr
    assert f"py='{py}'" in node.prolog.read_text()
    node.write_config({"n1": path})
    r = node.run(node.prolog)
    assert r.returncode == 0, r.stderr
    assert "own trouble" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    rec = json.loads((node.state_dir / "n1" / "job-101.json").read_text())
    assert [row["index"] for row in rec["gpus"]] == [0, 2]
    for row in rec["gpus"]:
        g = nvml_gpu_of(node, snap, row["index"])
        assert (row["uuid"], row["nvml_index"], row["minor"]) == (g["uuid"], g["index"], g["minor_number"])
        assert row["start_energy_mj"] == g["values"]["total_energy_mj"]["value"]
    assert node.metric("n1", "prolog", "slurmkit_hook_exit_code") == 0

    # submit: the shipped profile's golden script (tests/submit/test_submit_golden.py's request)
    res = run("submit", "torchrun", "--site", "dgx-h100", "-N", "2", "-t", "2:00:00", "-J", "golden torchrun #1",
              "--comment", "it's a \"test\" $HOME", "-o", "logs/%x-%j.out", "--dry-run", "--",
              "python3", "train.py", "--config", "conf/a b.yaml", "--lr={lr}")
    assert res.returncode == 0, res.stderr
    assert res.stdout == (REPO / "tests" / "submit" / "golden" / "torchrun--dgx-h100.sbatch").read_text()

    # a report: one line naming the extra, exit 2, no traceback
    res = run("report", "weekly", "--week", "2026-W48", "--no-store", "--from-sacct",
              str(REPO / "tests" / "report" / "data" / "reportseff_issue37.psv"), "-o", str(tmp_path / "out"))
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr == "slurmkit report needs the report extra: pip install 'slurmkit[report]'\n"
    assert not (tmp_path / "out").exists()
