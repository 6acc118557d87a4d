"""``slurmkit status``'s restarts, excluded nodes and last pending reason
(slurmkit.submit.history) from Slurm's answers: sacct ``-D`` rows (one per run), scontrol's
``Restarts`` / ``ExcNodeList``, and the launchers' ``badnode-*`` files in the recorded log folder.
The command outputs are the shapes Slurm 24.11 prints on the sandbox (``sacct -D -X -n -P -o
JobID,State,Reason`` of a job requeued once, ``scontrol show job -o`` of a running one)."""

from __future__ import annotations

import subprocess

from slurmkit.submit import jobrecord
from slurmkit.submit.history import History, histories

SACCT = "1001|REQUEUED|Resources\n1001|RUNNING|None\n1002_0|COMPLETED|Priority\n1002_1|REQUEUED|None\n" \
        "1002_1|COMPLETED|None\n"
SCONTROL = ("JobId=1001 JobName=single-gpu UserId=root(0) Priority=1 Reason=None Restarts=1 BatchFlag=1 "
            "ReqNodeList=(null) ExcNodeList=n3,n[5-6] NodeList=n1 StdOut=/w/job-1001.out")


class Fake:
    env: dict = {}

    def __init__(self, sacct_fails=False):
        self.calls, self.sacct_fails = [], sacct_fails

    def run(self, argv, check=True, input=None):
        self.calls.append(argv)
        if argv[0] == "sacct":
            if self.sacct_fails and argv[-1].endswith("Reason"):
                return subprocess.CompletedProcess(argv, 1, "", "sacct: error: Invalid field requested: \"Reason\"")
            if argv[-1] == "JobID,State":
                return subprocess.CompletedProcess(argv, 0, "".join(ln.rsplit("|", 1)[0] + "\n"
                                                                    for ln in SACCT.splitlines()), "")
            return subprocess.CompletedProcess(argv, 0, SACCT, "")
        if argv[-1] == "1001":
            return subprocess.CompletedProcess(argv, 0, SCONTROL + "\n", "")
        return subprocess.CompletedProcess(argv, 1, "", "slurm_load_jobs error: Invalid job id specified")


def test_restarts_excluded_and_last_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURMKIT_JOBS_DIR", str(tmp_path / "jobs"))
    logs = tmp_path / "slurmkit-logs" / "1001"
    logs.mkdir(parents=True)
    (logs / "badnode-n2-restart0").write_text("could not start torchrun\n")
    (logs / "rank0.out").write_text("")
    jobrecord.write(jobrecord.JobRecord("1001", str(tmp_path), log_dir=str(logs)))
    backend = Fake()
    got = histories(backend, ["1001", "1002", "1002_1", "7"])
    assert got == {"1001": History(1, ("n2", "n3", "n5", "n6"), "Resources"),
                   "1002": History(1, (), "Priority"),
                   "1002_1": History(1, (), ""),
                   "7": History(None, (), "")}
    assert sum(c[0] == "sacct" for c in backend.calls) == 1


def test_an_older_sacct_without_reason():
    got = histories(Fake(sacct_fails=True), ["1002_0"])
    assert got == {"1002_0": History(0, (), "")}
