"""Per-job settings: --env / --env-file (expanded on the node), --srun-opt, --setup / --teardown,
through the CLI, the API and --explain (escaping of --env values: test_submit_escape.py)."""

import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from slurmkit.cli.submit import cli as submit_cli
from slurmkit.errors import UsageError
from slurmkit.submit import api, jobenv, templates


ENVFILES = Path(__file__).parent / "envfiles"


def test_env_file_lines_are_read_with_their_line_numbers():
    text = "# EFA\n\nexport FI_PROVIDER=efa\nLD_LIBRARY_PATH=/opt/amazon/efa/lib:$LD_LIBRARY_PATH\nEMPTY=\nQ='x'\n"
    assert [(a.name, a.value, a.line) for a in jobenv.parse_env_file(text, "job.env")] == [
        ("FI_PROVIDER", "efa", 3), ("LD_LIBRARY_PATH", "/opt/amazon/efa/lib:${LD_LIBRARY_PATH}", 4),
        ("EMPTY", "", 5), ("Q", "x", 6)]
    assert [(a.name, a.value, a.line) for a in jobenv.parse_env_file(
        "\nexport FI_EFA_USE_HUGE_PAGE=0 NCCL_DEBUG=INFO  # EFA\n", "job.env")] == [
        ("FI_EFA_USE_HUGE_PAGE", "0", 2), ("NCCL_DEBUG", "INFO", 2)]
    with pytest.raises(UsageError, match=r"job.env:2 '1X=2': expected NAME=VALUE"):
        jobenv.parse_env_file("A=1\n1X=2\n", "job.env")
    with pytest.raises(UsageError, match=r"--env 'NOEQUALS'"):
        jobenv.parse_assignment("NOEQUALS")


def exports_of(text: str) -> str:
    """The script's export lines (the site's and the job's), as a shell snippet."""
    lines = text.splitlines()
    return "\n".join(lines[lines.index("export CUDA_DEVICE_ORDER=PCI_BUS_ID"):
                          lines.index("export SLURMKIT_RESTART_COUNT=${SLURM_RESTART_COUNT:-0}")])


@pytest.mark.parametrize("name", ["awsome-fsdp-llama3_1_8b.env", "torchtitan-multinode_trainer.env",
                                  "quoting-edited.env", "several-per-line.env"])
def test_env_file_values_are_what_bash_gives_sourcing_the_same_lines(name):
    """Real env blocks (tests/submit/envfiles/README.md): every variable the script exports has
    the value bash itself gives it sourcing those lines (quotes removed, trailing comments
    dropped, single quotes literal, $NAME expanded), on the same starting environment."""
    path = ENVFILES / name
    text = api.render_script("srun", ["python3", "t.py"], nodes=2, env_file=path)
    names = sorted({a.name for a in jobenv.parse_env_file(path.read_text(), str(path))})
    show = "".join(f'printf "%s=%s\\n" {n} "${{{n}-}}"\n' for n in names)
    env = {"PATH": "/usr/bin:/bin", "HOME": "/home/u", "LD_LIBRARY_PATH": "/site/lib"}
    ours = subprocess.run(["bash", "-c", exports_of(text) + "\n" + show], capture_output=True, text=True,
                          env=env, check=True).stdout
    theirs = subprocess.run(["bash", "-c", f"set -a; source {path}; set +a\n" + show], capture_output=True,
                            text=True, env=env, check=True).stdout
    assert ours == theirs
    got = dict(line.split("=", 1) for line in ours.splitlines())
    if name == "quoting-edited.env":
        assert got["FOO"] == "single quoted $HOME" and got["FI_PROVIDER"] == "efa"
        assert got["BAR"] == 'double quoted /home/u, "escaped" $HOME' and got["CUDA_LAUNCH_BLOCKING"] == "0"
        assert got["LD_LIBRARY_PATH"] == "/opt/amazon/efa/lib:/site/lib" and got["HASH"] == "a#b"
    elif name == "several-per-line.env":
        assert got["FI_EFA_USE_HUGE_PAGE"] == "0" and got["NCCL_DEBUG"] == "INFO" and got["NCCL_P2P_LEVEL"] == "5"
        assert got["OMPI_MCA_btl"] == "self,vader,tcp" and got["OMP_NUM_THREADS"] == "8"
        assert got["LD_LIBRARY_PATH"] == "/opt/amazon/efa/lib:/site/lib"
        assert got["NCCL_DEBUG_FILE"] == "/tmp/nccl-5.%p.log"
    elif name.startswith("torchtitan"):
        assert got["FI_PROVIDER"] == "efa" and got["NCCL_SOCKET_IFNAME"] == "eth0,en,eth,em,bond"
        assert got["LD_LIBRARY_PATH"] == "/usr/local/lib/:/opt/amazon/efa/lib:/site/lib"
    else:
        assert got["FI_EFA_USE_HUGE_PAGE"] == "0" and got["NCCL_SOCKET_IFNAME"] == "^docker,lo,veth,eth"


