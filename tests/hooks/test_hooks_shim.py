"""The shim Slurm runs is fail-safe: slurmkit's own trouble, even a failed ``import slurmkit``,
never makes Slurm drain a node with "Prolog error" (it logs and exits 0); hardware evidence
still comes through as exit 1."""

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from nodeenv import set_value
from slurmkit.hooks import install as inst


def _shim(node, python: str, kind: str = "prolog") -> Path:
    path = node.root / f"shim-{kind}"
    path.write_text(inst.shim_text(kind, python, node.cfg_path))
    path.chmod(0o755)
    return path


def _broken_upgrade_venv(tmp_path: Path) -> str:
    """A venv whose slurmkit is half upgraded: hooks/main.py cut off mid-file."""
    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    pkg = tmp_path / "half" / "slurmkit"
    shutil.copytree(Path(inst.__file__).resolve().parent.parent, pkg,
                    ignore=shutil.ignore_patterns("__pycache__"))
    main = pkg / "hooks" / "main.py"
    main.write_text(main.read_text()[:700])  # truncated: a SyntaxError on import
    site = next(venv.glob("lib/python3*/site-packages"))
    (site / "half.pth").write_text(str(pkg.parent) + "\n")
    return str(venv / "bin" / "python")


def test_missing_interpreter_logs_and_exits_0(node, healthy):
    node.write_config({"n1": healthy[0]})
    r = node.run(_shim(node, str(node.root / "gone" / "bin" / "python")))
    assert r.returncode == 0
    assert "own trouble (no drain)" in r.stderr and "is missing" in r.stderr
    assert "node=n1 job=101" in r.stderr


def test_python_without_slurmkit_logs_and_exits_0(node, healthy):
    node.write_config({"n1": healthy[0]})
    # the system interpreter has no slurmkit: a broken venv / an uninstalled package
    for kind in ("prolog", "epilog", "healthcheck"):
        r = node.run(_shim(node, "/usr/bin/python3", kind))
        assert r.returncode == 0, (kind, r.stderr)
        assert "ModuleNotFoundError: No module named 'slurmkit'" in r.stderr
        assert f"slurmkit-{kind}: error:" in r.stderr


def test_half_finished_upgrade_logs_and_exits_0(node, healthy, tmp_path):
    node.write_config({"n1": healthy[0]})
    python = _broken_upgrade_venv(tmp_path)
    r = node.run(_shim(node, python))
    assert r.returncode == 0, r.stderr
    assert "SyntaxError" in r.stderr and "own trouble (no drain)" in r.stderr


def test_hardware_evidence_still_fails_the_prolog(node, healthy, tmp_path):
    path, snap = healthy
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(set_value(snap, 1, "ecc_volatile_uncorrectable", 3)))
    node.write_config({"n1": bad}, mode="observe")
    assert node.run(node.prolog).returncode == 0       # observe: no verdict
    node.write_config({"n1": bad})
    r = node.run(node.prolog)
    assert r.returncode == 1 and "ecc_volatile_uncorrectable" in r.stderr
    node.write_config({"n1": path})
    assert node.run(node.prolog).returncode == 0


def test_interpreter_that_cannot_run_logs_and_exits_0(node, healthy):
    node.write_config({"n1": healthy[0]})
    bad = node.root / "python-not-exec"
    bad.write_text("")
    bad.chmod(0o644)
    r = node.run(_shim(node, str(bad)))
    assert r.returncode == 0 and "cannot be run (exit 126)" in r.stderr


def test_interpreter_this_user_may_not_run_is_told_from_a_missing_one(node, healthy):
    """As ``nobody`` (the user a job's Xid query runs as), an interpreter under a directory only
    root may search is "permission denied", not "missing"; a missing one is still "missing"."""
    node.write_config({"n1": healthy[0]})
    root = Path(tempfile.mkdtemp(prefix="slurmkit-shim-"))  # outside the test's 0700 tmp_path
    try:
        root.chmod(0o755)
        private = root / "venv"
        (private / "bin").mkdir(parents=True)
        private.chmod(0o700)
        python = private / "bin" / "python"
        python.symlink_to(sys.executable)
        as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        for py, want in ((python, "permission denied for user"), (root / "gone" / "python", "is missing")):
            shim = root / "shim"
            shim.write_text(inst.shim_text("prolog", str(py), node.cfg_path))
            shim.chmod(0o755)
            r = node.run(shim, prefix=as_nobody)
            assert r.returncode == 0, r.stderr
            assert "own trouble (no drain)" in r.stderr and want in r.stderr, r.stderr
    finally:
        shutil.rmtree(root)
