"""Unknown stays unknown: a figure whose input is absent is null in the
JSON, "unknown" with its reason in Markdown / HTML, listed in data quality, and nothing derived
from it reads 0. Inputs: a real AllocGRES-only capture (tests/report/data/README.md) and the
corpus's Habrok capture with fields taken out (labelled edits of a real capture)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from capture_edit import without_fields
from click.testing import CliRunner

from slurmkit.cli import cli

DATA = Path(__file__).parent / "data"
HABROK = "sacct/habrok_gpu_cluster_parsable2.psv"


@pytest.fixture(autouse=True)
def _no_site_from_the_shell(monkeypatch):
    monkeypatch.delenv("SLURMKIT_SITE", raising=False)


def _dur(s: str) -> int:
    d, _, hms = s.rpartition("-")
    h, m, sec = (int(x) for x in hms.split(":"))
    return int(d or 0) * 86400 + h * 3600 + m * 60 + sec


def _report(tmp_path, src, *args, fmt="json,md,csv,html"):
    out = tmp_path / "out"
    res = CliRunner().invoke(cli, ["report", "weekly", "--from-sacct", str(src), "-o", str(out),
                                   "--format", fmt, "--trend-weeks", "0", "--allow-skipped", *args],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return json.loads((out / "weekly.json").read_text()), out, res.output


def test_allocgres_gives_gpu_counts(tmp_path):
    rep, out, _ = _report(tmp_path, DATA / "safe_oxford_allocgres.psv", "--start", "2017-01-02", "--end", "2017-01-16")
    # independent: GPUs of AllocGRES x Elapsed of each job, by hand from the file
    want = 0
    for ln in (DATA / "safe_oxford_allocgres.psv").read_text().splitlines()[1:]:
        p = ln.split("|")
        if p[12].startswith("gpu:"):
            want += int(p[12].split(":")[-1]) * _dur(p[14])
    assert rep["totals"]["gpu_hours"] == pytest.approx(want / 3600.0)
    assert rep["totals"]["gpu_jobs"] == 4
    assert "gpu_hours" not in rep["unknown"]
    # no utilization, no energy: unknown, not 0 / "no idle jobs"
    assert rep["totals"]["energy_kwh"] is None
    assert set(rep["totals"]["energy_kwh_by_source"].values()) == {None}
    assert rep["efficiency"]["gpu_hours_near_zero_util"] is None
    assert rep["efficiency"]["idle_jobs"] is None
    assert "gpu_utilization" in rep["unknown"] and "energy_kwh" in rep["unknown"]
    md = (out / "weekly.md").read_text()
    assert "Unknown: GPU utilization" in md and "GPU-hours at ~0 % utilization unknown" in md
    html = (out / "weekly.html").read_text()
    assert "GPU utilization unknown: no GPU utilization in the input" in html
    assert "None: every GPU job" not in html
    reasons = [p["reason"] for p in rep["data_quality"]["notes"]]
    assert "unknown: gpu_utilization" in reasons and "unknown: energy_kwh" in reasons
    assert "unknown: energy_kwh" in (out / "data_quality.csv").read_text()


def test_no_gpu_field_no_ncpus_is_unknown(tmp_path):
    src = without_fields(DATA / "safe_oxford_allocgres.psv", tmp_path / "edit.psv", {"AllocGRES", "AllocCPUS"})
    rep, out, text = _report(tmp_path, src, "--start", "2017-01-02", "--end", "2017-01-16",
                             "--capacity-gpus", "8", "--price-per-gpu-hour", "2")
    t = rep["totals"]
    assert rep["totals"]["jobs"] == 8
    for k in ("gpu_hours", "cpu_hours", "wasted_gpu_hours", "gpu_jobs", "provisional_gpu_hours", "cost_total"):
        assert t[k] is None, k
    assert rep["utilization"]["utilization"] is None
    assert rep["hourly"]["peak_at_once"] is None and rep["hourly"]["gpus_in_use"] == []
    assert set(rep["unknown"]) >= {"gpu_hours", "cpu_hours", "utilization", "gpu_utilization"}
    assert all(g["gpu_hours"] is None and g["wasted_gpu_hours"] is None for g in rep["by_user"])
    assert all(o["gpu_hours"] is None for o in rep["outcomes"])
    md = (out / "weekly.md").read_text()
    assert "Unknown: GPU-hours" in md and "no AllocTRES, AllocGRES or ReqTRES" in md
    assert "Unknown: CPU-hours — no NCPUS or AllocCPUS field in the input." in md
    # CPU efficiency says the same why (it used to say "no finished job
    # with a TotalCPU", though they have one)
    assert "CPU efficiency unknown (no NCPUS or AllocCPUS field in the input)" in md
    totals_row = md.split("## Totals")[1].splitlines()[4]
    assert totals_row.startswith("| 8 | unknown | unknown | unknown | unknown |"), totals_row
    assert "unknown GPU-h, unknown CPU-h" in text
    html = (out / "weekly.html").read_text()
    assert '<th class="l">GPU-hours</th><td>unknown' in html
    assert "unknown: gpu_hours" in (out / "data_quality.csv").read_text()


def test_reqtres_only_is_marked_requested(tmp_path, corpus):
    full, _, _ = _report(tmp_path / "a", corpus / HABROK, "--start", "2020-01-01", "--end", "2030-01-01", "--as-of", "2030-01-01",
                         fmt="json")
    src = without_fields(corpus / HABROK, tmp_path / "habrok_no_alloctres.psv", {"AllocTRES"})
    rep, out, _ = _report(tmp_path / "b", src, "--start", "2020-01-01", "--end", "2030-01-01", "--as-of", "2030-01-01",
                          fmt="json,csv")
    assert rep["totals"]["gpu_hours"] is not None and rep["totals"]["gpu_hours"] > 0
    assert rep["totals"]["gpu_hours_from_request"] == rep["totals"]["gpu_hours"]
    assert full["totals"]["gpu_hours_from_request"] == 0
    reasons = {p["reason"]: p["detail"] for p in rep["data_quality"]["notes"]}
    assert "GPUs requested, not allocated" in reasons
    assert "GPU count from ReqTRES" in reasons["GPUs requested, not allocated"]


def test_energy_unknown_is_null(tmp_path, corpus):
    rep, _, _ = _report(tmp_path, corpus / HABROK, "--start", "2020-01-01", "--end", "2030-01-01", "--as-of", "2030-01-01",
                        fmt="json")
    assert rep["totals"]["energy_known"] is False
    assert rep["totals"]["energy_kwh"] is None
    # Habrok has gres/gpuutil: utilization known, idle jobs listed (a list, possibly empty)
    assert "gpu_utilization" not in rep["unknown"]
    assert isinstance(rep["efficiency"]["idle_jobs"], list)
    assert rep["efficiency"]["gpu_hours_near_zero_util"] is not None


def test_slurm_energy_from_alloctres_has_its_own_provenance(tmp_path, corpus):
    """energy= in AllocTRES (CSCS capture): with ConsumedEnergyRaw taken out
    (a labelled edit) the job's energy comes from the TRES, named as its own source."""
    src = corpus / "sacct" / "cscs_energy_parsable2.psv"
    head = src.read_text().splitlines()[0].split("|")
    tres = [ln.split("|")[head.index("AllocTRES")] for ln in src.read_text().splitlines()[1:]]
    joules = [int(e.split("=")[1]) for t in tres for e in t.split(",") if e.startswith("energy=")][0]
    edit = without_fields(src, tmp_path / "cscs_no_consumedenergy.psv", {"ConsumedEnergyRaw", "ConsumedEnergy"})
    args = ("--start", "2024-03-11", "--end", "2024-03-18", "--as-of", "2024-03-16")
    rep, out, _ = _report(tmp_path / "a", edit, *args, fmt="json,md,csv")
    assert rep["totals"]["energy_kwh_by_source"]["slurm_tres"] == pytest.approx(joules / 3.6e6)
    assert rep["energy_sources"]["jobs"]["slurm_tres"] == 1
    assert any(s.startswith("slurm_tres (energy= of AllocTRES") for s in rep["energy_sources"]["order"])
    assert "| slurm_tres |" in (out / "weekly.md").read_text()
    assert "slurm_tres" in (out / "jobs.csv").read_text()
    # with ConsumedEnergyRaw: that one (the same joules here), named slurm
    rep2, _, _ = _report(tmp_path / "b", src, *args, fmt="json")
    assert rep2["energy_sources"]["jobs"]["slurm"] == 1 and rep2["energy_sources"]["jobs"]["slurm_tres"] == 0
    assert rep2["totals"]["energy_kwh"] == pytest.approx(joules / 3.6e6)


