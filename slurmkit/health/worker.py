"""The NVML worker behind :func:`slurmkit.health.runner.read_state` /
:func:`~slurmkit.health.runner.run_actions`: :func:`serve` one request.

The runner forks it from the hook's own interpreter (nothing to start or import again but NVML),
or, where it cannot fork safely, runs it as ``python -m slurmkit.health.worker SPEC_JSON``.
Either way it writes progress and the result to file descriptor 1 in the runner's line
protocol (``CALL``, ``SLEEP``, ``STATE``, ``ACTED``, ``ERROR``). It may be killed at any moment:
it holds nothing that needs cleaning up except the NVML session, which the kernel releases.

The request (``spec``, JSON-able): ``read`` (bool: read the state; False: only carry out the
actions), ``before_job`` (bool), ``node`` (str | None), ``job_minors`` (list of device minors |
None: all GPUs), ``kmsg_cursor`` (path | None), ``kmsg_device`` (path, default
``/dev/kmsg``), ``sysfs`` (path, default ``/sys``),
``thresholds`` ({name: number} over ``checks.toml``'s), ``fabric``
(:func:`slurmkit.health.fabric.spec_of` | None), ``actions`` (list of
:class:`~slurmkit.health.source.Action` field dicts | None).
"""

from __future__ import annotations

import json
import os
import sys
import time


def _emit(tag: str, text: str = "") -> None:
    os.write(1, f"{tag} {text}\n".encode())


def serve(spec: dict) -> None:
    """Carry out one request (see the module docstring); the reply goes to fd 1. Raises
    nothing: a bug or own trouble is reported as ``ERROR`` (its traceback on fd 2), never as a
    hardware verdict."""
    try:
        from slurmkit.health.config import defaults
        from slurmkit.health.nvml_source import LiveNvmlSource
        from slurmkit.health.source import Action

        thresholds = dict(defaults()["thresholds"])
        thresholds.update(spec.get("thresholds") or {})

        def sleep(s: float) -> None:
            _emit("SLEEP", str(s))
            time.sleep(s)

        src = LiveNvmlSource(node=spec.get("node"), kmsg_cursor=spec.get("kmsg_cursor"),
                             kmsg_device=spec.get("kmsg_device") or "/dev/kmsg",
                             sysfs=spec.get("sysfs") or "/sys", progress=lambda c: _emit("CALL", c),
                             fabric=spec.get("fabric"))
        if spec.get("read", True):
            minors = spec.get("job_minors")
            state = src.read(before_job=bool(spec.get("before_job")), thresholds=thresholds, sleep=sleep,
                             job_minors=None if minors is None else {int(m) for m in minors})
        # [line, outcome] per action: one refusal stops nothing
        acted = [list(src.apply(Action(**a))) for a in spec.get("actions") or []]
        src.close()
        if spec.get("read", True):
            _emit("STATE", json.dumps(state.to_json()))
        else:
            _emit("ACTED", json.dumps(acted))
    except Exception as exc:
        import traceback

        traceback.print_exc(file=sys.stderr)
        sys.stderr.flush()
        _emit("ERROR", json.dumps(f"{type(exc).__name__}: {exc}"))


def main(argv: list[str] | None = None) -> int:
    """``python -m slurmkit.health.worker SPEC_JSON``: :func:`serve` the request. Exit status 0
    (the reply says what happened); 2 when the argument is not a JSON object."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        spec = json.loads(argv[0]) if len(argv) == 1 else None
    except ValueError:
        spec = None
    if not isinstance(spec, dict):
        _emit("ERROR", json.dumps("usage: python -m slurmkit.health.worker SPEC_JSON (one JSON object)"))
        return 2
    serve(spec)
    return 0


if __name__ == "__main__":
    sys.exit(main())
