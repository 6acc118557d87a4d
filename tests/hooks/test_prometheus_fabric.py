"""The fabric in monitoring, with the real programs: node_exporter's infiniband collector reads
the same fake sysfs tree as the hooks (--path.sysfs), its textfile collector the expected ports
the health check writes (slurmkit_fabric_port_expected_rate_bytes_per_second), and a real
Prometheus evaluates contrib/prometheus/slurmkit.rules.yml over both: a port down and a port
trained at 100 of 400 Gb/s are named by HCA, port, node, expected rate and link layer."""

from __future__ import annotations

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
