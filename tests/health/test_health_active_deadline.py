"""The active check inside Slurm's limit on HealthCheckProgram (slurmd kills it after 60 s): a
default deadline well below it, a profile that asks for more refused, the diag's process group
killed when the hook is ended, a diag left by a killed hook found by its pid file (never a
second one started), and a timeout that says so. dcgmi is a script that sleeps."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from slurmkit.health.active import dcgm_diag
from slurmkit.profile.health import Health
from slurmkit.waiting import wait_until


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie no one reaped yet is gone for our purposes
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _sleepy_dcgmi(tmp_path, marker):
    exe = tmp_path / "dcgmi"
    # the script records the pid of the sleep it starts (the nvvs stand-in): it must die too
    exe.write_text(f"#!/bin/sh\nsleep 300 &\necho $! > {marker}\nwait\n")
    exe.chmod(0o755)
    return exe


def test_default_deadline_fits_inside_slurmds_60_s():
    assert Health().active_timeout_s <= 45
    assert dcgm_diag.__defaults__[1] <= 45


def test_profile_refuses_an_active_timeout_slurmd_would_cut_short(tmp_path):
    from slurmkit.errors import InputError
    from slurmkit.profile.load import load_profile

    site = tmp_path / "site.toml"
    site.write_text('extends = "sandbox"\n[health]\nactive_timeout_s = 120\n')
    with pytest.raises(InputError, match=r"active_timeout_s.*below 60 s.*slurmd kills HealthCheckProgram"):
        load_profile(site)
    site.write_text('extends = "sandbox"\n[health]\nactive_timeout_s = 50\n')
    assert load_profile(site).health.active_timeout_s == 50.0


def test_a_timeout_is_marked_and_kills_the_group(tmp_path):
    marker = tmp_path / "child.pid"
    exe = _sleepy_dcgmi(tmp_path, marker)
    pidfile = tmp_path / "dcgmi-diag.pid"
    t0 = time.monotonic()
    rep = dcgm_diag(1, 1.0, dcgmi=exe, pidfile=pidfile)
    assert time.monotonic() - t0 < 10
    assert rep.status == "fail" and rep.timed_out and "did not finish within 1 s" in rep.message
    child = int(marker.read_text())
    wait_until(lambda: not _alive(child), 10, 0.05, "the diag's child to die with its group")
    assert not pidfile.exists()


def test_the_hook_ended_by_sigterm_takes_the_diag_with_it(tmp_path):
    marker = tmp_path / "child.pid"
    exe = _sleepy_dcgmi(tmp_path, marker)
    pidfile = tmp_path / "dcgmi-diag.pid"
    code = textwrap.dedent(f"""
        from slurmkit.health.active import dcgm_diag
        dcgm_diag(1, 40, dcgmi={str(exe)!r}, pidfile={str(pidfile)!r})
    """)
    hook = subprocess.Popen([sys.executable, "-c", code])
    child = int(wait_until(lambda: marker.exists() and marker.read_text().strip(), 20, 0.05,
                           "the diag to start its child"))
    # no wait for the hook's handler: dcgm_diag installs it before the diag starts, so a SIGTERM
    # as soon as the diag runs is the race this test holds shut
    hook.send_signal(signal.SIGTERM)  # slurmd ending HealthCheckProgram
    assert hook.wait(10) == -signal.SIGTERM
    # the handler kills the diag's process group; under load the child may take a moment to exit
    wait_until(lambda: not _alive(child), 10, 0.05, "the diag to die with the hook")
    assert not pidfile.exists()


def test_a_diag_left_by_a_killed_hook_is_not_started_twice(tmp_path):
    marker = tmp_path / "child.pid"
    exe = _sleepy_dcgmi(tmp_path, marker)
    pidfile = tmp_path / "dcgmi-diag.pid"
    # an earlier hook started the diag and was SIGKILLed: its diag runs on, in its own session
    left = subprocess.Popen([str(exe), "diag", "-r", "1", "-j"], start_new_session=True)
    try:
        pidfile.write_text(f"{left.pid}\n")
        wait_until(lambda: marker.exists() and marker.read_text().strip(), 20, 0.05, "the earlier diag's child")
        marker.unlink()
        rep = dcgm_diag(1, 40, dcgmi=exe, pidfile=pidfile)
        assert rep.status == "error" and f"earlier dcgmi diag (pid {left.pid}" in rep.message
        assert "not starting another" in rep.message
        assert not marker.exists()  # no second diag
        assert left.poll() is None
        # past its deadline the earlier one is a hang: killed, and a fail
        old = time.time() - 100
        os.utime(pidfile, (old, old))
        rep = dcgm_diag(1, 40, dcgmi=exe, pidfile=pidfile)
        assert rep.status == "fail" and rep.timed_out and "left by an earlier health check" in rep.message
        assert left.wait(10) == -signal.SIGKILL
        assert not marker.exists() and not pidfile.exists()
    finally:
        if left.poll() is None:
            os.killpg(left.pid, signal.SIGKILL)
            left.wait()


def test_a_stale_pid_file_does_not_block_the_diag(tmp_path):
    exe = tmp_path / "dcgmi"
    exe.write_text("#!/bin/sh\necho 'Error: unable to connect to host engine'\nexit 1\n")
    exe.chmod(0o755)
    pidfile = tmp_path / "dcgmi-diag.pid"
    dead = subprocess.Popen(["true"])
    dead.wait()
    pidfile.write_text(f"{dead.pid}\n")
    rep = dcgm_diag(1, 10, dcgmi=exe, pidfile=pidfile)
    assert rep.status == "error" and "earlier" not in rep.message and not pidfile.exists()
