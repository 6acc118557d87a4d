"""Turn a :class:`~slurmkit.submit.request.SubmitRequest` plus site facts into an sbatch script (and its explanation).

:func:`plan` is pure: request + :class:`~slurmkit.submit.site.SiteFacts` + template (+ idle nodes
for ``prefer_locality``) -> :class:`Plan` holding every ``#SBATCH`` option and exported variable
with its source. :func:`render` turns a plan into the script text with jinja2 (StrictUndefined);
:func:`explain` into the ``--explain`` table.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from slurmkit.errors import UsageError
from slurmkit.hostlist import expand_nodelist
from slurmkit.submit import jobenv, nccl, placement, timelimit
from slurmkit.submit.escape import _VAR_REF, check_line_safe, sbatch_line, shell_expand_word, shell_join, shell_quote, shell_word
from slurmkit.submit.nccl import EnvVar
from slurmkit.submit.request import SubmitRequest
from slurmkit.submit.site import SiteFacts
from slurmkit.submit.templates import Template, TemplateError, templates_dir

#: MASTER_PORT = PORT_BASE + job id % PORT_SPAN (12000-31999): distinct for concurrent jobs
#: sharing a node, below Linux's ephemeral range (net.ipv4.ip_local_port_range 32768-60999, where
#: another connection's local port could already hold it) and clear of Slurm's 6817-6819.
PORT_BASE, PORT_SPAN = 12000, 20000
#: seconds between two looks for a node's drain while the batch shell waits for one
NODE_FAULT_STEP_S = 5

#: #SBATCH options slurmkit computes itself: ``sbatch_args`` may not set them (say which flag does).
OWN_OPTIONS = {"job-name": "--name", "partition": "--partition", "nodes": "--nodes",
               "ntasks-per-node": "the template", "ntasks": "the template", "gpus-per-node": "--gpus-per-node",
               "gpus": "--gpus-per-node", "gres": "--gpus-per-node, or --gres shard:N / mps:N",
               "cpus-per-gpu": "--cpus-per-gpu", "cpus-per-task": "--cpus-per-task",
               "time": "--time", "nodelist": "--nodelist", "switches": "--switch-wait / --no-switches",
               "array": "--set sets", "comment": "--comment", "output": "--output", "error": "--error",
               "chdir": "--chdir", "signal": "--checkpoint-signal / --preempt-warning",
               "requeue": "--checkpoint-signal", "no-requeue": "no --checkpoint-signal (launchers: and --set max_restarts=0)",
               "open-mode": "--checkpoint-signal", "account": "--account",
               "qos": "--qos", "mem": "--mem", "mem-per-gpu": "--mem-per-gpu", "mem-per-cpu": "--mem-per-gpu",
               "exclusive": "--exclusive", "constraint": "--constraint", "exclude": "--exclude",
               "reservation": "--reservation", "dependency": "--dependency / after=", "mail-type": "--mail-type",
               "mail-user": "--mail-user"}

#: sbatch's short options -> long names (for ``sbatch_args`` given as ``-A acct``).
_SHORT = {"A": "account", "q": "qos", "C": "constraint", "x": "exclude", "d": "dependency", "w": "nodelist",
          "N": "nodes", "n": "ntasks", "p": "partition", "t": "time", "J": "job-name", "o": "output",
          "e": "error", "D": "chdir", "a": "array", "G": "gpus", "c": "cpus-per-task", "S": "core-spec",
          "L": "licenses", "M": "clusters", "k": "no-kill", "s": "oversubscribe", "Q": "quiet", "W": "wait",
          "H": "hold", "I": "immediate", "F": "nodefile", "b": "begin", "i": "input"}


@dataclass(frozen=True)
class Option:
    """One ``#SBATCH --name=value`` (``value`` None: a flag) and where it came from."""

    name: str
    value: str | None
    source: str


@dataclass(frozen=True)
class Plan:
    """Everything the script says: ``options``, ``env`` (exported by the script, with sources),
    ``params`` (resolved template parameters), ``context`` (values the template reads),
    ``param_sources`` (where each parameter's value came from)."""

    template: Template
    options: tuple[Option, ...]
    env: tuple[EnvVar, ...]
    params: dict
    context: dict
    #: parameter name -> where its value came from ("--set", "API params", "template default")
    param_sources: dict = field(default_factory=dict)
    #: what may not go as the user expects (submit warns, --explain shows them)
    warnings: tuple[str, ...] = ()


def _src(user_value, cli: str, fallback: str) -> str:
    return cli if user_value is not None else fallback


class _Options(list):
    """The ``#SBATCH`` options in script order; :meth:`add` checks each value is one safe line."""

    def add(self, name: str, value, source: str) -> None:
        if value is not None and value is not True:
            check_line_safe(f"--{name}", str(value))
        self.append(Option(name, None if value is True else (None if value is None else str(value)), source))


