"""One test per semantic rule of the accounting reader and the weekly aggregation, on tiny sacct inputs written here."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from slurmkit.accounting import parse as P
from slurmkit.accounting.fields import FIELDS
from slurmkit.accounting.frame import jobs_frame
from slurmkit.accounting.quality import DataQuality
from slurmkit.accounting.read import AccountingInputError, read_sacct_bytes
from slurmkit.report.energy import Assumptions
from slurmkit.report.weekly import build_report

from sacct_rows import T0, WEEK, row, text


def report(rows, window=WEEK, now=None, **kw):
    table, dq = read_sacct_bytes(text(rows), "tiny.psv")
    frame = jobs_frame(table, dq, "tiny.psv")
    rep, allocs = build_report(frame, dq, window, kw.pop("assumptions", Assumptions()),
                               now=now or pd.Timestamp(T0 + 30 * 86400, unit="s", tz="UTC"), **kw)
    dq_ = rep["data_quality"]
    assert dq_["rows_read"] == dq_["rows_counted"] + dq_["rows_skipped"]
    return rep, allocs


# --- GPUs from AllocTRES -------------------------------------------------------------------

def test_untyped_gpu_count_wins_over_typed_entries():
    g, t = P.gpus_from_tres(pd.Series(["cpu=8,gres/gpu:a100=2,gres/gpu=2,mem=10G"]))
    assert g[0] == 2 and t[0] == "a100"


def test_typed_gpu_counts_are_summed_when_untyped_absent():
    g, _ = P.gpus_from_tres(pd.Series(["gres/gpu:a100=2,gres/gpu:v100=3,node=1"]))
    assert g[0] == 5


def test_gpumem_and_gpuutil_are_never_gpus():
    g, _ = P.gpus_from_tres(pd.Series(["cpu=1,gres/gpumem=20500736K,gres/gpuutil=90,mem=1G"]))
    assert g[0] == 0


def test_a_mig_instance_counts_one_gpu_as_sreport_counts_it():
    """sreport -T gres/gpu counts each allocated gres/gpu as one, a MIG instance included: the
    untyped count Slurm allocated, else the typed instances summed (no share of a physical GPU)."""
    g, t = P.gpus_from_tres(pd.Series(["gres/gpu:1g.10gb=2,gres/gpu=2", "gres/gpu:3g.40gb=1",
                                       "gres/gpu:nvidia_a100_3g.20gb=1,gres/gpu:a100_1g.10gb=2"]))
    assert list(g) == [2.0, 1.0, 3.0]
    assert list(t) == ["1g.10gb", "3g.40gb", "nvidia_a100_3g.20gb"]


# --- allocation vs step rows, arrays, het, requeue ------------------------------------------

def test_allocation_rows_give_hours_and_steps_only_usage():
    rows = [row(TRESUsageInTot="mem=2G"),
            row(JobID="100.batch", User="", TRESUsageInTot="cpu=00:50:00,mem=3G,gres/gpuutil=40"),
            row(JobID="100.extern", User="", TRESUsageInTot="mem=1M,gres/gpuutil=0"),
            row(JobID="100.0", User="", TRESUsageInTot="mem=6G,gres/gpuutil=80")]
    rep, allocs = report(rows)
    assert rep["totals"]["jobs"] == 1
    assert rep["totals"]["gpu_hours"] == pytest.approx(2.0)   # 2 GPUs x 1 h, steps add nothing
    assert rep["data_quality"]["rows_counted"] == 4
    # memory efficiency from the largest step (6 GiB of 8 GiB), as seff does
    assert allocs.loc[0, "mem_eff"] == pytest.approx(6 / 8)
    assert allocs.loc[0, "step_gpu_util_pct"] == pytest.approx(60.0)  # extern excluded


def test_array_tasks_are_jobs_and_pending_range_is_backlog():
    rows = [row(JobID="200_1", JobIDRaw="201"), row(JobID="200_2", JobIDRaw="202"),
            row(JobID="200_[5-9]", JobIDRaw="200", State="PENDING", Start="Unknown", End="Unknown",
                ElapsedRaw="0")]
    rep, _ = report(rows)
    assert rep["totals"]["jobs"] == 2
    assert rep["totals"]["pending_array_tasks"] == 5
    assert rep["totals"]["gpu_hours"] == pytest.approx(4.0)


def test_het_components_each_count():
    rows = [row(JobID="900+0", JobIDRaw="900"), row(JobID="900+1", JobIDRaw="901",
                                                    AllocTRES="cpu=2,gres/gpu=1,node=1")]
    rep, _ = report(rows)
    assert rep["totals"]["jobs"] == 2
    assert rep["totals"]["gpu_hours"] == pytest.approx(3.0)


def test_requeued_attempts_count_as_used_and_wasted_and_the_job_once():
    first = row(JobID="300", State="REQUEUED", Start=T0 + 100, End=T0 + 100 + 1800, ElapsedRaw=1800)
    final = row(JobID="300", Submit=T0 + 2000, Eligible=T0 + 2000, Start=T0 + 2100,
                End=T0 + 2100 + 3600, ElapsedRaw=3600)
    rep, _ = report([first, final])
    t = rep["totals"]
    assert t["jobs"] == 1 and t["requeued_attempts"] == 1
    assert t["gpu_hours"] == pytest.approx(2 * 0.5 + 2 * 1.0)
    assert t["wasted_gpu_hours"] == pytest.approx(2 * 0.5)


@pytest.mark.parametrize("state", ["FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED"])
def test_failed_outcomes_are_waste(state):
    rep, _ = report([row(State=state), row(JobID="101")])
    assert rep["totals"]["wasted_gpu_hours"] == pytest.approx(2.0)
    assert {o["state"]: o["wasted_gpu_hours"] for o in rep["outcomes"]}[state] == pytest.approx(2.0)


# --- times -------------------------------------------------------------------------------

def test_intervals_are_clipped_to_the_window():
    # 4 h job starting 1 h before the window: 3 h inside
    rep, _ = report([row(Start=T0 - 3600, End=T0 + 3 * 3600, ElapsedRaw=4 * 3600, Submit=T0 - 7200,
                         Eligible=T0 - 7200)])
    assert rep["totals"]["gpu_hours"] == pytest.approx(2 * 3.0)
    assert rep["totals"]["cpu_hours"] == pytest.approx(4 * 3.0)


def test_suspended_job_uses_elapsedraw_not_end_minus_start():
    # ran 2 h wall, 30 min suspended: ElapsedRaw 5400
    rep, _ = report([row(Start=T0, End=T0 + 7200, ElapsedRaw=5400, Suspended="00:30:00")])
    assert rep["totals"]["gpu_hours"] == pytest.approx(2 * 1.5)


def test_unknown_and_none_times():
    s = P.parse_times(pd.Series(["Unknown", "None", "", str(T0), "2026-01-01T00:00:00"]))
    assert s[:3].isna().all()
    assert s[3] == s[4] == pd.Timestamp(T0, unit="s", tz="UTC")


def test_running_job_is_provisional_and_ends_at_now():
    now = pd.Timestamp(T0 + 600 + 1800, unit="s", tz="UTC")
    rep, _ = report([row(State="RUNNING", End="Unknown", ElapsedRaw=1800)], now=now)
    assert rep["totals"]["provisional_jobs"] == 1
    assert rep["totals"]["gpu_hours"] == pytest.approx(1.0)


@pytest.mark.parametrize("limit,hours", [("60", 1.0),                       # its 1 h time limit
                                         ("UNLIMITED", 7 * 24 - 600 / 3600)])  # the window's end
def test_running_job_read_long_after_the_capture_stops_at_its_time_limit(limit, hours):
    # a capture read 30 days later: the job cannot have run past Start + Timelimit
    now = pd.Timestamp(T0 + 30 * 86400, unit="s", tz="UTC")
    rep, allocs = report([row(State="RUNNING", End="Unknown", ElapsedRaw=1800, TimelimitRaw=limit)],
                         now=now)
    assert rep["totals"]["provisional_jobs"] == 1
    assert rep["totals"]["gpu_hours"] == pytest.approx(2 * hours)
    assert sum(rep["hourly"]["gpus_in_use"]) == pytest.approx(2 * hours)


def test_cancelled_by_uid_is_split():
    st, by = P.parse_states(pd.Series(["CANCELLED by 10290820", "COMPLETED"]))
    assert list(st) == ["CANCELLED", "COMPLETED"] and list(by) == ["10290820", ""]
    rep, _ = report([row(State="CANCELLED by 1000")])
    assert [o["state"] for o in rep["outcomes"]] == ["CANCELLED"]


def test_timelimit_unlimited_and_partition_limit():
    tl = P.parse_timelimit_s(pd.Series(["UNLIMITED", "Partition_Limit", "1-00:00:00", "30:00", ""]))
    assert tl[0] == tl[1] == float("inf")
    assert tl[2] == 86400 and tl[3] == 1800 and pd.isna(tl[4])
    assert P.parse_timelimit_s(pd.Series(["120"]), raw_minutes=True)[0] == 7200


def test_memory_suffixes_and_old_per_cpu_per_node_reqmem():
    mib, per = P.parse_mem_mib(pd.Series(["199G", "32000M", "356K", "2T", "4000Mc", "2Gn"]))
    assert list(mib) == [199 * 1024, 32000, 356 / 1024, 2 * 1024 * 1024, 4000, 2048]
    assert list(per) == ["", "", "", "", "cpu", "node"]
    rows = [row(AllocTRES="cpu=4,node=2", ReqMem="1000Mc"),
            row(JobID="101", AllocTRES="cpu=4,node=2", ReqMem="3000Mn", NNodes=2)]
    table, dq = read_sacct_bytes(text(rows), "t")
    f = jobs_frame(table, dq)
    assert list(f.allocs["alloc_mem_mib"]) == [4000, 6000]


def test_memory_text_that_is_not_a_size_is_nan_and_usage_takes_the_first_mem_entry():
    mib, _ = P.parse_mem_mib(pd.Series(["12\u00e9", "\u00e9", "1.5G", "5KK", "", "100"]), bare="B")
    assert np.isnan(mib[:2]).all() and mib[2] == 1536 and np.isnan(mib[3:5]).all()
    assert mib[5] == 100 / 2**20
    mem, util = P.tres_usage(pd.Series(["cpu=00:01:00,vmem=9,mem=2048,gres/gpuutil=40",
                                        "mem=1048576,mem=5,gres/gpumem=3", "gres/gpuutil=7,x=\u00e9",
                                        "vmem=1K", ""]))
    assert list(mem[:2]) == [2048 / 2**20, 1.0] and np.isnan(mem[2:]).all()
    assert util[0] == 40 and np.isnan(util[1]) and util[2] == 7 and np.isnan(util[3:]).all()



def test_tres_values_reads_every_key_of_one_split_as_the_single_key_parsers_do():
    usage = pd.Series(["cpu=00:01:00,energy=5400,gres/gpumem=2048M,gres/gpuutil=40,mem=1048576",
                       "mem=1048576,mem=5,gres/gpumem=3,energy=x", "gres/gpuutil=7,x=\u00e9", "", "energy=12"])
    v = P.tres_values(usage, {"mem": "B", "gres/gpuutil": None, "gres/gpumem": "B", "energy": None})
    assert list(v) == ["mem", "gres/gpuutil", "gres/gpumem", "energy"]
    assert list(v["mem"][:2]) == [1.0, 1.0] and np.isnan(v["mem"][2:]).all()
    assert v["gres/gpuutil"][0] == 40 and v["gres/gpuutil"][2] == 7
    assert v["gres/gpumem"][0] == 2048 and v["gres/gpumem"][1] == 3 / 2**20
    assert v["energy"][0] == 5400 and np.isnan(v["energy"][1]) and v["energy"][4] == 12
    pd.testing.assert_series_equal(v["gres/gpumem"], P.tres_mem_mib(usage, "gres/gpumem", bare="B"))
    pd.testing.assert_series_equal(v["energy"], P.tres_number(usage, "energy"))
    mem, util = P.tres_usage(usage)
    pd.testing.assert_series_equal(v["mem"], mem)
    pd.testing.assert_series_equal(v["gres/gpuutil"], util)


def test_a_tres_column_parsed_once_gives_what_each_parser_gives():
    from slurmkit.accounting.frame import _tres_gpus

    import pyarrow as pa

    # repeated values (the distinct-value path: more than 4 x 8192 rows) and a few distinct ones
    values = ["billing=8,cpu=8,gres/gpu:h100=1,gres/gpu=1,mem=64G,node=1", "cpu=2,mem=4000M,node=1",
              "gres/gpu:1g.10gb=2,gres/gpu=2,energy=900", "gres/gpu:a100=2,gres/gpu:v100=3",
              "cpu=4,gres/gpu=-1,mem=1T", ""]
    col = pa.chunked_array([pa.array(values * 7000)])
    got = _tres_gpus(col, {"cpu": None, "mem": "M", "energy": None})
    gpus, gtype = P.gpus_from_tres(col)
    assert list(got["gpus"][:6].fillna(-9)) == [1, 0, 2, 5, -9, 0]          # a MIG instance is one GPU
    assert list(got["gpu_type"][:6]) == ["h100", "", "1g.10gb", "a100", "", ""]
    assert list(got["mem"][:2]) == [65536, 4000] and got["mem"][4] == 1048576
    assert got["energy"][2] == 900 and got["cpu"][0] == 8
    assert list(np.flatnonzero(got["negative"][:6])) == [4]
    pd.testing.assert_series_equal(got["gpus"], gpus)
    assert got["gpu_type"].equals(gtype)
    assert (got["negative"] == P.negative_gpus(col)).all()
    pd.testing.assert_series_equal(got["cpu"], P.tres_number(col, "cpu"))
    pd.testing.assert_series_equal(got["mem"], P.tres_mem_mib(col, "mem", bare="M"))
    pd.testing.assert_series_equal(got["energy"], P.tres_number(col, "energy"))

# --- bad rows: every row counted or listed --------------------------------------------------

def test_bad_utf8_is_replaced_and_listed():
    data = text([row(JobName="ok"), row(JobID="101", JobName="XX")]).replace(b"XX", b"caf\xe9")
    table, dq = read_sacct_bytes(data, "bad.psv")
    f = jobs_frame(table, dq)
    assert f.allocs.loc[1, "job_name"] == "caf\ufffd"
    assert dq.repaired == {"bad UTF-8 (replaced by U+FFFD)": 1}
    assert dq.problems[0].line == 3 and dq.problems[0].source == "bad.psv"
    assert dq.rows_read == 2 and dq.rows_skipped == 0


def test_delimiter_inside_the_last_field_jobname_is_joined():
    data = text([row(JobName="a|b|c"), row(JobID="101")])
    table, dq = read_sacct_bytes(data, "d.psv")
    f = jobs_frame(table, dq)
    assert sorted(f.allocs["job_name"]) == ["a|b|c", "train"]
    assert dq.repaired["delimiter inside JobName (joined)"] == 1
    assert dq.rows_read == 2 and dq.rows_counted == 2


def test_embedded_newline_in_a_trailing_jobname_is_rejoined_and_listed_at_its_line():
    data = text([row(JobName="first\nsecond"), row(JobID="101")])
    table, dq = read_sacct_bytes(data, "n.psv")
    assert table.num_rows == 2 and table.column("JobName").to_pylist() == ["first\nsecond", "train"]
    assert dq.skipped == {} and dq.repaired == {"newline inside JobName (two lines joined)": 1}
    assert dq.problems[0].line == 2 and "second" in dq.problems[0].detail
    assert dq.rows_read == 2 == dq.rows_counted + dq.rows_skipped


def test_malformed_line_is_skipped_with_reason_and_line():
    data = text([row(), row(JobID="101")]) + b"garbage|line\n" + text([row(JobID="102")], header=False)
    table, dq = read_sacct_bytes(data, "m.psv")
    assert table.num_rows == 3
    assert dq.rows_skipped == 1 and dq.problems[0].line == 4
    assert dq.problems[0].reason.startswith("too few fields")
    assert dq.problems[0].detail == "garbage|line"


def test_too_many_fields_when_jobname_is_not_last_is_joined_only_where_the_types_fit():
    fields = ["JobName"] + [f for f in FIELDS if f != "JobName"]
    good = [row(), row(JobID="101")]
    lines = ["|".join(r[f] for f in fields) for r in good] + ["|".join(row(JobID="102", JobName="x|y")[f] for f in fields)]
    # the one free-text field is JobName and every typed field after it reads as its type
    table, dq = read_sacct_bytes(("\n".join(lines) + "\n").encode(), "j.psv", fields=fields)
    assert table.num_rows == 3 and table.column("JobName").to_pylist()[-1] == "x|y"
    assert dq.repaired == {"delimiter inside JobName (joined)": 1} and dq.problems[0].line == 3
    # an extra delimiter in a typed field (NodeList before ReqMem): no placement fits
    lines[-1] = "|".join(row(JobID="102", ReqMem="8|G")[f] for f in fields)
    table, dq = read_sacct_bytes(("\n".join(lines) + "\n").encode(), "j.psv", fields=fields)
    assert table.num_rows == 2
    assert dq.skipped == {f"wrong number of fields ({len(FIELDS) + 1} for {len(FIELDS)})": 1}
    assert dq.problems[0].line == 3


def test_bad_job_id_is_skipped_and_counted():
    rep, _ = report([row(), row(JobID="abc")])
    assert rep["data_quality"]["skipped_reasons"] == {"bad JobID": 1}
    assert rep["totals"]["jobs"] == 1


def test_step_job_ids_split_at_the_last_dot_and_follow_the_job_id_grammar():
    ids = P.parse_step_ids(pd.Series(["123_4.batch", "900+0.0", " 7.extern ", "123_[5-9].interactive",
                                      "abc.batch", "12.ba d", "1.2.3", "."]))
    assert list(ids["alloc_id"][:4]) == ["123_4", "900+0", "7", "123_[5-9]"]
    assert list(ids["step"][:3]) == ["batch", "0", "extern"]
    assert list(ids["valid"]) == [True, True, True, True, False, False, False, False]


def test_bad_step_job_id_is_skipped_and_counted():
    rep, _ = report([row(), row(JobID="100.batch"), row(JobID="10x.batch")])
    assert rep["data_quality"]["skipped_reasons"] == {"bad JobID": 1}
    assert rep["data_quality"]["rows_counted"] == 2
    table, dq = read_sacct_bytes(text([row(), row(JobID="100.batch"), row(JobID="100.ba d")]), "t")
    steps = jobs_frame(table, dq).steps
    assert list(steps["job_id"]) == ["100.batch"] and list(steps["step"].cat.categories) == ["batch"]


def test_step_without_allocation_row_is_listed():
    rep, _ = report([row(JobID="555.interactive")])
    assert rep["data_quality"]["skipped_reasons"] == {"step row without its allocation row": 1}


def test_rows_outside_the_window_are_skipped_with_their_steps():
    far = T0 + 60 * 86400
    rep, _ = report([row(), row(JobID="101", Submit=far, Eligible=far, Start=far, End=far + 60),
                     row(JobID="101.batch", Submit=far, Eligible=far, Start=far, End=far + 60)])
    assert rep["data_quality"]["skipped_reasons"] == {"outside the window": 2}
    assert rep["totals"]["jobs"] == 1


def test_no_header_and_no_field_list_names_file_and_line():
    with pytest.raises(AccountingInputError) as err:
        read_sacct_bytes(text([row()], header=False), "cap.txt")
    assert err.value.file == "cap.txt" and err.value.line == 1


def test_any_delimiter_and_trailing_delimiter_with_separate_field_list():
    rows = [row(), row(JobID="101")]
    data = "\n".join("\u2603".join(r[f] for f in FIELDS) + "\u2603" for r in rows).encode() + b"\n"
    table, dq = read_sacct_bytes(data, "snow.txt", fields=list(FIELDS))
    assert table.num_rows == 2 and table.column_names == list(FIELDS)
    assert dq.rows_skipped == 0


def test_queue_wait_quantiles_by_partition_and_gpu_bucket():
    rows = [row(JobID=str(100 + i), Eligible=T0, Start=T0 + 60 * (i + 1), End=T0 + 7200) for i in range(10)]
    rep, _ = report(rows)
    q = rep["queue_wait"]["by_partition_gpus"]
    assert len(q) == 1 and q[0]["gpu_bucket"] == "2-4" and q[0]["n"] == 10
    waits = pd.Series([60.0 * (i + 1) for i in range(10)])
    assert q[0]["p50_s"] == pytest.approx(waits.quantile(0.5))
    assert q[0]["p95_s"] == pytest.approx(waits.quantile(0.95))


def test_hourly_curve_integrates_to_gpu_hours():
    rows = [row(Start=T0 + 1800, End=T0 + 1800 + 3 * 3600, ElapsedRaw=3 * 3600),
            row(JobID="101", AllocTRES="gres/gpu=4", Start=T0 + 3600, End=T0 + 7200)]
    rep, _ = report(rows)
    h = rep["hourly"]
    assert sum(h["gpus_in_use"]) == pytest.approx(rep["totals"]["gpu_hours"])
    assert h["gpus_in_use"][0] == pytest.approx(1.0)   # half an hour of 2 GPUs
    assert h["peak"] == pytest.approx(6.0)


def test_block_reader_repairs_and_lists_like_the_whole_file_reader(tmp_path):
    from slurmkit.accounting.frame import load_sacct

    data = (text([row(JobName="a|b"), row(JobID="101", JobName="XX"), row(JobID="102", JobName="x\ny")])
            .replace(b"XX", b"caf\xe9") + b"junk|line\n")
    p = tmp_path / "mixed.psv"
    p.write_bytes(data)
    rows, dq = load_sacct(p)
    assert sorted(rows.allocs["job_name"]) == ["a|b", "caf\ufffd", "x\ny"]
    assert dq.rows_read == 4 and dq.rows_skipped == 1
    assert dq.repaired == {"delimiter inside JobName (joined)": 1, "bad UTF-8 (replaced by U+FFFD)": 1,
                           "newline inside JobName (two lines joined)": 1}
    assert {p_.line for p_ in dq.problems if not p_.counted} == {6}


def test_block_reader_int_columns_fall_back_to_text_per_block(tmp_path):
    """The file reader hands epoch times and counts over as int64 where a block holds only
    integers and the no-time words; a block with an ISO time or an energy figure past int64 is
    read as text: either way the typed rows equal the whole-file (text) reader's."""
    from slurmkit.accounting.frame import INT_FIELDS, _typed
    from slurmkit.accounting.read import stream_sacct_file

    rows = [row(JobID=str(100 + i)) for i in range(40)]
    rows[3].update(End="Unknown", ElapsedRaw="", NCPUS="")
    rows[17].update(Start="2026-01-01T00:20:00", End="None")       # ISO time: a text block
    rows[31].update(ConsumedEnergyRaw="18446744073709551614")     # Slurm's overflowed counter
    rows[5].update(Eligible="99999999999")                        # past what datetime64[ns] holds
    rows.append(row(JobID="140.batch", JobIDRaw="140.batch", TRESUsageInTot="mem=1024,gres/gpuutil=7"))
    p = tmp_path / "blocks.psv"
    p.write_bytes(text(rows, header=False))
    batches, dq = stream_sacct_file(p, list(FIELDS), "|", block_bytes=2000, int_fields=INT_FIELDS)
    tables = list(batches)
    kinds = {str(t.schema.field("Start").type) for t in tables}
    assert len(tables) > 3 and kinds == {"int64", "string"}
    got = [_typed(t, DataQuality()) for t in tables]
    want = jobs_frame(read_sacct_bytes(text(rows, header=False), "x", list(FIELDS))[0], DataQuality())
    allocs = pd.concat([g[0] for g in got], ignore_index=True)
    for col in ("submit", "eligible", "start", "end", "elapsed_s", "ncpus", "energy_j"):
        pd.testing.assert_series_equal(allocs[col], want.allocs[col], check_names=False)
    assert allocs.loc[17, "start"] == pd.Timestamp(T0 + 1200, unit="s", tz="UTC")
    assert pd.isna(allocs.loc[3, "end"]) and np.isnan(allocs.loc[3, "ncpus"])
    assert pd.isna(allocs.loc[5, "eligible"]) and allocs.loc[5, "submit"] == pd.Timestamp(T0, unit="s", tz="UTC")
    assert allocs.loc[31, "energy_j"] == 18446744073709551614.0
    assert dq.rows_read == 41


