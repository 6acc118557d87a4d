"""What a production job needs from ``slurmkit submit`` before Slurm sees it (no Slurm needed):
time limits and preemption that cannot loop, placement limits, the options every job needs,
the program's own arguments, the Python API's types, and the bind wrapper under a restricted
CPU affinity (run for real with taskset)."""

import os
import subprocess
import sys

import pytest

import slurmkit
from slurmkit.errors import UsageError
from slurmkit.profile import load_profile
from slurmkit.submit import api, placement, render, site, templates, timelimit


def plan_for(name, command=("python3", "train.py"), profile="sandbox", **kw):
    facts = site.site_facts(site.load(profile), source=profile)
    return render.plan(render.SubmitRequest(template=name, command=command, **kw), facts, templates.get(name))


def options(p):
    return {o.name: o.value for o in p.options}


def cli(*args):
    return subprocess.run([sys.executable, "-m", "slurmkit", *args], capture_output=True, text=True)


# -- time limits and preemption ------------------------------------------------------------

@pytest.mark.parametrize("text, seconds", [
    ("90", 5400), ("1:00", 60), ("1:30", 90), ("2:00:00", 7200), ("1-0", 86400), ("1-2:30", 95400),
    ("0-0:0:45", 45), ("UNLIMITED", None), ("infinite", None), ("0", None)])
def test_slurm_time_strings(text, seconds):
    assert timelimit.parse_seconds(text) == seconds


@pytest.mark.parametrize("text", ["1h", "1:2:3:4", "", "-5", "1-", "1:-1", "ten"])
def test_malformed_time_is_refused_naming_the_option(text):
    with pytest.raises(UsageError, match="--time"):
        timelimit.parse_seconds(text)


def test_a_time_limit_shorter_than_the_warning_clamps_the_warning():
    # -t 1:00 with the 120 s default: the signal would come at the start and requeue forever
    p = plan_for("srun", time="1:00", checkpoint_signal="USR1")
    assert options(p)["signal"] == "B:USR2@30"
    assert "clamped to half of the time limit Slurm applies (00:01:00)" in render.explain(p)
    assert options(plan_for("srun", time="10:00", checkpoint_signal="USR1"))["signal"] == "B:USR2@120"
    assert options(plan_for("srun", time="2:00", signal_s=120, checkpoint_signal="USR1"))["signal"] == "B:USR2@60"


@pytest.mark.parametrize("time, applied, warning", [("1:30", "00:02:00", 60), ("0:01", "00:01:00", 30),
                                                    ("2:00:30", "02:01:00", 120), ("1-0:0:1", "1-00:01:00", 120)])
def test_the_warning_is_computed_from_the_limit_slurm_applies(time, applied, warning):
    # Slurm keeps whole minutes, rounding up (parse_time.c time_str2mins): -t 1:30 runs 2 minutes,
    # so a 120 s warning is clamped to half of 120 s (60), not of 90 s (45)
    p = plan_for("srun", time=time, checkpoint_signal="USR1")
    assert options(p)["signal"] == f"B:USR2@{warning}"
    text = render.explain(p)
    assert f"Slurm applies {applied} (whole minutes, rounded up)" in text
    assert timelimit.hms(timelimit.slurm_limit(timelimit.parse_seconds(time))) == applied


def test_the_checkpoint_signal_comes_from_the_request_template_or_profile_and_is_named():
    from dataclasses import replace

    assert "signal" not in options(plan_for("srun"))                          # default: none
    p = plan_for("srun", checkpoint_signal="sigterm")
    assert 'scancel --signal=TERM "$SLURM_JOB_ID"' in render.render(p)
    text = render.explain(p)
    assert "sends SIGTERM to the ranks (CLI --checkpoint-signal)" in text
    assert "a program without a SIGTERM handler is stopped by it and restarts from scratch" in text
    from slurmkit.profile import load_profile

    facts = site.site_facts(load_profile("sandbox", overrides=({"submit": {"checkpoint_signal": "USR1"}},)))
    tpl = templates.get("srun")
    by_profile = render.plan(render.SubmitRequest(template="srun", command=("x",)), facts, tpl)
    assert "sends SIGUSR1 to the ranks (profile submit.checkpoint_signal)" in render.explain(by_profile)
    by_template = render.plan(render.SubmitRequest(template="srun", command=("x",)), facts,
                              replace(tpl, checkpoint_signal="USR2"))
    assert "sends SIGUSR2 to the ranks (template srun checkpoint_signal)" in render.explain(by_template)
    off = render.plan(render.SubmitRequest(template="srun", command=("x",), checkpoint_signal="none"), facts, tpl)
    assert "signal" not in options(off)
    with pytest.raises(UsageError, match="--checkpoint-signal 'KILL': expected one of USR1"):
        plan_for("srun", checkpoint_signal="KILL")


