"""``slurmkit sandbox up|down|status|env``: a real local Slurm cluster on this machine."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import click

from slurmkit.cli import want_json

_dir_option = click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path),
                           default=None, help="All config and state under DIR (default: a per-user state directory).")
_find_option = click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path), default=None,
                            help="The sandbox in DIR (default: the one running, of those 'sandbox up' started).")


def _sandbox(directory, spec=None):
    from slurmkit.sandbox import Sandbox

    return Sandbox(directory, spec)


def _running(directory, start_default: bool = False):
    """The sandbox in ``directory``; without one, the only running sandbox of those ``sandbox up``
    remembered (``slurmkit.sandbox.cluster.running_sandboxes``). None running: with
    ``start_default`` the default directory's, else a UsageError (exit 2) listing the stopped ones;
    several running: a UsageError listing them."""
    from slurmkit.errors import UsageError
    from slurmkit.sandbox.cluster import known_dirs, running_sandboxes

    if directory is not None:
        return _sandbox(directory)
    running = running_sandboxes()
    if len(running) == 1:
        return running[0]
    if running:
        raise UsageError("--dir", f"{len(running)} sandboxes are running: "
                         f"{', '.join(str(sb.dir) for sb in running)}; choose one with --dir DIR")
    if start_default:
        return _sandbox(None)
    stopped = known_dirs()
    listed = f" (stopped: {', '.join(map(str, stopped))})" if stopped else ""
    raise UsageError("--dir", f"no sandbox is running{listed}; start one with 'slurmkit sandbox up [--dir DIR]'")


def _remember(sb) -> None:
    """Remember ``sb`` (``slurmkit.sandbox.cluster.remember``) once it has a ``sandbox.json``, so
    that env, status, down and demo find it without --dir; a registry that cannot be written
    only costs that convenience (a warning)."""
    from slurmkit.sandbox.cluster import registry_path, remember

    try:
        if (sb.dir / "sandbox.json").is_file():
            remember(sb.dir)
    except OSError as exc:
        click.echo(f"sandbox: warning: cannot remember {sb.dir} in {registry_path()}: {exc.strerror or exc}",
                   err=True)


def _exports(sb) -> str:
    lines = []
    for k, v in sb.env().items():
        if k == "PATH":
            # the release's Slurm commands first, in front of the shell's own PATH
            lines.append(f'export PATH={shlex.quote(str(sb.bin_dir))}:"$PATH"')
        else:
            lines.append(f"export {k}={shlex.quote(v)}")
    return "\n".join(lines)


@click.group("sandbox")
def cli():
    """Run a real Slurm cluster on this machine from Debian's packages (root needed).

    munge, MariaDB, slurmdbd, slurmctld and N slurmd (each in its own UTS namespace, on its
    own loopback address), with accounting, fake GPUs and two leaf switches under one spine.
    """


@cli.command()
@click.option("--nodes", type=int, default=4, show_default=True, help="Number of slurmd nodes (n1..nN).")
@click.option("--gpus-per-node", type=int, default=4, show_default=True, help="Fake GPUs per node.")
@click.option("--gpu-type", default="h100", show_default=True, help="GPU gres type.")
@click.option("--port-base", type=int, default=6817, show_default=True,
              help="slurmctld port; slurmdbd = +2, MariaDB = +4, slurmd of node i = +10+i.")
@_dir_option
@click.option("--slurm", "slurm", default=None, metavar="VERSION",
              help="Slurm release: 22.05 (this machine's Debian 12 packages; the default for a new sandbox), "
                   "24.11 (Debian 13) or 26.05 / newest (Debian unstable); a newer one runs from a Debian root "
                   "filesystem built once (mmdebstrap) and kept in ~/.cache/slurmkit/rootfs. A sandbox made "
                   "before keeps its own release.")
@click.option("--install", is_flag=True, help="apt-get the Debian packages when missing (daemons not started by apt).")
@click.option("--no-warmup", is_flag=True, help="Skip the warm-up job.")
def up(nodes, gpus_per_node, gpu_type, port_base, directory, slurm, install, no_warmup):
    """Start the cluster (idempotent); prints the shell exports to use it.

    Exit 1 (``slurmkit: error: ...``) when it cannot start or an option cannot be laid out."""
    from slurmkit.sandbox.config import SandboxSpec
    from slurmkit.sandbox.releases import release

    if slurm is None:   # the release the sandbox in this directory was made with, else the default
        slurm = _sandbox(directory).spec.slurm
    spec = SandboxSpec(nodes=nodes, gpus_per_node=gpus_per_node, gpu_type=gpu_type, port_base=port_base,
                       host_cpus=tuple(sorted(os.sched_getaffinity(0))), slurm=release(slurm).name)
    sb = _sandbox(directory, spec)
    try:
        sb.up(install=install, warmup=not no_warmup, progress=lambda m: click.echo(f"sandbox: {m}", err=True))
    finally:
        _remember(sb)
    click.echo(_exports(sb))


@cli.command()
@_find_option
@click.option("--purge", is_flag=True, help="Also delete the directory (database, state, logs).")
def down(directory, purge):
    """Stop every daemon 'up' started (by pid file).

    Exit 2 without --dir when no sandbox, or several, are running."""
    sb = _running(directory)
    if not sb.dir.exists():
        click.echo(f"sandbox: nothing in {sb.dir}", err=True)
        return
    sb.down(purge=purge, progress=lambda m: click.echo(f"sandbox: {m}", err=True))
    if purge:
        from slurmkit.sandbox.cluster import forget

        forget(sb.dir)
    click.echo(f"sandbox: down ({sb.dir})", err=True)


@cli.command()
@_find_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def status(ctx, directory, as_json):
    """Each daemon (pid, alive) and sinfo. Exit 0 when all are up, 1 otherwise; 2 without --dir
    when no sandbox, or several, are running."""
    sb = _running(directory)
    if not (sb.dir / "sandbox.json").exists():
        click.echo(f"sandbox: nothing in {sb.dir} (no sandbox.json: 'slurmkit sandbox up --dir {sb.dir}' makes one)",
                   err=True)
        ctx.exit(1)
    daemons = sb.daemons()
    up_ = bool(daemons) and all(d["alive"] for d in daemons)
    if want_json(ctx, as_json):
        click.echo(json.dumps({"dir": str(sb.dir), "up": up_, "slurm": sb.spec.slurm,
                               "slurm_version": sb.slurm_version(), "debian": sb.release.debian,
                               "daemons": daemons, "env": sb.env()}, indent=1))
    else:
        click.echo(f"sandbox in {sb.dir}: {'up' if up_ else 'down'}, Slurm "
                   f"{sb.slurm_version() or sb.spec.slurm} ({sb.release.debian})")
        for d in daemons:
            click.echo(f"  {d['name']:<12} pid {d['pid'] or '-':<8} {'alive' if d['alive'] else 'dead'}")
        if up_:
            click.echo(sb.sinfo().rstrip())
    ctx.exit(0 if up_ else 1)


@cli.command()
@_find_option
def env(directory):
    """Print the shell exports (eval "$(slurmkit sandbox env)").

    Exit 2 without --dir when no sandbox, or several, are running."""
    click.echo(_exports(_running(directory)))


@cli.command()
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="The sandbox in DIR (default: the one running, else a new one in a per-user state directory).")
@click.option("--port-base", type=int, default=None,
              help="Ports of a sandbox this starts (default 6817; a running one keeps its own).")
@click.option("--no-install", is_flag=True, help="Do not apt-get missing Debian packages.")
def demo(directory, port_base, no_install):
    """Run slurmkit's main job end to end on the sandbox (starts it when needed).

    Exit 1 (``slurmkit: error: ...``) naming the step that went wrong; 2 without --dir when
    several sandboxes are running."""
    from slurmkit.sandbox.demo import run_demo

    sb = _running(directory, start_default=True)
    try:
        code = run_demo(sb.dir, install=not no_install, port_base=port_base)
    finally:
        _remember(sb)
    raise SystemExit(code)


@cli.command("gpu")
@click.argument("node", required=False)
@click.option("--break", "fault", metavar="FAULT",
              help="Give the node's GPU this fault: xid79, off-bus, dbe or row-remap (--list says what each is).")
@click.option("--fix", is_flag=True, help="Make the node's GPUs healthy again.")
@click.option("--gpu", "gpu_index", type=int, default=1, show_default=True, help="NVML index of the GPU --break breaks.")
@click.option("--list", "list_faults", is_flag=True, help="List the faults, each with the real capture it is taken from.")
@_find_option
def gpu(node, fault, fix, gpu_index, list_faults, directory):
    """Break or fix a GPU of a sandbox node (NODE: n1, n2, ...): its snapshot, which the hooks
    replay, is edited; the next hook run on the node sees it.

    Exit 2 for an unknown node or fault. Bringing a node back: docs/hooks.md."""
    from slurmkit.errors import UsageError
    from slurmkit.sandbox import gpus as sgpus

    if list_faults:
        for name, f in sgpus.FAULTS.items():
            click.echo(f"{name:<10} {f.summary}\n{'':<10} from {f.source}")
        return
    if not node or (fault is None) == (not fix):
        raise UsageError("NODE", "give a NODE and one of --break FAULT or --fix (--list: the faults)")
    if fault is not None and fault not in sgpus.FAULTS:
        raise UsageError("--break", f"{fault!r}: not a fault; one of {', '.join(sgpus.FAULTS)}")
    sb = _running(directory)
    if node not in sb.node_names:
        raise UsageError("NODE", f"{node!r}: the sandbox in {sb.dir} has nodes {', '.join(sb.node_names)}")
    if fault is not None and not 0 <= gpu_index < sb.spec.gpus_per_node:
        raise UsageError("--gpu", f"{gpu_index}: {node} has NVML GPUs 0 to {sb.spec.gpus_per_node - 1}")
    snap_dir = sb.dir / sgpus.SNAPSHOT_SUBDIR
    old = sgpus.set_fault(snap_dir, node, fault, gpu_index)
    (path,) = sgpus.write_node_snapshots(snap_dir, [node], sb.spec.gpus_per_node, sb.spec.gpu_type)
    hooks_cfg = sb.slurm_conf.parent / "slurmkit-hooks.toml"
    cfg = "" if directory is None else f"--config {hooks_cfg}"   # (found beside $SLURM_CONF)
    if fault is not None:
        f = sgpus.FAULTS[fault]
        bus = sgpus.bus_id(gpu_index)
        click.echo(f"{node}: NVML GPU{gpu_index} ({bus}) broken: {fault}, {f.summary}")
        click.echo(f"  taken from {f.source}")
        click.echo(f"  snapshot {path}: the next hook run on {node} sees it; enforce mode drains the node "
                   f"('slurmkit: ...' reason), observe mode logs 'would drain'")
        click.echo(f"  watch:  sinfo -R    slurmkit hooks log --node {node}")
        click.echo(f"  back:   slurmkit sandbox gpu {node} --fix" + (f" --dir {sb.dir}" if directory else "")
                   + (f", then slurmkit hooks gpu-reset {bus} --done --node {node}{' ' + cfg if cfg else ''} (an Xid holds the drain "
                      "until its GPU's reset is recorded)" if f.xid is not None
                      else ", then the health check resumes it after resume_after clean runs"))
    else:
        was = old and sgpus.FAULTS.get(old["fault"])
        click.echo(f"{node}: GPUs healthy again (snapshot {path})"
                   + (f"; it had {old['fault']} on NVML GPU{old['gpu']}" if old else "; it had no fault"))
        if was and was.xid is not None:
            click.echo(f"  its Xid {was.xid} holds slurmkit's drain until the GPU's reset is recorded: "
                       f"slurmkit hooks gpu-reset {sgpus.bus_id(int(old['gpu']))} --done --node {node}{' ' + cfg if cfg else ''}")
        elif old:
            click.echo("  slurmkit's drain ends by itself: the health check resumes the node after resume_after "
                       "clean runs")
    if not hooks_cfg.exists():
        click.echo(f"  the hooks are not installed: slurmkit hooks install --slurm-conf {sb.slurm_conf} "
                   "--mode enforce --interval 10 --resume-after 2 && scontrol reconfigure", err=True)
    elif str(path) not in hooks_cfg.read_text(errors="replace"):
        click.echo(f"  warning: {hooks_cfg} does not replay {path} for {node}: the hooks do not see this change",
                   err=True)
