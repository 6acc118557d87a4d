"""The prolog, epilog and healthcheck flows.

Contract every flow keeps:

- exit 0 or 1 only; 1 only from the prolog on hardware evidence in ``enforce`` mode (Slurm
  requeues the job: install sets ``nohold_on_prolog_fail``), or from the epilog when the evidence
  could not be recorded by a drain of our own;
- hardware evidence (a check ``fail``, or NVML hanging: :class:`NvmlTimeout`) drains the node
  with ``slurmkit: <check> GPU<i> <PCI bus id>: <meaning>`` / ``slurmkit: nvml-timeout``, unless another
  party owns its reason (:mod:`slurmkit.hooks.drain`); ``observe`` mode logs what it would drain;
- slurmkit's own trouble (unreadable config, bad snapshot, scontrol missing or hanging, spool disk full, a bug) is logged and counted
  (``slurmkit_hook_own_errors_total``), never a drain, and never a non-zero exit by itself;
- a healthy run makes no Slurm RPC: expected GPUs come from the local gres.conf; scontrol runs
  only to drain, or to resume a node slurmkit drained.

Outcomes of the fault matrix (tested in tests/hooks/test_hooks_faults.py):

====================================  =====================================================
NVML library missing, GPU node        ``nvml_init`` fails -> drain, prolog exit 1
no GPUs expected (CPU-only node)      GPU checks skipped: an info line, exit 0, not counted
gres.conf unreadable / missing while  own trouble (counted, logged); the GPU checks run against
slurm.conf's Gres= gives GPUs         Gres= and NVML, never as "no GPUs expected"
NVML hangs                            worker killed at the deadline -> drain ``nvml-timeout``
permission denied (config, state)     own trouble -> exit 0 (counted where the state dir works)
corrupt snapshot                      own trouble -> exit 0, counted, no drain
scontrol missing / hanging            drain impossible: logged + counted; prolog still exits 1
                                      on evidence (Slurm then drains with "Prolog error");
                                      bounded by ``scontrol_timeout_s``
spool disk full                       own trouble -> exit 0, counted; no partial line left
====================================  =====================================================
"""

from __future__ import annotations

import os
import time

from slurmkit.hooks import nodestate
from slurmkit.hooks.config import HookConfig
from slurmkit.records import field, record

PROLOG, EPILOG, HEALTHCHECK = "prolog", "epilog", "healthcheck"
#: What the whole HealthCheckProgram may take (s): slurmd kills it at 60 s
#: (:data:`slurmkit.profile.validate.SLURM_HEALTHCHECK_KILL_S`); 5 s are kept for the shell, the
#: interpreter's start and the kill of a chained program. The installed shim gives a chained
#: program only what is left of it; slurmkit's active check is cut to its share (:meth:`Run.time_left`).
HEALTHCHECK_BUDGET_S = 55
NVML_TIMEOUT_REASON = "slurmkit: nvml-timeout"


@record
class Verdict:
    """What a hook run found and did on the node: ``results`` (CheckResult list of the checks),
    ``own_errors`` (messages of slurmkit's own trouble), ``drain_reason`` (the reason it drains
    for, or None), ``drained`` (True once scontrol drained the node), ``resumed`` (the drain
    reason of a node this run resumed), ``kept`` (another party's current reason this run left
    alone), ``observed`` (observe mode: action kind -> how many it would have done)."""

    results: list = field(default_factory=list)
    own_errors: list = field(default_factory=list)
    drain_reason: str | None = None
    drained: bool = False
    resumed: str | None = None
    kept: str | None = None
    observed: dict = field(default_factory=dict)


@record
class NodeGpus:
    """The node's GPUs as gres.conf gives them: ``files`` (one ``File=`` per Slurm GPU index,
    None for an AutoDetect GPU; None when gres.conf was not read), ``shared`` (gres/shard or MPS
    on the node: jobs share GPUs by design), ``gpuless`` (no GPUs expected: the GPU checks were
    skipped), ``job_gpus`` (the job's GPUs mapped to NVML, ``gres.JobGpu`` list, worked out once
    per run by :meth:`Run.job_gpus`), ``autodetect`` (gres.conf's ``AutoDetect=`` for the node,
    lower case, None when none: how slurmd ordered the None entries), ``whole`` and
    ``mig_instances`` (the GPUs of no MIG instance, and the MIG instances gres.conf lists:
    :func:`slurmkit.hooks.gres.node_mig_instances`; expected GPUs are counted in physical GPUs)."""

    files: list | None = None
    autodetect: str | None = None
    whole: int = 0
    mig_instances: list = field(default_factory=list)
    shared: bool = False
    gpuless: bool = False
    job_gpus: list | None = None


@record
class Judging:
    """How the node is judged: ``health`` (the profile's ``[health]`` section,
    :class:`slurmkit.profile.health.Health`), ``hc`` (the checks' config,
    :func:`slurmkit.health.config.load_config`), ``policies`` (the clock policies: the node
    type's resting one and the job's partition's, :func:`slurmkit.profile.cache.load_clock_policies`;
    all None without a profile), ``profile_unknown`` (the site profile is unreadable and was
    never read good)."""

    health: object = None
    hc: object = None
    policies: dict = field(default_factory=lambda: {"node_type": None, "resting": None, "job": None})
    profile_unknown: bool = False


@record
class KernelLogScope:
    """Which part of the kernel log a run reads and whose its Xids are: ``cursor_path`` (the
    epilog's per-job kernel-log cursor; None: the hook's own), ``job_window`` (the epilog's own
    job, :class:`slurmkit.hooks.attribution.JobWindow`, its record already taken), ``xid_jobs``
    (per ``state.xids`` line: the job ids it is attributed to)."""

    cursor_path: str | None = None
    job_window: object = None
    xid_jobs: list = field(default_factory=list)