def test_requeues_are_capped_by_max_restarts_from_profile_set_or_api():
    text = render.render(plan_for("torchrun", nodes=2, checkpoint_signal="USR1"))
    assert 'if [ "$SLURMKIT_RESTART_COUNT" -ge 3 ]; then' in text          # profile default (model)
    assert "max_restarts = 3" in text and "scontrol requeue" in text
    p = plan_for("srun", sets={"max_restarts": "1"}, checkpoint_signal="USR1")
    assert p.params["max_restarts"] == 1 and p.param_sources["max_restarts"] == "--set max_restarts"
    assert 'if [ "$SLURMKIT_RESTART_COUNT" -ge 1 ]; then' in render.render(p)
    assert plan_for("srun", max_restarts=0).params["max_restarts"] == 0
    with pytest.raises(UsageError, match="max_restarts"):
        plan_for("srun", sets={"max_restarts": "many"})


def test_slurm_preemption_sigterm_is_trapped_and_torchrun_does_not_forward_signals():
    text = render.render(plan_for("torchrun", nodes=2, checkpoint_signal="USR1"))
    assert "trap slurmkit_on_term TERM" in text and "trap slurmkit_on_usr2 USR2" in text
    assert 'grep -q "PreemptTime=[0-9]"' in text          # a preempted job whose ranks exited requeues
    # the agent neither dies of nor forwards USR1/TERM: Slurm signals every worker itself
    assert "--signals-to-handle=SIGINT,SIGHUP,SIGQUIT " in text and "SIGUSR1" not in text.split("SLURMKIT_DEFAULT")[0]
    assert "trap '' USR1 TERM" in text
    assert "signal.signal(signal.SIGUSR1, signal.SIG_DFL)" in text
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0


@pytest.mark.parametrize("args, needle", [
    (["-t", "1h"], "--time '1h': not a Slurm time"),
    (["--switch-wait", "soon", "-N", "2"], "--switch-wait 'soon': not a Slurm time"),
    (["--preempt-warning", "-5"], "--preempt-warning: must be >= 0 s"),
    (["-N", "5"], "partition gpu has 4 nodes (profile partitions.gpu.nodes)"),
    (["--gpus-per-node", "8"], "node type sandbox-h100x4 has 4 GPUs (profile node_types.sandbox-h100x4.gpu_count)"),
    (["--mem", "10G", "--mem-per-gpu", "2G"], "give --mem (per node) or --mem-per-gpu, not both"),
    (["--sbatch=--nodes=3"], "slurmkit sets --nodes itself; use --nodes"),
    (["--sbatch=gres-flags"], "expected an sbatch option"),
])
def test_bad_limits_are_refused_at_dry_run_with_one_line(args, needle):
    proc = cli("submit", "srun", "--site", "sandbox", "--dry-run", *args, "--", "python3", "x.py")
    assert proc.returncode == 2, proc.stdout[-500:]
    assert proc.stderr.count("\n") == 1 and needle in proc.stderr, proc.stderr


# -- placement -------------------------------------------------------------------------------

def test_a_users_nodelist_drops_switches():
    assert "switches" in options(plan_for("srun", nodes=2))
    assert "switches" not in options(plan_for("srun", nodes=2, nodelist="n1,n3"))
    assert options(plan_for("srun", nodes=2, nodelist="n1,n3"))["nodelist"] == "n1,n3"


