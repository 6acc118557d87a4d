"""What the hooks remember between runs on one node, under ``<state_dir>/<node>/``.

- ``health.json``: ``{"drained_reason": str | null`` (the reason slurmkit drained the node with,
  null when it has not), ``"clean_runs": int`` (health checks in a row without a fail since),
  ``"own_errors": {hook: int}`` (runs that hit slurmkit's own trouble: the textfile counter)};
- ``job-<id>.json``: the prolog's energy readings for a job (``{"start_s": epoch s,
  "state_source": str, "gpus": [{index, nvml_index, minor, uuid, pci_bus_id, start_energy_mj}],
  "user": SLURM_JOB_USER}``; its presence is what ``slurmkit_gpu_job_info`` lists),
  removed by the epilog;
- ``kmsg.cursor``: the kernel-log position the XID reader keeps.

Files are replaced atomically; the directory is created 0700.
"""

from __future__ import annotations

import json
import os


def node_dir(state_dir, node: str) -> str:
    d = os.path.join(os.fspath(state_dir), node)
    os.makedirs(d, mode=0o700, exist_ok=True)
    return d


def _write(path: str, data: dict) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as fh:
        json.dump(data, fh)
    os.replace(tmp, path)


def _read(path: str, default: dict) -> dict:
    try:
        with open(path) as fh:
            data = json.load(fh)
        return data if isinstance(data, dict) else dict(default)
    except (OSError, ValueError):
        return dict(default)


def load_health(state_dir, node: str) -> dict:
    """``health.json`` (defaults when absent or unreadable)."""
    d = _read(os.path.join(node_dir(state_dir, node), "health.json"),
              {"drained_reason": None, "clean_runs": 0, "own_errors": {}})
    d.setdefault("drained_reason", None)
    d.setdefault("clean_runs", 0)
    d.setdefault("own_errors", {})
    return d


def save_health(state_dir, node: str, data: dict) -> None:
    _write(os.path.join(node_dir(state_dir, node), "health.json"), data)


def count_own_error(state_dir, node: str, hook: str) -> int:
    """Add one to the own-trouble counter of ``hook``; returns the new total (0 when the state
    directory itself cannot be written)."""
    try:
        d = load_health(state_dir, node)
        d["own_errors"][hook] = int(d["own_errors"].get(hook, 0)) + 1
        save_health(state_dir, node, d)
        return d["own_errors"][hook]
    except OSError:
        return 0


def save_job(state_dir, node: str, job_id: str, data: dict) -> None:
    _write(os.path.join(node_dir(state_dir, node), f"job-{job_id}.json"), data)


def pop_job(state_dir, node: str, job_id: str) -> dict | None:
    """The prolog's record for ``job_id`` (removed), or None."""
    path = os.path.join(node_dir(state_dir, node), f"job-{job_id}.json")
    data = _read(path, {})
    try:
        os.unlink(path)
    except OSError:
        pass
    return data or None


def kmsg_cursor(state_dir, node: str) -> str:
    return os.path.join(node_dir(state_dir, node), "kmsg.cursor")