def plan(req: SubmitRequest, facts: SiteFacts, template: Template, idle_nodes: list[str] | None = None,
         env_file: tuple[str, str] | None = None) -> Plan:
    """Compute the plan (pure). ``env_file``: (path, text) of ``req.env_file``, read by the
    caller. Raises :class:`TemplateError` / ``SiteError`` / ``EscapeError`` / ``UsageError``
    for bad input."""
    sets, max_restarts, restarts_src = _max_restarts(req, facts)
    params = template.resolve(sets, req.params)
    _check_shape(req, facts, template)
    shared = _shared_request(req, facts, template)
    gpn = 1 if shared else _gpus_per_node(req, facts, template)
    _check_mig(req, facts, template, gpn)
    ck = _checkpoint(req, facts, template)
    opts = _Options()
    _resource_options(opts, req, facts, template, gpn, ck, shared)
    nodelist = _nodelist_option(opts, req, facts, idle_nodes)
    if req.switches and not nodelist:
        # a nodelist fixes the nodes: --switches could only keep the job pending
        sw = placement.switches_option(facts, req.nodes, req.switch_wait)
        if sw:
            opts.add("switches", sw, "profile fabric.leaves (fewest leaves that hold the job), wait "
                     + _src(req.switch_wait, "CLI --switch-wait", "profile submit.switch_wait"))
    if "sets" in template.params:
        _array_option(opts, template, params)
    _user_options(opts, req, facts, shared)
    _requeue_options(opts, template, ck, max_restarts)
    env = _environment(req, facts)
    per_rank = _cpus_per_rank(req, template, opts, gpn)
    if per_rank is not None:
        env.append(per_rank)
    if req.expand_args:
        env.append(EnvVar("SLURMKIT_EXPAND_ARGS", "1", "CLI --expand-args ($NAME / ${NAME} in the program's "
                          "arguments expanded per rank by the bind wrapper)"))
    job_env = _job_environment(req, env_file)
    _check_computed(job_env)
    ctx = _context(req, facts, template, params, opts, env, gpn, ck, max_restarts)
    ctx["user_master_port"] = any(v.name == "MASTER_PORT" for v in job_env)
    ctx["exports"] += [f"export {v.name}={v.word}" for v in job_env]
    env += job_env
    param_sources = {name: "--set" if name in req.sets else "API params" if name in req.params else "template default"
                     for name in params}
    params = {**params, "max_restarts": max_restarts}
    param_sources["max_restarts"] = restarts_src
    said = (ck.too_early,) if ck.too_early else ()
    # a shell's own script (bash -c '... $X ...') expands its variables itself
    if not req.expand_args and req.command and req.command[0].rsplit("/", 1)[-1] not in _SHELLS:
        refs = [a for a in req.command[1:] if _VAR_REF.search(a)]
        if refs:
            said += (f"the argument {refs[0]!r} reaches the program as written, $ and all: give --expand-args "
                     "(API expand_args=True) to expand $NAME / ${NAME} on the node, per rank",)
    return Plan(template, tuple(opts), tuple(env), params, ctx, param_sources, said)


def _max_restarts(req: SubmitRequest, facts: SiteFacts) -> tuple[dict, int, str]:
    """(``--set`` values without ``max_restarts``, self-requeues allowed, where that came from):
    ``req.max_restarts`` (API), else ``--set max_restarts``, else profile ``submit.max_restarts``.
    Raises :class:`UsageError` for a value that is not a whole number >= 0."""
    sets = dict(req.sets)
    max_restarts, restarts_src = facts.submit.max_restarts, "profile submit.max_restarts"
    if "max_restarts" in sets:
        text = sets.pop("max_restarts")
        try:
            max_restarts, restarts_src = int(text), "--set max_restarts"
        except ValueError:
            raise UsageError(f"--set max_restarts={text!r}", "expected a whole number") from None
    if req.max_restarts is not None:
        max_restarts, restarts_src = req.max_restarts, "API max_restarts"
    if max_restarts < 0:
        raise UsageError("max_restarts", f"must be >= 0 (got {max_restarts})")
    return sets, max_restarts, restarts_src


def _check_shape(req: SubmitRequest, facts: SiteFacts, template: Template) -> None:
    """Node count and command fit the template and partition; raises :class:`TemplateError`."""
    if req.nodes < 1:
        raise TemplateError("--nodes", None, f"must be >= 1 (got {req.nodes})")
    if template.tasks == "single" and req.nodes != 1:
        raise TemplateError("--nodes", None, f"template {template.name!r} runs on one node (got --nodes {req.nodes})")
    if facts.partition_nodes and req.nodes > len(facts.partition_nodes):
        raise TemplateError("--nodes", None, f"partition {facts.partition} has {len(facts.partition_nodes)} nodes "
                            f"(profile partitions.{facts.partition}.nodes); got --nodes {req.nodes}")
    if not req.command and template.name != "nccl-tests":
        raise TemplateError(template.name, None, "the template needs a command after '--'")


def _gpus_per_node(req: SubmitRequest, facts: SiteFacts, template: Template) -> int:
    """GPUs per node: ``req.gpus_per_node``, else 1 for single-GPU templates, else all of the
    node type's; raises :class:`TemplateError` when the node type has fewer."""
    gpn = req.gpus_per_node
    if gpn is None:
        gpn = 1 if template.tasks == "single" else facts.gpu_count
    if gpn < 1 or gpn > facts.gpu_count:
        raise TemplateError(f"--gpus-per-node {gpn}", None, f"node type {facts.node_type} has {facts.gpu_count} GPUs "
                            f"(profile node_types.{facts.node_type}.gpu_count); the most per node is {facts.gpu_count}")
    return gpn


def _mig_words(facts: SiteFacts) -> str:
    """``partition P's GPUs are MIG instances (TYPE: PROFILE of a NAME, profile KEY)``."""
    kinds = "; ".join(f"{kind}: {prof} on {name or 'its GPU'}"
                      for kind, prof, name in facts.mig)
    return (f"partition {facts.partition}'s GPUs are MIG instances ({kinds}; profile "
            f"node_types.{facts.node_type}.gpu_groups mig)")


