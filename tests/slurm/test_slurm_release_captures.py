"""Each Slurm release's own output (tests/fixtures/slurm/<release>/, SOURCE.md there), read by the one
reader of each format: the same jobs, nodes and GPUs come out of 22.05.8, 24.11.5 and 26.05.5 although
their request strings differ (``gres:gpu:2`` against ``gres/gpu:2`` and ``gres/gpu=1``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from slurmkit.accounting.frame import jobs_frame
from slurmkit.accounting.read import read_sacct_file
from slurmkit.hooks.gres import parse_job_gpus
from slurmkit.report.capacity import gpus_per_node_scontrol
from slurmkit.slurm import tres
from slurmkit.submit.backend import parse_squeue

CAPTURES = Path(__file__).resolve().parent.parent / "fixtures" / "slurm"
RELEASES = ("22.05", "24.11", "26.05")
pytestmark = pytest.mark.versions

#: What each request (the probe's job comment) asks for, as TRES entries: the same on every release.
ASKED = {
    "--gres=gpu:2": {"tres_per_node": {"gres/gpu": "2"}, "gres": {"gres/gpu": "2"}},
    "--gres=gpu:h100:2": {"tres_per_node": {"gres/gpu:h100": "2"}, "gres": {"gres/gpu:h100": "2"}},
    "--gpus=2": {"tres_per_job": {"gres/gpu": "2"}},
    "--gpus-per-node=2": {"tres_per_node": {"gres/gpu": "2"}, "gres": {"gres/gpu": "2"}},
    "--gpus-per-task=1 -n2": {"tres_per_task": {"gres/gpu": "1"}},
    "--cpus-per-gpu=4 --gpus=1": {"tres_per_job": {"gres/gpu": "1"}, "cpus_per_tres": {"gres/gpu": "4"}},
}


def _read(release: str, name: str) -> str:
    return (CAPTURES / release / name).read_text()


@pytest.mark.parametrize("release", RELEASES)
def test_capture_is_of_its_release(release):
    assert re.fullmatch(rf"slurm(-wlm)? {re.escape(release)}\.\d+\n", _read(release, "version.txt"))


@pytest.mark.parametrize("release", RELEASES)
def test_job_submit_fields_of_every_request_form(release):
    """What slurmctld hands job_submit.lua (the probe's lines), read by tres.parse_request."""
    seen: dict[str, dict] = {}
    for line in _read(release, "job_desc.txt").splitlines():
        request, _, field = line.partition("|")
        key, _, value = field.partition("=")
        if value != "nil":
            seen.setdefault(request, {})[key] = tres.parse_request(value)
    assert seen == ASKED


def test_the_request_forms_differ_between_releases():
    """The forms themselves (the issue's table): 22.05 writes gres:, 24.11 and 26.05 gres/ (and = per task)."""
    def form(release, request, key):
        head = f"{request}|{key}="
        return next(l[len(head):] for l in _read(release, "job_desc.txt").splitlines() if l.startswith(head))
    assert form("22.05", "--gpus-per-task=1 -n2", "tres_per_task") == "gres:gpu:1"
    assert form("24.11", "--gpus-per-task=1 -n2", "tres_per_task") == "gres/gpu=1"
    assert form("26.05", "--gres=gpu:h100:2", "tres_per_node") == "gres/gpu:h100:2"
    assert form("22.05", "--cpus-per-gpu=4 --gpus=1", "cpus_per_tres") == "gres:gpu:4"


@pytest.mark.parametrize("release", RELEASES)
def test_squeue_gpus_per_job(release):
    """squeue %b (submit's status): the per-node request; a --gpus (per job) or --gpus-per-task job shows
    N/A there on every release."""
    jobs = parse_squeue(_read(release, "squeue.txt"))
    assert {j: info.gpus for j, info in jobs.items()} == {"2": 2, "3": 2, "4": 0, "5": 2, "6": 0, "7": 0}


@pytest.mark.parametrize("release", RELEASES)
def test_scontrol_show_job_tres_per(release):
    per = {}
    for line in _read(release, "scontrol_show_job.txt").splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        per[fields["JobId"]] = {k: tres.parse_request(v) for k, v in fields.items()
                                if k in ("TresPerNode", "TresPerJob", "TresPerTask")}
    assert per["3"] == {"TresPerNode": {"gres/gpu:h100": "2"}}
    assert per["6"] == {"TresPerTask": {"gres/gpu": "1"}}
    assert tres.gpu_count(per["4"]["TresPerJob"]) == 2


@pytest.mark.parametrize("release", RELEASES)
def test_sacct_jobs(release):
    t, dq = read_sacct_file(CAPTURES / release / "sacct.txt")
    rows = jobs_frame(t, dq, release).allocs.set_index("job_id")
    assert rows.loc[["8", "9", "10"], "state"].tolist() == ["COMPLETED", "COMPLETED", "FAILED"]
    assert rows.loc[["8", "9", "10"], "gpus"].tolist() == [4, 2, 1]      # -N2 gpu:2, 2 x 1 per task, --gpus=1
    assert set(rows.loc[["8", "9", "10"], "gpu_type"]) == {"h100"}
    assert (rows.loc[[str(j) for j in range(2, 8)], "state"] == "CANCELLED").all()


@pytest.mark.parametrize("release", RELEASES)
def test_nodes_and_prolog_environment(release):
    assert gpus_per_node_scontrol(_read(release, "scontrol_show_node.txt")) == {"n1": 4, "n2": 4}
    sinfo = [l.split("|") for l in _read(release, "sinfo.txt").splitlines()[1:]]
    assert [(n, g) for n, _, g, _ in sinfo] == [("n1", "gpu:h100:4(S:0-1)"), ("n2", "gpu:h100:4(S:0-1)")]
    envs = [dict(l.split("=", 1) for l in block.strip().splitlines()[1:])
            for block in _read(release, "prolog_env.txt").split("# prolog-env-")[1:]]
    assert len(envs) == 2
    for env in envs:
        assert parse_job_gpus(env["SLURM_JOB_GPUS"]) == [0, 1] and env["CUDA_VISIBLE_DEVICES"] == "0,1"
        assert env["SLURM_SCRIPT_CONTEXT"] == "prolog_slurmd" and env["SLURM_JOB_NUM_NODES"] == "2"
    assert _read(release, "slurmd_C.txt").startswith("NodeName=")
