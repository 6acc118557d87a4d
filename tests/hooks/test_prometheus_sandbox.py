"""The monitoring layer end to end in the real Slurm sandbox: the hooks run under slurmd (every
node replays a snapshot recorded from the fake NVML; n2's has a hardware Xid and a pending row
remap), a real node_exporter reads their textfiles, a real Prometheus scrapes it with
contrib/prometheus/slurmkit.rules.yml loaded. Through Prometheus' HTTP API: the drained node, its
check and the Xid show up and the alerts fire; a job's GPUs are exposed while it runs; the weekly
report takes the job's energy from Prometheus; every dashboard query returns series.
"""

import datetime as dt
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from prometheus_env import PromStack
from nodeenv import record_snapshot, set_value
from test_prometheus_live import RULES, dashboard_queries

from slurmkit.atomicfile import atomic_write
from slurmkit.hooks import install as inst
from slurmkit.hooks.config import render as render_config
from slurmkit.hooks.metrics import check_of
from slurmkit.slurm import conf as sconf
from slurmkit.slurm.commands import run
from sandbox_nodes import show_node as _node
from slurmkit.waiting import wait_until

pytestmark = pytest.mark.slurm

INTERVAL_S = 5
EXTRA_J = 7_200.0  # energy each of the job's GPUs draws during the job (J)


@pytest.fixture
def monitored(sandbox, fake_nvml, tmp_path):
    """Hooks installed in the sandbox (n2 failing) and a Prometheus stack on their textfiles."""
    conf = Path(sandbox.slurm_conf)
    work = Path(sandbox.dir) / "prometheus-test"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    snaps, healthy = {}, {}
    for n in sandbox.node_names:
        snaps[n] = work / f"{n}.json"
        healthy[n] = record_snapshot(fake_nvml, snaps[n], node=n)
    g1 = next(g for g in healthy["n2"]["gpus"] if g["index"] == 1)
    bad = set_value(set_value(healthy["n2"], 1, "remap_pending", True), 1, "remap_uncorrectable_rows", 2)
    bad["xids"] = [{"xid": 79, "pci_bus_id": g1["pci_bus_id"], "message": "GPU has fallen off the bus.",
                    "origin": "kmsg", "line": 1, "timestamp": ""}]
    snaps["n2"].write_text(json.dumps(bad))
    dirs = {k: work / k for k in ("state", "spool", "textfile")}
    dirs["textfile"].mkdir()
    cfg = render_config(conf, gres_conf=conf.parent / "gres.conf", profile=sandbox.profile_path,
                        state_dir=dirs["state"], spool_dir=dirs["spool"], textfile_dir=dirs["textfile"],
                        resume_after=1, snapshots=snaps, slurm_bin_dir=os.path.dirname(shutil.which("scontrol")))
    # the rules as shipped, but with every `for:` cut to 2 s (promtool tests the real durations)
    rules = work / "slurmkit.rules.yml"
    rules.write_text(re.sub(r"(\n\s+for: )\d+m\n", r"\g<1>2s\n", RULES.read_text()))
    assert "for: 5m" not in rules.read_text() and "for: 2s" in rules.read_text()
    stack = PromStack(work / "prom", dirs["textfile"], rule_files=[rules])
    spec = inst.InstallSpec(python=sys.executable, config=cfg, interval_s=INTERVAL_S, timeout_s=60)
    inst.apply(inst.plan_install(sconf.load_tree(conf), spec), conf, installing=True)
    (conf.parent / inst.CONFIG).write_text(cfg)
    run(["scontrol", "reconfigure"], slurm_conf=str(conf), timeout=30)
    try:
        yield {"conf": conf, "stack": stack, "snaps": snaps, "healthy": healthy, "bad_gpu": g1, **dirs}
    finally:
        stack.stop()
        for n in sandbox.node_names:
            run(["scontrol", "update", f"nodename={n}", "state=resume"], slurm_conf=str(conf), timeout=30, check=False)
        inst.apply(inst.plan_uninstall(sconf.load_tree(conf), inst.read_manifest(conf)), conf, installing=False)
        run(["scontrol", "reconfigure"], slurm_conf=str(conf), timeout=30)


def _alerts(stack) -> dict:
    """{alertname: [labels of each firing alert]}."""
    out = {}
    for a in stack.api("alerts")["alerts"]:
        if a["state"] == "firing":
            out.setdefault(a["labels"]["alertname"], []).append(a["labels"])
    return out


