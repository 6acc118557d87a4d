"""The fabric in monitoring, with the real programs: node_exporter's infiniband collector reads
the same fake sysfs tree as the hooks (--path.sysfs), its textfile collector the expected ports
the health check writes (slurmkit_fabric_port_expected_rate_bytes_per_second), and a real
Prometheus evaluates contrib/prometheus/slurmkit.rules.yml over both: a port down and a port
trained at 100 of 400 Gb/s are named by HCA, port, node, expected rate and link layer."""

from __future__ import annotations

import time

import pytest

from fake_sysfs import sandbox_tree, set_port
from prometheus_env import PromStack

from conftest import REPO

RULES = REPO / "contrib" / "prometheus" / "slurmkit.rules.yml"
PCIS = {"mlx5_0": "0000:18:00.0", "mlx5_1": "0000:40:00.0", "mlx5_2": "0000:4f:00.0", "mlx5_3": "0000:5e:00.0"}


@pytest.fixture
def fabric_stack(node, healthy, tmp_path):
    path, _ = healthy
    site = tmp_path / "site.toml"
    site.write_text('extends = "sandbox"\n[health]\nmode = "observe"\n')
    root = sandbox_tree(tmp_path / "sys", pcis=PCIS)
    node.write_config({"n1": path}, mode=None, extra=f'profile = "{site}"\n', sysfs={"n1": root})
    node.textfile_dir.mkdir(exist_ok=True)
    s = PromStack(tmp_path / "prom", node.textfile_dir, rule_files=[RULES], sysfs=root)
    yield root, s
    s.stop()


def test_port_down_and_slow_alert_naming_hca_port_and_expected_rate(node, fabric_stack):
    root, stack = fabric_stack
    set_port(root, "mlx5_2", state="DOWN", phys="Polling")
    set_port(root, "mlx5_1", rate=100)
    set_port(root, "mlx5_4", rate=100, link_layer="Ethernet", state="DOWN", phys="Disabled")  # the storage NIC
    r = node.run(node.healthcheck, job_id=None, gpus=None)
    assert "would drain n1: slurmkit: ib mlx5_2/1 ibp79s0: down (DOWN/Polling) (+1 more)" in r.stderr, r.stderr
    assert "warn: ib_port mlx5_4/1: down (DOWN/Disabled)" in r.stderr, r.stderr
    assert "fail: ib_rate mlx5_1/1 ibp64s0: 100 of 400 Gb/s" in r.stderr
    # node_exporter's own series for the ports, slurmkit's expectation beside them
    got = stack.wait("node_exporter's port state", 'node_infiniband_state_id{device="mlx5_2"}')
    assert got[0]["value"][1] == "1" and got[0]["metric"]["port"] == "1"
    exp = stack.wait("the expected ports", "slurmkit_fabric_port_expected_rate_bytes_per_second",
                     predicate=lambda r: len(r) == 5)  # 4 compute HCAs and the storage NIC mlx5_4
    m = {e["metric"]["device"]: e for e in exp}
    assert m["mlx5_2"]["metric"]["netdev"] == "ibp79s0" and m["mlx5_2"]["value"][1] == "50000000000"
    assert {e["metric"]["instance"] for e in exp} == {stack.node_exporter_addr}

    def one(name):
        return stack.wait(name, f'ALERTS{{alertname="{name}"}}', predicate=lambda r: len(r) >= 1) and \
            stack.alerts(name)

    down = sorted(stack.wait("both ports down", 'ALERTS{alertname="SlurmkitFabricPortDown"}',
                             predicate=lambda r: len(r) == 2) and stack.alerts("SlurmkitFabricPortDown"),
                  key=lambda a: a["labels"]["device"])
    assert [a["annotations"]["summary"] for a in down] == ["mlx5_2 port 1 down on n1 (expected 400 Gb/s, InfiniBand)",
                                                          "mlx5_4 port 1 down on n1 (expected 100 Gb/s, Ethernet)"]
    assert down[0]["labels"]["severity"] == "critical" and down[0]["labels"]["pci"] == "0000:4f:00.0"
    # the storage NIC warns on the node, so its alert is a warning
    assert (down[1]["labels"]["severity"], down[1]["labels"]["role"], down[1]["labels"]["tier"]) == (
        "warning", "other", "warn")
    slow = one("SlurmkitFabricPortRateLow")
    assert [a["annotations"]["summary"] for a in slow] == ["mlx5_1 port 1 on n1: rate 100 of 400 Gb/s (InfiniBand)"]
    assert stack.alerts("SlurmkitFabricPortMissing") == []

    # the port comes back: the next run's file and node_exporter both say so, the alert goes
    set_port(root, "mlx5_2")
    set_port(root, "mlx5_4", rate=100, link_layer="Ethernet")
    assert node.run(node.healthcheck, job_id=None, gpus=None).returncode == 0
    stack.wait("mlx5_2 back", 'ALERTS{alertname="SlurmkitFabricPortDown"}', predicate=lambda r: r == [])


