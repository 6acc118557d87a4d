"""Shared pytest fixtures.

Tests live in ``tests/<package>/`` beside the package they test (``tests/hooks/`` for
``slurmkit/hooks``); helpers shared across folders are modules here (``nodeenv``, ``sacct_rows``,
``ranks``, ``fake_nvml``, ``nodepython``, ``corpus_values``), importable by name because this folder is on ``sys.path``.

Skips follow one policy (:mod:`skip_policy`, whose hooks are registered here): under ``CI=true``
every skip is a failure unless the test is on the reasoned allow-list ``tests/skips_allowed.toml``,
and the session's last line counts the skips.

``sandbox`` (session): one real Slurm cluster for every test marked ``slurm``; it skips with the
reason when not root or Slurm's Debian packages are missing (a failure under ``CI=true``).
Set ``SLURMKIT_TEST_SANDBOX_DIR`` to reuse a sandbox that is already up (it is left running).

``SLURMKIT_TEST_SLURM`` (``scripts/test --slurm VERSION``) runs the Slurm-facing tests on another
Slurm release (24.11, 26.05 / newest): every sandbox runs it, and for the whole session ``PATH``
starts with wrappers of that release's commands, so a test calling ``sbatch`` or ``slurmd -G``
runs that release's (docs/slurm-versions.md).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from skip_policy import (pytest_collectreport, pytest_configure, pytest_make_collect_report,  # noqa: F401 (hooks)
                         pytest_runtest_logreport, pytest_runtest_makereport, pytest_terminal_summary)

REPO = Path(__file__).resolve().parent.parent
SITE = REPO / "site"
CORPUS = REPO.parent / "shared" / "corpus"
# slurm.conf's sched_interval / bf_interval in the test sandboxes (Slurm's defaults 60 s / 30 s: a
# pending job would wait up to a minute for a scheduling pass; docs/testing.md)
TEST_SCHED_INTERVAL_S = 1
#: The Slurm release the Slurm-facing tests run on (None: this machine's, 22.05).
TEST_SLURM = os.environ.get("SLURMKIT_TEST_SLURM") or None
UNSTABLE_DOWN = "Debian unstable cannot be installed today"


def _release():
    from slurmkit.sandbox.releases import release

    return release(TEST_SLURM)


@pytest.fixture(scope="session", autouse=True)
def slurm_release(tmp_path_factory):
    """The Slurm release of this run (``slurmkit.sandbox.releases.SlurmRelease``). For a newer
    one, its rootfs is built (once, shared by the workers) and ``PATH`` starts with wrappers of
    its commands for the session. The newest release's tests skip (allow-listed, and said in
    the output) only when Debian unstable itself cannot be installed today."""
    from slurmkit.sandbox import rootfs

    rel = _release()
    if rel.host or os.geteuid() != 0:
        yield rel
        return
    try:
        fs = rootfs.ensure(rel)
    except rootfs.RootfsBuildError as exc:
        if rel.suite == "sid":
            pytest.skip(f"{UNSTABLE_DOWN}: {exc}")
        raise
    bin_dir = tmp_path_factory.mktemp(f"slurm-{rel.name}-bin")
    rootfs.write_wrappers(fs, bin_dir)
    old = os.environ["PATH"]
    os.environ["PATH"] = f"{bin_dir}{os.pathsep}{old}"
    try:
        yield rel
    finally:
        os.environ["PATH"] = old


@pytest.fixture(scope="session")
def corpus() -> Path:
    """``../shared/corpus`` (real-world inputs; never copied into the repo)."""
    if not CORPUS.is_dir():
        pytest.skip(f"{CORPUS} is absent (the shared corpus comes with the project's workspace)")
    return CORPUS


def _free_port_base() -> int:
    """The first free port range (slurmctld, slurmdbd, MariaDB, four slurmds) from 7600 on, in
    steps of 100; each pytest-xdist worker starts its search 200 further (gw1 at 7800), so two
    workers bringing up sandboxes at once look at different ranges first."""
    from slurmkit.sandbox.cluster import port_free

    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    bases = list(range(7600, 9600, 100))
    first = (2 * int(worker) if worker.isdigit() else 0) % len(bases)
    for base in bases[first:] + bases[:first]:
        if all(port_free(base + off) for off in (0, 2, 4)) and all(
                port_free(base + 10 + i, f"127.0.1.{i}") for i in range(1, 5)):
            return base
    raise RuntimeError("no free port range for a test sandbox")


@contextlib.contextmanager
def _ports_lock():
    """Held while a test sandbox picks its ports and starts its daemons (they bind them), so
    that a sandbox of another xdist worker never picks the same free range meanwhile."""
    import fcntl

    with open(Path(tempfile.gettempdir()) / "slurmkit-test-sandbox-ports.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextlib.contextmanager
def _running_sandbox():
    """A new 4-node x 4-GPU sandbox (``slurmkit.sandbox.Sandbox``) on free ports in a temporary
    folder, torn down (and the folder removed) on exit."""
    from slurmkit.sandbox import Sandbox, SandboxError
    from slurmkit.sandbox.cluster import missing_packages
    from slurmkit.sandbox.config import SandboxSpec

    if os.geteuid() != 0:
        pytest.skip("the Slurm sandbox needs root")
    missing = missing_packages(_release())
    if missing:
        pytest.skip("Slurm's Debian packages are missing: " + " ".join(missing))
    root = Path(tempfile.mkdtemp(prefix="slurmkit-test-sandbox-"))
    with _ports_lock():
        base = _free_port_base()
        # job ids of their own (1001.. for the range at 7600, 2001.. at 7700 ...): the sandboxes of
        # other workers run on this host too, and a job's rendezvous port is derived from its id
        # (12000 + id % 20000); the demo's and sandbox up's start at 1
        spec = SandboxSpec(port_base=base, host_cpus=tuple(sorted(os.sched_getaffinity(0))),
                           sched_interval_s=TEST_SCHED_INTERVAL_S, slurm=_release().name,
                           first_job_id=1 + 1000 * ((base - 7600) // 100 + 1))
        sb = Sandbox(root, spec)
        try:
            sb.up()
        except SandboxError as exc:
            sb.down(purge=False)
            pytest.fail(f"sandbox did not come up: {exc} (logs kept in {root}/var/log)", pytrace=False)
    try:
        yield sb
    finally:
        sb.down(purge=True)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def free_sandbox_ports():
    """A free port base for a sandbox the test brings up itself (``--port-base``), picked as the
    session sandboxes pick theirs (:func:`_free_port_base`, under the same lock)."""
    with _ports_lock():
        return _free_port_base()


@pytest.fixture(scope="session")
def sandbox():
    """A running 4-node x 4-GPU sandbox (``slurmkit.sandbox.Sandbox``), torn down at the end."""
    from slurmkit.sandbox import Sandbox

    reuse = os.environ.get("SLURMKIT_TEST_SANDBOX_DIR")
    if reuse:
        sb = Sandbox(reuse)
        if not sb.is_up():
            pytest.fail(f"SLURMKIT_TEST_SANDBOX_DIR={reuse} is not up", pytrace=False)
        yield sb
        return
    with _running_sandbox() as sb:
        yield sb


@pytest.fixture(scope="module")
def own_sandbox():
    """A sandbox of the module's own, with an accounting history of only what the module does:
    for tests that compare a whole hour of slurmdbd's rollup (node events, reservations) with
    sreport, which the session sandbox's other tests (drains, downs, requeues) would share."""
    with _running_sandbox() as sb:
        yield sb