class Run:
    """One hook run: its inputs (``hook``, ``node``, ``env``, ``cfg``, ``log``), the GPU state it
    read (``state``, None until read) and its named pieces: ``verdict`` (:class:`Verdict`: what it
    found and did), ``node_gpus`` (:class:`NodeGpus`: gres.conf's view of the node), ``judging``
    (:class:`Judging`: profile and checks' config), ``kmsg`` (:class:`KernelLogScope`)."""

    def __init__(self, hook: str, node: str, env, cfg: HookConfig, log):
        self.hook, self.node, self.env, self.cfg, self.log = hook, node, env, cfg, log
        self.state = None
        self.verdict = Verdict()
        self.node_gpus = NodeGpus()
        self.judging = Judging()
        self.kmsg = KernelLogScope()
        self._confs = None
        self.t0 = time.monotonic()

    def time_left(self) -> float:
        """Seconds left of this health-check run's :data:`HEALTHCHECK_BUDGET_S` (s): the budget
        less the time since the run began (``time.monotonic``; the scontrol call that may follow
        an active check takes milliseconds, and fits slurmd's last 5 s). Other hooks: infinite
        (their bound is PrologEpilogTimeout)."""
        if self.hook != HEALTHCHECK:
            return float("inf")
        return HEALTHCHECK_BUDGET_S - (time.monotonic() - self.t0)

    # ---- helpers -----------------------------------------------------------------------------
    def own_error(self, msg: str) -> None:
        self.verdict.own_errors.append(msg)
        self.log.error(f"slurmkit's own trouble (no drain): {msg}")

    def save_health(self, h) -> None:
        """Write the node's ``health.json`` (:func:`slurmkit.hooks.nodestate.save_health`), best
        effort: a state directory that cannot be written (read-only, full) is own trouble, said
        and counted; the judgement and the drain already happened."""
        try:
            nodestate.save_health(self.cfg.state_dir, self.node, h)
        except OSError as exc:
            self.own_error(f"cannot write the node's health state under {self.cfg.state_dir}: {exc.strerror or exc}")

    @property
    def confs(self):
        """The slurm.conf and gres.conf this node's slurmd reads
        (:func:`slurmkit.hooks.confpaths.locate`; worked out once per run)."""
        if self._confs is None:
            from slurmkit.hooks.confpaths import locate

            self._confs = locate(self.env, self.cfg.slurm_conf, self.cfg.gres_conf, self.cfg.conf_cache, self.node)
        return self._confs

    @property
    def slurm_conf(self) -> str:
        """The slurm.conf scontrol and the ``Gres=`` reader are given: the one found
        (:attr:`confs`), else ``SLURM_CONF``, else the hooks config's."""
        return self.confs.slurm_conf or self.env.get("SLURM_CONF") or str(self.cfg.slurm_conf)

    @property
    def source_spec(self) -> str:
        snap = self.cfg.snapshot_for(self.node)
        return str(snap) if snap else "live"

    def load_gres(self) -> bool:
        """Fill :attr:`node_gpus` from gres.conf, or from slurm.conf's ``Gres=`` when gres.conf
        cannot be read or lists no GPU for the node (:mod:`slurmkit.hooks.confpaths` finds
        both). False (own trouble logged) when neither can tell which GPUs the node has."""
        from slurmkit.hooks import gres

        confs = self.confs
        if self.cfg.gres_conf and confs.gres_conf != self.cfg.gres_conf:
            # (the one the config names must be there; the checks go on with the one slurmd reads)
            self.own_error(f"{self.cfg.gres_conf}: no such file (the hooks config's gres_conf)"
                           + (f"; reading {confs.gres_conf}, beside the slurm.conf slurmd reads" if confs.gres_conf
                              else ""))
        read: list = []

        def conf_gres():  # slurm.conf read once, when a reader needs it
            if not read:
                read.append(gres.slurm_conf_gres(self.slurm_conf, self.node))
            return read[0]

        try:  # AutoDetect: how many GPUs comes from slurm.conf's Gres= (read only then)
            path, lines, files, problem = confs.gres_conf, [], None, None
            if path is None:
                problem = f"no gres.conf (looked at {', '.join(confs.looked_gres)})"
            else:
                try:
                    lines = gres.load_gres_conf(path)
                    files = gres.node_gpu_files(lines, self.node, path, slurm_gres=conf_gres)
                except (OSError, gres.GresError) as exc:
                    problem = str(exc) if isinstance(exc, gres.GresError) else f"{path}: {exc.strerror or exc}"
            if problem is not None or files is None:
                want = self._slurm_conf_gpus()
                if isinstance(want, tuple):  # slurm.conf gives the node GPUs: judged by Gres= and NVML
                    self.own_error(f"{problem or f'{path}: lists no GPU for {self.node}'}, while "
                                   f"{confs.slurm_conf} gives {self.node} {want[0]}: checking its {want[1]} GPUs "
                                   "against Gres= and NVML (Slurm's GPU index taken as NVML's order)")
                    lines = gres.slurm_conf_only(self.slurm_conf)
                    files = gres.node_gpu_files(lines, self.node, self.slurm_conf, slurm_gres=conf_gres)
                elif problem is not None and (path is not None or want is not None):
                    self.own_error(problem + (f"; {want}" if want else ""))
                    return False
            self.node_gpus.files = files
            self.node_gpus.whole, self.node_gpus.mig_instances = gres.node_mig_instances(lines, self.node,
                                                                                         slurm_gres=conf_gres)
            self.node_gpus.shared = gres.node_shares_gpus(lines, self.node)
            self.node_gpus.autodetect = gres.autodetect(lines, self.node)
        except (OSError, gres.GresError) as exc:
            self.own_error(str(exc))
            return False
        return True

    def setup(self) -> bool:
        """Load gres.conf and the health config. False (own trouble logged) when unusable."""
        if not self.load_gres():
            return False
        from slurmkit.profile.health import Health
        from slurmkit.records import replace

        health, facts = Health(), None
        if self.cfg.profile:
            from slurmkit.errors import InputError
            from slurmkit.profile.cache import load_clock_policies, load_for_node

            part = self.env.get("SLURM_JOB_PARTITION")
            try:  # cached by file stamps in the state dir; any change reloads through load_profile
                health, facts = load_for_node(self.cfg.profile, self.cfg.state_dir, self.node)
                self.judging.policies = load_clock_policies(self.cfg.profile, self.cfg.state_dir, self.node, part)
            except InputError as exc:
                # a typo in the shared profile must not switch every node's checks off: judge
                # with the last profile that loaded, else with the defaults (no node type)
                try:
                    health, facts = load_for_node(self.cfg.profile, self.cfg.state_dir, self.node, last_good=True)
                    self.judging.policies = load_clock_policies(self.cfg.profile, self.cfg.state_dir, self.node, part,
                                                        last_good=True)
                    self.own_error(f"{exc}: checking with the last site profile that loaded")
                except LookupError:
                    self.judging.profile_unknown = True
                    self.own_error(f"{exc}: no earlier good load of it: checking with the defaults "
                                   "(no node type; clocks and power limit left as they are)")
        rest = self.judging.policies["resting"]
        if rest is not None:  # the node type's resting policy is what its GPUs are expected to show
            pins = {k: getattr(rest, k) for k in ("app_clock_mem_mhz", "app_clock_graphics_mhz", "power_limit_w")
                    if getattr(rest, k) is not None}
            health = replace(health, **pins) if pins else health
        self.judging.health = health
        self.cfg = self.cfg.over_profile(health)  # the hooks config's mode / deadline_s win when set

        from slurmkit.health.config import defaults, load_config

        defaults(self.cfg.state_dir)  # checks.toml, kept as JSON in the state dir while unchanged

        gpus = len(self.node_gpus.files or [])
        if self.node_gpus.mig_instances:  # physical GPUs: a MIG instance is not a GPU
            from slurmkit.health.mig import physical_gpu_count

            gpus = physical_gpu_count(self.node_gpus.whole, self.node_gpus.mig_instances)
        if not gpus:  # a node whose gres.conf lists no GPU expects none, whatever the site-wide value
            health = replace(health, expected_gpu_count=None)
        self.judging.hc = load_config(health, gpu_count=gpus, checks=self.cfg.checks,
                              nics=facts and facts["nics"], nvswitch=facts and facts["nvswitch"],
                              nvlinks=facts and facts["nvlinks"], node_type=facts and facts["node_type"],
                              no_node_type=self.node if self.cfg.profile and facts is None else None,
                              pcie=facts and facts.get("pcie"))
        if self.node_gpus.mig_instances:
            self.judging.hc.expect["mig_instances"] = self.node_gpus.mig_instances
        if self.cfg.profile:  # clock policies come from the profile
            from slurmkit.hooks.clock_policy import running_expect

            # a job running under its partition's policy: its GPUs show that, not the resting state
            running = running_expect(nodestate.job_records(self.cfg.state_dir, self.node))
            if running:
                self.judging.hc.expect["gpu_policy"] = running
        return True

    def _slurm_conf_gpus(self):
        """What slurm.conf's ``Gres=`` gives this node: ``("Gres=gpu:h100:4", 4)``; None when it
        gives no GPU; a message (str) when slurm.conf cannot be found or read."""
        from slurmkit.hooks import gres

        if self.confs.slurm_conf is None:
            return (f"no slurm.conf either (looked at {', '.join(self.confs.looked_slurm)}): cannot tell "
                    f"which GPUs {self.node} has")
        try:
            have = gres.slurm_conf_gres(self.confs.slurm_conf, self.node) or []
        except gres.GresError as exc:
            return str(exc)
        count = sum(n for _, n in have)
        if not count:
            return None
        return "Gres=" + ",".join(f"gpu:{t}:{n}" if t else f"gpu:{n}" for t, n in have), count

    def job_minors(self) -> set[int] | None:
        """Device minors of the job's GPUs (``SLURM_JOB_GPUS`` positions -> gres.conf ``File=`` ->
        ``st_rdev``), the GPUs re-sampled for leftovers before a job; empty when the job has none
        or they cannot be told (:meth:`job_gpus` logs why); None (re-sample all) when one is an
        AutoDetect GPU, known only once NVML is read."""
        from slurmkit.hooks import gres

        try:
            idx = gres.parse_job_gpus(self.env.get("SLURM_JOB_GPUS"))
        except ValueError:
            return set()
        out = set()
        for i in idx:
            if self.node_gpus.files and i < len(self.node_gpus.files) and self.node_gpus.files[i] is None:
                return None
            if self.node_gpus.files and i < len(self.node_gpus.files):
                try:
                    out.add(gres.device_minor(self.node_gpus.files[i]))
                except OSError as exc:
                    self.own_error(f"job GPU{i}: {self.node_gpus.files[i]}: {exc.strerror or exc}")
        return out

    def read(self, before_job: bool, job_minors: set[int] | None = None) -> bool:
        """Read the GPU state and run the checks. Returns False when nothing can be judged (own
        trouble logged); an NVML hang sets ``verdict.drain_reason``. ``before_job`` (the prolog):
        only the job's GPUs (:meth:`job_gpus`) are judged for leftover processes and memory;
        ``job_minors`` (:meth:`job_minors`) are the ones the read re-samples."""
        from slurmkit.health.checks import CheckStatus, own_trouble, run_checks
        from slurmkit.health.result import limit_text
        from slurmkit.health.fabric import spec_of
        from slurmkit.health.runner import read_state
        from slurmkit.health.source import NvmlTimeout, SourceError

        if not (self.judging.hc.expect.get("expected_gpu_count") or 0):
            self.node_gpus.gpuless = True   # a CPU-only node: nothing to judge, and not our trouble either
            self.log.info(f"no GPUs expected on {self.node} (gres.conf and slurm.conf's Gres= list none): "
                          "GPU checks skipped")
            return False
        spec = self.source_spec
        cursor = None
        if spec == "live":
            cursor = self.kmsg.cursor_path or nodestate.kmsg_cursor(self.cfg.state_dir, self.node, self.hook)
        try:
            self.state = read_state(spec, total_deadline_s=self.cfg.deadline_s,
                                    per_call_deadline_s=min(self.judging.hc.per_call_deadline_s, self.cfg.deadline_s),
                                    before_job=before_job, thresholds=self.judging.hc.thresholds, node=self.node,
                                    job_minors=job_minors,
                                    kmsg_cursor=cursor, kmsg_device=self.cfg.kmsg_for(self.node),
                                    fabric=spec_of(self.judging.hc.expect), sysfs=self.cfg.sysfs_for(self.node),
                                    counters_file=nodestate.counters_path(self.cfg.state_dir, self.node))
        except NvmlTimeout as exc:
            self.log.error(f"hardware evidence: {exc}")
            self.verdict.drain_reason = NVML_TIMEOUT_REASON
            return False
        except SourceError as exc:
            self.own_error(str(exc))
            return False
        job_gpus = {g.nvml_index for g in self.job_gpus() if g.nvml_index is not None} if before_job else None
        if self.state.xids:  # this boot's recorded GPU resets: an Xid from before its GPU's reset is history
            from slurmkit.hooks import gpureset

            self.state.gpu_resets = gpureset.load(self.cfg.state_dir, self.node, nodestate.boot_id())
        self.verdict.results = run_checks(self.state, self.judging.hc, before_job=before_job, job_gpus=job_gpus)
        self.name_gres_indexes()
        if self.state.xids:
            self.attribute_xids()
        for msg in own_trouble(self.state, self.judging.hc):
            self.own_error(msg)
        fails = [r for r in self.verdict.results if r.status is CheckStatus.FAIL]
        for r in self.verdict.results:
            if r.status is not CheckStatus.PASS:
                self.log.warning(f"{r.status}: {r.line()} (value {r.value}, limit {limit_text(r.limit)}"
                                 + (f", {r.uuid}" if r.uuid else "") + f") {r.message}".rstrip())
        if fails:
            self.verdict.drain_reason = fails[0].reason(more=len(fails) - 1)
        return True

    def name_gres_indexes(self) -> None:
        """Give each result that names a GPU and is not a pass Slurm's GPU index too
        (``CheckResult.gres_index``: the GPU's place in gres.conf, matched by device minor as
        :func:`slurmkit.hooks.gres.map_job_gpus` does), so a drain reason says both numberings:
        ``GPU1 (gres index 3, 0000:3b:00.0)``. A GPU gres.conf does not list, or one in MIG mode
        (its instances are the gres), keeps NVML's alone."""
        from slurmkit.health.checks import CheckStatus

        named = [r for r in self.verdict.results if r.gpu_index is not None and r.status is not CheckStatus.PASS]
        if not named or not self.node_gpus.files:
            return
        from slurmkit.hooks import gres

        try:
            mapped = gres.map_job_gpus(list(range(len(self.node_gpus.files))), self.node_gpus.files, self.state,
                                       autodetect=self.node_gpus.autodetect)
        except ValueError:
            return
        by_nvml = {g.nvml_index: g.index for g in mapped if g.nvml_index is not None}
        for g in self.state.gpus:  # a GPU in MIG mode is several gres (its instances), not one index
            if g.get("mig_current") or g.get("mig_devices"):
                by_nvml.pop(g.index, None)
        for r in named:
            r.gres_index = by_nvml.get(r.gpu_index)

    def attribute_xids(self) -> None:
        """Attribute each Xid line of the state to the jobs whose GPUs and run window contain it
        (:mod:`slurmkit.hooks.attribution`: the prolog records of the node's jobs, and the
        epilog's own job) into ``kmsg.xid_jobs``, and log it ("attributed to job 123" / "no
        job")."""
        from slurmkit.hooks import attribution

        boot = nodestate.boot_id()
        windows = [self.kmsg.job_window] if self.kmsg.job_window is not None else []
        for job_id, rec in nodestate.job_records(self.cfg.state_dir, self.node):
            w = attribution.window_of(job_id, rec, boot)
            if w is not None and (self.kmsg.job_window is None or w.job_id != self.kmsg.job_window.job_id):
                windows.append(w)
        self.kmsg.xid_jobs = [attribution.attribute(x, windows) for x in self.state.xids]
        seen: dict[tuple, int] = {}
        for x, jobs in zip(self.state.xids, self.kmsg.xid_jobs):
            key = (x.xid, x.pci_bus_id, tuple(jobs))
            seen[key] = seen.get(key, 0) + 1
        for (xid, bus, jobs), n in seen.items():
            self.log.info(f"Xid {xid} on {bus or 'an unnamed GPU'}" + (f" (x{n})" if n > 1 else "")
                          + f": attributed to {attribution.describe(list(jobs))}")

    def apply_verdict(self) -> None:
        """Drain for ``verdict.drain_reason`` (enforce) or log it (observe)."""
        if not self.verdict.drain_reason:
            return
        if self.cfg.mode == "observe":
            self.log.warning(f"observe mode: would drain {self.node}: {self.verdict.drain_reason}")
            return
        from slurmkit.hooks.drain import DrainOutcome, drain
        from slurmkit.slurm.commands import SlurmError

        try:
            outcome = drain(self.node, self.verdict.drain_reason, self.cfg.scontrol_timeout_s, self.slurm_conf,
                            self.cfg.slurm_bin_dir)
        except SlurmError as exc:
            self.own_error(f"could not drain {self.node} ({self.verdict.drain_reason}): {exc}")
            return
        if outcome.outcome is DrainOutcome.DRAINED:
            self.verdict.drained = True
            self.log.warning(f"drained {self.node}: {self.verdict.drain_reason}")
            h = nodestate.load_health(self.cfg.state_dir, self.node)
            h.drained_reason, h.clean_runs, h.drained_boot_id = self.verdict.drain_reason, 0, nodestate.boot_id()
            if self.state is not None:  # the GPUs whose hardware XIDs hold the drain until a reset / reboot
                from slurmkit.hooks import xidhold

                h.xid_holds = xidhold.add(h.xid_holds, self.verdict.results, self.state.xids, time.time())
            self.save_health(h)
        else:
            self.verdict.kept = outcome.their_reason
            self.log.warning(f"not draining {self.node}: its reason belongs to someone else ({outcome.their_reason}); "
                             f"slurmkit would have drained with: {self.verdict.drain_reason}")
            h = nodestate.load_health(self.cfg.state_dir, self.node)
            if h.drained_reason:  # the node is theirs now: forget our old drain
                h.drained_reason, h.clean_runs, h.xid_holds = None, 0, {}
                self.save_health(h)

    def job_gpus(self):
        """The job's GPUs mapped to NVML (``gres.JobGpu`` list, worked out once per run); []
        when unknown (logged)."""
        from slurmkit.hooks import gres

        if self.node_gpus.job_gpus is not None:
            return self.node_gpus.job_gpus
        try:
            idx = gres.parse_job_gpus(self.env.get("SLURM_JOB_GPUS"))
            if idx and not self.node_gpus.files:
                raise ValueError("SLURM_JOB_GPUS is set but gres.conf lists no GPU for this node")
            self.node_gpus.job_gpus = gres.map_job_gpus(idx, self.node_gpus.files or [], self.state,
                                                       autodetect=self.node_gpus.autodetect)
        except ValueError as exc:
            self.own_error(str(exc))
            self.node_gpus.job_gpus = []
        return self.node_gpus.job_gpus


