"""``slurmkit submit`` against the real Slurm sandbox (4 nodes x 4 fake GPUs, two leaves).

Each job's ranks write what they saw (rank, world size, GPU, NCCL_IB_HCA, CPU affinity) and the
test compares it with the sandbox's rendered site profile.
"""

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slurmkit.hostlist import expand_hostlist
from slurmkit.slurm.commands import run
from slurmkit.submit import api
from slurmkit.submit.backend import CliBackend, describe_exit_code
from slurmkit.waiting import wait_until

from sandbox_jobs import submit

from ranks import REPORT, check_ranks, profile  # noqa: F401  (profile: a fixture)

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(300)]


CHECKPOINT = """
import json, os, signal, sys, time
out, rank = sys.argv[1], os.environ.get("RANK", "0")
restart = int(os.environ["SLURMKIT_RESTART_COUNT"])
ck = os.path.join(out, f"ckpt-{rank}.json")
state = json.load(open(ck)) if os.path.exists(ck) else None
step = state["step"] if state else 0
def on_signal(sig, frame):
    with open(ck + ".tmp", "w") as fh:
        json.dump({"step": step, "restart": restart, "signal": signal.Signals(sig).name}, fh)
    os.replace(ck + ".tmp", ck)
    sys.exit(0)
# the checkpoint signal this program handles (Lightning: USR1, Megatron-LM: TERM)
signal.signal(getattr(signal, "SIG" + sys.argv[2]), on_signal)
with open(os.path.join(out, f"start-{rank}-{restart}.json"), "w") as fh:
    json.dump({"restart": restart, "loaded": state}, fh)
while restart == 0:
    step += 1
    time.sleep(0.1)
"""


@pytest.fixture(scope="module")
def backend(sandbox):
    return CliBackend(env=sandbox.env())






def finish(job, tmp_path, timeout=180):
    state = job.wait(timeout=timeout, poll_s=2)
    logs = "\n".join(p.read_text(errors="replace")[-3000:] for p in tmp_path.glob("job-*.out"))
    assert state == "COMPLETED", f"job {job.id} ended {state}:\n{logs}"


@pytest.mark.versions
def test_torchrun_two_nodes_all_reduce(sandbox, backend, profile, tmp_path):  # noqa: F811
    gpn = profile[1]["gpu_count"]
    # torchrun runs in the command's own interpreter (the venv's) by default
    job = submit(sandbox, backend, tmp_path, "torchrun", [sys.executable, "-c", REPORT, tmp_path],
                 nodes=2, time="5:00")
    finish(job, tmp_path)
    check_ranks(tmp_path, profile, 2, gpn)
    info = job.info()
    assert len(info.nodes) == 2 and info.gpus == 2 * gpn
    # one torchrun per node wrote per-rank logs
    assert len(list((tmp_path / "slurmkit-logs" / job.id).glob("torchrun-*-restart0"))) == 2
    # and the job's output (-o) shows what the ranks printed (torchrun --tee prefixes the rank)
    assert f"rank 0 of {2 * gpn} reporting" in (tmp_path / f"job-{job.id}.out").read_text()


@pytest.mark.versions
def test_srun_one_task_per_gpu(sandbox, backend, profile, tmp_path):  # noqa: F811
    gpn = profile[1]["gpu_count"]
    job = submit(sandbox, backend, tmp_path, "srun", [sys.executable, "-c", REPORT, tmp_path],
                 nodes=2, time="5:00")
    finish(job, tmp_path)
    check_ranks(tmp_path, profile, 2, gpn)
    logs = tmp_path / "slurmkit-logs" / job.id
    assert len(list(logs.glob("rank-*-restart0.out"))) == 2 * gpn
    world = 2 * gpn
    for rank in range(world):
        assert f"rank {rank} of {world} reporting" in (logs / f"rank-{rank}-restart0.out").read_text()
    # the job's output (-o) shows rank 0's output (and only rank 0's)
    out = (tmp_path / f"job-{job.id}.out").read_text()
    assert f"rank 0 of {world} reporting" in out and f"rank 1 of {world} reporting" not in out


