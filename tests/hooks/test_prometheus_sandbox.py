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
import subprocess
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
from sandbox_nodes import reconfigure, show_node as _node
from slurmkit.waiting import wait_until
from fake_sysfs import sandbox_tree, set_port

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
    # n3's InfiniBand ports: a fake sysfs tree the hooks and node_exporter's infiniband collector
    # both read (one node_exporter serves the sandbox: only n3 has a tree, so the joins on
    # instance, device and port stay one to one)
    sys3 = sandbox_tree(work / "n3-sys",
                        pcis={"mlx5_0": "0000:18:00.0", "mlx5_1": "0000:40:00.0", "mlx5_2": "0000:4f:00.0",
                              "mlx5_3": "0000:5e:00.0"})
    cfg = render_config(conf, gres_conf=conf.parent / "gres.conf", profile=sandbox.profile_path,
                        state_dir=dirs["state"], spool_dir=dirs["spool"], textfile_dir=dirs["textfile"],
                        resume_after=1, snapshots=snaps, sysfs={"n3": sys3},
                        slurm_bin_dir=os.path.dirname(shutil.which("scontrol")))
    # the rules as shipped, but with every `for:` cut to 2 s (promtool tests the real durations)
    rules = work / "slurmkit.rules.yml"
    rules.write_text(re.sub(r"(\n\s+for: )\d+m\n", r"\g<1>2s\n", RULES.read_text()))
    assert "for: 5m" not in rules.read_text() and "for: 2s" in rules.read_text()
    stack = PromStack(work / "prom", dirs["textfile"], rule_files=[rules], sysfs=sys3)
    spec = inst.InstallSpec(python=sys.executable, config=cfg, interval_s=INTERVAL_S, timeout_s=60)
    inst.apply(inst.plan_install(sconf.load_tree(conf), spec), conf, installing=True)
    (conf.parent / inst.CONFIG).write_text(cfg)
    reconfigure(sandbox)
    try:
        yield {"conf": conf, "stack": stack, "snaps": snaps, "healthy": healthy, "bad_gpu": g1, "sys3": sys3, **dirs}
    finally:
        stack.stop()
        for n in sandbox.node_names:
            run(["scontrol", "update", f"nodename={n}", "state=resume"], slurm_conf=str(conf), timeout=30, check=False)
        inst.apply(inst.plan_uninstall(sconf.load_tree(conf), inst.read_manifest(conf)), conf, installing=False)
        reconfigure(sandbox)


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


# the rule as it was before it judged only each node's newest hook run (it gave a false
# SlurmkitGpuCheckFailing for a healthy, resumed node)
OLD_CHECK_FAILING = ("max by (node, gpu, check) (slurmkit_health_check_status) == 2 "
                     "unless on (node) (slurmkit_node_drained_by_slurmkit == 1)")


def test_a_prolog_failure_the_health_check_superseded_does_not_alert(sandbox, monitored, tmp_path):
    """n3's prolog drains for a port that is down; the port comes back, the periodic health check
    passes and resumes n3. The prolog's file keeps ib_port = fail until the next job's prolog:
    the rule as it was fires SlurmkitGpuCheckFailing for the healthy node, the shipped rule
    (the newest run of each node) does not. The port's state and the alert on it come from
    node_exporter's infiniband collector on the same tree."""
    conf, stack, sys3 = monitored["conf"], monitored["stack"], monitored["sys3"]
    exp = stack.wait("n3's expected ports", 'slurmkit_fabric_port_expected_rate_bytes_per_second{node="n3"}',
                     timeout=120, predicate=lambda r: len(r) == 5)  # 4 compute HCAs, the storage NIC mlx5_4
    assert {(e["metric"]["device"], e["metric"]["tier"]) for e in exp if e["metric"]["role"] == "other"} == {
        ("mlx5_4", "warn")}
    set_port(sys3, "mlx5_2", state="DOWN", phys="Polling")
    # the prolog of a job on n3, run as slurmd runs it (the installed shim's text, n3's environment)
    shim = tmp_path / "prolog"
    shim.write_text(inst.shim_text("prolog", sys.executable, conf.parent / inst.CONFIG))
    shim.chmod(0o755)
    env = {"SLURMD_NODENAME": "n3", "SLURM_CONF": str(conf), "SLURM_JOB_ID": "999001", "SLURM_JOB_USER": "root",
           "SLURM_JOB_UID": "0", "SLURM_JOB_GPUS": "0"}
    r = subprocess.run([str(shim)], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    assert _node(conf, "n3")["reason"] == "slurmkit: ib mlx5_2/1 ibp79s0: down (DOWN/Polling)"
    down = wait_until(lambda: [a for a in stack.api("alerts")["alerts"]
                               if a["labels"]["alertname"] == "SlurmkitFabricPortDown"], 60, what="the port-down alert")
    assert down[0]["annotations"]["summary"] == "mlx5_2 port 1 down on n3 (expected 400 Gb/s, InfiniBand)"
    # the port comes back: the health check resumes n3; the prolog's fail stays in its file
    set_port(sys3, "mlx5_2")
    wait_until(lambda: "DRAIN" not in _node(conf, "n3")["state"], 90, what="n3 resumed")
    prolog_file = monitored["textfile"] / "slurmkit_n3_prolog.prom"
    from prometheus_client.parser import text_string_to_metric_families

    kept = {(x.labels["check"], x.value) for f in text_string_to_metric_families(prolog_file.read_text())
            for x in f.samples if x.name == "slurmkit_health_check_status" and x.labels["check"] == "ib_port"}
    assert kept == {("ib_port", 2)}
    stack.wait("the drain to clear in Prometheus", 'slurmkit_node_drained_by_slurmkit{node="n3"} == 0', timeout=60)
    # (a passing result has no series: the health check is the newest run and has no ib_port)
    stack.wait("a passing health check after it",
               'slurmkit:hook_newest_run_timestamp_seconds{node="n3",hook="healthcheck"} '
               'unless on (node) slurmkit:health_check_status:newest{node="n3",check="ib_port"}', timeout=60)
    # the rule as it was: a failing check on a node not drained -> the false alert
    old = stack.query(OLD_CHECK_FAILING)
    assert [(x["metric"]["node"], x["metric"]["check"]) for x in old] == [("n3", "ib_port")]
    time.sleep(6)  # several evaluations with `for` cut to 2 s
    assert not [a for a in stack.api("alerts")["alerts"]
                if a["labels"]["alertname"] == "SlurmkitGpuCheckFailing" and a["labels"].get("node") == "n3"]
    assert not [a for a in stack.api("alerts")["alerts"] if a["labels"]["alertname"] == "SlurmkitFabricPortDown"]