@pytest.mark.parametrize("ids", [["105", "100", "105", "101", "100"],            # a narrow range
                                 ["105", "9000000000", "105", "100", "9000000000"],  # a wide one
                                 ["105", "12_3", "105", "12_3", "100"]])        # text keys
@pytest.mark.parametrize("other", ["a", "b"])   # one cluster / two
def test_identity_codes_are_equal_exactly_where_cluster_and_key_are(ids, other):
    from slurmkit.accounting.frame import identity_codes

    clusters = ["a", "a", other, "a", "a"]
    allocs = pd.DataFrame({"cluster": clusters, "key_id": ids})
    steps = pd.DataFrame({"cluster": ["a", other], "key_id": [ids[0], ids[0]]})
    acode, scode = identity_codes(allocs, steps)
    keys = list(zip(clusters, ids))
    for i, ki in enumerate(keys):
        assert [acode[i] == acode[j] for j in range(5)] == [ki == kj for kj in keys]
    assert scode[0] == acode[0] and scode[1] == acode[2]
    assert (scode[0] == scode[1]) == (other == "a")
    assert sorted(set(acode) | set(scode)) == list(range(len(set(keys))))


def test_repeated_rows_are_found_whether_or_not_the_identity_alone_tells_rows_apart():
    from slurmkit.accounting.frame import _duplicated

    never = np.iinfo(np.int64).min   # NaT
    # identity codes, step codes (-1: none), Submit and Start (ns): a job's three steps, a
    # requeued job's two attempts (same identity and step, another Start) and one exact repeat
    ident = np.array([0, 0, 0, 1, 1, 2, 2])
    step = np.array([0, 1, 2, 0, 0, -1, -1], np.int8)
    submit = np.array([5, 5, 5, 7, 7, never, never]) * 10**9
    start = np.array([6, 6, 6, 8, 9, never, never]) * 10**9
    assert _duplicated([ident, step, submit, start], "first").tolist() == [False] * 6 + [True]
    assert _duplicated([ident, step, submit, start], "last").tolist() == [False] * 5 + [True, False]
    # the identity and step alone tell the rows apart: nothing repeats, nothing hashed
    assert not _duplicated([ident[:5] * 0 + np.arange(5), step[:5], submit[:5], start[:5]], "first").any()
    assert not _duplicated([ident[3:5], step[3:5], submit[3:5], start[3:5]], "first").any()


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("reader", ["block", "whole"])
def test_short_row_with_bad_utf8_is_repaired_then_skipped_with_its_line(tmp_path, reader):
    # pyarrow cannot hand such a row to the bad-row handler (it fails decoding it): the text is
    # repaired first, so the row is listed like any short row, not a traceback
    from slurmkit.accounting.frame import load_sacct

    data = text([row(), row(JobID="101")]) + b"102|caf\xe9|x\n"
    p = tmp_path / "bad.psv"
    p.write_bytes(data)
    if reader == "block":
        rows, dq = load_sacct(p)
    else:
        table, dq = read_sacct_bytes(data, str(p))
        rows = jobs_frame(table, dq, str(p))
    assert list(rows.allocs["job_id"]) == ["100", "101"]
    assert dq.rows_read == 3 and dq.rows_skipped == 1
    assert dq.repaired == {"bad UTF-8 (replaced by U+FFFD)": 1}
    lines = {(q.reason, q.line) for q in dq.problems}
    assert ("bad UTF-8 (replaced by U+FFFD)", 4) in lines
    assert any(r.startswith("too few fields") and line == 4 for r, line in lines)


