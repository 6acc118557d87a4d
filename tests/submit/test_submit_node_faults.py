"""The batch shell's query of the hooks' Xid evidence after a failed step (``slurmkit_hook_xids``
of the rendered script, ``job_templates/_run.sh.j2``), run by bash with stand-ins for Slurm's
commands: ``scontrol`` answers as Slurm 22.05 prints (``show config``'s ``HealthCheckProgram
= ...``, ``show node -o``'s ``State=`` / ``Reason=``), ``srun`` runs the step's command once
per node it can reach, with ``SLURMD_NODENAME`` set, as slurmstepd would. The step runs the real
reader (``python -I -m slurmkit.hooks.jobxids``) through a hooks shim and config laid out as
``slurmkit hooks install`` lays them out.

Kernel-log lines: ../shared/corpus/gpu-logs/akash-support-209_* (Xid 79, its bus id edited to the
job's GPU) and NVIDIA/NVSentinel's Xid 13 line (tests/hooks/test_hooks_jobxids.py). The NVML
state of a GPU fallen off the bus is the fake libnvidia-ml's (tests/fake_nvml, GPU_IS_LOST).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from slurmkit.hooks import config as hconfig
from slurmkit.hooks import install as inst
from slurmkit.hooks import nodestate
from slurmkit.submit import render, site, templates

from test_submit_launchers import function, plan_for

BUS1, BUS2 = "0000:19:00.0", "0000:3b:00.0"
XID13 = ("NVRM: Xid (PCI:0000:3b:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on "
         "(GPC 1, TPC 3, SM 0): Out Of Range Address")

#: Slurm's commands as the batch shell sees them. n3 and n4 cannot be reached by the step; Slurm
#: has n3 down (not responding), n4 up.
SCONTROL = """#!/bin/bash
case "$1 $2" in
  "show config") echo "HealthCheckProgram      = $HCP" ;;
  "show hostnames") echo n1; echo n2; echo n3; echo n4 ;;
  "show node")
    case "$4" in
      n3) echo "NodeName=n3 Arch=x86_64 CoresPerSocket=1 State=DOWN+NOT_RESPONDING ThreadsPerCore=1 Reason=Not responding [slurm@2026-12-02T10:00:00]" ;;
      *) echo "NodeName=$4 Arch=x86_64 CoresPerSocket=1 State=MIXED ThreadsPerCore=1" ;;
    esac ;;