def _energy_of(state, nvml_index):
    if state is None or nvml_index is None:
        return None
    g = next((g for g in state.gpus if g.index == nvml_index), None)
    return g.get("total_energy_mj") if g else None


def prolog(run: Run) -> int:
    """Check the node before the job; drain and return 1 on hardware evidence (enforce)."""
    if not run.setup():
        return 0
    ok = run.read(before_job=True, job_minors=run.job_minors())
    run.apply_verdict()
    if run.verdict.drain_reason and run.cfg.mode == "enforce":
        return 1
    if not ok:
        return 0
    job_id = run.env.get("SLURM_JOB_ID")
    gpus = run.job_gpus()
    for g in gpus:
        run.log.info(f"job GPU{g.index}: {g.file} minor {g.minor} -> NVML GPU{g.nvml_index} {g.uuid} {g.pci_bus_id}")
    read_s = time.time()  # the starting energy was read just now (the spool's start_s)
    from slurmkit.hooks import clock_policy

    # the job's partition's clock policy, on the job's own GPUs only; what NVML refuses is own
    # trouble (logged, counted) and never fails the prolog: the record says so
    partition = run.env.get("SLURM_JOB_PARTITION")
    plan, why = clock_policy.plan_job(run.judging.policies["job"], gpus, run.node_gpus.shared)
    accounting = [("enable_accounting", g.nvml_index, None, None) for g in gpus
                  if g.nvml_index is not None and not _gpu(run.state, g.nvml_index).get("accounting_mode", False)]
    outcomes = _act(run, accounting + [spec for _, spec in plan])
    if "TIMEOUT" in outcomes:  # NVML hung in a set call: hardware evidence, as in a read
        run.apply_verdict()
        if run.cfg.mode == "enforce":
            return 1
    policy = clock_policy.job_record(run.judging.policies, partition, plan, outcomes[len(accounting):], why)
    if policy.origin != "none":
        run.log.info(f"clock policy {policy.label} ({policy.origin})" + (f": {policy.reason}" if policy.reason else ""))
    if job_id:
        rows = [nodestate.JobGpuStart(g.index, g.nvml_index, g.minor, g.uuid, g.pci_bus_id,
                                      start_energy_mj=_energy_of(run.state, g.nvml_index),
                                      acct_seen=_acct_keys(run.state, g.nvml_index)) for g in gpus]
        try:
            if not run.node_gpus.shared:  # a job still listed on these GPUs is gone (its epilog never ran)
                for old in nodestate.drop_jobs_on_gpus(run.cfg.state_dir, run.node, job_id, [g.index for g in gpus],
                                                    jobs_dir=run.cfg.jobs_dir):
                    run.log.warning(f"dropped job {old}'s prolog record: its GPUs are job {job_id}'s now")
            seq = None
            if run.source_spec == "live":  # the job's kernel-log window starts where this read stopped
                from slurmkit.health.kmsg import cursor_seq

                seq = cursor_seq(nodestate.kmsg_cursor(run.cfg.state_dir, run.node, run.hook))
            rec = nodestate.JobStart(read_s, run.state.source, rows, user=run.env.get("SLURM_JOB_USER"),
                                     end_by_s=nodestate.slurm_end_time(run.env), policy=policy.to_json(),
                                     kmsg_seq=seq, boot_id=nodestate.boot_id())
            nodestate.save_job(run.cfg.state_dir, run.node, job_id, rec)
        except OSError as exc:
            run.own_error(f"cannot record the job's starting energy: {exc}")
            return 0
        try:  # the job's window, for its own Xid query (run as the job's user)
            nodestate.publish_job(run.cfg.jobs_dir, run.node, job_id, rec, _env_id(run.env, "SLURM_JOB_UID"),
                                  _env_id(run.env, "SLURM_JOB_GID"))
        except OSError as exc:
            run.own_error(f"cannot publish the job's kernel-log window to its user: {exc}")
    return 0