@pytest.fixture(scope="session")
def fake_nvml(tmp_path_factory):
    """The fake libnvidia-ml.so.1 (tests/fake_nvml), built once per session with gcc."""
    from fake_nvml import build

    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed (Debian package gcc, listed in .ci/apt-packages.txt)")
    return build(tmp_path_factory.mktemp("fake_nvml"))


@pytest.fixture
def open_dir():
    """A directory (mode 0711) an unprivileged user can enter: pytest's own tmp dirs are root's 0700."""
    d = Path(tempfile.mkdtemp(prefix="slurmkit-open-", dir="/tmp"))
    d.chmod(0o711)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def node_python():
    """An interpreter every user can run, as a node's hooks interpreter is (:mod:`nodepython`: a
    venv from Debian's /usr/bin/python3 in a 0755 directory with a copy of the slurmkit under
    test): for the tests that run the Xid query as the job's user, which the tests' own venv
    (pyenv's Python under /root, 0700, on CI) is not."""
    from nodepython import make

    root = Path(tempfile.mkdtemp(prefix="slurmkit-nodepython-", dir="/tmp"))
    try:
        py = make(root)
    except RuntimeError as exc:
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(str(exc), pytrace=False)
    yield py
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def node(tmp_path):
    """A fresh node directory with the hooks installed (:class:`nodeenv.Node`)."""
    from nodeenv import Node

    return Node(tmp_path / "node")


@pytest.fixture(scope="module")
def healthy(fake_nvml, tmp_path_factory):
    """``(path, snapshot)``: a healthy snapshot recorded from the fake NVML."""
    from nodeenv import record_snapshot

    path = tmp_path_factory.mktemp("snap") / "healthy.json"
    return path, record_snapshot(fake_nvml, path)


SANDBOX_FIXTURES = {"sandbox", "own_sandbox"}
#: Modules that wait longest on their cluster (jobs, requeues, health-check intervals: minutes
#: each): collected first, so that a worker starts each of them at once rather than last.
LONG_FIRST = ("tests/submit/test_submit_production_sandbox.py", "tests/submit/test_submit_sandbox.py",
              "tests/hooks/test_hooks_sandbox.py", "tests/sandbox/test_demo.py")


def pytest_collection_modifyitems(config, items):
    """The modules that need a Slurm cluster (a test marked ``slurm`` or using a sandbox
    fixture) run first, :data:`LONG_FIRST` ahead of them, each module's tests in their order
    (a stable sort of whole modules). scripts/test runs pytest-xdist with ``--dist loadfile
    --no-loadscope-reorder``: each module is sent whole to one worker, in this order, so a
    module's tests keep their order and module fixtures, a worker that runs a cluster module
    brings up its own session sandbox, and the long waits start while the other workers do
    the tests that need no cluster (docs/testing.md)."""
    cluster = {item.nodeid.split("::")[0] for item in items
               if item.get_closest_marker("slurm") or SANDBOX_FIXTURES & set(getattr(item, "fixturenames", ()))}

    def rank(item):
        module = item.nodeid.split("::")[0]
        return LONG_FIRST.index(module) if module in LONG_FIRST else len(LONG_FIRST) + (module not in cluster)

    items.sort(key=rank)