def _check_mig(req: SubmitRequest, facts: SiteFacts, template: Template, gpn: int) -> None:
    """On a partition whose GPUs are MIG instances (``facts.mig``), only one process on one
    instance: a CUDA process enumerates one MIG device (NVIDIA MIG user guide, "Running CUDA
    Applications on Bare-Metal"), and NCCL does not run between MIG instances (the guide's
    "Application Considerations": no GPU to GPU P2P, either PCIe or NVLink). A template of several ranks (tasks ``per-node`` / ``per-gpu``:
    torchrun, deepspeed, srun, nccl-tests) or more than one instance per process raises
    :class:`TemplateError` saying so (exit 2)."""
    if not facts.mig:
        return
    if template.tasks != "single":
        raise TemplateError(template.name, None,
                            f"{_mig_words(facts)}: template {template.name} starts ranks that talk over NCCL, which "
                            "does not run between MIG instances (no GPU-to-GPU P2P over PCIe or NVLink), and one "
                            "CUDA process sees only one MIG instance; run one process per instance with single-gpu "
                            "or array, or use a partition of whole GPUs")
    if gpn > 1:
        raise TemplateError(f"--gpus-per-node {gpn}", None,
                            f"{_mig_words(facts)}: one CUDA process sees only one MIG instance, so template "
                            f"{template.name} runs on one; give --gpus-per-node 1 (or leave it out), an array for "
                            "several processes, or a partition of whole GPUs")


def _shared_request(req: SubmitRequest, facts: SiteFacts, template: Template) -> tuple[str, int] | None:
    """``req.gres`` (``"shard:N"`` / ``"mps:N"``; ``"shard"`` is 1) as ``(name, N)``, checked
    against the partition's node type (``facts.shares``: ``gpu_groups[].shards`` / ``mps``);
    None without one. Raises :class:`UsageError` for another gres, N < 1, whole GPUs asked
    too (Slurm does not allocate a GPU and its shared gres together: sbatch(1) ``--exclusive``
    note), a partition that does not offer it (naming what it and the other partitions offer)
    or more than a job can get on one of its nodes, and :class:`TemplateError` for a template
    of several ranks (NCCL refuses two ranks on one GPU)."""
    import re

    if req.gres is None:
        return None
    where = f"--gres {req.gres}"
    m = re.fullmatch(r"(shard|mps)(?::(\d+))?", req.gres.strip())
    if not m:
        if req.gres.strip().startswith("gpu"):
            raise UsageError(where, "whole GPUs are --gpus-per-node (and --gpu-type on a mixed node); --gres takes "
                             "shard:N or mps:N")
        raise UsageError(where, "expected shard:N or mps:N (Slurm's shared GPU gres)")
    name, count = m.group(1), int(m.group(2) or 1)
    if count < 1:
        raise UsageError(where, f"must ask for at least 1 {name} (got {count})")
    if req.gpus_per_node is not None:
        raise UsageError(where, f"give --gres {name}:N or --gpus-per-node, not both: Slurm does not allocate a GPU "
                         f"and its {name} gres to one job")
    offered = {n: (per_gpu, most) for n, per_gpu, most in facts.shares}
    key = f"node_types.{facts.node_type}.gpu_groups[].{'shards' if name == 'shard' else 'mps'}"
    if name not in offered:
        here = ", ".join(f"{n}:N (N up to {most})" for n, (_, most) in offered.items())
        elsewhere = dict(facts.shares_offered).get(name, ())
        raise UsageError(where, f"partition {facts.partition} offers no {name} (profile {key})"
                         + (f"; it offers {here}" if here else "")
                         + (f"; partitions offering {name}: {', '.join(elsewhere)}" if elsewhere
                            else f"; no partition of the profile offers {name}"))
    per_gpu, most = offered[name]
    if count > most:
        how = "all from one GPU (gres.conf Flags=one_sharing" + (", MPS's default)" if name == "mps" else ")") \
            if most == per_gpu else "from all its GPUs"
        raise UsageError(where, f"partition {facts.partition} gives one job at most {most} {name} per node "
                         f"({per_gpu} per GPU, {how}; profile {key})")
    if template.tasks != "single":
        raise TemplateError(template.name, None,
                            f"--gres {name}:{count} is part of one GPU for one process, and template {template.name} "
                            "starts several ranks (NCCL refuses two ranks on one GPU); use single-gpu or array")
    return name, count


#: Signals a program can catch to checkpoint (``--checkpoint-signal``), as Slurm's ``--signal``
#: names them; KILL and STOP cannot be caught.
CHECKPOINT_SIGNALS = ("USR1", "USR2", "TERM", "INT", "HUP", "QUIT", "ALRM", "URG", "XCPU", "PWR")


@dataclass(frozen=True)
class Checkpoint:
    """Checkpoint-and-requeue before the time limit: ``signal`` the ranks get ("" = none: Slurm's
    own time limit), ``warning_s`` seconds before the limit Slurm applies, ``limit_s`` (that
    limit, whole minutes; None: no ``--time``), and where each came from."""

    signal: str
    warning_s: int
    signal_source: str
    warning_source: str
    limit_s: int | None
    #: why the signal may come before the program can handle it ("" when it cannot)
    too_early: str = ""


#: Seconds Slurm may send a ``--signal`` earlier than asked (sbatch(1) ``--signal``: "may be
#: sent up to 60 seconds earlier than specified"), and the least run a program gets before the
#: earliest signal: the time to start and install its handler (imports of torch, Lightning).
SLURM_SIGNAL_EARLY_S = 60
HANDLER_START_S = 60


