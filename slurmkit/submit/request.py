"""The submit request, declared once: :class:`SubmitRequest`'s fields carry what the Python API
accepts for each (types, what to say when it is wrong) and how the command line spells it
(option names, help). ``slurmkit.submit(...)`` checks its keywords with :func:`check_type`;
``slurmkit submit``'s options are made by :func:`cli_fields`' declarations
(:mod:`slurmkit.cli.submit`), so a new field is one entry here.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

_PATH = (str, os.PathLike)


def _arg(default=None, *, types=(str,), what: str = "text", cli: tuple[str, ...] = (), help: str = "",
         metavar: str | None = None, multiple: bool = False, flag: bool = False, show_default: bool = False,
         factory=None, required: bool = False):
    """One request field: its default, the API's accepted ``types`` and ``what`` to call them,
    and its CLI ``cli`` option names (none: API only) with ``help``. ``multiple``: a repeatable
    option giving a tuple; ``flag``: an on/off option; ``required``: may not be None in the API."""
    meta = {"types": types, "what": what, "cli": cli, "help": help, "metavar": metavar, "multiple": multiple,
            "flag": flag, "show_default": show_default, "required": required}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


@dataclass(frozen=True)
class SubmitRequest:
    """What the user asked for (CLI flags or ``slurmkit.submit(...)`` arguments).

    ``nodes``: node count; ``gpus_per_node``: None = all GPUs of the node type (1 for
    single-GPU templates); ``gres``: a shared GPU request (``"shard:N"`` / ``"mps:N"``) instead
    of whole GPUs; ``time``: Slurm time string; ``sets``: ``--set`` text values;
    ``params``: typed parameter values (API); ``command``: argv run by every rank;
    ``checkpoint_signal``: the signal (``"USR1"``, ``"TERM"``, ...) the ranks get ``signal_s``
    seconds before the time limit, after which the job requeues itself (None: the template's or
    profile's default; ``"none"``: no checkpointing, Slurm's own time limit); ``signal_s``: that
    warning in seconds (0: off; clamped to half of the time limit Slurm applies when not shorter); ``switch_wait``: max wait
    for ``--switches`` (None: profile ``submit.switch_wait``); ``max_restarts``: self-requeues
    allowed (None: ``--set max_restarts`` or profile ``submit.max_restarts``).

    The options every job needs map one to one onto sbatch's: ``account`` (``--account``),
    ``qos``, ``mem`` (per node, Slurm size such as ``200G``), ``mem_per_gpu``, ``exclusive``,
    ``constraint`` (node features), ``exclude`` (hostlist), ``reservation``, ``dependency``
    (Slurm syntax, e.g. ``afterok:123``), ``mail_type`` / ``mail_user``; ``sbatch_args``: any
    other sbatch options (``("--gres-flags=enforce-binding", "--begin=now+1hour")``), each
    written as its own escaped ``#SBATCH`` line.

    Per-job settings: ``job_env`` (``NAME=VALUE`` items, ``$OTHER`` expanding on the node),
    ``env_file`` (a file of such lines, read at submit), ``srun_opts`` (extra options of the srun
    launching the ranks), ``setup`` / ``teardown`` (shell commands run once in the batch shell
    before / after the launch).
    """

    template: str
    command: tuple[str, ...] = ()
    site: str | None = _arg(types=_PATH, what="a profile name or path", cli=("--site",),
                            help="Site profile: shipped name (site/NAME.toml) or a TOML path. "
                                 "Default: $SLURMKIT_SITE or sandbox.")
    partition: str | None = _arg(what="a partition name", cli=("--partition", "-p"),
                                 help="Partition (default: the profile's default partition).")
    nodes: int = _arg(1, types=(int,), what="a node count (int)", cli=("--nodes", "-N"), help="Number of nodes.",
                      show_default=True, required=True)
    gpus_per_node: int | None = _arg(types=(int,), what="a GPU count (int)", cli=("--gpus-per-node",),
                                     help="GPUs per node (default: all of the node type; 1 for single-GPU templates).")
    cpus_per_gpu: int | None = _arg(types=(int,), what="a CPU count (int)", cli=("--cpus-per-gpu",),
                                    help="CPUs per allocated GPU (sbatch --cpus-per-gpu; default: the profile's "
                                         "node_types.<t>.cpus_per_gpu or submit.cpus_per_gpu). Each rank is bound to "
                                         "that many CPUs, its GPU's own first.")
    cpus_per_task: int | None = _arg(types=(int,), what="a CPU count (int)", cli=("--cpus-per-task",),
                                     help="CPUs per Slurm task instead of per GPU (sbatch --cpus-per-task: per rank "
                                          "for a template with a task per GPU, per node for a launcher such as "
                                          "torchrun, whose ranks share it evenly).")
    #: on a node type with several GPU groups (a mixed node), the gres type asked for (None:
    #: any of its GPUs, untyped); see :func:`slurmkit.submit.site.site_facts`
    gpu_type: str | None = _arg(what="a gres type of the node type's GPU groups", cli=("--gpu-type",),
                                help="On a node type with several GPU models: the gres type to ask for "
                                     "(default: any GPU, untyped).")
    #: a shared GPU gres asked for instead of whole GPUs: ``"shard:N"`` or ``"mps:N"`` (per node)
    gres: str | None = _arg(what="a shared GPU request such as 'shard:2' or 'mps:50'", cli=("--gres",),
                            metavar="shard:N|mps:N",
                            help="Part of a GPU instead of whole GPUs: N Slurm shards (shard:N) or N of the "
                                 "GPU's MPS share (mps:N, 100 = a whole GPU) per node, where the partition's "
                                 "node type offers them; single-process templates only.")
    time: str | None = _arg(what="a Slurm time string such as '1:00:00'", cli=("--time", "-t"),
                            help="Time limit (Slurm format, e.g. 1:00:00).")
    name: str | None = _arg(what="a job name", cli=("--name", "-J"), help="Job name (any text except newline/NUL).")
    comment: str | None = _arg(cli=("--comment",), help="Job comment.")
    output: str | None = _arg(types=_PATH, what="a path", cli=("--output", "-o"), help="Batch output path (sbatch --output).")
    error: str | None = _arg(types=_PATH, what="a path", cli=("--error", "-e"), help="Batch error path (sbatch --error).")
    chdir: str | None = _arg(types=_PATH, what="a path", cli=("--chdir", "-D"),
                             help="Working directory of the job (sbatch --chdir).")
    nodelist: str | None = _arg(what="a Slurm hostlist such as 'n[1-2]'", cli=("--nodelist", "-w"),
                                help="Run on these nodes (Slurm hostlist; overrides --prefer-locality).")
    sets: dict = _arg(types=(dict,), what="a dict of --set text values", cli=("--set",), multiple=True,
                      metavar="KEY=VALUE", help="A template parameter (see 'slurmkit templates show').", factory=dict)
    params: dict = _arg(types=(dict,), what="a dict of typed template parameters", factory=dict)
    prefer_locality: bool = _arg(False, types=(bool,), what="True or False", cli=("--prefer-locality",), flag=True,
                                 required=True,
                                 help="Pick a --nodelist of idle nodes under one leaf switch (sinfo + profile).")
    switches: bool = _arg(True, types=(bool,), what="True or False", cli=("--no-switches",), flag=True, required=True,
                          help="Do not ask Slurm for --switches.")
    switch_wait: str | None = _arg(what="a Slurm time string", cli=("--switch-wait",),
                                   help="Max wait for --switches (default: profile submit.switch_wait).")
    nccl_debug: str | None = _arg(what="an NCCL_DEBUG level", cli=("--nccl-debug",), metavar="LEVEL",
                                  help="Export NCCL_DEBUG=LEVEL (none by default).")
    checkpoint_signal: str | None = _arg(
        what="a signal name such as 'USR1'", cli=("--checkpoint-signal",), metavar="SIGNAL",
        help="Checkpoint and requeue before the time limit: the ranks get SIGNAL (USR1, USR2, TERM, ...) "
             "--preempt-warning seconds before it, then the job is requeued. Only for a program that handles "
             "SIGNAL: without a handler most signals end the process. Default: the template's, else the "
             "profile's submit.checkpoint_signal, else none (Slurm's own time limit); 'none' turns it off.")
    signal_s: int = _arg(120, types=(int,), what="seconds (int)", cli=("--preempt-warning",), show_default=True,
                         required=True,
                         help="With a checkpoint signal: seconds before the time limit (as Slurm applies it, in "
                              "whole minutes) the ranks get it; 0: off. Clamped to half of the time limit when "
                              "not shorter; requeues capped by --set max_restarts=N.")
    expand_args: bool = _arg(False, types=(bool,), what="True or False", cli=("--expand-args",), flag=True,
                             required=True,
                             help="Expand $NAME and ${NAME} in the program's arguments on the node, per rank "
                                  "($SLURM_JOB_ID, $RANK, env-file variables; unset: empty), nothing else: no "
                                  "globbing, splitting or command substitution. Off: arguments reach the program "
                                  "as written.")
    test_only: bool = _arg(False, types=(bool,), what="True or False", cli=("--test-only",), flag=True, required=True,
                           help="sbatch --test-only: print Slurm's start estimate, queue nothing.")
    account: str | None = _arg(what="an account name", cli=("--account", "-A"), help="Account to charge (sbatch --account).")
    qos: str | None = _arg(what="a QOS name", cli=("--qos", "-q"), help="Quality of service (sbatch --qos).")
    mem: str | None = _arg(what="a Slurm size such as '200G'", cli=("--mem",),
                           help="Memory per node, Slurm size (e.g. 200G; 0: all of it).")
    mem_per_gpu: str | None = _arg(what="a Slurm size such as '64G'", cli=("--mem-per-gpu",),
                                   help="Memory per allocated GPU, Slurm size (e.g. 64G).")
    exclusive: bool = _arg(False, types=(bool,), what="True or False", cli=("--exclusive",), flag=True, required=True,
                           help="Whole nodes only (sbatch --exclusive).")
    constraint: str | None = _arg(what="a feature expression", cli=("--constraint", "-C"),
                                  help="Node features (sbatch --constraint, e.g. 'h100&ib').")
    exclude: str | None = _arg(what="a Slurm hostlist", cli=("--exclude", "-x"),
                               help="Never run on these nodes (Slurm hostlist).")
    reservation: str | None = _arg(what="a reservation name", cli=("--reservation",), help="Run in this reservation.")
    dependency: str | None = _arg(what="a Slurm dependency such as 'afterok:123'", cli=("--dependency", "-d"),
                                  help="Slurm dependency, e.g. afterok:1234.")
    mail_type: str | None = _arg(what="Slurm mail types such as 'END,FAIL'", cli=("--mail-type",),
                                 help="Mail events (e.g. END,FAIL).")
    mail_user: str | None = _arg(what="an address", cli=("--mail-user",), help="Mail address.")
    sbatch_args: tuple[str, ...] = _arg((), types=(tuple, list, str), what="sbatch options (a list of str)",
                                        cli=("--sbatch",), multiple=True, metavar="OPTION",
                                        help="Any other sbatch option, passed through as its own escaped #SBATCH "
                                             "line (e.g. --sbatch=--gres-flags=enforce-binding).")
    max_restarts: int | None = _arg(types=(int,), what="a count (int)")
    job_env: tuple[str, ...] = _arg((), types=(tuple, list, dict), what="NAME=VALUE items (a list of str, or a dict)",
                                    cli=("--env",), multiple=True, metavar="NAME=VALUE",
                                    help="Set NAME for the job (repeatable), written into the script: $OTHER and "
                                         "${OTHER} in VALUE expand on the node (X=/a:$X prepends), nothing else does.")
    env_file: str | None = _arg(types=_PATH, what="a path", cli=("--env-file",), metavar="FILE",
                                help="NAME=VALUE lines (# comments) read at submit, set as --env; --env wins.")
    srun_opts: tuple[str, ...] = _arg((), types=(tuple, list, str), what="srun options (a list of str)",
                                      cli=("--srun-opt",), multiple=True, metavar="OPTION",
                                      help="An extra option for the srun that launches the ranks (repeatable; "
                                           "e.g. --srun-opt=--label).")
    setup: tuple[str, ...] = _arg((), types=(tuple, list, str), what="shell commands (a list of str)",
                                  cli=("--setup",), multiple=True, metavar="CMD",
                                  help="A shell command run in the batch shell once per job before the launch "
                                       "(repeatable; e.g. 'source env.sh'); a failing one ends the job.")
    teardown: tuple[str, ...] = _arg((), types=(tuple, list, str), what="shell commands (a list of str)",
                                     cli=("--teardown",), multiple=True, metavar="CMD",
                                     help="A shell command run in the batch shell once per job after the launch "
                                          "(repeatable), whatever the ranks' status; its failure is reported, "
                                          "not the job's.")


def api_fields() -> dict[str, dataclasses.Field]:
    """The request's fields the API takes as keywords (all but ``template`` and ``command``)."""
    return {f.name: f for f in dataclasses.fields(SubmitRequest) if f.name not in ("template", "command")}


def cli_fields() -> list[dataclasses.Field]:
    """The request's fields that ``slurmkit submit`` has an option for, in declaration order."""
    return [f for f in api_fields().values() if f.metadata["cli"]]


def check_type(name: str, value) -> None:
    """Raise ``TypeError`` naming keyword ``name`` when ``value`` is not what its field takes
    (None is accepted where the field may be unset; a bool is never an int)."""
    meta = api_fields()[name].metadata
    types = meta["types"]
    if value is None and not meta["required"]:
        return
    if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
        raise TypeError(f"slurmkit.submit(): {name} must be {meta['what']}, not {type(value).__name__} ({value!r})")