esac
"""
SRUN = """#!/bin/bash
echo "$@" > "$SRUN_ARGS"
while [ "$1" != bash ]; do shift; done
for node in n1 n2; do SLURMD_NODENAME=$node "$@"; done
"""


def _bin(tmp_path, name, text):
    path = tmp_path / "bin" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


def _record(bus):
    return nodestate.JobStart(1000.0, "live", [nodestate.JobGpuStart(0, 1, 1, "GPU-x", bus)], kmsg_seq=0,
                              boot_id=nodestate.boot_id())


def test_hardware_xid_records_the_node_an_app_xid_and_a_silent_up_node_do_not(tmp_path, corpus):
    akash = next((corpus / "gpu-logs").glob("akash-support-209_*")).read_text()
    xid79 = next(line[line.index("NVRM:"):] for line in akash.splitlines() if "NVRM: Xid" in line)
    etc, logs, state = tmp_path / "etc", tmp_path / "logs", tmp_path / "state"
    for d in (etc, logs):
        d.mkdir()
    (tmp_path / "kmsg-n1").write_text(f"3,1,1000,-;{xid79.replace('0000:a1:00', '0000:19:00')}\n")
    (tmp_path / "kmsg-n2").write_text(f"3,1,1000,-;{XID13}\n")
    (etc / inst.CONFIG).write_text(hconfig.render(etc / "slurm.conf", state_dir=state,
                                                  kmsg={n: tmp_path / f"kmsg-{n}" for n in ("n1", "n2")}))
    (etc / inst.HEALTHCHECK_SHIM).write_text(inst.shim_text("healthcheck", sys.executable, etc / inst.CONFIG))
    nodestate.save_job(state, "n1", "55", _record(BUS1))
    nodestate.save_job(state, "n2", "55", _record(BUS2))
    _bin(tmp_path, "scontrol", SCONTROL)
    _bin(tmp_path, "srun", SRUN)
    text = render.render(plan_for("srun", nodes=4))
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "HCP": str(etc / inst.HEALTHCHECK_SHIM),
           "SRUN_ARGS": str(tmp_path / "srun.args"), "SLURMKIT_LOG_DIR": str(logs), "SLURMKIT_RESTART_COUNT": "0",
           "SLURM_JOB_NODELIST": "n[1-4]", "SLURM_JOB_ID": "55"}
    r = subprocess.run(["bash", "-c", "set -euo pipefail\n" + function(text, "slurmkit_hook_xids") + "slurmkit_hook_xids"],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    got = {p.name: p.read_text().strip() for p in logs.iterdir()}
    assert got == {
        "badnode-n1-restart0": "a hardware Xid during this job (the hooks' kernel-log read): "
                               f"GPU1 {BUS1}: Xid 79 (GPU fell off the bus) x1: reboot the node",
        "badnode-n3-restart0": "did not answer the hooks' Xid query and Slurm has it State=DOWN+NOT_RESPONDING "
                               "(Reason=Not responding)"}
    assert r.stderr.splitlines() == [
        f"slurmkit: node n2: the hooks attribute to this job GPU1 {BUS2}: Xid 13 (graphics engine exception) x1: "
        "application error, ignored: not node evidence",
        "slurmkit: node n4 did not answer the hooks' Xid query (State=MIXED): not counted as node evidence"]
    # one step over the nodes without a record, a task each, on the job's resources, 1 minute at most
    args = (tmp_path / "srun.args").read_text().split()
    assert args[:9] == ["--overlap", "--job-name=xid-query", "--nodelist=n1,n2,n3,n4", "-N", "4", "-n", "4",
                        "--ntasks-per-node=1", "--kill-on-bad-exit=0"] and args[9] == "--time=1"
    # the nodes already recorded are not asked again; nothing is asked where the hooks are not slurmkit's
    (logs / "badnode-n2-restart0").write_text("srun: Node failure on n2\n")
    r = subprocess.run(["bash", "-c", "set -euo pipefail\n" + function(text, "slurmkit_hook_xids") + "slurmkit_hook_xids"],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "--nodelist=n4 -N 1 -n 1" in (tmp_path / "srun.args").read_text(), r.stderr
    (tmp_path / "srun.args").unlink()
    r = subprocess.run(["bash", "-c", "set -euo pipefail\n" + function(text, "slurmkit_hook_xids") + "slurmkit_hook_xids"],
                       env={**env, "HCP": "/usr/sbin/nhc"}, capture_output=True, text=True, timeout=120)
    assert (r.returncode, r.stderr) == (0, "") and not (tmp_path / "srun.args").exists()


def test_an_unprivileged_jobs_query_records_a_lost_gpu_by_nvml(tmp_path, fake_nvml, node_python):
    """The step runs as the job's user (setpriv 65534, as slurmstepd runs it), the node's
    kernel log is root's 0600 (as /dev/kmsg under kernel.dmesg_restrict=1) and its state
    directory 0700; the hooks' interpreter is every user's (a venv from the system Python, as on
    a node): the reader reads the window the prolog published to the user and NVML,
    where the job's GPU (NVML GPU1) is lost: the node is recorded with what NVML said."""
    from fake_nvml import FakeNvml

    open_dir = Path(tempfile.mkdtemp(prefix="slurmkit-xidstep-", dir="/tmp"))
    try:
        open_dir.chmod(0o711)
        (open_dir / "nvml").mkdir(mode=0o755)
        shutil.copy(fake_nvml.lib, open_dir / "nvml" / "libnvidia-ml.so.1")
        etc, state, logs = open_dir / "etc", open_dir / "state", tmp_path / "logs"
        etc.mkdir(mode=0o755)
        logs.mkdir()
        state.mkdir(mode=0o700)
        kmsg = open_dir / "kmsg-n1"
        kmsg.write_text("6,1,1000,-;usb 1-1: new device\n")
        kmsg.chmod(0o600)
        (etc / inst.CONFIG).write_text(hconfig.render(etc / "slurm.conf", state_dir=state, kmsg={"n1": kmsg}))
        (etc / inst.HEALTHCHECK_SHIM).write_text(inst.shim_text("healthcheck", str(node_python), etc / inst.CONFIG))
        rec = _record("0000:3b:00.0")  # the fake NVML's GPU1
        nodestate.save_job(state, "n1", "55", rec)
        nodestate.publish_job(open_dir / "jobs", "n1", "55", rec, uid=65534, gid=65534)
        _bin(tmp_path, "scontrol", SCONTROL.replace("echo n1; echo n2; echo n3; echo n4", "echo n1"))
        _bin(tmp_path, "srun", SRUN.replace("for node in n1 n2; do SLURMD_NODENAME=$node",
                                            "for node in n1; do SLURMD_NODENAME=$node setpriv --reuid=65534 "
                                            "--regid=65534 --clear-groups"))
        text = render.render(plan_for("srun", nodes=1))
        env = {**FakeNvml(open_dir / "nvml").env("gpu_is_lost", lost=1),
               "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "HCP": str(etc / inst.HEALTHCHECK_SHIM),
               "SRUN_ARGS": str(tmp_path / "srun.args"), "SLURMKIT_LOG_DIR": str(logs), "SLURMKIT_RESTART_COUNT": "0",
               "SLURM_JOB_NODELIST": "n1", "SLURM_JOB_ID": "55"}
        r = subprocess.run(["bash", "-c", "set -euo pipefail\n" + function(text, "slurmkit_hook_xids") + "slurmkit_hook_xids"],
                           env=env, capture_output=True, text=True, timeout=120)
        assert (r.returncode, r.stderr) == (0, "")
        assert {p.name: p.read_text().strip() for p in logs.iterdir()} == {
            "badnode-n1-restart0": "a GPU of this job fails the health check (NVML, as the job's user reads it): "
                                   "GPU1 0000:3b:00.0: gpu_lost: GPU fell off the bus (GPU_IS_LOST)"}
    finally:
        shutil.rmtree(open_dir, ignore_errors=True)