def test_outcomes_count_each_job_once_by_final_state_and_requeued_attempts_apart():
    rows = [row(JobID="300", State="REQUEUED", Start=T0 + 100, End=T0 + 1900, ElapsedRaw=1800),
            row(JobID="300", Submit=T0 + 2000, Eligible=T0 + 2000, Start=T0 + 2100, End=T0 + 5700),
            # preempted after a checkpoint, requeued, then completed: the attempt is waste
            row(JobID="301", State="PREEMPTED", Start=T0 + 100, End=T0 + 1900, ElapsedRaw=1800),
            row(JobID="301", Submit=T0 + 2000, Eligible=T0 + 2000, Start=T0 + 2100, End=T0 + 5700),
            row(JobID="302", State="FAILED"),
            row(JobID="303"),
            # requeued, its next attempt still pending: the job is only its requeued attempt
            row(JobID="304", State="REQUEUED", Start=T0 + 100, End=T0 + 1900, ElapsedRaw=1800),
            row(JobID="304", State="PENDING", Submit=T0 + 2000, Eligible=T0 + 2000, Start="Unknown",
                End="Unknown", ElapsedRaw=0)]
    rep, _ = report(rows)
    out = {o["state"]: o for o in rep["outcomes"]}
    assert rep["totals"]["jobs"] == 5
    assert sum(o["jobs"] for o in rep["outcomes"]) == rep["totals"]["jobs"]
    assert out["COMPLETED"]["jobs"] == 3 and out["COMPLETED"]["attempts"] == 3
    assert out["FAILED"]["jobs"] == 1
    req = out["requeued attempts"]
    assert req["attempts"] == 3 and req["jobs"] == 1
    assert req["states"] == {"PREEMPTED": 1, "REQUEUED": 2}
    assert req["gpu_hours"] == pytest.approx(3 * 2 * 0.5) == req["wasted_gpu_hours"]
    assert "REQUEUED" not in out and "PREEMPTED" not in out
    assert rep["totals"]["requeued_attempts"] == 3
    assert rep["totals"]["wasted_gpu_hours"] == pytest.approx(3 * 2 * 0.5 + 2 * 1.0)
    from slurmkit.report.render import to_html, to_markdown
    assert "| requeued attempts (PREEMPTED 1, REQUEUED 2) | 1 | 3 |" in to_markdown(rep)
    assert "requeued attempts (PREEMPTED 1, REQUEUED 2)</td><td>1</td><td>3</td>" in to_html(rep)