def _too_early(name: str, warning_s: int, limit_s: int | None, asked_s: int) -> str:
    """Why SIG``name``, sent ``warning_s`` before the limit Slurm applies (``limit_s``), may come
    before the program has installed its handler: the earliest signal (limit - warning - Slurm's
    60 s) less than :data:`HANDLER_START_S` after the start; "" when it cannot. The time limit
    it advises keeps the warning asked (``asked_s``, before any clamping)."""
    if not name or limit_s is None:
        return ""
    earliest = limit_s - warning_s - SLURM_SIGNAL_EARLY_S
    if earliest >= HANDLER_START_S:
        return ""
    need = timelimit.slurm_limit(asked_s + SLURM_SIGNAL_EARLY_S + HANDLER_START_S)
    # the longest warning that leaves the handler its time under this limit; under 1 s (0 turns
    # checkpointing off) no warning helps, and only a longer -t is advised
    fits = limit_s - SLURM_SIGNAL_EARLY_S - HANDLER_START_S
    return (f"--checkpoint-signal {name}: with the time limit Slurm applies ({timelimit.hms(limit_s)}) and a "
            f"{warning_s} s warning, SIG{name} may come {max(earliest, 0)} s after the job starts (Slurm may "
            f"signal up to {SLURM_SIGNAL_EARLY_S} s early): a program that has not installed its handler by then "
            f"ends and is requeued from scratch, up to max_restarts times; give -t {timelimit.hms(need)} or more"
            + (f", or --preempt-warning {fits} or less" if fits >= 1 else ""))