# -- after the ranks failed: a drain that comes later, and a failure without evidence -----------

#: Slurm's commands for slurmkit_finish: no hooks (HealthCheckProgram unset, as Slurm 22.05's
#: `show config` prints it), n2 running until the health check's run drains it on the Nth look
#: (DRAIN_AT; Slurm 22.05's `show node -o` State/Reason, the reason as the hooks' health check
#: words an Xid 79: an edit of a real node line's fields, as the sandbox shows them), the job's
#: `show job` fields; requeue and update succeed and are recorded.
FINISH_SCONTROL = """#!/bin/bash
echo "$@" >> "$CALLS"
case "$1 $2" in
  "show config") echo "HealthCheckProgram      = (null)" ;;
  "show hostnames")
    case "$3" in
      "n[1-4]") echo n1; echo n2; echo n3; echo n4 ;;
      "n[1-2]") echo n1; echo n2 ;;
      *) tr , '\\n' <<< "$3" ;;
    esac ;;
  "show node")
    looks=$(grep -c "^show node -o $4" "$CALLS")
    if [ "$4" = n2 ] && [ -n "${DRAIN_AT:-}" ] && [ "$looks" -ge "$DRAIN_AT" ]; then
      echo "NodeName=n2 Arch=x86_64 CoresPerSocket=1 State=MIXED+DRAIN ThreadsPerCore=1 Reason=slurmkit: xid 79 GPU0 0000:19:00.0: fell off the bus [root@2026-12-02T10:00:00]"
    else
      echo "NodeName=$4 Arch=x86_64 CoresPerSocket=1 State=MIXED ThreadsPerCore=1"
    fi ;;
  "show job") printf 'JobId=55 ExcNodeList=(null) ReqNodeList=(null) Partition=gpu NumNodes=2-2\\n' ;;
  "show partition") echo "PartitionName=gpu Nodes=n[1-4]" ;;
  "requeue "*|"update "*) ;;
esac
"""
FINISH_FUNCTIONS = ("slurmkit_drain_evidence", "slurmkit_room", "slurmkit_hook_xids", "slurmkit_drain_scan",
                    "slurmkit_any_badnode", "slurmkit_node_faults", "slurmkit_drain_wait", "slurmkit_finish")


