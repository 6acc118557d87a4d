"""A state directory that cannot be written (a filesystem remounted read-only by
``errors=remount-ro``, or full) must not keep a broken node in service: the hooks judge and
drain first; health.json, the kernel-log cursor, job records and counters are written best
effort, each failure said and counted as slurmkit's own trouble.

The state directory is a real filesystem: a small tmpfs mounted over it, then remounted
read-only, or filled until writes fail with ENOSPC (the tests run as root, whom file modes do
not stop, so only a mount makes the directory unwritable)."""

import errno
import json
import os
import subprocess

import pytest

from nodeenv import set_value, where

from slurmkit.health import kmsg
from slurmkit.health.result import fit_reason


def _mount(path, opts):
    path.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs for the state directory: {r.stderr.strip()}")


@pytest.fixture
def mounted():
    paths = []

    def mount(path, opts):
        _mount(path, opts)
        paths.append(path)

    yield mount
    for p in reversed(paths):
        subprocess.run(["umount", str(p)], check=False)


def _fake_scontrol(bin_dir, calls):
    """scontrol that answers ``show node`` with an idle node and logs every call."""
    bin_dir.mkdir()
    exe = bin_dir / "scontrol"
    exe.write_text(f"""#!/bin/sh
echo "$@" >> {calls}
case "$1" in show) echo "NodeName=n1 State=IDLE Reason=(null)";; esac
exit 0
""")
    exe.chmod(0o755)


def _failing(node, snap, tmp_path):
    bad = set_value(snap, 1, "retired_pages_pending", True)
    p = tmp_path / "failing.json"
    p.write_text(json.dumps(bad))
    return p, next(g for g in bad["gpus"] if g["index"] == 1)


def _fill(path):
    """Write into ``path`` until the filesystem is full."""
    with open(path / "filler", "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    with pytest.raises(OSError):
        (path / "probe").write_text("x" * 8192)


@pytest.mark.parametrize("how", ["read-only", "full"])
def test_broken_node_still_drains_when_state_dir_cannot_be_written(node, healthy, tmp_path, mounted, how):
    path, snap = healthy
    p, g = _failing(node, snap, tmp_path)
    calls = tmp_path / "scontrol.calls"
    _fake_scontrol(tmp_path / "bin", calls)
    node.write_config({"n1": p}, bin_dir=str(tmp_path / "bin"))
    if how == "read-only":  # as errors=remount-ro leaves it: empty (no node directory yet), then ro
        mounted(node.state_dir, "size=1m")
        subprocess.run(["mount", "-o", "remount,ro", str(node.state_dir)], check=True)
    else:
        mounted(node.state_dir, "size=64k")
        _fill(node.state_dir)
    reason = fit_reason(f"slurmkit: retired_pages_pending {where(node, g)}: page retirement pending (reset the GPU)")
    for shim, hook, kw, code in ((node.healthcheck, "healthcheck", {"job_id": None}, 0), (node.prolog, "prolog", {}, 1),
                                 (node.epilog, "epilog", {}, 0)):
        calls.unlink(missing_ok=True)
        r = node.run(shim, **kw)
        assert r.returncode == code, r.stderr
        assert "internal error" not in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert f"drained n1: {reason}" in r.stderr, r.stderr
        assert calls.read_text().splitlines()[-1] == f"update nodename=n1 state=drain reason={reason}"
        assert "slurmkit's own trouble (no drain): cannot write the node's health state under" in r.stderr
        assert "slurmkit's own trouble (no drain): cannot keep the node's counters under" in r.stderr
        assert node.metric("n1", hook, "slurmkit_hook_own_errors_total") >= 1
        assert node.metric("n1", hook, "slurmkit_health_check_status", check="retired_pages_pending",
                           gpu=str(g["index"])) == 2


def test_kernel_log_cursor_that_cannot_be_written_loses_no_xid(tmp_path, mounted):
    # the Xid 79 line of ../shared/corpus/gpu-logs/akash-support-209_* as /dev/kmsg gives it
    dev = tmp_path / "kmsg"
    dev.write_text("6,1,100,-;usb 1-1: new device\n"
                   "3,2,200,-;NVRM: Xid (PCI:0000:a1:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n")
    state = tmp_path / "state"
    mounted(state, "size=1m")
    subprocess.run(["mount", "-o", "remount,ro", str(state)], check=True)
    errors: list[str] = []
    xids = kmsg.read_kmsg(state / "kmsg-healthcheck.cursor", dev, errors=errors)
    assert [(x.xid, x.pci_bus_id, x.seq) for x in xids] == [(79, "0000:a1:00.0", 2)]
    assert len(errors) == 1 and errors[0].startswith(f"kernel-log cursor {state / 'kmsg-healthcheck.cursor'}: ")
    assert "Read-only file system" in errors[0]
    assert not os.path.exists(state / "kmsg-healthcheck.cursor")
    with pytest.raises(OSError):  # a caller that gives no list gets the OSError, as before
        kmsg.read_kmsg(state / "kmsg-healthcheck.cursor", dev)
