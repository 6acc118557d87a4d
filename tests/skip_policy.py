"""The suite's skip policy (a pytest plugin; tests/conftest.py registers its hooks).

Under ``CI=true`` a skipped test is a failed one, whatever skipped it (``pytest.skip(...)``,
``pytest.importorskip``, a ``skipif`` / ``skip`` mark, a fixture that skips, a module skipped
whole at collection), unless the test
is on the allow-list ``tests/skips_allowed.toml``: one ``[[allow]]`` table per entry with

- ``test``: the test's node id, or an ``fnmatch`` pattern of node ids
  (``tests/topology/test_topo_discover.py::test_discover_live``);
- ``reason``: text the skip's reason must contain (so the test may skip for that reason only);
- ``why``: why the skip is acceptable in CI (required, never empty).

Outside CI skips stay skips. Either way the session ends with one line counting the skips on
the allow-list and those outside it, so the count shows in CI's output. The verdict is taken
where the report is made (a pytest-xdist worker, under ``-n``) and written on the report
(``skip_policy``: ``[verdict, reason]``); the count is taken where reports are logged (the
controlling process), so the closing line counts every worker's skips. A malformed allow-list
stops the session with the file and the entry at fault.
``SLURMKIT_SKIPS_ALLOWED`` names another allow-list file (the policy's own tests use it).
"""

from __future__ import annotations

import fnmatch
import os
import tomllib
from pathlib import Path

import pytest

ALLOWLIST = Path(__file__).resolve().parent / "skips_allowed.toml"
IN_CI = os.environ.get("CI", "").lower() == "true"

_allowed_key = pytest.StashKey[list]()
_refused_key = pytest.StashKey[list]()
_entries_key = pytest.StashKey[list]()


def load_allowlist(path: Path) -> list[dict]:
    """The ``[[allow]]`` entries of ``path`` (each with ``test``, ``reason``, ``why``); raises
    pytest.UsageError naming the file and the entry when one is incomplete."""
    if not path.exists():
        return []
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise pytest.UsageError(f"{path}: {exc}") from None
    entries = data.get("allow", [])
    for i, entry in enumerate(entries, 1):
        for key in ("test", "reason", "why"):
            if not isinstance(entry.get(key), str) or not entry[key].strip():
                raise pytest.UsageError(f"{path}: [[allow]] entry {i}: '{key}' must be a non-empty string "
                                        f"(expected test = node id or pattern, reason = text of the skip "
                                        f"reason, why = why CI may skip it)")
    return entries


def skip_reason(report) -> str:
    """The reason text of a skipped test report (``Skipped: `` prefix removed)."""
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return text.removeprefix("Skipped: ")


def allowed_entry(entries: list[dict], nodeid: str, reason: str) -> dict | None:
    """The allow-list entry matching ``nodeid`` and ``reason``, or None."""
    for entry in entries:
        if fnmatch.fnmatchcase(nodeid, entry["test"]) and entry["reason"] in reason:
            return entry
    return None


_config = None


def pytest_configure(config):
    global _config
    _config = config
    path = Path(os.environ.get("SLURMKIT_SKIPS_ALLOWED") or ALLOWLIST)
    config.stash[_entries_key] = load_allowlist(path)
    config.stash[_allowed_key] = []
    config.stash[_refused_key] = []


def _judge(report, config, nodeid: str, when: str):
    """Judge a skipped ``report`` of ``nodeid``: allowed, or (under CI) turned into a failure; the
    verdict is written on the report as ``skip_policy = [verdict, reason]`` for :func:`_count`."""
    if not report.skipped or hasattr(report, "wasxfail"):
        return report
    reason = skip_reason(report)
    if allowed_entry(config.stash[_entries_key], nodeid, reason):
        report.skip_policy = ["allowed", reason]
        return report
    report.skip_policy = ["refused", reason]
    if IN_CI:
        report.outcome = "failed"
        report.longrepr = (f"CI=true: {nodeid} skipped{when} ({reason}); CI never passes by skipping: make it "
                           f"run here, or add it with a reason to tests/{ALLOWLIST.name}")
    return report


def _count(report, config) -> None:
    """Count a logged report's verdict (set by :func:`_judge`, possibly in an xdist worker)."""
    verdict = getattr(report, "skip_policy", None)
    if not verdict:
        return
    key = _allowed_key if verdict[0] == "allowed" else _refused_key
    entry = (report.nodeid, verdict[1])
    if entry not in config.stash[key]:     # a module skipped at collection reaches the controller once per worker
        config.stash[key].append(entry)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    return _judge((yield), item.config, item.nodeid, "")


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    """A whole module skipped at collection (``pytest.importorskip`` or
    ``pytest.skip(allow_module_level=True)`` at its top): the same policy, by its node id."""
    return _judge((yield), collector.config, collector.nodeid, " at collection")


def pytest_runtest_logreport(report):
    _count(report, _config)


def pytest_collectreport(report):
    _count(report, _config)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    allowed = config.stash.get(_allowed_key, [])
    refused = config.stash.get(_refused_key, [])
    verdict = "failed (CI=true)" if IN_CI else "skipped (not CI)"
    terminalreporter.write_line(f"skip policy: {len(allowed)} skipped on the allow-list, "
                                f"{len(refused)} outside it {verdict}")
    for nodeid, reason in allowed:
        terminalreporter.write_line(f"  allowed skip: {nodeid}: {reason}")
