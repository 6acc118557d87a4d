"""``slurmkit hooks``: run a hook by hand, and install / uninstall the hooks into slurm.conf.

Slurm itself runs the shims written by ``install`` (they skip click for speed); ``prolog``,
``epilog`` and ``healthcheck`` here run the same code for an admin at a shell.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import click

from slurmkit.cli.options import site_option
from slurmkit.errors import UsageError
from slurmkit.hooks.config import DEFAULTS

# the largest HealthCheckInterval and PrologEpilogTimeout slurm.conf takes (uint16_t in
# Slurm's slurm_conf_t; scontrol: "HealthCheckInterval value (86400) is greater than 65535")
SLURM_UINT16_MAX = 65535


def _run_hook(kind: str, config: str | None) -> None:
    from slurmkit.hooks.main import main

    sys.exit(main(kind, config))


_config_opt = click.option("--config", "config", type=click.Path(dir_okay=False),
                           help="Hooks config (default: $SLURMKIT_HOOKS_CONFIG).")


@click.group("hooks")
def cli():
    """Prolog / epilog / healthcheck hooks and their slurm.conf install."""


@cli.command("prolog")
@_config_opt
def prolog_cmd(config):
    """Run the prolog now (exit 1: hardware evidence, the node was drained)."""
    _run_hook("prolog", config)


@cli.command("epilog")
@_config_opt
def epilog_cmd(config):
    """Run the epilog now (cleanup, energy spool)."""
    _run_hook("epilog", config)


@cli.command("healthcheck")
@_config_opt
def healthcheck_cmd(config):
    """Run the periodic health check now (drain / resume)."""
    _run_hook("healthcheck", config)


@cli.command("gpu-reset")
@click.argument("gpu")
@click.option("--config", "config", type=click.Path(dir_okay=False),
              help="Hooks config (default: $SLURMKIT_HOOKS_CONFIG, else slurmkit-hooks.toml beside $SLURM_CONF or "
                   "/etc/slurm/slurm.conf).")
@click.option("--node", help="Slurm node name (default: this host's short name).")
@click.option("--done", is_flag=True, help="Record a reset made another way (nvidia-smi -r by hand, a BMC, a "
                                           "vendor tool) instead of running one.")
@click.option("--nvidia-smi", "nvidia_smi", default="/usr/bin/nvidia-smi", show_default=True,
              help="The nvidia-smi that resets the GPU (--gpu-reset -i <bus id>).")
@click.option("--timeout", type=float, default=120.0, show_default=True, help="Seconds the reset may take.")
def gpu_reset_cmd(gpu, config, node, done, nvidia_smi, timeout):
    """Reset one GPU and record it, so the drain its hardware XID holds ends (other GPUs' XIDs
    stay). GPU: its PCI bus id, NVML index or UUID. Exit 1 when the reset fails (nothing
    recorded). The driver logs nothing on a reset, hence this record: docs/hooks.md."""
    import os
    import time

    from slurmkit.hooks import gpureset, nodestate
    from slurmkit.hooks.config import HookConfigError, load
    from slurmkit.hooks.main import node_name

    path = config or _default_config()
    if not os.path.isfile(path):
        raise UsageError("--config", f"no hooks config at {path} (install writes slurmkit-hooks.toml beside "
                                     "slurm.conf): pass --config or set SLURMKIT_HOOKS_CONFIG")
    try:
        cfg = load(path)
    except HookConfigError as exc:
        raise UsageError("--config", str(exc)) from None
    node = node or node_name(os.environ)
    spec = cfg.snapshot_for(node) or "live"
    state = None
    if not gpu.strip().count(":") or str(spec) != "live":  # index / UUID, or a replayed node: read its GPUs
        from slurmkit.health.runner import read_state

        state = read_state(spec, node=node)
    try:
        bus, uuid = gpureset.resolve(gpu, state)
        gpureset.check_present(bus, state)  # a bus id the node does not have is refused
    except ValueError as exc:
        raise UsageError("GPU", str(exc)) from None
    if done:
        how = "recorded by hand (--done)"
    else:
        ok, out = gpureset.reset(bus, nvidia_smi, timeout)
        click.echo(out)
        if not ok:
            click.echo(f"GPU {bus}: the reset failed; nothing recorded (its XID still holds the drain)", err=True)
            sys.exit(1)
        how = "nvidia-smi --gpu-reset"
    live = str(spec) == "live"
    try:
        kmsg = cfg.kmsg_for(node)
        entry = gpureset.record(cfg.state_dir, node, bus, boot_id=nodestate.boot_id(), uuid=uuid, how=how,
                                kmsg_seq=gpureset.last_kmsg_seq(str(kmsg or "/dev/kmsg")) if live else None)
    except OSError as exc:
        raise UsageError("--config", f"cannot record the reset in {cfg.state_dir}: {exc.strerror or exc}") from None
    if live and cfg.kmsg_for(node) is None:
        gpureset.log_to_kernel(f"slurmkit: GPU {bus}{' ' + uuid if uuid else ''} reset ({how})")
    click.echo(f"GPU {bus} reset {how} at {time.strftime('%Y-%m-%dT%H:%M:%S', time.localtime(entry['at_s']))}: "
               f"recorded in {gpureset.path(cfg.state_dir, node)}; the next health check ends the drain its "
               f"hardware XIDs hold (other GPUs' stay)")


#: the words of a log line ``hooks log --drains`` keeps: drains, would-drains, resumes, failed
#: checks and slurmkit's own trouble (messages of slurmkit/hooks/flows.py)
DRAIN_WORDS = ("drain", "resum", " fail: ", "own trouble")


#: slurm.conf's built-in path (Slurm's DEFAULT_SLURM_CONF in the Debian and RPM builds)
DEFAULT_SLURM_CONF = "/etc/slurm/slurm.conf"


def _default_config() -> str:
    """The hooks config ``hooks log`` reads: ``$SLURMKIT_HOOKS_CONFIG``, else the first
    ``slurmkit-hooks.toml`` that exists beside ``$SLURM_CONF`` or beside
    :data:`DEFAULT_SLURM_CONF` (on a configless node ``$SLURM_CONF`` names slurmd's cache,
    which holds no hooks config: install's is where it was copied), else the first of those
    (the error names it)."""
    from slurmkit.hooks.install import CONFIG

    if os.environ.get("SLURMKIT_HOOKS_CONFIG"):
        return os.environ["SLURMKIT_HOOKS_CONFIG"]
    found = [os.path.join(os.path.dirname(c), CONFIG) for c in (os.environ.get("SLURM_CONF"), DEFAULT_SLURM_CONF) if c]
    return next((p for p in found if os.path.isfile(p)), found[0])


@cli.command("log")
@click.option("--config", "config", type=click.Path(dir_okay=False),
              help="Hooks config (default: $SLURMKIT_HOOKS_CONFIG, else slurmkit-hooks.toml beside $SLURM_CONF or "
                   "/etc/slurm/slurm.conf).")
@click.option("--node", help="Only this node's lines (default: every node's, merged by time).")
@click.option("-n", "--lines", "count", type=int, default=30, show_default=True, help="Show the last N lines.")
@click.option("--drains", is_flag=True, help="Only drains, would-drains, resumes, failed checks and own trouble.")
def log_cmd(config, node, count, drains):
    """The hooks' recent log lines: each run's verdict, drains and would-drains.

    Read from <state_dir>/<node>/hooks.log, which the hooks write where syslog is absent (the
    sandbox, containers) or with log_file = true in their config; elsewhere the lines are in
    syslog: journalctl -t slurmkit-healthcheck -t slurmkit-prolog -t slurmkit-epilog. Exit 1
    when there is no log file to read."""
    from slurmkit.hooks.config import HookConfigError, load
    from slurmkit.hooks.log import FILE_NAME, log_path

    path = config or _default_config()
    try:
        cfg = load(path)
    except HookConfigError as exc:
        raise UsageError("--config", f"{exc} (are the hooks installed? slurmkit hooks install --slurm-conf ...)") from None
    if node:
        files = [log_path(cfg.state_dir, node)]
    else:
        files = sorted(str(p) for p in Path(cfg.state_dir).glob(f"*/{FILE_NAME}"))
    rows = []
    for f in files:
        for name in (f + ".1", f):  # the moved-away older file first
            try:
                with open(name, encoding="utf-8", errors="replace") as fh:
                    rows += [line.rstrip("\n") for line in fh if line.strip()]
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise UsageError("--config", f"{name}: {exc.strerror or exc}") from None
    if not rows:
        where = log_path(cfg.state_dir, node or "<node>")
        click.echo(f"no hook log lines in {where}: the hooks write it where syslog is absent or with "
                   f"'log_file = true' in {path}; on a node with syslog: journalctl -t slurmkit-healthcheck "
                   "-t slurmkit-prolog -t slurmkit-epilog (or grep slurmkit- /var/log/syslog)", err=True)
        sys.exit(1)
    if drains:
        rows = [r for r in rows if any(w in r for w in DRAIN_WORDS)]
    rows.sort(key=lambda r: r.split(" ", 1)[0])  # ISO time first: stable, so a run's lines stay in order
    for r in rows[-count:] if count > 0 else rows:
        click.echo(r)


def _show(plan, nothing: str, dry_run: bool, notes: bool) -> bool:
    """Print ``plan``'s diff (or ``nothing``); on a dry run also its notes (when ``notes``) and
    say nothing was written. Returns ``dry_run``."""
    click.echo(plan.diff() or nothing + "\n", nl=False)
    if plan.diff():
        click.echo("")
    if dry_run:
        for note in plan.notes if notes else ():
            click.echo(note)
        click.echo("dry run: nothing written")
    return dry_run


def _apply(plan, path: Path, installing: bool, dirs=()) -> list[str]:
    """:func:`slurmkit.hooks.install.apply`, then create ``dirs`` (``(path, mode)`` pairs);
    returns the backups written. An OSError becomes :class:`~slurmkit.hooks.install.InstallError` naming the file."""
    from slurmkit.hooks import install as inst

    try:
        backups = inst.apply(plan, path, installing=installing)
        for d, mode in dirs:
            Path(d).mkdir(parents=True, exist_ok=True, mode=mode)
    except OSError as exc:
        raise inst.InstallError(getattr(exc, "filename", None) or path, None, exc.strerror or str(exc)) from None
    return backups


@cli.command("install")
@click.option("--slurm-conf", "slurm_conf", required=True, type=click.Path(dir_okay=False),
              help="The cluster's slurm.conf (Include'd files are followed).")
@click.option("--dry-run", is_flag=True, help="Show the diff and the files to create; change nothing.")
@click.option("--print", "print_lines", is_flag=True,
              help="For a generated slurm.conf (Puppet, Ansible, cluster-toolkit): print the slurm.conf lines to "
                   "add to its source and the files to deploy, instead of editing anything.")
@click.option("--chain", is_flag=True, help="Keep a foreign HealthCheckProgram (NHC) and run it after slurmkit's "
                                            "check, bounded (--chain-timeout); uninstall gives the line back.")
@click.option("--chain-timeout", "chain_timeout", default=30, show_default=True,
              help="With --chain: the most seconds the site's health check may run, after slurmkit's (it also "
                   "gets only what is left of slurmd's 60 s); past it its process group is killed.")
@click.option("--configless", is_flag=True, help="Go ahead on a configless cluster: copy the files install lists "
                                                 "to every node.")
@click.option("--replace", is_flag=True, help="Take over a foreign HealthCheckProgram / PrologEpilogTimeout / "
                                              "HealthCheckInterval (the old lines are kept for uninstall).")
@site_option(help="Site profile (file or shipped name): [health] mode, deadline, thresholds, pins.")
@click.option("--mode", type=click.Choice(["enforce", "observe"]), default="observe", show_default=True,
              help="observe: log and count what the hooks would drain, kill or reset, change nothing on the "
                   "node; enforce: do it. Start in observe; switch once the log shows only what you agree with.")
@click.option("--state-dir", default=DEFAULTS["state_dir"], show_default=True)
@click.option("--spool-dir", default=DEFAULTS["spool_dir"], show_default=True)
@click.option("--textfile-dir", default=DEFAULTS["textfile_dir"], show_default=True)
@click.option("--snapshot", "snapshots", multiple=True, metavar="NODE=FILE",
              help="Replay a recorded GPU snapshot on NODE instead of live NVML (repeatable).")
@click.option("--interval", default=300, show_default=True, help="HealthCheckInterval (seconds).")
@click.option("--timeout", default=60, show_default=True,
              help="PrologEpilogTimeout (seconds) where the site has none (it bounds the site's Prolog/Epilog "
                   "too); 0 leaves it unset.")
@click.option("--resume-after", default=DEFAULTS["resume_after"], show_default=True,
              help="Clean health checks before resuming.")
@click.option("--python", "python", default=None, metavar="PATH",
              help="The interpreter the shims run (default: the one running install). It must import slurmkit; "
                   "every user must be able to run it (the mid-run retry's Xid query runs it as the job's user).")
@click.pass_context
def install_cmd(ctx, slurm_conf, dry_run, print_lines, chain, chain_timeout, configless, replace, site, mode, state_dir, spool_dir, textfile_dir,
                snapshots, interval, timeout, resume_after, python):
    """Add the hooks to slurm.conf without overwriting site values (see slurmkit/hooks/install.py).

    On a sandbox's slurm.conf every node replays its GPUs' snapshot (``slurmkit sandbox gpu``
    breaks one), the state, spool and textfile folders are under the sandbox's ``hooks/`` and
    the log lines also go to a file (``slurmkit hooks log``), unless --snapshot or the folder
    options say otherwise."""
    from slurmkit.hooks import install as inst
    from slurmkit.hooks.config import render
    from slurmkit.sandbox.gpus import sandbox_hook_defaults
    from slurmkit.slurm import conf as sconf

    sandbox = sandbox_hook_defaults(Path(slurm_conf))
    sandbox_notes = []
    if sandbox is not None:
        given = {name for name in ("state_dir", "spool_dir", "textfile_dir")
                 if ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT}
        state_dir, spool_dir, textfile_dir = (v if k in given else sandbox[k] for k, v in
                                              (("state_dir", state_dir), ("spool_dir", spool_dir),
                                               ("textfile_dir", textfile_dir)))
        named = {item.partition("=")[0] for item in snapshots}
        extra = [f"{n}={p}" for n, p in sandbox["snapshots"].items() if n not in named]
        snapshots = tuple(snapshots) + tuple(extra)
        if extra:
            sandbox_notes.append(f"sandbox {sandbox['dir']}: nodes {', '.join(e.partition('=')[0] for e in extra)} "
                                 f"replay their GPUs' snapshots in {sandbox['dir'] / 'hooks' / 'gpus'} "
                                 "('slurmkit sandbox gpu NODE --break FAULT' breaks one); state, spool and "
                                 f"textfile folders under {sandbox['dir'] / 'hooks'}")

    # (slurm.conf keeps both in 16 bits: scontrol reconfigure refuses a larger value, so the
    # install would leave a slurm.conf Slurm does not take)
    for opt, key, value in (("--interval", "HealthCheckInterval", interval), ("--timeout", "PrologEpilogTimeout", timeout)):
        if not 0 <= value <= SLURM_UINT16_MAX:
            raise UsageError(opt, f"{value} s: Slurm takes 0 to {SLURM_UINT16_MAX} s ({key} is a 16-bit number in "
                             "slurm.conf; scontrol reconfigure refuses more)")
    snaps = {}
    for item in snapshots:
        node, eq, path = item.partition("=")
        if not eq or not node or not path:
            raise UsageError("--snapshot", f"{item!r}: want NODE=FILE")
        snaps[node] = path
    from slurmkit.profile.health import Health

    profile, health = None, Health()
    if site:  # checked now (a bad profile would be own trouble on every job), written as a path
        from slurmkit.profile import load_profile

        loaded = load_profile(site)
        profile = loaded.source
        health = loaded.health
    deadline_s = health.deadline_s
    path = Path(slurm_conf).absolute()
    scontrol = shutil.which("scontrol")
    tree = sconf.load_tree(path)
    found = sconf.find_effective(tree, "HealthCheckNodeState")  # install leaves it as it is
    text = render(path, conf_cache=inst.conf_cache_of(tree), profile=profile, mode=mode, state_dir=state_dir,
                  spool_dir=spool_dir, textfile_dir=textfile_dir, resume_after=resume_after,
                  snapshots=snaps, slurm_bin_dir=str(Path(scontrol).parent) if scontrol else None,
                  log_file=True if sandbox is not None else None,
                  health_check_node_state=found[1].get("HealthCheckNodeState") if found else "ANY")
    # the shims' interpreter: its path as given (a venv's python is a link: not resolved), checked
    # to import slurmkit's hooks, and what it reads checked for every user
    py = sys.executable if python is None else os.path.abspath(python)
    imports = inst.hooks_imports() if python is None else inst.interpreter_imports(py)
    spec = inst.InstallSpec(python=py, config=text, interval_s=interval, timeout_s=timeout or None,
                            replace=replace, chain=chain, chain_timeout_s=chain_timeout, configless=configless,
                            deadline_s=deadline_s,
                            active_timeout_s=health.active_timeout_s if health.active_check else None,
                            resume_after=resume_after)
    plan = inst.plan_install(tree, spec)
    plan.notes.extend(inst.interpreter_warnings(spec.python, imports))
    plan.notes.extend(sandbox_notes)
    if print_lines:
        click.echo(inst.printed(plan), nl=False)
        for note in plan.notes:
            click.echo("# " + note)
        click.echo("# --print: nothing written")
        return
    if _show(plan, "nothing to change: the hooks are already installed", dry_run, notes=True):
        return
    backups = _apply(plan, path, True, dirs=((state_dir, 0o700), (spool_dir, 0o700), (textfile_dir, 0o777)))
    for b in backups:
        click.echo(f"backup: {b}")
    for note in plan.notes:
        click.echo(note)


@cli.command("uninstall")
@click.option("--slurm-conf", "slurm_conf", required=True, type=click.Path(dir_okay=False))
@click.option("--dry-run", is_flag=True, help="Show what would be undone; change nothing.")
def uninstall_cmd(slurm_conf, dry_run):
    """Remove exactly what install added (backups restored byte for byte when unchanged since)."""
    from slurmkit.hooks import install as inst
    from slurmkit.slurm import conf as sconf

    path = Path(slurm_conf).absolute()
    manifest = inst.read_manifest(path)
    plan = inst.plan_uninstall(sconf.load_tree(path), manifest)
    if _show(plan, "nothing to undo: the hooks are not installed", dry_run, notes=True):
        return
    _apply(plan, path, False)
    for note in plan.notes:
        click.echo(note)
