#!/usr/bin/env python3
"""Capture what one Slurm release prints, from a sandbox of that release, into
tests/fixtures/slurm/<release>/ (run as root, by hand: `.venv/bin/python scripts/capture_slurm_release.py 24.11`).

The sandbox runs a probe job_submit.lua (what slurmctld hands a job_submit plugin for each GPU request
form) and a Prolog that records its environment; then it runs these jobs and records:

- ``job_desc.txt``: ``<request>|<field>=<value>`` for each request form, from the probe (job_submit.lua);
- ``squeue.txt``: ``squeue -o %i|%T|%N|%D|%b`` (submit's format) of the held jobs;
- ``scontrol_show_job.txt``: ``scontrol show job -o`` of the held jobs;
- ``scontrol_show_node.txt``, ``sinfo.txt`` (``sinfo -N -o %N|%T|%G|%E``), ``slurmd_C.txt`` (``slurmd -C``);
- ``prolog_env.txt``: the Prolog's environment for a 2-node job with --gres=gpu:2 (SLURM_* and CUDA_*);
- ``sacct.txt``: ``sacct -a -P -o <slurmkit.accounting.fields.FIELDS>`` (what ``report`` runs) of the finished jobs (steps included);
- ``version.txt``: ``scontrol version``.

Nothing in a capture is edited. The sandbox is brought down and purged at the end.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from slurmkit.accounting.fields import FIELDS as SACCT_FIELDS  # noqa: E402
from slurmkit.sandbox import Sandbox  # noqa: E402
from slurmkit.sandbox.config import SandboxSpec  # noqa: E402
from slurmkit.sandbox.releases import release  # noqa: E402

#: The GPU request forms of the job_submit probe (the issue's table), each with its sbatch options.
REQUESTS = {
    "--gres=gpu:2": ["--gres=gpu:2"],
    "--gres=gpu:h100:2": ["--gres=gpu:h100:2"],
    "--gpus=2": ["--gpus=2"],
    "--gpus-per-node=2": ["--gpus-per-node=2"],
    "--gpus-per-task=1 -n2": ["--gpus-per-task=1", "-n2"],
    "--cpus-per-gpu=4 --gpus=1": ["--cpus-per-gpu=4", "--gpus=1"],
}
FIELDS = ("tres_per_job", "tres_per_node", "tres_per_task", "tres_per_socket", "cpus_per_tres", "mem_per_tres",
          "gres")
PROBE = """-- slurmkit capture probe: what slurmctld hands job_submit for each request (comment = the request)
function slurm_job_submit(job_desc, part_list, submit_uid)
  local fh = io.open("{out}", "a")
  for _, k in ipairs({{{fields}}}) do
    fh:write((job_desc.comment or "") .. "|" .. k .. "=" .. tostring(job_desc[k]) .. "\\n")
  end
  fh:close()
  return slurm.SUCCESS
end
function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return slurm.SUCCESS
end
"""
PROLOG = """#!/bin/sh
env | grep -E '^(SLURM_|CUDA_|GPU_DEVICE_ORDINAL)' | sort > "{out}/prolog-env-$SLURM_JOB_ID-$(hostname)"
exit 0
"""


def main(name: str) -> int:
    rel = release(name)
    out = REPO / "tests" / "fixtures" / "slurm" / rel.name
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"capture-{rel.name}-"))
    sb = Sandbox(work / "sb", SandboxSpec(port_base=9400, slurm=rel.name, nodes=2,
                                           host_cpus=tuple(sorted(os.sched_getaffinity(0)))))
    sb.up(progress=lambda m: print("sandbox:", m, file=sys.stderr))
    env = {**os.environ, **sb.env()}

    def sh(*argv, check=True, **kw):
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=check, **kw).stdout

    try:
        probe_out, prolog_dir = work / "job_desc.txt", work / "prolog"
        prolog_dir.mkdir()
        (sb.etc / "job_submit.lua").write_text(PROBE.format(out=probe_out, fields=", ".join(f'"{f}"' for f in FIELDS)))
        (work / "prolog.sh").write_text(PROLOG.format(out=prolog_dir))
        (work / "prolog.sh").chmod(0o755)
        conf = sb.slurm_conf.read_text().replace("#Prolog=\n", f"Prolog={work / 'prolog.sh'}\n")
        sb.slurm_conf.write_text(conf + "JobSubmitPlugins=lua\n")
        sh("scontrol", "reconfigure")
        time.sleep(3)
        held = [sh("sbatch", "--parsable", "--hold", "-o", "/dev/null", f"--comment={req}", *opts, "--wrap", "true").strip()
                for req, opts in REQUESTS.items()]
        (out / "job_desc.txt").write_text(probe_out.read_text())
        (out / "squeue.txt").write_text(sh("squeue", "-h", "-t", "all", "-j", ",".join(held), "-o", "%i|%T|%N|%D|%b"))
        (out / "scontrol_show_job.txt").write_text("".join(sh("scontrol", "show", "job", "-o", j) for j in held))
        sh("scancel", *held)
        ran = [sh("sbatch", "--parsable", "-N2", "--gres=gpu:2", "-o", "/dev/null", "--wrap", "srun true").strip(),
               sh("sbatch", "--parsable", "-n2", "--gpus-per-task=1", "-o", "/dev/null", "--wrap", "srun true").strip(),
               sh("sbatch", "--parsable", "--gpus=1", "-o", "/dev/null", "--wrap", "false").strip()]
        deadline = time.monotonic() + 120
        while sh("squeue", "-h", "-j", ",".join(ran), "-o", "%i").strip() and time.monotonic() < deadline:
            time.sleep(1)
        time.sleep(3)  # slurmdbd records the ends
        (out / "prolog_env.txt").write_text("".join(
            f"# {p.name}\n{p.read_text()}" for p in sorted(prolog_dir.glob(f"prolog-env-{ran[0]}-*"))))
        (out / "sacct.txt").write_text(sh("sacct", "-a", "-P", "-j", ",".join(ran + held), "-o", ",".join(SACCT_FIELDS)))
        (out / "scontrol_show_node.txt").write_text(sh("scontrol", "show", "node", "-o"))
        (out / "sinfo.txt").write_text(sh("sinfo", "-N", "-o", "%N|%T|%G|%E"))
        (out / "slurmd_C.txt").write_text(sh("slurmd", "-C"))
        (out / "version.txt").write_text(sh("scontrol", "version"))
    finally:
        sb.down(purge=True)
    print(f"captured Slurm {(out / 'version.txt').read_text().strip()} into {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1] if len(sys.argv) > 1 else "22.05"))
