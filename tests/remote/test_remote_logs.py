"""slurmkit.remote.logs without a cluster: following a job's output here when Slurm's own
squeue cannot answer (a slurm.conf it refuses: the real squeue exits 1 at once, "Unable to
process configuration file"; with no slurm.conf at all it would look for a configless
controller instead)."""

import io

from slurmkit.remote.logs import _follow_local, _in_queue
from slurmkit.submit.backend import CliBackend


def test_local_follow_ends_when_squeue_fails_and_keeps_the_output(tmp_path):
    """A failed squeue counts as "not in the queue": the follow copies the file once and ends
    (it went through the backend's public ``run``; an AttributeError here was a crash of
    ``slurmkit logs -f``)."""
    conf = tmp_path / "slurm.conf"
    conf.write_text("NoSuchKey=1\n")      # squeue: "Parsing error at unrecognized key", fatal
    backend = CliBackend(env={"SLURM_CONF": str(conf)}, timeout=30)
    assert backend.run(["squeue", "-h"], check=False).returncode != 0
    assert _in_queue(backend, "12345") is False
    log = tmp_path / "slurm-12345.out"
    log.write_bytes(b"rank 0 ready\nstep 1 loss 2.5\n\xff not UTF-8\n")
    out = io.BytesIO()
    _follow_local(backend, str(log), "12345", out)
    assert out.getvalue() == log.read_bytes()
