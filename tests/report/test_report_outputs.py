"""The weekly report's outputs: JSON contract, CSV/Markdown, the CLI, and the HTML page as
headless Chromium renders it (no external URL, every image decodes, not blank)."""

from __future__ import annotations

import base64
import io
import json
import re
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from slurmkit.cli import cli

from chromium_shot import chromium, screenshot
from sacct_rows import T0, FIELDS, row, text  # tiny-input helpers


@pytest.fixture(autouse=True)
def _no_site_from_the_shell(monkeypatch):
    # `eval "$(slurmkit sandbox env)"` exports SLURMKIT_SITE, which report weekly reads
    monkeypatch.delenv("SLURMKIT_SITE", raising=False)


@pytest.fixture()
def capture(tmp_path):
    rows = [row(), row(JobID="101", User="bob", Account="phys", AllocTRES="cpu=8,gres/gpu:h100=4,gres/gpu=4",
                       State="FAILED"),
            row(JobID="101.batch", User="", TRESUsageInTot="mem=1G"),
            row(JobID="102", User="bob", AllocTRES="cpu=2,mem=1G", ConsumedEnergyRaw="7200000")]
    p = tmp_path / "week.psv"
    p.write_bytes(text(rows))
    return p


def run_cli(args):
    res = CliRunner().invoke(cli, args, catch_exceptions=False)
    return res


def test_json_keys_and_values(capture, tmp_path):
    out = tmp_path / "out"
    res = run_cli(["--json", "report", "weekly", "--from-sacct", str(capture), "--start", "2026-01-01",
                   "--end", "2026-01-08", "-o", str(out), "--format", "json,csv,md,parquet",
                   "--gpu-tdp-w", "700", "--pue", "1.5", "--carbon-g-per-kwh", "400",
                   "--price-per-kwh", "0.2", "--price-per-gpu-hour", "2", "--currency", "EUR"])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output)
    assert rep == json.loads((out / "weekly.json").read_text())
    assert rep["window"] == {"start": "2026-01-01T00:00:00Z", "end": "2026-01-08T00:00:00Z"}
    t = rep["totals"]
    for k in ("jobs", "gpu_hours", "cpu_hours", "energy_kwh"):
        assert k in t
    assert set(t["energy_kwh_by_source"]) >= {"measured", "slurm", "modelled"}
    assert t["jobs"] == 3
    assert t["gpu_hours"] == pytest.approx(2 + 4)
    assert t["cpu_hours"] == pytest.approx(3 * 4)  # NCPUS=4 each, 1 h
    # modelled: (2 + 4) GPU-h x 700 W; slurm: 7.2 MJ = 2 kWh
    assert t["energy_kwh_by_source"]["modelled"] == pytest.approx(6 * 0.7)
    assert t["energy_kwh_by_source"]["slurm"] == pytest.approx(2.0)
    assert t["facility_kwh"] == pytest.approx((4.2 + 2.0) * 1.5)
    assert t["co2e_kg"] == pytest.approx(6.2 * 1.5 * 0.4)
    assert t["cost_total"] == pytest.approx(6.2 * 1.5 * 0.2 + 6 * 2)
    assert t["wasted_gpu_hours"] == pytest.approx(4.0)
    assert rep["assumptions"]["origin"]["pue"] == "--pue"
    for key in ("by_user", "by_account", "by_partition"):
        for r in rep[key]:
            assert {"jobs", "gpu_hours", "cpu_hours", "energy_kwh"} <= set(r)
    users = {r["user"]: r for r in rep["by_user"]}
    assert users["bob"]["jobs"] == 2 and users["bob"]["gpu_hours"] == pytest.approx(4.0)
    assert users["alice"]["energy_kwh"] == pytest.approx(1.4)
    dq = rep["data_quality"]
    assert dq["rows_read"] == 4 == dq["rows_counted"] + dq["rows_skipped"]
    assert isinstance(dq["skipped_reasons"], dict)
    # CSV / Markdown / Parquet carry the same figures
    import csv

    import pandas as pd
    with open(out / "by_user.csv") as fh:
        csv_users = {r["user"]: r for r in csv.DictReader(fh)}
    assert float(csv_users["bob"]["gpu_hours"]) == pytest.approx(4.0)
    assert dq["problems"] == []   # no row listed: the CSV still has its header
    # no row listed; the figures the input cannot give are (unknown is listed, not 0)
    dq_csv = (out / "data_quality.csv").read_text().splitlines()
    assert dq_csv[0] == "source,line,reason,detail,counted"
    assert [ln.split(",")[2] for ln in dq_csv[1:]] == ["unknown: gpu_utilization", "unknown: utilization"]
    assert "| bob | 2 | 4.00 |" in (out / "weekly.md").read_text()
    assert len(pd.read_parquet(out / "jobs.parquet")) == 3


