"""slurmkit's code and docs say what a thing is and does, never where the work on it was
tracked: no issue numbers of this project ("issue 25", "issue 27.4"), no points or findings of
one ("point 4", "finding 8"), no trial runs ("the trial", "trial t28", "(trial6)"), no branch
or task names ("branch h27v"). An issue of ANOTHER project is a source and stays, named with
its project ("reportseff issue 41", "NVIDIA/DCGM issue #215"): :data:`SOURCES` lists the
projects so cited (docs/architecture.md, "Tracker words").

Captured outputs of other tools (``.txt``, ``.psv``) are their words, not slurmkit's: not read;
nor is this file, whose examples are the words it looks for.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: What is read: the package, its docs, tests, benchmarks, data packages and contributions.
SCANNED = ["slurmkit", "docs", "README.md", "bench", "tests", "prolog_epilog", "job_templates", "site",
           "contrib", "scripts"]
#: Suffixes of captured output (another tool's words), not read.
CAPTURES = {".txt", ".psv", ".parquet", ".png", ".gz", ".pyc"}
#: Projects whose public issues are cited as sources (the word before "issue").
SOURCES = {"reportseff", "nccl-tests", "nvidia/nccl-tests", "dcgm", "nvidia/dcgm", "nvidia/go-dcgm",
           "node_exporter", "prometheus/node_exporter", "parallelcluster", "aws-parallelcluster",
           "club-3090", "noonghunna/club-3090", "jobstats", "princetonuniversity/jobstats", "slurm", "pytorch", "pytorch/pytorch", "nccl", "nvidia/nccl"}

ISSUE = re.compile(r"(?i)(\S+\s+)?\b(issues?\s*#?\d+(?:\.\d+)?)")
TRACKER = [
    re.compile(r"(?i)(?<![a-z])trial"),                  # the trial, trial t28, (trial6), test_trial_x
    re.compile(r"(?i)\bfindings?\s+\d"),                 # finding 8, findings 4 and 6
    re.compile(r"(?i)\bpoints?\s+\d"),                   # point 4, points 1, 4 and 5
    re.compile(r"(?i)\b(?:branch|task)\s+h\d+\w*"),      # branch h27v, task h27t
    re.compile(r"\bh\d\d[a-z]"),                          # h27t, h27qchem (not H100, H200)
]


def tracker_words(text: str) -> list[str]:
    """The tracker words of ``text`` (one line), as found."""
    out = [m.group(0) for rx in TRACKER for m in rx.finditer(text)]
    for m in ISSUE.finditer(text):
        before = (m.group(1) or "").strip().strip("(`'\",;:").lower()
        before = before[:-2] if before.endswith("'s") else before
        if before not in SOURCES:
            out.append(m.group(2))
    return out


def files():
    for top in SCANNED:
        p = ROOT / top
        paths = [p] if p.is_file() else sorted(q for q in p.rglob("*") if q.is_file())
        for q in paths:
            if q.suffix in CAPTURES or "__pycache__" in q.parts or q == Path(__file__).resolve():
                continue
            yield q


def test_no_tracker_words_in_code_or_docs():
    found = []
    for path in files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for i, line in enumerate(text.splitlines(), 1):
            found += [f"{path.relative_to(ROOT)}:{i}: {w}" for w in tracker_words(line)]
    assert found == []


def test_tracker_words_are_found_and_other_projects_issues_are_not():
    assert tracker_words("sreport's breakdown (issue 27 point 4), the html (issue 27.6, branch h27v)") == [
        "point 4", "branch h27v", "h27v", "issue 27", "issue 27.6"]
    assert tracker_words("Trial t28: the analyst trial's finding 8 (trial6)") == [
        "Trial", "trial", "trial", "finding 8"]
    assert tracker_words("MaxRSS is one task's (reportseff issue 41); NVIDIA/DCGM issue #215; "
                         "NVIDIA/nccl-tests issue 307, node_exporter issue 3265") == []
    assert tracker_words("a store in mktemp('h27t'), account h27qchem") == ["h27t", "h27q"]
    assert tracker_words("GPU 8 of an 8-point scale, 4 H100 GPUs, an h100 node, h200-x1") == []
