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


class ConfigError(ValueError):
    """A bad ``[health]`` value: ``key`` is the dotted key (``health.thresholds.x``)."""

    def __init__(self, key: str, message: str, file: str | None = None):
        self.key, self.file = key, file
        where = f"{file}: " if file else ""
        super().__init__(f"{where}{key}: {message}")


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
            raise ConfigError(f"health.thresholds.{k}", f"unknown threshold (known: {', '.join(thresholds)})", file)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ConfigError(f"health.thresholds.{k}", f"want a number, got {v!r}", file)
        thresholds[k] = v
    enabled = {cid: True for cid in base["checks"]}
    for k, v in (health.get("checks") or {}).items():
        if k not in enabled:
            raise ConfigError(f"health.checks.{k}", "unknown check id", file)
        if not isinstance(v, bool):
            raise ConfigError(f"health.checks.{k}", f"want true or false, got {v!r}", file)
        enabled[k] = v
    expect: dict[str, Any] = {}
    for k, v in health.items():
        if k in _OTHER_KEYS:
            continue
        if k not in _EXPECT_KEYS:
            raise ConfigError(f"health.{k}", "unknown key", file)
        want = _EXPECT_KEYS[k]
        if (isinstance(v, bool) and want is not bool) or not isinstance(v, want):
            raise ConfigError(f"health.{k}", f"wrong type: {v!r}", file)
        expect[k] = v
    if "expected_gpu_count" not in expect and gpu_count is not None:
        expect["expected_gpu_count"] = int(gpu_count)
    mode = health.get("mode", "enforce")
    if mode not in ("enforce", "observe"):
        raise ConfigError("health.mode", f"want enforce or observe, got {mode!r}", file)
    xid = base["xid"]
    return HealthConfig(
        thresholds=thresholds, enabled=enabled, expect=expect, mode=mode,
        deadline_s=float(health.get("deadline_s", 8.0)),
        per_call_deadline_s=float(health.get("per_call_deadline_s", 3.0)),
        xid_ignore=frozenset(xid["ignore"]), xid_fail=frozenset(xid["fail"]),
        xid_names={int(k): v for k, v in xid.get("names", {}).items()},
        clock_event_bits=dict(base["clock_event_bits"]),
    )