def _env_id(env, name: str) -> int | None:
    """A numeric id Slurm gives the prolog (``SLURM_JOB_UID`` / ``SLURM_JOB_GID``); None when absent."""
    v = (env.get(name) or "").strip()
    return int(v) if v.isdigit() else None


def _acct_keys(state, nvml_index) -> list[tuple]:
    """``[(pid, start_time_us), ...]`` of the accounting records already on a GPU (so the epilog
    counts only the job's own processes)."""
    if nvml_index is None:
        return []
    recs = _gpu(state, nvml_index).get("accounting") or []
    return [(r.get("pid"), r.get("start_time_us")) for r in recs]


def _gpu(state, nvml_index):
    return next(g for g in state.gpus if g.index == nvml_index)


def _describe(kind: str, gpu_index, pid, value) -> str:
    if kind == "kill":
        what = f"kill pid {pid}"
    elif kind == "set_power_limit":
        what = f"set the power limit to {value:g} W"
    elif kind == "set_app_clocks":
        what = f"set application clocks to {value[0]} MHz memory, {value[1]} MHz graphics"
    elif kind in ("set_locked_clocks", "set_mem_locked_clocks"):
        what = f"lock {'GPU' if kind == 'set_locked_clocks' else 'memory'} clocks to {value[0]}-{value[1]} MHz"
    else:
        what = kind.replace("_", " ")
    return f"{what} on NVML GPU{gpu_index}"


