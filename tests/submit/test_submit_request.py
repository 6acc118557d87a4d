"""The submit request is declared once (slurmkit.submit.request.SubmitRequest): the CLI's
options and the API's keywords are made from its fields, and these tests hold them to it."""

import dataclasses

import click
import pytest

from slurmkit.cli.submit import cli as submit_cli
from slurmkit.submit import api
from slurmkit.submit.request import SubmitRequest, api_fields, check_type, cli_fields

#: slurmkit submit's options that are not request fields (what to do with the request, where)
NOT_REQUEST = {"dry_run", "explain", "wait_", "remote", "ssh_config", "sync_dir", "remote_dir", "no_sync", "excludes", "help"}


def test_every_cli_option_is_a_request_field_and_back():
    params = {p.name: p for p in submit_cli.params if isinstance(p, click.Option)}
    from_request = set(params) - NOT_REQUEST
    assert from_request == {f.name for f in cli_fields()}
    for fld in cli_fields():
        assert set(params[fld.name].opts) == set(fld.metadata["cli"])
        assert params[fld.name].help == fld.metadata["help"]


def test_every_field_is_an_api_keyword_with_a_type():
    names = {f.name for f in dataclasses.fields(SubmitRequest)} - {"template", "command"}
    assert set(api_fields()) == names
    for name, fld in api_fields().items():
        assert fld.metadata["types"] and fld.metadata["what"], name


@pytest.mark.parametrize("name,value", [("nodes", "2"), ("nodes", True), ("time", 90), ("exclusive", "yes"),
                                        ("sets", ["a=1"]), ("nodes", None)])
def test_api_refuses_a_wrong_type_naming_the_keyword(name, value):
    with pytest.raises(TypeError, match=f"{name} must be"):
        check_type(name, value)
    with pytest.raises(TypeError, match=f"{name} must be"):
        api.render_script("srun", ["x"], **{name: value})


def test_cli_and_api_build_the_same_request():
    from click.testing import CliRunner

    args = ["srun", "-N", "2", "-t", "1:00:00", "--no-switches", "--set", "log_dir=L", "--sbatch=--begin=now",
            "--exclusive", "--dry-run", "--", "python3", "t.py"]
    out = CliRunner().invoke(submit_cli, args)
    assert out.exit_code == 0, out.output
    assert out.output == api.render_script("srun", ["python3", "t.py"], nodes=2, time="1:00:00", switches=False,
                                           sets={"log_dir": "L"}, sbatch_args=["--begin=now"], exclusive=True)
