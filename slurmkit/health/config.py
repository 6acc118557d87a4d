"""Health-check configuration: the shipped defaults in ``checks.toml`` merged with a site
profile's ``[health]`` table.

``[health]`` keys read here (all optional)::

    mode = "enforce"                 # enforce | observe (used by the hooks)
    deadline_s = 8.0                 # total NVML deadline (s)
    per_call_deadline_s = 3.0        # one NVML call's deadline (s)
    expected_gpu_count = 8           # else the node type's gpu_count / the local gres.conf
    driver_version = "535.161.08"    # pin -> driver_version check warns when different
    vbios_version = "96.00.74.00.0D" # pin -> vbios_version check
    app_clock_graphics_mhz = 1980    # expected application clocks (else the GPU's defaults)
    app_clock_mem_mhz = 2619
    power_limit_w = 700              # expected power limit (else the GPU's default limit)
    mig = false                      # expected MIG mode
    nvlink_active_links = 18         # expected active NVLinks per GPU
    [health.thresholds]              # overrides of checks.toml [thresholds]
    [health.checks]                  # <check id> = false switches a check off

Pure: :func:`load_config` takes plain dicts; :func:`defaults` reads the package data file once.
"""

from __future__ import annotations

from slurmkit.errors import InputError

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

DATA_FILE = Path(__file__).with_name("checks.toml")

_EXPECT_KEYS = {
    "expected_gpu_count": int, "driver_version": str, "vbios_version": str,
    "app_clock_graphics_mhz": int, "app_clock_mem_mhz": int, "power_limit_w": (int, float),
    "mig": bool, "nvlink_active_links": int,
}
_OTHER_KEYS = {"mode", "deadline_s", "per_call_deadline_s", "thresholds", "checks"}


class ConfigError(InputError):
    """A bad ``[health]`` value: ``file`` (the profile), ``line`` (None), ``message``, ``key``
    (the dotted key, ``health.thresholds.x``)."""


@lru_cache(maxsize=1)
def defaults() -> dict:
    """The parsed ``checks.toml``: ``{"checks": {id: description}, "thresholds": {...},
    "clock_event_bits": {...}, "xid": {"ignore": [...], "fail": [...], "names": {...}}}``."""
    import tomllib

    with open(DATA_FILE, "rb") as fh:
        return tomllib.load(fh)


def check_ids() -> list[str]:
    """Every check id, in the data file's order."""
    return list(defaults()["checks"])


@dataclass(frozen=True)
class HealthConfig:
    """Thresholds, switches and expected values for :func:`slurmkit.health.checks.run_checks`."""

    thresholds: dict[str, Any]
    enabled: dict[str, bool]
    expect: dict[str, Any] = field(default_factory=dict)
    mode: str = "enforce"
    deadline_s: float = 8.0
    per_call_deadline_s: float = 3.0
    xid_ignore: frozenset = frozenset()
    xid_fail: frozenset = frozenset()
    xid_names: dict[int, str] = field(default_factory=dict)
    clock_event_bits: dict[str, int] = field(default_factory=dict)

    def t(self, name: str):
        """A threshold by name (KeyError for a typo in code, never silently None)."""
        return self.thresholds[name]


def load_config(health: Mapping | None = None, *, gpu_count: int | None = None,
                file: str | None = None) -> HealthConfig:
    """Merge a profile's ``[health]`` table (a plain dict) over the shipped defaults.

    ``gpu_count`` (the node type's / gres.conf's GPU count) fills ``expected_gpu_count`` when
    the table does not set it. Raises :class:`ConfigError` naming the key for unknown keys,
    unknown check ids and values of the wrong type.
    """
    base = defaults()
    health = dict(health or {})
    thresholds = dict(base["thresholds"])
    for k, v in (health.get("thresholds") or {}).items():
        if k not in thresholds:
            raise ConfigError(file, None, f"unknown threshold (known: {', '.join(thresholds)})", f"health.thresholds.{k}")
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ConfigError(file, None, f"want a number, got {v!r}", f"health.thresholds.{k}")
        thresholds[k] = v
    enabled = {cid: True for cid in base["checks"]}
    for k, v in (health.get("checks") or {}).items():
        if k not in enabled:
            raise ConfigError(file, None, "unknown check id", f"health.checks.{k}")
        if not isinstance(v, bool):
            raise ConfigError(file, None, f"want true or false, got {v!r}", f"health.checks.{k}")
        enabled[k] = v
    expect: dict[str, Any] = {}
    for k, v in health.items():
        if k in _OTHER_KEYS:
            continue
        if k not in _EXPECT_KEYS:
            raise ConfigError(file, None, "unknown key", f"health.{k}")
        want = _EXPECT_KEYS[k]
        if (isinstance(v, bool) and want is not bool) or not isinstance(v, want):
            raise ConfigError(file, None, f"wrong type: {v!r}", f"health.{k}")
        expect[k] = v
    if "expected_gpu_count" not in expect and gpu_count is not None:
        expect["expected_gpu_count"] = int(gpu_count)
    mode = health.get("mode", "enforce")
    if mode not in ("enforce", "observe"):
        raise ConfigError(file, None, f"want enforce or observe, got {mode!r}", "health.mode")
    xid = base["xid"]
    return HealthConfig(
        thresholds=thresholds, enabled=enabled, expect=expect, mode=mode,
        deadline_s=float(health.get("deadline_s", 8.0)),
        per_call_deadline_s=float(health.get("per_call_deadline_s", 3.0)),
        xid_ignore=frozenset(xid["ignore"]), xid_fail=frozenset(xid["fail"]),
        xid_names={int(k): v for k, v in xid.get("names", {}).items()},
        clock_event_bits=dict(base["clock_event_bits"]),
    )