def test_drain_xid_job_energy_and_dashboard_through_prometheus(sandbox, monitored, tmp_path):
    conf, stack = monitored["conf"], monitored["stack"]
    t_begin = time.time()
    # the periodic health check drains n2; Prometheus shows the drain with its check and reason
    got = stack.wait("n2's drain", 'slurmkit_node_drain_info{node="n2"}', timeout=120)
    labels = got[0]["metric"]
    reason = _node(conf, "n2")["reason"]
    assert labels["reason"] == reason and reason.startswith("slurmkit: ")
    assert labels["check"] == check_of(reason) and labels["check"] in ("xid", "row_remap_pending")
    assert "DRAIN" in _node(conf, "n2")["state"]
    assert stack.query('slurmkit_node_drained_by_slurmkit{node="n1"}')[0]["value"][1] == "0"
    bus = monitored["bad_gpu"]["pci_bus_id"]
    xid = stack.query('slurmkit_gpu_xid_errors_total{node="n2",xid="79"}')
    assert [(x["metric"]["gpu"], x["metric"]["pci_bus_id"], x["metric"]["class"]) for x in xid] == [("1", bus, "hardware")]
    assert float(xid[0]["value"][1]) >= 1
    # n2 stays drained while health checks keep finding the fault: still one drain
    runs = lambda: float(stack.query('slurmkit_hook_last_run_timestamp_seconds{node="n2",hook="healthcheck"}')[0]["value"][1])  # noqa: E731
    first = runs()
    # runs() is what Prometheus scraped: the drains counter below is from the same scrape or later
    wait_until(lambda: runs() >= first + 2 * INTERVAL_S - 1, 60, what="two more health checks on n2")
    drains = stack.query('slurmkit_drains_total{node="n2"}')
    assert [(d["metric"]["check"], d["value"][1]) for d in drains] == [(labels["check"], "1")]
    assert stack.query(f'slurmkit_gpu_row_remap_pending{{node="n2",pci_bus_id="{bus}"}}')[0]["value"][1] == "1"
    # the rules loaded into the same Prometheus fire for n2, and for n2 only
    firing = wait_until(lambda: (a := _alerts(stack)) and {"SlurmkitNodeDrained", "SlurmkitGpuHardwareXid",
                   "SlurmkitGpuRowRemapPending"} <= set(a) and a, 60, what="the alerts to fire")
    assert [a["node"] for a in firing["SlurmkitNodeDrained"]] == ["n2"]
    assert [(a["node"], a["xid"]) for a in firing["SlurmkitGpuHardwareXid"]] == [("n2", "79")]
    assert "SlurmkitGpuMissing" not in firing and "SlurmkitHookOwnTrouble" not in firing

    # a job on n1: its GPUs are exposed while it runs; the GPUs draw EXTRA_J each meanwhile
    job = run(["sbatch", "--parsable", "-o", "/dev/null", "-w", "n1", "--gres=gpu:2", "-t", "2",
               "--wrap", "sleep 15"], slurm_conf=str(conf), timeout=30).stdout.strip()
    info = stack.wait("the job's GPUs", f'slurmkit_gpu_job_info{{job_id="{job}"}}', timeout=60,
                      predicate=lambda r: len(r) == 2)
    assert {r["metric"]["node"] for r in info} == {"n1"}
    time.sleep(2)  # the job runs a while before its GPUs draw EXTRA_J (a duration, not a wait)
    later = monitored["healthy"]["n1"]
    for g in later["gpus"]:
        later = set_value(later, g["index"], "total_energy_mj",
                          g["values"]["total_energy_mj"]["value"] + int(EXTRA_J * 1000))
    atomic_write(monitored["snaps"]["n1"], json.dumps(later))
    stack.wait("the job's series to go", f'slurmkit_gpu_job_info{{job_id="{job}"}}', timeout=90,
               predicate=lambda r: r == [])
    t_end = time.time()

    # n2 healthy again, and its GPU1 reset (Xid 79 holds the drain until a reset or a reboot, and
    # the pending row remap needs one too): the health check resumes it, counted by check
    atomic_write(monitored["snaps"]["n2"], json.dumps(monitored["healthy"]["n2"]))
    from slurmkit.cli import cli as cli_main

    r = CliRunner().invoke(cli_main, ["hooks", "gpu-reset", bus, "--done", "--node", "n2",
                                      "--config", str(conf.parent / inst.CONFIG)])
    assert r.exit_code == 0, r.output
    stack.wait("n2's resume", f'slurmkit_resumes_total{{node="n2",check="{labels["check"]}"}} >= 1', timeout=90)
    wait_until(lambda: "DRAIN" not in _node(conf, "n2")["state"], 30, what="n2 resumed in Slurm")

    # every dashboard query evaluates over the test's time range and every panel has series
    t_now = time.time()
    span = f"{int(t_now - t_begin) + 1}s"
    by_panel = {}
    for title, expr in dashboard_queries():
        e = expr.replace("$node", ".+").replace("$__rate_interval", "10s").replace("$__range", span)
        res = stack.api("query_range", query=e, start=f"{t_begin:.3f}", end=f"{t_now:.3f}", step="1")["result"]
        by_panel[title] = by_panel.get(title, 0) + len(res)
    assert {t: n for t, n in by_panel.items() if n == 0} == {}

    # the weekly report takes the job's energy from Prometheus where the spool has none
    def in_sacct():
        out = run(["sacct", "-j", job, "-X", "-n", "-P", "-o", "State"], slurm_conf=str(conf), timeout=30).stdout
        return out.strip() == "COMPLETED"

    wait_until(in_sacct, 120, what="the job in sacct")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    iso = lambda t: dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: E731
    env = sandbox.env()
    from slurmkit.cli import cli

    res = CliRunner(env=env).invoke(cli, [
        "report", "weekly", "--start", iso(int(t_begin) - 60), "--end", iso(int(t_end) + 60), "--no-store",
        "--no-sreport", "--spool", str(empty), "--prometheus", stack.url, "--format", "json",
        "-o", str(tmp_path / "out"), "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout[res.stdout.index("{"):])
    assert rep["energy_sources"]["jobs"]["prometheus"] == 1
    assert rep["totals"]["energy_kwh_by_source"]["prometheus"] == pytest.approx(2 * EXTRA_J / 3.6e6, rel=1e-6)
