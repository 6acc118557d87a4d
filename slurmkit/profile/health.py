"""The ``[health]`` section of a site profile as one frozen record: :class:`Health`.

Its own module so that the hooks can read it (through :mod:`slurmkit.profile.cache`) without
importing the rest of the profile model and its validator: only :mod:`slurmkit.records` is imported
(and :mod:`slurmkit.stampcache` when ``checks.toml`` is read: :func:`check_defaults`).
Validated by :func:`slurmkit.profile.validate.build`; interpreted by
:func:`slurmkit.health.config.load_config` (thresholds and check ids: ``health/checks.toml``).
"""

from __future__ import annotations

import os

from slurmkit.records import field, fields, record

#: The ``[health]`` keys that pin an expected value of the node (None: not pinned).
EXPECT_KEYS = ("expected_gpu_count", "driver_version", "vbios_version", "app_clock_graphics_mhz",
               "app_clock_mem_mhz", "power_limit_w", "mig", "nvlink_active_links", "fabric_manager",
               "gpudirect_rdma")


@record(frozen=True)
class Health:
    """``[health]``: how the health checks judge a node. Every default here is the one default.

    - ``mode``: enforce | observe (the hooks drain, or only log what they would drain; the hooks
      config's ``mode`` overrides it when set)
    - ``deadline_s``: total NVML deadline of one read (s; the hooks config's ``deadline_s``
      overrides it when set); ``per_call_deadline_s``: one NVML call's deadline (s)
    - ``expected_gpu_count``: GPUs the node must show (None: the node type's / gres.conf's count)
    - ``driver_version``, ``vbios_version``: pins (``nvmlSystemGetDriverVersion``,
      ``nvmlDeviceGetVbiosVersion``); a different value warns
    - ``app_clock_graphics_mhz``, ``app_clock_mem_mhz``: expected application clocks (MHz; None:
      the GPU's defaults, ``nvmlDeviceGetDefaultApplicationsClock``)
    - ``power_limit_w``: expected power limit (W; None: the GPU's default limit)
    - ``mig``: expected MIG mode (None: not checked); ``nvlink_active_links``: expected active
      NVLinks per GPU (None: the most any GPU of the node has)
    - ``fabric_manager``: the nodes have NVSwitches, so ``nv-fabricmanager`` must run (None: 8 or
      more GPUs all NVLinked to each other in the node type's matrix)
    - ``gpudirect_rdma``: GPUDirect RDMA is used, so ``nvidia_peermem`` (or ``nv_peer_mem``)
      must be loaded
    - ``ib_judge_other_nics``: a fault of an InfiniBand / RoCE / Ethernet NIC whose role is not
      ``compute`` (storage, management: port down, missing, slow) fails and drains like a compute
      HCA's; default: it warns (those NICs are judged either way)
    - ``active_check``: run the active check (DCGM ``dcgmi diag``) before slurmkit resumes a
      node it drained; the node comes back only when it passes (skipped where DCGM is absent)
    - ``dcgm_diag_level``: ``dcgmi diag -r`` level (1: seconds; 2-4 take minutes to hours)
    - ``active_timeout_s``: the active check's deadline (s); overrunning it is a fail. It must
      fit inside the 60 s slurmd allows HealthCheckProgram (below 60; default 45)
    - ``nccl_busbw_min_gbps``: with the active check, a node-local ``all_reduce_perf`` over the
      node's GPUs must reach this average bus bandwidth (GB/s; None: not run)
    - ``active_interval_s``: also run it on an idle, healthy node at most this often (s; 0: only
      before a resume)
    - ``baseline_xids``: what the XIDs of the first kernel-log read after install (the current
      boot's old ones, :mod:`slurmkit.health.kmsg`) do: ``log`` (logged and shown as a warn,
      never a drain) | ``drain`` (judged like new ones: a hardware XID drains)
    - ``thresholds``: overrides of ``checks.toml`` ``[thresholds]`` (name -> number)
    - ``checks``: check id -> false switches a check off (true: on)
    """

    mode: str = "enforce"
    deadline_s: float = 8.0
    per_call_deadline_s: float = 3.0
    expected_gpu_count: int | None = None
    driver_version: str | None = None
    vbios_version: str | None = None
    app_clock_graphics_mhz: int | None = None
    app_clock_mem_mhz: int | None = None
    power_limit_w: int | float | None = None
    mig: bool | None = None
    nvlink_active_links: int | None = None
    fabric_manager: bool | None = None
    gpudirect_rdma: bool | None = None
    ib_judge_other_nics: bool = False
    active_check: bool = True
    dcgm_diag_level: int = 1
    active_timeout_s: float = 45.0
    active_interval_s: float = 0.0
    nccl_busbw_min_gbps: float | None = None
    baseline_xids: str = "log"
    thresholds: dict[str, int | float] = field(default_factory=dict)
    checks: dict[str, bool] = field(default_factory=dict)

    @property
    def expect(self) -> dict:
        """The pinned expected values: {key of :data:`EXPECT_KEYS`: value} for those set."""
        return {k: getattr(self, k) for k in EXPECT_KEYS if getattr(self, k) is not None}

    def to_json(self) -> dict:
        """A JSON-ready dict of every field (the hooks' profile cache)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_json(cls, data: dict) -> "Health":
        """The :class:`Health` written by :meth:`to_json` (unknown keys: TypeError)."""
        return cls(**data)


def has_nvswitch(node_type) -> bool:
    """The derived default of ``[health] fabric_manager``: ``node_type`` (a profile NodeType) has
    8 or more GPUs, each NVLinked (``NV<n>`` in the matrix) to every other one."""
    gpus = getattr(node_type, "gpus", ()) or ()
    if len(gpus) < 8:
        return False
    return all(g.nvlinks_to(o.index) > 0 for g in gpus for o in gpus if o.index != g.index)


def expected_nvlinks(node_type) -> int | None:
    """Active NVLinks each GPU of ``node_type`` should have, from its matrix (``NV<n>`` tokens):
    behind NVSwitches (:func:`has_nvswitch`) every pair shows all of a GPU's links, so the most
    to any peer; direct links add up over the peers. The fewest over the GPUs; None when the
    matrix shows no NVLink."""
    gpus = getattr(node_type, "gpus", ()) or ()
    switch = has_nvswitch(node_type)
    per = []
    for g in gpus:
        links = [g.nvlinks_to(o.index) for o in gpus if o.index != g.index]
        per.append(max(links, default=0) if switch else sum(links))
    return min(per) if per and min(per) > 0 else None


#: The shipped check ids, thresholds and XID table: ``slurmkit/health/checks.toml``, beside the
#: checks that use them. Read here, below :mod:`slurmkit.health`, because the ``[health]``
#: section may switch any check off and override any threshold, so the profile validator
#: checks its keys against this file (:mod:`slurmkit.health.config` reads it through here too).
CHECKS_TOML = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "health", "checks.toml")


_DEFAULTS: dict | None = None


def check_defaults(cache_dir=None) -> dict:
    """The parsed ``checks.toml``: ``{"checks": {id: description}, "thresholds": {...},
    "clock_event_bits": {...}, "xid": {"names": {...}}}``,
    read once per process. ``cache_dir`` (the hooks' state directory): keep the parsed data
    there as JSON while the file is unchanged (:mod:`slurmkit.stampcache`), so a hook need not
    import ``tomllib`` on every job; the TOML file stays the one source."""
    global _DEFAULTS
    if _DEFAULTS is None:
        from slurmkit import stampcache

        cache = None if cache_dir is None else os.path.join(os.fspath(cache_dir), "checks-defaults.json")
        data = stampcache.read(cache, CHECKS_TOML) if cache is not None else None
        if data is None:
            import tomllib

            with open(CHECKS_TOML, "rb") as fh:
                data = tomllib.load(fh)
            if cache is not None:
                stampcache.write(cache, CHECKS_TOML, [CHECKS_TOML], data)
        _DEFAULTS = data
    return _DEFAULTS
