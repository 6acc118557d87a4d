"""A site's GPU clock and power policy, one frozen record: :class:`ClockPolicy`
(``[clock_policies.<name>]`` of a site profile).

A node type's policy (``node_types.<t>.clock_policy``) is its GPUs' resting state: what the
epilog puts back after every job. A partition's (``partitions.<p>.clock_policy``) is applied by
the prolog to the job's own GPUs for the job's run, over the resting state (settings the
partition's policy leaves out stay as they rest). Interpreted by :mod:`slurmkit.hooks.clock_policy`.

Its own module, like :mod:`slurmkit.profile.health`, so that the hooks read it (through
:mod:`slurmkit.profile.cache`) importing only :mod:`slurmkit.records`. Validated by
:func:`slurmkit.profile.validate.build`.
"""

from __future__ import annotations

from slurmkit.records import record

#: The settings a policy may give (each optional; at least one), in the order the hooks apply
#: them. The NVML call each one becomes is in :class:`ClockPolicy`.
SETTINGS = ("app_clock_mem_mhz", "app_clock_graphics_mhz", "locked_clocks_mhz", "locked_mem_clocks_mhz",
            "power_limit_w")


@record(frozen=True)
class ClockPolicy:
    """``[clock_policies.<name>]``: what a policy sets on a GPU. Every setting defaults to None
    (not set by this policy).

    - ``name``: the table's name (what the spool and the report call the policy)
    - ``app_clock_mem_mhz``, ``app_clock_graphics_mhz``: pinned application clocks (MHz, both or
      neither: ``nvmlDeviceSetApplicationsClocks(memory, graphics)``)
    - ``locked_clocks_mhz``: ``(min, max)`` GPU clock range (MHz,
      ``nvmlDeviceSetGpuLockedClocks``; Volta and later)
    - ``locked_mem_clocks_mhz``: ``(min, max)`` memory clock range (MHz,
      ``nvmlDeviceSetMemoryLockedClocks``; Ampere and later)
    - ``power_limit_w``: power management limit (W, ``nvmlDeviceSetPowerManagementLimit``, which
      takes mW)
    """

    name: str
    app_clock_mem_mhz: int | None = None
    app_clock_graphics_mhz: int | None = None
    locked_clocks_mhz: tuple[int, int] | None = None
    locked_mem_clocks_mhz: tuple[int, int] | None = None
    power_limit_w: int | float | None = None

    @property
    def app_clocks_mhz(self) -> tuple[int, int] | None:
        """``(memory MHz, graphics MHz)`` when the policy pins application clocks, else None."""
        if self.app_clock_mem_mhz is None or self.app_clock_graphics_mhz is None:
            return None
        return (self.app_clock_mem_mhz, self.app_clock_graphics_mhz)

    def settings(self) -> dict:
        """``{setting: value}`` of the settings this policy gives (ranges as ``[min, max]``
        lists), in :data:`SETTINGS` order: JSON-ready."""
        out = {}
        for k in SETTINGS:
            v = getattr(self, k)
            if v is not None:
                out[k] = list(v) if isinstance(v, tuple) else v
        return out

    def to_json(self) -> dict:
        """``{"name": ..., **settings()}`` (the hooks' profile cache)."""
        return {"name": self.name, **self.settings()}

    @classmethod
    def from_json(cls, data: dict) -> "ClockPolicy":
        """The :class:`ClockPolicy` written by :meth:`to_json` (unknown keys: TypeError)."""
        d = dict(data)
        for k in ("locked_clocks_mhz", "locked_mem_clocks_mhz"):
            if d.get(k) is not None:
                d[k] = tuple(d[k])
        return cls(**d)
