"""A sysfs read that blocks (a counter file that is a FIFO in the fake tree) is the fabric read's
own outcome, naming the HCA, not an NVML timeout; the ports read before it are kept."""

from __future__ import annotations

import os
import time

from fake_sysfs import healthy_tree

from slurmkit.health.fabric import check_ib_port, read_node_fabric
from slurmkit.health.state import NodeState


def test_a_blocking_counter_file_times_out_naming_the_hca(tmp_path):
    root = healthy_tree(tmp_path / "sys", hcas=("mlx5_0", "mlx5_5"))
    f = root / "class" / "infiniband" / "mlx5_5" / "ports" / "1" / "counters" / "symbol_error"
    f.unlink()
    os.mkfifo(f)  # open() blocks: no writer, as a hung driver's read would
    state = NodeState(node="n1", source="test", gpus=[])
    spec = {"hcas": [{"device": "mlx5_0"}, {"device": "mlx5_5"}], "timeout_s": 0.5}
    t0 = time.monotonic()
    read_node_fabric(state, root, spec)
    assert time.monotonic() - t0 < 5
    assert [p["hca"] for p in state.ib_ports] == ["mlx5_0", "mlx5_5"]
    assert state.ib_ports[1]["timed_out"]
    res = check_ib_port(state, None)
    assert [r.status.name for r in res] == ["PASS", "FAIL"]
    assert res[1].reason() == "slurmkit: ib_port: sysfs read of mlx5_5 timed out"
    assert "nvml" not in res[1].reason()
    # the writer end releases the abandoned reader thread
    fd = os.open(f, os.O_WRONLY | os.O_NONBLOCK)
    os.close(fd)