#: Resets that NVML may answer with these when the GPU or driver has no such clock lock:
#: nothing to reset (logged, not trouble).
_NOTHING_TO_RESET = ("NOT_SUPPORTED", "FUNCTION_NOT_FOUND")


def _act(run: Run, specs) -> list[str]:
    """Carry out action specs ``(kind, NVML index, pid, value)`` through the state source
    (replay: logged as "would ..."); returns each one's outcome, in order: ``SUCCESS``,
    ``REPLAY``, the NVML return code that refused it, ``TIMEOUT`` / ``ERROR`` (the batch did not
    run). A refusal is slurmkit's own trouble (logged, counted: never a drain), except a reset
    NVML answers NOT_SUPPORTED / FUNCTION_NOT_FOUND (nothing to reset); the other actions are
    carried out all the same. In observe mode nothing is carried out (outcome ``OBSERVE``): each
    is logged as "observe mode: would ..." and counted in ``run.verdict.observed`` (no process kill,
    no clock, power-limit or accounting-mode change)."""
    if not specs:
        return []
    if run.cfg.mode == "observe":
        for kind, gi, pid, pw in specs:
            run.log.info(f"observe mode: would {_describe(kind, gi, pid, pw)}")
            run.verdict.observed[kind] = run.verdict.observed.get(kind, 0) + 1
        return ["OBSERVE"] * len(specs)
    from slurmkit.health.runner import apply_actions
    from slurmkit.health.source import Action, NvmlTimeout, SourceError

    clocks = ("set_app_clocks", "set_locked_clocks", "set_mem_locked_clocks")
    actions = [Action(kind, gpu_index=gi, pid=pid, power_limit_w=v if kind == "set_power_limit" else None,
                      clocks_mhz=list(v) if kind in clocks else None) for kind, gi, pid, v in specs]
    try:
        results = apply_actions(actions, run.source_spec, total_deadline_s=run.cfg.deadline_s,
                                per_call_deadline_s=min(run.judging.hc.per_call_deadline_s, run.cfg.deadline_s))
    except NvmlTimeout as exc:
        run.log.error(f"hardware evidence: {exc}")
        run.verdict.drain_reason = run.verdict.drain_reason or NVML_TIMEOUT_REASON
        return ["TIMEOUT"] * len(specs)
    except SourceError as exc:
        run.own_error(str(exc))
        return ["ERROR"] * len(specs)
    for (kind, _gi, _pid, _v), (line, rc) in zip(specs, results):
        if rc in ("SUCCESS", "REPLAY"):
            run.log.info(line)
        elif kind.startswith("reset_") and rc in _NOTHING_TO_RESET:
            run.log.info(f"{line} (nothing to reset)")
        else:
            run.own_error(line)
    return [rc for _, rc in results]


