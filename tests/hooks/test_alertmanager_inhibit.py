"""contrib/alertmanager/slurmkit.yml with the real programs: amtool checks it, and a real
Alertmanager given the alerts Prometheus sends for a drained node shows the node's per-check
alerts inhibited (paged once, by SlurmkitNodeDrained) and another node's left alone. The alerts'
labels are what contrib/prometheus/slurmkit.rules.yml gives them (its promtool tests pin them)."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.request

import pytest

from prometheus_env import free_port, need

from conftest import REPO
from slurmkit.waiting import wait_until

CONFIG = REPO / "contrib" / "alertmanager" / "slurmkit.yml"
RULES = REPO / "contrib" / "prometheus" / "slurmkit.rules.yml"


def test_amtool_checks_the_config():
    tool = need("amtool")["amtool"]
    r = subprocess.run([tool, "check-config", str(CONFIG)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 inhibit rules" in r.stdout


def test_every_alert_the_inhibit_rules_name_is_a_shipped_rule():
    rules = set(re.findall(r"^\s+- alert: (\w+)$", RULES.read_text(), re.M))
    matchers = [line for line in CONFIG.read_text().splitlines() if line.strip().startswith("- alertname")]
    named = {n for line in matchers for n in re.findall(r"Slurmkit\w+", line)}
    assert len(matchers) == 4 and named and named <= rules, named - rules


@pytest.fixture
def alertmanager(tmp_path):
    exe = need("prometheus-alertmanager")["prometheus-alertmanager"]
    port = free_port()
    log = open(tmp_path / "alertmanager.log", "w")
    proc = subprocess.Popen([exe, f"--config.file={CONFIG}", f"--storage.path={tmp_path / 'data'}",
                             f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="],
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/api/v2"

    def ready():
        try:
            with urllib.request.urlopen(f"{url}/status", timeout=5) as r:
                return r.status == 200
        except OSError:
            return None

    try:
        wait_until(ready, 30, 0.2, "alertmanager listening", lambda: (tmp_path / "alertmanager.log").read_text())
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _post(url, alerts):
    req = urllib.request.Request(f"{url}/alerts", data=json.dumps(alerts).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 200


def _alerts(url) -> dict:
    with urllib.request.urlopen(f"{url}/alerts", timeout=10) as r:
        got = json.loads(r.read())
    return {(a["labels"]["alertname"], a["labels"].get("node", "")): a["status"] for a in got}


def test_a_drained_nodes_check_alerts_are_not_paged_twice(alertmanager):
    """n2 drained by slurmkit for Xid 79 (its hardware Xid and pending remap alerts too); n3 has
    a hardware Xid but is not drained (observe mode): its Xid alert pages."""
    inst = {"instance": "gpu02:9100", "job": "node"}
    port = {"instance": "gpu03:9100", "job": "node", "device": "mlx5_2", "port": "1", "link_layer": "InfiniBand",
            "role": "compute", "tier": "fail", "netdev": "ibp79s0", "pci": "0000:4f:00.0", "expected_gbps": "400",
            "kind": "rdma"}
    alerts = [
        {"labels": {"alertname": "SlurmkitNodeDrained", "severity": "warning", "node": "n2", **inst}},
        {"labels": {"alertname": "SlurmkitGpuHardwareXid", "severity": "critical", "node": "n2", "gpu": "1",
                    "pci_bus_id": "0000:3b:00.0", "xid": "79", "class": "hardware", **inst}},
        {"labels": {"alertname": "SlurmkitGpuRowRemapPending", "severity": "warning", "node": "n2", "gpu": "1",
                    "pci_bus_id": "0000:3b:00.0", **inst}},
        {"labels": {"alertname": "SlurmkitHookOwnTrouble", "severity": "warning", "node": "n2", "hook": "prolog"}},
        {"labels": {"alertname": "SlurmkitGpuHardwareXid", "severity": "critical", "node": "n3", "gpu": "0",
                    "pci_bus_id": "0000:19:00.0", "xid": "48", "class": "hardware", "instance": "gpu03:9100",
                    "job": "node"}},
        # a port down on n3 and its slow rate: the port pages once
        {"labels": {"alertname": "SlurmkitFabricPortDown", "severity": "critical", "node": "n3", **port}},
        {"labels": {"alertname": "SlurmkitFabricPortRateLow", "severity": "critical", "node": "n3",
                    **{k: v for k, v in port.items() if k not in ("pci", "kind")}}},
    ]
    _post(alertmanager, alerts)
    got = wait_until(lambda: (a := _alerts(alertmanager)) and len(a) == len(alerts) and a, 30, 0.5,
                     "the alerts in alertmanager")
    state = {k: (s["state"], bool(s["inhibitedBy"])) for k, s in got.items()}
    assert state == {
        ("SlurmkitNodeDrained", "n2"): ("active", False),
        ("SlurmkitGpuHardwareXid", "n2"): ("suppressed", True),
        ("SlurmkitGpuRowRemapPending", "n2"): ("suppressed", True),
        ("SlurmkitHookOwnTrouble", "n2"): ("active", False),   # slurmkit's own trouble is not the drain's
        ("SlurmkitGpuHardwareXid", "n3"): ("active", False),
        ("SlurmkitFabricPortDown", "n3"): ("active", False),
        ("SlurmkitFabricPortRateLow", "n3"): ("suppressed", True),
    }
