"""Round trip profile -> gres.conf / topology.conf -> real Slurm: the sandbox runs with the
generated files and `scontrol show node` / `scontrol show topology` agree with its profile."""

from __future__ import annotations

import re
import stat

import hostlist
import pytest

from slurmkit.profile import load_profile
from slurmkit.slurm.commands import run
from slurmkit.profile.slurmconf import render_gres_conf, render_topology_conf

pytestmark = [pytest.mark.slurm, pytest.mark.versions]


def _scontrol(sandbox, *args) -> str:
    return run(["scontrol", *args], slurm_conf=str(sandbox.slurm_conf), timeout=30).stdout


def test_sandbox_runs_the_generated_files(sandbox):
    p = load_profile(sandbox.profile_path)
    etc = sandbox.slurm_conf.parent
    assert (etc / "gres.conf").read_text() == render_gres_conf(p, device_dir=str(sandbox.device_dir))
    assert (etc / "topology.conf").read_text() == render_topology_conf(p)
    for line in (etc / "gres.conf").read_text().splitlines():
        m = re.search(r"File=(\S+)", line)
        if m:
            assert stat.S_ISCHR((sandbox.device_dir / m.group(1).rsplit("/", 1)[1]).stat().st_mode)


def test_scontrol_show_node_gres_matches_profile(sandbox):
    p = load_profile(sandbox.profile_path)
    assert set(p.nodes()) == set(sandbox.node_names)
    for node in p.nodes():
        nt = p.node_type_of(node)
        out = _scontrol(sandbox, "-o", "show", "node", node)
        gres = re.search(r"\bGres=(\S+)", out).group(1)
        assert re.sub(r"\(.*\)$", "", gres) == f"gpu:{nt.gpu_model}:{nt.gpu_count}"
        # the sockets Slurm places the GPUs on (from gres.conf Cores=) are the profile's NUMA nodes
        numa = sorted({g.numa_node for g in nt.gpus})
        assert gres.endswith(f"(S:{numa[0]}-{numa[-1]})" if len(numa) > 1 else f"(S:{numa[0]})"), gres
        assert f"gres/gpu:{nt.gpu_model}={nt.gpu_count}" in out  # CfgTRES counts the typed GPUs


def test_scontrol_show_topology_matches_profile(sandbox):
    p = load_profile(sandbox.profile_path)
    out = _scontrol(sandbox, "show", "topology")
    seen = {}
    for line in out.splitlines():
        f = dict(x.split("=", 1) for x in line.split() if "=" in x)
        if "SwitchName" in f:
            seen[f["SwitchName"]] = f
    for leaf in p.fabric.leaves:
        assert seen[leaf.name]["Level"] == "0"
        assert hostlist.expand_hostlist(seen[leaf.name]["Nodes"]) == list(leaf.node_names)
    for spine in p.fabric.spines:
        assert seen[spine.name]["Level"] == "1"
        assert hostlist.expand_hostlist(seen[spine.name]["Switches"]) == list(spine.switches)
        under = [n for s in spine.switches for n in p.leaves()[s]]
        assert hostlist.expand_hostlist(seen[spine.name]["Nodes"]) == under
    assert set(seen) == {l.name for l in p.fabric.leaves} | {s.name for s in p.fabric.spines}