def test_slurm_energy_from_steps_tresusageintot_has_its_own_provenance(tmp_path, corpus):
    """energy= in the steps' TRESUsageInTot, on a labelled edit of the CSCS
    capture: each step row's own ConsumedEnergyRaw (joules Slurm's energy plugin measured for
    that step) moved into a TRESUsageInTot ``energy=`` field, the allocation row's
    TRESUsageInTot empty (as sacct prints it), ConsumedEnergy(Raw) and AllocTRES' energy= taken
    out. The job's figure is its largest step's (extern: every node, the whole run), which is
    Slurm's own job figure in the unedited capture, not the sum of the steps."""
    src = corpus / "sacct" / "cscs_energy_parsable2.psv"
    lines = src.read_text().splitlines()
    head = lines[0].split("|")
    ce, tr = head.index("ConsumedEnergyRaw"), head.index("AllocTRES")
    rows = [ln.split("|") for ln in lines[1:]]
    job_joules = int(rows[0][ce])
    steps = {r[0]: int(r[ce]) for r in rows if "." in r[0]}
    assert steps == {"38113.batch": 5094129, "38113.extern": 20543125}   # the capture as read
    keep = [i for i, n in enumerate(head) if n not in ("ConsumedEnergyRaw", "ConsumedEnergy")]
    out_lines = ["|".join([head[i] for i in keep] + ["TRESUsageInTot"])]
    for r in rows:
        r = list(r)
        r[tr] = ",".join(t for t in r[tr].split(",") if not t.startswith("energy="))
        usage = f"energy={r[ce]}" if "." in r[0] else ""
        out_lines.append("|".join([r[i] for i in keep] + [usage]))
    edit = tmp_path / "cscs_energy_in_tresusageintot.psv"
    edit.write_text("\n".join(out_lines) + "\n")
    args = ("--start", "2024-03-11", "--end", "2024-03-18", "--as-of", "2024-03-16")
    rep, out, _ = _report(tmp_path / "a", edit, *args, fmt="json,md,csv,html")
    assert max(steps.values()) == job_joules and sum(steps.values()) != job_joules
    assert rep["totals"]["energy_kwh"] == pytest.approx(job_joules / 3.6e6)
    assert rep["totals"]["energy_kwh_by_source"]["slurm_usage"] == pytest.approx(job_joules / 3.6e6)
    assert rep["energy_sources"]["jobs"]["slurm_usage"] == 1
    assert rep["energy_sources"]["jobs"]["slurm_tres"] == 0 and rep["energy_sources"]["jobs"]["slurm"] == 0
    assert any(s.startswith("slurm_usage (the largest energy= of the job's steps' TRESUsageInTot")
               for s in rep["energy_sources"]["order"])
    assert "| slurm_usage |" in (out / "weekly.md").read_text()
    with open(out / "jobs.csv", newline="") as fh:
        jobs = list(csv.DictReader(fh))
    assert [(j["job_id"], j["energy_source"], float(j["step_energy_j"])) for j in jobs] == [
        ("38113", "slurm_usage", job_joules)]
    html = (out / "weekly.html").read_text()
    assert "slurm_usage: the largest energy= of the job&#39;s steps&#39; TRESUsageInTot" in html \
        or "slurm_usage: the largest energy= of the job's steps' TRESUsageInTot" in html
    # --no-trust-slurm-energy turns this source off too: the job's energy is then unknown
    rep2, _, _ = _report(tmp_path / "b", edit, *args, "--no-trust-slurm-energy", fmt="json")
    assert rep2["energy_sources"]["jobs"]["slurm_usage"] == 0 and rep2["energy_sources"]["jobs"]["none"] == 1