@pytest.fixture
def fast_rules(tmp_path):
    """The shipped rules with every `for:` cut to 2 s (promtool tests the real durations)."""
    import re

    rules = tmp_path / "slurmkit.rules.yml"
    rules.write_text(re.sub(r"(\n\s+for: )\d+m\n", r"\g<1>2s\n", RULES.read_text()))
    assert "for: 2m" not in rules.read_text()
    return rules


def test_a_failing_infiniband_collector_warns_and_reports_no_port_missing(node, healthy, tmp_path, fast_rules):
    """One counter file node_exporter cannot parse fails its infiniband collector whole
    (node_exporter issue #966: a counter reading "N/A (no PMA)"; node_exporter issue #3265: one
    unreadable counter file): node_scrape_collector_success{collector="infiniband"} 0 and no
    node_infiniband_* series at all, while the textfile collector goes on exporting the ports
    slurmkit expects. The real node_exporter here (Debian's 1.5) skips "N/A (no PMA)" by now and
    fails on a bare "N/A". The shipped rules then warn that the collector fails and page no port
    as missing."""
    path, _ = healthy
    site = tmp_path / "site.toml"
    site.write_text('extends = "sandbox"\n[health]\nmode = "observe"\n')
    root = sandbox_tree(tmp_path / "sys", pcis=PCIS)
    node.write_config({"n1": path}, mode=None, extra=f'profile = "{site}"\n', sysfs={"n1": root})
    node.textfile_dir.mkdir(exist_ok=True)
    stack = PromStack(tmp_path / "prom", node.textfile_dir, rule_files=[fast_rules], sysfs=root)
    try:
        assert node.run(node.healthcheck, job_id=None, gpus=None).returncode == 0
        stack.wait("the expected ports", "slurmkit_fabric_port_expected_rate_bytes_per_second",
                   predicate=lambda r: len(r) == 5)
        stack.wait("the ports' state", "node_infiniband_state_id", predicate=lambda r: len(r) == 5)
        (root / "class" / "infiniband" / "mlx5_1" / "ports" / "1" / "counters" / "VL15_dropped").write_text("N/A\n")
        stack.wait("the collector to fail", 'node_scrape_collector_success{collector="infiniband"} == 0')
        assert stack.query("node_infiniband_state_id") == []  # every port's series gone, not only mlx5_1's
        assert "collector failed" in stack.node_exporter_log() and "N/A" in stack.node_exporter_log()
        failing = stack.wait("the collector alert", 'ALERTS{alertname="SlurmkitInfinibandCollectorFailing",'
                             'alertstate="firing"}')
        assert [a["metric"]["instance"] for a in failing] == [stack.node_exporter_addr]
        assert stack.alerts("SlurmkitInfinibandCollectorFailing")[0]["annotations"]["summary"] == (
            f"infiniband collector failing on {stack.node_exporter_addr}")
        time.sleep(6)  # several evaluations past the 2 s `for`
        assert stack.alerts("SlurmkitFabricPortMissing") == [] and stack.alerts("SlurmkitFabricPortDown") == []
        # the rule as it was (any collector_success series, 0 included) pages all five ports
        old = stack.query('slurmkit_fabric_port_expected_rate_bytes_per_second{kind="rdma"} unless on (instance, '
                          'device, port) node_infiniband_state_id and on (instance) '
                          'node_scrape_collector_success{collector="infiniband"}')
        assert len(old) == 5
    finally:
        stack.stop()
