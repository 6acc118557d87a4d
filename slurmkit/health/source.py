"""The one small interface every GPU state source implements, the replay sources, and the
errors that separate slurmkit's own trouble from hardware evidence.

A source gives a :class:`~slurmkit.health.state.NodeState` (:meth:`GpuSource.read`) and carries
out the actions a hook takes (:meth:`GpuSource.apply`): kill a pid, set or reset application
clocks, locked GPU clocks and locked memory clocks, set the power limit, enable accounting mode.
Replay sources (:class:`SnapshotSource`: slurmkit snapshot JSON, ``nvidia-smi -q -x`` XML or
``nvidia-smi -q`` text) read nothing from the host and only log actions as "would ..."; they
keep each action in :attr:`GpuSource.acted`, so a test sees the values a hook would have set
per GPU. The live source is
:class:`slurmkit.health.nvml_source.LiveNvmlSource` (the only module that imports pynvml).

:meth:`GpuSource.read` adds the re-sampling the checks rely on:

* clock event reasons: when a HW bit is set, ``clock_event_samples - 1`` more samples
  ``clock_event_interval_s`` apart (live only; a replay keeps its single sample);
* before a job: when a GPU has a compute process or memory used above the limit, re-read
  processes and memory up to ``busy_tries`` times ``busy_interval_s`` apart (``sleep`` is
  injectable; a replay re-reads the same capture without sleeping).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable

from slurmkit.health.errors import ActionFailed, CaptureError, NvmlTimeout, SourceError
from slurmkit.health.state import RC_SUCCESS, GpuState, NodeState
from slurmkit.records import record

__all__ = ["Action", "ActionFailed", "CaptureError", "GpuSource", "NvmlTimeout", "SnapshotSource", "SourceError",
           "load_capture", "RC_REPLAY"]

#: The outcome :meth:`GpuSource.apply` gives an action a replay source only logged.
RC_REPLAY = "REPLAY"



def _info(text: str) -> None:
    """Log ``text`` at INFO on ``slurmkit.health`` when the process uses :mod:`logging` (the CLI
    configures it); a hook, which logs through :mod:`slurmkit.hooks.log`, does not import it."""
    logging = sys.modules.get("logging")
    if logging is not None:
        logging.getLogger("slurmkit.health").info(text)


@record(frozen=True)
class Action:
    """Something a hook does to a GPU. ``kind``: ``kill`` (``pid``), ``reset_app_clocks``
    (``nvmlDeviceResetApplicationsClocks``), ``set_app_clocks`` (``clocks_mhz``: ``[memory MHz,
    graphics MHz]``, ``nvmlDeviceSetApplicationsClocks``), ``set_locked_clocks`` (``clocks_mhz``:
    ``[min MHz, max MHz]``, ``nvmlDeviceSetGpuLockedClocks``), ``reset_locked_clocks``
    (``nvmlDeviceResetGpuLockedClocks``), ``set_mem_locked_clocks`` (``clocks_mhz``: ``[min MHz,
    max MHz]``, ``nvmlDeviceSetMemoryLockedClocks``), ``reset_mem_locked_clocks``
    (``nvmlDeviceResetMemoryLockedClocks``), ``set_power_limit`` (``power_limit_w``, W;
    ``nvmlDeviceSetPowerManagementLimit``), ``enable_accounting``
    (``nvmlDeviceSetAccountingMode``). ``gpu_index`` is the NVML index."""

    kind: str
    gpu_index: int | None = None
    pid: int | None = None
    power_limit_w: float | None = None
    clocks_mhz: list | None = None

    def describe(self) -> str:
        what = {
            "kill": f"kill pid {self.pid}",
            "reset_app_clocks": "reset application clocks",
            "set_app_clocks": f"set application clocks to {self.clocks_mhz} MHz (memory, graphics)",
            "set_locked_clocks": f"lock GPU clocks to {self.clocks_mhz} MHz (min, max)",
            "reset_locked_clocks": "reset locked clocks",
            "set_mem_locked_clocks": f"lock memory clocks to {self.clocks_mhz} MHz (min, max)",
            "reset_mem_locked_clocks": "reset locked memory clocks",
            "set_power_limit": f"set power limit to {self.power_limit_w} W",
            "enable_accounting": "enable accounting mode",
        }.get(self.kind)
        if what is None:
            raise ValueError(f"unknown action {self.kind!r}")
        return what + (f" on GPU{self.gpu_index}" if self.gpu_index is not None and self.kind != "kill" else "")


ACTION_KINDS = ("kill", "reset_app_clocks", "set_app_clocks", "set_locked_clocks", "reset_locked_clocks",
                "set_mem_locked_clocks", "reset_mem_locked_clocks", "set_power_limit", "enable_accounting")


class GpuSource:
    """Base class: subclasses implement :meth:`read_once`, :meth:`sample_clock_events`,
    :meth:`sample_busy` and (live) :meth:`_do`."""

    replay = True
    name = "?"
    #: The actions :meth:`apply` was given, in order (what a replay would have set, per GPU).
    acted: list

    def read_once(self) -> NodeState:
        raise NotImplementedError

    def sample_clock_events(self, gpu: GpuState) -> int | None:
        """One fresh clock-event-reasons bitmask for ``gpu`` (None: unavailable)."""
        return gpu.get("clock_event_reasons")

    def sample_busy(self, gpu: GpuState) -> dict:
        """One fresh ``{"memory_used_mib": MiB, "pids": [...]}`` for ``gpu``."""
        return {"memory_used_mib": gpu.get("memory_used_mib"),
                "pids": [p["pid"] for p in gpu.get("processes") or []]}

    def read(self, *, before_job: bool = False, thresholds: dict | None = None,
             sleep: Callable[[float], None] = time.sleep, progress: Callable[[str], None] | None = None,
             job_minors: set[int] | None = None) -> NodeState:
        """:meth:`read_once` plus the re-sampling described in the module docstring.
        ``thresholds`` defaults to checks.toml's. ``job_minors``: before a job, only the GPUs
        with these device minor numbers (the job's) are re-sampled for processes and memory;
        None: every GPU (a whole-node check)."""
        if thresholds is None:
            from slurmkit.health.config import defaults

            thresholds = defaults()["thresholds"]
        state = self.read_once()
        from slurmkit.health.config import defaults as _d

        hw_mask = sum(_d()["clock_event_bits"].values())
        # clock event reasons
        for g in state.gpus:
            first = g.get("clock_event_reasons")
            if first is None or g.handle_rc != RC_SUCCESS:
                continue
            samples = [first]
            if (first & hw_mask) and not self.replay:
                for _ in range(int(thresholds["clock_event_samples"]) - 1):
                    sleep(float(thresholds["clock_event_interval_s"]))
                    s = self.sample_clock_events(g)
                    if s is None:
                        break
                    samples.append(s)
            g.put("clock_event_samples", samples)
        if before_job:
            limit = thresholds["memory_used_max_mib"]
            for g in state.gpus:
                if g.handle_rc != RC_SUCCESS or (job_minors is not None and g.minor_number not in job_minors):
                    continue
                first = self.sample_busy(g)
                if first.get("memory_used_mib") is None and not first.get("pids"):
                    continue
                samples = [first]
                while (len(samples) < int(thresholds["busy_tries"])
                       and (samples[-1].get("pids") or (samples[-1].get("memory_used_mib") or 0) > limit)):
                    if not self.replay:
                        sleep(float(thresholds["busy_interval_s"]))
                    samples.append(self.sample_busy(g))
                g.put("busy_samples", samples)
        return state

    def apply(self, action: Action) -> tuple[str, str]:
        """Carry out ``action`` (live) or log it as "would ..." (replay), and keep it in
        :attr:`acted`. Returns ``(log line, outcome)``: outcome ``SUCCESS``, :data:`RC_REPLAY`, or
        the NVML return code that refused it (``NOT_SUPPORTED``, ``NO_PERMISSION``, ...; the line
        then says what failed). Raises :class:`SourceError` for anything else (a bug)."""
        text = action.describe()
        self.__dict__.setdefault("acted", []).append(action)
        if self.replay:
            line = f"would {text} (replay of {self.name})"
            _info(line)
            return line, RC_REPLAY
        try:
            self._do(action)
        except ActionFailed as exc:
            _info(str(exc))
            return str(exc), exc.rc
        _info(text)
        return text, RC_SUCCESS

    def _do(self, action: Action) -> None:
        raise NotImplementedError


def hostname() -> str:
    """This node's short host name (``socket.gethostname()`` up to the first dot)."""
    import socket

    return socket.gethostname().split(".")[0]


class SnapshotSource(GpuSource):
    """Replay of a recorded file: slurmkit snapshot JSON, ``nvidia-smi -q -x`` XML or
    ``nvidia-smi -q`` text (detected from the content). Raises :class:`SourceError` naming the
    file (and line where known) for unreadable or malformed input."""

    replay = True

    def __init__(self, path: str | os.PathLike, node: str | None = None):
        self.path = os.fspath(path)
        self.name = self.path
        self.node = node

    def read_once(self) -> NodeState:
        """The capture, parsed anew on every call, so each caller gets a state of its own to
        annotate (a hook reads once: one parse, no copy)."""
        return load_capture(self.path, node=self.node)


def load_capture(path: str | os.PathLike, node: str | None = None) -> NodeState:
    """Read any supported capture into a NodeState (see :class:`SnapshotSource`)."""
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8", errors="strict") as fh:
            text = fh.read()
    except UnicodeDecodeError as exc:
        raise CaptureError(str(path), None, f"not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise CaptureError(str(path), None, exc.strerror or str(exc)) from None
    head = text.lstrip()[:200]
    if head.startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CaptureError(str(path), exc.lineno, f"bad JSON: {exc.msg} (column {exc.colno})") from None
        try:
            state = NodeState.from_json(data, source=f"snapshot:{path}", replay=True)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CaptureError(str(path), None, f"not a valid slurmkit snapshot: {exc}") from None
    elif head.startswith("<?xml") or head.startswith("<nvidia_smi_log"):
        from slurmkit.health.nvsmi import parse_xml

        state = parse_xml(text, str(path))
    elif "NVSMI LOG" in head or head.startswith("Timestamp"):
        from slurmkit.health.nvsmi import parse_text

        state = parse_text(text, str(path))
    else:
        from slurmkit.health.nvsmi import parse_error_output

        state = parse_error_output(text, str(path))  # nvidia-smi printed only its error: GPUs lost
        if state is None:
            raise CaptureError(str(path), 1, "not a slurmkit snapshot, nvidia-smi -q -x XML or nvidia-smi -q text "
                               "(nor nvidia-smi's own error output)")
    if node:
        state.node = node
    elif not state.node:
        state.node = os.path.splitext(os.path.basename(path))[0]
    return state
