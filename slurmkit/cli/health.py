"""``slurmkit health``: check this node's GPUs (live or from a capture), run or replay DCGM's diag,
record snapshots, import ``nvidia-smi -q -x`` / ``-q`` captures.

Exit codes of ``health check`` and ``health diag``: 0 pass or warn, 1 fail (hardware evidence,
NVML timeout, a diag that overran), 2 unreadable input or slurmkit's own trouble.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from slurmkit.cli import want_json
from slurmkit.cli.options import site_option
from slurmkit.errors import InputError


def _config(site: str | None, expect_gpus: int | None, node: str | None = None):
    """The checks' configuration from the ``[health]`` section of profile ``site`` (None: the
    defaults) and, when ``node`` is in one of its partitions, its node type's HCAs, NVSwitches,
    NVLink count and PCIe link width / generation (a node in none: the ``node_type`` check warns
    that the checks beyond NVML are skipped). A bad profile raises ProfileError (file:line: key),
    exit 2."""
    from slurmkit.health.config import load_config

    health, nt = None, None
    if site:
        from slurmkit.profile import load_profile

        prof = load_profile(site)
        health = prof.health
        try:
            nt = prof.node_type_of(node) if node else None
        except KeyError:
            nt = None
    if nt is None:
        return load_config(health, gpu_count=expect_gpus, no_node_type=node if site and node else None)
    from slurmkit.profile.health import expected_nvlinks, has_nvswitch

    cfg = load_config(health, gpu_count=expect_gpus, nics=nt.nics, nvswitch=has_nvswitch(nt),
                      nvlinks=expected_nvlinks(nt), node_type=nt.name, pcie=nt.pcie_expect())
    inst = _profile_mig_instances(nt)
    if inst:
        cfg.expect["mig_instances"] = inst
    return cfg


def _profile_mig_instances(nt) -> list[dict]:
    """The MIG instances node type ``nt`` gives its node (its groups' ``mig`` layouts), in the
    shape the ``mig_instances`` check takes (:mod:`slurmkit.health.mig`): the parent named by its
    ``/dev/nvidia<minor>`` when the profile records minors, else left to the GPUs in MIG mode."""
    out = []
    minors = bool(nt.gpus) and all(g.minor is not None for g in nt.gpus)
    for k, grp in enumerate(nt.gpu_groups):
        for i in sorted(grp.indexes, key=nt.device_number):
            for prof, n in grp.mig.items():
                out += [{"type": grp.instance_type(prof), "profile": prof,
                         "files": [f"/dev/nvidia{nt.device_number(i)}"] if minors else [],
                         "where": f"site profile node_types.{nt.name}.gpu_groups[{k}].mig"}] * n
    return out


@click.group("health")
def cli():
    """GPU health checks, snapshots and imports."""


@cli.command("check")
@click.option("--from", "source", metavar="FILE",
              help="Replay a capture (slurmkit snapshot JSON, nvidia-smi -q -x XML or -q text) instead of live NVML.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--before-job", is_flag=True, help="Also run the prolog's idle checks (leftover processes, memory used).")
@site_option(help="Site profile (file or shipped name) whose [health] section to use.")
@click.option("--expect-gpus", type=int, help="Physical GPUs this node should have (nvidia-smi -L's GPUs; a GPU "
              "in MIG mode is one, its instances come from --site's node type).")
@click.option("--kernel-log", type=click.Path(dir_okay=False, exists=True),
              help="Also judge the NVRM Xids in this saved kernel log (dmesg / journalctl -k text).")
@click.option("--kmsg-cursor", type=click.Path(dir_okay=False),
              help="Live: judge the Xids in /dev/kmsg since the position saved in this file (and update it).")
@click.option("--deadline", type=float, default=None,
              help="Total NVML deadline in seconds (live; default: the profile's [health] deadline_s).")
@click.option("--node", help="Node name whose node type's HCAs, NVSwitches and NVLinks to expect "
              "(default: this host's short name).")
@click.option("--sysfs", type=click.Path(file_okay=False), default=None,
              help="sysfs root for InfiniBand ports, modules and PCIe AER (live default /sys; with --from: "
                   "read there instead of the capture's).")
@click.option("-v", "--verbose", is_flag=True, help="Also list passing results.")
@click.pass_context
def check(ctx, source, as_json, before_job, site, expect_gpus, kernel_log, kmsg_cursor, deadline, node, sysfs,
          verbose):
    """Run the health checks and print the verdict (exit 0 pass/warn, 1 fail, 2 unreadable input)."""
    from slurmkit.health.checks import evaluate, timeout_report
    from slurmkit.health.runner import read_state
    from slurmkit.health.errors import CaptureError, NvmlTimeout, SourceError

    as_json = want_json(ctx, as_json)
    from slurmkit.health.fabric import spec_of
    from slurmkit.health.source import hostname

    if source and not node:  # a replay judges the capture's node (its node type), not this host
        from slurmkit.health.source import load_capture

        try:
            node = load_capture(source).node or None
        except SourceError:
            pass  # read_state below says what is wrong with it
    cfg = _config(site, expect_gpus, node or hostname())
    fabric = spec_of(cfg.expect)
    if sysfs and not cfg.expect.get("hcas"):  # no site's HCAs: every port there, judged on its state
        from slurmkit.health.fabric import sysfs_hcas

        fabric = {"fabric_manager": False, "gpudirect_rdma": False, **(fabric or {}), "hcas": sysfs_hcas(sysfs)}
    try:
        state = read_state(source or "live", total_deadline_s=deadline or cfg.deadline_s,
                           per_call_deadline_s=min(cfg.per_call_deadline_s, deadline or cfg.deadline_s),
                           before_job=before_job, thresholds=cfg.thresholds,
                           kmsg_cursor=kmsg_cursor if not source else None, node=node,
                           fabric=fabric, sysfs=sysfs)
        if kernel_log:
            from slurmkit.health.kmsg import parse_log

            try:
                text = Path(kernel_log).read_text(encoding="utf-8", errors="replace")  # a kernel log holds any driver's bytes; the Xid lines are ASCII
            except OSError as exc:
                raise CaptureError(kernel_log, None, exc.strerror or str(exc)) from None
            state.xids.extend(parse_log(text, kernel_log))
        report = evaluate(state, cfg, before_job=before_job)
    except NvmlTimeout as exc:
        import socket

        report = timeout_report(socket.gethostname().split(".")[0], "live", exc)
    except SourceError as exc:
        if as_json:
            click.echo(json.dumps({"node": None, "source": source or "live", "status": "error",
                                   "results": [], "errors": [str(exc)]}, indent=2))
        raise
    if as_json:
        click.echo(json.dumps(report, indent=2, default=str))
    else:
        _print_report(report, verbose)
    status = report["status"]
    sys.exit({"pass": 0, "warn": 0, "fail": 1}.get(status, 2))


def _print_report(report: dict, verbose: bool) -> None:
    from slurmkit.health.result import limit_text

    shown = [r for r in report["results"] if verbose or r["status"] != "pass"]
    for r in shown:
        where = (f"GPU{r['gpu_index']} {r['pci_bus_id']}" if r["gpu_index"] is not None
                 else (r.get("place") or r["pci_bus_id"] or "node"))
        limit = (f" (limit {limit_text(r['limit'])})" if r["limit"] not in (None, "", {}, [])
                 and not isinstance(r["limit"], bool) else "")
        msg = f"  {r['message']}" if r["message"] else ""
        click.echo(f"{r['status'].upper():5} {r['check']:28} {where:22} {r['value']}{limit}{msg}")
    for e in report.get("errors", []):
        click.echo(f"ERROR {e}")
    for note in report.get("notes", []):
        click.echo(f"NOTE  {note}")
    n = {s: sum(1 for r in report["results"] if r["status"] == s) for s in ("pass", "warn", "fail")}
    click.echo(f"{report['node']}: {report['status']} ({n['pass']} pass, {n['warn']} warn, {n['fail']} fail) "
               f"from {report['source']}")


@cli.command("diag")
@click.option("--from", "source", metavar="FILE",
              help="Replay a DCGM output instead of running dcgmi: dcgmi diag -j or its -r table (DCGM 3 or 4), "
                   "dcgmi health -c -j, dcgmi nvlink --link-status.")
@click.option("--level", type=click.IntRange(1, 4), default=1, show_default=True,
              help="Live: dcgmi diag -r level (1: seconds; 2-4 take minutes to hours).")
@click.option("--timeout", "timeout_s", type=float, default=45.0, show_default=True,
              help="Live: seconds before the diag is killed (and fails).")
@click.option("--dcgmi", default="/usr/bin/dcgmi", show_default=True, help="Live: DCGM's CLI.")
@click.option("--json", "as_json", is_flag=True, help="Print the verdict as JSON.")
@click.option("-v", "--verbose", is_flag=True, help="Also list passing results.")
@click.pass_context
def diag(ctx, source, level, timeout_s, dcgmi, as_json, verbose):
    """Run DCGM's diag (dcgmi diag -r LEVEL -j) or replay a DCGM output: a verdict per test per GPU
    (exit 0 pass/warn, 1 fail, 2 unreadable input or no result)."""
    from slurmkit.health.active import dcgm_diag, verdict

    as_json = want_json(ctx, as_json)
    notes, version, driver, kind = [], "", "", "diag-json"
    if source:
        from slurmkit.health.dcgm import read_dcgm

        with InputError.reading(source, "a DCGM output (dcgmi diag, health -c -j or nvlink --link-status)"):
            text = Path(source).read_text(encoding="utf-8", errors="replace")  # dcgmi prints ASCII
        run = read_dcgm(text, source)  # DcgmFormatError (an InputError): exit 2, file:line
        report = verdict(run.tests, source)
        report.check = {"health": "dcgm_health", "nvlink": "dcgm_nvlink"}.get(run.kind, "dcgm_diag")
        notes, version, driver, kind = run.notes, run.version, run.driver_version, run.kind
    else:
        report = dcgm_diag(level, timeout_s, dcgmi=dcgmi)
        version = report.dcgm_version
    if as_json:
        click.echo(json.dumps({
            "source": report.source, "kind": kind, "check": report.check, "status": report.status,
            "message": report.message, "dcgm_version": version, "driver_version": driver, "notes": notes,
            "results": [{"test": t.name, "entity": t.entity, "gpu_index": t.gpu_index, "status": t.status,
                         "dcgm_status": t.dcgm_status, "warnings": t.warnings, "severities": t.severities,
                         "error_ids": t.error_ids} for t in report.tests]}, indent=2))
    else:
        for t in report.tests:
            if verbose or t.status != "pass":
                why = f"  {t.warnings[0]}" if t.warnings else ""
                click.echo(f"{t.status.upper():5} {report.check:12} {t.entity:10} {t.name:28}{why}")
        for note in notes:
            click.echo(f"NOTE  {note}")
        n = {st: sum(1 for t in report.tests if t.status == st) for st in ("pass", "warn", "fail", "skip")}
        ver = f", DCGM {version}" if version else ""
        click.echo(f"{report.check}: {report.status} ({n['pass']} pass, {n['warn']} warn, {n['fail']} fail, "
                   f"{n['skip']} skip{ver}) from {report.source}: {report.message}")
    sys.exit({"pass": 0, "warn": 0, "fail": 1}.get(report.status, 2))


@cli.command("snapshot")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Snapshot JSON to write.")
@click.option("--from", "source", metavar="FILE", help="Convert a capture instead of reading live NVML.")
@click.option("--node", help="Node name to record (default: this host); with --site, whose node type's "
              "HCAs, fabric manager and GPUDirect module to record.")
@site_option(help="Site profile (file or shipped name): also record what the node type's checks beyond "
             "NVML read (InfiniBand / RoCE ports, fabric manager, GPUDirect module).")
@click.option("--sysfs", type=click.Path(file_okay=False), default=None,
              help="sysfs root for InfiniBand ports, modules and PCIe AER (live default /sys; with --from: "
                   "read there instead of the capture's, AER counters included).")
@click.option("--deadline", type=float, default=None,
              help="Total NVML deadline in seconds (default: the profile's [health] deadline_s).")
def snapshot(output, source, node, site, sysfs, deadline):
    """Record this node's GPU state (every value with the NVML call it came from) as JSON."""
    from slurmkit.health.fabric import spec_of
    from slurmkit.health.runner import read_state
    from slurmkit.health.source import hostname

    cfg = _config(site, None, node or hostname())
    deadline = deadline or cfg.deadline_s
    # SourceError (exit 2) and NvmlTimeout (exit 1) reach the one CLI handler
    state = read_state(source or "live", total_deadline_s=deadline, per_call_deadline_s=deadline, node=node,
                       fabric=spec_of(cfg.expect), sysfs=sysfs)
    _write(state, output)


@cli.command("import")
@click.argument("capture", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Snapshot JSON to write.")
@click.option("--node", help="Node name to record (default: the file's stem).")
@click.option("--fabric", "fabric", multiple=True, type=click.Path(dir_okay=False),
              help="An ibstat, ibv_devinfo [-v] or ibdev2netdev output of the node (repeatable): its ports "
                   "become the snapshot's InfiniBand / RoCE ports, as a live sysfs read records them.")
@site_option(help="Site profile (file or shipped name): the node type's NICs the fabric captures are "
             "judged against (expected rate, link layer, role); without it every port of the capture, "
             "judged on its state only.")
def import_(capture, output, node, fabric, site):
    """Convert an nvidia-smi -q -x (XML) or -q (text) capture, or a snapshot, into a snapshot, with
    the node's fabric from ibstat / ibv_devinfo / ibdev2netdev captures."""
    from slurmkit.health.source import load_capture

    state = load_capture(capture, node=node)  # CaptureError: exit 2
    if fabric:
        from slurmkit.health.ibcapture import Skipped, capture_ports, read_captures

        texts = {}
        for f in fabric:
            with InputError.reading(f, "an ibstat, ibv_devinfo or ibdev2netdev capture"):
                texts[f] = Path(f).read_text(encoding="utf-8", errors="replace")  # ibstat/sysfs text is ASCII
        devices, notes = read_captures(texts)   # CaptureFormatError (an InputError): exit 2
        hcas = _config(site, None, state.node).expect.get("hcas") if site else None
        state.ib_ports, more = capture_ports(devices, hcas, ", ".join(fabric))
        skipped = [n for n in notes if isinstance(n, Skipped)]
        lacking = [n for n in notes + more if not isinstance(n, Skipped)]
        state.notes.extend(skipped)
        state.errors.extend(lacking)
        for note in skipped:   # (a pasted prompt, comment or elision: in the snapshot's notes)
            click.echo(f"slurmkit: note: {note}", err=True)
        for note in lacking:   # (what the captures lack: also in the snapshot's errors)
            click.echo(f"slurmkit: warning: {note}", err=True)
    _write(state, output)


def _write(state, output: str) -> None:
    from slurmkit.atomicfile import atomic_write

    try:
        atomic_write(output, json.dumps(state.to_json(), indent=1) + "\n")
    except OSError as exc:
        raise InputError(output, None, f"cannot write: {exc.strerror or exc}") from None
    click.echo(f"wrote {output}: {len(state.gpus)} GPUs of {state.node or '?'} from {state.source}")
