"""A hooks interpreter every user can run, as a real node has one.

On a node the hooks run with a system Python (Debian's ``/usr/bin/python3``) or a venv under
``/opt``: root's prolog and the job's user's Xid query (``python -I -m slurmkit.hooks.jobxids``,
run by slurmstepd as that user) both run it. The tests' own ``.venv`` is not such an
interpreter on CI's machines: scripts/setup makes it from pyenv's Python under ``/root``
(mode 0700), which uid 65534 cannot execute (exit 126). :func:`make` builds one: a venv from
``/usr/bin/python3`` in a directory of mode 0755, holding a copy of the slurmkit under test
(the package and the directories setup.cfg maps into it: ``job_templates``, ``prolog_epilog``,
``site``) and the third-party modules the hooks import (pynvml for NVML, python-hostlist's
hostlist), copied from the test interpreter's own site-packages, compiled by root so that
users who cannot write there need not.

Imported by tests/conftest.py (the session fixture ``node_python``).
"""

from __future__ import annotations

import configparser
import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's python3 (scripts/setup installs python3 python3-venv)
REPO = Path(__file__).resolve().parent.parent
#: Top-level modules of the hooks' imports that are not slurmkit's nor the standard library's
#: (tests/test_nodepython.py checks the list against the hooks' import graph).
THIRD_PARTY = ("pynvml", "hostlist")


def _package_dirs() -> dict[str, Path]:
    """``{package: source directory}`` of slurmkit as setup.cfg's ``package_dir`` maps it
    (``slurmkit = slurmkit``, ``slurmkit.job_templates = job_templates``, ...)."""
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    out = {}
    for line in cfg["options"]["package_dir"].strip().splitlines():
        name, _, src = line.partition("=")
        out[name.strip()] = REPO / src.strip()
    return out


def _copy(src: Path, dest: Path) -> None:
    if src.is_dir():
        shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"), dirs_exist_ok=True)
    else:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest)


def make(root: Path, system_python: str = SYSTEM_PYTHON) -> Path:
    """Build the interpreter under ``root`` (created, mode 0755, as everything in it) and return
    its path (``root/bin/python3``, a link to ``system_python``). Raises RuntimeError naming what
    is missing (no ``system_python``, a module the hooks import that the test interpreter lacks)."""
    if not os.access(system_python, os.X_OK):
        raise RuntimeError(f"{system_python} is missing: install Debian's python3 and python3-venv "
                           "(scripts/setup's apt list)")
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)
    subprocess.run([system_python, "-m", "venv", "--without-pip", str(root)], check=True, capture_output=True,
                   text=True, timeout=120)
    site = Path(subprocess.run([str(root / "bin" / "python3"), "-I", "-c", "import sysconfig; "
                                "print(sysconfig.get_paths()['purelib'])"], check=True, capture_output=True,
                               text=True, timeout=60).stdout.strip())
    for name, src in sorted(_package_dirs().items()):  # parents first: slurmkit, then slurmkit.site ...
        _copy(src, site.joinpath(*name.split(".")))
    for name in THIRD_PARTY:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise RuntimeError(f"the hooks import {name}, which this test interpreter lacks")
        if spec.submodule_search_locations:
            _copy(Path(spec.origin).parent, site / name)
        else:
            _copy(Path(spec.origin), site / Path(spec.origin).name)
    subprocess.run([str(root / "bin" / "python3"), "-I", "-m", "compileall", "-q", "-j", "1", str(site)],
                   check=True, capture_output=True, text=True, timeout=300)
    for dirpath, dirnames, filenames in os.walk(root):
        os.chmod(dirpath, 0o755)
        for f in filenames:
            p = os.path.join(dirpath, f)
            if not os.path.islink(p):
                os.chmod(p, 0o755 if os.access(p, os.X_OK) else 0o644)
    return root / "bin" / "python3"
