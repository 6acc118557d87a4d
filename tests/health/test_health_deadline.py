"""The NVML deadline holds for a worker that does not die when killed (stuck in the driver in
uninterruptible sleep): the runner SIGKILLs it, waits a short grace and abandons it, never
waiting on it without bound.

A real worker in uninterruptible sleep cannot be made on demand, so the test makes one that
SIGKILL does not end for the same reason as far as the runner can tell: the runner runs as
``nobody`` and its "worker" is a setuid-root program that becomes fully root after the first
progress line (``CALL nvmlDeviceGetMemoryInfo``) and then sleeps; the runner's SIGKILL is refused
and the process stays alive.
"""

import json
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
import time
runner.WORKER_ARGV = (sys.argv[1],)
t0 = time.monotonic()
try:
    runner.read_state("live", total_deadline_s=3.0, per_call_deadline_s=1.0)
except NvmlTimeout as exc:
    print("TIMEOUT", exc.call, exc.abandoned_pid, round(time.monotonic() - t0 - exc.elapsed_s, 3), exc)
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
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert_abandoned(r, r.stdout)


def assert_abandoned(r, line: str) -> None:
    """``line`` is the runner's ``TIMEOUT nvmlDeviceGetMemoryInfo <pid> <s after deadline> ...``:
    it returned within 0.2 s of its deadline, the setuid worker it abandoned is still there (it
    did not wait for it) and the reason says so. Kills the worker."""
    out = line.split()
    assert out[:2] == ["TIMEOUT", "nvmlDeviceGetMemoryInfo"], (r.stdout, r.stderr)
    pid = int(out[2])
    assert float(out[3]) < 0.2, "the runner waited on the abandoned worker after its deadline"
    try:
        assert os.path.exists(f"/proc/{pid}")
        with open(f"/proc/{pid}/status") as f:
            assert "Uid:\t0\t0\t0\t0" in f.read()
        assert "did not exit when killed" in r.stdout and "abandoned" in r.stdout
    finally:
        os.kill(pid, signal.SIGKILL)


FORK_RUNNER = """
import sys
from slurmkit.health import runner
from slurmkit.health.source import NvmlTimeout
import time
print("FORK", runner._can_fork(None))
t0 = time.monotonic()
try:
    runner.read_state("live", total_deadline_s=3.0, per_call_deadline_s=1.0)
except NvmlTimeout as exc:
    print("TIMEOUT", exc.call, exc.abandoned_pid, round(time.monotonic() - t0 - exc.elapsed_s, 3), exc)
"""


def test_forked_worker_stuck_in_the_driver_is_abandoned_at_the_deadline(unkillable_worker):
    """The hooks' own path: the worker is a fork of the hook (no new interpreter), and the real
    pynvml's memory-info call, in the fake libnvidia-ml, turns it into the setuid program that
    SIGKILL from ``nobody`` cannot end. The runner still returns at the deadline, abandoning it."""
    import pathlib

    from fake_nvml import build

    lib = build(pathlib.Path(os.path.dirname(unkillable_worker)) / "lib")  # readable by nobody
    env = lib.env("stuck_memory", gpus=2)
    env["SLURMKIT_FAKE_NVML_STUCK"] = unkillable_worker
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-I", "-c",
                        FORK_RUNNER], env=env, capture_output=True, text=True, timeout=60, cwd="/")
    lines = r.stdout.splitlines()
    assert r.returncode == 0 and lines[0] == "FORK True", (r.stdout, r.stderr)
    assert_abandoned(r, lines[1])


SAME_STATE = """
import json, os, sys, threading
from slurmkit.health import runner
from slurmkit.health.source import Action
env = dict(os.environ)
forked = runner._can_fork(None)
a = runner.read_state("live", node="n1", before_job=True, job_minors={3}).to_json()
b = runner.read_state("live", node="n1", before_job=True, job_minors={3}, env=env).to_json()  # a new interpreter
acted = runner.run_actions([Action("enable_accounting", gpu_index=0)], "live")
stop = threading.Event()
threading.Thread(target=stop.wait, daemon=True).start()
print(json.dumps({"forked": forked, "threaded": runner._can_fork(None), "env": runner._can_fork(env),
                  "same": {**a, "timestamp": ""} == {**b, "timestamp": ""}, "gpus": len(a["gpus"]), "procs": a["gpus"][1]["values"]["processes"]["value"],
                  "acted": acted, "threaded_read": runner.read_state("live").gpu_count}))
stop.set()
"""


def test_forked_and_new_interpreter_workers_read_the_same_state(fake_nvml):
    """The fork (the hooks' path) and the new interpreter (another environment asked for, or
    another thread running) are the same worker: equal states, actions carried out, and the
    runner picks the fork only when it is safe."""
    env = fake_nvml.env("healthy", gpus=3, minors="5,9,2", procs="1:4242:512", energy_mj=5000)
    r = subprocess.run([sys.executable, "-I", "-c", SAME_STATE], env=env, capture_output=True, text=True,
                       timeout=60, cwd="/")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["forked"] is True and out["threaded"] is False and out["env"] is False
    assert out["same"] and out["gpus"] == 3 and out["procs"] == [{"pid": 4242, "used_mib": 512}]
    assert out["acted"] == ["enable accounting mode on GPU0"] and out["threaded_read"] == 3