def _leftover_verdict(run: Run, proc: dict, job_id, uid, min_uid):
    """:func:`slurmkit.hooks.jobproc.verdict` for a GPU process; a replayed snapshot's process
    carries its ``uid`` and ``job_id`` (nothing on this host is looked at)."""
    from slurmkit.hooks import jobproc

    pid = proc.get("pid")
    if run.state.replay:
        owner, proc_job = proc.get("uid"), proc.get("job_id")
        proc_job = None if proc_job is None else str(proc_job)
    else:
        owner, proc_job = jobproc.owner_of(pid), jobproc.job_of(pid)
    return jobproc.verdict(pid, owner, proc_job, job_id, uid, min_uid)


def epilog(run: Run) -> int:
    """Clean up after the job (leftover processes that are the job's own:
    :mod:`slurmkit.hooks.jobproc`; the job's GPUs back to their resting clock policy:
    :func:`slurmkit.hooks.clock_policy.restore_specs`), record its GPU energy and the clock policy
    it ran under in the spool, and drain on hardware evidence."""
    from slurmkit.hooks import spool

    job_id = run.env.get("SLURM_JOB_ID")
    user = run.env.get("SLURM_JOB_USER")
    uid = _env_id(run.env, "SLURM_JOB_UID")
    end_s = time.time()
    started = nodestate.pop_job(run.cfg.state_dir, run.node, job_id, run.cfg.jobs_dir) if job_id else None
    if not run.setup():
        return 0
    job_cursor = _job_kmsg_window(run, job_id, started, end_s)
    ok = run.read(before_job=False)
    if job_cursor:
        _end_job_kmsg_window(run, job_cursor)
    gpus = run.job_gpus() if ok else []
    actions = []
    from slurmkit.hooks import clock_policy
    from slurmkit.hooks.jobproc import uid_min

    # locked memory clocks are reset only after a job whose policy locked them (GPUs before
    # Ampere have none): the policy the prolog recorded, else the job's partition's
    try:
        ran_under = clock_policy.JobPolicy.from_json(started.policy) if started and started.policy else None
    except ValueError as exc:  # a hand-edited or damaged prolog record: the policy is unknown
        run.own_error(f"job {job_id}'s prolog record: {exc}")
        ran_under = None
    job_policy = run.judging.policies["job"]
    reset_mem_locked = bool((ran_under.requested if ran_under else {}).get("locked_mem_clocks_mhz")
                            or (job_policy is not None and job_policy.locked_mem_clocks_mhz))
    min_uid = uid_min()
    for g in gpus:
        if g.nvml_index is None:
            continue
        gs = _gpu(run.state, g.nvml_index)
        for proc in gs.get("processes") or []:
            v = _leftover_verdict(run, proc, job_id, uid, min_uid)
            if v.kill:
                run.log.info(f"killing {v.why} (GPU{g.index})")
                actions.append(("kill", g.nvml_index, int(proc["pid"]), None))
            else:
                run.log.info(f"leaving {v.why} (GPU{g.index})")
        # back to the resting policy, never NVML's defaults over a site's value (nor when the
        # site's values cannot be known: an unreadable profile never seen good)
        if not run.judging.profile_unknown:
            actions += clock_policy.restore_specs(g.nvml_index, gs, run.judging.hc.expect, run.judging.policies["resting"],
                                                  reset_mem_locked)
    _act(run, actions)
    run.apply_verdict()
    if job_id and not run.node_gpus.gpuless:  # a job on a CPU-only node has no GPU energy to record
        by_index = {r.index: r for r in started.gpus} if started else {}
        rows = []
        for g in gpus:
            start = by_index.get(g.index)
            rows.append(spool.GpuEnergy(g.index, g.nvml_index, g.minor, g.uuid, g.pci_bus_id,
                                        start_energy_mj=start.start_energy_mj if start else None,
                                        end_energy_mj=_energy_of(run.state, g.nvml_index)))
        reason = None
        if not ok:
            reason = "GPU state unreadable at epilog" + (" (NVML timed out)" if run.verdict.drain_reason else "")
        elif started is None:
            reason = "no prolog record for this job on this node (prolog did not run or failed)"
        from slurmkit.health.checks import CheckStatus

        job_nvml = {g.nvml_index for g in gpus}
        events = []
        for r in run.verdict.results:
            if r.status is CheckStatus.PASS or not (r.gpu_index is None or r.gpu_index in job_nvml) or r.check not in (
                    "xid", "ecc_volatile_uncorrectable", "ecc_aggregate_uncorrectable", "ecc_sram_correctable",
                    "retired_pages_pending", "row_remap_pending", "row_remap_uncorrectable", "row_remap_failure"):
                continue
            if r.check == "xid":  # only the lines attributed to this job (not a shared GPU's, nor one after it)
                keep, whose = _xid_event_job(run, r, str(job_id))
                if keep:
                    events.append(spool.SpoolEvent(r.check, r.status, r.gpu_index, r.value, job_id=whose,
                                                   pci_bus_id=r.pci_bus_id))
            else:
                events.append(spool.SpoolEvent(r.check, r.status, r.gpu_index, r.value, pci_bus_id=r.pci_bus_id))
        seen = {r.index: r.acct_seen for r in started.gpus} if started else None
        accounting, acc_reason = job_accounting(run.state, gpus, seen)
        rec = spool.record(job_id, run.node, user, uid, started.start_s if started else None, end_s, rows,
                           run.state.source if run.state else run.source_spec, reason=reason,
                           accounting=accounting, accounting_reason=acc_reason, events=events,
                           policy=ran_under)
        try:
            spool.append(run.cfg.spool_dir, rec)
        except ValueError as exc:
            run.own_error(f"energy spool {run.cfg.spool_dir}: {exc}")
        except OSError as exc:
            run.own_error(f"energy spool {run.cfg.spool_dir}: {exc.strerror or exc}")
    if run.verdict.drain_reason and run.cfg.mode == "enforce" and not run.verdict.drained and run.verdict.kept is None:
        return 1  # the evidence could not be recorded by a drain: Slurm's "Epilog error" drain does
    return 0      # (a node someone else drained stays theirs: exit 0, no new reason)


