"""What each rank of a sandbox job saw, and the check of it against the sandbox's profile.

``REPORT``: a Python program (``python -c REPORT OUTDIR``) every rank runs: it all_reduces with
torch.distributed (gloo) and writes ``rank<N>.json`` (rank, world size, GPU, CUDA_VISIBLE_DEVICES,
NCCL_IB_HCA, CPU affinity, node, GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME). ``check_ranks`` compares those files with the profile;
``profile`` (module fixture): ``(raw profile dict, the default partition's node type dict)``.
Shared by the submit and remote sandbox tests.
"""

import json
import tomllib

import pytest

REPORT = """
import json, os, sys
import torch, torch.distributed as dist
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
rep = {"rank": rank, "world_size": world, "local_rank": int(os.environ["LOCAL_RANK"]),
       "gpu": int(os.environ["SLURMKIT_GPU"]), "visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
       "hca": os.environ.get("NCCL_IB_HCA"), "affinity": sorted(os.sched_getaffinity(0)),
       "node": os.environ["SLURMD_NODENAME"], "sum": t.item(),
       "gloo_ifname": os.environ.get("GLOO_SOCKET_IFNAME"), "nccl_ifname": os.environ.get("NCCL_SOCKET_IFNAME")}
print(f"rank {rank} of {world} reporting", flush=True)
with open(os.path.join(sys.argv[1], f"rank{rank}.json"), "w") as fh:
    json.dump(rep, fh)
dist.destroy_process_group()
"""

@pytest.fixture(scope="module")
def profile(sandbox):
    with open(sandbox.profile_path, "rb") as fh:
        raw = tomllib.load(fh)
    part = next(p for p in raw["partitions"].values() if p.get("default"))
    return raw, raw["node_types"][part["node_type"]]



def check_ranks(tmp_path, profile, nodes, gpus_per_node, node_gpus=None):
    raw, nt = profile
    reports = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("rank*.json"))]
    world = nodes * gpus_per_node
    assert sorted(r["rank"] for r in reports) == list(range(world))
    compute = [n["device"] for n in nt["nics"] if n["role"] == "compute"]
    by_node = {}
    for r in reports:
        assert r["world_size"] == world
        assert r["sum"] == world * (world + 1) / 2          # the all_reduce really ran
        assert r["visible"] is not None and len(r["visible"].split(",")) == gpus_per_node  # device LOCAL_RANK exists
        assert r["hca"] == "=" + ",".join(compute)           # same HCA list for every rank
        assert r["affinity"] == sorted(nt["gpus"][r["gpu"]]["cpus"])   # NUMA-local CPUs of its GPU
        by_node.setdefault(r["node"], []).append((r["local_rank"], r["gpu"]))
    assert len(by_node) == nodes
    for pairs in by_node.values():
        assert sorted(lr for lr, _ in pairs) == list(range(gpus_per_node))
        gpus = [g for _, g in sorted(pairs)]                # device order follows Slurm's GPU order
        assert gpus == sorted(gpus) and len(set(gpus)) == gpus_per_node
        assert node_gpus is None or gpus == node_gpus