def _finish(tmp_path, wait_s, drain_at=None, rc=1):
    """Run the rendered srun script's slurmkit_finish RC with the profile's
    submit.node_fault_wait_s = WAIT_S; ``sleep`` is a stand-in that records its argument.
    Returns (exit status, stderr lines, scontrol calls, sleeps)."""
    from slurmkit.profile import load_profile

    logs = tmp_path / "logs"
    logs.mkdir(exist_ok=True)
    _bin(tmp_path, "scontrol", FINISH_SCONTROL)
    _bin(tmp_path, "sleep", '#!/bin/bash\necho "$1" >> "$SLEEPS"\n')
    facts = site.site_facts(load_profile("sandbox", overrides=({"submit": {"node_fault_wait_s": wait_s}},)))
    script = render.render(render.plan(render.SubmitRequest(template="srun", command=("python3", "train.py"), nodes=2),
                                       facts, templates.get("srun")))
    text = "".join(function(script, f) for f in FINISH_FUNCTIONS if f"\n{f}() {{" in script)
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "CALLS": str(tmp_path / "calls"),
           "SLEEPS": str(tmp_path / "sleeps"), "SLURMKIT_LOG_DIR": str(logs), "SLURMKIT_RESTART_COUNT": "0",
           "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_JOB_ID": "55", **({"DRAIN_AT": str(drain_at)} if drain_at else {})}
    r = subprocess.run(["bash", "-c", f"set -euo pipefail\n{text}slurmkit_finish {rc}"],
                       env=env, capture_output=True, text=True, timeout=60)
    read = lambda p: p.read_text().splitlines() if p.exists() else []  # noqa: E731
    return r.returncode, r.stderr.splitlines(), read(tmp_path / "calls"), read(tmp_path / "sleeps")


NO_EVIDENCE = ("slurmkit: no node evidence for this failure (looked at: drains with reasons slurmkit:{}, srun "
               "node-failure messages, no hooks' Xid query (HealthCheckProgram is (null), not slurmkit's hooks)): "
               "the program's failure; not retried")


def test_without_a_wait_the_drain_evidence_is_looked_at_once_and_its_absence_said(tmp_path):
    rc, err, calls, sleeps = _finish(tmp_path, 0, drain_at=2)
    assert rc == 1 and sleeps == [] and err == [NO_EVIDENCE.format("")]
    assert [c for c in calls if c.startswith("show node")] == ["show node -o n1", "show node -o n2"]


def test_a_drain_that_lands_during_the_wait_requeues_without_the_node(tmp_path):
    """The health check drains n2 on the third look, 10 s into a 60 s wait: the job is
    requeued without n2 then, not after the whole wait."""
    rc, err, calls, sleeps = _finish(tmp_path, 60, drain_at=3)
    assert rc == 0 and sleeps == ["5", "5"], err
    assert err == [
        "slurmkit: no node evidence yet; waiting up to 60 s for a drain (profile submit.node_fault_wait_s)",
        "slurmkit: node n2 failed: drained during the job by slurmkit's health check (State=MIXED+DRAIN): "
        "slurmkit: xid 79 GPU0 0000:19:00.0: fell off the bus",
        "slurmkit: requeued without n2 (ExcNodeList=n2), restart 1 of at most 3",
        "slurmkit: the retry drops --switches=1@5:00: it may start on any free nodes"]
    assert "requeue 55" in calls and "update JobId=55 ExcNodeList=n2" in calls
    # only Slurm's drain evidence is looked at again: one config query (the hooks') in all
    assert calls.count("show config") == 1


def test_a_wait_without_a_drain_is_bounded_and_ends_with_the_programs_status(tmp_path):
    rc, err, calls, sleeps = _finish(tmp_path, 12, rc=3)
    assert rc == 3 and sleeps == ["5", "5"]  # 12 s: two looks 5 s apart fit in it
    assert err == ["slurmkit: no node evidence yet; waiting up to 12 s for a drain (profile submit.node_fault_wait_s)",
                   NO_EVIDENCE.format(" for 12 s")]
    assert "requeue 55" not in calls
    (tmp_path / "short").mkdir()
    rc, err, calls, sleeps = _finish(tmp_path / "short", 3)  # shorter than a step: one look after it
    assert rc == 1 and sleeps == ["3"], err


def test_node_fault_wait_is_a_bounded_profile_setting():
    from slurmkit.profile import ProfileError, load_profile

    assert load_profile("sandbox").submit.node_fault_wait_s == 0
    assert load_profile("sandbox", overrides=({"submit": {"node_fault_wait_s": 300}},)).submit.node_fault_wait_s == 300
    for bad in (-1, 3601, "60"):
        with pytest.raises(ProfileError, match="submit.node_fault_wait_s"):
            load_profile("sandbox", overrides=({"submit": {"node_fault_wait_s": bad}},))
