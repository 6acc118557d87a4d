"""Production conditions for ``slurmkit submit`` on the real Slurm sandbox: requeues that stop,
each rank signalled once, planned requeues with clean output, placement around drained and
reserved nodes, a user's nodelist without --switches, and the options every job needs read
back from slurmctld."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from slurmkit.slurm.commands import run
from slurmkit.submit import api
from slurmkit.submit.backend import CliBackend, describe_exit_code
from slurmkit.waiting import wait_until

from sandbox_jobs import submit
from sandbox_reconfigure import reconfigure

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(300)]

#: Counts the signals it gets (USR2 from slurmkit's trap, TERM from Slurm's preemption); on the
#: first it keeps listening 3 s for a duplicate, writes the count and exits 0 (a checkpoint).
#: The run after a requeue exits at once, unless a second argument says every run waits.
COUNTER = """
import json, os, signal, sys, time
out, rank, loop = sys.argv[1], os.environ.get("RANK", "0"), len(sys.argv) > 2
restart = int(os.environ["SLURMKIT_RESTART_COUNT"])
got = []
signal.signal(signal.SIGUSR2, lambda s, f: got.append("USR2"))
signal.signal(signal.SIGTERM, lambda s, f: got.append("TERM"))
open(os.path.join(out, f"start-{rank}-{restart}"), "w").close()
if restart == 0 or loop:
    while not got:
        time.sleep(0.1)
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        time.sleep(0.1)
    with open(os.path.join(out, f"signals-{rank}-{restart}.json"), "w") as fh:
        json.dump(got, fh)