def _job_kmsg_window(run: Run, job_id, started, end_s: float) -> str | None:
    """Before the epilog's read: the job's own run window for Xid attribution, and (live, a
    prolog record of this boot with its kernel-log position) a per-job cursor starting where
    the prolog stopped, so that another job's epilog on a shared node, which moves the node's
    epilog cursor, does not hide this job's XIDs. Returns that cursor's path, or None."""
    if started is None or not job_id:
        return None
    from slurmkit.hooks import attribution

    boot = nodestate.boot_id()
    run.kmsg.job_window = attribution.window_of(str(job_id), started, boot, end_s)
    if run.source_spec != "live" or started.kmsg_seq is None or started.boot_id != boot:
        return None
    from slurmkit.health.kmsg import write_cursor

    path = nodestate.job_kmsg_cursor(run.cfg.state_dir, run.node, str(job_id))
    try:
        write_cursor(path, started.kmsg_seq)
    except OSError as exc:
        run.own_error(f"kernel-log cursor {path}: {exc.strerror or exc}")
        return None
    run.kmsg.cursor_path = path
    return path


def _end_job_kmsg_window(run: Run, path: str) -> None:
    """After the epilog's read: move the node's epilog cursor on to what the job's read reached
    (never back) and remove the per-job cursor."""
    from slurmkit.health.kmsg import cursor_seq, write_cursor

    seq = cursor_seq(path)
    node_cursor = nodestate.kmsg_cursor(run.cfg.state_dir, run.node, run.hook)
    old = cursor_seq(node_cursor)
    try:
        if seq is not None and (old is None or seq > old):
            write_cursor(node_cursor, seq)
        os.unlink(path)
    except OSError as exc:
        run.own_error(f"kernel-log cursor {node_cursor}: {exc.strerror or exc}")


def _xid_event_job(run: Run, r, job_id: str) -> tuple[bool, str | None]:
    """Whether Xid result ``r`` goes into job ``job_id``'s spool record, and the job it names:
    ``(True, job_id)`` when one of its lines is attributed to the job (:attr:`KernelLogScope.xid_jobs`);
    ``(True, None)`` for lines that name no GPU (node-wide: no job can be told); ``(False,
    None)`` when its lines are another job's or no job's (the log says whose)."""
    if not r.pci_bus_id:
        return True, None
    mine = any(job_id in jobs for x, jobs in zip(run.state.xids, run.kmsg.xid_jobs)
               if x.xid == r.value and x.pci_bus_id == r.pci_bus_id)
    return (True, job_id) if mine else (False, None)


def job_accounting(state, gpus, seen: dict | None):
    """Per job GPU figures from NVML accounting (``nvmlDeviceGetAccountingStats`` records, read
    by the state source; the prolog enables accounting mode): ``({slurm index:
    spool.GpuAccounting(gpu_util_pct=time-weighted mean %, max_memory_mib=MiB, processes=n)},
    reason)`` over the records that were not there at the prolog (``seen``: {slurm index:
    [(pid, start_time_us)]}), or ``(None, reason)``."""
    from slurmkit.hooks.spool import GpuAccounting

    if state is None or not gpus:
        return None, "no GPU state or no GPU for this job"
    if seen is None:
        return None, "no prolog record for this job (records of earlier jobs cannot be told apart)"
    out, reasons = {}, []
    for g in gpus:
        gs = next((x for x in state.gpus if x.index == g.nvml_index), None) if g.nvml_index is not None else None
        if gs is None:
            reasons.append(f"GPU{g.index}: not found in NVML")
            continue
        recs = gs.get("accounting")
        if recs is None:
            reasons.append(f"GPU{g.index}: accounting {gs.rc('accounting')}")
            continue
        before = {tuple(k) for k in seen.get(g.index, [])}
        mine = [r for r in recs if (r.get("pid"), r.get("start_time_us")) not in before]
        t = sum(r.get("time_ms") or 0 for r in mine)
        util = (sum((r.get("gpu_util_pct") or 0) * (r.get("time_ms") or 0) for r in mine) / t) if t else None
        mem = max((r.get("max_memory_mib") or 0 for r in mine), default=None)
        out[g.index] = GpuAccounting(gpu_util_pct=None if util is None else round(util, 1),
                                     max_memory_mib=mem if mine else None, processes=len(mine))
    if not out:
        return None, "; ".join(reasons)
    return out, ("; ".join(reasons) or None)


