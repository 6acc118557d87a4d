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
