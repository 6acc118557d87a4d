"""#SBATCH escaping and shell quoting: a model of sbatch's parser plus property tests.

The sandbox tests (test_submit_sandbox.py) check the same values against the real sbatch.
"""

import shlex
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurmkit.submit.escape import (EscapeError, parse_sbatch_arguments, sbatch_line, shell_join, shell_quote)

# Any text a user may type, minus what cannot go on one line.
line_text = st.text(st.characters(blacklist_characters="\n\r\0", blacklist_categories=("Cs",)), min_size=1)


def _args(line: str) -> list[str]:
    assert line.startswith("#SBATCH")
    return parse_sbatch_arguments(line[len("#SBATCH"):])


@pytest.mark.parametrize("value", [
    "plain", "with space", "it's", 'say "hi"', "a#b", "#lead", "$HOME `id` $(id)", "back\\slash",
    "trail\\", "\\\"", "tab\there", "ünïcødé ☃", "run packjob now", "HETJOB", "%x-%j.out", "' \" # \\",
])
def test_value_roundtrips_through_the_parser(value):
    assert _args(sbatch_line("job-name", value)) == [f"--job-name={value}"]


def test_safe_values_are_written_bare_and_others_quoted():
    assert sbatch_line("nodes", "2") == "#SBATCH --nodes=2"
    assert sbatch_line("switches", "1@5:00") == "#SBATCH --switches=1@5:00"
    assert sbatch_line("job-name", "a b") == '#SBATCH --job-name="a b"'
    assert sbatch_line("requeue", None) == "#SBATCH --requeue"


def test_parser_model_cuts_unquoted_hash_and_reads_escapes_inside_quotes():
    # what sbatch does with hand-written lines, per _get_argument in sbatch's opt.c
    assert parse_sbatch_arguments(" --job-name=a#b") == ["--job-name=a"]
    assert parse_sbatch_arguments(' --job-name="a\\"b" --x') == ['--job-name=a"b', "--x"]
    assert parse_sbatch_arguments(" --comment='x\\\\y'") == ["--comment=x\\y"]
    assert parse_sbatch_arguments(" --comment=packjob") == ["--comment="]


@pytest.mark.parametrize("bad", ["a\nb", "a\rb", "a\0b", ""])
def test_unwritable_values_are_refused_with_the_option_named(bad):
    with pytest.raises(EscapeError) as err:
        sbatch_line("comment", bad)
    assert "--comment" in str(err.value)


@settings(max_examples=300, deadline=None)
@given(line_text)
def test_property_sbatch_reads_exactly_the_value(value):
    assert _args(sbatch_line("comment", value)) == [f"--comment={value}"]


@settings(max_examples=300, deadline=None)
@given(st.lists(line_text, min_size=1, max_size=4))
def test_property_shell_words_roundtrip(words):
    assert shlex.split(shell_join(words)) == words


@settings(max_examples=25, deadline=None)
@given(st.lists(st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",))),
                min_size=1, max_size=3))
def test_property_bash_receives_the_exact_argv(words):
    out = subprocess.run(["bash", "-c", "printf '%s\\0' " + shell_join(words)], capture_output=True, check=True)
    assert out.stdout.decode("utf-8", "surrogateescape").split("\0")[:-1] == words


def test_shell_quote_refuses_nul():
    with pytest.raises(EscapeError):
        shell_quote("a\0b")


# -- --env values: $NAME / ${NAME} expand on the node, nothing else ---------------------------------

from slurmkit.submit.escape import shell_expand_word  # noqa: E402


def _expand_like_the_node(value: str, env: dict) -> str:
    """The rule the docs state: $NAME and ${NAME} replaced by the variable's value ("" unset)."""
    import re

    return re.sub(r"\$(?:\{([A-Za-z_]\w*)\}|([A-Za-z_]\w*))", lambda m: env.get(m.group(1) or m.group(2), ""), value)


def _bash_export(value: str, env: dict) -> str:
    script = f"set -euo pipefail\nexport OUT={shell_expand_word(value)}\nprintf %s \"$OUT\""
    proc = subprocess.run(["bash", "-c", script], env={"PATH": "/usr/bin:/bin", **env}, capture_output=True,
                          text=True, check=True)
    return proc.stdout


@pytest.mark.parametrize("value, env, want", [
    ("/opt/amazon/efa/lib:$LD_LIBRARY_PATH", {"LD_LIBRARY_PATH": "/usr/lib"}, "/opt/amazon/efa/lib:/usr/lib"),
    ("/a:$X", {}, "/a:"),                                     # unset: empty, even under set -u
    ("${HOME}x $HOMEx", {"HOME": "/h", "HOMEx": "y"}, "/hx y"),
    ("$(id) `id` * ~ ' \" \\ $ $1 ${", {}, "$(id) `id` * ~ ' \" \\ $ $1 ${"),
    ("", {}, ""),
])
def test_env_values_expand_variables_and_nothing_else_in_bash(value, env, want):
    assert _bash_export(value, env) == want


@settings(max_examples=150, deadline=None)
@given(value=line_text, x=st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",))))
def test_property_bash_expands_env_values_as_documented(value, x):
    env = {"X": x} if x else {}
    assert _bash_export(value, env) == _expand_like_the_node(value, env)


@pytest.mark.parametrize("bad", ["a\nb", "a\rb", "a\0b"])
def test_env_values_on_more_than_one_line_are_refused(bad):
    with pytest.raises(EscapeError):
        shell_expand_word(bad)
