"""GPUs of MIG jobs in the reports: the default view counts a MIG instance as one GPU (what Slurm
allocated as gres/gpu, as sreport counts it); the physical view weighs it by its share of the GPU
(:func:`slurmkit.slurm.tres.physical_gpus`, through :func:`slurmkit.mig.instance_share`); a job on
a GPU node whose AllocTRES has no gres/gpu has unknown GPUs, listed in the data quality.

Inputs: rows of the corpus's Habrok capture (``sacct/habrok_gpu_cluster_parsable2.psv``, real
``sacct -P``; the corpus README), some edited as each test says (a labelled edit: Habrok has no
MIG nodes, so the MIG gres types are written into a real job's rows in place of its ``a100``)."""

from __future__ import annotations

import datetime as dt
import json
from fractions import Fraction

import pytest
from click.testing import CliRunner

from slurmkit.accounting.frame import load_sacct
from slurmkit.cli import cli
from slurmkit.report.energy import Assumptions
from slurmkit.report.render import to_html, to_markdown
from slurmkit.report.usage import GPU_UNTRACKED
from slurmkit.report.weekly import build_report
from slurmkit.report.window import Window
from slurmkit.slurm import tres

#: Job 7939708 of the Habrok capture: one A100 (``gres/gpu:a100=1,gres/gpu=1`` in ReqTRES and in the
#: AllocTRES of its allocation, batch and extern rows), FAILED after 4 s (2024-04-03 20:32:21-25).
MIG_JOB, MIG_ELAPSED_S = "7939708", 4
MIG_WEEK = Window(dt.datetime(2024, 4, 1, tzinfo=dt.timezone.utc), dt.datetime(2024, 4, 8, tzinfo=dt.timezone.utc))
#: Job 4034541 of the Habrok capture, as captured (no edit): 8 CPUs on GPU node a100gpu2 of
#: partition gpumedium for 03:34:13, its AllocTRES ``billing=24,cpu=8,mem=199G,node=1`` without
#: gres/gpu (Slurm did not track it).
UNTRACKED_JOB, UNTRACKED_S = "4034541", 3 * 3600 + 34 * 60 + 13
UNTRACKED_WEEK = Window(dt.datetime(2023, 8, 28, tzinfo=dt.timezone.utc),
                        dt.datetime(2023, 9, 4, tzinfo=dt.timezone.utc))


def _job_rows(habrok, tmp_path, job: str, gres_type: str | None = None):
    """The header and the rows of ``job`` (allocation and steps; several jobs: ``"a,b"``) of the
    Habrok capture, written to a file; with ``gres_type``, the labelled edit: ``gres/gpu:a100=`` ->
    ``gres/gpu:<gres_type>=`` in every row (ReqTRES, AllocTRES). -> the file's path."""
    lines = habrok.read_text().splitlines()
    keep = [lines[0]] + [ln for ln in lines[1:] if ln.split("|", 1)[0].split(".")[0] in job.split(",")]
    assert len(keep) > 1
    if gres_type is not None:
        assert all("gres/gpu:a100=1" in ln for ln in keep[1:])
        keep = [keep[0]] + [ln.replace("gres/gpu:a100=", f"gres/gpu:{gres_type}=") for ln in keep[1:]]
    path = tmp_path / f"habrok_{job.replace(',', '_')}_{gres_type or 'as_captured'}.psv"
    path.write_text("\n".join(keep) + "\n")
    return path


def _rounded(x):
    """A figure as the report prints it (:func:`slurmkit.report.weekly._num`: rounded)."""
    return pytest.approx(x, abs=1e-8)


def _report(path, window, **kw):
    rows, dq = load_sacct(path)
    now = window.end
    return build_report(rows, dq, window, Assumptions(), now=now, source=str(path), **kw)


@pytest.mark.parametrize(("tres_text", "gpus", "physical"), [
    ("billing=8,cpu=8,gres/gpu:a100_3g.20gb=1,gres/gpu=1,mem=32G,node=1", 1, Fraction(3, 7)),
    ("billing=8,cpu=8,gres/gpu:nvidia_a30_4g.24gb=1,gres/gpu=1,mem=32G,node=1", 1, Fraction(1)),
    ("billing=8,cpu=8,gres/gpu:nvidia_a30_1g.6gb=1,gres/gpu=1,mem=32G,node=1", 1, Fraction(1, 4)),
    ("gres/gpu:nvidia_a100_3g.40gb=2,gres/gpu:nvidia_a100_1g.10gb=1,gres/gpu=3", 3, Fraction(7, 7)),
    ("billing=8,cpu=8,gres/gpu:a100=1,gres/gpu=1,mem=32G,node=1", 1, Fraction(1)),   # as captured
    ("billing=15,cpu=8,gres/gpu=2,mem=125000M,node=1", 2, Fraction(2)),                # untyped only
    ("gres/gpu:a100=2", 2, Fraction(2)),
    ("billing=24,cpu=8,mem=199G,node=1", None, None),                                  # no gres/gpu
])
def test_physical_gpus_of_a_tres_string(tres_text, gpus, physical):
    """The default count is sreport's (an instance is one GPU); the physical one weighs each
    instance by compute slices over the GPU's: A100 3g 3/7, A30 4g the whole GPU, A30 1g 1/4."""
    assert tres.gpu_count(tres_text) == gpus
    assert tres.physical_gpus(tres_text) == physical


