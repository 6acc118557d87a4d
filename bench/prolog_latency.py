#!/usr/bin/env python3
"""Wall time of the whole prolog (installed shim included) vs ``python -c pass``, same run.

Sets up a node directory like the hook tests do (slurm.conf, gres.conf, 8 GPU device files,
hooks installed by the real installer), records a healthy 8-GPU snapshot through the real
pynvml from the test-built fake libnvidia-ml (needs gcc; or pass ``--snapshot FILE``), with the
checks beyond NVML on (a site profile extending the sandbox's, whose node type lists 4 compute
InfiniBand HCAs, read from a fake sysfs tree; ``--no-fabric``: without), then runs the prolog shim and a bare interpreter alternately, fresh process each time, and prints the
medians. Last line: the ratio (target: within 5x).

    .venv/bin/python bench/prolog_latency.py [--runs 21] [--snapshot FILE]

Run as root (device files are made with mknod).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))


def _time(argv, env) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"{argv[0]} exited {r.returncode}: {r.stderr[-500:]}")
    return dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--snapshot", help="a recorded healthy snapshot to replay (default: record 8 fake GPUs)")
    ap.add_argument("--no-fabric", action="store_true", help="no profile, so no InfiniBand port checks")
    args = ap.parse_args()
    from nodeenv import Node, record_snapshot

    work = Path(tempfile.mkdtemp(prefix="slurmkit-bench-"))
    if args.snapshot:
        snap = Path(args.snapshot)
    else:
        from fake_nvml import build

        fake = build(work / "lib")
        snap = work / "healthy8.json"
        record_snapshot(fake, snap, gpus=8)
    node = Node(work / "node", slurm_conf_text="ClusterName=b\nNodeName=n[1-2] CPUs=2 Gres=gpu:h100:8\n", gpus=8)
    if args.no_fabric:
        node.write_config({"n1": snap})
    else:
        from fake_sysfs import healthy_tree

        site = work / "site.toml"
        site.write_text('extends = "sandbox"\n[health]\nexpected_gpu_count = 8\n')
        root = healthy_tree(work / "sys", hcas=("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"))
        node.write_config({"n1": snap}, extra=f'profile = "{site}"\n', sysfs={"n1": root})
    env = {"SLURMD_NODENAME": "n1", "SLURM_CONF": str(node.slurm_conf), "SLURM_JOB_ID": "1",
           "SLURM_JOB_USER": "root", "SLURM_JOB_UID": "0", "SLURM_JOB_GPUS": "0,1,2,3,4,5,6,7"}
    bare, prolog = [], []
    _time([str(node.prolog)], env)  # warm the page cache
    for _ in range(args.runs):
        bare.append(_time([sys.executable, "-c", "pass"], env))
        prolog.append(_time([str(node.prolog)], env))
    b, p = statistics.median(bare), statistics.median(prolog)
    shutil.rmtree(work, ignore_errors=True)
    print(f"snapshot: {'--snapshot ' + str(snap) if args.snapshot else 'recorded from the fake NVML'} (8 GPUs, replay)")
    print("InfiniBand checks: " + ("off (--no-fabric)" if args.no_fabric else "on, 4 HCAs from a fake sysfs tree"))
    print(f"runs: {args.runs} each, alternating, fresh interpreter per run")
    print(f"python -c pass: median {b * 1000:.1f} ms")
    print(f"prolog (shim + checks + textfile): median {p * 1000:.1f} ms")
    print(f"ratio prolog / bare: {p / b:.2f}")


if __name__ == "__main__":
    main()