def _checkpoint(req: SubmitRequest, facts: SiteFacts, template: Template) -> Checkpoint:
    """The checkpoint signal (request, else template header, else profile
    ``submit.checkpoint_signal``, else none) and its warning, computed from the time limit Slurm
    will apply (``--time`` rounded up to whole minutes). A warning not shorter than that limit
    is clamped to half of it; one that leaves the program less than :data:`HANDLER_START_S`
    before the earliest signal is said (``too_early``). Raises :class:`UsageError` for an unknown signal, a negative
    warning or a bad ``--time`` / ``--switch-wait``."""
    if req.signal_s < 0:
        raise UsageError("--preempt-warning", f"must be >= 0 s (got {req.signal_s}; 0 turns checkpointing off)")
    limit_s = timelimit.parse_seconds(req.time, "--time") if req.time else None
    if limit_s is not None:
        limit_s = timelimit.slurm_limit(limit_s)
    if req.switch_wait is not None:
        timelimit.parse_seconds(req.switch_wait, "--switch-wait", minimum=0)
    for value, source in ((req.checkpoint_signal, "CLI --checkpoint-signal"),
                          (template.checkpoint_signal or None, f"template {template.name} checkpoint_signal"),
                          (facts.submit.checkpoint_signal or None, "profile submit.checkpoint_signal")):
        if value is not None:
            break
    else:
        value, source = "", "default: none (Slurm's own time limit)"
    name = value.strip().upper().removeprefix("SIG")
    if name in ("NONE", ""):
        name = ""
    elif name not in CHECKPOINT_SIGNALS:
        raise UsageError(f"--checkpoint-signal {value!r}" if source.startswith("CLI") else source,
                         f"expected one of {', '.join(CHECKPOINT_SIGNALS)} or none")
    warning_s = int(req.signal_s) if name else 0
    if req.signal_s != 120:
        warning_src = "CLI --preempt-warning"
    else:
        warning_src = "default --preempt-warning 120"
    if warning_s and limit_s is not None and warning_s >= limit_s:
        # a signal at or before the start would checkpoint and requeue at once, forever
        warning_s = max(1, limit_s // 2)
        warning_src = (f"clamped to half of the time limit Slurm applies ({timelimit.hms(limit_s)}): the "
                       f"{req.signal_s} s warning is not shorter than it")
    if not name and req.signal_s not in (0, 120):
        raise UsageError("--preempt-warning", "warns the ranks with the checkpoint signal: give --checkpoint-signal "
                         "(USR1, TERM, ...) for a program that handles it")
    if not warning_s:
        name = ""
    return Checkpoint(name, warning_s, source, warning_src, limit_s, _too_early(name, warning_s, limit_s, int(req.signal_s)))


def _resource_options(opts: _Options, req: SubmitRequest, facts: SiteFacts, template: Template, gpn: int,
                      ck: Checkpoint, shared: tuple[str, int] | None = None) -> None:
    """Name, partition, nodes, tasks, GPUs (or the ``shared`` gres), CPUs per GPU and time limit."""
    opts.add("job-name", req.name or template.name, "CLI --name" if req.name else "template name")
    opts.add("partition", facts.partition, _src(req.partition, "CLI --partition",
                                                f"profile partitions.{facts.partition} ({facts.partition_source})"))
    opts.add("nodes", req.nodes, "CLI --nodes" if req.nodes != 1 else "default (1)")
    ntasks = {"per-node": 1, "per-gpu": gpn, "single": 1}[template.tasks]
    opts.add("ntasks-per-node", ntasks, f"template {template.name} (tasks = {template.tasks})")
    if shared and req.cpus_per_gpu is not None:
        raise UsageError("--cpus-per-gpu", f"a --gres {shared[0]} job is allocated no whole GPU: give --cpus-per-task")
    if shared and req.cpus_per_task is not None:
        opts.add("cpus-per-task", req.cpus_per_task, "CLI --cpus-per-task")
    if shared:
        opts.add("gres", f"{shared[0]}:{shared[1]}", f"CLI --gres (partition {facts.partition} offers "
                 + ", ".join(f"{n}: {per} per GPU" for n, per, _ in facts.shares) + f", profile node_types."
                 f"{facts.node_type}.gpu_groups; no --gpus-per-node / --cpus-per-gpu: the job is allocated no "
                 "whole GPU)")
        _time_option(opts, req, ck)
        return
    gres = f"{facts.gpu_model}:{gpn}" if facts.gpu_model else str(gpn)
    if req.gpus_per_node is not None:
        gpn_src = "CLI --gpus-per-node"
    elif template.tasks == "single":
        gpn_src = f"template {template.name} (tasks = single: 1 GPU)"
    else:
        gpn_src = f"profile node_types.{facts.node_type}.gpu_count (all GPUs of the node type)"
    if facts.mig:
        # Slurm sets CUDA_VISIBLE_DEVICES to a device's unique_id when it has one (NVML autodetect
        # gives a MIG instance its MIG- UUID), else to its index (gres_common.c common_gres_set_env)
        gpn_src += (f", type: Slurm's name of the MIG instance (node_types.{facts.node_type}.gpu_groups mig, "
                    "nvml_name); one instance per process: Slurm sets the task's CUDA_VISIBLE_DEVICES to it "
                    "(its MIG- UUID under gres.conf AutoDetect=nvml, else its index)")
    elif facts.gpu_model:
        gpn_src += f", type from node_types.{facts.node_type}.gpu_model"
    opts.add("gpus-per-node", gres, gpn_src)
    if req.cpus_per_task is not None:
        opts.add("cpus-per-task", req.cpus_per_task, "CLI --cpus-per-task (instead of the profile's CPUs per GPU)")
    elif req.cpus_per_gpu is not None:
        opts.add("cpus-per-gpu", req.cpus_per_gpu, "CLI --cpus-per-gpu")
    elif facts.cpus_per_gpu is not None:
        opts.add("cpus-per-gpu", facts.cpus_per_gpu, f"profile node_types.{facts.node_type}.cpus_per_gpu")
    else:
        opts.add("cpus-per-gpu", facts.submit.cpus_per_gpu, "profile submit.cpus_per_gpu")
    _time_option(opts, req, ck)


def _cpus_per_rank(req: SubmitRequest, template: Template, opts: _Options, gpn: int) -> EnvVar | None:
    """``SLURMKIT_CPUS_PER_RANK``: how many CPUs the bind wrapper gives each rank (and sets as its
    ``SLURM_CPUS_PER_TASK`` and default ``OMP_NUM_THREADS``): the job's ``--cpus-per-gpu``, or its
    ``--cpus-per-task`` shared by the ranks of one task (a launcher's node task runs ``gpn``).
    None for a shared-GPU job without ``--cpus-per-task`` (the wrapper keeps its GPU's CPUs).
    Raises ``UsageError`` for both options, a count below 1, or fewer CPUs per task than ranks."""
    for name in ("cpus_per_gpu", "cpus_per_task"):
        value = getattr(req, name)
        if value is not None and value < 1:
            raise UsageError(f"--{name.replace('_', '-')} {value}", "give at least 1 CPU")
    if req.cpus_per_gpu is not None and req.cpus_per_task is not None:
        raise UsageError("--cpus-per-gpu", "give --cpus-per-gpu or --cpus-per-task, not both (sbatch refuses both)")
    given = {o.name: o for o in opts}
    if "cpus-per-task" in given:
        ranks = gpn if template.tasks == "per-node" else 1
        per = req.cpus_per_task // ranks
        if per < 1:
            raise UsageError(f"--cpus-per-task {req.cpus_per_task}", f"template {template.name} runs {ranks} ranks in "
                             "each node's task: give at least one CPU per rank")
        return EnvVar("SLURMKIT_CPUS_PER_RANK", str(per), f"CLI --cpus-per-task {req.cpus_per_task}"
                      + (f" / {ranks} ranks per task" if ranks > 1 else ""))
    if "cpus-per-gpu" in given:
        o = given["cpus-per-gpu"]
        return EnvVar("SLURMKIT_CPUS_PER_RANK", o.value, f"{o.source} (one GPU per rank)")
    return None


def _time_option(opts: _Options, req: SubmitRequest, ck: Checkpoint) -> None:
    """``--time`` as given, with the limit Slurm applies when it rounds it up."""
    if req.time:
        applied = (f"; Slurm applies {timelimit.hms(ck.limit_s)} (whole minutes, rounded up)"
                   if ck.limit_s is not None and ck.limit_s != timelimit.parse_seconds(req.time) else "")
        opts.add("time", req.time, "CLI --time" + applied)


def _nodelist_option(opts: _Options, req: SubmitRequest, facts: SiteFacts, idle_nodes) -> str | None:
    """``--nodelist``: the user's, else with ``prefer_locality`` idle nodes under one leaf
    switch; the nodelist written (None: none)."""
    if req.nodelist:
        opts.add("nodelist", req.nodelist, "CLI --nodelist")
        return req.nodelist
    if req.prefer_locality and req.nodes > 1:
        picked = placement.pick_nodelist(facts, req.nodes, idle_nodes or [],
                                         expand_nodelist(req.exclude) if req.exclude else ())
        if picked:
            leaf, chosen = picked
            nodelist = ",".join(chosen)
            opts.add("nodelist", nodelist, f"--prefer-locality: idle nodes (sinfo, not drained/down/reserved) under "
                     f"{leaf} (profile fabric.leaves)")
            return nodelist
    return None


def _array_option(opts: _Options, template: Template, params: dict) -> None:
    """``--array`` for a template with parameter ``sets`` (one task per set, ``throttle``)."""
    sets = params["sets"]
    if not isinstance(sets, list) or not sets or not all(isinstance(s, dict) for s in sets):
        raise TemplateError("--set sets", None, f"template {template.name!r}: must be a non-empty JSON list of objects")
    throttle = int(params.get("throttle", 0))
    opts.add("array", f"0-{len(sets) - 1}" + (f"%{throttle}" if throttle > 0 else ""),
             "template param sets (one array task each)" + (", % throttle from param throttle" if throttle else ""))


def _user_options(opts: _Options, req: SubmitRequest, facts: SiteFacts, shared: tuple[str, int] | None) -> None:
    """The options that map one to one onto sbatch's (``--mem-per-gpu``, when the job gives no
    memory, from ``node_types.<t>.mem_per_gpu``), then ``--sbatch`` pass-throughs."""
    if req.comment is not None:
        opts.add("comment", req.comment, "CLI --comment")
    if req.output is not None:
        opts.add("output", req.output, "CLI --output")
    if req.error is not None:
        opts.add("error", req.error, "CLI --error")
    if req.chdir is not None:
        opts.add("chdir", req.chdir, "CLI --chdir")
    for name in ("account", "qos", "mem", "mem_per_gpu", "constraint", "exclude", "reservation", "dependency",
                 "mail_type", "mail_user"):
        value = getattr(req, name)
        if value is not None and value != "":
            flag = name.replace("_", "-")
            opts.add(flag, value, f"CLI --{flag}")
    if req.mem and req.mem_per_gpu:
        raise UsageError("--mem", "give --mem (per node) or --mem-per-gpu, not both (sbatch refuses both)")
    if shared and req.mem_per_gpu:
        raise UsageError("--mem-per-gpu", f"is per allocated GPU and a --gres {shared[0]} job is allocated none: "
                         "give --mem (per node)")
    if not shared and not req.mem and not req.mem_per_gpu and facts.mem_per_gpu:
        opts.add("mem-per-gpu", facts.mem_per_gpu, f"profile node_types.{facts.node_type}.mem_per_gpu "
                 "(no --mem / --mem-per-gpu given)")
    if req.exclusive:
        opts.add("exclusive", True, "CLI --exclusive")
    for arg in req.sbatch_args:
        name, value = _sbatch_arg(arg)
        opts.add(name, value, "CLI --sbatch (passed through)")


def _requeue_options(opts: _Options, template: Template, ck: Checkpoint, max_restarts: int) -> None:
    """``--signal`` / ``--requeue`` / ``--open-mode`` for checkpoint-and-requeue or bad-node
    retries. Without a checkpoint signal no early signal is asked for: the time limit ends the
    job as Slurm ends any (TIMEOUT, not requeued)."""
    if ck.signal:
        opts.add("signal", f"B:USR2@{ck.warning_s}",
                 f"slurmkit checkpoint: the batch shell is warned {ck.warning_s} s before the time limit "
                 f"({ck.warning_source}) and sends SIG{ck.signal} to the ranks ({ck.signal_source}); a program "
                 f"without a SIG{ck.signal} handler "
                 + ("is stopped by it" if ck.signal != "URG" else "ignores it") + " and restarts from scratch")
        opts.add("requeue", True, "slurmkit checkpoint: requeue after the checkpoint (also lets Slurm's "
                 "PreemptMode=REQUEUE requeue)")
        opts.add("open-mode", "append", "slurmkit checkpoint: a requeued run appends to the same log")
    elif template.tasks != "single" and max_restarts > 0:
        # the launchers requeue a run without a node that could not take part (and Slurm requeues
        # after NODE_FAIL or a prolog failure) only when the job may be requeued
        opts.add("requeue", True, f"slurmkit retry without a bad node (max_restarts = {max_restarts}; "
                 "also lets Slurm requeue after NODE_FAIL or a prolog failure)")
        opts.add("open-mode", "append", "slurmkit retry: a requeued run appends to the same log")


def _environment(req: SubmitRequest, facts: SiteFacts) -> list[EnvVar]:
    """The variables the script exports: slurmkit's presets, then the site's NCCL settings."""
    env = [EnvVar("CUDA_DEVICE_ORDER", "PCI_BUS_ID", "slurmkit preset (GPU index = nvidia-smi order)")]
    env += nccl.nccl_env(facts, req.nccl_debug)
    for var in env:
        check_line_safe(var.name, var.value)
    return env


def _job_environment(req: SubmitRequest, env_file: tuple[str, str] | None) -> list[EnvVar]:
    """The job's own variables: ``--env-file``'s, then ``--env``'s, every assignment in that
    order, exported after the site's so they override them. Each is kept, as the lines of a
    shell script are: a later assignment of a name wins when the job runs, and one that reads
    the name (``LD_LIBRARY_PATH=/usr/local/lib:$LD_LIBRARY_PATH`` twice) builds on the earlier
    one, as does a variable that reads another assigned before it. Raises ``UsageError`` naming
    the item (or ``file:line``)."""
    out: list[EnvVar] = []
    if env_file is not None:
        path, text = env_file
        for a in jobenv.parse_env_file(text, path):
            how = "$NAME expanded on the node" if any(v for _, v in a.parts) else "as written"
            out.append(EnvVar(a.name, a.value, f"--env-file {path}:{a.line} ({how})",
                              shell_word(a.parts, f"--env-file {path}:{a.line}")))
    for item in req.job_env:
        name, value = jobenv.parse_assignment(item, "--env")
        out.append(EnvVar(name, value, "CLI --env (expanded on the node)",
                          shell_expand_word(value, f"--env {name}")))
    return out


#: programs that read ``$NAME`` in their own arguments (``bash -c '...'``): no --expand-args hint
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh"})

#: variables the script computes for every rank, which the job's environment may not set: why
COMPUTED = {
    "MASTER_ADDR": "the rendezvous address: the allocation's first node, as Slurm knows it",
    "RANK": "each rank's own, set by the template or its launcher",
    "LOCAL_RANK": "each rank's own, set by the template or its launcher",
    "WORLD_SIZE": "the job's rank count, set by the template or its launcher",
    "LOCAL_WORLD_SIZE": "the node's rank count, set by the template or its launcher",
    "CUDA_VISIBLE_DEVICES": "Slurm sets it to each task's GPUs",
    "SLURM_CPUS_PER_TASK": "set per rank to its CPU count; give --cpus-per-gpu or --cpus-per-task",
}


def _check_computed(job_env: list[EnvVar]) -> None:
    """Refuse a job variable (``--env`` / ``--env-file``) that the script computes itself
    (:data:`COMPUTED`, ``SLURMKIT_*``): it would be overridden silently. ``MASTER_PORT`` is
    kept (the rendezvous uses it instead of its own port), ``OMP_NUM_THREADS`` too (the ranks'
    default). Raises ``UsageError`` naming the item's source and the reason."""
    for v in job_env:
        why = COMPUTED.get(v.name) or ("slurmkit's own" if v.name.startswith("SLURMKIT_") else None)
        if why:
            raise UsageError(f"{v.name} ({v.source})", f"slurmkit computes {v.name} ({why}): it would be "
                             "overridden, so it is refused; leave it out")


def _shell_commands(cmds, what: str) -> list[str]:
    """``--setup`` / ``--teardown`` commands: shell text, one line each (refused otherwise)."""
    return [check_line_safe(what, str(c)) for c in cmds if str(c).strip()]


def _srun_options(opts) -> str:
    """``--srun-opt`` items as srun words; each must be an option (start with ``-``)."""
    for o in opts:
        if not str(o).startswith("-"):
            raise UsageError(f"--srun-opt {o!r}", "expected an srun option such as --label or --wait=60")
        check_line_safe("--srun-opt", str(o))
    return shell_join(opts, "--srun-opt")


def _retry_switches(opts: _Options, facts: SiteFacts) -> dict | None:
    """What a requeue without a bad node does to the job's ``--switches`` (None: it has none):
    ``value`` for ``scontrol update Switches=`` (``0`` clears it: profile
    ``submit.retry_switch_wait`` = "", the default; else the count with that wait) and what the
    job's output ``says``."""
    sw = next((o.value for o in opts if o.name == "switches"), None)
    if not sw:
        return None
    count = sw.split("@", 1)[0]
    wait = facts.submit.retry_switch_wait
    if not wait:
        return {"value": "0", "says": f"drops --switches={sw}: it may start on any free nodes"}
    timelimit.parse_seconds(wait, "profile submit.retry_switch_wait", minimum=0)
    return {"value": f"{count}@{wait}", "says": f"waits at most {wait} for --switches={count} (was {sw}; "
            "profile submit.retry_switch_wait)"}


def _container(params: dict, facts: SiteFacts) -> str:
    """srun's pyxis options for ``container_image`` ("" without one). Raises
    :class:`TemplateError` where the site does not enable containers."""
    image = params.get("container_image") or ""
    mounts = params.get("container_mounts") or ""
    if not image:
        return ""
    if not facts.submit.container:
        raise TemplateError("--set container_image", None, f"the site ({facts.source}) does not enable containers "
                            "(submit.container = false)")
    check_line_safe("--set container_mounts", mounts)
    # pyxis: the job's directory (the batch shell's working directory, -D) mounted at the same
    # path and used as the container's working directory, so relative paths mean the same
    return (shell_join([f"--container-image={image}"]) + " --container-mounts="
            + (shell_quote(mounts + ",") if mounts else "") + '"$PWD:$PWD" --container-workdir="$PWD"')


def _context(req: SubmitRequest, facts: SiteFacts, template: Template, params: dict, opts: _Options,
             env: list[EnvVar], gpn: int, ck: Checkpoint, max_restarts: int) -> dict:
    """The values the template reads."""
    ctx = {
        "template": template.name,
        "site": facts.source,
        "sbatch": [sbatch_line(o.name, o.value) for o in opts],
        "exports": [f"export {v.name}={shell_quote(v.value, v.name)}" for v in env],
        "command": shell_join(req.command),
        "argv": list(req.command),
        "command_python": _python_of(req.command),
        "nodes": req.nodes,
        "gpus_per_node": gpn,
        "node_gpus": facts.gpu_count,
        # every Slurm GPU index of the node (on a mixed node the job's GPUs need not come
        # first); empty when the profile lists no [[gpus]] (AutoDetect): the wrapper says so
        "gpu_cpus": " ".join(placement.gpu_cpu_map(facts, len(facts.gpus))),
        "rendezvous_interface": facts.submit.rendezvous_interface,
        "port_base": PORT_BASE,
        "port_span": PORT_SPAN,
        "preempt": bool(ck.signal),
        "checkpoint_signal": ck.signal,
        # what a launcher's agent (torchrun) ignores, its workers getting the default back
        "agent_ignores": ([ck.signal] if ck.signal and ck.signal != "TERM" else []) + ["TERM"],
        "max_restarts": max_restarts,
        "retry_switches": _retry_switches(opts, facts),
        "node_fault_reasons": facts.submit.node_fault_reasons,
        # the wait for a drain after a failure without evidence (profile submit.node_fault_wait_s):
        # a look every NODE_FAULT_STEP_S (less when the wait is shorter), as many as fit in it
        "node_fault_wait_s": facts.submit.node_fault_wait_s,
        "node_fault_wait_step_s": _wait_step(facts.submit.node_fault_wait_s),
        "node_fault_wait_checks": facts.submit.node_fault_wait_s // _wait_step(facts.submit.node_fault_wait_s),
        "container": _container(params, facts),
        "srun_opts": _srun_options(req.srun_opts),
        # srun --label (-l) puts "<task>: " before each line of the tasks' output, their logs included
        "srun_label": any(str(o) in ("--label", "-l") for o in req.srun_opts),
        "setup": _shell_commands(req.setup, "--setup"),
        "teardown": _shell_commands(req.teardown, "--teardown"),
        "p": params,
    }
    if "sets" in template.params:
        ctx["array_commands"] = [shell_join(_fill(req.command, s)) for s in params["sets"]]
        ctx["array_env"] = [[f"export SLURMKIT_PARAM_{_env_name(k)}={shell_quote(str(v))}" for k, v in s.items()]
                            for s in params["sets"]]
    return ctx


def _wait_step(wait_s: int) -> int:
    """Seconds between two looks for a drain in a wait of ``wait_s`` seconds (>= 1)."""
    return max(1, min(NODE_FAULT_STEP_S, wait_s))


def _sbatch_arg(arg: str) -> tuple[str, str | None]:
    """One pass-through sbatch option -> (long name, value or None for a flag):
    ``"--gres-flags=enforce-binding"`` -> ``("gres-flags", "enforce-binding")``, ``"-b now"`` ->
    ``("begin", "now")``. Raises :class:`UsageError` for a non-option or one slurmkit sets itself."""
    text = str(arg).strip()
    if text.startswith("--") and len(text) > 2:
        name, eq, value = text[2:].partition("=")
        if not eq and " " in name:
            name, _, value = name.partition(" ")
            eq = " "
    elif text.startswith("-") and len(text) >= 2 and text[1] in _SHORT:
        name = _SHORT[text[1]]
        value = text[2:].lstrip(" =")
        eq = "=" if value else ""
    else:
        raise UsageError(f"--sbatch {arg!r}", "expected an sbatch option such as --gres-flags=enforce-binding")
    name = name.strip()
    if name in OWN_OPTIONS:
        raise UsageError(f"--sbatch {arg!r}", f"slurmkit sets --{name} itself; use {OWN_OPTIONS[name]}")
    return name, (value.strip() if eq else None)


def _python_of(argv) -> str:
    """The command's interpreter when it is a Python (``/venv/bin/python3.11`` -> itself), else
    ``python3``: a launcher such as torchrun must run in the same environment as the training."""
    import os
    import re

    if argv and re.fullmatch(r"python(\d+(\.\d+)?)?", os.path.basename(argv[0])):
        return argv[0]
    return "python3"


def _env_name(key: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in str(key)).upper()


def _fill(argv, values: dict) -> list[str]:
    """``{key}`` placeholders in each argument replaced by the parameter set's values."""
    out = []
    for arg in argv:
        for k, v in values.items():
            arg = arg.replace("{" + str(k) + "}", str(v))
        out.append(arg)
    return out


def _jinja_env():
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_dir())), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True, autoescape=False)
    env.filters["q"] = lambda v: shell_quote(str(v))
    return env


