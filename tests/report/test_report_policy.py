"""Energy per GPU-hour by clock policy: spool records (as the epilog writes them, with the
policy each job ran under) joined with sacct rows, in JSON, CSV, Markdown and HTML."""

from __future__ import annotations

import csv
import json

import pandas as pd
import pytest

from slurmkit.accounting.frame import jobs_frame
from slurmkit.accounting.read import read_sacct_bytes
from slurmkit.hooks import clock_policy as cp
from slurmkit.hooks import spool
from slurmkit.report.energy import Assumptions, read_spool
from slurmkit.report.render import to_markdown, write_outputs
from slurmkit.report.weekly import build_report

from sacct_rows import T0, WEEK, row, text

NOW = pd.Timestamp(T0 + 30 * 86400, unit="s", tz="UTC")
KWH_MJ = 3_600_000_000  # mJ in one kWh


def _policy(name, status="applied", origin=None):
    return cp.JobPolicy(name=name, origin=origin or f"partition {name}", status=status,
                        reason=None if status in ("applied", "resting") else f"requested, {status}: observe mode")


def _rec(job, node, kwh, policy, gpus=2):
    """A spool record as the epilog builds it: ``gpus`` GPUs sharing ``kwh`` measured kWh."""
    mj = int(kwh * KWH_MJ)
    rows = [spool.GpuEnergy(i, i, i, f"GPU-{i}", None, 1_000, 1_000 + mj // gpus + (mj % gpus if i == 0 else 0))
            for i in range(gpus)]
    return spool.record(job, node, "alice", 1000, T0 + 601.0, T0 + 4200.0, rows, "live", policy=policy)


def test_energy_per_gpu_hour_by_policy(tmp_path):
    d = tmp_path / "spool"
    for rec in [_rec("1", "n1", 1.0, _policy("steady")),                              # 2 GPU-h, 0.5 /GPU-h
                _rec("2", "n3", 0.6, _policy("eco")), _rec("2", "n4", 0.6, _policy("eco")),  # 4 GPU-h
                _rec("3", "n1", 1.4, _policy("rest", "resting", "node type h100")),   # the resting policy
                _rec("5", "n2", 0.9, None),                                          # no policy recorded
                _rec("6", "n2", 0.3, _policy("steady", "not applied"), gpus=1),       # steady asked, not set
                _rec("7", "n1", 0.5, _policy("steady")),
                _rec("7", "n2", 0.5, _policy("steady", "partly applied"))]:
        spool.append(d, rec)
    with open(d / "n2.jsonl", "a") as fh:  # a line of an older version: no "policy" key at all
        fh.write(json.dumps({"v": 1, "job_id": "9", "node": "n2", "start_s": T0 + 601.0, "source": "measured",
                             "energy_mj_total": KWH_MJ // 10,
                             "gpus": [{"index": 0, "start_energy_mj": 0, "end_energy_mj": KWH_MJ // 10}]}) + "\n")
    two = "cpu=4,gres/gpu=2,mem=8G,node=1"
    rows = [row(JobID="1", Partition="steady"),
            row(JobID="2", Partition="eco", NNodes="2", NodeList="n[3-4]", AllocTRES="cpu=8,gres/gpu=4,mem=16G,node=2"),
            row(JobID="3", Partition="gpu"),
            row(JobID="4", Partition="gpu"),                          # no spool record: modelled energy
            row(JobID="5", Partition="gpu"),
            row(JobID="6", Partition="steady", AllocTRES="cpu=4,gres/gpu=1,mem=8G,node=1"),
            row(JobID="7", Partition="steady", NNodes="2", NodeList="n[1-2]", AllocTRES="cpu=8,gres/gpu=4,mem=16G,node=2"),
            row(JobID="8", Partition="cpu", AllocTRES="cpu=4,mem=8G,node=1"),  # CPU only: not in the table
            row(JobID="9", Partition="gpu", AllocTRES=two)]
    table, dq = read_sacct_bytes(text(rows), "t.psv")
    sp, problems = read_spool(str(d))
    assert problems == []
    rep, allocs = build_report(jobs_frame(table, dq, "t.psv"), dq, WEEK, Assumptions(default_tdp_w=700.0),
                               spool=sp, now=NOW)
    got = {r["policy"]: r for r in rep["energy_by_policy"]}
    assert list(got) == ["none recorded", "eco", "mixed", "rest", "steady", "steady (not applied)"]  # most GPU-h first
    assert got["steady"] == {"policy": "steady", "jobs": 1, "gpu_hours": pytest.approx(2.0),
                             "measured_gpu_hours": pytest.approx(2.0), "energy_kwh": pytest.approx(1.0),
                             "kwh_per_gpu_hour": pytest.approx(0.5)}
    assert (got["eco"]["jobs"], got["eco"]["gpu_hours"], got["eco"]["energy_kwh"]) == (1, pytest.approx(4.0),
                                                                                       pytest.approx(1.2))
    assert got["eco"]["kwh_per_gpu_hour"] == pytest.approx(0.3)
    assert got["rest"]["kwh_per_gpu_hour"] == pytest.approx(0.7)
    assert got["steady (not applied)"]["kwh_per_gpu_hour"] == pytest.approx(0.3)
    assert (got["mixed"]["jobs"], got["mixed"]["energy_kwh"]) == (1, pytest.approx(1.0))  # two nodes, two labels
    # counted, not dropped: job 4 (no record, modelled energy left out), 5 (no policy), 9 (an older line)
    none = got["none recorded"]
    assert (none["jobs"], none["gpu_hours"], none["measured_gpu_hours"]) == (3, pytest.approx(6.0), pytest.approx(4.0))
    assert none["energy_kwh"] == pytest.approx(1.0) and none["kwh_per_gpu_hour"] == pytest.approx(0.25)
    assert sum(r["gpu_hours"] for r in rep["energy_by_policy"]) == pytest.approx(rep["totals"]["gpu_hours"])
    assert dict(zip(allocs["key_id"], allocs["clock_policy"].astype(str)))["8"] == "none recorded"

    md = to_markdown(rep)
    assert "## Energy per GPU-hour by clock policy" in md
    assert "| steady | 1 | 2.00 | 2.00 | 1.00 | 0.500 |" in md
    assert "| none recorded | 3 | 6.00 | 4.00 | 1.00 | 0.250 |" in md
    out = tmp_path / "out"
    write_outputs(rep, allocs, out)
    with open(out / "energy_by_policy.csv", newline="") as fh:
        csv_rows = {r["policy"]: r for r in csv.DictReader(fh)}
    assert float(csv_rows["eco"]["kwh_per_gpu_hour"]) == pytest.approx(0.3)
    assert json.loads((out / "weekly.json").read_text())["energy_by_policy"] == rep["energy_by_policy"]
    html = (out / "weekly.html").read_text()
    assert "Energy per GPU-hour by clock policy" in html and "<td class=\"l\">steady (not applied)</td>" in html


def test_no_gpu_job_gives_an_empty_table_with_its_header(tmp_path):
    table, dq = read_sacct_bytes(text([row(JobID="8", AllocTRES="cpu=4,mem=8G,node=1")]), "t.psv")
    rep, allocs = build_report(jobs_frame(table, dq, "t.psv"), dq, WEEK, Assumptions(), now=NOW)
    assert rep["energy_by_policy"] == []
    assert "clock policy" not in to_markdown(rep)
    write_outputs(rep, allocs, tmp_path / "out", formats=("csv",))
    assert (tmp_path / "out" / "energy_by_policy.csv").read_text().splitlines() == [
        "policy,jobs,gpu_hours,measured_gpu_hours,energy_kwh,kwh_per_gpu_hour"]
