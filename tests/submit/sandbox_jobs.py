"""Helpers of the submit tests that run jobs in the real Slurm sandbox: submit through the API
with the sandbox's site profile (waiting: :func:`slurmkit.waiting.wait_until`)."""

from __future__ import annotations

from slurmkit.submit import api


def submit(sandbox, backend, tmp_path, template, command, **kw):
    """``slurmkit.submit`` of ``template`` running ``command`` (items made str) on the sandbox,
    from ``tmp_path``, its output in ``tmp_path/job-%j.out`` unless ``output`` is given."""
    kw.setdefault("output", str(tmp_path / "job-%j.out"))
    return api.submit(template, [str(c) for c in command], site=str(sandbox.profile_path),
                      backend=backend, chdir=str(tmp_path), **kw)
