"""Helpers of the submit tests that run jobs in the real Slurm sandbox: submit through the API
with the sandbox's site profile, and wait for a condition."""

from __future__ import annotations

import time

from slurmkit.submit import api


def submit(sandbox, backend, tmp_path, template, command, **kw):
    """``slurmkit.submit`` of ``template`` running ``command`` (items made str) on the sandbox,
    from ``tmp_path``, its output in ``tmp_path/job-%j.out`` unless ``output`` is given."""
    kw.setdefault("output", str(tmp_path / "job-%j.out"))
    return api.submit(template, [str(c) for c in command], site=str(sandbox.profile_path),
                      backend=backend, chdir=str(tmp_path), **kw)


def wait_for(predicate, timeout, what):
    """Poll ``predicate()`` every 0.5 s until it is true, or raise AssertionError naming
    ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")