"""


@pytest.fixture(scope="module")
def backend(sandbox):
    return CliBackend(env=sandbox.env())






def scontrol_job(sandbox, job_id) -> str:
    return run(["scontrol", "show", "job", job_id], env=sandbox.env()).stdout


def nodes_idle(sandbox, *nodes, timeout=120):
    """Wait until ``nodes`` are IDLE (no job, no drain, no epilog of an earlier test's job), so
    that Slurm places a two-node job on the first two of them as the test expects."""
    def idle():
        return all(" State=IDLE " in run(["scontrol", "show", "node", n], env=sandbox.env()).stdout for n in nodes)

    wait_until(idle, timeout, what=f"nodes {', '.join(nodes)} idle",
               hint=lambda: run(["sinfo", "-N", "-o", "%N %T %E"], env=sandbox.env()).stdout)


def started(tmp_path, ranks, restart):
    return lambda: all((tmp_path / f"start-{r}-{restart}").exists() for r in ranks)


@pytest.mark.parametrize("template", ["torchrun", "srun"])
def test_each_rank_gets_the_warning_once_and_a_planned_requeue_is_clean(sandbox, backend, tmp_path, template):
    ranks = (0, 1)
    params = {"python": sys.executable} if template == "torchrun" else {}
    job = submit(sandbox, backend, tmp_path, template, [sys.executable, "-c", COUNTER, tmp_path],
                 nodes=1, gpus_per_node=2, params=params, time="10:00", checkpoint_signal="USR2")
    wait_until(started(tmp_path, ranks, 0), 90, what="first start")
    time.sleep(1)  # deliberate margin after the start files (the ranks set their handlers before writing them)
    # what --signal=B:USR2@<s> does before the time limit: USR2 to the batch shell only
    run(["scancel", "--batch", "--signal=USR2", job.id], env=sandbox.env())
    state = job.wait(timeout=150, poll_s=1)
    out = (tmp_path / f"job-{job.id}.out").read_text(errors="replace")
    assert state == "COMPLETED", out[-3000:]
    for r in ranks:
        assert json.loads((tmp_path / f"signals-{r}-0.json").read_text()) == ["USR2"], out[-3000:]
        assert (tmp_path / f"start-{r}-1").exists()
    assert "Restarts=1" in scontrol_job(sandbox, job.id)
    assert "SIGUSR2 to the ranks to checkpoint, then requeue (restart 1 of at most 3)" in out
    assert "Traceback" not in out and "srun: error" not in out, out[-3000:]


def test_requeues_stop_at_max_restarts_with_a_clear_message(sandbox, backend, tmp_path):
    # every run waits for its warning (a job that never finishes within its limit)
    job = submit(sandbox, backend, tmp_path, "single-gpu", [sys.executable, "-c", COUNTER, tmp_path, "loop"],
                 time="10:00", sets={"max_restarts": "1"}, checkpoint_signal="USR2")
    for restart in (0, 1):
        wait_until(started(tmp_path, (0,), restart), 90, what=f"start {restart}")
        time.sleep(1)  # deliberate margin after the start file (the rank set its handlers before writing it)
        run(["scancel", "--batch", "--signal=USR2", job.id], env=sandbox.env())
        if restart == 0:
            wait_until(lambda: (tmp_path / "start-0-1").exists(), 90, what="requeued start")
    assert job.wait(timeout=90, poll_s=1) == "FAILED"
    out = (tmp_path / f"job-{job.id}.out").read_text(errors="replace")
    assert "not requeued: the job was requeued 1 times already (max_restarts = 1)" in out
    info = scontrol_job(sandbox, job.id)
    assert "Restarts=1" in info and "ExitCode=1:0" in info
    assert json.loads((tmp_path / "signals-0-1.json").read_text()) == ["USR2"]   # the last run checkpointed


@pytest.mark.parametrize("template", ["torchrun", "srun"])
def test_slurm_preemption_sigterm_lets_every_rank_checkpoint(sandbox, backend, tmp_path, template):
    """Slurm's preemption (PreemptMode=REQUEUE, GraceTime) sends SIGTERM to the job steps'
    tasks (``job_signal(job, SIGTERM, 0)``: not the batch step, as ``scancel --signal=TERM``
    without ``--batch``/``--full``): every rank checkpoints on it, once, and nothing is killed."""
    ranks = (0, 1)
    params = {"python": sys.executable} if template == "torchrun" else {}
    job = submit(sandbox, backend, tmp_path, template, [sys.executable, "-c", COUNTER, tmp_path],
                 nodes=1, gpus_per_node=2, params=params, time="10:00")
    wait_until(started(tmp_path, ranks, 0), 90, what="first start")
    time.sleep(1)  # deliberate margin after the start files (the ranks set their handlers before writing them)
    run(["scancel", "--signal=TERM", job.id], env=sandbox.env())
    state = job.wait(timeout=120, poll_s=1)
    out = (tmp_path / f"job-{job.id}.out").read_text(errors="replace")
    # no PreemptTime (a plain signal, not a preemption): the job ends with its ranks' status
    assert state == "COMPLETED", out[-3000:]
    assert "Killed" not in out and "srun: error" not in out and "Traceback" not in out, out[-3000:]
    for r in ranks:
        assert json.loads((tmp_path / f"signals-{r}-0.json").read_text()) == ["TERM"], out[-3000:]


def _blockers(sandbox, nodes):
    ids = [run(["sbatch", "--parsable", "--exclusive", "-w", n, "-o", "/dev/null", "--wrap", "sleep 300"],
               env=sandbox.env()).stdout.strip() for n in nodes]
    wait_until(lambda: all(v.state == "RUNNING" for v in CliBackend(sandbox.env()).states(ids).values()), 30, what="blockers running")
    return ids


def _plan_nodelist(sandbox, backend, **kw):
    plan = api.prepare(api.build_request("srun", ["x"], {"site": str(sandbox.profile_path), "nodes": 2,
                                                      "prefer_locality": True, **kw}), backend)
    return {o.name: o.value for o in plan.options}.get("nodelist")


def test_prefer_locality_skips_drained_and_reserved_nodes(sandbox, backend, tmp_path):
    env = sandbox.env()
    blockers = _blockers(sandbox, ["n1"])          # leaf1 (n1-n2) cannot hold 2 nodes
    try:
        assert _plan_nodelist(sandbox, backend) == "n3,n4"
        run(["scontrol", "update", "nodename=n4", "state=drain", "reason=slurmkit test"], env=env)
        try:
            assert _plan_nodelist(sandbox, backend) is None
        finally:
            run(["scontrol", "update", "nodename=n4", "state=resume"], env=env)
        run(["scontrol", "create", "reservation", "reservationname=skt", "nodes=n3", "users=root",
             "starttime=now", "duration=10", "flags=ignore_jobs"], env=env)
        try:
            wait_until(lambda: "reserved" in run(["sinfo", "-h", "-N", "-n", "n3", "-o", "%T"], env=env).stdout, 20, what="n3 reserved")
            assert _plan_nodelist(sandbox, backend) is None
            assert _plan_nodelist(sandbox, backend, exclude="n3") is None
        finally:
            run(["scontrol", "delete", "reservation=skt"], env=env)
        assert _plan_nodelist(sandbox, backend, exclude="n4") is None
        assert _plan_nodelist(sandbox, backend) == "n3,n4"
    finally:
        run(["scancel", *blockers], env=env)


def test_a_users_nodelist_across_leaves_runs_without_switches(sandbox, backend, tmp_path):
    job = submit(sandbox, backend, tmp_path, "srun", ["sleep", "30"], nodes=2, gpus_per_node=1,
                 nodelist="n1,n3", output="/dev/null", signal_s=0)
    try:
        wait_until(lambda: job.state() == "RUNNING", 60, what="job on n1,n3 running")
        info = scontrol_job(sandbox, job.id)
        assert "Switches=1@" not in info
        assert sorted(job.info().nodes) == ["n1", "n3"]
    finally:
        job.cancel()


def test_every_job_option_reaches_slurmctld(sandbox, backend, tmp_path):
    env = sandbox.env()
    run(["scontrol", "create", "reservation", "reservationname=sk-opts", "nodes=n2", "users=root",
         "starttime=now+1day", "duration=10"], env=env)
    first = submit(sandbox, backend, tmp_path, "single-gpu", ["true"], signal_s=0,
                   sbatch_args=["--hold"], output="/dev/null")
    try:
        job = submit(sandbox, backend, tmp_path, "srun", ["python3", "x.py"], nodes=1, gpus_per_node=1,
                     account="research", qos="normal", mem_per_gpu="300M", exclusive=True, exclude="n1",
                     reservation="sk-opts", after=first, mail_type="END,FAIL", mail_user="me@example.org",
                     sbatch_args=["--begin=now+1hour", "--gres-flags=enforce-binding"], signal_s=0,
                     output="/dev/null")
        info = scontrol_job(sandbox, job.id)
        for want in ["Account=research", "QOS=normal", "ExcNodeList=n1", "Reservation=sk-opts",
                     f"Dependency=afterok:{first.id}", "MailUser=me@example.org", "MailType=END,FAIL",
                     "OverSubscribe=NO", "MemPerTres=gres:gpu:300", "GresEnforceBind=Yes"]:
            assert want in info, (want, info)
        job.cancel()
    finally:
        first.cancel()
        run(["scontrol", "delete", "reservation=sk-opts"], env=env, check=False)


def test_cli_keeps_the_programs_options_without_dashdash(sandbox, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "slurmkit", "submit", "single-gpu", "--site",
                           str(sandbox.profile_path), "-D", str(tmp_path), "-o", str(tmp_path / "j-%j.out"),
                           "--preempt-warning", "0", sys.executable, "-c",
                           "import json, sys; print(json.dumps(sys.argv[1:]))", "-o", "foo", "-N", "2"],
                          capture_output=True, text=True, env={**os.environ, **sandbox.env()})
    assert proc.returncode == 0, proc.stderr
    job = api.Job(proc.stdout.strip(), backend=CliBackend(sandbox.env()))
    assert job.wait(timeout=60, poll_s=1) == "COMPLETED"
    assert job.exit_code == "0:0"
    assert '["-o", "foo", "-N", "2"]' in (tmp_path / f"j-{job.id}.out").read_text()


def test_torchrun_job_exits_with_the_failing_ranks_status(sandbox, backend, tmp_path):
    fail = ("import os, sys, time\n"
            "if os.environ['RANK'] == '1':\n    sys.exit(7)\n"
            "time.sleep(30)\n")
    job = submit(sandbox, backend, tmp_path, "torchrun", [sys.executable, "-c", fail], nodes=2,
                 gpus_per_node=1, params={"python": sys.executable}, time="5:00", signal_s=0)
    assert job.wait(timeout=120, poll_s=1) == "FAILED"
    out = (tmp_path / f"job-{job.id}.out").read_text(errors="replace")
    assert "ExitCode=7:0" in scontrol_job(sandbox, job.id), out[-3000:]
    assert job.exit_code == "7:0"
    assert "slurmkit: rank 1 on " in out and "exited with status 7" in out


def broken_on(tmp_path, node, name, real, message, status=1):
    """A program ``tmp_path/name`` that fails on ``node`` as a broken node's environment would
    (prints ``message`` on stderr, exits ``status``) and is ``real`` everywhere else."""
    path = tmp_path / name
    path.write_text(f'#!/bin/bash\nif [ "$(hostname)" = {node} ]; then echo "{message}" >&2; exit {status}; fi\n'
                    f'exec {real} "$@"\n')
    path.chmod(0o755)
    return path


def requeued_without_n2(sandbox, job, tmp_path, why):
    """The job (first run on n1,n2: n3 excluded) ran again without n2 and completed; its output
    names n2 and ``why``. Returns the job's output."""
    state = job.wait(timeout=180, poll_s=1)
    out = (tmp_path / f"job-{job.id}.out").read_text(errors="replace")
    assert state == "COMPLETED", out[-3000:]
    info = scontrol_job(sandbox, job.id)
    assert "Restarts=1" in info and "ExcNodeList=n3,n2" in info, info
    assert f"slurmkit: node n2 failed: {why}" in out, out[-3000:]
    assert "slurmkit: requeued without n2 (ExcNodeList=n3,n2), restart 1 of at most 3" in out
    status = subprocess.run([sys.executable, "-m", "slurmkit", "status", job.id, "--json"], capture_output=True,
                            text=True, env={**os.environ, **sandbox.env()}, timeout=60)
    got = json.loads(status.stdout)
    assert (got["restarts"], got["excluded_nodes"]) == (1, ["n2", "n3"]), status.stdout + status.stderr
    return out


def test_a_node_that_cannot_take_part_is_excluded_and_the_job_requeued(sandbox, backend, tmp_path):
    """Node n2's Python environment is broken (its torchrun cannot start): the job is requeued
    with n2 in ExcNodeList and runs on two other nodes; its output says which node and why."""
    from ranks import REPORT

    python = broken_on(tmp_path, "n2", "python-broken-on-n2", sys.executable, "n2: ImportError: libcuda")
    job = submit(sandbox, backend, tmp_path, "torchrun", [sys.executable, "-c", REPORT, tmp_path], nodes=2,
                 gpus_per_node=1, params={"python": str(python)}, time="5:00", switches=False,
                 exclude="n3")                   # first run on n1,n2 (lowest idle), then n1,n4
    requeued_without_n2(sandbox, job, tmp_path, f"could not start torchrun with {python} (exit status 1)")
    nodes = {json.loads(p.read_text())["node"] for p in tmp_path.glob("rank*.json")}
    assert nodes == {"n1", "n4"}


#: What the dynamic loader prints, and its exit status, when a program's library is missing.
NO_LIBCUDA = "error while loading shared libraries: libcuda.so.1: cannot open shared object file: No such file or directory"


def test_srun_ranks_that_cannot_start_on_a_node_requeue_the_job_without_it(sandbox, backend, tmp_path):
    """srun (one task per GPU): n2's ranks cannot start the program (exit 127, as when a library
    it needs is missing there): srun reports it for n2, the job is requeued without n2 and the
    all_reduce runs on n1 and n4; the output names n2, why, and the loader's own line."""
    from ranks import REPORT

    python = broken_on(tmp_path, "n2", "python", sys.executable, f"{tmp_path}/python: {NO_LIBCUDA}", 127)
    job = submit(sandbox, backend, tmp_path, "srun", [python, "-c", REPORT, tmp_path], nodes=2,
                 gpus_per_node=2, time="5:00", switches=False, exclude="n3")
    requeued_without_n2(sandbox, job, tmp_path, f"could not start {python} there (exit status 127: not found, "
                              f"or a library it needs is missing): {tmp_path}/python: {NO_LIBCUDA}")
    reports = [json.loads(p.read_text()) for p in tmp_path.glob("rank*.json")]
    assert sorted(r["rank"] for r in reports) == [0, 1, 2, 3]
    assert {r["node"] for r in reports} == {"n1", "n4"} and {r["sum"] for r in reports} == {10.0}
    logs = tmp_path / "slurmkit-logs" / job.id
    assert "Exited with exit code 127" in (logs / "srun-ranks-restart0.err").read_text()
    assert not list(logs.glob("badnode-*-restart1"))


def test_a_program_missing_on_every_node_is_not_retried(sandbox, backend, tmp_path):
    """Every node exits 127 (a typo in the command): that is the job's fault, not the nodes':
    no requeue, the job fails with 127 and says why."""
    job = submit(sandbox, backend, tmp_path, "srun", [tmp_path / "no-such-program"], nodes=2,
                 gpus_per_node=1, time="5:00", switches=False)
    assert job.wait(timeout=120, poll_s=1) == "FAILED"
    out = (tmp_path / f"job-{job.id}.out").read_text(errors="replace")
    assert "slurmkit: not requeued: every node of the job failed" in out, out[-3000:]
    info = scontrol_job(sandbox, job.id)
    assert "Restarts=0" in info and "ExitCode=127:0" in info, info


def test_a_bad_node_the_job_cannot_run_without_is_not_excluded(sandbox, backend, tmp_path):
    """n2 cannot start the program. Excluding it would leave a job that can never run: with
    -w n1,n2 (n2 in its --nodelist), or with -N 4 on the 4-node partition. Neither is requeued
    to pend for ever: the job fails with the program's status and says why."""
    python = broken_on(tmp_path, "n2", "python", sys.executable, f"{tmp_path}/python: {NO_LIBCUDA}", 127)
    pinned = submit(sandbox, backend, tmp_path, "srun", [python, "-c", "pass"], nodes=2, gpus_per_node=1,
                    time="5:00", nodelist="n1,n2")
    whole = submit(sandbox, backend, tmp_path, "srun", [python, "-c", "pass"], nodes=4, gpus_per_node=1,
                   time="5:00", switches=False)
    for job, why in ((pinned, "slurmkit: not requeued without n2: node n2 is in the job's --nodelist (n[1-2])"),
                     (whole, "slurmkit: not requeued without n2: partition gpu would keep 3 node(s) besides "
                             "the excluded (n2), the job needs 4")):
        assert job.wait(timeout=150, poll_s=1) == "FAILED"
        out = (tmp_path / f"job-{job.id}.out").read_text(errors="replace")
        assert "slurmkit: node n2 failed: could not start" in out and why in out, out[-3000:]
        info = scontrol_job(sandbox, job.id)
        # srun's status (the highest of its tasks': 127, or 143 for a task it ended first)
        assert "Restarts=0" in info and "ExcNodeList=(null)" in info and "ExitCode=0:0" not in info, info


def test_deepspeed_program_missing_on_every_node_is_not_retried(sandbox, backend, tmp_path):
    """deepspeed: the program is missing everywhere. The first node's rank exits 127 and srun
    ends the other launcher before its own 127: a rank had started on the first node, so its 127
    is the program's, not the node's: no node is blamed, no requeue, the job fails with 127."""
    pytest.importorskip("deepspeed")
    job = submit(sandbox, backend, tmp_path, "deepspeed", [tmp_path / "no-such-program", "--x"], nodes=2,
                 gpus_per_node=1, time="5:00", switches=False,
                 params={"deepspeed": str(Path(sys.executable).with_name("deepspeed"))})
    assert job.wait(timeout=150, poll_s=1) == "FAILED"
    out = (tmp_path / f"job-{job.id}.out").read_text(errors="replace")
    assert "requeued without" not in out and "slurmkit: node " not in out, out[-3000:]
    info = scontrol_job(sandbox, job.id)
    assert "Restarts=0" in info and "ExcNodeList=(null)" in info, info


def test_nccl_tests_binary_missing_a_library_on_a_node_requeues_without_it(sandbox, backend, tmp_path):
    """nccl-tests: all_reduce_perf cannot start on n2 (libnccl missing there): requeued without
    n2; the second run prints the bus bandwidth."""
    fake = tmp_path / "all-reduce-perf-elsewhere"
    fake.write_text('#!/bin/bash\necho "# Avg bus bandwidth    : 12.5"\n')
    fake.chmod(0o755)
    binary = broken_on(tmp_path, "n2", "all_reduce_perf", fake,
                       "all_reduce_perf: error while loading shared libraries: libnccl.so.2: cannot open shared "
                       "object file: No such file or directory", 127)
    job = submit(sandbox, backend, tmp_path, "nccl-tests", [], nodes=2, gpus_per_node=1, time="5:00",
                 switches=False, exclude="n3", sets={"binary": str(binary), "mpi": "none"})
    out = requeued_without_n2(sandbox, job, tmp_path, f"could not start {binary} there (exit status 127")
    assert "slurmkit: all_reduce bus bandwidth 12.5 GB/s" in out


def test_deepspeed_launcher_that_cannot_start_on_a_node_requeues_without_it(sandbox, backend, tmp_path):
    """deepspeed (launcher once per node): n2's launcher cannot start (its Python environment is
    broken there): requeued without n2; the ranks all_reduce on n1 and n4."""
    pytest.importorskip("deepspeed")
    from ranks import REPORT

    launcher = broken_on(tmp_path, "n2", "deepspeed-broken-on-n2", Path(sys.executable).with_name("deepspeed"),
                         "n2: ImportError: libcuda.so.1", 1)
    job = submit(sandbox, backend, tmp_path, "deepspeed", [sys.executable, "-c", REPORT, tmp_path], nodes=2,
                 gpus_per_node=1, time="5:00", switches=False, exclude="n3", params={"deepspeed": str(launcher)})
    requeued_without_n2(sandbox, job, tmp_path, f"could not start {launcher} (exit status 1, before any rank "
                        "started): n2: ImportError: libcuda.so.1")
    assert {json.loads(p.read_text())["node"] for p in tmp_path.glob("rank*.json")} == {"n1", "n4"}


def test_a_retry_without_a_bad_node_drops_switches_and_starts_on_the_other_leaf(sandbox, backend, tmp_path):
    """The job asks for one leaf switch (--switches=1@5:00) and first runs on n1,n2 (leaf of
    n1-n2; n4 excluded); n2 cannot start the program. The retry without n2 must span leaves
    (n1 + n3): it drops --switches and says so, and starts instead of pending for the 5-minute
    wait (the job completes within 150 s)."""
    from ranks import REPORT

    python = broken_on(tmp_path, "n2", "python", sys.executable, f"{tmp_path}/python: {NO_LIBCUDA}", 127)
    job = submit(sandbox, backend, tmp_path, "srun", [python, "-c", REPORT, tmp_path], nodes=2,
                 gpus_per_node=2, time="5:00", exclude="n4")
    state = job.wait(timeout=150, poll_s=1)
    out = (tmp_path / f"job-{job.id}.out").read_text(errors="replace")
    assert state == "COMPLETED", out[-3000:]
    assert "slurmkit: the retry drops --switches=1@5:00: it may start on any free nodes" in out, out[-3000:]
    info = scontrol_job(sandbox, job.id)
    assert "Restarts=1" in info and "ExcNodeList=n4,n2" in info, info
    nodes = {json.loads(p.read_text())["node"] for p in tmp_path.glob("rank*.json")}
    assert nodes == {"n1", "n3"}


#: A rank per node: on the first run it waits for the test's "die" file, then n2's rank exits 3
#: (as a rank whose GPU fell off the bus); the run after a requeue ends at once.
MIDRUN = """
import os, sys, time
out, node = sys.argv[1], os.environ["SLURMD_NODENAME"]
restart = int(os.environ["SLURMKIT_RESTART_COUNT"])
open(os.path.join(out, f"start-{node}-{restart}"), "w").close()
if restart == 0:
    while not os.path.exists(os.path.join(out, "die")):
        time.sleep(0.2)
    if node == "n2":
        sys.exit(3)
    time.sleep(120)
"""


@pytest.mark.parametrize("drained", [True, False])
def test_a_rank_dying_mid_run_is_retried_only_with_node_evidence(sandbox, backend, tmp_path, drained):
    """n2's rank dies mid-run. With n2 drained during the job by the health check (a
    'slurmkit:' hardware reason), the job is requeued without n2 and the output names the node
    and the evidence; without evidence, the rank's failure is the program's: FAILED, not requeued."""
    nodes_idle(sandbox, "n1", "n2", "n4")
    job = submit(sandbox, backend, tmp_path, "srun", [sys.executable, "-c", MIDRUN, tmp_path], nodes=2,
                 gpus_per_node=1, time="5:00", switches=False, exclude="n3")
    wait_until(lambda: (tmp_path / "start-n1-0").exists() and (tmp_path / "start-n2-0").exists(), 90, what="first start")
    reason = "slurmkit: xid 79 GPU0 0000:19:00.0: fell off the bus"
    try:
        if drained:
            run(["scontrol", "update", "NodeName=n2", "State=DRAIN", f"Reason={reason}"], env=sandbox.env())
        (tmp_path / "die").write_text("")
        state = job.wait(timeout=180, poll_s=1)
    finally:
        if drained:
            run(["scontrol", "update", "NodeName=n2", "State=RESUME"], env=sandbox.env())
    out = (tmp_path / f"job-{job.id}.out").read_text(errors="replace")
    info = scontrol_job(sandbox, job.id)
    if drained:
        assert state == "COMPLETED", out[-3000:]
        said = [line for line in out.splitlines() if line.startswith("slurmkit: node n2 failed: ")]
        assert said and said[0].startswith("slurmkit: node n2 failed: drained during the job by slurmkit's "
                                           "health check (State=") and said[0].endswith(f"): {reason}"), out[-3000:]
        assert "slurmkit: requeued without n2 (ExcNodeList=n3,n2), restart 1 of at most 3" in out
        assert "Restarts=1" in info and (tmp_path / "start-n1-1").exists()
    else:
        assert state == "FAILED", out[-3000:]
        assert "requeued without" not in out and "slurmkit: node n2 failed" not in out, out[-3000:]
        # the first failing rank's status (n2's 3), not srun's own (the highest of its tasks':
        # n1's rank, ended by --kill-on-bad-exit, 143)
        assert "Restarts=0" in info and "ExitCode=3:0" in info, info
        (said,) = [line for line in out.splitlines() if line.startswith("slurmkit: no node evidence")]
        assert said.startswith("slurmkit: no node evidence for this failure (looked at: drains with reasons "
                               "slurmkit:, srun node-failure messages, ") and said.endswith(
            "): the program's failure; not retried"), out[-3000:]
        status = subprocess.run([sys.executable, "-m", "slurmkit", "status", job.id], capture_output=True,
                                text=True, env={**os.environ, **sandbox.env()}, timeout=60)
        assert "FAILED" in status.stdout and "exit=3:0 (exit 3)" in status.stdout, status.stdout + status.stderr


def drained_mid_run(sandbox, job, tmp_path, node, reason, timeout=240, after=None):
    """Once the job's ranks started on its two nodes (n1 and n2 when the sandbox is idle; Slurm
    may place it on n2 and n4 while n1 is still finishing an earlier test's job), drain ``node``
    (one of them) with ``reason`` (as a health check would), let the ranks die (the ``die``
    file) and wait for the job to end; ``node`` is resumed after. ``after`` ((what,
    predicate)): the ranks die first and the drain comes once the predicate holds (a health
    check draining after the crash). Returns (its final state, its output)."""
    def placed():
        info = scontrol_job(sandbox, job.id)
        m = re.search(r"^\s*NodeList=(\S+)", info, re.M)
        if "JobState=RUNNING" not in info or not m or m.group(1) == "(null)":
            return None
        return run(["scontrol", "show", "hostnames", m.group(1)], env=sandbox.env()).stdout.split()

    wait_until(lambda: (nodes := placed()) and all((tmp_path / f"start-{n}-0").exists() for n in nodes), 180,
               what="first start", hint=lambda: scontrol_job(sandbox, job.id).replace("\n", " ")[:1500])
    nodes = placed()
    assert node in nodes, f"the job ran on {nodes}, not on {node}: {scontrol_job(sandbox, job.id)}"
    try:
        if after:
            (tmp_path / "die").write_text("")
            wait_until(after[1], 120, what=after[0])
        run(["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}"], env=sandbox.env())
        (tmp_path / "die").write_text("")
        state = job.wait(timeout=timeout, poll_s=1)
    finally:
        run(["scontrol", "update", f"NodeName={node}", "State=RESUME"], env=sandbox.env())
    return state, (tmp_path / f"job-{job.id}.out").read_text(errors="replace")


#: torchrun ranks: each writes start-<node>-<restart>; on the first run, once ``die`` exists,
#: rank 0 (on the first node, whose torchrun holds the c10d store) ends as argv[2] says: "raise"
#: (an exception in the training loop, status 1) or "kill" (SIGKILL, as the OOM killer would);
#: the other rank keeps running and, as a Megatron-style program, takes Slurm's SIGTERM (srun's
#: --kill-on-bad-exit) as "save a checkpoint" and goes on, so its torchrun agent sees the store
#: go away (as a test run on the sandbox found). A rerun exits 0 at once.
STORE_NODE_RANK = """
import os, signal, sys, time
out, how, node = sys.argv[1], sys.argv[2], os.environ["SLURMD_NODENAME"]
restart = int(os.environ["SLURMKIT_RESTART_COUNT"])
signal.signal(signal.SIGTERM, lambda s, f: None)
open(os.path.join(out, f"start-{node}-{restart}"), "w").close()
if restart == 0:
    while not os.path.exists(os.path.join(out, "die")):
        time.sleep(0.2)
    if os.environ["RANK"] == "0":
        if how == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        raise RuntimeError("loss is nan at step 6")
    time.sleep(120)
"""


@pytest.mark.parametrize("how,status", [("raise", 1), ("kill", 137)])
def test_torchrun_rank_failing_on_the_store_node_blames_no_node(sandbox, backend, tmp_path, how, status):
    """Rank 0 fails on its own mid-run on n1 (whose torchrun holds the rendezvous store): n2's
    torchrun then loses the store after its ranks started, which is a consequence, not evidence
    against n2. The job fails with rank 0's status; no node is blamed, nothing is requeued."""
    job = submit(sandbox, backend, tmp_path, "torchrun", [sys.executable, "-c", STORE_NODE_RANK, tmp_path, how],
                 nodes=2, gpus_per_node=1, params={"python": sys.executable}, time="5:00", switches=False,
                 exclude="n3")
    wait_until(lambda: (tmp_path / "start-n1-0").exists() and (tmp_path / "start-n2-0").exists(), 120,
               what="first start")
    (tmp_path / "die").write_text("")
    state = job.wait(timeout=180, poll_s=1)
    out = (tmp_path / f"job-{job.id}.out").read_text(errors="replace")
    assert state == "FAILED", out[-3000:]
    assert "could not join" not in out and "slurmkit: node " not in out and "requeued" not in out, out[-3000:]
    assert f"slurmkit: rank 0 on n1 exited with status {status}" in out, out[-3000:]
    info = scontrol_job(sandbox, job.id)
    assert "Restarts=0" in info and f"ExitCode={status}:0" in info, info
    shown = subprocess.run([sys.executable, "-m", "slurmkit", "status", job.id], capture_output=True, text=True,
                           env={**os.environ, **sandbox.env()}, timeout=60).stdout
    assert job.exit_code == f"{status}:0" and f"exit={status}:0 ({describe_exit_code(f'{status}:0')})" in shown, shown
    logs = tmp_path / "slurmkit-logs" / job.id
    assert not list(logs.glob("badnode-*"))
    # the workers' marks that the rendezvous had completed (what tells a lost store from a failed join)
    assert (logs / "joined-n1-restart0").exists() and (logs / "joined-n2-restart0").exists()


def test_torchrun_node_fault_on_the_store_node_excludes_that_node_alone(sandbox, backend, tmp_path):
    """n1 (first node: its torchrun holds the store) is drained by the health check with a
    hardware reason and its rank killed: only n1 is blamed (n2's lost store is a consequence),
    the job is requeued without n1 and completes on n2 and n4."""
    nodes_idle(sandbox, "n1", "n2", "n4")
    job = submit(sandbox, backend, tmp_path, "torchrun", [sys.executable, "-c", STORE_NODE_RANK, tmp_path, "kill"],
                 nodes=2, gpus_per_node=1, params={"python": sys.executable}, time="5:00", switches=False,
                 exclude="n3")
    state, out = drained_mid_run(sandbox, job, tmp_path, "n1", "slurmkit: xid 79 GPU0 0000:19:00.0: fell off the bus")
    assert state == "COMPLETED", out[-3000:]
    said = [line for line in out.splitlines() if line.startswith("slurmkit: node ")]
    assert len(said) == 1 and said[0].startswith("slurmkit: node n1 failed: drained during the job"), out[-3000:]
    assert "slurmkit: requeued without n1 (ExcNodeList=n3,n1), restart 1 of at most 3" in out, out[-3000:]
    info = scontrol_job(sandbox, job.id)
    assert "Restarts=1" in info
    assert (tmp_path / "start-n2-1").exists() and (tmp_path / "start-n4-1").exists()


def test_a_site_health_checks_drain_reason_counts_where_the_profile_names_it(sandbox, backend, tmp_path):
    """A site whose health check is LBNL NHC (drain reasons "NHC: ...") lists that prefix in
    submit.node_fault_reasons: n2 drained with it during the job is the node's fault, and the
    job is requeued without n2 (by default only "slurmkit:" reasons count: the test above)."""
    nodes_idle(sandbox, "n1", "n2", "n4")
    site = tmp_path / "site.toml"
    text = sandbox.profile_path.read_text()
    assert "\n[submit]\n" in text
    site.write_text(text.replace("\n[submit]\n", '\n[submit]\nnode_fault_reasons = ["slurmkit:", "NHC:"]\n', 1))
    job = api.submit("srun", [sys.executable, "-c", MIDRUN, str(tmp_path)], site=str(site), backend=backend,
                     chdir=str(tmp_path), output=str(tmp_path / "job-%j.out"), nodes=2, gpus_per_node=1,
                     time="5:00", switches=False, exclude="n3")
    reason = "NHC: check_hw_gpu: GPU 0 has fallen off the bus"
    state, out = drained_mid_run(sandbox, job, tmp_path, "n2", reason)
    assert state == "COMPLETED", out[-3000:]
    said = [line for line in out.splitlines() if line.startswith("slurmkit: node n2 failed: ")]
    assert said and said[0].startswith("slurmkit: node n2 failed: drained during the job with a node-fault reason "
                                       "(State=") and said[0].endswith(
        f"; profile submit.node_fault_reasons: NHC:): {reason}"), out[-3000:]
    assert "slurmkit: requeued without n2 (ExcNodeList=n3,n2), restart 1 of at most 3" in out


def test_a_drain_after_the_crash_is_waited_for_where_the_profile_says(sandbox, backend, tmp_path):
    """A health check drains the node minutes after the rank crashed, when the
    batch shell has looked already. With submit.node_fault_wait_s = 90 it says it waits, n2 is
    drained (slurmkit: reason) while it waits, and the job is requeued without n2."""
    nodes_idle(sandbox, "n1", "n2", "n4")
    site = tmp_path / "site.toml"
    text = sandbox.profile_path.read_text()
    site.write_text(text.replace("\n[submit]\n", "\n[submit]\nnode_fault_wait_s = 90\n", 1))
    job = api.submit("srun", [sys.executable, "-c", MIDRUN, str(tmp_path)], site=str(site), backend=backend,
                     chdir=str(tmp_path), output=str(tmp_path / "job-%j.out"), nodes=2, gpus_per_node=1,
                     time="5:00", switches=False, exclude="n3")
    out_file = tmp_path / f"job-{job.id}.out"
    waiting = ("slurmkit: no node evidence yet; waiting up to 90 s for a drain (profile "
               "submit.node_fault_wait_s)")
    reason = "slurmkit: xid 79 GPU0 0000:19:00.0: fell off the bus"
    state, out = drained_mid_run(sandbox, job, tmp_path, "n2", reason, after=(
        "the batch shell waiting for a drain", lambda: out_file.exists() and waiting in out_file.read_text(errors="replace")))
    assert state == "COMPLETED", out[-3000:]
    lines = out.splitlines()
    failed = next(i for i, line in enumerate(lines) if line.startswith("slurmkit: node n2 failed: drained during the "
                                                                       "job by slurmkit's health check"))
    assert lines.index(waiting) < failed and lines[failed].endswith(f"): {reason}"), out[-3000:]
    assert "slurmkit: requeued without n2 (ExcNodeList=n3,n2), restart 1 of at most 3" in out
    assert "no node evidence for this failure" not in out and (tmp_path / "start-n1-1").exists()


@pytest.fixture
def observing_hooks(sandbox, fake_nvml, node_python):
    """slurmkit's hooks installed in the sandbox in observe mode (they read, attribute and log,
    never drain: the only node evidence is what a test gives), every node replaying a healthy
    snapshot of the fake NVML; ``config(overrides)`` rewrites the hooks config with other
    snapshots. Their interpreter is every user's (``node_python``: a venv from the system
    Python with the slurmkit under test), as a node's is, so a job's user can run the Xid query.
    Uninstalled afterwards."""
    from nodeenv import record_snapshot
    from slurmkit.hooks import install as inst
    from slurmkit.hooks.config import render as render_config
    from slurmkit.slurm import conf as sconf

    conf = Path(sandbox.slurm_conf)
    work = Path(tempfile.mkdtemp(prefix="xid-retry-", dir=sandbox.dir))
    snaps = {n: work / f"{n}.json" for n in sandbox.node_names}
    for n, path in snaps.items():
        record_snapshot(fake_nvml, path, node=n)

    def config(overrides=None):
        return render_config(conf, gres_conf=conf.parent / "gres.conf", profile=sandbox.profile_path, mode="observe",
                             state_dir=work / "state", spool_dir=work / "spool", textfile_dir=work / "textfile",
                             snapshots={**snaps, **(overrides or {})},
                             slurm_bin_dir=os.path.dirname(shutil.which("scontrol")))

    spec = inst.InstallSpec(python=str(node_python), config=config(), interval_s=300, timeout_s=60)
    inst.apply(inst.plan_install(sconf.load_tree(conf), spec), conf, installing=True)
    cfg_path = conf.parent / inst.CONFIG
    cfg_path.write_text(config())
    reconfigure(sandbox)   # (and every slurmd read it: the first job meets the hooks)
    yield {"work": work, "state": work / "state", "snaps": snaps, "cfg_path": cfg_path, "config": config}
    inst.apply(inst.plan_uninstall(sconf.load_tree(conf), inst.read_manifest(conf)), conf, installing=False)
    reconfigure(sandbox)
    shutil.rmtree(work, ignore_errors=True)


#: The kernel's lines (the text after the Xid number): Xid 79 as the driver logs it
#: (../shared/corpus/gpu-logs/akash-support-209_*), Xid 13 as NVIDIA/NVSentinel's parser test has it.
XID_MESSAGES = {79: "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
                13: "pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on (GPC 1, TPC 3, SM 0): "
                    "Out Of Range Address"}


@pytest.mark.parametrize("xid", [79, 13, None])
def test_a_rank_dying_with_a_hardware_xid_on_its_node_is_retried_without_it(sandbox, backend, observing_hooks,
                                                                            tmp_path, xid):
    """n2's rank dies mid-run, nothing drained. With a hardware Xid (79) the hooks attribute to
    the job on n2's GPU (the kernel log replayed for n2), the job is requeued without n2 and the
    output names node, Xid, GPU and restart; with an application Xid (13) the output says so and
    the job fails unrequeued, as with no Xid at all."""
    hooks = observing_hooks
    job = submit(sandbox, backend, tmp_path, "srun", [sys.executable, "-c", MIDRUN, tmp_path], nodes=2,
                 gpus_per_node=1, time="5:00", switches=False, exclude="n3")
    wait_until(lambda: (tmp_path / "start-n1-0").exists() and (tmp_path / "start-n2-0").exists(), 90, what="first start")
    rec = json.loads((hooks["state"] / "n2" / f"job-{job.id}.json").read_text())  # the prolog ran before the rank
    (gpu,) = rec["gpus"]
    try:
        if xid is not None:
            snap = json.loads(hooks["snaps"]["n2"].read_text())
            snap["xids"] = [{"xid": xid, "pci_bus_id": gpu["pci_bus_id"], "message": XID_MESSAGES[xid],
                             "origin": "/dev/kmsg", "line": 7, "timestamp": "", "time_s": time.time()}]
            path = hooks["work"] / f"n2-xid{xid}.json"
            path.write_text(json.dumps(snap))
            hooks["cfg_path"].write_text(hooks["config"]({"n2": path}))
        (tmp_path / "die").write_text("")
        state = job.wait(timeout=180, poll_s=1)
    finally:
        hooks["cfg_path"].write_text(hooks["config"]())
    out = (tmp_path / f"job-{job.id}.out").read_text(errors="replace")
    info = scontrol_job(sandbox, job.id)
    where = f"GPU{gpu['nvml_index']} {gpu['pci_bus_id']}"
    if xid == 79:
        assert state == "COMPLETED", out[-3000:]
        assert (f"slurmkit: node n2 failed: a hardware Xid during this job (the hooks' kernel-log read): {where}: "
                "Xid 79 (GPU fell off the bus) x1") in out, out[-3000:]
        assert "slurmkit: requeued without n2 (ExcNodeList=n3,n2), restart 1 of at most 3" in out
        assert "Restarts=1" in info and (tmp_path / "start-n1-1").exists() and "DRAIN" not in _node_state(sandbox)
    else:
        assert state == "FAILED", out[-3000:]
        assert "requeued without" not in out and "slurmkit: node n2 failed" not in out, out[-3000:]
        assert "Restarts=0" in info, info
        said = (f"slurmkit: node n2: the hooks attribute to this job {where}: Xid 13 (graphics engine exception) x1: "
                "application error, ignored: not node evidence")
        assert (said in out) == (xid == 13), out[-3000:]
        assert "no Xid evidence from the hooks" not in out and "did not answer" not in out, out[-3000:]


def _node_state(sandbox, node="n2") -> str:
    return run(["scontrol", "show", "node", "-o", node], env=sandbox.env()).stdout


class _AsUser(CliBackend):
    """sbatch run as ``user`` (runuser, as that user submits on a login node); the other Slurm
    commands (squeue, sacct, scontrol) as root."""

    def __init__(self, env, user):
        super().__init__(env=env)
        self.user = user

    def run(self, argv, check=True, input=None):
        if argv and argv[0] == "sbatch":
            argv = ["runuser", "-u", self.user, "--", *argv]
        return super().run(argv, check=check, input=input)


def test_an_ordinary_users_job_gets_the_hooks_xid_evidence(sandbox, observing_hooks, node_python):
    """The job of an unprivileged user (nobody, 65534:65534): its prolog (root) publishes the job's
    window to it (``<jobs_dir>/n2/job-<id>.json``, root:65534 0640, from Slurm's SLURM_JOB_UID /
    SLURM_JOB_GID) while the hooks' state directory stays root's 0700; its step, run as nobody
    with the hooks' interpreter (every user's, as a node's is), reads that window and n2's
    replayed kernel log (the snapshot, as readable as NVML is), finds Xid 79 on the job's GPU and
    the job is requeued without n2; the epilog removes the window. The ranks run the same
    interpreter (the tests' own may be one nobody cannot run)."""
    hooks = observing_hooks
    out = Path(tempfile.mkdtemp(prefix="xid-user-", dir="/tmp"))
    opened = {p: p.stat().st_mode & 0o7777 for p in (Path(sandbox.dir), hooks["work"])}
    try:
        out.chmod(0o777)
        for p in opened:
            p.chmod(0o711)  # the sandbox's and the test's own directories, as /etc/slurm and /var/lib are
        job = submit(sandbox, _AsUser(sandbox.env(), "nobody"), out, "srun", [str(node_python), "-c", MIDRUN, out],
                     nodes=2, gpus_per_node=1, time="5:00", switches=False, exclude="n3")
        wait_until(lambda: (out / "start-n1-0").exists() and (out / "start-n2-0").exists(), 90, what="first start")
        published = hooks["work"] / "jobs" / "n2" / f"job-{job.id}.json"
        st = published.stat()
        assert (st.st_mode & 0o7777, st.st_uid, st.st_gid) == (0o640, 0, 65534)
        assert hooks["state"].stat().st_mode & 0o7777 == 0o700
        (gpu,) = json.loads(published.read_text())["gpus"]
        snap = json.loads(hooks["snaps"]["n2"].read_text())
        snap["xids"] = [{"xid": 79, "pci_bus_id": gpu["pci_bus_id"], "message": XID_MESSAGES[79],
                         "origin": "/dev/kmsg", "line": 7, "timestamp": "", "time_s": time.time()}]
        path = hooks["work"] / "n2-xid79.json"
        path.write_text(json.dumps(snap))
        path.chmod(0o644)
        hooks["cfg_path"].write_text(hooks["config"]({"n2": path}))
        (out / "die").write_text("")
        state = job.wait(timeout=180, poll_s=1)
        text = (out / f"job-{job.id}.out").read_text(errors="replace")
        assert state == "COMPLETED", text[-3000:]
        assert (f"slurmkit: node n2 failed: a hardware Xid during this job (the hooks' kernel-log read): "
                f"GPU{gpu['nvml_index']} {gpu['pci_bus_id']}: Xid 79 (GPU fell off the bus) x1") in text, text[-3000:]
        assert "slurmkit: requeued without n2" in text and "UserId=nobody(65534)" in scontrol_job(sandbox, job.id)
        wait_until(lambda: not published.exists(), 60, what="n2's epilog removing the published window")
    finally:
        hooks["cfg_path"].write_text(hooks["config"]())
        for p, mode in opened.items():
            p.chmod(mode)
        shutil.rmtree(out, ignore_errors=True)
