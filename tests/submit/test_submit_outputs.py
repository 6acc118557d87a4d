"""-o / -e directories: created at submit (Slurm creates the file, never its directory), or
refused with the path named when they hold a Slurm pattern."""

import pytest

from slurmkit.errors import UsageError
from slurmkit.submit.outputs import make_output_dirs, output_dirs


def test_output_directories_are_taken_from_the_job_directory():
    assert output_dirs({"--output": "nodir/x-%j.out", "--error": "/abs/e/%x.err"}, "/work/job") == \
        ["/work/job/nodir", "/abs/e"]
    assert output_dirs({"--output": "x-%j.out", "--error": None}, "/w") == []
    assert output_dirs({"--output": "../up/o", "--error": "../up/e"}, "/w/sub") == ["/w/up"]


def test_a_pattern_in_the_directory_is_refused_naming_the_path():
    with pytest.raises(UsageError, match=r"--output logs/%j/out: the directory part holds a Slurm pattern"):
        output_dirs({"--output": "logs/%j/out"}, "/w")


def test_missing_directories_are_created_and_an_impossible_one_is_named(tmp_path):
    made = make_output_dirs({"--output": "a/b/o-%j.out", "--error": "a/b/e-%j.err"}, str(tmp_path))
    assert made == [str(tmp_path / "a" / "b")] and (tmp_path / "a" / "b").is_dir()
    assert make_output_dirs({"--output": "a/b/o"}, str(tmp_path)) == []
    (tmp_path / "file").write_text("")
    with pytest.raises(UsageError, match=f"--output file/sub/o: {tmp_path}/file is a file, not a directory"):
        make_output_dirs({"--output": "file/sub/o"}, str(tmp_path))


def test_dry_run_explain_and_test_only_refuse_a_pattern_directory_as_submit_does(tmp_path):
    """`-o logs/%j/x.out` went through --dry-run, --explain and --test-only (Slurm's estimate)
    and was refused only by the real submit; the CLI now says so at once, exit 2."""
    import subprocess
    import sys

    for mode in ("--dry-run", "--explain", "--test-only"):
        out = subprocess.run([sys.executable, "-m", "slurmkit", "submit", "single-gpu", "-e", "err/%x-%j/e.err", mode,
                              "--", "true"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
        assert out.returncode == 2, (mode, out.stdout, out.stderr)
        assert out.stderr == ("slurmkit: error: --error err/%x-%j/e.err: the directory part holds a Slurm pattern "
                              "(%...): Slurm does not create directories, so put the pattern in the file name "
                              "(logs/%x-%j.out)\n")
    assert not (tmp_path / "err").exists()


def test_an_output_directory_that_is_a_file_is_refused_naming_it(tmp_path):
    (tmp_path / "afile").write_text("")
    with pytest.raises(UsageError, match=rf"--output afile/x-%j.out: {tmp_path}/afile is a file, not a directory"):
        make_output_dirs({"--output": "afile/x-%j.out", "--error": None}, str(tmp_path))
    with pytest.raises(UsageError, match=rf"--error {tmp_path}/afile/deeper/e.err: {tmp_path}/afile is a file"):
        make_output_dirs({"--output": None, "--error": f"{tmp_path}/afile/deeper/e.err"}, str(tmp_path))
