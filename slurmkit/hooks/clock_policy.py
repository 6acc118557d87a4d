"""The hooks' side of the site's clock and power policy (:class:`~slurmkit.profile.clock_policy.ClockPolicy`):
what the prolog sets for a job, what the epilog puts back, and the record of the policy a job
ran under (:class:`JobPolicy`, kept in the job's spool line).

- **Prolog** (:func:`plan_job`): the job's partition's ``clock_policy`` (SLURM_JOB_PARTITION) is
  set on the job's own GPUs only (SLURM_JOB_GPUS through gres.conf), each setting the policy
  gives, nothing else. Not on a node whose GPUs jobs share by design (gres/shard, MPS): there a
  job's policy would change its neighbours' GPUs too. A partition without a policy: nothing is
  set, the job runs under its node type's resting policy.
- **Epilog** (:func:`restore_specs`): the job's GPUs go back to the resting state: the node
  type's ``clock_policy``, else the site's ``[health]`` pins, else the GPU's defaults
  (``nvmlDeviceResetApplicationsClocks``, ``nvmlDeviceResetGpuLockedClocks``, the default power
  limit). Never NVML's defaults over a value the site gives.
- A set call NVML refuses (NOT_SUPPORTED, NO_PERMISSION, ...) is slurmkit's own trouble (logged,
  counted), never a drain and never a failed prolog: the record says "requested, not applied"
  and why. A reset NVML answers NOT_SUPPORTED / FUNCTION_NOT_FOUND has nothing to reset (the
  GPU or driver has no such clock lock): logged only.

Pure functions over plain data; only :mod:`slurmkit.records` is imported (the prolog loads this module).
"""

from __future__ import annotations

from slurmkit.records import field, record

#: :attr:`JobPolicy.status` values.
RESTING, APPLIED, PARTLY_APPLIED, NOT_APPLIED = "resting", "applied", "partly applied", "not applied"
STATUSES = (RESTING, APPLIED, PARTLY_APPLIED, NOT_APPLIED)
#: The report's line for jobs whose spool record carries no policy (no record, an older line).
NONE_RECORDED = "none recorded"
#: The name of the resting state of a node whose node type names no policy.
NONE_CONFIGURED = "none configured"

#: Action kind -> the policy settings it sets (:data:`slurmkit.profile.clock_policy.SETTINGS`).
SETS = {"set_app_clocks": ("app_clock_mem_mhz", "app_clock_graphics_mhz"),
        "set_locked_clocks": ("locked_clocks_mhz",), "set_mem_locked_clocks": ("locked_mem_clocks_mhz",),
        "set_power_limit": ("power_limit_w",)}
#: An action's outcome (:func:`slurmkit.hooks.flows._act`) in words, when it did not succeed.
OUTCOME_WORDS = {"OBSERVE": "observe mode", "REPLAY": "replayed snapshot: nothing set on the host",
                 "TIMEOUT": "NVML timed out", "ERROR": "slurmkit's own trouble"}


def set_specs(policy, nvml_index: int) -> list[tuple]:
    """The action specs ``(kind, NVML index, None, value)`` that set ``policy``'s settings on
    one GPU, in :data:`~slurmkit.profile.clock_policy.SETTINGS` order: application clocks
    ``(memory, graphics)`` MHz, locked GPU clocks / locked memory clocks ``(min, max)`` MHz,
    power limit W."""
    out = []
    if policy.app_clocks_mhz is not None:
        out.append(("set_app_clocks", nvml_index, None, policy.app_clocks_mhz))
    if policy.locked_clocks_mhz is not None:
        out.append(("set_locked_clocks", nvml_index, None, tuple(policy.locked_clocks_mhz)))
    if policy.locked_mem_clocks_mhz is not None:
        out.append(("set_mem_locked_clocks", nvml_index, None, tuple(policy.locked_mem_clocks_mhz)))
    if policy.power_limit_w is not None:
        out.append(("set_power_limit", nvml_index, None, float(policy.power_limit_w)))
    return out


def plan_job(policy, gpus, shared: bool) -> tuple[list[tuple[int, tuple]], str | None]:
    """What the prolog sets for a job: ``([(Slurm GPU index, action spec)], reason)``.

    ``policy``: the job's partition's :class:`~slurmkit.profile.clock_policy.ClockPolicy` (None:
    nothing to set); ``gpus``: the job's GPUs (``slurmkit.hooks.gres.JobGpu``: ``index``,
    ``nvml_index``); ``shared``: the node's GPUs are shared by design (gres/shard, MPS).
    ``reason`` says why a policy is not set at all (shared GPUs, no GPU of the job known to
    NVML); None otherwise."""
    if policy is None:
        return [], None
    if shared:
        return [], "the node's GPUs are shared between jobs (gres/shard or MPS): a job's policy is not set on them"
    plan = [(g.index, spec) for g in gpus if g.nvml_index is not None for spec in set_specs(policy, g.nvml_index)]
    if not plan:
        return [], "none of the job's GPUs is known to NVML"
    return plan, None


