"""slurmkit.errors: one argument order, one rendering, one CLI handler."""

from __future__ import annotations

import pickle

import click
import pytest
from click.testing import CliRunner

from slurmkit.accounting.read import AccountingInputError
from slurmkit.errors import InputError, SlurmkitError, UsageError
from slurmkit.health.config import load_config  # noqa: F401  (the health package imports cleanly)
from slurmkit.health.errors import CaptureError, NvmlTimeout, SourceError
from slurmkit.health.ibcapture import CaptureFormatError
from slurmkit.hooks.config import HookConfigError
from slurmkit.hooks.gres import GresError
from slurmkit.hooks.install import InstallError
from slurmkit.profile.errors import ProfileError
from slurmkit.report.window import WindowError
from slurmkit.slurm.commands import SlurmError
from slurmkit.slurm.conf import ConfError
from slurmkit.submit.site import SiteError
from slurmkit.submit.templates import TemplateError
from slurmkit.topology.errors import TopoError

INPUT_ERRORS = [AccountingInputError, CaptureError, CaptureFormatError, ConfError, GresError, HookConfigError, InstallError,
                ProfileError, SiteError, TemplateError, TopoError]


@pytest.mark.parametrize("cls", INPUT_ERRORS)
def test_every_reader_error_is_an_input_error_with_one_argument_order(cls):
    err = cls("site.toml", 12, "want a number, got 'x'", "health.deadline_s")
    assert isinstance(err, InputError) and isinstance(err, SlurmkitError) and isinstance(err, ValueError)
    assert (err.file, err.line, err.message, err.key) == ("site.toml", 12, "want a number, got 'x'",
                                                          "health.deadline_s")
    assert str(err) == "site.toml:12: health.deadline_s: want a number, got 'x'"
    assert err.exit_code == 2
    back = pickle.loads(pickle.dumps(err))   # crosses the NVML worker's process boundary
    assert type(back) is cls and str(back) == str(err)


@pytest.mark.parametrize("args, text", [
    (("f.psv", None, "no header"), "f.psv: no header"),
    (("f.psv", 0, "no header"), "f.psv: no header"),          # line 0: not about a line
    (("", 3, "bad row"), "<input>:3: bad row"),
    (("", None, "bad", "JobID"), "JobID: bad"),                # unnamed input, named key
    ((None, None, "bad"), "<input>: bad"),
])
def test_rendering_leaves_out_what_is_absent(args, text):
    assert str(InputError(*args)) == text


def test_profile_error_names_an_unnamed_profile():
    assert str(ProfileError("", 4, "unknown key")) == "<profile>:4: unknown key"


def test_usage_errors_name_the_option():
    assert str(UsageError("--week", "not an ISO week: '2026-W60'")) == "--week: not an ISO week: '2026-W60'"
    assert isinstance(WindowError("--start", "bad date"), UsageError)


def test_failures_are_exit_1_and_own_trouble_reading_gpus_is_exit_2():
    assert SlurmError("sbatch failed").exit_code == 1
    assert NvmlTimeout("nvmlInit", 8.1, 8.0).exit_code == 1
    assert SourceError("NVML library not found").exit_code == 2
    assert isinstance(CaptureError("n1.json", 3, "bad JSON"), SourceError)


@pytest.mark.parametrize("exc, code, line", [
    (ProfileError("site.toml", 7, "want a number", "health.deadline_s"), 2,
     "slurmkit: error: site.toml:7: health.deadline_s: want a number"),
    (SlurmError("sbatch: error: Batch job submission failed: Invalid partition name specified"), 1,
     "slurmkit: error: sbatch: error: Batch job submission failed: Invalid partition name specified"),
    (SlurmError("two\nlines"), 1, "slurmkit: error: two lines"),
])
def test_the_one_cli_handler_prints_one_line_and_the_exit_code(monkeypatch, exc, code, line):
    import slurmkit.cli as cli_mod

    @click.command("boom")
    def boom():
        raise exc

    monkeypatch.setitem(cli_mod.COMMANDS, "boom", ("tests.boom", "raises"))
    monkeypatch.setattr(cli_mod.LazyGroup, "get_command",
                        lambda self, ctx, name: boom if name == "boom" else None)
    r = CliRunner().invoke(cli_mod.cli, ["boom"])
    assert r.exit_code == code
    assert r.output.strip().splitlines() == [line]


def test_a_real_command_with_bad_input_exits_2_with_file_and_line(tmp_path):
    from slurmkit.cli import cli

    bad = tmp_path / "site.toml"
    bad.write_text('extends = "sandbox"\n[health]\ndeadline_s = "soon"\n')
    r = CliRunner().invoke(cli, ["site", "check", str(bad)])
    assert r.exit_code == 2
    (msg,) = r.output.strip().splitlines()
    assert msg.startswith(f"slurmkit: error: {bad}:3: health.deadline_s: ")


def test_the_module_docstring_names_the_real_handler_and_what_it_prints():
    import slurmkit.cli
    import slurmkit.errors

    assert ":func:`slurmkit.cli.fail`" in slurmkit.errors.__doc__ and callable(slurmkit.cli.fail)
    res = CliRunner().invoke(slurmkit.cli.cli, ["logs", "x1"])
    assert "``slurmkit: error: <message>``" in slurmkit.errors.__doc__
    assert res.exit_code == 2 and res.output.startswith("slurmkit: error: JOBID: ")


def test_reading_turns_a_readers_errors_into_its_input_error_naming_the_file(tmp_path):
    import json

    bad = tmp_path / "m.json"
    bad.write_text('{\n "a": 1,\n')   # a manifest cut off after its second line
    with pytest.raises(HookConfigError) as got, HookConfigError.reading(bad, "a manifest (JSON)"):
        json.loads(bad.read_text())
    assert (got.value.file, got.value.line) == (str(bad), 3)
    assert got.value.message.startswith("cannot read a manifest (JSON): not valid JSON: ")
    with pytest.raises(InputError, match=r"m.json: cannot read a manifest: not UTF-8 text \(byte 0\)"), \
            InputError.reading(bad, "a manifest"):
        b"\xff".decode("utf-8")
    with pytest.raises(InputError, match=r"nope: cannot read x: No such file or directory"), \
            InputError.reading(tmp_path / "nope", "x"):
        (tmp_path / "nope").read_text()
    with pytest.raises(InputError, match=r"^m.json: cannot read x: boom in it$"), \
            InputError.reading("m.json", "x", RuntimeError):
        raise RuntimeError("boom in 'm.json'")
    with pytest.raises(KeyError):   # not about reading the file: unchanged
        with InputError.reading(bad, "x"):
            raise KeyError("k")
    with pytest.raises(ProfileError, match="^p.toml:2: own"):   # a reader's own error: unchanged
        with InputError.reading(bad, "x"):
            raise ProfileError("p.toml", 2, "own")
