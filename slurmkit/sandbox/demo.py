"""The main job, end to end on the sandbox (``slurmkit sandbox demo``; the README's first command).

1. the sandbox (4 nodes x 4 GPUs, two leaf switches) starts with gres.conf / topology.conf
   generated from its site profile;
2. the slurmkit hooks are installed into its slurm.conf; every node replays a snapshot of its
   GPUs (kept current by :class:`~slurmkit.sandbox.gpus.GpuSimulator`), one node's GPU has a
   pending row remap with uncorrectable rows;
3. the health check drains that node with slurmkit's reason;
4. jobs go through ``slurmkit submit``: an nccl-tests preflight, a 2-node torchrun job that
   trains a tiny model, is preempted with USR2, requeued and resumes from its checkpoint, an
   array sweep and a job that fails; the multi-node job lands under one leaf switch;
5. the weekly report (HTML, CSV, JSON) is written from the sandbox's real accounting, with
   per-job GPU energy from the hooks' spool.

Every step prints what it does; the demo is re-runnable (it reuses a running sandbox).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

from slurmkit.hostlist import expand_nodelist
from slurmkit.profile import load_profile
from slurmkit.sandbox.cluster import Sandbox
from slurmkit.sandbox.errors import DemoError
from slurmkit.sandbox.gpus import SNAPSHOT_SUBDIR, GpuSimulator
from slurmkit.slurm import commands
from slurmkit.waiting import WaitTimeout, wait_until

SICK_NODE = "n2"
FAULT = "row-remap"
HEALTHCHECK_INTERVAL_S = 5
#: sacct's states of a job that has ended (``sacct -X``'s last record).
FINAL_STATES = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL")


def _step(n: int, msg: str) -> None:
    print(f"\n\033[1m==> [{n}/7] {msg}\033[0m", flush=True)


def _info(msg: str) -> None:
    print(f"    {msg}", flush=True)


class Demo:
    def __init__(self, sb: Sandbox):
        self.sb = sb
        self.out = sb.dir / "demo"
        self.hooks = sb.dir / "hooks"
        self.env = dict(os.environ, **sb.env())
        # jobs run the same interpreter (and torch) as this process
        self.env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), self.env.get("PATH", "")])

    # ------------------------------------------------------------------ helpers
    def slurm(self, *argv, check=True, show=False, timeout: float = 30) -> commands.Result:
        """Run a Slurm client command through :func:`slurmkit.slurm.commands.run` (``timeout``
        in s); raises DemoError when it fails (``check``), is missing or times out."""
        argv = [str(a) for a in argv]
        if show:
            _info("$ " + " ".join(shlex.quote(a) for a in argv))
        try:
            res = commands.run(argv, timeout=timeout, check=False, env=self.env)
        except commands.SlurmError as exc:
            raise DemoError(str(exc)) from None
        if check and res.returncode != 0:
            raise DemoError(f"{' '.join(argv[:3])} failed (exit {res.returncode}): {res.stderr.strip()}")
        return res

    def slurmkit(self, *args, check=True, show=False, timeout: float = 600) -> subprocess.CompletedProcess:
        """Run ``python -m slurmkit *args`` (``timeout`` in s); raises DemoError when it fails
        (``check``) or times out."""
        argv = [sys.executable, "-m", "slurmkit", *(str(a) for a in args)]
        if show:
            _info("$ slurmkit " + " ".join(shlex.quote(a) for a in argv[3:]))
        try:
            res = subprocess.run(argv, env=self.env, text=True, capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise DemoError(f"slurmkit {' '.join(argv[3:5])} did not finish within {timeout:g} s") from None
        if check and res.returncode != 0:
            raise DemoError(f"slurmkit {' '.join(argv[3:5])} failed (exit {res.returncode}): {res.stderr.strip()}")
        return res

    def submit(self, template: str, *args) -> str:
        res = self.slurmkit("submit", template, "--site", self.sb.profile_path, "-D", self.out, *args, show=True)
        job = res.stdout.strip().splitlines()[-1]
        _info(f"job {job}")
        return job

    def wait(self, what: str, predicate, timeout: float, period: float = 0.5, hint=""):
        """:func:`slurmkit.waiting.wait_until`, its timeout raised as DemoError (``hint``: a
        str, or a callable giving one, appended to its message)."""
        try:
            return wait_until(predicate, timeout, period, what, hint)
        except WaitTimeout as exc:
            raise DemoError(str(exc)) from None

    def job_story(self, job: str, out: Path, lines: int = 12) -> str:
        """What a stuck or failed job looks like, for an error message: its state, reason,
        restarts and nodes (``scontrol show job -o``), the nodes Slurm set drained or down with
        their reasons (``sinfo -R``) and the last ``lines`` lines of its output ``out``."""
        parts = []
        res = self.slurm("scontrol", "show", "job", "-o", job, check=False)
        fields = dict(f.split("=", 1) for f in res.stdout.split() if "=" in f)
        keys = ("JobState", "Reason", "Restarts", "EligibleTime", "NodeList", "ExcNodeList", "BatchHost")
        parts.append("scontrol show job: " + (" ".join(f"{k}={fields[k]}" for k in keys
                                                       if fields.get(k) not in (None, "(null)"))
                                              or f"nothing ({res.stderr.strip() or 'job unknown to slurmctld'})"))
        res = self.slurm("sinfo", "-R", "-h", "-o", "%N %T %E", check=False)
        parts.append("sinfo -R: " + ("; ".join(res.stdout.strip().splitlines()) or "no node drained or down"))
        text = out.read_text(errors="replace") if out.exists() else ""  # a job's output, quoted
        tail = [line for line in text.splitlines() if "torch/distributed/run.py" not in line][-lines:]
        parts.append(f"{out} (last {len(tail)} lines):\n" + "\n".join("      " + line for line in tail)
                     if tail else f"{out}: no output yet")
        return "\n    ".join(parts)

    def job_state(self, job: str) -> str:
        res = self.slurm("sacct", "-n", "-X", "-P", "-j", job, "-o", "State", check=False)
        states = [s.split()[0] for s in res.stdout.split("\n") if s.strip()]
        return states[-1] if states else "UNKNOWN"

    def wait_done(self, job: str, timeout: float = 300) -> str:
        return self.wait(f"job {job} to finish", lambda: (s := self.job_state(job)) in FINAL_STATES and s, timeout)

    def node_reason(self, node: str) -> tuple[str, str]:
        res = self.slurm("sinfo", "-h", "-N", "-n", node, "-o", "%T|%E", check=False)
        state, _, reason = res.stdout.strip().partition("|")
        return state, reason

    # ------------------------------------------------------------------ steps
    def install_hooks(self) -> None:
        conf = self.sb.slurm_conf
        snaps = [f"--snapshot={n}={self.sb.dir / SNAPSHOT_SUBDIR / f'{n}.json'}" for n in self.sb.node_names]
        args = ["hooks", "install", "--slurm-conf", conf, "--site", self.sb.profile_path,
                "--state-dir", self.hooks / "state", "--spool-dir", self.hooks / "spool",
                "--textfile-dir", self.hooks / "textfile", "--interval", HEALTHCHECK_INTERVAL_S,
                "--resume-after", 2, "--mode", "enforce", *snaps]  # the demo shows a drain: enforce
        res = self.slurmkit(*args, check=False)
        if res.returncode != 0:
            raise DemoError(f"slurmkit hooks install failed: {res.stderr.strip()}")
        _info(f"installed into {conf}: Prolog, Epilog and HealthCheckProgram (every {HEALTHCHECK_INTERVAL_S} s)")
        self.slurm("scontrol", "reconfigure")

    def train(self) -> str:
        ckpt = self.out / "ckpt"
        if ckpt.exists():
            for f in ckpt.iterdir():
                f.unlink()
        # train_tiny checkpoints on SIGUSR2: the job asks for it as its checkpoint signal
        job = self.submit("torchrun", "-N", 2, "-t", "15", "-J", "tiny-train", "--checkpoint-signal", "USR2",
                          "-o", self.out / "tiny-train-%j.out", "--",
                          sys.executable, "-m", "slurmkit.sandbox.train_tiny", "--ckpt", ckpt, "--steps", 60)
        out = self.out / f"tiny-train-{job}.out"
        try:
            self._train_waits(job, out, ckpt)
        except DemoError as exc:
            # a stuck job left queued would start later, on a re-run's nodes and checkpoint folder
            gone = self.slurm("scancel", job, check=False).returncode == 0
            raise DemoError(str(exc) + (f"\n    (job {job} cancelled: left queued it would start later)"
                                        if gone else "")) from None
        state = self.wait_done(job, 600)
        text = out.read_text(errors="replace")  # a job's output, shown
        for line in text.splitlines():
            if any(k in line for k in ("preempted", "resumed", "training done", "to checkpoint, then requeue")):
                _info("| " + line.strip())
        if state != "COMPLETED" or "training done" not in text:
            raise DemoError(f"training job {job} ended {state}; see {out}")
        return job

    def _train_waits(self, job: str, out: Path, ckpt: Path) -> None:
        """The training job's first checkpoint, its preemption (USR2 to the batch shell) and its
        restart from the checkpoint; raises DemoError, with :meth:`job_story`, when one does not
        come (the job ends instead, or the wait runs out)."""
        self.wait("the first checkpoint", lambda: (ckpt / "model.pt").exists(), 480,
                  hint=lambda: self.job_story(job, out))
        _info("first checkpoint written; preempting: USR2 to the batch shell (what --signal=B:USR2@<s> does)")
        self.slurm("scancel", "--batch", "--signal=USR2", job, show=True)

        def resumed():
            # a job's output, searched: a stray byte must not stop the demo
            if out.exists() and "resumed from checkpoint" in out.read_text(errors="replace"):
                return True
            state = self.job_state(job)
            if state in FINAL_STATES:   # ended without its restart: no use waiting on
                raise DemoError(f"training job {job} ended {state} instead of being requeued and restarted\n    "
                                + self.job_story(job, out))
            return False

        self.wait("the job to be requeued and restarted", resumed, 480, period=1.0,
                  hint=lambda: self.job_story(job, out))

    def placement(self, jobs: dict[str, str]) -> None:
        profile = load_profile(self.sb.profile_path)
        res = self.slurm("sacct", "-n", "-P", "-X", "-j", ",".join(jobs.values()), "-o", "JobID,NodeList,State")
        for line in res.stdout.splitlines():
            jid, nodelist, state = line.split("|")
            nodes = expand_nodelist(nodelist)
            if not nodes:
                continue
            name = next((k for k, v in jobs.items() if jid.split("_")[0] == v), jid)
            leaves = sorted({profile.leaf_of(n) or "?" for n in nodes})
            _info(f"{name:<12} job {jid:<8} {state:<10} on {nodelist:<10} leaf switch(es): {', '.join(leaves)}")
            if SICK_NODE in nodes and state != "REQUEUED":
                raise DemoError(f"job {jid} ran on the drained node {SICK_NODE}")

    def report(self) -> Path:
        now = datetime.now(timezone.utc)
        start = (now - timedelta(days=1)).strftime("%Y-%m-%d")
        end = (now + timedelta(days=1)).strftime("%Y-%m-%d")
        out = self.out / "report"
        self.slurmkit("report", "weekly", "--start", start, "--end", end, "--cluster", self.sb.spec.cluster,
                      "--site", self.sb.profile_path, "--spool", self.hooks / "spool",
                      "--store", self.sb.dir / "report-store", "--format", "html,csv,json", "-o", out, show=True)
        return out


def run_demo(directory: Path | None = None, install: bool = True, port_base: int | None = None) -> int:
    """Bring the sandbox up and run the whole main job; returns a process exit code.

    ``port_base``: ports of a sandbox that is not running yet (see ``sandbox up --port-base``).
    Raises :class:`DemoError` (or ``SandboxError``) naming the step that went wrong.
    """
    sb = Sandbox(directory)
    if port_base is not None and not sb.is_up():
        sb = Sandbox(directory, replace(sb.spec, port_base=port_base))
    _step(1, f"starting the sandbox cluster in {sb.dir}")
    sb.up(install=install, progress=_info)
    _info(f"gres.conf and topology.conf generated from its site profile {sb.profile_path}")
    demo = Demo(sb)
    demo.out.mkdir(parents=True, exist_ok=True)

    _step(2, f"installing the slurmkit hooks; every node replays its GPUs' snapshot, {SICK_NODE}'s GPU1 has "
             "a pending row remap with uncorrectable rows")
    with GpuSimulator(sb.dir / SNAPSHOT_SUBDIR, sb.node_names, sb.spec.gpus_per_node, sb.spec.gpu_type,
                      faults={SICK_NODE: FAULT}):
        # a previous run left the node drained by us: resume it so the health check finds it again
        if "slurmkit" in demo.node_reason(SICK_NODE)[1]:
            demo.slurm("scontrol", "update", f"nodename={SICK_NODE}", "state=resume", check=False)
        demo.install_hooks()

        _step(3, f"waiting for the health check to drain {SICK_NODE}")
        reason = demo.wait(f"{SICK_NODE} drained by slurmkit",
                           lambda: (r := demo.node_reason(SICK_NODE))[0].startswith("drain") and "slurmkit" in r[1] and r[1],
                           6 * HEALTHCHECK_INTERVAL_S + 30)
        _info(f"{SICK_NODE} drained, reason: {reason}")
        print(demo.slurm("sinfo", "-N", "-o", "%N %T %G %E").stdout, end="")

        _step(4, "submitting jobs through `slurmkit submit`")
        jobs = {"nccl-tests": demo.submit("nccl-tests", "-N", 2, "-t", "5", "-J", "nccl-preflight",
                                          "-o", demo.out / "nccl-preflight-%j.out")}
        demo.wait_done(jobs["nccl-tests"], 120)
        _info("| " + (demo.out / f"nccl-preflight-{jobs['nccl-tests']}.out").read_text(errors="replace").strip()  # a job's output, shown
              .splitlines()[-1])
        jobs["tiny-train"] = demo.train()
        jobs["sweep"] = demo.submit("array", "-t", "5", "-J", "lr-sweep", "-o", demo.out / "lr-sweep-%A_%a.out",
                                    "--set", 'sets=[{"lr": 0.1}, {"lr": 0.03}, {"lr": 0.01}]', "--set", "throttle=2",
                                    "--", "bash", "-c", "echo lr={lr} on $SLURMD_NODENAME; sleep 2")
        jobs["will-fail"] = demo.submit("single-gpu", "-t", "5", "-J", "will-fail", "-o", demo.out / "will-fail-%j.out",
                                        "--", sys.executable, "-c", "import sys; sys.exit('loss is NaN')")
        demo.wait("the sweep and the failing job to finish",
                  lambda: all(demo.job_state(j) not in ("PENDING", "RUNNING", "REQUEUED", "UNKNOWN")
                              for j in (jobs["sweep"], jobs["will-fail"])), 180)
        _info(f"will-fail ended {demo.job_state(jobs['will-fail'])}")

    _step(5, "where the jobs ran: the drained node is avoided, the 2-node jobs stay under one leaf switch")
    _info(f"{SICK_NODE}: {' / '.join(demo.node_reason(SICK_NODE))}")
    demo.placement(jobs)

    _step(6, "writing the weekly report from the sandbox's accounting, energy from the hooks' spool")
    time.sleep(2)  # the last job's epilog and accounting record
    report = demo.report()
    data = json.loads((report / "weekly.json").read_text())
    t = data["totals"]
    _info(f"jobs {t['jobs']}, GPU-hours {t['gpu_hours']:.3f}, CPU-hours {t['cpu_hours']:.3f}, "
          f"energy {t['energy_kwh']:.4f} kWh (by source: {t['energy_kwh_by_source']})")

    _step(7, "done")
    _info(f"report:        {report}/weekly.html (weekly.json and CSV tables beside it)")
    _info(f"job outputs:   {demo.out}")
    _info(f"hooks:         spool {demo.hooks / 'spool'}, metrics {demo.hooks / 'textfile'}")
    exe = Path(sys.executable).parent / "slurmkit"
    cmd = str(exe) if exe.exists() else f"{sys.executable} -m slurmkit"
    _info(f"use the cluster:  eval \"$({cmd} sandbox env --dir {sb.dir})\"")
    _info(f"bring {SICK_NODE} back:   {cmd} sandbox gpu {SICK_NODE} --fix --dir {sb.dir}   (its GPU healthy again: "
          "the health check resumes it after 2 clean runs; docs/hooks.md, 'Bringing a node back')")
    _info(f"stop it:          {cmd} sandbox down --dir {sb.dir} --purge")
    return 0


if __name__ == "__main__":
    sys.exit(run_demo())