def restore_specs(nvml_index: int, gpu, expect: dict, resting, reset_mem_locked: bool) -> list[tuple]:
    """The epilog's action specs ``(kind, NVML index, None, value)`` that put one GPU back to
    its resting state.

    ``gpu``: the GPU's state at the epilog (``power_limit_w``, ``default_power_limit_w``: W,
    ``nvmlDeviceGetPowerManagementLimit`` / ``...DefaultLimit``); ``expect``: the health
    config's pinned values (``[health]`` with the resting policy's application clocks and
    power limit over them: :meth:`slurmkit.hooks.flows.Run.setup`); ``resting``: the node type's
    :class:`~slurmkit.profile.clock_policy.ClockPolicy` (None: none); ``reset_mem_locked``: the
    job's policy locked memory clocks (they are reset only then: GPUs before Ampere have none).

    Application clocks: set to the pinned ones, else reset; locked GPU clocks: set to the
    resting range, else reset; locked memory clocks: set to the resting range, else reset when
    ``reset_mem_locked``; power limit: set to the pinned one, else the default, when it differs."""
    specs = []
    app = (expect.get("app_clock_mem_mhz"), expect.get("app_clock_graphics_mhz"))
    if all(v is not None for v in app):
        specs.append(("set_app_clocks", nvml_index, None, tuple(int(v) for v in app)))
    else:
        specs.append(("reset_app_clocks", nvml_index, None, None))
    if resting is not None and resting.locked_clocks_mhz is not None:
        specs.append(("set_locked_clocks", nvml_index, None, tuple(resting.locked_clocks_mhz)))
    else:
        specs.append(("reset_locked_clocks", nvml_index, None, None))
    if resting is not None and resting.locked_mem_clocks_mhz is not None:
        specs.append(("set_mem_locked_clocks", nvml_index, None, tuple(resting.locked_mem_clocks_mhz)))
    elif reset_mem_locked:
        specs.append(("reset_mem_locked_clocks", nvml_index, None, None))
    want = expect.get("power_limit_w") or gpu.get("default_power_limit_w")
    if want is not None and gpu.get("power_limit_w") != want:
        specs.append(("set_power_limit", nvml_index, None, float(want)))
    return specs


def _int_keys(d, what: str) -> dict:
    if d is None:
        return {}
    if not isinstance(d, dict) or not all(isinstance(v, dict) for v in d.values()):
        raise ValueError(f"policy.{what}: want {{GPU index: object}}")
    try:
        return {int(k): dict(v) for k, v in d.items()}
    except (TypeError, ValueError):
        raise ValueError(f"policy.{what}: keys must be GPU indexes") from None


