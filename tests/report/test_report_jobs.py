"""The per-job view (``slurmkit report jobs``) against reportseff's own test
data (real sacct outputs with reportseff's expected efficiencies: tests/report/data/README.md)
and against an independent computation on the corpus's Habrok capture; the job-size
distribution (GPUs x duration) on the same capture."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from sacct_time import seconds
from click.testing import CliRunner

from slurmkit.cli import cli
from slurmkit.report import jobs as J

DATA = Path(__file__).parent / "data"
HABROK = "sacct/habrok_gpu_cluster_parsable2.psv"
#: The field list reportseff asks sacct for (sorted, as its SacctInquirer builds it) with its
#: default format JobID,State,Elapsed,TimeEff,CPUEff,MemEff.
RS_FIELDS = "AdminComment,AllocCPUS,Elapsed,JobID,JobIDRaw,MaxRSS,NNodes,NTasks,ReqMem,State,Timelimit,TotalCPU"
#: reportseff's tests/conftest.py to_sacct_dict columns.
RS_DICT_FIELDS = "AdminComment,AllocCPUS,Elapsed,JobID,JobIDRaw,MaxRSS,NNodes,ReqMem,State,Timelimit,TotalCPU,NTasks"


@pytest.fixture(autouse=True)
def _no_site_from_the_shell(monkeypatch):
    monkeypatch.delenv("SLURMKIT_SITE", raising=False)
    monkeypatch.delenv("SLURMKIT_PROFILE", raising=False)


def _jobs(*args) -> str:
    res = CliRunner().invoke(cli, ["report", "jobs", *args], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.output


def _json(*args) -> dict:
    out = _jobs(*args, "--format", "json")
    return json.loads(out[out.index("{"):])


def _pct(x):
    return None if x is None else round(100.0 * x, 1)


def _by_id(rep: dict) -> dict:
    return {r["job_id"]: r for r in rep["jobs"]}


# reportseff's expected (State, Elapsed, TimeEff, CPUEff, MemEff), from its tests
# (troycomi/reportseff tests/test_reportseff.py): test_directory_input (24418435),
# test_debug_option / test_canceled_by_other (23000233), test_failed_no_mem (23000381),
# test_issue_16 (65638294), test_issue_58 (1234). "---" is reportseff's unknown.
REPORTSEFF = {
    "24418435": ("COMPLETED", "01:27:42", 48.7, 99.8, 47.6),
    "23000233": ("CANCELLED", "00:00:00", 0.0, None, 0.0),
    "23000381": ("FAILED", "00:00:12", None, "---", 0.0),
    "65638294": ("COMPLETED", "07:36:03", 4.5, 98.6, 24.1),
    "1234": ("TIMEOUT", "01:00:29", 100.8, 50.5, 47.3),
}


def test_reportseff_console_outputs_match():
    rep = _json("--from-sacct", str(DATA / "reportseff_console.txt"), "--sacct-fields", RS_FIELDS,
                "--delimiter", "^|^")
    got = _by_id(rep)
    assert sorted(got) == sorted(REPORTSEFF)
    assert rep["data_quality"]["rows_read"] == 48 and rep["data_quality"]["rows_counted"] == 48
    for jid, (state, elapsed, time_eff, cpu_eff, mem_eff) in REPORTSEFF.items():
        r = got[jid]
        assert r["state"] == state, jid
        assert J.hms(r["elapsed_s"]) == elapsed, jid
        assert _pct(r["time_eff"]) == time_eff, jid
        if cpu_eff == "---":
            # reportseff prints a CPU efficiency of exactly 0 as "---" (``self.cpu or "---"``):
            # TotalCPU 0 over 12 s x 8 CPUs is 0 %
            assert r["cpu_eff"] == 0.0
        else:
            assert _pct(r["cpu_eff"]) == cpu_eff, jid
        if jid == "23000233":
            # cancelled before any step ran: no MaxRSS at all. reportseff reads the missing MaxRSS
            # as 0 B (0.0 %); here it is unknown (unknown is never 0)
            assert r["mem_eff"] is None and r["mem_used_mib"] is None
            assert r["mem_req_mib"] == 4000 * 16   # 4000Mc x AllocCPUS 16
        else:
            assert _pct(r["mem_eff"]) == mem_eff, jid
    # the inputs behind the figures, read independently from the capture
    assert got["65638294"]["mem_used_mib"] == pytest.approx(8074500 / 1024)   # step .22, the largest MaxRSS
    assert got["65638294"]["mem_req_mib"] == 32 * 1024
    assert got["24418435"]["mem_req_mib"] == 1024   # 1Gn x 1 node
    assert got["1234"]["total_cpu_s"] == 3666 and got["1234"]["ncpus"] == 2


def test_reportseff_issue_41_memory_counts_every_task():
    """reportseff issue 41: MaxRSS is one task's; the step's 8 tasks together used 8 x 1947276K
    of the 16000M (95.1 %). CPU: reportseff truncates TotalCPU's milliseconds (06:57.815 ->
    417 s, 98.3 %); the exact figure is 417.815 s / (8 x 53 s) = 98.5 %."""
    rep = _json("--from-sacct", str(DATA / "reportseff_issue41.psv"), "--sacct-fields", RS_DICT_FIELDS,
                "--delimiter", "|")
    (r,) = rep["jobs"]
    assert r["job_id"] == "131042"
    assert _pct(r["mem_eff"]) == 95.1
    assert r["mem_used_mib"] == pytest.approx(8 * 1947276 / 1024)
    assert r["cpu_eff"] == pytest.approx(417.815 / (8 * 53))
    assert round(100 * 417 / (8 * 53), 1) == 98.3   # reportseff's, truncated
    assert _pct(r["time_eff"]) == round(100 * 53 / 60, 1)


def test_reportseff_issue_37_multinode_cpu():
    """reportseff issue 37 (720 CPUs on 20 nodes, UNLIMITED): CPU efficiency 5.0 %; no time
    limit, so no time efficiency; ReqMem 191846Mn x 20 nodes."""
    rep = _json("--from-sacct", str(DATA / "reportseff_issue37.psv"),
                "--sacct-fields", RS_DICT_FIELDS.replace(",NTasks", ""), "--delimiter", "|")
    (r,) = rep["jobs"]
    assert _pct(r["cpu_eff"]) == 5.0
    assert r["time_eff"] is None and r["timelimit_s"] is None
    assert r["mem_req_mib"] == 191846 * 20
    assert r["mem_used_mib"] == pytest.approx(33824748 / 1024)


def test_table_and_csv_say_unknown():
    args = ("--from-sacct", str(DATA / "reportseff_console.txt"), "--sacct-fields", RS_FIELDS, "--delimiter", "^|^")
    table = _jobs(*args, "23000233", "24418435")
    lines = table.splitlines()
    assert lines[0].split()[:8] == ["JobID", "User", "Account", "State", "Elapsed", "TimeEff", "CPUEff", "MemEff"]
    # the capture has no User and no Account field: unknown in their columns, not blank (the
    # account says which field was missing)
    assert all("unknown (no Account field)" in ln for ln in lines[1:])
    row = {ln.split()[0]: ln.replace("unknown (no Account field)", "").split() for ln in lines[1:]}
    assert row["24418435"][1:7] == ["unknown", "COMPLETED", "01:27:42", "48.7%", "99.8%", "47.6%"]
    assert row["23000233"][1:7] == ["unknown", "CANCELLED", "00:00:00", "0.0%", "unknown", "unknown"]
    rows = list(csv.DictReader(io.StringIO(_jobs(*args, "--format", "csv", "--state", "cancelled,failed"))))
    assert [r["job_id"] for r in rows] == ["23000233", "23000381"]
    assert rows[0]["mem_eff"] == "unknown" and rows[0]["gpus"] == "unknown"   # no GPU field at all
    assert rows[0]["energy_source"] == "none" and rows[0]["energy_kwh"] == "unknown"




def _mib(text: str) -> float:
    """sacct's 1294440K / 37956M / 3G / bare bytes as MiB (an independent parser)."""
    scale = {"K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0 ** 2}
    return float(text[:-1]) * scale[text[-1]] if text[-1] in scale else float(text) / 1024 ** 2


def test_habrok_against_an_independent_computation(corpus):
    """Every allocation row of the Habrok capture: time efficiency Elapsed / Timelimit, CPU
    efficiency TotalCPU / (Elapsed x NCPUS) where TotalCPU > 0, GPUs from AllocTRES, GPU
    utilization and memory from the steps' TRESUsage (gres/gpuutil, gres/gpumem), computed here
    from the text with the csv module."""
    src = corpus / HABROK
    rep = _json("--from-sacct", str(src), "--tz", "Europe/Amsterdam")
    got = _by_id(rep)
    rows = list(csv.DictReader(src.open(), delimiter="|"))
    allocs = [r for r in rows if "." not in r["JobID"]]
    assert len(got) == len(allocs) == 100
    checked = {"cpu": 0, "gpu_util": 0, "gpu_mem": 0}
    for r in allocs:
        g = got[r["JobID"]]
        assert g["user"] == r["User"] and g["state"] == r["State"].split()[0]
        el = seconds(r["Elapsed"])
        if r["State"] != "PENDING":
            assert g["elapsed_s"] == el
        if r["Timelimit"] and el > 0:
            assert g["time_eff"] == pytest.approx(el / seconds(r["Timelimit"]), abs=5e-7)
        elif g["time_eff"] is None:   # never started (pending, or cancelled before it started)
            assert el == 0 and (r["Start"] in ("None", "Unknown") or r["Start"] == r["End"]), r["JobID"]
        cpu = seconds(r["TotalCPU"])
        if cpu > 0 and el > 0:
            assert g["cpu_eff"] == pytest.approx(cpu / (el * int(r["NCPUs"])), abs=5e-7), r["JobID"]
            checked["cpu"] += 1
        tres = dict(kv.split("=", 1) for kv in r["AllocTRES"].split(",") if "=" in kv)
        assert g["gpus"] == float(tres.get("gres/gpu", 0)), r["JobID"]
        steps = [s for s in rows if s["JobID"].startswith(r["JobID"] + ".")]
        usage = [dict(kv.split("=", 1) for kv in s["TRESUsageInMax"].split(",") if "=" in kv) for s in steps]
        mem = [_mib(u["gres/gpumem"]) for u in usage if "gres/gpumem" in u]
        if mem and g["gpus"]:
            assert g["gpu_mem_mib"] == pytest.approx(max(mem)), r["JobID"]
            checked["gpu_mem"] += 1
        if g["gpu_util_pct"] is not None:
            checked["gpu_util"] += 1
            assert g["gpu_util_source"] == "sacct (gres/gpuutil)"
    assert got["7965768"]["gpu_util_pct"] == 90.0 and got["7965768"]["gpu_type"] == "v100"
    assert got["7946767"]["gpu_util_pct"] == 54.0
    assert checked["cpu"] >= 20 and checked["gpu_mem"] >= 3 and checked["gpu_util"] >= 3, checked
    # nothing is 0 that is not known: a job without GPUs has no GPU utilization
    assert all(r["gpu_util_pct"] is None for r in rep["jobs"] if r["gpus"] == 0)


def test_filters_and_array_base_id(corpus):
    src = str(corpus / HABROK)
    rep = _json("--from-sacct", src, "--tz", "Europe/Amsterdam", "--user", "user46")
    assert rep["jobs"] and {r["user"] for r in rep["jobs"]} == {"user46"}
    # a job's base ID takes every task of the array
    tasks = _json("--from-sacct", src, "--tz", "Europe/Amsterdam", "2353407")["jobs"]
    assert [r["job_id"] for r in tasks] == ["2353407_3"]
    win = _json("--from-sacct", src, "--tz", "Europe/Amsterdam", "--start", "2024-04-05", "--end", "2024-04-06")["jobs"]
    assert win and all(r["start"] < "2024-04-06" and (r["end"] is None or r["end"] >= "2024-04-05") for r in win)
    assert "7946767" in {r["job_id"] for r in win}


def test_job_sizes_add_up_to_the_weekly_totals(tmp_path, corpus):
    """The weekly report's ``job_sizes`` on Habrok's capture: the cells' jobs sum to
    ``totals.jobs`` and their GPU-hours to ``totals.gpu_hours``; a 1-GPU job of 15:28:22
    (7965768) is in the 1 x 12-24h cell."""
    out = tmp_path / "out"
    res = CliRunner().invoke(cli, ["report", "weekly", "--from-sacct", str(corpus / HABROK), "--tz", "Europe/Amsterdam",
                                   "-o", str(out), "--format", "json,csv,md", "--trend-weeks", "0", "--allow-skipped"],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rep = json.loads((out / "weekly.json").read_text())
    js = rep["job_sizes"]
    assert js["gpu_buckets"] == ["0", "1", "2-4", "5-8", "9-16", "17-64", "65+"]
    assert js["duration_buckets"] == ["<1h", "1-4h", "4-12h", "12-24h", ">24h"]
    assert sum(map(sum, js["jobs"])) == rep["totals"]["jobs"]
    assert sum(map(sum, js["gpu_hours"])) == pytest.approx(rep["totals"]["gpu_hours"])
    assert js["jobs"][1][3] >= 1
    cells = list(csv.DictReader((out / "job_sizes.csv").open()))
    assert len(cells) == 7 * 5 and sum(int(c["jobs"]) for c in cells) == rep["totals"]["jobs"]
    assert "## Job sizes" in (out / "weekly.md").read_text()


def test_job_sizes_unknown_gpus_are_their_own_row():
    import pandas as pd

    runs = pd.DataFrame({"job_code": [0, 1, 2, 2], "start": pd.to_datetime([1, 2, 3, 4], unit="h", utc=True),
                         "gpus": [float("nan"), 0.5, 8.0, 8.0], "run_s": [10.0, 3600.0, 90000.0, 100.0],
                         "gpu_hours": [float("nan"), 0.5, 200.0, 0.2]})
    js = J.job_sizes(runs)
    assert js["gpu_buckets"][-1] == "unknown"
    assert js["jobs"][-1] == [1, 0, 0, 0, 0] and js["gpu_hours"][-1] == [None] * 5
    assert js["jobs"][1][1] == 1          # half a GPU (MIG) rounds up to the 1-GPU row, 1-4h
    # a requeued job counts once, in its last attempt's cell; each attempt's GPU-hours in its own
    assert js["jobs"][3] == [1, 0, 0, 0, 0] and js["gpu_hours"][3][4] == 200.0 and js["gpu_hours"][3][0] == 0.2


@pytest.mark.parametrize("name, extra, want", [
    # (capture, options, {JobID: (state, elapsed_s, cpu_eff, mem_eff, energy_source)}) read off the rows
    ("sacct/cscs_energy_parsable2.psv", (), {"38113": ("COMPLETED", 2102.0, None, None, "slurm")}),
    # no Elapsed, Start or End in the capture: how long 89 ran (it has .batch and .0 steps) is unknown
    ("sacct2/torchx_sacct-parsable2_CANCELLED-by_L1083-1086.psv", (), {"89": ("CANCELLED", None, None, None, "none")}),
    ("sacct/pcluster_issue59_node_fail.psv", ("--sacct-fields", "{corpus}/sacct/pcluster_header_fields.txt"),
     {"12": ("NODE_FAIL", 1232.0, 0.0, None, "none")}),
])
def test_corpus_captures(corpus, name, extra, want):
    """Other real captures: no TotalCPU in the capture (cscs) is an unknown CPU efficiency;
    Slurm's ConsumedEnergyRaw is the energy source (cscs: 20569245 J = 5.71 kWh)."""
    args = [a.format(corpus=corpus) for a in extra]
    got = _by_id(_json("--from-sacct", str(corpus / name), *args))
    for jid, (state, el, cpu, mem, src) in want.items():
        r = got[jid]
        assert (r["state"], r["elapsed_s"], r["cpu_eff"], r["mem_eff"], r["energy_source"]) == (state, el, cpu, mem, src)
    if name.startswith("sacct/cscs"):
        line = (corpus / name).read_text().splitlines()[1].split("|")
        assert got["38113"]["energy_kwh"] == pytest.approx(float(line[2]) / 3.6e6, abs=1e-6)


def test_trends_have_cpu_hours_and_unknown_is_not_zero():
    """The trends' CPU-hours per week beside the GPU-hours; a week stored from a capture
    without NCPUS (cpu_hours NaN) reads unknown, a week not stored –, an empty stored week 0."""
    import pandas as pd

    from slurmkit.report import render
    from slurmkit.report.trends import trends

    def rows(week, cpu, gpu, jobs):
        return [{"week": week, "kind": k, "name": n, "jobs": jobs, "gpu_hours": gpu, "cpu_hours": cpu,
                 "wasted_gpu_hours": 0.0, "provisional_gpu_hours": 0.0, "energy_kwh": None, "provisional": False}
                for k, n in (("week", ""), ("account", "a1"))]
    tables = pd.DataFrame(rows("2026-W01", 10.0, 2.0, 3) + rows("2026-W02", float("nan"), 4.0, 5)
                          + rows("2026-W04", 0.0, 0.0, 0))
    weeks = ["2026-W01", "2026-W02", "2026-W03", "2026-W04"]
    t = trends(tables, weeks)
    (acct,) = t["by_account"]
    assert acct["cpu_hours"] == [10.0, None, None, 0.0] and acct["gpu_hours"] == [2.0, 4.0, None, 0.0]
    assert acct["total_cpu_hours"] is None and acct["total_gpu_hours"] == 6.0
    assert t["totals"]["cpu_hours"] == [10.0, None, None, 0.0] and t["totals"]["jobs"] == [3, 5, None, 0]
    tabs = {name: rows_ for name, _h, rows_ in render.trend_tables(t)}
    assert tabs["CPU-hours by account"] == [["a1", "10.0", "unknown", "–", "0", "unknown"]]
    assert tabs["Cluster per week"][1] == ["CPU-hours", "10.0", "unknown", "–", "0"]
    csv_rows = [r for r in render.trend_rows(t) if r["kind"] == "account"]
    assert [r["cpu_hours"] for r in csv_rows] == [10.0, "unknown", None, 0.0]
    md = "\n".join(render._md_trends({"trends": t}))
    assert "### CPU-hours by partition" in md and "| a1 | 10.0 | unknown | – | 0 | unknown |" in md


def test_store_source_gives_the_capture_figures(tmp_path, corpus):
    """``--store DIR`` reads the days from the Parquet store (no sacct): the same figures as
    the capture the days were stored from."""
    import datetime as dt

    from slurmkit.accounting.frame import load_sacct
    from slurmkit.accounting.store import Store

    src = corpus / HABROK
    rows, dq = load_sacct(src, tz="Europe/Amsterdam")
    store = Store(tmp_path / "store")
    store.save_day(dt.datetime(2024, 4, 5, tzinfo=dt.timezone.utc), rows, dq)
    from_store = _by_id(_json("--store", str(tmp_path / "store"), "--start", "2024-04-05", "--end", "2024-04-06",
                              "--now", "2024-04-20T00:00:00"))
    from_file = _by_id(_json("--from-sacct", str(src), "--tz", "Europe/Amsterdam", "--start", "2024-04-05",
                             "--end", "2024-04-06"))
    assert from_store and set(from_store) == set(from_file)
    for jid, r in from_file.items():
        if not r["provisional"]:
            s = from_store[jid]
            assert (s["elapsed_s"], s["cpu_eff"], s["mem_eff"], s["gpus"], s["gpu_util_pct"]) == \
                (r["elapsed_s"], r["cpu_eff"], r["mem_eff"], r["gpus"], r["gpu_util_pct"]), jid


def test_has_repeats_counts_small_codes_and_sorts_others():
    import numpy as np

    assert not J.has_repeats(np.array([2, 0, 1], np.int64))
    assert J.has_repeats(np.array([0, 1, 1], np.int64))            # dense codes: a count per code
    assert J.has_repeats(np.array([10**12, 5, 10**12], np.int64))   # far apart: sorted
    assert not J.has_repeats(np.array([10**12, 5, -3], np.int64))
    assert J.has_repeats(np.array([-1, 3, -1], np.int64))          # negative: sorted
    assert not J.has_repeats(np.array([7], np.int64)) and not J.has_repeats(np.array([], np.int64))
