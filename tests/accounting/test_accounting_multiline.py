"""Records as sacct prints them: a newline inside a field splits a record
over physical lines (sacct does not escape it); the lines are joined when the field count
says so and listed as repaired. Multi-character delimiters are read from the header; a header
after a prefix is refused with what was seen. Inputs: facebookresearch/gcm's sacct test data
(tests/accounting/data/README.md) and the corpus; edits are labelled."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmkit.accounting.frame import load_sacct
from slurmkit.accounting.read import AccountingInputError, read_sacct_file

DATA = Path(__file__).parent / "data"
GCM = {"one": (DATA / "gcm_sample-sacct-one-multiline.txt", 1),
       "multiple": (DATA / "gcm_sample-sacct-multiple-multiline.txt", 3),
       "fake": (DATA / "gcm_sample-sacct-fake-line-break.txt", 1)}


def _records_by_hand(path: Path) -> list[list[str]]:
    """gcm's own rule, written again here: append physical lines until a record has as many
    ``|#``-separated fields as the header."""
    lines = path.read_text().split("\n")
    n = len(lines[0].split("|#"))
    out, cur = [], None
    for ln in lines[1:]:
        if not ln and cur is None:
            continue
        cur = ln if cur is None else cur + "\n" + ln
        if len(cur.split("|#")) >= n:
            out.append(cur.split("|#"))
            cur = None
    return out


@pytest.mark.parametrize("name", sorted(GCM))
def test_gcm_multiline_records_are_joined(name):
    path, multi = GCM[name]
    want = _records_by_hand(path)
    t, dq = read_sacct_file(path)
    assert dq.rows_read == len(want) == t.num_rows
    assert dq.repaired["newline inside SubmitLine (two lines joined)"] == multi
    assert dq.rows_skipped == 0
    head = path.read_text().split("\n")[0].split("|#")
    sub, work = head.index("SubmitLine"), head.index("WorkDir")
    assert t.column("SubmitLine").to_pylist() == [r[sub] for r in want]
    assert t.column("WorkDir").to_pylist() == [r[work] for r in want]
    assert sum("\n" in s for s in t.column("SubmitLine").to_pylist()) == multi
    lines = [p.line for p in dq.problems if p.reason.startswith("newline inside SubmitLine")]
    assert lines == [4, 6, 8][:multi]


def test_gcm_joined_job_counts_its_gpus():
    path, _ = GCM["one"]
    rows, dq = load_sacct(path)
    a = rows.allocs.set_index("job_id")
    want = [r for r in _records_by_hand(path) if "\n" in r[path.read_text().split("\n")[0].split("|#").index("SubmitLine")]]
    jid = want[0][32]   # JobID
    assert jid in a.index
    assert a.loc[jid, "gpus"] == 256 and a.loc[jid, "state"] == "REQUEUED"


def test_gcm_identical_repeat_is_counted_once_not_a_problem():
    """gcm's multiple-multiline capture prints record 201844 three times, every field equal (read
    by hand: lines 4-9 are three copies of one two-line record): one allocation, the two copies
    skipped as identical repeats, which are not problems; the step
    200131.0 without its allocation row stays a problem."""
    from slurmkit.accounting.quality import IDENTICAL_REPEAT

    path, _ = GCM["multiple"]
    recs = [r for r in _records_by_hand(path) if r[32] == "201844"]
    assert len(recs) == 3 and recs[0] == recs[1] == recs[2]
    rows, dq = load_sacct(path)
    assert list(rows.allocs["job_id"]).count("201844") == 1
    assert dq.skipped[IDENTICAL_REPEAT] == 2 and dq.rows_rejected == 0
    assert [p.detail for p in dq.problems if p.reason == IDENTICAL_REPEAT] == ["JobID 201844", "JobID 201844"]


def test_multi_character_delimiter_edit(tmp_path):
    """gcm's capture with ``|#`` rewritten to the 3-character ``"|"`` (a labelled edit): read
    the same, the delimiter taken from the header."""
    path, _ = GCM["multiple"]
    edit = tmp_path / "quoted_pipe.txt"
    edit.write_text(path.read_text().replace("|#", '"|"'))
    t0, _ = read_sacct_file(path)
    t1, dq = read_sacct_file(edit)
    assert t1.column("SubmitLine").to_pylist() == t0.column("SubmitLine").to_pylist()
    assert t1.column("JobID").to_pylist() == t0.column("JobID").to_pylist()
    assert dq.repaired["newline inside SubmitLine (two lines joined)"] == 3


def test_header_after_a_prefix_is_refused_with_what_was_seen(tmp_path):
    """Every line prefixed with ``**  `` (a labelled edit of gcm's capture, delimiter ``"|"``)."""
    path, _ = GCM["one"]
    edit = tmp_path / "prefixed.txt"
    edit.write_text("".join("**  " + ln + "\n" for ln in path.read_text().replace("|#", '"|"').splitlines()))
    with pytest.raises(AccountingInputError) as exc:
        read_sacct_file(edit)
    msg = str(exc.value)
    assert "a header after a prefix" in msg and "'**  '" in msg and "'\"|\"'" in msg
    assert exc.value.line == 1


def test_corpus_captures_unchanged(corpus):
    """The corpus's captures read as before: nothing joined that is not split."""
    for name in ("sacct/habrok_gpu_cluster_parsable2.psv", "sacct/cscs_energy_parsable2.psv",
                 "sacct2/trex_sacct_-X_-P_--format_ALL.psv"):
        _, dq = read_sacct_file(corpus / name)
        assert not [r for r in dq.repaired if r.startswith("newline inside")], name