@contextlib.contextmanager
def half_of_n4_held(sandbox, backend, gpn):
    """Another job holding half of n4's GPUs while the block runs; yields the Slurm GPU indexes
    it holds (``scontrol show job -d``'s ``IDX:``)."""
    blocker = run(["sbatch", "--parsable", "-w", "n4", f"--gpus-per-node={gpn // 2}", "-o", "/dev/null",
                   "--wrap", "sleep 300"], env=sandbox.env()).stdout.strip()
    try:
        wait_until(lambda: backend.states([blocker])[blocker].state == "RUNNING", 30, what="blocker running")
        detail = run(["scontrol", "show", "job", "-d", blocker], env=sandbox.env()).stdout
        yield {int(i) for i in expand_hostlist("[" + detail.split("(IDX:")[1].split(")")[0] + "]")}
    finally:
        run(["scancel", blocker], env=sandbox.env())


def test_partial_node_ranks_bind_to_the_gpus_slurm_gave(sandbox, backend, profile, tmp_path):  # noqa: F811
    gpn = profile[1]["gpu_count"]
    with half_of_n4_held(sandbox, backend, gpn) as held:
        job = submit(sandbox, backend, tmp_path, "srun", [sys.executable, "-c", REPORT, tmp_path],
                     nodes=1, gpus_per_node=gpn // 2, nodelist="n4", time="5:00")
        finish(job, tmp_path)
        check_ranks(tmp_path, profile, 1, gpn // 2, node_gpus=sorted(set(range(gpn)) - held))


@pytest.mark.versions
def test_deepspeed_workers_keep_the_gpus_slurm_gave_on_a_shared_node(sandbox, backend, profile, tmp_path):  # noqa: F811
    """deepspeed's own launcher (runner + launch.py, installed in this environment) on a node
    another job holds half of: each worker's CUDA_VISIBLE_DEVICES is the step's, as Slurm set it
    (the free GPUs), not 0..G-1; ranks, world size and CPU binding as for the other launchers."""
    pytest.importorskip("deepspeed")
    gpn = profile[1]["gpu_count"]
    with half_of_n4_held(sandbox, backend, gpn) as held:
        free = sorted(set(range(gpn)) - held)
        assert free != list(range(gpn // 2))          # deepspeed's own default (0..G-1) would be wrong
        job = submit(sandbox, backend, tmp_path, "deepspeed", [sys.executable, "-c", REPORT, tmp_path],
                     nodes=1, gpus_per_node=gpn // 2, nodelist="n4", time="5:00",
                     params={"deepspeed": str(Path(sys.executable).with_name("deepspeed"))})
        finish(job, tmp_path)
        check_ranks(tmp_path, profile, 1, gpn // 2, node_gpus=free)
        for p in tmp_path.glob("rank*.json"):
            assert json.loads(p.read_text())["visible"] == ",".join(map(str, free))


@pytest.mark.parametrize("template,sig", [pytest.param("torchrun", "USR1", marks=pytest.mark.versions),
                                          pytest.param("srun", "TERM", marks=pytest.mark.versions),
                                          ("single-gpu", "USR1"), ("srun", "USR2")])
def test_preemption_checkpoint_requeue_restart(sandbox, backend, tmp_path, template, sig):
    # torchrun's workers get the signal from Slurm (the agent ignores it); srun ranks get it from
    # Slurm; single-gpu's one process too (its output is piped through tee, which gets no signal)
    params = {"python": sys.executable} if template == "torchrun" else {}
    ranks = (0,) if template == "single-gpu" else (0, 1)
    job = submit(sandbox, backend, tmp_path, template, [sys.executable, "-c", CHECKPOINT, tmp_path, sig],
                 nodes=1, gpus_per_node=len(ranks), params=params, time="10:00", checkpoint_signal=sig)
    wait_until(lambda: all((tmp_path / f"start-{r}-0.json").exists() for r in ranks), 60, what="first start")
    # what --signal=B:USR2@<s> does before the time limit: USR2 to the batch shell only, which
    # sends the checkpoint signal to the ranks
    run(["scancel", "--batch", "--signal=USR2", job.id], env=sandbox.env())
    finish(job, tmp_path, timeout=180)
    for rank in ranks:
        saved = json.loads((tmp_path / f"ckpt-{rank}.json").read_text())
        assert saved["restart"] == 0 and saved["step"] > 0 and saved["signal"] == "SIG" + sig
        second = json.loads((tmp_path / f"start-{rank}-1.json").read_text())
        assert second == {"restart": 1, "loaded": saved}
    out = run(["scontrol", "show", "job", job.id], env=sandbox.env()).stdout
    assert "Restarts=1" in out


def test_a_program_that_handles_no_signal_runs_as_with_sbatch(sandbox, backend, tmp_path):
    """Without --checkpoint-signal: no early signal, no requeue; the job completes, or times out
    as Slurm ends any job (TIMEOUT, Restarts=0), with the time limit Slurm applies (-t 0:30 ->
    1 minute, Slurm keeps whole minutes)."""
    done = submit(sandbox, backend, tmp_path, "single-gpu", [sys.executable, "-c", "print('done')"], time="1:30")
    shown = run(["scontrol", "show", "job", done.id], env=sandbox.env()).stdout
    assert "TimeLimit=00:02:00" in shown
    finish(done, tmp_path, timeout=60)
    slow = submit(sandbox, backend, tmp_path, "single-gpu",
                  [sys.executable, "-c", "import time; print('started', flush=True); time.sleep(600)"], time="0:30")
    assert slow.wait(timeout=200, poll_s=2) == "TIMEOUT"
    shown = run(["scontrol", "show", "job", slow.id], env=sandbox.env()).stdout
    assert "Restarts=0" in shown and "TimeLimit=00:01:00" in shown
    out = (tmp_path / f"job-{slow.id}.out").read_text()
    assert "started" in out and "slurmkit: time limit near" not in out


def _show_job(sandbox, job_id) -> dict:
    text = run(["scontrol", "show", "job", job_id], env=sandbox.env()).stdout
    fields = {}
    for line in text.split("\n"):
        s = line.strip()
        if s.startswith("JobId="):
            fields["JobName"] = line.split(" JobName=", 1)[1]
        for key in ("Comment", "StdOut"):
            if s.startswith(key + "="):
                value = line.split("=", 1)[1]
                fields[key] = value[:-1] if value.endswith(" ") else value  # scontrol adds one space
    return fields


# Output paths are Slurm filename patterns (%j expands; a backslash turns expansion off and is
# dropped), so backslashes are exercised in names and comments only.
VALUES = [
    ("it's \"quoted\" #1 $HOME `id` \\n", "a # b \\\\ ' \" packjob ✓", "dir with space #1/o-'q'-%j.out"),
    ("ünïcødé ☃ $(id) ; | & <x>", "hetjob \\\"x\\\" #", "$HOME `x` ; ü/out.log"),
]


def test_escaping_matches_real_sbatch(sandbox, backend, tmp_path):
    jobs = []
    for name, comment, out in VALUES:
        (tmp_path / out).parent.mkdir(parents=True, exist_ok=True)
        job = submit(sandbox, backend, tmp_path, "single-gpu", ["true"], name=name, comment=comment,
                     output=str(tmp_path / out), signal_s=0)
        jobs.append((job, name, comment, str(tmp_path / out)))
    api.wait_all([j for j, *_ in jobs], timeout=120, poll_s=1)
    for job, name, comment, out in jobs:
        seen = _show_job(sandbox, job.id)
        assert seen["JobName"] == name
        assert seen["Comment"] == comment
        assert seen["StdOut"] == out.replace("%j", job.id)
        assert Path(out.replace("%j", job.id)).exists()


def _blockers(sandbox, nodes):
    ids = [run(["sbatch", "--parsable", "--exclusive", "-w", n, "-o", "/dev/null", "--wrap", "sleep 300"],
               env=sandbox.env()).stdout.strip() for n in nodes]
    wait_until(lambda: all(v.state == "RUNNING" for v in CliBackend(sandbox.env()).states(ids).values()), 30, what="blockers running")
    return ids


def test_switches_keep_a_job_under_one_leaf(sandbox, backend, profile, tmp_path):  # noqa: F811
    raw, _ = profile
    leaves = {leaf["name"]: leaf["nodes"] for leaf in raw["fabric"]["leaves"]}
    assert set(leaves) == {"leaf1", "leaf2"}
    blockers = _blockers(sandbox, ["n1", "n3"])           # one node held under each leaf
    try:
        job = submit(sandbox, backend, tmp_path, "single-gpu", ["true"], signal_s=0)  # warm the scheduler
        job.wait(timeout=60, poll_s=1)
        plan = api.prepare(api.build_request("srun", ["sleep", "60"], {"site": str(sandbox.profile_path),
                                                                    "nodes": 2, "prefer_locality": True}),
                           backend)
        assert not any(o.name == "nodelist" for o in plan.options)   # no leaf has 2 idle nodes
        pinned = submit(sandbox, backend, tmp_path, "srun", ["sleep", "60"], nodes=2, gpus_per_node=1,
                        switch_wait="5:00", output="/dev/null")
        assert "Switches=1@00:05:00" in run(["scontrol", "show", "job", pinned.id], env=sandbox.env()).stdout
        time.sleep(10)  # deliberate window for a wrong start (sbatch triggers a scheduling pass at once): 'still pending' has no event to wait on
        assert pinned.state() == "PENDING"                  # n2 and n4 are free, but under two leaves
        pinned.cancel()
        free = submit(sandbox, backend, tmp_path, "srun", ["sleep", "60"], nodes=2, gpus_per_node=1,
                      switches=False, output="/dev/null")
        wait_until(lambda: free.state() == "RUNNING", 30, what="job without --switches to start")
        assert sorted(free.info().nodes) == ["n2", "n4"]    # across both leaves
        free.cancel()
    finally:
        run(["scancel", *blockers], env=sandbox.env())


def test_prefer_locality_picks_idle_nodes_under_one_leaf(sandbox, backend, tmp_path):
    # only nodes in state idle are picked (not completing: a node stuck completing stays so):
    # let the previous tests' jobs finish completing
    wait_until(lambda: run(["sinfo", "-h", "-N", "-o", "%T"], env=sandbox.env()).stdout.split() == ["idle"] * 4, 60, what="all nodes idle")
    blockers = _blockers(sandbox, ["n1"])
    try:
        plan = api.prepare(api.build_request("torchrun", ["x"], {"site": str(sandbox.profile_path), "nodes": 2,
                                                            "prefer_locality": True}), backend)
        nodelist = {o.name: o.value for o in plan.options}["nodelist"]
        assert nodelist == "n3,n4"                          # leaf2 is the only leaf with 2 idle nodes
    finally:
        run(["scancel", *blockers], env=sandbox.env())


def test_status_cli_json(sandbox, backend, tmp_path):
    import subprocess

    job = submit(sandbox, backend, tmp_path, "single-gpu", ["true"], signal_s=0)
    job.wait(timeout=60, poll_s=1)
    proc = subprocess.run([sys.executable, "-m", "slurmkit", "status", job.id, "--json"], capture_output=True,
                          text=True, env={**__import__("os").environ, **sandbox.env()})
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got == {"job_id": job.id, "state": "COMPLETED", "nodes": got["nodes"], "gpus": 1, "exit_code": "0:0",
                   "restarts": 0, "excluded_nodes": [], "last_reason": got["last_reason"]}
    assert got["last_reason"] in ("", "Resources", "Priority", "BeginTime")     # slurmdbd's, before it started
    assert len(got["nodes"]) == 1 and got["nodes"][0] in sandbox.node_names


def test_api_test_only_and_batched_poll(sandbox, backend, tmp_path):
    import slurmkit

    estimate = slurmkit.submit("single-gpu", ["true"], site=str(sandbox.profile_path), env=sandbox.env(),
                               test_only=True)
    assert "to start at" in estimate and "partition gpu" in estimate
    jobs = [submit(sandbox, backend, tmp_path, "single-gpu", ["true"], signal_s=0) for _ in range(3)]
    states = api.wait_all(jobs, timeout=90, poll_s=1)
    assert states == {j.id: "COMPLETED" for j in jobs}
    assert set(api.poll(jobs)) == {j.id for j in jobs}


def test_array_runs_one_task_per_parameter_set(sandbox, backend, tmp_path):
    sets = [{"lr": 0.1}, {"lr": 0.01}, {"lr": 0.001}]
    job = submit(sandbox, backend, tmp_path, "array",
                 ["bash", "-c", 'echo "$SLURMKIT_PARAM_LR $SLURM_ARRAY_TASK_ID" > lr-{lr}.txt; '
                  'echo "task $SLURM_ARRAY_TASK_ID trains with lr={lr}"'],
                 sets={"sets": json.dumps(sets), "throttle": "2"}, signal_s=0)
    assert "ArrayTaskThrottle=2" in run(["scontrol", "show", "job", job.id], env=sandbox.env()).stdout
    finish(job, tmp_path, timeout=90)
    for i, s in enumerate(sets):
        assert (tmp_path / f"lr-{s['lr']}.txt").read_text().split() == [str(s["lr"]), str(i)]
    # every task logs under the array job's id (job.id), whatever its own job id
    assert [p.name for p in (tmp_path / "slurmkit-logs").iterdir()] == [job.id]
    assert sorted(p.name for p in (tmp_path / "slurmkit-logs" / job.id).iterdir()) == \
        [f"task-{i}-restart0.out" for i in range(len(sets))]
    # each task's output (-o, one file per task: %j is the task's own job id) shows what it
    # printed, as does its task log
    outs = [p.read_text() for p in tmp_path.glob("job-*.out")]
    assert len(outs) == len(sets)
    for i, s in enumerate(sets):
        line = f"task {i} trains with lr={s['lr']}"
        assert sum(line in o for o in outs) == 1
        assert line in (tmp_path / "slurmkit-logs" / job.id / f"task-{i}-restart0.out").read_text()


def test_nccl_tests_says_clearly_when_the_binary_is_absent(sandbox, backend, tmp_path):
    job = submit(sandbox, backend, tmp_path, "nccl-tests", [], nodes=1, gpus_per_node=1,
                 sets={"binary": "/nonexistent/all_reduce_perf"}, signal_s=0)
    assert job.wait(timeout=60, poll_s=1) == "FAILED"
    out = (tmp_path / f"job-{job.id}.out").read_text()
    assert "nccl-tests binary /nonexistent/all_reduce_perf not found" in out


def test_random_names_and_comments_read_back_exactly(sandbox, backend):
    """Property check against the real parser: seeded random strings over the troublesome
    characters, submitted held (nothing runs), read back with scontrol."""
    import random

    rng = random.Random(4)
    pool = list(" \t#\\\"'$`;|&()<>*?~!{}[]%=,:@") + list("aZ09-_./") + ["ü", "☃", "€", "packjob", "HetJob"]
    values = ["".join(rng.choice(pool) for _ in range(rng.randint(1, 24))) for _ in range(24)]
    ids = []
    try:
        for i in range(0, len(values) - 1, 2):
            name, comment = values[i], values[i + 1]
            script = api.render_script("single-gpu", ["true"], site=str(sandbox.profile_path), name=name,
                                       comment=comment, signal_s=0, output="/dev/null")
            script = script.replace("#!/bin/bash\n", "#!/bin/bash\n#SBATCH --hold\n", 1)
            job_id = backend.submit(script)
            ids.append(job_id)
            seen = _show_job(sandbox, job_id)
            assert (seen["JobName"], seen["Comment"]) == (name, comment)
    finally:
        if ids:
            run(["scancel", *ids], env=sandbox.env())


@pytest.mark.parametrize("signal_s", [120, 0])   # with and without the checkpoint trap
def test_single_gpu_output_reaches_the_job_output(sandbox, backend, tmp_path, signal_s):
    sig = "USR1" if signal_s else None
    job = submit(sandbox, backend, tmp_path, "single-gpu", [sys.executable, "-c", "print('hello from the job')"],
                 signal_s=signal_s, checkpoint_signal=sig)
    finish(job, tmp_path, timeout=60)
    assert "hello from the job" in (tmp_path / f"job-{job.id}.out").read_text()
    assert "hello from the job" in (tmp_path / "slurmkit-logs" / job.id / "rank-0-restart0.out").read_text()
    # a failing program: its message is in the job's output and its exit status is the job's
    bad = submit(sandbox, backend, tmp_path, "single-gpu",
                 [sys.executable, "-c", "import sys; print('step 1', flush=True); sys.exit('loss is NaN')"],
                 signal_s=signal_s, checkpoint_signal=sig)
    assert bad.wait(timeout=60, poll_s=1) == "FAILED"
    out = (tmp_path / f"job-{bad.id}.out").read_text()
    assert "step 1" in out and "loss is NaN" in out
    assert "ExitCode=1:0" in run(["scontrol", "show", "job", bad.id], env=sandbox.env()).stdout


def test_per_job_env_setup_teardown_and_srun_options_on_the_node(sandbox, backend, tmp_path):
    """--env expands on the node ($PATH there, prepended), --env-file too, --setup's exports reach
    the rank, --teardown runs once after it, --srun-opt=--label prefixes srun's output."""
    env_file = tmp_path / "job.env"
    env_file.write_text("# from a file\nFROM_FILE=\"yes $SLURM_JOB_ID\"\n")
    prog = ("import os; print('X=' + os.environ['X']); print('Y=' + os.environ['Y']); "
            "print('F=' + os.environ['FROM_FILE']); print('Q=' + os.environ['Q'])")
    job = submit(sandbox, backend, tmp_path, "single-gpu", [sys.executable, "-c", prog],
                 job_env=["X=/opt/x/bin:$PATH", "Q=it's $(id) `id`"], env_file=str(env_file),
                 setup=["export Y=from-setup"], teardown=[f"echo torn-down >> {tmp_path}/teardown"],
                 srun_opts=["--label"])
    finish(job, tmp_path, timeout=90)
    out = (tmp_path / f"job-{job.id}.out").read_text()
    lines = dict(line.split(": ", 1)[1].split("=", 1) for line in out.splitlines() if line.startswith("0: "))
    assert lines["X"].startswith("/opt/x/bin:") and "/bin" in lines["X"][len("/opt/x/bin:"):]
    assert lines["Y"] == "from-setup" and lines["F"] == f"yes {job.id}" and lines["Q"] == "it's $(id) `id`"
    assert (tmp_path / "teardown").read_text() == "torn-down\n"


@pytest.mark.versions
def test_a_missing_output_directory_is_created_and_logs_of_a_job_without_output_say_why(sandbox, backend,
                                                                                        tmp_path, slurm_release):
    job = submit(sandbox, backend, tmp_path, "single-gpu", [sys.executable, "-c", "print('in nodir')"],
                 output=str(tmp_path / "nodir" / "x-%j.out"))
    finish(job, tmp_path, timeout=60)
    assert "in nodir" in (tmp_path / "nodir" / f"x-{job.id}.out").read_text()
    # plain sbatch into a directory that does not exist: the job ends with no output anywhere
    lost = run(["sbatch", "--parsable", "-o", str(tmp_path / "missing" / "o-%j.out"), "--wrap", "true"],
               env=sandbox.env()).stdout.strip()
    state = api.Job(lost, backend).wait(timeout=60, poll_s=1)
    code = api.Job(lost, backend).exit_code
    proc = subprocess.run([sys.executable, "-m", "slurmkit", "logs", lost], capture_output=True, text=True,
                          env={**os.environ, **sandbox.env()}, timeout=60)
    if slurm_release.name != "22.05":
        # slurmstepd of 24.11 and later makes the missing directory itself: the output is there, empty
        assert (tmp_path / "missing" / f"o-{lost}.out").read_text() == ""
        assert proc.returncode == 0 and "the job wrote no output (its output file is empty)" in proc.stderr
        return
    assert proc.returncode == 1
    assert (f"job {lost} ended {state} (ExitCode {code}, {describe_exit_code(code)}) without any output: the "
            f"directory of its output {tmp_path}/missing/o-{lost}.out does not exist") in proc.stderr, proc.stderr


def test_a_job_id_given_again_keeps_the_earlier_jobs_logs_apart(sandbox, backend, tmp_path):
    """Slurm hands out a job id again once its state is reset (a rebuilt cluster or sandbox): the
    earlier job's rank logs under slurmkit-logs/<id>/ are moved aside at the new job's start, and
    neither its output nor `slurmkit logs` shows them."""
    first = submit(sandbox, backend, tmp_path, "srun", [sys.executable, "-c", "print('first job')"])
    finish(first, tmp_path, timeout=90)
    nxt = str(int(first.id) + 1)     # this worker's sandbox numbers its jobs one after the other
    stale = tmp_path / "slurmkit-logs" / nxt
    stale.mkdir(parents=True)
    (stale / "rank-0-restart0.out").write_text("an earlier job's rank 0\n")
    (stale / "rank-3-restart0.out").write_text("an earlier job's rank 3\n")
    job = submit(sandbox, backend, tmp_path, "srun", [sys.executable, "-c", "print('second job')"])
    assert job.id == nxt
    finish(job, tmp_path, timeout=90)
    out = (tmp_path / f"job-{job.id}.out").read_text()
    assert "second job" in out and "an earlier job's rank" not in out
    assert f"slurmkit: slurmkit-logs/{nxt} held an earlier job's logs (the same job id): moved to" in out
    [aside] = tmp_path.glob(f"slurmkit-logs/{nxt}.earlier-*")
    assert sorted(p.name for p in aside.iterdir()) == ["rank-0-restart0.out", "rank-3-restart0.out"]
    assert "earlier" not in "".join(f.read_text() for f in (tmp_path / "slurmkit-logs" / nxt).glob("rank-*"))
    logs = slurmkit_cli(sandbox, "logs", job.id)
    assert "second job" in logs.stdout and "an earlier job's rank" not in logs.stdout + logs.stderr


def slurmkit_cli(sandbox, *args):
    return subprocess.run([sys.executable, "-m", "slurmkit", *args], capture_output=True, text=True,
                          env={**os.environ, **sandbox.env()}, timeout=60)


def test_logs_say_why_a_finished_job_shows_nothing(sandbox, backend, tmp_path):
    """A job that wrote nothing: "the job wrote no output" with its state and exit code, exit 0.
    A job that ran and whose output was deleted: the file is missing (not "never written").
    A failing --setup command: said, the teardown runs, the job ends with the command's status."""
    quiet = submit(sandbox, backend, tmp_path, "single-gpu", [sys.executable, "-c", "pass"])
    deleted = submit(sandbox, backend, tmp_path, "single-gpu", [sys.executable, "-c", "print('soon gone')"],
                     output=str(tmp_path / "gone-%j.out"))
    setup = submit(sandbox, backend, tmp_path, "single-gpu", [sys.executable, "-c", "print('never runs')"],
                   setup=["(exit 4)"], teardown=[f"echo torn > {tmp_path}/torn"])
    finish(quiet, tmp_path, timeout=90)
    assert deleted.wait(timeout=90, poll_s=1) == "COMPLETED"
    assert setup.wait(timeout=90, poll_s=1) == "FAILED"
    out = tmp_path / f"job-{quiet.id}.out"
    assert out.read_text() == ""
    proc = slurmkit_cli(sandbox, "logs", quiet.id)
    assert proc.returncode == 0 and proc.stdout == ""
    assert proc.stderr == (f"slurmkit: job {quiet.id} ended COMPLETED (ExitCode 0:0, exit 0): the job wrote no "
                           "output (its output file is empty)\n"), proc.stderr
    (tmp_path / f"gone-{deleted.id}.out").unlink()
    proc = slurmkit_cli(sandbox, "logs", deleted.id)
    assert proc.returncode == 1
    assert (f"job {deleted.id} ended COMPLETED (ExitCode 0:0, exit 0): its output {tmp_path}/gone-{deleted.id}.out "
            "is missing (the job started at ") in proc.stderr and "never" not in proc.stderr, proc.stderr
    said = (tmp_path / f"job-{setup.id}.out").read_text()
    assert "slurmkit: setup command failed (status 4): (exit 4)" in said and "never runs" not in said, said
    assert (tmp_path / "torn").read_text() == "torn\n" and setup.exit_code == "4:0"
    proc = slurmkit_cli(sandbox, "status", setup.id)
    assert "exit=4:0 (exit 4)" in proc.stdout, proc.stdout + proc.stderr


def test_waiting_shows_the_pending_reason_as_it_changes(sandbox, backend, tmp_path):
    """A job held by a dependency: status shows Slurm's reason; Job.wait's callback, submit
    --wait and logs --follow show PENDING (Dependency), then the run, as plain lines off a
    terminal."""
    from slurmkit.submit.backend import parse_squeue

    env = {**os.environ, **sandbox.env()}
    first = submit(sandbox, backend, tmp_path, "single-gpu", [sys.executable, "-c", "import time; time.sleep(12)"])
    held = submit(sandbox, backend, tmp_path, "single-gpu", [sys.executable, "-c", "print('held job ran')"],
                  dependency=f"afterok:{first.id}")
    raw = run(["squeue", "-h", "-t", "all", "-j", held.id, "-o", "%i|%T|%N|%D|%b|%r|%S"], env=sandbox.env()).stdout
    info = parse_squeue(raw)[held.id]
    assert (info.state, info.reason) == ("PENDING", "Dependency"), raw
    status = subprocess.run([sys.executable, "-m", "slurmkit", "status", held.id], capture_output=True, text=True,
                            env=env, timeout=60)
    assert "PENDING" in status.stdout and "reason=Dependency" in status.stdout, status.stdout + status.stderr
    # logs without --follow: no output yet, and why (not a traceback, not "may still be pending")
    logs = subprocess.run([sys.executable, "-m", "slurmkit", "logs", held.id], capture_output=True, text=True,
                          env=env, timeout=60)
    assert logs.returncode == 1 and logs.stderr == (
        f"slurmkit: error: job {held.id} is PENDING (Dependency): no output yet; "
        f"`slurmkit logs --follow {held.id}` waits for it to start\n"), logs.stderr
    follow = subprocess.Popen([sys.executable, "-m", "slurmkit", "logs", "-f", held.id], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env)
    seen = []
    assert held.wait(timeout=120, poll_s=1, callback=seen.append) == "COMPLETED"
    out, err = follow.communicate(timeout=60)
    assert (seen[0].state, seen[0].reason) == ("PENDING", "Dependency") and seen[-1].state == "COMPLETED"
    assert f"job {held.id}: PENDING (Dependency)" in err.splitlines()[0], err
    assert "held job ran" in out
    # once it ran, status still says why it waited (slurmdbd's last reason, sacct Reason)
    status = subprocess.run([sys.executable, "-m", "slurmkit", "status", held.id], capture_output=True, text=True,
                            env=env, timeout=60)
    assert "COMPLETED" in status.stdout and "last_reason=Dependency" in status.stdout, status.stdout + status.stderr
    # submit --wait, off a terminal: one plain line per change, exit 0 once COMPLETED
    blocker = submit(sandbox, backend, tmp_path, "single-gpu", [sys.executable, "-c", "import time; time.sleep(5)"])
    proc = subprocess.run([sys.executable, "-m", "slurmkit", "submit", "single-gpu", "-o", str(tmp_path / "w-%j.out"),
                           "-D", str(tmp_path), "-d", f"afterok:{blocker.id}", "--wait", "--", "true"],
                          capture_output=True, text=True, env=env, timeout=180)
    assert proc.returncode == 0, proc.stderr
    job_id = proc.stdout.strip()
    lines = proc.stderr.splitlines()
    assert lines[0] == f"job {job_id}: PENDING (Dependency)" and lines[-1].startswith(f"job {job_id}: COMPLETED")
    assert "\r" not in proc.stderr
    # a dependency that failed: Slurm keeps the job PENDING (DependencyNeverSatisfied) for ever;
    # --wait says so and stops (exit 1) rather than wait without end
    failed = run(["sbatch", "--parsable", "-o", "/dev/null", "--wrap", "false"], env=sandbox.env()).stdout.strip()
    assert api.Job(failed, backend).wait(timeout=60, poll_s=1) == "FAILED"
    proc = subprocess.run([sys.executable, "-m", "slurmkit", "submit", "single-gpu", "-o", str(tmp_path / "n-%j.out"),
                           "-D", str(tmp_path), "-d", f"afterok:{failed}", "--wait", "--", "true"],
                          capture_output=True, text=True, env=env, timeout=180)
    never = proc.stdout.strip()
    try:
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.splitlines()[-1] == (
            f"slurmkit: error: job {never} will never start: PENDING (DependencyNeverSatisfied): a job it depends on "
            f"ended without meeting the dependency, and Slurm keeps it pending; cancel it with 'scancel {never}'")
    finally:
        backend.cancel(never)
