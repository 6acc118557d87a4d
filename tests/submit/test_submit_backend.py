"""Job-state parsing for the CLI backend, on lines captured from the Slurm 22.05 sandbox."""

import pytest

from slurmkit.errors import UsageError
from slurmkit.slurm.commands import SlurmError
from slurmkit.slurm import tres
from slurmkit.submit.backend import CliBackend, get_backend, parse_sacct, parse_squeue

# squeue -h -t all -j 3,4 -o '%i|%T|%N|%D|%b'
SQUEUE = "3|COMPLETED|n[1-2]|2|gres:gpu:h100:4\n2|PENDING||1|N/A\n"
# sacct -X -n -P -j 2,3 -o JobID,State,NodeList,AllocTRES,ReqTRES
SACCT = ("2|CANCELLED by 0|None assigned||billing=1,cpu=1,mem=256M,node=1\n"
         "3|COMPLETED|n[1-2]|billing=8,cpu=8,gres/gpu:h100=8,gres/gpu=8,mem=2G,node=2|"
         "billing=2,cpu=2,gres/gpu:h100=8,gres/gpu=8,mem=512M,node=2\n")


def test_squeue_lines():
    jobs = parse_squeue(SQUEUE)
    assert jobs["3"].as_dict() == {"job_id": "3", "state": "COMPLETED", "nodes": ["n1", "n2"], "gpus": 8}
    assert jobs["2"].nodes == () and jobs["2"].gpus == 0 and jobs["2"].state == "PENDING"


def test_sacct_lines():
    jobs = parse_sacct(SACCT)
    assert jobs["3"].nodes == ("n1", "n2") and jobs["3"].gpus == 8
    assert jobs["2"].state == "CANCELLED" and jobs["2"].nodes == ()


@pytest.mark.parametrize("text,gpus", [("gres/gpu:a100=2,gres/gpu=2", 2), ("gres/gpu:a100=3", 3),
                                       ("cpu=4,mem=1G", None), ("N/A", None)])
def test_sacct_gpus_are_the_tres_count(text, gpus):
    """sacct AllocTRES / ReqTRES: the one TRES reader (slurm.tres); no gres/gpu: None, read as 0."""
    assert tres.gpu_count(text) == gpus
    assert parse_sacct(f"5|RUNNING|n1|{text}|\n")["5"].gpus == (gpus or 0)


@pytest.mark.parametrize("text,gpus", [("gres:gpu:h100:4", 4), ("gres:gpu:2", 2), ("gres/gpu:2", 2),
                                       ("gres/gpu:h100:2", 2), ("N/A", 0)])
def test_squeue_gpus_are_the_gres_count(text, gpus):
    """squeue %b (the job's tres_per_node: gres:gpu:2 on 22.05, gres/gpu:2 on 24.11 and later,
    tests/fixtures/slurm/*/squeue.txt): the one reader of a job's request (slurm.tres.parse_request)."""
    assert (tres.gpu_count(tres.parse_request(text)) or 0) == gpus
    assert parse_squeue(f"5|RUNNING|n1|2|{text}\n")["5"].gpus == 2 * gpus


def test_malformed_lines_raise_slurm_error():
    with pytest.raises(SlurmError, match="squeue"):
        parse_squeue("3|RUNNING\n")
    with pytest.raises(SlurmError, match="sacct"):
        parse_sacct("3|RUNNING|n1\n")


def test_the_local_backend_is_the_command_line_one_and_remote_a_provider(tmp_path):
    from slurmkit.remote.backend import RemoteBackend
    from slurmkit.remote.ssh import Remote
    from slurmkit.submit.backend import provider

    assert isinstance(get_backend(), CliBackend)
    assert get_backend({"SLURM_CONF": "/x"}).env == {"SLURM_CONF": "/x"}
    # the core finds the ssh backend by name (setup.cfg's slurmkit.backends entry point);
    # nothing is connected yet
    config = tmp_path / "ssh_config"
    config.write_text("Host login\n  HostName 127.0.0.1\n")
    opened = provider("remote").open_backend("login", str(config), 7)
    assert isinstance(opened, RemoteBackend) and isinstance(opened.remote, Remote)
    assert (opened.remote.host, opened.remote.ssh_config, opened.remote.timeout) == ("login", str(config), 7.0)
    with pytest.raises(UsageError, match="no 'pyslurm' backend is installed"):
        provider("pyslurm")


def test_slurmkit_submit_stays_callable_after_the_package_is_imported():
    import slurmkit
    import slurmkit.submit.render  # binds the package as slurmkit.submit

    assert callable(slurmkit.submit)
    assert slurmkit.Job.__name__ == "Job"