def test_memory_and_cpu_efficiency_of_each_requeued_attempt_use_its_own_steps():
    alloc = dict(AllocTRES="cpu=4,gres/gpu=2,mem=2048M,node=2", NNodes=2, TotalCPU="00:00:00")
    rows = [row(JobID="300", State="REQUEUED", Start=T0 + 100, End=T0 + 1900, ElapsedRaw=1800, **alloc),
            row(JobID="300.0", User="", Start=T0 + 101, End=T0 + 1900, ElapsedRaw=1799,
                TRESUsageInTot="cpu=00:10:00,mem=1900M", TotalCPU="00:10:00"),
            row(JobID="300", Submit=T0 + 2000, Eligible=T0 + 2000, Start=T0 + 2100, End=T0 + 5700, **alloc),
            row(JobID="300.0", User="", Start=T0 + 2101, End=T0 + 5700, ElapsedRaw=3599,
                TRESUsageInTot="cpu=00:20:00,mem=1000M", TotalCPU="00:20:00")]
    rep, allocs = report(rows)
    a = allocs.set_index("state")
    # the largest step of each attempt against the attempt's 2 x 1024 MiB (seff's rule)
    assert a.loc["REQUEUED", "mem_eff"] == pytest.approx(1900 / 2048)
    assert a.loc["COMPLETED", "mem_eff"] == pytest.approx(1000 / 2048)
    assert a.loc["COMPLETED", "cpu_eff"] == pytest.approx(1200 / (3600 * 4))
    assert a.loc["REQUEUED", "cpu_eff"] == pytest.approx(600 / (1800 * 4))
    assert rep["efficiency"]["memory_efficiency_median"] == pytest.approx((1900 + 1000) / 2 / 2048)
    assert rep["data_quality"]["rows_skipped"] == 0
    assert rep["efficiency"]["allocations_over_memory"] == 0
    over, _ = report([row(AllocTRES="cpu=4,gres/gpu=2,mem=1024M,node=1"),
                      row(JobID="100.0", User="", TRESUsageInTot="mem=1536M")])
    assert over["efficiency"]["memory_efficiency_median"] == pytest.approx(1.5)
    assert over["efficiency"]["allocations_over_memory"] == 1
    from slurmkit.report.render import to_markdown
    assert "1 allocation(s) used more memory than allocated" in to_markdown(over)


