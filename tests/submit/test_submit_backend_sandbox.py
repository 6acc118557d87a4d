"""The submit backend's job-state queries against the real Slurm sandbox: a job slurmctld knows
is read from squeue, and a squeue that fails is an error, never "no jobs" (sacct, which asks
slurmdbd rather than slurmctld, would otherwise answer for it and hide the failure)."""

import re
import shutil
import socket

import pytest

from slurmkit.slurm.commands import SlurmError
from slurmkit.submit.backend import CliBackend

from sandbox_jobs import submit

from slurmkit.waiting import wait_until

pytestmark = [pytest.mark.slurm, pytest.mark.versions, pytest.mark.timeout(300)]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_squeue_answers_for_a_queued_job_and_its_failure_reaches_the_caller(sandbox, tmp_path):
    backend = CliBackend(env=sandbox.env())
    job = submit(sandbox, backend, tmp_path, "single-gpu", ["sleep", "300"], signal_s=0, time="10:00")
    try:
        info = backend.states([job.id])[job.id]
        # squeue's own answer (a result replaced by {} would come from sacct instead)
        assert (info.source, info.gpus) == ("squeue", 1) and info.state in ("PENDING", "RUNNING")

        # the same cluster through a copy of its slurm.conf whose SlurmctldPort nobody listens
        # on: squeue cannot reach slurmctld, while sacct still reaches slurmdbd
        etc = tmp_path / "etc"
        shutil.copytree(sandbox.slurm_conf.parent, etc)
        conf = etc / "slurm.conf"
        text, n = re.subn(r"(?m)^SlurmctldPort=\d+$", f"SlurmctldPort={_closed_port()}", conf.read_text())
        assert n == 1
        conf.write_text(text)
        blind = CliBackend(env={"SLURM_CONF": str(conf)})
        wait_until(lambda: blind.run(["sacct", "-X", "-n", "-P", "-j", job.id, "-o", "JobID"]).stdout.split() == [job.id],
                   60, what=f"sacct to list job {job.id}")
        with pytest.raises(SlurmError, match=r"^squeue failed \(exit 1\): .*Unable to contact slurm controller") as err:
            blind.states([job.id])
        assert err.value.argv[0] == "squeue" and err.value.returncode == 1
    finally:
        job.cancel()


def test_ids_slurmctld_has_forgotten_are_asked_of_sacct(sandbox):
    # squeue -j with ids slurmctld does not know prints "Invalid job id specified" (exit 1): the
    # one squeue failure that means "ask sacct", which does not know 999999 either
    backend = CliBackend(env=sandbox.env())
    res = backend.run(["squeue", "-h", "-t", "all", "-j", "999999", "-o", "%i"], check=False)
    assert res.returncode == 1 and "Invalid job id specified" in res.stderr
    assert backend.states(["999999"]) == {}
