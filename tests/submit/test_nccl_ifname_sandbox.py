"""GLOO_SOCKET_IFNAME resolved on each node at job start, in the real Slurm sandbox.

The sandbox's nodes talk over the loopback (NodeAddr 127.0.1.<i>), so gloo must bind to ``lo``.
The profile here says so the way the public training scripts do (awsome-distributed-training's
``NCCL_SOCKET_IFNAME=^docker,lo,veth,eth``): by *excluding* every other interface this machine
has. NCCL_SOCKET_IFNAME reaches the ranks unchanged; each node's bind wrapper turns the rule into
the concrete interface gloo needs, and a 2-node torchrun all_reduce over gloo proves it works.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from slurmkit.submit import api
from slurmkit.submit.backend import CliBackend

from ranks import REPORT

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(300)]


def _others_than_lo() -> list[str]:
    """This machine's up interfaces with an address, other than the loopback (`ip -o addr`)."""
    out = subprocess.run(["ip", "-o", "addr", "show"], capture_output=True, text=True, check=True).stdout
    names = dict.fromkeys(line.split()[1] for line in out.splitlines() if line.strip())
    return [n for n in names if n != "lo"]


def test_gloo_interface_is_resolved_on_each_node_from_an_exclusion_rule(sandbox, tmp_path):
    others = _others_than_lo()
    rule = "^" + ",".join(others) if others else "lo"
    site = tmp_path / "site.toml"
    site.write_text(f'extends = "{Path(sandbox.profile_path).resolve()}"\n[nccl]\nsocket_ifname = "{rule}"\n')
    script = api.render_script("torchrun", [sys.executable, "-c", REPORT, str(tmp_path)], site=str(site), nodes=2)
    assert f"export NCCL_SOCKET_IFNAME={rule}\n" in script.replace("'", "")
    assert "export GLOO_SOCKET_IFNAME=" not in script          # not the rule: gloo takes names
    job = api.submit("torchrun", [sys.executable, "-c", REPORT, str(tmp_path)], site=str(site), nodes=2,
                     time="5:00", backend=CliBackend(env=sandbox.env()), chdir=str(tmp_path),
                     output=str(tmp_path / "job-%j.out"))
    state = job.wait(timeout=180, poll_s=2)
    logs = "\n".join(p.read_text(errors="replace")[-3000:] for p in tmp_path.glob("job-*.out"))
    assert state == "COMPLETED", f"job {job.id} ended {state}:\n{logs}"
    reports = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("rank*.json"))]
    assert len({r["node"] for r in reports}) == 2 and reports
    for r in reports:
        assert r["nccl_ifname"] == rule                     # NCCL gets the rule unchanged
        assert r["gloo_ifname"] == "lo"                     # gloo got the node's interface the rule allows
        assert r["sum"] == len(reports) * (len(reports) + 1) / 2   # and the gloo all_reduce ran over it
