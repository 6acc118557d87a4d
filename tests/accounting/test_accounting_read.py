"""slurmkit.accounting.read: one reader for captured files and the live ingest's bytes.

The same text, given as a file (``report weekly --from-sacct``) and as bytes (what
:func:`slurmkit.accounting.ingest.pull_day` gets from sacct), gives the same rows, the same
listed problems with the same lines and the same errors, whatever the block size.
"""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest

from slurmkit.accounting.fields import DELIMITER, FIELDS
from slurmkit.accounting.frame import load_sacct, load_sacct_bytes
from slurmkit.accounting.read import (AccountingInputError, read_sacct_bytes, read_sacct_file,
                                      stream_sacct_bytes, stream_sacct_file)

T0 = 1_767_225_600  # 2026-01-01T00:00:00Z
HEADER = "JobID|State|Start|End|ElapsedRaw|AllocTRES|JobName"


def line(jid, name="train", state="COMPLETED"):
    return f"{jid}|{state}|{T0}|{T0 + 3600}|3600|gres/gpu=2|{name}"


#: Every kind of line the reader handles, one after the other (physical lines in comments).
MIXED = b"".join([
    b"# captured on the login node\n",                      # 1 comment
    b"\n",                                                  # 2 blank
    HEADER.encode() + b"\n",                                # 3 header
    line(100).encode() + b"\n",                             # 4
    b"# a comment between rows\n",                          # 5 comment
    line(101, "a|b").encode() + b"\n",                      # 6 delimiter in JobName: joined
    b"   \n",                                               # 7 whitespace only: blank
    b"garbage|line\n",                                      # 8 too few fields
    line(102, "caf").encode() + b"\xe9\n",                  # 9 bad UTF-8
    b"\n",                                                  # 10 blank
    b"garbage|line\n",                                      # 11 the same bad row again
    line(103).encode() + b"\r\n",                           # 12 CRLF
    line(104, state="RUNNING").encode() + b"|x|y\n",        # 13 JobName "train|x|y": joined
])


def _rows(table: pa.Table) -> list[tuple]:
    return sorted(zip(*(table.column(n).to_pylist() for n in table.column_names)))


def _problems(dq) -> list[tuple]:
    return [(p.source, p.line, p.reason, p.detail, p.counted) for p in dq.problems]


def _expect_mixed(dq, source):
    d = dq.as_dict()
    assert d["rows_read"] == 7 and d["rows_skipped"] == 2 and d["rows_counted"] == 5
    assert d["ignored_lines"] == {"comment": 2, "blank": 3}
    assert d["skipped_reasons"] == {"too few fields (continuation of a field with a newline?)": 2}
    assert d["repaired_reasons"] == {"delimiter inside JobName (joined)": 2,
                                     "bad UTF-8 (replaced by U+FFFD)": 1}
    got = sorted((p.line, p.reason, p.detail) for p in dq.problems)
    assert got == [
        (6, "delimiter inside JobName (joined)", line(101, "a|b")),
        (8, "too few fields (continuation of a field with a newline?)", "garbage|line"),
        (9, "bad UTF-8 (replaced by U+FFFD)", line(102, "caf\ufffd")),
        (11, "too few fields (continuation of a field with a newline?)", "garbage|line"),
        (13, "delimiter inside JobName (joined)", line(104, state="RUNNING") + "|x|y"),
    ]
    assert {p.source for p in dq.problems} == {source}


def test_mixed_input_lists_every_problem_with_its_physical_line(tmp_path):
    p = tmp_path / "mixed.psv"
    p.write_bytes(MIXED)
    table, dq = read_sacct_bytes(MIXED, "sacct 2026-01-01")
    _expect_mixed(dq, "sacct 2026-01-01")
    assert table.column_names == HEADER.split("|")
    names = dict(zip(table.column("JobID").to_pylist(), table.column("JobName").to_pylist()))
    assert names == {"100": "train", "101": "a|b", "102": "caf\ufffd", "103": "train", "104": "train|x|y"}
    ftable, fdq = read_sacct_file(p)
    _expect_mixed(fdq, str(p))
    assert _rows(ftable) == _rows(table)