def test_prefer_locality_takes_only_nodes_in_state_idle():
    sinfo = "n1|idle\nn2|drained\nn3|idle\nn4|reserved\nn5|down\nn6|draining\nn7|idle\n"
    assert placement.parse_sinfo_nodes(sinfo) == ["n1", "n3", "n7"]
    # n2 is drained: leaf1 (n1-n2) has one free node, leaf2 (n3-n4) none once n4 is reserved
    facts = site.site_facts(site.load("sandbox"), source="sandbox")
    assert placement.pick_nodelist(facts, 2, placement.parse_sinfo_nodes(sinfo)) is None
    assert placement.pick_nodelist(facts, 2, ["n1", "n2", "n3", "n4"], exclude=["n3"]) == ("leaf1", ["n1", "n2"])


def test_prefer_locality_never_picks_excluded_nodes():
    facts = site.site_facts(site.load("sandbox"), source="sandbox")
    req = render.SubmitRequest(template="srun", command=("x",), nodes=2, prefer_locality=True, exclude="n[1-2]")
    p = render.plan(req, facts, templates.get("srun"), ["n1", "n2", "n3", "n4"])
    assert options(p)["nodelist"] == "n3,n4" and options(p)["exclude"] == "n[1-2]"


# -- the options every job needs ---------------------------------------------------------------

EVERY = ["-A", "proj-a", "--qos", "high", "--mem-per-gpu", "64G", "--exclusive", "-C", "h100&ib",
         "-x", "n[3-4]", "--reservation", "maint window", "-d", "afterok:17", "--mail-type", "END,FAIL",
         "--mail-user", "me@example.org", "--sbatch=--gres-flags=enforce-binding", "--sbatch", "--begin=now+1hour"]


def test_every_job_option_reaches_the_script_and_explain():
    script = cli("submit", "srun", "--site", "sandbox", "--dry-run", *EVERY, "--", "python3", "x.py")
    assert script.returncode == 0, script.stderr
    lines = [line for line in script.stdout.splitlines() if line.startswith("#SBATCH")]
    for want in ["--account=proj-a", "--qos=high", "--mem-per-gpu=64G", "--exclusive", '--constraint="h100&ib"',
                 "--exclude=n[3-4]", '--reservation="maint window"', "--dependency=afterok:17",
                 "--mail-type=END,FAIL", "--mail-user=me@example.org", "--gres-flags=enforce-binding",
                 "--begin=now+1hour"]:
        assert f"#SBATCH {want}" in lines
    explain = cli("submit", "srun", "--site", "sandbox", "--explain", *EVERY, "--", "python3", "x.py").stdout
    assert "#SBATCH --account=proj-a" in explain and "<- CLI --account" in explain
    assert "<- CLI --sbatch (passed through)" in explain
    # the same through the API
    text = api.render_script("srun", ["python3", "x.py"], site="sandbox", account="proj-a", mem="200G",
                             sbatch_args=["--gres-flags=enforce-binding"])
    assert "#SBATCH --account=proj-a\n" in text and "#SBATCH --mem=200G\n" in text
    assert "#SBATCH --gres-flags=enforce-binding\n" in text


def test_pass_through_values_are_escaped_and_newlines_refused():
    p = plan_for("srun", sbatch_args=("--comment-x=a # b",))
    assert 'a # b' in render.render(p).split("#SBATCH --comment-x=")[1].split("\n")[0]
    with pytest.raises(Exception, match="newline"):
        plan_for("srun", sbatch_args=("--begin=now\n#SBATCH --nodes=9",))