@record
class JobPolicy:
    """The clock policy a job ran under on one node (the ``policy`` of its spool line).

    - ``name``: the policy's name (``[clock_policies.<name>]``); None: the job's node type names
      no resting policy and its partition none
    - ``origin``: where it came from: ``partition <p>`` (the prolog set it), ``node type <t>``
      (the resting state), ``none``
    - ``status``: ``resting`` (nothing set for the job: the node's resting state, as the last
      epilog left it), ``applied`` (every setting on every job GPU), ``partly applied``,
      ``not applied`` (``reason`` says why: observe mode, a replayed snapshot, shared GPUs, NVML
      refused)
    - ``requested``: the policy's settings (``{setting: value}``: MHz, ``[min, max]`` MHz, W)
    - ``applied``: Slurm GPU index -> the settings NVML accepted on that GPU
    - ``not_applied``: Slurm GPU index -> {setting: why} (the NVML return code, or
      :data:`OUTCOME_WORDS`)
    - ``reason``: why the policy is not (fully) applied; None when it is
    """

    name: str | None = None
    origin: str = "none"
    status: str = RESTING
    requested: dict = field(default_factory=dict)
    applied: dict[int, dict] = field(default_factory=dict)
    not_applied: dict[int, dict] = field(default_factory=dict)
    reason: str | None = None

    @property
    def label(self) -> str:
        """What the report groups the job under: the policy's name (:data:`NONE_CONFIGURED`
        when it has none), with the status in brackets unless it is resting or applied
        (``steady (not applied)``): a job whose policy was not set did not run under it."""
        name = self.name or NONE_CONFIGURED
        return name if self.status in (RESTING, APPLIED) else f"{name} ({self.status})"

    def to_json(self) -> dict:
        """The spool line's ``policy`` object (GPU indexes as strings, as JSON objects are)."""
        return {"name": self.name, "origin": self.origin, "status": self.status, "requested": dict(self.requested),
                "applied": {str(k): v for k, v in sorted(self.applied.items())},
                "not_applied": {str(k): v for k, v in sorted(self.not_applied.items())}, "reason": self.reason}

    @classmethod
    def from_json(cls, d) -> "JobPolicy":
        """Inverse of :meth:`to_json`; missing keys read as their defaults. Raises ValueError for
        something that is not a policy object."""
        if not isinstance(d, dict):
            raise ValueError("policy: want an object")
        name, status, reason = d.get("name"), d.get("status"), d.get("reason")
        req = d.get("requested")
        return cls(name=None if name is None else str(name), origin=str(d.get("origin") or "none"),
                   status=status if status in STATUSES else NOT_APPLIED,
                   requested=dict(req) if isinstance(req, dict) else {},
                   applied=_int_keys(d.get("applied"), "applied"),
                   not_applied=_int_keys(d.get("not_applied"), "not_applied"),
                   reason=None if reason is None else str(reason))


def job_record(policies: dict, partition: str | None, plan: list[tuple[int, tuple]], outcomes: list[str],
               reason: str | None = None) -> JobPolicy:
    """The :class:`JobPolicy` of a job from the prolog's :func:`plan_job` and what became of
    each of its actions (``outcomes``, in order: ``SUCCESS``, ``OBSERVE``, ``REPLAY``,
    ``TIMEOUT``, ``ERROR`` or an NVML return code). ``policies``: as
    :func:`slurmkit.profile.cache.load_clock_policies` gives them (``node_type``, ``resting``,
    ``job``); ``partition``: SLURM_JOB_PARTITION."""
    job = policies.get("job")
    if job is None:
        rest = policies.get("resting")
        nt = policies.get("node_type")
        return JobPolicy(name=rest.name if rest else None, origin=f"node type {nt}" if rest else "none",
                         status=RESTING, requested=rest.settings() if rest else {})
    rec = JobPolicy(name=job.name, origin=f"partition {partition}", requested=job.settings())
    why = set()
    for (index, (kind, _gi, _pid, _value)), outcome in zip(plan, outcomes):
        keys = SETS[kind]
        if outcome == "SUCCESS":
            rec.applied.setdefault(index, {}).update({k: rec.requested[k] for k in keys})
        else:
            word = OUTCOME_WORDS.get(outcome, outcome)
            rec.not_applied.setdefault(index, {}).update({k: word for k in keys})
            why.add(word)
    if reason:
        why.add(reason)
    if rec.applied and not rec.not_applied and not reason:
        rec.status = APPLIED
    else:
        rec.status = PARTLY_APPLIED if rec.applied else NOT_APPLIED
        rec.reason = f"requested, {rec.status}: " + "; ".join(sorted(why))
    return rec


#: The policy settings the health checks compare with what NVML reports (``app_clocks``,
#: ``power_limit``); locked clocks are not read back.
CHECKED = ("app_clock_mem_mhz", "app_clock_graphics_mhz", "power_limit_w")


def running_expect(records) -> dict[int, dict]:
    """What the checks should expect on the GPUs of jobs that run under a partition's policy:
    ``{NVML index: {setting: value}}`` (settings of :data:`CHECKED`, MHz / W) from the prolog
    records ``records`` (``[(job id, JobStart)]``, :func:`slurmkit.hooks.nodestate.job_records`),
    the settings NVML accepted on each of the job's GPUs (``policy.applied``, by Slurm GPU index,
    matched to the record's ``nvml_index``). A record of an older version, a damaged policy or a
    GPU without an NVML index gives nothing: the resting values are expected there."""
    out: dict[int, dict] = {}
    for _job, rec in records:
        if not isinstance(rec.policy, dict):
            continue
        try:
            pol = JobPolicy.from_json(rec.policy)
        except ValueError:
            continue
        for g in rec.gpus:
            got = {k: v for k, v in pol.applied.get(g.index, {}).items() if k in CHECKED}
            if got and g.nvml_index is not None:
                out.setdefault(g.nvml_index, {}).update(got)
    return out