@pytest.mark.parametrize("block_bytes", [64, 150, 400, None])
def test_file_and_bytes_give_the_same_rows_and_problems_in_any_block_size(tmp_path, block_bytes):
    p = tmp_path / "mixed.psv"
    p.write_bytes(MIXED)
    want, wdq = read_sacct_bytes(MIXED, str(p))
    kw = {"block_bytes": block_bytes} if block_bytes else {}
    fb, fdq = stream_sacct_file(p, **kw)
    bb, bdq = stream_sacct_bytes(MIXED, str(p), **kw)
    ftables, btables = list(fb), list(bb)
    if block_bytes and block_bytes < 200:
        assert len(ftables) > 2   # really read in blocks
    for tables, dq in ((ftables, fdq), (btables, bdq)):
        assert sorted(r for t in tables for r in _rows(t)) == _rows(want)
        assert dq.as_dict() | {"problems": None} == wdq.as_dict() | {"problems": None}
        assert sorted(_problems(dq)) == sorted(_problems(wdq))


def _live_text() -> bytes:
    """A day as sacct prints it for the ingest: no header, FIELDS, the unit separator."""
    base = {f: "" for f in FIELDS}
    base.update(Cluster="c1", State="COMPLETED", User="alice", Account="a", Partition="gpu",
                QOS="normal", Submit=str(T0), Eligible=str(T0), Start=str(T0 + 60), End=str(T0 + 3660),
                ElapsedRaw="3600", Suspended="00:00:00", TimelimitRaw="120", NCPUS="4", NNodes="1",
                NodeList="n1", ReqMem="8G", AllocTRES="cpu=4,gres/gpu=2,mem=8G,node=1",
                TotalCPU="01:00:00", ConsumedEnergyRaw="0", ExitCode="0:0", JobName="train")
    rows = []
    for i, jid in enumerate(["200", "201", "201.batch", "202"]):
        r = dict(base, JobID=jid, JobIDRaw=jid)
        if jid == "201.batch":
            r.update(TRESUsageInTot="mem=1048576,gres/gpuutil=55", JobName="batch")
        if jid == "202":
            r.update(End="Unknown", State="RUNNING", JobName=f"x{DELIMITER}y")   # a US in the name
        rows.append(DELIMITER.join(r[f] for f in FIELDS))
    rows.insert(2, f"203{DELIMITER}short")
    return ("\n".join(rows) + "\n").encode()


def test_live_ingest_bytes_and_the_same_text_captured_type_the_same_rows(tmp_path):
    data = _live_text()
    p = tmp_path / "day.txt"
    p.write_bytes(data)
    live, ldq = load_sacct_bytes(data, str(p), list(FIELDS), DELIMITER, cluster="c1")
    cap, cdq = load_sacct(p, None, list(FIELDS), DELIMITER, cluster="c1")
    pd.testing.assert_frame_equal(live.allocs, cap.allocs)
    pd.testing.assert_frame_equal(live.steps, cap.steps)
    assert ldq.as_dict() == cdq.as_dict()
    assert list(live.allocs["job_id"]) == ["200", "201", "202"]
    assert live.allocs.loc[2, "job_name"] == f"x{DELIMITER}y" and pd.isna(live.allocs.loc[2, "end"])
    assert live.steps.loc[0, "gpu_util_pct"] == 55.0 and live.steps.loc[0, "mem_used_mib"] == 1.0
    assert [(q.line, q.reason, q.detail) for q in ldq.problems] == [
        (3, "too few fields (continuation of a field with a newline?)", f"203{DELIMITER}short"),
        (5, "delimiter inside JobName (joined)", data.decode().split("\n")[4])]
    assert ldq.rows_read == 5 and ldq.rows_skipped == 1


