"""slurmkit.remote.logs without a cluster: following a job's output here when Slurm's own
squeue cannot answer (a slurm.conf it refuses: the real squeue exits 1 at once, "Unable to
process configuration file"; with no slurm.conf at all it would look for a configless
controller instead)."""

import io
import subprocess

import pytest

from slurmkit.remote.logs import _follow_local, _in_queue, follow_script
from slurmkit.slurm.commands import FORMAT_VARS, SlurmError, slurm_env
from slurmkit.submit.backend import CliBackend


def test_local_follow_stops_with_slurms_error_and_keeps_the_output(tmp_path):
    """A squeue that cannot answer is an error of the follow (a job-state query through the
    backend's public ``run``), not the job's end. (Was: any failure ended the follow quietly,
    exit 0; before that, an AttributeError.)"""
    conf = tmp_path / "slurm.conf"
    conf.write_text("NoSuchKey=1\n")      # squeue: "Parsing error at unrecognized key", fatal
    backend = CliBackend(env={"SLURM_CONF": str(conf)}, timeout=30)
    assert backend.run(["squeue", "-h"], check=False).returncode != 0
    with pytest.raises(SlurmError, match=r"squeue failed \(exit 1\).*configuration file"):
        _in_queue(backend, "12345")
    log = tmp_path / "slurm-12345.out"
    log.write_bytes(b"rank 0 ready\n")
    with pytest.raises(SlurmError, match="squeue failed"):
        _follow_local(backend, str(log), "12345", io.BytesIO())


def test_follow_script_unsets_every_format_variable_and_ends_with_squeue(tmp_path):
    """The login-node follow script (run here with sh, as ssh would run it there): squeue with
    each of Slurm's format variables unset (the one list, slurm.commands.FORMAT_VARS), and a
    squeue that fails ends the follow after the file was printed (exit 0)."""
    script = follow_script(str(tmp_path / "job 7.out"), "7")
    assert all(f"-u {v} " in script for v in FORMAT_VARS)
    (tmp_path / "job 7.out").write_text("rank 0 ready\n")
    conf = tmp_path / "slurm.conf"
    conf.write_text("NoSuchKey=1\n")
    env = {**slurm_env(slurm_conf=str(conf)), "SQUEUE_FORMAT": "%i %N", "SQUEUE_FORMAT2": "jobid:10"}
    proc = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout) == (0, "rank 0 ready\n")
