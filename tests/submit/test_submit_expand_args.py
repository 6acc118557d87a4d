"""Job-time values in the program's arguments, opt-in (``--expand-args``): the bind wrapper
expands ``$NAME`` / ``${NAME}`` per rank from the rank's environment and nothing else (spaces,
quotes, globs, ``$(...)`` stay text); without it an argument with ``$NAME`` reaches the program
as written and submit says so. The wrapper runs here under bash as it runs on a node."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from slurmkit.submit import render

from test_submit_options import cli, plan_for


def _wrapper(**kw) -> str:
    script = render.render(plan_for("torchrun", **kw))
    start = script.index("export SLURMKIT_BIND=")
    end = script.index('"$@"\'\n', script.index("exec taskset -c", start)) + 5
    return script[start:end]


def test_arguments_expand_per_rank_as_text_only():
    args = ["run-$SLURM_JOB_ID", "--rank=${RANK}x", "$CFG", "cost $5 $", "$(id)", "*", "$UNSET.", "$$", "'q\""]
    env = {"PATH": os.environ["PATH"], "SLURMKIT_EXPAND_ARGS": "1", "SLURMKIT_GPU_CPUS": "", "LOCAL_RANK": "0",
           "RANK": "3", "SLURM_JOB_ID": "77", "CFG": "a b 'c\" *"}
    probe = [sys.executable, "-c", "import json, sys; print(json.dumps(sys.argv[1:]))"]
    script = _wrapper(expand_args=True) + '\nbash -c "$SLURMKIT_BIND" slurmkit-bind "$@"\n'
    out = subprocess.run(["bash", "-c", script, "x", *probe, *args], env=env, capture_output=True, text=True,
                         timeout=30, cwd="/")
    assert json.loads(out.stdout) == ["run-77", "--rank=3x", "a b 'c\" *", "cost $5 $", "$(id)", "*", ".", "$$",
                                      "'q\""], out.stderr
    env.pop("SLURMKIT_EXPAND_ARGS")
    out = subprocess.run(["bash", "-c", script, "x", *probe, *args], env=env, capture_output=True, text=True,
                         timeout=30, cwd="/")
    assert json.loads(out.stdout) == args


def test_opt_in_shows_in_the_script_and_explain_and_its_absence_is_said():
    p = plan_for("torchrun", command=(sys.executable, "train.py", "--run_name=run-$SLURM_JOB_ID"), expand_args=True)
    assert [(v.name, v.value) for v in p.env if v.name == "SLURMKIT_EXPAND_ARGS"] == [("SLURMKIT_EXPAND_ARGS", "1")]
    assert p.warnings == ()
    assert p.context["command_python"] == sys.executable          # torchrun's agent: the program's Python
    r = cli("submit", "torchrun", "--dry-run", "--", sys.executable, "train.py", "--run_name=run-$SLURM_JOB_ID")
    assert r.returncode == 0 and r.stderr == (
        "slurmkit: warning: the argument '--run_name=run-$SLURM_JOB_ID' reaches the program as written, $ and all: "
        "give --expand-args (API expand_args=True) to expand $NAME / ${NAME} on the node, per rank\n")


def test_a_shells_own_script_is_not_flagged():
    assert plan_for("single-gpu", command=("bash", "-c", "echo $SLURM_JOB_ID")).warnings == ()
    assert plan_for("single-gpu", command=("/bin/sh", "-c", "echo $X")).warnings == ()