def _error(fn):
    with pytest.raises(AccountingInputError) as err:
        fn()
    return err.value.file, err.value.line, err.value.message


@pytest.mark.parametrize("data,fields,line,msg", [
    (b"# c\n\n100|COMPLETED\n", None, 3, "no header line and no field list"),
    (b"\n" + HEADER.encode() + b"\n# c\n1|2|3\n4|5|6\n", None, 4, "rows have 3 fields but the field list has 7"),
    (b"PAR1\x15\x04\x15\x00\x00\x8c\x02\n\x00\x01", None, 1, "not parsable output: run sacct with -P / --parsable2"),
    (b"       JobID    JobName  Partition      State \n------------ ---------- ---------- ---------- \n"
     b"       12345      train        gpu  COMPLETED \n", None, 1,
     "not parsable output: run sacct with -P / --parsable2 (this is sacct's fixed-width table)"),
    (b"JobID|State\n------------|----------\n12345|COMPLETED\n", None, 2,
     "not parsable output: run sacct with -P / --parsable2 (this is sacct's fixed-width table)"),
    (b"       12345      train        gpu  COMPLETED \n", ["JobID", "JobName", "Partition", "State"], 1,
     "not parsable output: run sacct with -P / --parsable2 (no delimiter in the first row)"),
    (b"1|2\n", ["State", "User"], None, "the field list has no JobID"),
])
def test_file_and_bytes_fail_with_the_same_file_line_and_message(tmp_path, data, fields, line, msg):
    p = tmp_path / "bad.psv"
    p.write_bytes(data)
    src = str(p)
    got = {
        "bytes": _error(lambda: read_sacct_bytes(data, src, fields)),
        "file": _error(lambda: read_sacct_file(p, fields)),
        "load": _error(lambda: load_sacct(p, None, fields)),
        "live": _error(lambda: load_sacct_bytes(data, src, fields)),
        "blocks": _error(lambda: list(stream_sacct_file(p, fields, block_bytes=8)[0])),
    }
    assert set(got.values()) == {got["bytes"]}
    file, ln, message = got["bytes"]
    assert file == src and ln == line and message.startswith(msg)


def test_empty_and_comment_only_input_is_no_rows_not_an_error(tmp_path):
    for data in (b"", b"# nothing\n\n", HEADER.encode() + b"\n"):
        table, dq = read_sacct_bytes(data, "e", ["JobID", "State"])
        assert table.num_rows == 0 and dq.rows_read == 0
        rows, ldq = load_sacct_bytes(data, "e", ["JobID", "State"])
        assert rows.empty and ldq.rows_read == 0


def test_a_capture_cut_inside_a_row_is_refused_naming_its_last_line(corpus, tmp_path):
    """Habrok's real capture (../shared/corpus/sacct, ``sacct --parsable2``) cut after its first
    30,000 bytes: the last line is a row's first fields with no line end (sacct ends every row
    with one). Stored, the days before the cut would be final without the rows after it, so the
    capture is refused whole, before any row is given out. The same rows ending with a line end
    (a short last row that is complete text) are read with that row skipped and named."""
    data = (corpus / "sacct" / "habrok_gpu_cluster_parsable2.psv").read_bytes()[:30000]
    cut = tmp_path / "cut.psv"
    cut.write_bytes(data)
    last_line = data.count(b"\n") + 1
    with pytest.raises(AccountingInputError) as err:
        read_sacct_file(cut)
    assert err.value.line == last_line == 89
    assert str(err.value).startswith(f"{cut}:89: the capture ends inside a row (9 of 37 fields and no line end")
    ended = tmp_path / "ended.psv"
    ended.write_bytes(data + b"\n")
    table, dq = read_sacct_file(ended)
    assert table.num_rows == 87 and [(p.line, p.reason) for p in dq.problems][-1][0] == 89