def test_figures_from_partial_energy_carry_its_coverage():
    """Facility kWh, CO2e and cost made from partial energy say the energy's coverage; a cost
    whose energy part is unknown says the GPU-hour part it has. Totals of the goldens
    ``weekly_habrok_assumed`` (Habrok's capture, real: 9 of 90 jobs with energy) and
    ``period_all_2024-03_by_week`` (1 of 39), the latter edited to a GPU-hour price with the
    energy unknown (labelled edit)."""
    from goldens_script import goldens_script

    from slurmkit.report.render import derived_text

    G = goldens_script()
    t = G.read_golden("weekly_habrok_assumed")["totals"]
    assert derived_text(t, "facility_kwh") == "110 kWh (9 of 90 jobs)"
    assert derived_text(t, "co2e_kg") == "5.51 kg (9 of 90 jobs)"
    assert derived_text(t, "cost_total").endswith("(9 of 90 jobs)")
    p = dict(G.read_golden("period_all_2024-03_by_week")["totals"])
    assert derived_text(p, "co2e_kg") == "–"   # (no carbon intensity given)
    edit = {**p, "energy_kwh": None, "energy_coverage": {**p["energy_coverage"], "known": False},
            "cost_gpu_hours": 330.6, "currency": "EUR"}
    assert derived_text(edit, "cost_total") == "331 EUR for GPU-hours; energy cost unknown"
    assert derived_text(edit, "facility_kwh") == "unknown"
