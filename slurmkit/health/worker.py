"""``python -m slurmkit.health.worker``: the NVML worker process behind
:func:`slurmkit.health.runner.read_state` / :func:`~slurmkit.health.runner.run_actions`.

Writes progress and the result to stdout in the runner's line protocol (``CALL``, ``SLEEP``,
``STATE``, ``ACTED``, ``ERROR``). It may be killed at any moment: it holds nothing that needs
cleaning up except the NVML session, which the kernel releases.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback


def _emit(tag: str, text: str = "") -> None:
    os.write(1, f"{tag} {text}\n".encode())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m slurmkit.health.worker")
    p.add_argument("--before-job", action="store_true")
    p.add_argument("--node")
    p.add_argument("--job-minors", help="comma-separated device minors of the job's GPUs ('' : none)")
    p.add_argument("--kmsg-cursor")
    p.add_argument("--kmsg-device", default="/dev/kmsg")
    p.add_argument("--sysfs", default="/sys")
    p.add_argument("--json-thresholds", default="{}")
    p.add_argument("--fabric", default="null")
    p.add_argument("--actions")
    p.add_argument("--no-read", action="store_true")
    a = p.parse_args(argv)
    try:
        from slurmkit.health.config import defaults
        from slurmkit.health.nvml_source import LiveNvmlSource
        from slurmkit.health.source import Action

        thresholds = dict(defaults()["thresholds"])
        thresholds.update(json.loads(a.json_thresholds))

        def sleep(s: float) -> None:
            _emit("SLEEP", str(s))
            time.sleep(s)

        src = LiveNvmlSource(node=a.node, kmsg_cursor=a.kmsg_cursor, kmsg_device=a.kmsg_device, sysfs=a.sysfs,
                             progress=lambda c: _emit("CALL", c),
                             fabric=json.loads(a.fabric))
        if not a.no_read:
            minors = None if a.job_minors is None else {int(m) for m in a.job_minors.split(",") if m}
            state = src.read(before_job=a.before_job, thresholds=thresholds, sleep=sleep, job_minors=minors)
        acted = []
        if a.actions:
            for spec in json.loads(a.actions):
                acted.append(list(src.apply(Action(**spec))))  # [line, outcome]: one refusal stops nothing
        src.close()
        if a.no_read:
            _emit("ACTED", json.dumps(acted))
        else:
            _emit("STATE", json.dumps(state.to_json()))
        return 0
    except Exception as exc:  # a bug or own trouble: reported, never a hardware verdict
        traceback.print_exc(file=sys.stderr)
        _emit("ERROR", json.dumps(f"{type(exc).__name__}: {exc}"))
        return 0


if __name__ == "__main__":
    sys.exit(main())
