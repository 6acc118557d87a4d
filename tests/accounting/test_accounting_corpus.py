"""Every file of ../shared/corpus/sacct ingests with the right counts.

The expectations are recomputed here by hand from each file's own values (a plain split of
the lines, no slurmkit parsing): rows, allocations, jobs, GPU-hours (untyped gres/gpu=N else
the typed sum, times Elapsed), CPU-hours (NCPUS x Elapsed).
"""

from __future__ import annotations

import datetime as dt
import re

import pandas as pd
import pytest
from click.testing import CliRunner

from slurmkit.accounting.frame import jobs_frame
from slurmkit.accounting.read import AccountingInputError, read_field_list, read_sacct_file
from slurmkit.report.energy import Assumptions
from slurmkit.report.weekly import build_report
from slurmkit.report.window import Window

pytestmark = pytest.mark.corpus

NOW = pd.Timestamp("2025-01-01", tz="UTC")  # running jobs end here
WIDE = Window(dt.datetime(2022, 1, 1, tzinfo=dt.timezone.utc), dt.datetime(2025, 1, 1, tzinfo=dt.timezone.utc))


def _fields(corpus, name):
    return read_field_list((corpus / "sacct" / name).read_text())


def _pcluster_fields(corpus, nfields):
    f = _fields(corpus, "pcluster_header_fields.txt")
    return f if nfields == len(f) else [x for x in f if x != "Partition"]


def _hand_rows(path, fields, delim):
    lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip() and not ln.startswith("#")]
    first = lines[0].split(delim)
    if "JobID" in first:
        fields, lines = [f.strip() for f in first], lines[1:]
    out = []
    for ln in lines:
        vals = ln.split(delim)
        if len(vals) == len(fields) + 1 and vals[-1] == "":
            vals = vals[:-1]
        out.append(dict(zip(fields, vals)))
    return out


def _secs(s):
    m = re.fullmatch(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)", s)
    d, h, mi, se = m.groups()
    return int(d or 0) * 86400 + int(h or 0) * 3600 + int(mi) * 60 + float(se)


def _ts(s):
    s = re.sub(r"^(\d{4}-\d\d-\d\d)-", r"\1T", s)
    return pd.Timestamp(s, tz="UTC")


def _hand_gpus(tres):
    entries = dict(e.split("=", 1) for e in tres.split(",") if "=" in e)
    if "gres/gpu" in entries:
        return int(entries["gres/gpu"])
    return sum(int(v) for k, v in entries.items() if k.startswith("gres/gpu:"))


def _expected(rows):
    seen, jobs, gpu_h, cpu_h = set(), set(), 0.0, 0.0
    for r in rows:
        if "." in r["JobID"] or r["State"] == "PENDING":
            continue
        key = (r["JobID"], r.get("Submit"), r.get("Start"))
        if key in seen:
            continue
        seen.add(key)
        # a job counts when it started: Start set, and not a held job's cancel
        # (Start = End, no run time, before Eligible or with Eligible Unknown)
        if r.get("Start") in (None, "", "None", "Unknown"):
            continue
        el = r.get("Eligible")
        if (r.get("Start") == r.get("End") and r.get("ElapsedRaw", "0") in ("0", "")
                and el is not None and (el in ("Unknown", "None", "") or _ts(el) > _ts(r["Start"]))):
            continue
        jobs.add(r["JobID"])
        if r.get("End") in ("Unknown", ""):
            # still running: up to NOW, but not past its time limit
            run = (NOW - _ts(r["Start"])).total_seconds()
            if r.get("TimelimitRaw", "").isdigit():
                run = min(run, int(r["TimelimitRaw"]) * 60)
            elif r.get("Timelimit") and r["Timelimit"][0].isdigit():
                run = min(run, _secs(r["Timelimit"]))
        elif "ElapsedRaw" in r:
            run = float(r["ElapsedRaw"])
        else:
            run = _secs(r["Elapsed"])
        gpu_h += _hand_gpus(r.get("AllocTRES", "")) * run / 3600
        cpu_h += float(r.get("NCPUS") or r.get("NCPUs") or 0) * run / 3600
    return len(jobs), gpu_h, cpu_h