@pytest.mark.parametrize("how", ["--site", "SLURMKIT_SITE", "--profile", "SLURMKIT_PROFILE"])
def test_profile_assumptions_are_used_and_printed(capture, tmp_path, how):
    """The site profile named by --site or $SLURMKIT_SITE (the old --profile / $SLURMKIT_PROFILE
    still work) gives the report its energy and cost assumptions and its capacity."""
    prof = tmp_path / "p.toml"
    prof.write_text('[cluster]\nname = "t"\n[partitions.gpu]\nnodes = "n[1-2]"\nnode_type = "x"\n'
                    '[node_types.x]\ngpu_model = "h100"\ngpu_count = 4\ngpu_tdp_w = 500\n'
                    '[report]\npue = 1.2\ncarbon_g_per_kwh = 100\nprice_per_kwh = 0.1\n'
                    'price_per_gpu_hour = 1.0\ncurrency = "CHF"\n')
    args = ["report", "weekly", "--json", "--from-sacct", str(capture), "--week", "2026-W01",
            "-o", str(tmp_path / "o"), "--format", "json"]
    env = {"SLURMKIT_SITE": None, "SLURMKIT_PROFILE": None}
    if how.startswith("--"):
        args += [how, str(prof)]
    else:
        env[how] = str(prof)
    res = CliRunner(env=env).invoke(cli, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output)
    assert rep["window"]["start"] == "2025-12-29T00:00:00Z"
    assert rep["assumptions"]["pue"] == 1.2 and rep["assumptions"]["currency"] == "CHF"
    assert rep["assumptions"]["origin"]["pue"].startswith("profile")
    # the h100 job is modelled at 500 W; the untyped 2-GPU job at the profile's only TDP
    assert rep["totals"]["energy_kwh_by_source"]["modelled"] == pytest.approx(6 * 0.5)
    assert rep["utilization"]["capacity_gpus"] == 8
    # available: 8 GPUs x the week's hours up to the capture time (its latest time: the report
    # covers the week up to then, docs/report.md's utilization row)
    taken = pd.Timestamp(rep["coverage"]["covered_until"])
    hours = (taken - pd.Timestamp("2025-12-29T00:00:00Z")).total_seconds() / 3600
    assert rep["coverage"]["partial"] and 0 < hours < 168
    assert rep["utilization"]["utilization"] == pytest.approx(6 / (8 * hours))
    assert rep["assumptions"]["origin"]["pue"] == f"profile {prof}"