def test_array_tasks_aggregate_under_the_array_id():
    from slurmkit.submit.backend import aggregate_arrays

    rows = parse_squeue("7_0|COMPLETED|n1|1|gres:gpu:h100:1\n7_1|RUNNING|n2|1|gres:gpu:h100:1\n"
                        "7_[2-3]|PENDING||1|gres:gpu:h100:1\n")
    agg = aggregate_arrays(["7"], rows)["7"]
    assert agg.state == "RUNNING" and agg.nodes == ("n1", "n2") and agg.gpus == 3
    done = parse_sacct("8_0|COMPLETED|n1|gres/gpu=1|gres/gpu=1\n8_1|FAILED|n2|gres/gpu=1|gres/gpu=1\n")
    assert aggregate_arrays(["8"], done)["8"].state == "FAILED"
    assert aggregate_arrays(["9"], done) == {}


def test_pending_reason_and_expected_start_come_from_squeue():
    # squeue -h -t all -o '%i|%T|%N|%D|%b|%r|%S': an edit of SQUEUE above (real, Slurm 22.05
    # sandbox) with the reason and start columns appended, labelled so; the sandbox test
    # test_waiting_shows_the_pending_reason_as_it_changes parses the real squeue's (Dependency)
    text = ("12|PENDING||1|gres:gpu:h100:1|Dependency|N/A\n"
            "13|PENDING||2|gres:gpu:h100:4|Resources|2026-12-02T04:10:00\n"
            "14|RUNNING|n1|1|gres:gpu:h100:1|None|2026-12-02T03:10:00\n")
    jobs = parse_squeue(text)
    assert (jobs["12"].reason, jobs["12"].start) == ("Dependency", "")
    assert (jobs["13"].reason, jobs["13"].start) == ("Resources", "2026-12-02T04:10:00")
    assert (jobs["14"].reason, jobs["14"].start) == ("", "")     # a running job has no pending reason


def test_a_wait_for_a_job_that_can_never_start_ends_with_a_clear_error():
    """squeue of a job whose afterok dependency failed (Slurm 22.05 sandbox, recorded by
    `squeue -h -t all -j 19 -o '%i|%T|%N|%D|%b|%r|%S'`): Slurm keeps it pending for ever, so
    submit --wait / logs --follow say so and stop (exit 1) instead of waiting without end."""
    import io

    from slurmkit.cli.watch import NeverStarts, StateLine

    info = parse_squeue("19|PENDING||1|gres:gpu:h100:1|DependencyNeverSatisfied|N/A\n")["19"]
    buf = io.StringIO()
    with pytest.raises(NeverStarts) as err:
        StateLine("19", buf)(info)
    assert buf.getvalue() == "job 19: PENDING (DependencyNeverSatisfied)\n"
    assert str(err.value) == ("job 19 will never start: PENDING (DependencyNeverSatisfied): a job it depends on "
                              "ended without meeting the dependency, and Slurm keeps it pending; cancel it with "
                              "'scancel 19'")
    StateLine("12", buf)(parse_squeue("12|PENDING||1|gres:gpu:h100:1|Dependency|N/A\n")["12"])   # still waits


def test_wait_reports_each_change_once_to_its_callback():
    from slurmkit.cli.watch import StateLine, describe
    from slurmkit.submit.backend import JobInfo
    import io

    a = JobInfo("5", "PENDING", (), 1, "squeue", "Resources", "2026-12-02T04:10:00")
    assert describe("5", a) == "job 5: PENDING (Resources), expected start 2026-12-02T04:10:00"
    assert describe("5", JobInfo("5", "RUNNING", ("n1",), 1, "squeue")) == "job 5: RUNNING on n1"
    buf = io.StringIO()
    line = StateLine("5", buf)
    line(a)
    line(None)
    assert buf.getvalue() == "job 5: PENDING (Resources), expected start 2026-12-02T04:10:00\njob 5: not known to Slurm yet\n"


def test_logs_follow_prints_a_short_jobs_output_that_appeared_as_it_left_the_queue(tmp_path):
    """`logs -f` on a pending job: its -o file appears only when it starts; a short job can end
    before `tail -F` (which looks again for a missing file once a second) has printed it. The
    follow prints the whole file once all the same. The job-state query answers as for a job
    that has left the queue (neither squeue nor sacct knows it); the file is written at that moment."""
    import io

    from slurmkit.remote.logs import _follow_local

    path = tmp_path / "job-21.out"

    class LeftTheQueue:
        def states(self, ids):
            assert list(ids) == ["21"]
            if not path.exists():
                path.write_bytes(b"held job ran\nsecond line\n")
            return {}

    buf = io.BytesIO()
    _follow_local(LeftTheQueue(), str(path), "21", buf)
    assert buf.getvalue() == b"held job ran\nsecond line\n"


@pytest.mark.parametrize("code,words", [
    ("0:0", "exit 0"), ("1:0", "exit 1"),
    ("137:0", "exit 137: killed by signal 9, SIGKILL"),      # a torchrun rank killed with SIGKILL (its failed- record)
    ("143:0", "exit 143: killed by signal 15, SIGTERM"),
    ("0:9", "killed by signal 9, SIGKILL"), ("0:15", "killed by signal 15, SIGTERM"),
    ("9:0", "exit 9"), (None, "-"), ("", "-"),
])
def test_slurm_exit_codes_are_said_in_words(code, words):
    from slurmkit.submit.backend import describe_exit_code

    assert describe_exit_code(code) == words