@pytest.mark.parametrize("tres_text", [
    "gres/gpu:mystery_5g.99gb=1,gres/gpu=1",        # a profile no model has
    "gres/gpu:a100_3g.20gb=1,gres/gpu=2",           # an untyped GPU beside an instance: its share is not known
])
def test_physical_gpus_unknown_is_an_error_not_a_number(tres_text):
    with pytest.raises(tres.UnknownGpuShare):
        tres.physical_gpus(tres_text)
    assert tres.gpu_count(tres_text) in (1, 2)   # the default view still counts


@pytest.mark.parametrize(("gres_type", "share"), [
    ("a100_3g.20gb", Fraction(3, 7)),               # the string: gres/gpu:a100_3g.20gb=1,gres/gpu=1
    ("nvidia_a30_4g.24gb", Fraction(1)),
    ("nvidia_a30_1g.6gb", Fraction(1, 4)),
])
def test_mig_job_gpu_hours_in_both_views(habrok, tmp_path, gres_type, share):
    """Job 7939708's rows edited to hold one MIG instance: 1 GPU and elapsed x 1 GPU-hours by
    default, as sreport counts; the physical view ``share`` GPUs and ``share`` x elapsed. In the
    frame, the totals, the group tables, Markdown and HTML."""
    path = _job_rows(habrok, tmp_path, MIG_JOB, gres_type)
    rep, a = _report(path, MIG_WEEK)
    j = a.set_index("job_id").loc[MIG_JOB]
    assert j["gpus"] == 1 and j["in_window_s"] == MIG_ELAPSED_S
    assert j["physical_gpus"] == pytest.approx(float(share))
    assert j["gpu_hours"] == pytest.approx(MIG_ELAPSED_S / 3600)
    assert j["physical_gpu_hours"] == pytest.approx(float(share) * MIG_ELAPSED_S / 3600)
    t = rep["totals"]
    assert t["gpu_hours"] == _rounded(MIG_ELAPSED_S / 3600)
    assert t["physical_gpu_hours"] == _rounded(float(share) * MIG_ELAPSED_S / 3600)
    assert t["allocation_rows_physical_unknown"] == 0
    (user,) = rep["by_user"]
    assert user["user"] == "user422" and user["gpu_hours"] == _rounded(MIG_ELAPSED_S / 3600)
    assert user["physical_gpu_hours"] == _rounded(float(share) * MIG_ELAPSED_S / 3600)
    (gt,) = rep["by_gpu_type"]
    assert gt["gpu_type"] == gres_type
    assert gt["physical_gpu_hours"] == _rounded(float(share) * MIG_ELAPSED_S / 3600)
    md = to_markdown(rep)
    assert "Physical GPU-hours " in md and "count an instance as one GPU" in md
    assert "Physical GPU-hours" in to_html(rep)


