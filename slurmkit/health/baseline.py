"""The error counters one run leaves for the next: ``<state_dir>/<node>/port-counters.json``.

Counters that only mean something as a rise (InfiniBand ``symbol_error``, ``link_downed`` ...)
are judged against the previous run's values. :func:`swap` gives the state the previous values
(``NodeState.baseline``) and writes the current ones in their place, atomically. A missing,
unreadable or foreign file reads as "no previous run" (nothing is judged on a rise, never a
drain); failing to write it is returned as own trouble. Standard library only.
"""

from __future__ import annotations

import json
import os

from slurmkit.records import field, record

VERSION = 1


@record
class Counters:
    """``port-counters.json``: ``{"slurmkit_counters": 1, "ib": {"mlx5_0/1": {counter: int}},
    "gpu": {uuid: {counter: int}}}`` (``ib``: :func:`slurmkit.health.fabric.ib_baseline`;
    ``gpu``: NVLink and PCIe counters, :func:`slurmkit.health.nvlink.gpu_counters`)."""

    ib: dict[str, dict[str, int]] = field(default_factory=dict)
    gpu: dict[str, dict[str, int]] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"slurmkit_counters": VERSION, "ib": self.ib, "gpu": self.gpu}

    @classmethod
    def from_json(cls, data) -> "Counters | None":
        """None for anything that is not a counters document of this version."""
        if not isinstance(data, dict) or data.get("slurmkit_counters") != VERSION:
            return None
        ib, gpu = data.get("ib"), data.get("gpu", {})
        if not isinstance(ib, dict) or not isinstance(gpu, dict):
            return None

        def table(t):
            return {str(k): {str(c): int(n) for c, n in v.items() if isinstance(n, int)}
                    for k, v in t.items() if isinstance(v, dict)}
        return cls(ib=table(ib), gpu=table(gpu))


def of_state(state) -> Counters:
    """The counters of ``state`` worth keeping."""
    from slurmkit.health.fabric import ib_baseline
    from slurmkit.health.nvlink import gpu_counters

    gpu = {}
    for g in state.gpus:
        c = gpu_counters(g)
        if c:
            gpu[g.uuid or f"index{g.index}"] = c
    return Counters(ib=ib_baseline(state), gpu=gpu)


def swap(path, state) -> str | None:
    """Set ``state.baseline`` from ``path`` (``{"ib": {...}}``; None when there is no usable
    previous run) and replace ``path`` with ``state``'s counters. Returns an own-trouble
    message when the file could not be written, else None. Nothing is written (and the old
    file is kept) when ``state`` has no counters at all (e.g. the ports were not read) or they
    equal the previous run's."""
    try:
        with open(path, encoding="utf-8") as fh:
            prev = Counters.from_json(json.load(fh))
    except (OSError, ValueError):
        prev = None
    state.baseline = {"ib": prev.ib, "gpu": prev.gpu} if prev is not None else None
    now = of_state(state)
    if not (now.ib or now.gpu) or (prev is not None and (prev.ib, prev.gpu) == (now.ib, now.gpu)):
        return None  # nothing read, or nothing changed: no write (and no fsync) on the prolog's path
    from slurmkit.atomicfile import atomic_write

    try:
        os.makedirs(os.path.dirname(os.fspath(path)) or ".", mode=0o700, exist_ok=True)
        atomic_write(path, json.dumps(now.to_json()))
    except OSError as exc:
        return f"counters {path}: {exc.strerror or exc}"
    return None