def test_the_programs_own_options_stay_the_programs_without_dashdash():
    proc = cli("submit", "srun", "--site", "sandbox", "-N", "2", "--dry-run", "python3", "train.py",
               "-o", "foo", "-N", "3", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "#SBATCH --output" not in proc.stdout and "#SBATCH --nodes=2" in proc.stdout
    assert "slurmkit-rank python3 train.py -o foo -N 3 --dry-run &" in proc.stdout
    # options between the template and the program still belong to slurmkit
    proc = cli("submit", "srun", "--site", "sandbox", "--dry-run", "-o", "out-%j.txt", "python3", "t.py")
    assert "#SBATCH --output=out-%j.txt" in proc.stdout


# -- the Python API ------------------------------------------------------------------------------

def test_command_as_string_is_split_like_a_shell():
    a = api.render_script("srun", "python3 train.py --name 'a b' \"c#d\"", site="sandbox")
    b = api.render_script("srun", ["python3", "train.py", "--name", "a b", "c#d"], site="sandbox")
    assert a == b


@pytest.mark.parametrize("kw, needle", [
    ({"nodes": "2"}, "nodes must be a node count (int), not str"),
    ({"nodes": True}, "nodes must be a node count (int), not bool"),
    ({"time": 3600}, "time must be a Slurm time string"),
    ({"exclusive": "yes"}, "exclusive must be True or False"),
    ({"sets": ["a=b"]}, "sets must be a dict"),
    ({"nodez": 2}, "unexpected keyword 'nodez' (did you mean 'nodes'"),
    ({"zzz": 2}, "unexpected keyword 'zzz'$"),
    ({"after": 1.5}, "after must be a Job, a job id or a list of them"),
])
def test_wrong_types_name_the_parameter(kw, needle):
    with pytest.raises(TypeError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        api.render_script("srun", ["x"], site="sandbox", **kw)


def test_wrong_command_and_template_types():
    with pytest.raises(TypeError, match="command must be a list of arguments or a str"):
        api.render_script("srun", 42, site="sandbox")
    with pytest.raises(TypeError, match=r"command\[1\] must be a str"):
        api.render_script("srun", ["python3", None], site="sandbox")
    with pytest.raises(TypeError, match="template must be a template name"):
        api.render_script(["srun"], ["x"], site="sandbox")


def test_after_chains_jobs_with_afterok():
    first = api.Job("101", backend=object())
    text = api.render_script("srun", ["x"], site="sandbox", after=first)
    assert "#SBATCH --dependency=afterok:101\n" in text
    text = api.render_script("srun", ["x"], site="sandbox", after=[first, "102"], dependency="singleton")
    assert "#SBATCH --dependency=singleton,afterok:101:102\n" in text


def test_all_lists_the_api():
    assert {"submit", "Job", "JobNotFound", "render_script", "explain", "poll", "wait_all"} <= set(slurmkit.__all__)
    for name in slurmkit.__all__:
        assert getattr(slurmkit, name) is not None


def test_master_port_stays_below_the_ephemeral_range():
    assert render.PORT_BASE >= 1024 and render.PORT_BASE + render.PORT_SPAN - 1 < 32768
    assert f"MASTER_PORT=$(( {render.PORT_BASE} + SLURM_JOB_ID % {render.PORT_SPAN} ))" in \
        render.render(plan_for("srun", nodes=2))


# -- launchers as their tools expect ----------------------------------------------------------

def _container_facts():
    """The sandbox profile with pyxis enabled (submit.container = true)."""
    import tomllib
    from pathlib import Path

    from slurmkit.profile import load_profile_data

    with open(Path(__file__).resolve().parents[2] / "site" / "sandbox.toml", "rb") as fh:
        prof = tomllib.load(fh)
    prof["submit"] = {**prof.get("submit", {}), "container": True}
    return site.site_facts(load_profile_data(prof, "sandbox"))


def test_nccl_tests_looks_for_its_binary_inside_the_container():
    req = render.SubmitRequest(template="nccl-tests", nodes=2,
                               sets={"container_image": "nvcr.io#nvidia/pytorch:24.01-py3"})
    text = render.render(render.plan(req, _container_facts(), templates.get("nccl-tests")))
    check = text.split("# Where the ranks run")[1].split("slurmkit_rank()")[0]
    assert ("srun --job-name=nccl-tests-check --nodes=1 --ntasks=1 '--container-image=nvcr.io#nvidia/pytorch:24.01-py3' "
            '--container-mounts="$PWD:$PWD" --container-workdir="$PWD" bash -c \'command -v "$1"\' '
            "slurmkit-check all_reduce_perf") in check
    assert "not found in container image nvcr.io#nvidia/pytorch:24.01-py3" in check
    assert "if ! command -v" not in check
    # without a container: on the node, as before
    plain = render.render(plan_for("nccl-tests", command=(), nodes=2))
    assert "if ! command -v all_reduce_perf >/dev/null 2>&1; then" in plain


def test_deepspeed_launcher_passes_no_local_rank_argument():
    text = render.render(plan_for("deepspeed", nodes=2))
    assert "--no_local_rank --no_python bash -c" in text


# -- the bind wrapper under a restricted affinity (real taskset, real bash) -----------------------

def _bind_env(script: str) -> dict:
    """SLURMKIT_GPU_CPUS and SLURMKIT_BIND exactly as the rendered script exports them."""
    code = "\n".join(line for line in script.splitlines()) + "\n"
    head = code.split("# NodeName=NodeAddr")[0].split("mkdir -p")[1]
    out = subprocess.run(["bash", "-c", head.split("\n", 1)[1] + '\nprintf "%s\\0%s" "$SLURMKIT_GPU_CPUS" "$SLURMKIT_BIND"'],
                         capture_output=True, text=True, check=True).stdout
    cpus, bind = out.split("\0")
    return {"SLURMKIT_GPU_CPUS": cpus, "SLURMKIT_BIND": bind}


def _run_rank(env, affinity, local_rank, step_gpus="0,1,2,3"):
    proc = subprocess.run(["taskset", "-c", affinity, "bash", "-c", env["SLURMKIT_BIND"], "slurmkit-bind",
                           sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                          env={**os.environ, **env, "LOCAL_RANK": str(local_rank), "RANK": str(local_rank),
                               "SLURM_STEP_GPUS": step_gpus}, capture_output=True, text=True, check=True)
    return eval(proc.stdout), proc.stderr


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs to restrict an affinity")
def test_bind_wrapper_intersects_with_the_tasks_cpus_and_never_widens():
    cpus = sorted(os.sched_getaffinity(0))[:2]
    a, b = cpus
    # GPU0 and GPU1 local to CPU a, GPU2 and GPU3 to CPU b (the sandbox profile's shape)
    env = _bind_env(render.render(plan_for("srun")))
    env["SLURMKIT_GPU_CPUS"] = f"{a} {a} {a},{b} {b}"
    # the task may use both: bound to the GPU's CPUs
    assert _run_rank(env, f"{a},{b}", 0)[0] == [a]
    assert _run_rank(env, f"{a},{b}", 3)[0] == [b]
    assert _run_rank(env, f"{a},{b}", 2)[0] == [a, b]
    # the task was given CPU b only (a cgroup / Slurm binding): GPU2's CPUs narrowed to b
    assert _run_rank(env, str(b), 2) == ([b], "")
    # GPU0's CPU a is not the task's: keep b, and say so in the rank's log (stderr)
    got, log = _run_rank(env, str(b), 0)
    assert got == [b]
    assert f"slurmkit-bind: rank 0: GPU 0 CPUs ({a}) are not among this task CPUs ({b}): keeping {b}" in log
    # Slurm gave this step GPUs 2 and 3: LOCAL_RANK 0 is GPU 2, bound by GPU 2's CPUs
    assert _run_rank(env, f"{a},{b}", 0, step_gpus="2,3")[0] == [a, b]


# -- profiles that say what they mean --------------------------------------------------------------

@pytest.mark.parametrize("name", ["torchrun", "srun", "deepspeed", "nccl-tests", "single-gpu", "array"])
def test_every_job_step_is_named_for_what_it_runs(name):
    import re

    kw = {"sets": {"sets": '[{"lr": 0.1}]'}} if name == "array" else {}
    nodes = 1 if templates.get(name).tasks == "single" else 2
    text = render.render(plan_for(name, nodes=nodes, **kw))
    # srun directly, or through slurmkit_srun ERR (srun with its messages kept)
    steps = [line for line in text.splitlines() if re.search(r"(^|\$\(|! )\s*(srun |slurmkit_srun \S+ )", line.strip())]
    assert steps
    for line in steps:
        assert re.search(r"(srun|slurmkit_srun \S+) --job-name=[a-z0-9-]+ ", line), line


def test_shipped_efa_profile_extras_agree_with_the_plugin_rule():
    p = plan_for("srun", profile="aws-p5", nodes=2)
    env = {v.name: (v.value, v.source) for v in p.env}
    # aws-ofi-nccl 1.11.0: its EFA cheatsheet (doc/efa-env-var.md) asks for none of FI_PROVIDER,
    # NCCL_PROTO (both <= 1.5.0 only) or FI_EFA_USE_DEVICE_RDMA (set by the plugin from 1.7.0)
    assert not {"FI_PROVIDER", "NCCL_PROTO", "FI_EFA_USE_DEVICE_RDMA"} & set(env)
    assert env["NCCL_NET"][0] == "AWS Libfabric"


@pytest.mark.parametrize("profile", ["aws-p5", "azure-ndh100v5", "dgx-a100", "dgx-h100", "rtx4090-8x", "sandbox",
                                     "workstation-2gpu"])
def test_shipped_profiles_set_no_nccl_debugging_variables(profile):
    names = {v.name for v in plan_for("single-gpu", profile=profile).env}
    assert "NCCL_NET_GDR_LEVEL" not in names and "NCCL_DEBUG" not in names


@pytest.mark.parametrize("template", ["single-gpu", "srun", "torchrun"])
@pytest.mark.parametrize("signal_s", [0, 120])
def test_the_job_exits_with_the_payloads_status_when_no_rank_recorded_one(tmp_path, template, signal_s):
    """The end of every script (slurmkit_finish) run for real with bash: a payload failing with 3
    and no launcher record ends the job with 3 (pipefail and set -e must not turn it into 2)."""
    text = render.render(plan_for(template, nodes=1, signal_s=signal_s))
    finish = text.split("slurmkit_finish() {", 1)[1].split("\n}\n", 1)[0]
    faults = text.split("slurmkit_node_faults() {", 1)[1].split("\n}\n", 1)[0]
    xids = text.split("slurmkit_hook_xids() {", 1)[1].split("\n}\n", 1)[0]
    drains = text.split("slurmkit_drain_evidence() {", 1)[1].split("\n}\n", 1)[0]
    # the node-fault scan asks Slurm about the job's node: here it is n1, healthy (no controller);
    # the hooks' Xid query finds no slurmkit HealthCheckProgram in `scontrol show config` (none)
    scontrol = ('scontrol() { case "$2" in hostnames) echo n1 ;; '
                'node) echo "NodeName=n1 State=ALLOCATED Reason=" ;; esac; }\n')
    script = (f"set -euo pipefail\nSLURMKIT_LOG_DIR={tmp_path}\nSLURMKIT_RESTART_COUNT=0\nSLURM_JOB_NODELIST=n1\n"
              f"{scontrol}slurmkit_drain_evidence() {{{drains}\n}}\nslurmkit_hook_xids() {{{xids}\n}}\n"
              f"slurmkit_node_faults() {{{faults}\n}}\n"
              f"slurmkit_finish() {{{finish}\n}}\nslurmkit_rc=0\n(exit 3) || slurmkit_rc=$?\nslurmkit_finish \"$slurmkit_rc\"\n")
    assert subprocess.run(["bash", "-c", script]).returncode == 3
    (tmp_path / "failed-n2-restart0").write_text("7\n")
    assert subprocess.run(["bash", "-c", script]).returncode == 7
    assert subprocess.run(["bash", "-c", script.replace("(exit 3)", "true")]).returncode == 0


# NCCL_NET selects a network plugin by name: only set when the profile names one (HPC-X's SHARP
# plugin registers as "IBext", which "IB" would exclude: NVIDIA/nccl#1357's log "Using network
# IBext"); efa means aws-ofi-nccl, whose every version answers to "AWS Libfabric"
@pytest.mark.parametrize("profile, net", [("aws-p5", "AWS Libfabric"), ("dgx-h100", None), ("rtx4090-8x", None),
                                          ("workstation-2gpu", None), ("dgx-h100+IBext", "IBext")])
def test_nccl_net_only_names_a_plugin_the_profile_names(profile, net):
    name, _, plugin = profile.partition("+")
    prof = load_profile(name, overrides=({"nccl": {"net_plugin": plugin, "collnet": True}},) if plugin else ())
    req = render.SubmitRequest(template="srun", command=("python3", "train.py"))
    plan = render.plan(req, site.site_facts(prof), templates.get("srun"))
    env = {v.name: v.value for v in plan.env}
    assert env.get("NCCL_NET") == net
    assert env.get("NCCL_COLLNET_ENABLE") == ("1" if plugin else None)
    assert (f"export NCCL_NET={api._render.shell_quote(net)}\n" in render.render(plan)) is bool(net)


def test_azure_ndv5_exports_what_azures_own_nccl_conf_has():
    # azhpc-images components/customizations/ndv5.sh writes these three to /etc/nccl.conf
    env = {v.name: v.value for v in plan_for("srun", profile="azure-ndh100v5", nodes=2).env}
    assert env["NCCL_IB_PCI_RELAXED_ORDERING"] == "1"
    assert env["NCCL_TOPO_FILE"] == "/opt/microsoft/ndv5/topo.xml"
    assert env["NCCL_IGNORE_CPU_AFFINITY"] == "1"


def test_dgx_h100_scalable_unit_is_one_leaf_as_the_reference_architecture_cables_it():
    from slurmkit.profile import load_profile

    prof = load_profile("dgx-h100")
    # the RA's one-SU SuperPOD: 31 DGX H100 (the 32nd node position carries the UFM)
    assert [(leaf.name, len(leaf.node_names)) for leaf in prof.fabric.leaves] == [("su1", 31)]
    # a job of the whole SU fits under one (rail-optimised) leaf: --switches=1
    assert options(plan_for("srun", profile="dgx-h100", nodes=31))["switches"].startswith("1@")


@pytest.mark.parametrize("time, warning, earliest", [("1:00", 30, 0), ("2:00", 60, 0), ("3:00", 120, 0),
                                                      ("3:30", 120, 60 * 4 - 120 - 60)])
def test_a_signal_that_may_come_before_the_handler_is_said(time, warning, earliest):
    """A test run: -t 1:00 --checkpoint-signal USR1 got its signal 4 s after the start
    (Slurm may signal up to 60 s before the time asked: sbatch(1) --signal), so the program's
    handler was not installed and the job requeued until the cap. --explain and submit say so
    whenever the earliest signal leaves less than 60 s of run, and which -t keeps the warning."""
    p = plan_for("srun", time=time, checkpoint_signal="USR1")
    assert options(p)["signal"] == f"B:USR2@{warning}"
    said = (f"--checkpoint-signal USR1: with the time limit Slurm applies ({timelimit.hms(timelimit.slurm_limit(timelimit.parse_seconds(time)))}) "
            f"and a {warning} s warning, SIGUSR1 may come {earliest} s after the job starts (Slurm may signal up to "
            "60 s early): a program that has not installed its handler by then ends and is requeued from scratch, "
            "up to max_restarts times; give -t 00:04:00 or more" + (", or --preempt-warning 60 or less"
                                                                     if time == "3:00" else ""))
    if earliest < 60:
        assert p.warnings == (said,) and f"# warning: {said}" in render.explain(p)
    else:
        assert p.warnings == ()


def test_only_advice_that_helps_is_given():
    """-t 1:00 --preempt-warning 1: no warning can leave the handler 60 s
    under a 60 s limit, so only a longer -t is advised, one that keeps the 1 s warning."""
    (said,) = plan_for("srun", time="1:00", checkpoint_signal="USR1", signal_s=1).warnings
    assert said.endswith("SIGUSR1 may come 0 s after the job starts (Slurm may signal up to 60 s early): a program "
                         "that has not installed its handler by then ends and is requeued from scratch, up to "
                         "max_restarts times; give -t 00:03:00 or more")
    # under 3:00 a 60 s warning leaves the handler its 60 s: advised, and it indeed warns nothing
    assert plan_for("srun", time="3:00", checkpoint_signal="USR1").warnings[0].endswith(
        "or --preempt-warning 60 or less")
    assert plan_for("srun", time="3:00", checkpoint_signal="USR1", signal_s=60).warnings == ()


def test_a_long_enough_limit_or_no_signal_warns_nothing():
    assert plan_for("srun", time="4:00", checkpoint_signal="USR1").warnings == ()
    assert plan_for("srun", time="1:00").warnings == ()        # no signal: Slurm's own time limit


def test_submit_warns_through_pythons_warnings_and_the_cli_on_stderr(monkeypatch, tmp_path):
    from click.testing import CliRunner

    from slurmkit.cli.submit import cli as submit_cli
    from slurmkit.errors import SlurmkitWarning
    from slurmkit.submit import api

    class Queued:
        def submit(self, script, test_only=False):
            return "41"

    with pytest.warns(SlurmkitWarning, match="SIGUSR1 may come 0 s after the job starts"):
        job = api.submit("single-gpu", ["python3", "t.py"], time="1:00", checkpoint_signal="USR1", backend=Queued(),
                         output=str(tmp_path / "o-%j.out"))
    assert job.id == "41"
    monkeypatch.setattr(api, "get_backend", lambda env=None: Queued())
    res = CliRunner().invoke(submit_cli, ["single-gpu", "-t", "1:00", "--checkpoint-signal", "SIGUSR1", "-o",
                                          str(tmp_path / "o-%j.out"), "python3", "t.py"])
    assert res.exit_code == 0, res.output
    assert res.stdout == "41\n"
    assert res.stderr.startswith("slurmkit: warning: --checkpoint-signal USR1: with the time limit Slurm applies "
                                 "(00:01:00) and a 30 s warning, SIGUSR1 may come 0 s after the job starts")
    # --dry-run says it too (it used not to), the script alone on stdout
    dry = CliRunner().invoke(submit_cli, ["single-gpu", "-t", "1:00", "--checkpoint-signal", "USR1", "--dry-run",
                                          "python3", "t.py"])
    assert dry.exit_code == 0 and dry.stdout.startswith("#!/bin/bash"), dry.output
    assert dry.stderr.startswith("slurmkit: warning: --checkpoint-signal USR1: with the time limit Slurm applies "
                                 "(00:01:00) and a 30 s warning, SIGUSR1 may come 0 s after the job starts")
    with pytest.warns(SlurmkitWarning, match="SIGUSR1 may come 0 s"):
        api.render_script("single-gpu", ["python3", "t.py"], time="1:00", checkpoint_signal="USR1")


def test_node_fault_reasons_come_from_the_profile_default_slurmkits_own():
    from slurmkit.profile import ProfileError, load_profile

    assert load_profile("sandbox").submit.node_fault_reasons == ("slurmkit:",)
    text = render.render(plan_for("srun", nodes=2))
    assert "  for p in slurmkit: ; do\n" in text
    nhc = load_profile("sandbox", overrides=({"submit": {"node_fault_reasons": ["slurmkit:", "NHC:"]}},))
    assert nhc.submit.node_fault_reasons == ("slurmkit:", "NHC:")
    p = render.plan(render.SubmitRequest(template="srun", command=("x",), nodes=2), site.site_facts(nhc),
                    templates.get("srun"))
    assert "  for p in slurmkit: NHC: ; do\n" in render.render(p)
    with pytest.raises(ProfileError, match="submit.node_fault_reasons"):
        load_profile("sandbox", overrides=({"submit": {"node_fault_reasons": ["slurmkit:", " "]}},))
    with pytest.raises(ProfileError, match="submit.node_fault_reasons"):
        load_profile("sandbox", overrides=({"submit": {"node_fault_reasons": "NHC: x\nrm"}},))