def test_env_file_explain_shows_the_parsed_values():
    path = ENVFILES / "quoting-edited.env"
    explain = api.explain("srun", ["python3", "t.py"], nodes=2, env_file=path)
    assert "FOO=single quoted $HOME" in explain and f"<- --env-file {path}:6 (as written)" in explain
    assert "CUDA_LAUNCH_BLOCKING=0" in explain and "# comment" not in explain
    assert ("LD_LIBRARY_PATH=/opt/amazon/efa/lib:${LD_LIBRARY_PATH}" in explain
            and f"<- --env-file {path}:8 ($NAME expanded on the node)" in explain)


@pytest.mark.parametrize("line,expected", [
    # torchtitan's multinode_trainer.slurm, the line after its environment block
    ('MODULE=${MODULE:-"torchtitan_recipes.tests.models.llama3"}', r"\$\{\.\.\.\} other than \$\{NAME\}"),
    ("HEAD=$(hostname)", r"\$\(\.\.\.\) \(slurmkit does not run commands"),
    ("FROM_FILE=yes $SLURM_JOB_ID", r"unquoted whitespace before '\$SLURM_JOB_ID' \(quote the value"),
    ("Q=\"open", r"an unterminated \""),
    ("A=1;B=2", r"an unquoted ';'"),
    # several assignments a line are read (several-per-line.env), but not a command after them
    ("export FI_EFA_USE_HUGE_PAGE=0 NCCL_DEBUG=INFO python", r"unquoted whitespace before 'python' \(quote the "
     r"value: NCCL_DEBUG=\"\.\.\.\""),
    # bash expands an export line whole before assigning: B would get A's earlier value
    ("export A=2 B=$A", r"\$A after A= on the same export line .*put B=\.\.\. on a line of its own"),
])
def test_env_file_lines_bash_would_read_otherwise_are_refused_with_file_and_line(line, expected):
    with pytest.raises(UsageError, match=r"job.env:2 .*expected NAME=VALUE as a shell assignment; not handled: "
                                         + expected):
        jobenv.parse_env_file("A=1\n" + line + "\n", "job.env")


def test_env_reaches_the_script_after_the_sites_and_env_wins_over_the_file(tmp_path):
    f = tmp_path / "job.env"
    f.write_text("CUDA_DEVICE_MAX_CONNECTIONS=8\nA=from-file\n")
    text = api.render_script("srun", ["python3", "t.py"], nodes=2, env_file=f,
                             job_env=["CUDA_DEVICE_MAX_CONNECTIONS=1", "X=/a:$X"])
    exports = [line for line in text.splitlines() if line.startswith("export ")]
    assert exports.index("export A=from-file") > exports.index("export CUDA_DEVICE_ORDER=PCI_BUS_ID")
    assert exports.index("export CUDA_DEVICE_MAX_CONNECTIONS=1") > exports.index("export CUDA_DEVICE_MAX_CONNECTIONS=8")
    assert 'export X=/a:"${X-}"' in exports
    explain = api.explain("srun", ["python3", "t.py"], nodes=2, env_file=f, job_env={"X": "/a:$X"})
    assert "A=from-file" in explain and f"--env-file {f}:2 (as written)" in explain
    assert "X=/a:$X" in explain and "<- CLI --env (expanded on the node)" in explain


