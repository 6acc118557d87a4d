"""The monitoring layer against the real programs: promtool checks and unit-tests the alert
rules; a real node_exporter reads the textfiles the real hook shims write and a real Prometheus
scrapes it; the report's Prometheus client reads a job's energy and utilization back.

(The drained node, the alerts firing and every dashboard query run in the Slurm sandbox:
tests/hooks/test_prometheus_sandbox.py.)
"""

import json
import math
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from prometheus_env import PromStack, need
from sacct_rows import row, text
from nodeenv import set_value

from slurmkit.cli import cli
from slurmkit.report import prometheus as P

from conftest import REPO

RULES = REPO / "contrib" / "prometheus" / "slurmkit.rules.yml"
RULES_TEST = REPO / "contrib" / "prometheus" / "slurmkit.rules_test.yml"
DASHBOARD = REPO / "contrib" / "grafana" / "slurmkit-gpu-health.json"


def test_promtool_checks_the_rules():
    tool = need("promtool")["promtool"]
    r = subprocess.run([tool, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS: 20 rules found" in r.stdout  # 17 alerts, 3 recording rules


def test_promtool_unit_tests_every_rule():
    tool = need("promtool")["promtool"]
    tested = set(re.findall(r"^\s+alertname: (\w+)$", RULES_TEST.read_text(), re.M))
    rules = set(re.findall(r"^\s+- alert: (\w+)$", RULES.read_text(), re.M))
    assert len(rules) == 17 and tested == rules
    r = subprocess.run([tool, "test", "rules", str(RULES_TEST)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout


def test_promtool_catches_a_broken_rule(tmp_path):
    """The check above can fail: a rule with bad PromQL is refused."""
    tool = need("promtool")["promtool"]
    bad = tmp_path / "bad.yml"
    bad.write_text(RULES.read_text().replace("slurmkit_gpu_row_remap_pending == 1", "slurmkit_gpu_row_remap_pending == ("))
    r = subprocess.run([tool, "check", "rules", str(bad)], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0


def dashboard_queries() -> list[tuple[str, str]]:
    """``[(panel title, PromQL), ...]`` of every target of the dashboard."""
    dash = json.loads(DASHBOARD.read_text())
    out = []
    for p in dash["panels"]:
        if p["type"] == "row":
            continue
        assert p["targets"], p["title"]
        out += [(p["title"], t["expr"]) for t in p["targets"]]
    return out


def test_dashboard_json_loads_and_every_panel_has_a_query():
    dash = json.loads(DASHBOARD.read_text())
    assert dash["uid"] == "slurmkit-gpu-health"
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    titles = {t for t, _ in dashboard_queries()}
    for want in ("Drained nodes by check", "GPUs by status", "Xid events by code", "ECC errors",
                 "Hook run time and deadline", "Energy per GPU in the range"):
        assert want in titles
    names = {v["name"] for v in dash["templating"]["list"]}
    assert names == {"datasource", "node"}


def _seconds(window: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    return sum(float(n) * units[u] for n, u in re.findall(r"(\d+)([smhd])", window))


def test_dashboard_counter_windows_span_two_hook_runs():
    """The hooks rewrite their counters when they run (HealthCheckInterval, default 300 s): a
    rate or increase over less than two runs alternates spikes and zeros. Every such window on a
    slurmkit counter is the panel's whole range or spans two default intervals; Xids are shown
    from when they were last counted (increase() misses a series' first appearance)."""
    from slurmkit.hooks.install import DEFAULT_INTERVAL_S

    windows = []
    for title, expr in dashboard_queries():
        for fn, metric, window in re.findall(r"\b(rate|increase|irate|delta)\((slurmkit_\w+)(?:\{[^}]*\})?\[([^\]]+)\]", expr):
            windows.append((title, metric, window))
            assert window == "$__range" or _seconds(window) >= 2 * DEFAULT_INTERVAL_S + 60, (title, expr)
        assert "slurmkit_gpu_xid_errors_total" not in expr or "increase(" not in expr, (title, expr)
    assert ("Mean power from the energy counter (15 min)", "slurmkit_gpu_energy_joules_total", "15m") in windows
    xid = dict(dashboard_queries())["Xid events by code"]
    assert "slurmkit_gpu_xid_last_timestamp_seconds" in xid


# ---- node_exporter + Prometheus on the hooks' textfiles ----------------------------------------

def _with(snap, energy_j: float, util_pct: int):
    s = snap
    for g in snap["gpus"]:
        s = set_value(s, g["index"], "total_energy_mj", int(energy_j * 1000))
        s = set_value(s, g["index"], "utilization_gpu_pct", util_pct)
    return s


@pytest.fixture
def stack(node, tmp_path):
    node.textfile_dir.mkdir(exist_ok=True)
    s = PromStack(tmp_path / "prom", node.textfile_dir)
    yield s
    s.stop()


def _kill_while_writing(path, where: str):
    """A process that dies by SIGKILL in the middle of replacing ``path`` with the hooks' writer:
    ``where`` = "write" (half the bytes written) or "rename" (all written, not renamed)."""
    code = f"""
import os, signal, sys
from slurmkit.hooks import textfile
real_write = os.write
def half(fd, data):
    real_write(fd, data[:len(data) // 2]); os.kill(os.getpid(), signal.SIGKILL)
def die(*a):
    os.kill(os.getpid(), signal.SIGKILL)
if {where!r} == "write":
    os.write = half
else:
    os.replace = die
textfile.write(sys.argv[1], "# TYPE slurmkit_node_drained_by_slurmkit gauge\\n" * 500 + "slurmkit_node_drained_by_slurmkit 7\\n")
"""
    p = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60)
    assert p.returncode == -signal.SIGKILL, p.stderr


def test_real_prometheus_reads_the_hooks_and_a_jobs_energy(node, healthy, stack, tmp_path):
    path, snap = healthy
    base_j = 1_000_000.0
    snaps = {}
    for name, e, u in (("prolog", base_j, 50), ("mid", base_j + 5_000, 50), ("end", base_j + 9_000, 50)):
        snaps[name] = tmp_path / f"{name}.json"
        snaps[name].write_text(json.dumps(_with(snap, e, u)))
    t_begin = time.time()
    node.write_config({"n1": snaps["prolog"]})
    assert node.run(node.prolog).returncode == 0
    info = stack.wait("the job's info series", 'slurmkit_gpu_job_info{job_id="101"}', predicate=lambda r: len(r) == 2)
    job_gpus = sorted(r["metric"]["gpu"] for r in info)
    assert {r["metric"]["user"] for r in info} == {"alice"} and all(r["metric"]["node"] == "n1" for r in info)
    got = stack.query('slurmkit_gpu_energy_joules_total{node="n1"}')
    assert sorted(float(r["value"][1]) for r in got) == [base_j] * 4
    assert stack.query("node_textfile_scrape_error")[0]["value"][1] == "0"
    # the periodic health check during the job: a higher energy reading
    node.write_config({"n1": snaps["mid"]})
    assert node.run(node.healthcheck, job_id=None, gpus=None).returncode == 0
    stack.wait("the mid-job reading", f'slurmkit_gpu_energy_joules_total{{node="n1",gpu="{job_gpus[0]}"}} == {base_j + 5000}')

    # a hook killed in the middle of replacing a file: the old file stays whole and readable
    node_file = node.textfile_dir / "slurmkit_n1_node.prom"
    before = node_file.read_text()
    for where in ("write", "rename"):
        _kill_while_writing(node_file, where)
        assert node_file.read_text() == before
    leftovers = [f for f in os.listdir(node.textfile_dir) if ".tmp" in f]
    assert leftovers and not any(f.endswith(".prom") for f in leftovers)  # node_exporter reads *.prom only
    text_now = stack.node_exporter_text()
    assert "node_textfile_scrape_error 0" in text_now and 'job_id="101"' in text_now

    node.write_config({"n1": snaps["end"]})
    assert node.run(node.epilog).returncode == 0
    stack.wait("the info series to go", 'slurmkit_gpu_job_info{job_id="101"}', predicate=lambda r: r == [])
    t_end = time.time()

    rows = P.read_jobs(stack.url, t_begin - 5, t_end + 5, step_s=1)
    job = rows[rows["job_id"] == "101"]
    assert len(job) == 1
    r = job.iloc[0]
    assert r["node"] == "n1" and bool(r["measured"]) and r["provenance"] == "prometheus"
    # the counter rose 9000 J on each of the job's 2 GPUs between the prolog and the epilog
    assert r["energy_mj"] == pytest.approx(2 * 9_000 * 1000)
    assert r["gpu_util_pct"] == pytest.approx(50.0)
    assert t_begin - 1 <= r["start_s"] <= r["end_s"] <= t_end + 1

    # the report takes them where the spool has none, with "prometheus" as provenance
    cap = tmp_path / "job.psv"
    cap.write_bytes(text([row(JobID="101", NodeList="n1", Start=str(int(r["start_s"]) - 1),
                              End=str(math.ceil(r["end_s"]) + 1), ElapsedRaw=str(math.ceil(r["end_s"]) - int(r["start_s"]) + 2),
                              Submit=str(int(t_begin) - 60), Eligible=str(int(t_begin) - 60))]))
    empty_spool = tmp_path / "spool.jsonl"
    empty_spool.write_text("")
    iso = lambda t: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))  # noqa: E731
    window = ["--start", iso(int(t_begin) - 120), "--end", iso(int(t_end) + 120)]  # 1 s steps
    res = CliRunner().invoke(cli, ["report", "weekly", *window, "--from-sacct", str(cap), "--spool", str(empty_spool),
                                   "--prometheus", stack.url, "--format", "json", "-o", str(tmp_path / "out"),
                                   "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output[res.output.index("{"):])
    assert rep["energy_sources"]["jobs"]["prometheus"] == 1 and rep["energy_sources"]["jobs"]["measured"] == 0
    assert rep["totals"]["energy_kwh_by_source"]["prometheus"] == pytest.approx(2 * 9_000 / 3.6e6)
    assert rep["efficiency"]["gpu_util_pct_weighted"] == pytest.approx(50.0)


def test_report_prometheus_malformed_url_is_a_one_line_error_unreachable_a_warning(tmp_path):
    cap = tmp_path / "job.psv"
    cap.write_bytes(text([row()]))
    args = ["report", "weekly", "--from-sacct", str(cap), "--format", "json,md", "-o", str(tmp_path / "out"),
            "--gpu-tdp-w", "400"]
    res = CliRunner().invoke(cli, args + ["--prometheus", "prometheus:9090"])
    assert res.exit_code == 2
    assert res.stderr.strip() == ("slurmkit: error: --prometheus: want an http(s) URL of Prometheus such as "
                                  "http://prometheus:9090, got 'prometheus:9090'")
    from prometheus_env import free_port

    # nothing listens there: the Monday report still goes out, with the spool / modelled energy
    url = f"http://127.0.0.1:{free_port()}"
    res = CliRunner().invoke(cli, args + ["--prometheus", url])
    assert res.exit_code == 0, res.output
    err = res.stderr.strip()
    assert err.startswith(f"slurmkit: warning: Prometheus {url}: cannot reach it:") and "\n" not in err
    assert err.endswith("energy and GPU utilization from the spool, Slurm or the model instead")
    rep = json.loads((tmp_path / "out" / "weekly.json").read_text())
    assert rep["data_quality"]["warnings"] == [err[len("slurmkit: warning: "):]]
    assert rep["energy_sources"]["jobs"]["modelled"] == 1
    assert f"Warning: Prometheus {url}: cannot reach it" in (tmp_path / "out" / "weekly.md").read_text()


def test_report_prometheus_that_never_answers_is_bounded(tmp_path):
    """A Prometheus that accepts the connection and never answers: the queries give up at the
    bound, the report is written with a warning."""
    import socket
    import threading

    from slurmkit.report.pipeline import weekly_report

    cap = tmp_path / "job.psv"
    cap.write_bytes(text([row()]))
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)  # the kernel completes the handshake; nobody reads or answers
    url = f"http://127.0.0.1:{srv.getsockname()[1]}"
    done = {}
    t = threading.Thread(target=lambda: done.setdefault("r", weekly_report(
        captures=[cap], formats=["json"], outdir=tmp_path / "out", prometheus_url=url,
        prometheus_timeout_s=2, gpu_tdp_w=400, warn=lambda m: None)), daemon=True)
    t.start()
    t.join(60)
    srv.close()
    assert "r" in done, "the report hung on a Prometheus that never answers"
    (w,) = done["r"].warnings
    assert w.startswith(f"Prometheus {url}: ") and ("timed out" in w or "within 2 s" in w), w
    assert done["r"].report["energy_sources"]["jobs"]["modelled"] == 1


def test_job_figures_join_is_exact_and_counts_a_counter_reset():
    info = [{"metric": {"node": "n1", "gpu": "0", "job_id": "7", "user": "u"}, "values": [[100, "1"], [110, "1"]]},
            {"metric": {"node": "n1", "gpu": "2", "job_id": "7", "user": "u"}, "values": [[100, "1"], [110, "1"]]}]
    energy = [{"metric": {"node": "n1", "gpu": "0"}, "values": [[95, "10"], [100, "10"], [105, "30"], [110, "40"], [115, "45"]]},
              # the driver reloaded at 105: the counter restarted from 0
              {"metric": {"node": "n1", "gpu": "2"}, "values": [[100, "500"], [105, "5"], [110, "8"], [115, "9"]]},
              {"metric": {"node": "n1", "gpu": "1"}, "values": [[100, "0"], [115, "999"]]}]
    util = [{"metric": {"node": "n1", "gpu": "0"}, "values": [[100, "1"], [105, "0.5"], [110, "0"], [115, "1"]]},
            {"metric": {"node": "n1", "gpu": "2"}, "values": [[100, "0.5"]]}]
    rows = P.job_figures(info, energy, util)
    assert len(rows) == 1
    r = rows[0]
    assert (r["job_id"], r["node"], r["start_s"], r["end_s"]) == ("7", "n1", 100.0, 110.0)
    assert r["energy_mj"] == (35 + 9) * 1000.0 and r["measured"]
    assert r["gpu_util_pct"] == pytest.approx(100 * (1 + 0.5 + 0 + 0.5) / 4)
    # a GPU without energy readings: not measured
    r = P.job_figures(info, energy[:1], util)[0]
    assert not r["measured"] and math.isnan(r["energy_mj"])


def _exposed(text: str) -> dict:
    """{(name, labels tuple): value} of node_exporter's /metrics (prometheus_client's parser)."""
    from prometheus_client.parser import text_string_to_metric_families

    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            assert key not in out, f"node_exporter serves {key} twice"
            out[key] = s.value
    return out


def test_real_node_exporter_gathers_every_hook_series_without_error(node, healthy, tmp_path):
    """Every hook's file at once, with a check that judges a GPU twice (app_clocks: graphics and
    memory clock) and warns on one of them: node_exporter keeps each series once, with the warn."""
    path, snap = healthy
    g1 = next(g for g in snap["gpus"] if g["index"] == 1)
    mem = g1["values"]["app_clock_mem_mhz"]["value"]
    warned = tmp_path / "memclock.json"
    warned.write_text(json.dumps(set_value(snap, 1, "app_clock_mem_mhz", mem - 100)))
    node.write_config({"n1": warned})
    assert node.run(node.prolog).returncode == 0
    assert node.run(node.healthcheck, job_id=None, gpus=None).returncode == 0
    assert node.run(node.epilog).returncode == 0
    assert node.run(node.prolog, job_id="102", gpus="1,3").returncode == 0
    stack = PromStack(tmp_path / "ne", node.textfile_dir, prometheus=False)
    try:
        stack.node_exporter_text()
        got = _exposed(stack.node_exporter_text())  # the second scrape counts the first one's errors
        log = stack.node_exporter_log()
    finally:
        stack.stop()
    assert got[("promhttp_metric_handler_errors_total", (("cause", "gathering"),))] == 0, log
    assert "collected before" not in log
    assert got[("node_textfile_scrape_error", ())] == 0
    status = {k: v for k, v in got.items() if k[0] == "slurmkit_health_check_status"}
    for hook in ("prolog", "healthcheck", "epilog"):
        app = {dict(k[1])["gpu"]: v for k, v in status.items()
               if dict(k[1])["check"] == "app_clocks" and dict(k[1])["hook"] == hook}
        assert app == {"1": 1}, hook  # the warn; the passes only in the count of passes
        assert got[("slurmkit_health_checks_passed", (("hook", hook), ("node", "n1")))] > 20
    # the node-level series are there once too (one job on GPUs 1,3 running)
    jobs = sorted((dict(k[1])["job_id"], dict(k[1])["gpu"]) for k in got if k[0] == "slurmkit_gpu_job_info")
    assert [j for j, _ in jobs] == ["102", "102"]


def test_job_figures_split_a_requeued_jobs_attempts():
    """Job 7 ran twice on the same GPU (requeued): info seen 100..110, then 130..150. Each attempt
    gets the counter's rise over its own span, the idle time between them goes to neither."""
    info = [{"metric": {"node": "n1", "gpu": "0", "job_id": "7", "user": "u"},
             "values": [[t, "1"] for t in (100, 105, 110, 130, 135, 140, 145, 150)]}]
    energy = [{"metric": {"node": "n1", "gpu": "0"},
               "values": [[95, "0"], [100, "0"], [105, "40"], [110, "80"], [115, "100"], [125, "120"],
                          [130, "120"], [140, "300"], [150, "500"], [155, "520"]]}]
    util = [{"metric": {"node": "n1", "gpu": "0"}, "values": [[95, "0"], [125, "0"]]}]  # idle GPU: 0, not missing
    for attempts in ({"7": [99.0, 129.0]}, None):   # by sacct Start; without them, by the gap
        rows = P.job_figures(info, energy, util, step_s=5, attempts=attempts)
        assert [(r["start_s"], r["end_s"], r["energy_mj"]) for r in rows] == [
            (100.0, 110.0, 100 * 1000.0), (130.0, 150.0, 400 * 1000.0)]
        assert [r["gpu_util_pct"] for r in rows] == [0.0, 0.0]
    # the attempts' Start splits them even when the series never went away in between
    info2 = [{"metric": {"node": "n1", "gpu": "0", "job_id": "7"}, "values": [[t, "1"] for t in range(100, 151, 5)]}]
    rows = P.job_figures(info2, energy, util, step_s=5, attempts={"7": [99.0, 129.0]})
    assert [(r["start_s"], r["end_s"]) for r in rows] == [(100.0, 125.0), (130.0, 150.0)]
    assert sum(r["energy_mj"] for r in rows) == 520 * 1000.0


def test_real_prometheus_gives_each_attempt_of_a_requeued_job_its_own_energy(node, healthy, stack, tmp_path):
    """The same job id twice on the same GPUs (requeued), idle energy between the attempts; the
    report's allocation rows are its two sacct attempts: each gets its own energy, once."""
    path, snap = healthy
    base_j = 2_000_000.0
    per_gpu = {"a1": 4_000.0, "a2": 6_000.0}  # J per GPU in each attempt; 1000 J idle in between
    readings = [("p1", base_j), ("e1", base_j + 4_000), ("p2", base_j + 5_000), ("e2", base_j + 11_000)]
    snaps = {}
    for name, e in readings:
        snaps[name] = tmp_path / f"{name}.json"
        snaps[name].write_text(json.dumps(_with(snap, e, 0)))  # idle-looking GPUs: utilization 0
    t = {}
    for attempt, (pro, epi) in (("a1", ("p1", "e1")), ("a2", ("p2", "e2"))):
        node.write_config({"n1": snaps[pro]})
        t[attempt + "_start"] = time.time()
        assert node.run(node.prolog).returncode == 0
        stack.wait("the attempt's info series", 'slurmkit_gpu_job_info{job_id="101"}', predicate=lambda r: len(r) == 2)
        time.sleep(2)  # the attempt runs 2 s (a duration in the scenario, not a wait)
        node.write_config({"n1": snaps[epi]})
        assert node.run(node.epilog).returncode == 0
        stack.wait("the info series to go", 'slurmkit_gpu_job_info{job_id="101"}', predicate=lambda r: r == [])
        t[attempt + "_end"] = time.time()
        time.sleep(4)  # slurmctld requeues the job; the next attempt starts later
    s1, e1, s2, e2 = (int(t["a1_start"]), math.ceil(t["a1_end"]), int(t["a2_start"]), math.ceil(t["a2_end"]))
    assert e1 < s2
    cap = tmp_path / "requeued.psv"
    sub = s1 - 60
    cap.write_bytes(text([row(JobID="101", NodeList="n1", State="REQUEUED", Submit=str(sub), Eligible=str(sub),
                              Start=str(s1), End=str(e1), ElapsedRaw=str(e1 - s1)),
                          row(JobID="101", NodeList="n1", Submit=str(sub), Eligible=str(s2 - 1),
                              Start=str(s2), End=str(e2), ElapsedRaw=str(e2 - s2))]))
    empty_spool = tmp_path / "spool.jsonl"
    empty_spool.write_text("")
    iso = lambda x: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(x))  # noqa: E731
    res = CliRunner().invoke(cli, ["report", "weekly", "--start", iso(s1 - 120), "--end", iso(e2 + 120),
                                   "--from-sacct", str(cap), "--spool", str(empty_spool), "--prometheus", stack.url,
                                   "--format", "json,csv", "-o", str(tmp_path / "out"), "--json"],
                         catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output[res.output.index("{"):])
    # one job (two allocation rows); both attempts measured through Prometheus, none modelled
    assert rep["totals"]["allocation_rows"] == 2 and rep["totals"]["requeued_attempts"] == 1
    assert rep["energy_sources"]["jobs"]["prometheus"] == 1 and rep["energy_sources"]["jobs"]["modelled"] == 0
    # the idle energy between the attempts is nobody's
    assert rep["totals"]["energy_kwh_by_source"]["prometheus"] == pytest.approx(2 * (per_gpu["a1"] + per_gpu["a2"]) / 3.6e6)
    assert rep["efficiency"]["gpu_util_pct_weighted"] == 0.0   # measured as 0, not missing
    import pandas as pd

    jobs = pd.read_csv(tmp_path / "out" / "jobs.csv").sort_values("start")
    assert list(jobs["energy_source"]) == ["prometheus", "prometheus"]
    assert list(jobs["energy_kwh"]) == pytest.approx([2 * per_gpu["a1"] / 3.6e6, 2 * per_gpu["a2"] / 3.6e6])
    assert list(jobs["spool_gpu_util_pct"]) == [0.0, 0.0]


def test_every_check_id_alerts_at_fail_and_at_warn(tmp_path):
    """Each check id of checks.toml, at fail (2) and at warn (1) in a node's newest hook run, gives
    its alert in promtool (SlurmkitGpuCheckFailing, SlurmkitCheckWarning): none is silent, as
    docs/hooks.md says."""
    import tomllib

    from slurmkit.hooks.metrics import check_of

    tool = need("promtool")["promtool"]
    checks = tomllib.loads((REPO / "slurmkit" / "health" / "checks.toml").read_text())["checks"]
    ids = sorted(check_of(f"slurmkit: {c}: x") for c in checks)  # nvml-timeout is nvml_timeout in the series
    assert len(ids) == len(checks) >= 40 and "ib_counters" in ids and "nvml_timeout" in ids
    series, fail_alerts, warn_alerts = [], [], []
    for status, node, alerts in ((2, "nf", fail_alerts), (1, "nw", warn_alerts)):
        series.append(f"      - series: 'slurmkit_hook_last_run_timestamp_seconds{{node=\"{node}\",hook=\"healthcheck\"}}'\n"
                      f"        values: '0+60x40'\n"
                      f"      - series: 'slurmkit_node_drained_by_slurmkit{{node=\"{node}\"}}'\n        values: '0x40'\n")
        for c in ids:
            series.append(f"      - series: 'slurmkit_health_check_status{{node=\"{node}\",hook=\"healthcheck\","
                          f"check=\"{c}\",gpu=\"0\"}}'\n        values: '{status}x40'\n")
            ann = ((f"{c} fails on {node} GPU0, node not drained by slurmkit", "The hooks' log (syslog) has the value "
                    "and limit; slurmkit_observed_drains_total counts the drains it would have set.") if status == 2 else
                   (f"{c} warns on {node} GPU0", "A warn-level result (no drain). The hooks' log (syslog) has the value "
                    "and limit."))
            alerts.append(f"          - exp_labels: {{severity: {'warning' if status == 2 else 'info'}, node: {node}, "
                          f"gpu: \"0\", check: {c}}}\n"
                          f"            exp_annotations: {{summary: {json.dumps(ann[0])}, description: {json.dumps(ann[1])}}}\n")
    test = tmp_path / "every_check_test.yml"
    test.write_text(f"rule_files: [{json.dumps(str(RULES))}]\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n"
                    "    input_series:\n" + "".join(series)
                    + "    alert_rule_test:\n      - eval_time: 35m\n        alertname: SlurmkitGpuCheckFailing\n"
                    "        exp_alerts:\n" + "".join(fail_alerts)
                    + "      - eval_time: 35m\n        alertname: SlurmkitCheckWarning\n        exp_alerts:\n"
                    + "".join(warn_alerts))
    r = subprocess.run([tool, "test", "rules", str(test)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout[-3000:] + r.stderr
    assert "none is deliberately" in (REPO / "docs" / "hooks.md").read_text().replace("\n   ", " ")
