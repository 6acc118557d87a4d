"""The skip policy (tests/skip_policy.py) on a small suite run by a real pytest in a subprocess:
under CI=true every kind of skip fails unless its test and reason are on the allow-list, and the
closing line counts the allowed skips."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import skip_policy

SUITE = '''
import pytest

def test_call_skip():
    pytest.skip("no widget here")

def test_importorskip():
    pytest.importorskip("slurmkit_no_such_module")

@pytest.mark.skipif(True, reason="condition holds")
def test_skipif():
    pass

@pytest.fixture
def needs_root():
    pytest.skip("fixture needs root")

def test_fixture_skip(needs_root):
    pass

def test_allowed():
    pytest.skip("no NVML on this machine")

def test_allowed_other_reason():
    pytest.skip("something else")

@pytest.mark.xfail(reason="known", strict=True)
def test_xfail():
    assert False

def test_passes():
    assert True
'''

ALLOW = '''
[[allow]]
test = "test_suite.py::test_allowed*"
reason = "no NVML"
why = "the test's own example"
'''


def _run(tmp_path: Path, ci: bool, allow: str = ALLOW, *extra: str) -> subprocess.CompletedProcess:
    (tmp_path / "test_suite.py").write_text(SUITE)
    (tmp_path / "test_module_skip.py").write_text('import pytest\npytest.importorskip("slurmkit_no_such_module")\n')
    (tmp_path / "conftest.py").write_text(
        "from skip_policy import (pytest_collectreport, pytest_configure, pytest_make_collect_report,\n"
        "                         pytest_runtest_logreport, pytest_runtest_makereport, pytest_terminal_summary)\n")
    (tmp_path / "allow.toml").write_text(allow)
    env = dict(os.environ, CI="true" if ci else "false", SLURMKIT_SKIPS_ALLOWED=str(tmp_path / "allow.toml"),
               PYTHONPATH=str(Path(skip_policy.__file__).parent))
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider",
                           "--continue-on-collection-errors", *extra, "test_suite.py", "test_module_skip.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["one-process", "xdist"])
def test_ci_fails_every_kind_of_skip_outside_the_allow_list(tmp_path, workers):
    """The same verdicts and the same closing count in one process and under pytest-xdist (the
    suite's own run, scripts/test), where the skips are judged in the workers."""
    r = _run(tmp_path, True, ALLOW, *workers)
    out = r.stdout
    assert r.returncode == 1, out
    for name in ("test_call_skip", "test_importorskip", "test_allowed_other_reason"):
        assert f"FAILED test_suite.py::{name}" in out, out
    for name in ("test_skipif", "test_fixture_skip"):  # skipped in setup: the setup fails
        assert f"ERROR test_suite.py::{name}" in out, out
    assert "CI=true: test_suite.py::test_skipif skipped (condition holds)" in out
    assert "SKIPPED [1] test_suite.py" in out and "no NVML on this machine" in out
    assert "PASSED test_suite.py::test_passes" in out and "XFAIL test_suite.py::test_xfail" in out
    assert "ERROR test_module_skip.py" in out or "ERROR collecting test_module_skip.py" in out  # skipped at collection
    assert "CI=true: test_module_skip.py skipped at collection (could not import 'slurmkit_no_such_module'" in out
    assert "skip policy: 1 skipped on the allow-list, 6 outside it failed (CI=true)" in out
    assert "allowed skip: test_suite.py::test_allowed: no NVML on this machine" in out


def test_outside_ci_skips_stay_skips_and_are_counted(tmp_path):
    r = _run(tmp_path, ci=False)
    assert r.returncode == 0, r.stdout
    assert "1 passed, 7 skipped, 1 xfailed" in r.stdout
    assert "skip policy: 1 skipped on the allow-list, 6 outside it skipped (not CI)" in r.stdout


def test_an_entry_without_a_reason_stops_the_session(tmp_path):
    r = _run(tmp_path, ci=True, allow='[[allow]]\ntest = "x"\nreason = "y"\n')
    assert r.returncode != 0
    assert "allow.toml: [[allow]] entry 1: 'why' must be a non-empty string" in r.stdout + r.stderr


def test_the_suites_allow_list_loads_and_names_existing_test_files():
    entries = skip_policy.load_allowlist(skip_policy.ALLOWLIST)
    assert entries
    root = skip_policy.ALLOWLIST.parent.parent
    for entry in entries:
        # a node id's file, or a pattern (fnmatch, as allowed_entry matches) that names test files
        path = entry["test"].split("::")[0]
        assert (root / path).is_file() or any(p.is_file() for p in root.glob(path + "/*.py")), entry