def healthcheck(run: Run) -> int:
    """Periodic check (HealthCheckProgram): drain on evidence; resume a node slurmkit drained
    after ``resume_after`` clean runs in a row, while its current Slurm reason is still ours (an
    admin's resume, or their own reason, makes slurmkit forget its drain). A hardware-XID drain
    is resumed only after a reboot (a new boot id), never after clean runs. Always exits 0."""
    if not run.setup():
        return 0
    for old in nodestate.drop_stale_jobs(run.cfg.state_dir, run.node, time.time(), jobs_dir=run.cfg.jobs_dir):
        run.log.warning(f"dropped job {old}'s prolog record: past its end time, its epilog never ran")
    ok = run.read(before_job=False)
    run.apply_verdict()
    if run.verdict.drain_reason:
        if run.cfg.mode == "enforce" and not run.verdict.drained:
            h = nodestate.load_health(run.cfg.state_dir, run.node)
            if h.drained_reason:
                h.clean_runs = 0
                run.save_health(h)
        return 0
    if not ok:
        return 0
    h = nodestate.load_health(run.cfg.state_dir, run.node)
    if not h.drained_reason:
        from slurmkit.hooks.gate import idle_check

        idle_check(run)  # the active check on an idle node, when [health] active_interval_s is set
        return 0  # healthy, nothing of ours to undo: no RPC (unless the active check fails)
    # ownership is Slurm's current reason, not what we remember: an admin may have resumed the
    # node (or drained it for a reason of their own) since
    from slurmkit.hooks.drain import is_ours, show_node
    from slurmkit.slurm.commands import SlurmError

    try:
        current = show_node(run.node, run.cfg.scontrol_timeout_s, run.slurm_conf, run.cfg.slurm_bin_dir)
    except SlurmError as exc:
        run.own_error(f"could not read {run.node}'s drain reason: {exc}")
        return 0
    if "DRAIN" not in current["state"].upper() or not is_ours(current["reason"]):
        how = ("was resumed" if "DRAIN" not in current["state"].upper()
               else f"is drained by someone else ({current['reason'] or 'no reason'})")
        run.log.info(f"forgetting slurmkit's drain of {run.node} ({h.drained_reason}): the node {how} since")
        h.drained_reason, h.clean_runs, h.xid_holds = None, 0, {}
        run.save_health(h)
        return 0
    if _xid_holds_remain(run, h):
        return 0
    h.clean_runs = min(h.clean_runs + 1, run.cfg.resume_after)  # kept at its bound while the gate waits
    run.log.info(f"clean run {h.clean_runs} of {run.cfg.resume_after} since slurmkit drained {run.node}")
    if h.clean_runs >= run.cfg.resume_after:
        from slurmkit.hooks.gate import resume_gate

        if not resume_gate(run):  # the active check (dcgmi diag) must pass first
            if not run.verdict.drained:
                if not run.verdict.drain_reason:  # no new evidence: the earlier reason stands
                    run.log.info(f"{run.node} stays drained for the earlier reason: {h.drained_reason}")
                run.save_health(h)
            return 0
        from slurmkit.hooks.drain import resume
        from slurmkit.slurm.commands import SlurmError

        try:
            outcome = resume(run.node, run.cfg.scontrol_timeout_s, run.slurm_conf, run.cfg.slurm_bin_dir)
        except SlurmError as exc:
            run.own_error(f"could not resume {run.node}: {exc}")
            run.save_health(h)
            return 0
        run.log.warning(f"{outcome} {run.node} after {h.clean_runs} clean health checks")
        run.verdict.resumed = h.drained_reason
        h.drained_reason, h.clean_runs, h.xid_holds = None, 0, {}
    run.save_health(h)
    return 0


def _xid_holds_remain(run: Run, h) -> bool:
    """The hardware-XID lifetime of slurmkit's drain (:mod:`slurmkit.hooks.xidhold`): clean runs
    are no evidence of a reset. A reboot (a boot id other than the drain's) ends every hold; a
    GPU reset recorded after its XID (:mod:`slurmkit.hooks.gpureset`) ends that GPU's only. True
    (saved, logged) while holds remain: the node stays drained, its reason moved to a GPU still
    held when the one it named was reset. False: the clean runs count."""
    from slurmkit.hooks import gpureset, xidhold

    boot = nodestate.boot_id()
    if h.drained_boot_id is None or boot is None or h.drained_boot_id != boot:
        if h.xid_holds:
            run.log.info(f"{run.node} rebooted since slurmkit drained it: its XIDs no longer hold the drain")
            h.xid_holds = {}
            run.save_health(h)
        return False
    holds = h.xid_holds or xidhold.from_reason(h.drained_reason)  # a drain recorded before holds were kept
    if not holds:
        return False
    resets = gpureset.load(run.cfg.state_dir, run.node, boot)
    remaining, released = xidhold.release(holds, resets)
    for bus, hold in released.items():
        rec = resets[bus]
        at = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(rec["at_s"]))
        run.log.warning(f"GPU {bus} was reset ({rec['how'] or 'recorded'}, {at}): "
                        f"its Xid no longer holds the drain ({hold['reason']})")
    if released or holds != h.xid_holds:
        h.xid_holds = remaining
        run.save_health(h)
    if not remaining:
        return False
    still = "; ".join(sorted(hd["reason"] for hd in remaining.values()))
    run.log.info(f"{run.node} stays drained until it reboots, the GPU is reset (slurmkit hooks gpu-reset) "
                 f"or an admin resumes it: {still}")
    if set(xidhold.from_reason(h.drained_reason)) & set(released):  # the reason named a GPU that was reset
        run.verdict.drain_reason = next(iter(remaining.values()))["reason"]
        run.apply_verdict()
    return True


FLOWS = {PROLOG: prolog, EPILOG: epilog, HEALTHCHECK: healthcheck}
