"""A tiny torch.distributed training job for the sandbox demo (gloo on CPU).

Run by ``slurmkit submit torchrun ... -- python -m slurmkit.sandbox.train_tiny --ckpt DIR``:
each rank trains a small linear model on synthetic data with DistributedDataParallel,
checkpoints every ``--ckpt-every`` steps and when it receives SIGUSR2 (preemption warning from
Slurm, forwarded by the job script / torchrun), then exits; a restarted job
(``SLURMKIT_RESTART_COUNT`` > 0) resumes from the last checkpoint. Prints one line per event.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--ckpt", required=True, help="checkpoint directory (shared by the ranks)")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--step-s", type=float, default=0.25, help="seconds per step (so preemption can land)")
    ap.add_argument("--ckpt-every", type=int, default=10)
    args = ap.parse_args(argv)

    import torch
    import torch.distributed as dist

    from slurmkit.atomicfile import atomic_write_with

    preempted = {"flag": False}
    signal.signal(signal.SIGUSR2, lambda *_: preempted.update(flag=True))

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    restart = int(os.environ.get("SLURMKIT_RESTART_COUNT", "0"))
    os.makedirs(args.ckpt, exist_ok=True)
    path = os.path.join(args.ckpt, "model.pt")
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    start = 0
    if os.path.exists(path):
        state = torch.load(path, weights_only=True)
        model.module.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start = int(state["step"])
        if rank == 0:
            print(f"restart {restart}: resumed from checkpoint at step {start}", flush=True)
    print(json.dumps({"rank": rank, "world_size": world, "restart": restart, "node": os.environ.get("SLURMD_NODENAME"),
                      "local_rank": int(os.environ.get("LOCAL_RANK", 0)), "gpu": os.environ.get("SLURMKIT_GPU"),
                      "nccl_ib_hca": os.environ.get("NCCL_IB_HCA"), "cpus": sorted(os.sched_getaffinity(0))}),
          flush=True)

    def save(step):
        dist.barrier()
        if rank == 0:
            ckpt = {"model": model.module.state_dict(), "opt": opt.state_dict(), "step": step}
            atomic_write_with(path, lambda tmp: torch.save(ckpt, tmp))
            print(f"checkpoint at step {step}", flush=True)
        dist.barrier()

    g = torch.Generator().manual_seed(1234)
    w_true = torch.randn(16, 1, generator=g)
    for step in range(start, args.steps):
        x = torch.randn(64, 16, generator=torch.Generator().manual_seed(step * world + rank))
        loss = torch.nn.functional.mse_loss(model(x), x @ w_true)
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(args.step_s)
        # every rank must agree on stopping: all_reduce the preemption flag
        flag = torch.tensor([1.0 if preempted["flag"] else 0.0])
        dist.all_reduce(flag)
        if flag.item() > 0:
            save(step + 1)
            if rank == 0:
                print(f"preempted (SIGUSR2) at step {step + 1}: checkpoint written, exiting for requeue", flush=True)
            dist.destroy_process_group()
            return 0
        if (step + 1) % args.ckpt_every == 0:
            save(step + 1)
        if rank == 0 and (step + 1) % 10 == 0:
            print(f"step {step + 1} loss {loss.item():.4f}", flush=True)
    save(args.steps)
    if rank == 0:
        print(f"training done: {args.steps} steps, final loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
