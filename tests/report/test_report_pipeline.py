"""slurmkit.report.weekly_report: the weekly report's steps called from Python (captured sacct
in, totals and files out), and the CLI's --site option mapped onto it."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner

from slurmkit.cli import cli
from slurmkit.errors import InputError, UsageError
from slurmkit.report import WeeklyOptions, weekly_report
from slurmkit.report.window import parse_week

from sacct_rows import T0, WEEK, row, text

PROFILE = ('[cluster]\nname = "t"\n[partitions.gpu]\nnodes = "n[1-2]"\nnode_type = "x"\n'
           '[node_types.x]\ngpu_model = "h100"\ngpu_count = 4\ngpu_tdp_w = 500\n'
           '[report]\npue = 1.2\ncurrency = "CHF"\n')


@pytest.fixture(autouse=True)
def _no_site_from_the_shell(monkeypatch):
    monkeypatch.delenv("SLURMKIT_SITE", raising=False)   # report weekly reads it (--site)


@pytest.fixture()
def capture(tmp_path):
    rows = [row(),                                                     # 2 GPUs x 1 h, alice
            row(JobID="101", User="bob", AllocTRES="cpu=8,gres/gpu=4", State="FAILED"),
            row(JobID="102", User="bob", AllocTRES="cpu=2,mem=1G", ConsumedEnergyRaw="7200000")]
    p = tmp_path / "week.psv"
    p.write_bytes(text(rows))
    return p


def test_weekly_report_from_a_capture_gives_totals_and_writes_the_files(capture, tmp_path):
    out = tmp_path / "out"
    res = weekly_report(captures=[capture], window=WEEK, formats=["json", "csv", "md"], outdir=out,
                        gpu_tdp_w=700.0, pue=1.5, spool=tmp_path / "no-spool.jsonl")
    t = res.report["totals"]
    assert (t["jobs"], t["gpu_jobs"]) == (3, 2)
    assert t["gpu_hours"] == pytest.approx(6.0) and t["cpu_hours"] == pytest.approx(12.0)
    # modelled 6 GPU-h x 700 W; Slurm's 7.2 MJ = 2 kWh for the CPU job
    assert t["energy_kwh_by_source"] == {"measured": 0.0, "slurm": pytest.approx(2.0),
                                         "modelled": pytest.approx(4.2), "prometheus": 0.0, "slurm_tres": 0.0,
                                         "slurm_usage": 0.0}
    assert t["facility_kwh"] == pytest.approx(6.2 * 1.5)
    assert t["wasted_gpu_hours"] == pytest.approx(4.0)
    assert res.report["assumptions"]["origin"]["pue"] == "--pue"
    assert res.report["assumptions"]["origin"]["trust_slurm_energy"] == "default"
    assert res.window == WEEK and res.outdir == out
    names = [p.name for p in res.written]
    assert names[0] == "weekly.md" and "weekly.json" in names and "by_user.csv" in names
    assert all(p.parent == out and p.is_file() for p in res.written)
    assert json.loads((out / "weekly.json").read_text()) == json.loads(json.dumps(res.report))
    assert len(pd.read_csv(out / "jobs.csv")) == len(res.allocations) == 3
    assert not (out / "weekly.html").exists()
    # the missing spool file is one warning, collected and passed to warn
    assert len(res.warnings) == 1 and res.warnings[0].startswith("spool: ")


def test_no_window_is_the_whole_days_of_the_capture(capture, tmp_path):
    seen = []
    res = weekly_report(WeeklyOptions(captures=(capture,), formats=("json",)), outdir=tmp_path / "o",
                        warn=seen.append, now=pd.Timestamp(T0 + 86400, unit="s", tz="UTC"))
    assert res.report["window"] == {"start": "2026-01-01T00:00:00Z", "end": "2026-01-02T00:00:00Z"}
    assert res.warnings == seen


def test_options_given_override_the_profile(capture, tmp_path):
    from slurmkit.profile import load_profile

    prof = tmp_path / "p.toml"
    prof.write_text(PROFILE)
    res = weekly_report(captures=[capture], window=WEEK, formats=[], outdir=tmp_path / "o",
                        profile=load_profile(prof), currency="EUR", trust_slurm_energy=False)
    a = res.report["assumptions"]
    assert a["pue"] == 1.2 and a["origin"]["pue"] == f"profile {prof}"
    assert a["currency"] == "EUR" and a["origin"]["currency"] == "--currency"
    assert a["origin"]["trust_slurm_energy"] == "--no-trust-slurm-energy"
    assert res.report["utilization"]["capacity_gpus"] == 8           # 2 nodes x 4 from the profile
    # not trusted: the CPU job's Slurm energy is dropped; the GPU jobs are modelled at 500 W
    assert res.report["totals"]["energy_kwh_by_source"]["slurm"] == 0.0
    assert res.report["totals"]["energy_kwh_by_source"]["modelled"] == pytest.approx(6 * 0.5)
    assert res.written == []


def test_bad_input_raises_input_errors_naming_what(capture, tmp_path):
    with pytest.raises(UsageError, match=r"^--format: unknown pdf \(choose from html"):
        weekly_report(captures=[capture], window=WEEK, formats=["pdf"], outdir=tmp_path / "o")
    empty = tmp_path / "empty.psv"
    empty.write_bytes(text([]))
    with pytest.raises(InputError) as err:
        weekly_report(captures=[empty], formats=["json"], outdir=tmp_path / "o")
    assert err.value.file == str(empty) and "no sacct rows (empty or header only)" in err.value.message


def test_cli_site_option_and_env_load_the_profile(capture, tmp_path, monkeypatch):
    prof = tmp_path / "p.toml"
    prof.write_text(PROFILE)
    args = ["report", "weekly", "--json", "--from-sacct", str(capture), "--week", "2026-W01",
            "-o", str(tmp_path / "o"), "--format", "json"]
    base = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert base.exit_code == 0, base.output
    assert json.loads(base.output)["assumptions"]["pue"] is None
    for extra, env in (([], {"SLURMKIT_SITE": str(prof)}), (["--site", str(prof)], {})):
        res = CliRunner().invoke(cli, args + extra, env=env, catch_exceptions=False)
        assert res.exit_code == 0, res.output
        a = json.loads(res.output)["assumptions"]
        assert a["pue"] == 1.2 and a["origin"]["pue"] == f"profile {prof}"
    res = CliRunner().invoke(cli, args + ["--site", str(tmp_path / "nope.toml")])
    assert res.exit_code == 2 and "nope.toml" in res.output


def test_cli_errors_are_one_line_with_the_slurmkit_prefix(capture, tmp_path):
    res = CliRunner().invoke(cli, ["report", "weekly", "--from-sacct", str(capture), "--week", "2026-W99",
                                   "-o", str(tmp_path / "o")])
    assert res.exit_code == 2
    assert res.output == ("slurmkit: error: --week: not an ISO week: '2026-W99' "
                          "(Invalid week: 99)\n")


def test_window_options_name_themselves():
    from slurmkit.report.window import WindowError, make_window

    for args, option in (((None, "yesterday", None), "--start"), ((None, "2026-01-01", "later"), "--end"),
                         (("2026-W99", None, None), "--week")):
        with pytest.raises(WindowError) as err:
            make_window(*args)
        assert err.value.file == option and err.value.exit_code == 2
    assert make_window("2026-W01", None, None) == parse_week("2026-W01")
