"""``slurmkit site check|gres-conf|slurm-conf|topology-conf|list``: validate a site profile,
generate Slurm's gres.conf, slurm.conf nodes/partitions and topology.conf from it (byte-stable
output), and cross-check a cluster's own slurm.conf / gres.conf against it."""

from __future__ import annotations

import json
import sys

import click

from slurmkit.cli import want_json
from slurmkit.cli.output import write_output

CTX = {"help_option_names": ["-h", "--help"]}


def _load(profile: str, overrides):
    from slurmkit.profile import load_profile

    return load_profile(profile, overrides=tuple(overrides))


def _warn(msg: str):
    click.echo(f"slurmkit: warning: {msg}", err=True)


_set = click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
                    help="Override a profile key (TOML value), e.g. --set cluster.device_dir=/dev. Repeatable.")
_out = click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write to this file instead of stdout.")


@click.group("site", context_settings=CTX)
def cli():
    """Site profiles: check, and generate gres.conf / topology.conf."""


@cli.command("gres-conf", context_settings=CTX)
@click.argument("profile")
@click.option("--device-dir", help="Directory of the nvidiaN device files (default: [cluster].device_dir).")
@_set
@_out
def gres_conf(profile, device_dir, overrides, output):
    """gres.conf for PROFILE (a shipped name such as dgx-a100, or a TOML file)."""
    from slurmkit.profile.slurmconf import render_gres_conf

    p = _load(profile, overrides)
    write_output(render_gres_conf(p, device_dir=device_dir, warn=_warn), output)


@cli.command("slurm-conf", context_settings=CTX)
@click.argument("profile")
@_set
@_out
def slurm_conf_cmd(profile, overrides, output):
    """slurm.conf NodeName= / PartitionName= lines (and GresTypes=) for PROFILE, from the same
    node types as gres-conf, so the two agree on every node's gres."""
    from slurmkit.profile.slurmconf import render_slurm_conf

    write_output(render_slurm_conf(_load(profile, overrides)), output)


@cli.command("topology-conf", context_settings=CTX)
@click.argument("profile")
@_set
@_out
def topology_conf(profile, overrides, output):
    """topology.conf for PROFILE ([fabric] leaves/spines or blocks)."""
    from slurmkit.profile.slurmconf import render_topology_conf

    write_output(render_topology_conf(_load(profile, overrides)), output)


def check_profile(p):
    """Findings about a valid profile ``p`` (:class:`slurmkit.profile.check.Finding`, errors
    first): the one validation ``submit`` also runs (:func:`slurmkit.submit.check.check`: what
    submit would refuse, and its warnings), then what the generators or placement will lack
    (GPUs without NUMA node, Cores= omitted, GPUs whose nearest NIC is not a compute NIC, nodes
    under no leaf)."""
    from slurmkit.profile.check import Finding
    from slurmkit.submit.check import check
    from slurmkit.profile.slurmconf import render_gres_conf

    found = check(p)
    warns: list[str] = []
    render_gres_conf(p, warn=warns.append)
    for nt in p.node_types.values():
        if not nt.gpus and not nt.cpu_only:
            warns.append(f"node type {nt.name}: no [[gpus]] tables (no Cores=, Links= or NIC placement)")
        for g in nt.gpus:
            if g.numa_node is None:
                warns.append(f"node type {nt.name} GPU{g.index}: NUMA node unknown")
            for dev in g.nearest_nics:
                if nt.nic(dev).role != "compute":
                    warns.append(f"node type {nt.name} GPU{g.index}: nearest NIC {dev} has role {nt.nic(dev).role}")
    if p.fabric.leaves:
        for n in p.nodes():
            if p.leaf_of(n) is None:
                warns.append(f"node {n} is under no leaf switch")
    return found + [Finding("warning", "", w) for w in warns]


@cli.command("check", context_settings=CTX)
@click.argument("profile")
@_set
@click.option("--json", "as_json", is_flag=True,
              help="JSON summary: cluster, partitions, node types, errors, warnings.")
@click.option("--strict", is_flag=True, help="Exit 1 when there are warnings.")
@click.option("--slurm-conf", type=click.Path(dir_okay=False), help="A cluster's slurm.conf to cross-check "
              "against the profile (Include files followed).")
@click.option("--gres-conf", type=click.Path(dir_okay=False), help="Its gres.conf (default: gres.conf beside "
              "--slurm-conf when it exists).")