@pytest.mark.parametrize("gpus, want", [([4.0, 2.0, 4.0, 1.0, 1.0], 7.0),            # whole GPUs
                                        ([2 / 7, 1.0, 3 / 7, 2.0, 1 / 7], 1.0 + 3 / 7 + 2.0)])  # MIG shares
def test_most_gpus_at_once_ends_before_starts_at_one_instant(gpus, want):
    import duckdb

    from slurmkit.report.week_sql import frame_rows, most_at_once

    # 0: 00:00-02:00, 1: 01:00-03:00, 2: 02:00-04:00 (starts as job 0 ends), 3: 02:00-02:30,
    # 4: still running from 03:00 (its End: the 05:00 time limit, before now)
    h = 3600
    starts = [T0, T0 + h, T0 + 2 * h, T0 + 2 * h, T0 + 3 * h]
    ends = [T0 + 2 * h, T0 + 3 * h, T0 + 4 * h, T0 + 2 * h + 1800, None]
    allocs = pd.DataFrame({"start": pd.to_datetime(starts, unit="s", utc=True),
                           "end": pd.to_datetime(ends, unit="s", utc=True),
                           "timelimit_s": [np.inf] * 4 + [2 * h], "gpus": gpus})
    con = duckdb.connect()
    rows = frame_rows(con, allocs, "rows", now=pd.Timestamp(T0 + 9 * h, unit="s", tz="UTC"))
    got = most_at_once(con, rows, pd.Timestamp(T0, unit="s", tz="UTC"), pd.Timestamp(T0 + 10 * h, unit="s", tz="UTC"))
    # the most at one instant: 02:00, after job 0 ended, jobs 1, 2 and 3 (job 0's GPUs not
    # counted with those that start at its End)
    assert got == pytest.approx(want, rel=1e-12)