def test_every_assignment_is_kept_in_order_as_in_the_script_it_replaces(tmp_path):
    """torchtitan's multinode_trainer.slurm prepends to LD_LIBRARY_PATH twice
    (/opt/amazon/efa/lib, then /usr/local/lib/): translated to two --env, both directories reach
    the job, in bash's order; a variable reading another sees the value assigned before it."""
    f = tmp_path / "job.env"
    f.write_text("A=1\nB=$A\n")
    text = api.render_script("srun", ["python3", "t.py"], nodes=2, env_file=f, job_env=[
        "LD_LIBRARY_PATH=/opt/amazon/efa/lib:$LD_LIBRARY_PATH", "LD_LIBRARY_PATH=/usr/local/lib/:$LD_LIBRARY_PATH",
        "A=2"])
    lines = text.splitlines()
    exports = "\n".join(lines[lines.index("export CUDA_DEVICE_ORDER=PCI_BUS_ID"):
                              lines.index("export SLURMKIT_RESTART_COUNT=${SLURM_RESTART_COUNT:-0}")])
    out = subprocess.run(["bash", "-c", exports + '\necho "$LD_LIBRARY_PATH|$A|$B"'], capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": "/site/lib"}, check=True).stdout
    assert out == "/usr/local/lib/:/opt/amazon/efa/lib:/site/lib|2|1\n"
    explain = api.explain("srun", ["python3", "t.py"], nodes=2, job_env=[
        "LD_LIBRARY_PATH=/opt/amazon/efa/lib:$LD_LIBRARY_PATH", "LD_LIBRARY_PATH=/usr/local/lib/:$LD_LIBRARY_PATH"])
    assert explain.index("LD_LIBRARY_PATH=/opt/amazon/efa/lib:$LD_LIBRARY_PATH") < explain.index(
        "LD_LIBRARY_PATH=/usr/local/lib/:$LD_LIBRARY_PATH")


def test_an_unreadable_env_file_is_refused_naming_it(tmp_path):
    with pytest.raises(UsageError, match=f"--env-file {tmp_path}/none: cannot read it"):
        api.render_script("srun", ["x"], env_file=str(tmp_path / "none"))


@pytest.mark.parametrize("name", templates.names())
def test_srun_options_go_on_the_srun_that_launches_the_ranks(name):
    kw = {"sets": {"sets": '[{"lr": 0.1}]'}} if name == "array" else {}
    nodes = 1 if templates.get(name).tasks == "single" else 2
    text = api.render_script(name, ["python3", "t.py"], nodes=nodes, srun_opts=["--label", "--wait=60"], **kw)
    launches = [line for line in text.splitlines() if f"--job-name={name if name != 'array' else 'array-task'}"
                in line and ("srun " in line or "slurmkit_srun " in line)]
    if name == "srun":
        launches = [line for line in text.splitlines() if "--job-name=ranks" in line]
    assert len(launches) == 1 and "--label --wait=60 " in launches[0], launches
    assert text.count("--label --wait=60") == 1                 # not on the probes / rendezvous
    with pytest.raises(UsageError, match="--srun-opt 'label': expected an srun option"):
        api.render_script(name, ["x"], nodes=nodes, srun_opts=["label"], **kw)


@pytest.mark.parametrize("checkpoint", [None, "USR1"])
def test_setup_runs_before_and_teardown_after_the_launch_once(checkpoint):
    text = api.render_script("single-gpu", ["python3", "t.py"], setup=["source /opt/env.sh", "export A=1"],
                             teardown=["dcgmi profile --resume"], checkpoint_signal=checkpoint)
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0
    body = text[text.index("slurmkit_preempted() {"):]
    launch = "slurmkit_payload &" if checkpoint else "slurmkit_payload || slurmkit_rc=$?"
    assert body.index("{ source /opt/env.sh\n}") < body.index("{ export A=1\n}") < body.index(launch) \
        < body.rindex("slurmkit_teardown\n")
    assert text.count("dcgmi profile --resume\n") == 1           # defined once, in slurmkit_teardown
    explain = api.explain("single-gpu", ["python3", "t.py"], setup="source /opt/env.sh")
    assert "source /opt/env.sh" in explain and "<- CLI --setup" in explain
    with pytest.raises(UsageError, match="--setup"):
        api.render_script("single-gpu", ["x"], setup=["a\nb"])


def test_teardown_runs_once_whatever_the_status_and_keeps_the_ranks_status(tmp_path):
    """The rendered teardown function and launch tail, run by bash with a failing payload."""
    text = api.render_script("single-gpu", ["false"], teardown=[f"echo torn >> {tmp_path}/t", "false"])
    start = text.index("slurmkit_teardown() {")
    func = text[start:text.index("\n}\n", start) + 3]
    script = (f"set -euo pipefail\n{func}slurmkit_payload() {{ return 7; }}\nslurmkit_rc=0\n"
              "slurmkit_payload || slurmkit_rc=$?\nslurmkit_teardown\nslurmkit_teardown\nexit $slurmkit_rc\n")
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    assert proc.returncode == 7
    assert (tmp_path / "t").read_text() == "torn\n"
    assert "slurmkit: teardown command failed (status 1): false" in proc.stderr


def test_setup_and_teardown_run_without_nounset_as_in_the_scripts_they_come_from(tmp_path):
    """ml-engineering's torchrun-launcher.slurm runs `set -eo pipefail` (no -u) before sourcing
    its start-up file and `conda activate`; conda's activation reads PS1, unset in a batch shell
    (conda/conda#8186: "conda.sh: line 26: PS1: unbound variable" under `set -euo pipefail`;
    conda#3200, #9966 the same with other variables). The env file below is made for the test:
    it reads PS1 and an unset variable as those scripts do. Rendered setup and teardown, run by
    bash under the script's own `set -euo pipefail`: both complete, and -u is back afterwards."""
    env = tmp_path / "start-user.sh"
    env.write_text('PS1_BACKUP="$PS1"\nexport FROM_SETUP="seen${CONDA_SHLVL}"\n')
    text = api.render_script("single-gpu", ["true"], setup=[f"source {env}"],
                             teardown=[f'echo "torn $UNSET_IN_TEARDOWN" > {tmp_path}/t'])
    setup = text[text.index("# --setup:"):]
    setup = setup[:setup.index("\nset -u\n") + 8]
    start = text.index("slurmkit_teardown() {")
    func = text[start:text.index("\n}\n", start) + 3]
    script = (f"set -euo pipefail\n{setup}{func}"
              'slurmkit_teardown\necho "$FROM_SETUP $-"\n')
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[0] == "seen" and "u" in proc.stdout.split()[1]
    assert (tmp_path / "t").read_text() == "torn \n"


@pytest.mark.parametrize("option, cmd, why", [
    ("--setup", "echo $((", "unexpected EOF while looking for matching `)'"),
    ("--teardown", "if true; then dcgmi profile --resume", "syntax error: unexpected end of file"),
])
def test_a_command_bash_cannot_parse_is_refused_at_submit(option, cmd, why):
    """Without the check the job waits in the queue, then ends FAILED on a syntax error."""
    kw = {option.lstrip("-"): [cmd]}
    for call in (api.render_script, api.explain):
        with pytest.raises(UsageError) as err:
            call("single-gpu", ["true"], **kw)
        assert str(err.value) == f"{option} {cmd!r}: bash cannot parse it: {why}"
    assert api.render_script("single-gpu", ["true"], setup=["source /opt/env.sh && conda activate x"])


def test_cli_options_give_the_api_request():
    args = ["single-gpu", "--env", "X=/a:$X", "--env-file", "/dev/null", "--srun-opt=--label", "--setup", "echo hi",
            "--teardown", "echo bye", "--dry-run", "--", "python3", "t.py"]
    out = CliRunner().invoke(submit_cli, args)
    assert out.exit_code == 0, out.output
    assert out.output == api.render_script("single-gpu", ["python3", "t.py"], job_env=["X=/a:$X"], env_file="/dev/null",
                                           srun_opts=["--label"], setup=["echo hi"], teardown=["echo bye"])


def test_a_failing_setup_command_is_said_runs_the_teardown_and_ends_the_job_with_its_status(tmp_path):
    """The rendered setup block after the teardown function, run by bash under the script's
    own `set -euo pipefail`: the second setup command fails with 3; the third never runs."""
    text = api.render_script("single-gpu", ["true"], setup=["echo one", "(exit 3)", f"echo three > {tmp_path}/3"],
                             teardown=[f"echo torn >> {tmp_path}/t"])
    start = text.index("slurmkit_teardown() {")
    func = text[start:text.index("\n}\n", start) + 3]
    setup = text[text.index("set +u\n", text.index("# --setup:")):]
    setup = setup[:setup.index("set -u\n") + len("set -u\n")]
    proc = subprocess.run(["bash", "-c", f"set -euo pipefail\n{func}{setup}echo payload\n"],
                          capture_output=True, text=True)
    assert proc.returncode == 3
    assert proc.stdout == "one\n" and (tmp_path / "t").read_text() == "torn\n" and not (tmp_path / "3").exists()
    assert proc.stderr == "slurmkit: setup command failed (status 3): (exit 3)\n"


def test_a_default_expansion_in_env_stays_literal_as_the_docs_say():
    """torchtitan's MODULE=${MODULE:-"..."} given to --env: only $NAME and ${NAME} expand; the
    ${X:-def} form reaches the job as written (docs/submit.md), while --env-file refuses it."""
    text = api.render_script("srun", ["python3", "t.py"], nodes=2, job_env=["MODULE=${MODULE:-llama3}", "B=$A/x"])
    out = subprocess.run(["bash", "-c", exports_of(text) + '\nprintf "%s|%s" "$MODULE" "$B"'], capture_output=True,
                         text=True, env={"PATH": "/usr/bin:/bin", "A": "/a"}, check=True).stdout
    assert out == "${MODULE:-llama3}|/a/x"
