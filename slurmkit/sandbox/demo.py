"""The main job, end to end on the sandbox (``slurmkit sandbox demo``; the README's first command).

Each step prints what it does; the whole run is re-runnable.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from slurmkit.sandbox.cluster import Sandbox


def _step(msg: str) -> None:
    print(f"\n\033[1m==> {msg}\033[0m", flush=True)


def _run(sb: Sandbox, *argv, check=True, **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, **sb.env())
    return subprocess.run([str(a) for a in argv], env=env, text=True, capture_output=True, check=check, **kw)


def _wait_accounted(sb: Sandbox, job: str, timeout: float = 60.0) -> str:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        out = _run(sb, "sacct", "-n", "-X", "-P", "-j", job, "-o", "State", check=False).stdout.strip()
        if out and out not in ("PENDING", "RUNNING", "REQUEUED"):
            return out
        time.sleep(0.5)
    raise RuntimeError(f"job {job} not finished in accounting after {timeout:g} s")


def run_demo(directory: Path | None = None, install: bool = True) -> int:
    """Bring the sandbox up and run the demo jobs; returns a process exit code."""
    sb = Sandbox(directory)
    _step(f"starting the sandbox cluster in {sb.dir}")
    sb.up(install=install, progress=lambda m: print(f"    {m}", flush=True))
    out_dir = sb.dir / "demo"
    out_dir.mkdir(exist_ok=True)

    _step("submitting a 2-node job with 2 GPUs per node; each node prints its GPU binding")
    script = out_dir / "gpu-binding.sbatch"
    script.write_text(
        "#!/bin/bash\n#SBATCH --job-name=gpu-binding\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n"
        "#SBATCH --gpus-per-node=2\n#SBATCH --time=2\n"
        f"#SBATCH --output={out_dir}/gpu-binding-%j.out\n"
        "set -euo pipefail\n"
        "srun bash -c 'echo \"node=$SLURMD_NODENAME hostname=$(hostname) SLURM_JOB_GPUS=$SLURM_JOB_GPUS "
        "CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES\"'\n")
    job = _run(sb, "sbatch", "--parsable", "--wait", script).stdout.strip().split(";")[0]
    print((out_dir / f"gpu-binding-{job}.out").read_text(), end="")
    _wait_accounted(sb, job)

    _step(f"its accounting record (sacct -j {job})")
    print(_run(sb, "sacct", "-j", job, "-o", "JobID,JobName%12,State,NodeList,AllocTRES%60,Elapsed").stdout, end="")

    _step("done")
    print(f"    outputs: {out_dir}\n    use the cluster:  eval \"$(slurmkit sandbox env --dir {sb.dir})\"\n"
          f"    stop it:          slurmkit sandbox down --dir {sb.dir} --purge")
    return 0


if __name__ == "__main__":
    sys.exit(run_demo())