def test_mig_job_in_every_weekly_format(habrok, tmp_path):
    """The CLI on the edited capture (``a100_3g.20gb``): JSON totals, the group CSVs and jobs.csv
    carry the physical figure beside the GPU-hours."""
    import csv

    path = _job_rows(habrok, tmp_path, MIG_JOB, "a100_3g.20gb")
    out = tmp_path / "out"
    res = CliRunner(env={"SLURMKIT_SITE": None, "SLURMKIT_PROFILE": None}).invoke(cli, [
        "report", "weekly", "--from-sacct", str(path), "--week", "2024-W14", "--tz", "UTC", "--trend-weeks", "0",
        "-o", str(out), "--format", "json,csv,md"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rep = json.loads((out / "weekly.json").read_text())
    assert rep["totals"]["gpu_hours"] == _rounded(4 / 3600)
    assert rep["totals"]["physical_gpu_hours"] == _rounded(3 / 7 * 4 / 3600)
    with open(out / "by_account.csv") as fh:
        (row,) = list(csv.DictReader(fh))
    assert float(row["gpu_hours"]) == _rounded(4 / 3600)
    assert float(row["physical_gpu_hours"]) == _rounded(3 / 7 * 4 / 3600)
    with open(out / "jobs.csv") as fh:
        (job,) = list(csv.DictReader(fh))
    assert float(job["gpus"]) == 1 and float(job["physical_gpus"]) == pytest.approx(3 / 7)
    assert "Physical GPU-hours" in (out / "weekly.md").read_text()


def test_job_on_a_gpu_node_without_gres_gpu_is_unknown_not_zero(habrok, tmp_path):
    """Job 4034541 as captured ran on GPU node a100gpu2 with no gres/gpu in its AllocTRES, and no
    other job of the input (its rows alone) shows gres/gpu: Slurm did not track it. Without a
    site profile the report cannot tell: 0 GPUs, as sacct says. With the profile's node types
    (a100gpu2 has GPUs) its GPUs are unknown (NaN, not 0 GPU-hours) and it is listed in the data
    quality with the reason."""
    path = _job_rows(habrok, tmp_path, UNTRACKED_JOB)
    rep, a = _report(path, UNTRACKED_WEEK)
    j = a.set_index("job_id").loc[UNTRACKED_JOB]
    assert j["gpus"] == 0 and j["gpu_hours"] == 0 and j["in_window_s"] == UNTRACKED_S
    assert GPU_UNTRACKED not in rep["data_quality"]["repaired_reasons"]

    rep, a = _report(path, UNTRACKED_WEEK, gpu_nodes={"a100gpu1": 4, "a100gpu2": 4, "cpu1": 0})
    j = a.set_index("job_id").loc[UNTRACKED_JOB]
    assert j["gpus"] != j["gpus"] and j["physical_gpus"] != j["physical_gpus"]   # NaN: unknown
    assert j["gpu_hours"] != j["gpu_hours"] and j["cpu_hours"] == pytest.approx(8 * UNTRACKED_S / 3600)
    dq = rep["data_quality"]
    assert dq["repaired_reasons"][GPU_UNTRACKED] == 1
    (p,) = [p for p in dq["problems"] if p["reason"] == GPU_UNTRACKED]
    assert p["detail"] == f"JobID {UNTRACKED_JOB} on a100gpu2" and p["counted"] is True
    assert "Slurm did not track gres/gpu" in p["reason"]
    assert rep["totals"]["allocation_rows_gpus_unknown"] == 1
    # the only job's GPUs are unknown: so are the GPU-hours, never 0
    assert rep["totals"]["gpu_hours"] is None and rep["totals"]["physical_gpu_hours"] is None


def test_untracked_gpu_job_through_the_site_profile(habrok, tmp_path):
    """The same through ``report weekly --site``: the profile's partition puts a100gpu2 in a node
    type with GPUs."""
    path = _job_rows(habrok, tmp_path, UNTRACKED_JOB)
    prof = tmp_path / "site.toml"
    prof.write_text('[cluster]\nname = "habrok"\n[partitions.gpumedium]\nnodes = "a100gpu[1-6]"\nnode_type = "a100"\n'
                    '[node_types.a100]\ngpu_model = "a100"\ngpu_count = 4\n')
    res = CliRunner(env={"SLURMKIT_SITE": None, "SLURMKIT_PROFILE": None}).invoke(cli, [
        "report", "weekly", "--json", "--from-sacct", str(path), "--week", "2023-W35", "--tz", "UTC",
        "--trend-weeks", "0", "--site", str(prof), "-o", str(tmp_path / "o"), "--format", "json"],
        catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output)
    assert rep["data_quality"]["repaired_reasons"].get(GPU_UNTRACKED) == 1
    assert rep["totals"]["allocation_rows_gpus_unknown"] == 1


def _mig_store(habrok, tmp_path, gres_type="a100_3g.20gb"):
    """A store filled from job 7939708's edited rows (:func:`_job_rows`), one file per day as
    ``report store --from-sacct`` fills it; -> (store root, now)."""
    import pandas as pd

    from slurmkit.accounting.store import Store, fill_from_capture

    rows, _ = load_sacct(_job_rows(habrok, tmp_path, MIG_JOB, gres_type))
    now = pd.Timestamp("2024-04-19T12:00:00Z")
    root = tmp_path / "store"
    fill_from_capture(Store(root, "habrok"), rows, int(now.timestamp()))
    return root, now


def test_period_report_has_physical_gpu_hours_as_the_weekly_one(habrok, tmp_path):
    """The period report (DuckDB over the store) on the edited MIG job: GPU-hours 4 s x 1, physical
    4 s x 3/7, in its totals, group tables, Markdown and CSV; the same figures as the weekly
    report over the store's rows."""
    import csv

    import pandas as pd

    from slurmkit.accounting.store import Store
    from slurmkit.report.period import parse_period, period_report, render_markdown, write_period

    root, now = _mig_store(habrok, tmp_path)
    per = parse_period(month="2024-04")
    rep = period_report(root, per, "habrok", now=now)
    t = rep["totals"]
    assert t["gpu_hours"] == _rounded(MIG_ELAPSED_S / 3600)
    assert t["physical_gpu_hours"] == _rounded(3 / 7 * MIG_ELAPSED_S / 3600)
    assert t["allocation_rows_physical_unknown"] == 0
    (u,) = rep["by_user"]
    assert u["physical_gpu_hours"] == _rounded(3 / 7 * MIG_ELAPSED_S / 3600)
    rows, dq = Store(root, "habrok").load([d for d, _ in per.window.days()])
    weekly, _ = build_report(rows, dq, per.window, Assumptions(), now=now, horizon=now)
    assert weekly["totals"]["physical_gpu_hours"] == t["physical_gpu_hours"]
    assert weekly["by_user"][0]["physical_gpu_hours"] == u["physical_gpu_hours"]
    assert "physical_gpu_hours" in render_markdown(rep)
    from slurmkit.report.period_html import to_html as period_html

    assert "Physical GPU-hours" in period_html(rep)
    write_period(rep, tmp_path / "out", formats=("csv",))
    with open(tmp_path / "out" / "by_user.csv") as fh:
        (row,) = [r for r in csv.DictReader(fh) if r["part"] == "(period)"]
    assert float(row["physical_gpu_hours"]) == _rounded(3 / 7 * MIG_ELAPSED_S / 3600)
    assert pd.notna(rows.allocs["physical_gpus"]).all()
    # the same from the day sums (the job's row is a plain row of its day: summed, not read)
    from slurmkit.report.day_sums import summarize

    summarize(root, "habrok")
    again = period_report(root, per, "habrok", now=now)
    assert again["totals"]["physical_gpu_hours"] == t["physical_gpu_hours"]
    assert again["by_user"][0]["physical_gpu_hours"] == u["physical_gpu_hours"]


def test_store_day_without_the_physical_column_reads_unknown(habrok, tmp_path):
    """A day file written before the frame had ``physical_gpus`` (labelled edit: the column
    dropped from the stored file): its GPU-hours as before, its physical GPU-hours unknown (None),
    never 0, in both engines."""
    import pyarrow.parquet as pq

    from slurmkit.accounting.store import Store
    from slurmkit.report.period import parse_period, period_report

    root, now = _mig_store(habrok, tmp_path)
    st = Store(root, "habrok")
    path = st.day_files(dt.datetime(2024, 4, 3, tzinfo=dt.timezone.utc))[0]
    table = pq.read_table(path)
    pq.write_table(table.drop_columns(["physical_gpus"]), path)
    per = parse_period(month="2024-04")
    t = period_report(root, per, "habrok", now=now)["totals"]
    assert t["gpu_hours"] == _rounded(MIG_ELAPSED_S / 3600)
    assert t["physical_gpu_hours"] is None and t["allocation_rows_physical_unknown"] == 1
    rows, dq = st.load([d for d, _ in per.window.days()])
    weekly, _ = build_report(rows, dq, per.window, Assumptions(), now=now, horizon=now)
    assert weekly["totals"]["physical_gpu_hours"] is None
    assert weekly["totals"]["allocation_rows_physical_unknown"] == 1


def test_job_on_a_gpu_node_without_gres_gpu_beside_tracked_gpu_jobs_had_no_gpu(habrok, tmp_path):
    """Job 4034541 beside job 7939708 (as captured, ``gres/gpu:a100=1,gres/gpu=1`` on a100gpu2 too):
    Slurm tracked gres/gpu on that cluster, so a job without it asked for no GPU: 0 GPUs, not
    unknown, not listed (what the sandbox's real slurmdbd shows for a CPU-only job on a GPU
    node). Window: both jobs' (2023-08-31 to 2024-04-04)."""
    path = _job_rows(habrok, tmp_path, f"{UNTRACKED_JOB},{MIG_JOB}")
    window = Window(UNTRACKED_WEEK.start, MIG_WEEK.end)
    rep, a = _report(path, window, gpu_nodes={"a100gpu1": 4, "a100gpu2": 4})
    j = a.set_index("job_id")
    assert j.loc[UNTRACKED_JOB, "gpus"] == 0 and j.loc[UNTRACKED_JOB, "gpu_hours"] == 0
    assert j.loc[MIG_JOB, "gpus"] == 1
    assert GPU_UNTRACKED not in rep["data_quality"]["repaired_reasons"]
    assert rep["totals"]["allocation_rows_gpus_unknown"] == 0