def render(p: Plan) -> str:
    """The sbatch script text for plan ``p``."""
    import jinja2

    try:
        text = _jinja_env().from_string(p.template.source).render(**p.context)
    except jinja2.UndefinedError as exc:
        raise TemplateError(p.template.path, None, str(exc)) from None
    return text


def explain(p: Plan) -> str:
    """A table: every ``#SBATCH`` option and exported variable, then the template's run-time
    variables, each with where it came from."""
    lines = ["# #SBATCH options"]
    width = max([len(sbatch_line(o.name, o.value)) for o in p.options] + [20])
    for o in p.options:
        lines.append(f"{sbatch_line(o.name, o.value):<{width}}  <- {o.source}")
    lines.extend(f"# warning: {w}" for w in p.warnings)
    if not p.context.get("checkpoint_signal"):
        lines.append("# no checkpoint signal (--checkpoint-signal): nothing is sent before the time limit; the job "
                     "ends there as with plain sbatch (TIMEOUT, not requeued)")
    lines.append("# exported variables")
    for v in p.env:
        text = f"{v.name}={v.value}"
        lines.append(f"{text:<{width}}  <- {v.source}")
    lines.append(f"{'SLURMKIT_RESTART_COUNT':<{width}}  <- run time: ${{SLURM_RESTART_COUNT:-0}} (requeues so far)")
    for name, how in p.template.runtime_env.items():
        lines.append(f"{name:<{width}}  <- run time: {how}")
    if p.context.get("srun_opts"):
        lines.append("# extra srun options (the srun launching the ranks)")
        lines.append(f"{p.context['srun_opts']:<{width}}  <- CLI --srun-opt")
    for key, when in (("setup", "before"), ("teardown", "after")):
        if p.context.get(key):
            lines.append(f"# {key}: run in the batch shell once per job, {when} the launch")
            lines.extend(f"{cmd:<{width}}  <- CLI --{key}" for cmd in p.context[key])
    lines.append("# template parameters")
    for name, value in p.params.items():
        src = p.param_sources.get(name, "template default")
        lines.append(f"{name + '=' + repr(value):<{width}}  <- {src}")
    return "\n".join(lines) + "\n"
