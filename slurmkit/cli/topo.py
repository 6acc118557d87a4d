"""``slurmkit topo parse|discover|import``: read a node's GPU/NIC/NUMA topology from captured
``nvidia-smi topo -m`` text or live (NVML + sysfs), print it, or turn it into a profile
node-type section."""

from __future__ import annotations

import json
import sys

import click

from slurmkit.cli import want_json
from slurmkit.cli.output import write_output
from slurmkit.errors import UsageError
from slurmkit.topology.errors import TopoError

CTX = {"help_option_names": ["-h", "--help"]}


def _read(file: str):
    """The topology in ``file`` ('-': stdin); raises TopoError (exit 2) naming file and line."""
    from slurmkit.topology.smi import parse_topo, read_topo_file

    if file == "-":
        return parse_topo(sys.stdin.read(), "<stdin>")
    return read_topo_file(file)


def _human(topo) -> str:
    from slurmkit.topology.cores import format_ranges

    lines = [f"{'GPU':<6} {'CPUs':<24} {'NUMA':<5} {'nearest NICs':<24} NVLink peers"]
    for g in topo.gpus:
        nv = [f"{k}:{v}" for k, v in g.links.items() if k.startswith("GPU") and v.startswith("NV")]
        numa = "-" if g.numa_node is None else str(g.numa_node)
        lines.append(f"{g.name:<6} {format_ranges(g.cpus) or '-':<24} {numa:<5} "
                     f"{','.join(g.nearest_nics) or '-':<24} {' '.join(nv) or '-'}")
    if topo.nics:
        lines.append("")
        lines.append(f"{'NIC':<10} {'device':<14} role")
        lines += [f"{n.name:<10} {n.device or '-':<14} {n.role}" for n in topo.nics]
    if topo.missing:
        lines.append("")
        lines.append("missing: " + "; ".join(topo.missing))
    return "\n".join(lines)


@click.group("topo", context_settings=CTX)
def cli():
    """Parse, discover and import GPU/NIC/NUMA topology."""


@cli.command("parse", context_settings=CTX)
@click.argument("file")
@click.option("--json", "as_json", is_flag=True, help='JSON: {"gpus": [...], "nics": [...], "missing": [...]}.')
@click.pass_context
def parse_cmd(ctx, file, as_json):
    """Parse `nvidia-smi topo -m` output in FILE ('-' for stdin).

    Exit 0 also when rows or the NIC legend are missing (listed under "missing"); exit 2 when
    FILE is not a topology matrix (the message names the file and line)."""
    topo = _read(file)
    if want_json(ctx, as_json):
        click.echo(json.dumps(topo.to_json(), indent=1))
    else:
        click.echo(_human(topo))
    for m in topo.missing:
        click.echo(f"slurmkit: warning: {topo.source}: missing {m}", err=True)


def _cpu_opts(f):
    f = click.option("--cpu-numbering", type=click.Choice(["linear", "interleaved", "unknown"]),
                     help="How the OS numbers CPUs (linear: socket 0 first; interleaved: sockets alternate).")(f)
    f = click.option("--threads-per-core", type=click.IntRange(1), help="SMT threads per core.")(f)
    f = click.option("--cores-per-socket", type=click.IntRange(1), help="Cores per socket.")(f)
    f = click.option("--sockets", type=click.IntRange(1), help="CPU sockets of the node.")(f)
    return f


def _emit_section(topo, name, gpu_model, output, comments, **cpu):
    from slurmkit.topology.nodetype import node_type_table, render_node_type

    guessed: list = []
    table = node_type_table(topo, gpu_model or name, guessed=guessed, **cpu)
    if table["cpu_numbering"] == "unknown":
        click.echo("slurmkit: warning: CPU topology unknown (give --sockets, --cores-per-socket, "
                   "--threads-per-core): gres.conf Cores= will be omitted for this node type", err=True)
    for key, why in guessed:
        click.echo(f"slurmkit: warning: guessed node_types.{name}.{key}: {why}", err=True)
    text = render_node_type(name, table, comments + [f"missing in the input: {m}" for m in topo.missing],
                            guessed)
    write_output(text, output)


@cli.command("import", context_settings=CTX)
@click.argument("file")
@click.option("--name", "name", required=True, help="Node type name (the TOML key under node_types).")
@click.option("--gpu-model", help="gres type, e.g. a100 (default: the node type name).")
@_cpu_opts
@click.option("--smi-q", "smi_q", metavar="CAPTURE",
              help="`nvidia-smi -q` (text or -x XML) of the same node: each GPU's Minor Number (gres.conf File=).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the section here instead of stdout.")
def import_cmd(file, name, gpu_model, sockets, cores_per_socket, threads_per_core, cpu_numbering, smi_q, output):
    """Turn a captured `nvidia-smi topo -m` FILE into a [node_types.NAME] profile section."""
    if not name or any(c.isspace() or c in ".[]\"'" for c in name):
        raise UsageError("--name", f"{name!r}: use one word without dots or brackets")
    topo = _read(file)
    if not topo.gpus:
        raise TopoError(file, None, "no GPU rows or columns to import")
    if smi_q:
        from slurmkit.health.source import load_capture
        from slurmkit.topology.nodetype import add_minors

        add_minors(topo, smi_q, load_capture(smi_q))
    _emit_section(topo, name, gpu_model, output, [f"imported by slurmkit topo import from {file}"],
                  sockets=sockets, cores_per_socket=cores_per_socket,
                  threads_per_core=threads_per_core, cpu_numbering=cpu_numbering)


@cli.command("discover", context_settings=CTX)
@click.option("--json", "as_json", is_flag=True, help="Print the topology as JSON instead of a profile section.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the node-type section here.")
@click.option("--name", "name", default="local", show_default=True, help="Node type name for the section.")
@click.option("--gpu-model", help="gres type (default: from the NVML product name, e.g. h100).")
@click.option("--sysfs", default="/sys", show_default=True, help="sysfs root (for captured trees).")
@click.pass_context
def discover_cmd(ctx, as_json, output, name, gpu_model, sysfs):
    """Read this node's topology live from NVML and sysfs."""
    from slurmkit.topology.discover import discover

    topo, model = discover(sysfs)
    if want_json(ctx, as_json) and not output:
        data = topo.to_json()
        data["gpu_model"] = model
        data["sockets"], data["cores_per_socket"], data["threads_per_core"] = (
            topo.sockets, topo.cores_per_socket, topo.threads_per_core)
        click.echo(json.dumps(data, indent=1))
        return
    _emit_section(topo, name, gpu_model or model, output, ["discovered by slurmkit topo discover (NVML + sysfs)"])