def test_site_option_wins_over_the_environment_and_a_bad_site_exits_2(capture, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[cluster]\nname = "t"\n[report]\npue = 0.5\n')
    args = ["report", "weekly", "--json", "--from-sacct", str(capture), "--week", "2026-W01",
            "-o", str(tmp_path / "o"), "--format", "json"]
    res = CliRunner(env={"SLURMKIT_SITE": "no-such-site"}).invoke(cli, args + ["--site", str(bad)])
    assert res.exit_code == 2 and f"{bad}" in res.output and "no-such-site" not in res.output
    res = CliRunner(env={"SLURMKIT_SITE": str(bad)}).invoke(cli, args)
    assert res.exit_code == 2 and f"{bad}" in res.output


@pytest.mark.parametrize("args,needle", [
    (["--week", "2026-W99"], "not an ISO week"),
    (["--start", "yesterday"], "not an ISO date"),
    (["--start", "2026-01-08", "--end", "2026-01-01"], "is not after"),
    (["--format", "pdf"], "unknown pdf"),
])
def test_cli_bad_options_exit_2(capture, tmp_path, args, needle):
    res = run_cli(["report", "weekly", "--from-sacct", str(capture), "-o", str(tmp_path / "o"), *args])
    assert res.exit_code == 2 and needle in res.output
    assert "Traceback" not in res.output


def test_cli_capture_without_header_or_fields_exits_2(tmp_path):
    p = tmp_path / "nohdr.txt"
    p.write_bytes(text([row()], header=False))
    res = run_cli(["report", "weekly", "--from-sacct", str(p), "-o", str(tmp_path / "o")])
    assert res.exit_code == 2 and f"{p}:1: no header line" in res.output
    res = run_cli(["report", "weekly", "--from-sacct", str(p), "--sacct-fields", ",".join(FIELDS),
                   "-o", str(tmp_path / "o"), "--format", "json", "--json"])
    assert res.exit_code == 0 and json.loads(res.output)["totals"]["jobs"] == 1


def test_cli_missing_capture_exits_2(tmp_path):
    res = run_cli(["report", "weekly", "--from-sacct", str(tmp_path / "nope.psv"), "-o", str(tmp_path / "o")])
    assert res.exit_code == 2 and "nope.psv" in res.output


def test_html_is_self_contained_and_renders_in_chromium(capture, tmp_path):
    chromium()
    out = tmp_path / "out"
    res = run_cli(["report", "weekly", "--from-sacct", str(capture), "--week", "2026-W01",
                   "-o", str(out), "--format", "html", "--gpu-tdp-w", "700"])
    assert res.exit_code == 0, res.output
    html = (out / "weekly.html").read_text()
    # no external URL: no http(s)/protocol-relative references, no scripts, no web fonts
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", html, re.I)
    assert not re.search(r"url\(\s*['\"]?(?:https?:)?//", html, re.I)
    assert "<script" not in html.lower() and "@font-face" not in html.lower()
    # every image is inline and decodes
    from PIL import Image

    srcs = re.findall(r'<img[^>]*src="([^"]+)"', html)
    assert len(srcs) == 4   # GPUs in use, users, queue wait, energy
    for src in srcs:
        assert src.startswith("data:image/png;base64,")
        img = Image.open(io.BytesIO(base64.b64decode(src.split(",", 1)[1])))
        img.load()
        assert img.size[0] > 100 and img.size[1] > 100
    screenshot(out / "weekly.html", tmp_path / "shot.png", tmp_path / "profile")


def test_mail_to_sends_html_with_sendmail(capture, tmp_path, monkeypatch):
    """--mail-to pipes one MIME message (Markdown text + the HTML page) to ``sendmail -t``; a
    stand-in sendmail on PATH records what it was given."""
    import email

    bindir = tmp_path / "bin"
    bindir.mkdir()
    got = tmp_path / "mail.eml"
    (bindir / "sendmail").write_text(f"#!/bin/sh\necho \"$@\" > {tmp_path / 'argv'}\ncat > {got}\n")
    (bindir / "sendmail").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    res = run_cli(["report", "weekly", "--from-sacct", str(capture), "--week", "2026-W01",
                   "-o", str(tmp_path / "o"), "--format", "html", "--mail-to", "admins@example.org"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "argv").read_text().split() == ["-t", "-oi"]
    msg = email.message_from_bytes(got.read_bytes())
    assert msg["To"] == "admins@example.org" and "weekly report" in msg["Subject"]
    parts = {p.get_content_type(): p for p in msg.walk()}
    assert "text/html" in parts and "text/plain" in parts
    assert "data:image/png;base64," in parts["text/html"].get_payload(decode=True).decode()


def test_week_over_week_deltas():
    from slurmkit.accounting.frame import jobs_frame
    from slurmkit.accounting.read import read_sacct_bytes
    from slurmkit.report.energy import Assumptions
    from slurmkit.report.weekly import build_report
    from sacct_rows import WEEK

    table, dq = read_sacct_bytes(text([row(), row(JobID="101")]), "t")
    rep, _ = build_report(jobs_frame(table, dq), dq, WEEK, Assumptions(),
                          previous={"jobs": 4, "gpu_hours": 8.0, "cpu_hours": 4.0},
                          now=WEEK.end)
    d = rep["deltas"]
    assert d["jobs"] == {"previous": 4, "change": -2, "relative": -0.5}
    assert d["gpu_hours"]["change"] == pytest.approx(4.0 - 8.0)
    assert d["cpu_hours"]["relative"] == pytest.approx((8.0 - 4.0) / 4.0)


def test_energy_without_any_source_reads_unknown_not_zero(tmp_path):
    # GPU and CPU jobs, no spool, ConsumedEnergyRaw 0, no TDP: nothing says how much energy
    p = tmp_path / "noenergy.psv"
    p.write_bytes(text([row(), row(JobID="102", AllocTRES="cpu=2,mem=1G")]))
    out = tmp_path / "o"
    res = run_cli(["report", "weekly", "--from-sacct", str(p), "--start", "2026-01-01", "-o", str(out),
                   "--format", "json,md,html", "--pue", "1.5", "--price-per-kwh", "0.2"])
    assert res.exit_code == 0, res.output
    assert "energy unknown" in res.output and "0.00 kWh" not in res.output
    rep = json.loads((out / "weekly.json").read_text())
    t = rep["totals"]
    assert t["energy_known"] is False
    assert t["energy_kwh"] is None and set(t["energy_kwh_by_source"]) >= {"measured", "slurm", "modelled"}
    assert set(t["energy_kwh_by_source"].values()) == {None}
    assert t["energy_jobs_by_source"] == {"measured": 0, "prometheus": 0, "slurm": 0, "slurm_tres": 0, "slurm_usage": 0,
                                          "modelled": 0, "none": 2}
    assert t["facility_kwh"] is None and t["cost_total"] is None and t["co2e_kg"] is None
    why = "unknown (no measurement, no Slurm energy, no GPU TDP in the profile)"
    md, html = (out / "weekly.md").read_text(), (out / "weekly.html").read_text()
    assert why in md and why in html
    assert "0.0 kWh" not in html and "0 kWh" not in html
    # one Slurm energy figure makes the energy known again
    p.write_bytes(text([row(), row(JobID="102", AllocTRES="cpu=2,mem=1G", ConsumedEnergyRaw="3600000")]))
    res = run_cli(["report", "weekly", "--from-sacct", str(p), "--start", "2026-01-01", "-o", str(out),
                   "--format", "json", "--json"])
    t = json.loads(res.output)["totals"]
    assert t["energy_known"] is True and t["energy_kwh"] == pytest.approx(1.0)
    assert t["energy_jobs_by_source"]["none"] == 1


def test_small_and_large_numbers_stay_readable(tmp_path):
    from slurmkit.report.render import fmt, pct
    assert [fmt(v) for v in (0.229, 0.0451, 0.000382, 4.0, 12.345, 242.1, 12345.6, 1234567)] == \
        ["0.229", "0.0451", "0.000382", "4.00", "12.3", "242", "12,346", "1,234,567"]
    assert (pct(0.1526), pct(1.0), pct(0.00045), pct(12.5)) == ("15.3 %", "100 %", "0.0450 %", "1,250 %")
    # a small cluster's week: one 1-GPU job of 825 s -> 0.229 GPU-hours, 0.0451 kWh (Slurm)
    p = tmp_path / "small.psv"
    p.write_bytes(text([row(AllocTRES="cpu=1,gres/gpu=1,node=1", NCPUS=1, ElapsedRaw=825,
                            End=T0 + 600 + 825, ConsumedEnergyRaw=str(round(0.0451 * 3.6e6)))]))
    out = tmp_path / "o"
    res = run_cli(["report", "weekly", "--from-sacct", str(p), "--start", "2026-01-01", "-o", str(out),
                   "--format", "md,html"])
    assert res.exit_code == 0, res.output
    md, html = (out / "weekly.md").read_text(), (out / "weekly.html").read_text()
    assert "| alice | 1 | 0.229 | 0.229 | 0.0451 | 0 |" in md
    assert "<td>0.229</td>" in html and "0.0451 kWh" in html


@pytest.mark.parametrize("flag,origin", [([], "default"), (["--trust-slurm-energy"], "--trust-slurm-energy"),
                                         (["--no-trust-slurm-energy"], "--no-trust-slurm-energy")])
def test_trust_slurm_energy_origin_says_default_unless_given(capture, tmp_path, flag, origin):
    res = run_cli(["report", "weekly", "--json", "--from-sacct", str(capture), "--start", "2026-01-01",
                   "-o", str(tmp_path / "o"), "--format", "json", *flag])
    assert res.exit_code == 0, res.output
    a = json.loads(res.output)["assumptions"]
    assert a["origin"]["trust_slurm_energy"] == origin
    assert a["trust_slurm_energy"] is (flag != ["--no-trust-slurm-energy"])


def test_every_csv_has_its_header_with_or_without_rows(tmp_path, corpus):
    """A table with no row used to be written as the single word ``empty``
    (hourly.csv with no GPU count, accounts, breakdown, downtime, idle_jobs, trends), which
    spreadsheets and ``pandas.read_csv`` read as a column named "empty". Now each CSV has its
    header (render.csv_headers): a report with rows in nearly every table (the sandbox's
    captures of tests/report/data/sreport, README there: sacct, events, reservations, nodes,
    assoc tree, sreport) writes exactly those headers, and Habrok's capture without AllocTRES
    and ReqTRES (a labelled edit: no GPU count, so no hourly curve; no breakdown inputs)
    writes every CSV with its header and no line called "empty"."""
    from capture_edit import without_fields

    from slurmkit.report.render import csv_headers

    data = Path(__file__).parent / "data" / "sreport"
    out = tmp_path / "rich"
    res = CliRunner().invoke(cli, [
        "report", "weekly", "--from-sacct", str(data / "sandbox_sacct.psv"), "--start", "2026-12-02", "--end",
        "2026-12-03", "--tz", "UTC", "--as-of", "2026-12-02T14:05:00", "--store", str(tmp_path / "store"),
        "--trend-weeks", "2", "--events", str(data / "sandbox_events.psv"),
        "--reservations", str(data / "sandbox_reservations.psv"), "--nodes", str(data / "sandbox_scontrol_nodes.txt"),
        "--assoc-tree", str(data / "sandbox_assoc_tree.psv"),
        "--sreport-utilization", str(data / "sandbox_utilization_seconds.txt"),
        "--sreport-accounts", str(data / "sandbox_account_users_seconds.txt"), "--capacity-gpus", "8",
        "--spool", str(tmp_path / "nospool.jsonl"), "--format", "csv", "-o", str(out)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    headers = csv_headers()
    with_rows = 0
    for name, cols in headers.items():
        lines = (out / name).read_text().splitlines()
        assert lines[0].split(",") == cols, name
        with_rows += len(lines) > 1
    assert with_rows >= len(headers) - 1      # idle_jobs: no GPU utilization in these captures
    src = without_fields(corpus / "sacct" / "habrok_gpu_cluster_parsable2.psv", tmp_path / "habrok_no_gpu.psv",
                         {"AllocTRES", "ReqTRES"})
    out = tmp_path / "bare"
    res = CliRunner().invoke(cli, ["report", "weekly", "--from-sacct", str(src), "--tz", "Europe/Amsterdam",
                                   "--week", "2024-W16", "--no-store", "--spool", str(tmp_path / "nospool.jsonl"),
                                   "--format", "csv", "-o", str(out)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    for name, cols in headers.items():
        frame = pd.read_csv(out / name)
        assert list(frame.columns) == cols, name
    assert pd.read_csv(out / "hourly.csv").empty and pd.read_csv(out / "breakdown.csv").empty
