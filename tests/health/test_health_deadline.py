"""The NVML deadline holds for a worker that does not die when killed (stuck in the driver in
uninterruptible sleep): the runner SIGKILLs it, waits a short grace and abandons it, never
waiting on it without bound.

A real worker in uninterruptible sleep cannot be made on demand, so the test makes one that
SIGKILL does not end for the same reason as far as the runner can tell: the runner runs as
``nobody`` and its "worker" is a setuid-root program that becomes fully root after the first
progress line (``CALL nvmlDeviceGetMemoryInfo``) and then sleeps; the runner's SIGKILL is refused
and the process stays alive.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile

import pytest

HELPER_C = r"""
#define _GNU_SOURCE
#include <stdio.h>
#include <unistd.h>
int main(void) {
    if (setresuid(0, 0, 0) != 0) return 3;   /* from now on nobody may not signal us */
    printf("CALL nvmlDeviceGetMemoryInfo\n");
    fflush(stdout);
    sleep(120);                               /* "stuck in the driver" */
    return 0;
}
"""

RUNNER = """
import sys
from slurmkit.health import runner
from slurmkit.health.source import NvmlTimeout
runner.WORKER_ARGV = (sys.argv[1],)
try:
    runner.read_state("live", total_deadline_s=3.0, per_call_deadline_s=1.0)
except NvmlTimeout as exc:
    print("TIMEOUT", exc.call, exc.abandoned_pid, exc)
"""


@pytest.fixture
def unkillable_worker():
    if os.geteuid() != 0 or shutil.which("gcc") is None or shutil.which("setpriv") is None:
        pytest.skip("needs root, gcc and setpriv")
    d = tempfile.mkdtemp(prefix="slurmkit-test-worker-")  # not under pytest's 0700 tmp dir
    try:
        os.chmod(d, 0o755)
        src, exe = os.path.join(d, "w.c"), os.path.join(d, "stuck-worker")
        with open(src, "w") as f:
            f.write(HELPER_C)
        subprocess.run(["gcc", "-O0", "-o", exe, src], check=True, timeout=60)
        os.chmod(exe, 0o4755)
        yield exe
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_worker_that_survives_sigkill_is_abandoned_at_the_deadline(unkillable_worker):
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", RUNNER,
                        unkillable_worker], capture_output=True, text=True, timeout=60)
    out = r.stdout.split()
    assert r.returncode == 0 and out[:2] == ["TIMEOUT", "nvmlDeviceGetMemoryInfo"], (r.stdout, r.stderr)
    pid = int(out[2])
    try:
        # the worker is still there (the runner did not wait for it) and the reason says so
        assert os.path.exists(f"/proc/{pid}")
        with open(f"/proc/{pid}/status") as f:
            assert "Uid:\t0\t0\t0\t0" in f.read()
        assert "did not exit when killed" in r.stdout and "abandoned" in r.stdout
    finally:
        os.kill(pid, signal.SIGKILL)
