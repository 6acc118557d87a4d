"""tests/nodepython.py: the hooks interpreter every user can run, built for the tests that run
the Xid query as a job's user."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import grimp

from nodepython import REPO, SYSTEM_PYTHON, THIRD_PARTY


def test_it_holds_every_third_party_module_the_hooks_import():
    """The modules the shims' entry point and the Xid reader import, directly or through other
    slurmkit modules (grimp's graph: every import statement, those inside functions too), that
    are neither slurmkit's nor the standard library's, are the ones copied into the interpreter
    (a new one fails here until it is added to THIRD_PARTY)."""
    graph = grimp.build_graph("slurmkit", include_external_packages=True)
    used = set()
    for entry in ("slurmkit.hooks.main", "slurmkit.hooks.jobxids"):
        used |= {m.split(".")[0] for m in graph.find_upstream_modules(entry)}
    external = used - {"slurmkit"} - set(sys.stdlib_module_names)
    assert external == set(THIRD_PARTY) == {"pynvml", "hostlist"}


def test_a_job_user_runs_it_with_the_code_under_test(node_python):
    """uid 65534, through a shell as slurmstepd starts a step, runs the interpreter, isolated
    (``-I``, as the shims and the batch shell run it), and imports the hooks from the copy,
    which is this checkout's code byte for byte, and pynvml."""
    code = ("import slurmkit.hooks.main, slurmkit.hooks.jobxids, pynvml, slurmkit.prolog_epilog, sys; "
            "print(slurmkit.hooks.jobxids.__file__); print(slurmkit.prolog_epilog.__path__[0]); "
            "print(sys._base_executable)")
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", 'exec "$@"', "sh",
                        str(node_python), "-I", "-c", code], capture_output=True, text=True, timeout=60, cwd="/")
    assert (r.returncode, r.stderr) == (0, ""), r.stderr
    reader, shims, base = r.stdout.splitlines()
    assert os.path.realpath(base) == os.path.realpath(SYSTEM_PYTHON)
    assert Path(reader).is_relative_to(node_python.parent.parent) and Path(shims).is_relative_to(node_python.parent.parent)
    assert Path(reader).read_bytes() == (REPO / "slurmkit" / "hooks" / "jobxids.py").read_bytes()
    assert (Path(shims) / "hook.py.in").read_bytes() == (REPO / "prolog_epilog" / "hook.py.in").read_bytes()