@click.pass_context
def check(ctx, profile, overrides, as_json, strict, slurm_conf, gres_conf):
    """Load and validate PROFILE; print a summary and warnings. Exit 2 when it is invalid or
    when `slurmkit submit` would refuse it (the same checks: errors name file, line and key).

    With --slurm-conf (and --gres-conf): cross-check a cluster's own files against the profile;
    each disagreement is named with file, line and what Slurm does about it (exit 1 when any)."""
    from slurmkit.submit.check import error_of
    from slurmkit.profile.slurmconf import node_gres

    p = _load(profile, overrides)
    found = check_profile(p)
    errors = [str(error_of(p, f)) for f in found if f.level == "error"]
    warns = [str(f) for f in found if f.level == "warning"]
    findings = []
    if slurm_conf and not gres_conf:
        from pathlib import Path

        beside = Path(slurm_conf).parent / "gres.conf"
        gres_conf = str(beside) if beside.is_file() else None
    if slurm_conf or gres_conf:
        from slurmkit.slurm.conf import load_tree
        from slurmkit.profile.confcheck import crosscheck

        findings = crosscheck(p, load_tree(slurm_conf) if slurm_conf else None,
                              load_tree(gres_conf) if gres_conf else None)
    summary = {
        "profile": p.source, "cluster": p.name, "layers": list(p.layers),
        "partitions": {k: {"nodes": len(v.node_names), "node_type": v.node_type, "default": v.default}
                       for k, v in p.partitions.items()},
        "node_types": {k: {"gpu_model": v.gpu_model, "gpu_count": v.gpu_count, "cpus": v.cpu_count,
                           "gres": node_gres(v), "autodetect": v.autodetect,
                           "compute_nics": [n.device for n in v.compute_nics()]}
                       for k, v in p.node_types.items()},
        "leaves": len(p.fabric.leaves), "spines": len(p.fabric.spines), "blocks": len(p.fabric.blocks),
        "nccl": _nccl_summary(p),
        "errors": errors, "warnings": warns,
        "disagreements": [f.to_json() for f in findings],
    }
    if want_json(ctx, as_json):
        click.echo(json.dumps(summary, indent=1))
    else:
        click.echo(f"{p.source}: cluster {p.name}: {'INVALID for submit' if errors else 'valid'}")
        for k, v in summary["partitions"].items():
            click.echo(f"  partition {k}{' (default)' if v['default'] else ''}: {v['nodes']} nodes of {v['node_type']}")
        for k, v in summary["node_types"].items():
            click.echo(f"  node type {k}: {'Gres=' + v['gres'] if v['gres'] else 'no GPUs'}, {v['cpus']} CPUs, "
                       f"compute NICs: {', '.join(v['compute_nics']) or '-'}")
        for k, v in summary["nccl"].items():
            click.echo(f"  {k}: {v}")
        for e in errors:
            click.echo(f"slurmkit: error: {e}", err=True)
        for w in warns:
            _warn(w)
        for f in findings:
            click.echo(str(f))
        if slurm_conf or gres_conf:
            click.echo(f"{len(findings)} disagreement(s) between the profile and the cluster's files")
    if errors:
        sys.exit(2)
    if findings or strict and warns:
        sys.exit(1)


def _nccl_summary(p) -> dict:
    """How the jobs' socket interfaces are chosen, in words (NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME)."""
    from slurmkit.profile.nccl import IfnameRule

    n = p.nccl
    if not n.socket_ifname:
        nccl_if = "unset: NCCL chooses (ib* first, then any but docker*/lo)"
    else:
        nccl_if = f"{n.socket_ifname} ({IfnameRule.parse(n.socket_ifname).describe()})"
    if n.gloo_socket_ifname:
        gloo = f"{n.gloo_socket_ifname} (profile nccl.gloo_socket_ifname)"
    elif n.socket_ifname:
        gloo = "resolved on each node at job start: its first up interface with an address that " \
               "NCCL_SOCKET_IFNAME allows (set nccl.gloo_socket_ifname to name one)"
    else:
        gloo = "unset: gloo uses the address of the node's hostname"
    return {"NCCL_SOCKET_IFNAME": nccl_if, "GLOO_SOCKET_IFNAME": gloo,
            "NCCL_NET": n.net_plugin or ("AWS Libfabric (efa)" if n.fabric == "efa" else "unset: NCCL picks")}


@cli.command("list", context_settings=CTX)
def list_cmd():
    """List the shipped profiles (usable by name)."""
    from slurmkit.profile import load_profile, shipped_names

    for name in shipped_names():
        p = load_profile(name)
        click.echo(f"{name:<20} {p.cluster.sources[0] if p.cluster.sources else ''}")