def _ingest(path, fields=None):
    table, dq = read_sacct_file(path, fields)
    frame = jobs_frame(table, dq, str(path))
    rep, allocs = build_report(frame, dq, WIDE, Assumptions(gpu_tdp_w={"a100": 400.0, "v100": 300.0}), now=NOW)
    d = rep["data_quality"]
    assert d["rows_read"] == d["rows_counted"] + d["rows_skipped"]
    return rep, allocs


CASES = [
    ("habrok_gpu_cluster_parsable2.psv", None, "|", 242),
    ("habrok_gpu_cluster_snowman_delim.txt", "habrok_format_fields.txt", "\u2603", 242),
    ("cscs_energy_parsable2.psv", None, "|", 4),
    ("pcluster_array_job.psv", 25, "|", 16),
    ("pcluster_multi_node.psv", 25, "|", 2),
    ("pcluster_issue59_node_fail.psv", 26, "|", 2),
    ("pcluster_issue61_cancelled_invalid.psv", 26, "|", 2),
    ("pcluster_issue63_interactive_step.psv", 25, "|", 1),
]


@pytest.mark.parametrize("name,fields,delim,nrows", CASES, ids=[c[0] for c in CASES])
def test_corpus_file_counts(corpus, name, fields, delim, nrows):
    path = corpus / "sacct" / name
    if isinstance(fields, int):
        fields = _pcluster_fields(corpus, fields)
    elif fields:
        fields = _fields(corpus, fields)
    hand = _hand_rows(path, fields, delim)
    assert len(hand) == nrows
    jobs, gpu_h, cpu_h = _expected(hand)
    rep, _ = _ingest(path, fields)
    assert rep["data_quality"]["rows_read"] == nrows
    assert rep["totals"]["jobs"] == jobs
    gpu_field = any(f in hand[0] for f in ("AllocTRES", "AllocGRES", "ReqTRES"))
    if gpu_field or jobs == 0:   # (no job: 0 GPU-hours is known)
        assert rep["totals"]["gpu_hours"] == pytest.approx(gpu_h, rel=1e-6, abs=1e-6)
    else:   # no GPU field in the capture (the pcluster dumps): unknown, not 0
        assert rep["totals"]["gpu_hours"] is None and "gpu_hours" in rep["unknown"]
    assert rep["totals"]["cpu_hours"] == pytest.approx(cpu_h, rel=1e-6, abs=1e-6)


def test_habrok_gpu_jobs_by_hand(corpus):
    """The GPU jobs of the habrok capture, one by one: GPUs from AllocTRES, hours from Elapsed."""
    path = corpus / "sacct" / "habrok_gpu_cluster_parsable2.psv"
    hand = [r for r in _hand_rows(path, None, "|") if "." not in r["JobID"] and _hand_gpus(r["AllocTRES"]) > 0]
    assert len(hand) >= 5
    _, allocs = _ingest(path)
    got = allocs.set_index("job_id")
    for r in hand:
        assert got.loc[r["JobID"], "gpus"] == _hand_gpus(r["AllocTRES"])
        assert got.loc[r["JobID"], "gpu_type"] in ("", *re.findall(r"gres/gpu:([^=,]+)=", r["AllocTRES"]))
        if r["End"] != "Unknown":
            assert got.loc[r["JobID"], "gpu_hours"] == pytest.approx(
                _hand_gpus(r["AllocTRES"]) * _secs(r["Elapsed"]) / 3600)


def test_habrok_two_captures_agree(corpus):
    a, _ = _ingest(corpus / "sacct" / "habrok_gpu_cluster_parsable2.psv")
    b, _ = _ingest(corpus / "sacct" / "habrok_gpu_cluster_snowman_delim.txt",
                   _fields(corpus, "habrok_format_fields.txt"))
    assert a["totals"] == b["totals"]
    assert a["by_user"] == b["by_user"]


def test_habrok_gpuutil_read_from_steps(corpus):
    path = corpus / "sacct" / "habrok_gpu_cluster_parsable2.psv"
    _, allocs = _ingest(path)
    # 7965768.batch reports gres/gpuutil=90 (its extern step 0 is not used)
    assert allocs.set_index("job_id").loc["7965768", "step_gpu_util_pct"] == pytest.approx(90.0)


def test_cscs_slurm_energy_and_step_without_suffix(corpus):
    rep, allocs = _ingest(corpus / "sacct" / "cscs_energy_parsable2.psv")
    assert rep["totals"]["energy_kwh_by_source"]["slurm"] == pytest.approx(20543125 / 3.6e6)
    assert rep["energy_sources"]["jobs"]["slurm"] == 1
    assert rep["data_quality"]["rows_skipped"] == 1
    # a known sacct quirk (corpus README): the step row that lost its .0 suffix (no User, JobName
    # cuda-vars.sh) is skipped but is not a problem: it does not count toward the skipped share
    assert rep["data_quality"]["skipped_reasons"] == {
        "step row without its suffix (a repeated JobID/Submit/Start without User; the job's own row kept)": 1}
    assert rep["data_quality"]["rows_rejected"] == 0
    assert allocs.loc[0, "ncpus"] == 1152 and allocs.loc[0, "alloc_mem_mib"] == 1840000


def test_cscs_untrusted_slurm_energy_is_not_used(corpus):
    table, dq = read_sacct_file(corpus / "sacct" / "cscs_energy_parsable2.psv")
    rep, _ = build_report(jobs_frame(table, dq), dq, WIDE, Assumptions(trust_slurm=False), now=NOW)
    assert rep["totals"]["energy_kwh"] is None and "energy_kwh" in rep["unknown"]   # unknown, not 0
    assert rep["energy_sources"]["jobs"]["none"] == 1


def test_pcluster_outcomes(corpus):
    rep, _ = _ingest(corpus / "sacct" / "pcluster_issue59_node_fail.psv", _pcluster_fields(corpus, 26))
    assert {o["state"] for o in rep["outcomes"]} == {"NODE_FAIL"}
    rep, _ = _ingest(corpus / "sacct" / "pcluster_array_job.psv", _pcluster_fields(corpus, 25))
    assert rep["totals"]["jobs"] == 8 and rep["outcomes"][0]["state"] == "OUT_OF_MEMORY"
    assert rep["data_quality"]["ignored_lines"] == {"blank": 1, "comment": 3}
    rep, _ = _ingest(corpus / "sacct" / "pcluster_issue63_interactive_step.psv", _pcluster_fields(corpus, 25))
    assert rep["data_quality"]["skipped_reasons"] == {"step row without its allocation row": 1}


@pytest.mark.parametrize("name,line", [("pcluster_array_job.psv", 5), ("pcluster_multi_node.psv", 4),
                                       ("pcluster_issue63_interactive_step.psv", 2)])
def test_pcluster_wrong_field_list_names_file_and_line(corpus, name, line):
    with pytest.raises(AccountingInputError) as err:
        read_sacct_file(corpus / "sacct" / name, _fields(corpus, "pcluster_header_fields.txt"))
    assert err.value.line == line and err.value.file.endswith(name)
    assert "25 fields" in err.value.message


def test_cli_wrong_field_list_exits_2(corpus):
    from slurmkit.cli import cli

    res = CliRunner().invoke(cli, ["report", "weekly", "--from-sacct",
                                   str(corpus / "sacct" / "pcluster_multi_node.psv"), "--sacct-fields",
                                   str(corpus / "sacct" / "pcluster_header_fields.txt"), "-o", "/tmp/unused"])
    assert res.exit_code == 2
    assert "pcluster_multi_node.psv:4:" in res.output and "Traceback" not in res.output


@pytest.mark.parametrize("name,fields,delim,nrows", CASES, ids=[c[0] for c in CASES])
def test_block_reader_agrees_with_whole_file_reader(corpus, name, fields, delim, nrows):
    from slurmkit.accounting.frame import load_sacct

    path = corpus / "sacct" / name
    if isinstance(fields, int):
        fields = _pcluster_fields(corpus, fields)
    elif fields:
        fields = _fields(corpus, fields)
    table, dq1 = read_sacct_file(path, fields)
    a = jobs_frame(table, dq1, str(path))
    b, dq2 = load_sacct(path, None, fields)
    pd.testing.assert_frame_equal(a.allocs, b.allocs)
    pd.testing.assert_frame_equal(a.steps, b.steps)
    assert dq1.as_dict() == dq2.as_dict()
