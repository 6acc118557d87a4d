"""slurmkit.slurm.syntax: the plain-line reader (string methods) answers exactly as the patterns do.

Every logical line of the real slurm.conf / gres.conf files in the shared corpus and in
tests/topology/sites (sources in their READMEs) is read both ways; the edited lines below are
real lines of those files (ocotillo_gres.conf, dgx1x4_slurm.conf, genomedk_slurm.conf) changed
at one place, each labelled with its edit, to sit on either side of the plain reader's limits.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmkit.slurm import syntax

SITES = Path(__file__).resolve().parents[1] / "topology" / "sites"

# (file in the corpus or tests/topology/sites, non-blank logical lines, lines the plain reader takes)
REAL = [
    ("sites/dgx1x4_gres.conf", 8, 8),
    ("sites/dgx1x4_slurm.conf", 42, 42),
    ("sites/genomedk_slurm.conf", 61, 61),
    ("sites/magic_castle-27_gres.conf_autodetect-nvml_duplicate-Name-gpu.conf", 3, 3),
    ("sites/ocotillo_gres.conf", 5, 5),
    ("sites/ocotillo_slurm.conf", 63, 57),  # six quoted Features="..." lines go to the patterns
    ("sites/slinky-101_gres.conf_8xh100_explicit_mixed-indent.conf", 8, 8),
    ("slurm/gres.conf.dgx1", 8, 8),
    ("sites/deepops_slurm.conf.j2_L55-75.TEMPLATE", 14, 4),  # Jinja {% %} / {{ }} lines: refused both ways
    ("rtxpro_gres.conf", 5, 5),
    ("rtxpro_slurm.conf", 7, 7),
    ("shard_a100_gres.conf", 2, 2),
    ("shard_a100_slurm.conf", 3, 3),
    ("titan_slurm.conf", 25, 25),
]

EDITED = [
    "NodeName=n0\tName=gpu Type=gtx1060 File=/dev/nvidia0",  # ocotillo_gres.conf as is (tab)
    "NodeName=n0 Name=gpu Type=gtx1060 File=/dev/nvidia0 COUNT",  # edit: a word without '='
    "NodeName=n0 Name=gpu _Type=gtx1060",  # edit: a key starting with '_'
    "NodeName=n0 Name=gpu Type-2=gtx1060",  # edit: '-' in a key
    "NodeName=n0 Name=gpu Type=gtx1060 File=",  # edit: an empty value
    "NodeName=n0 Name=gpu Type==gtx1060",  # edit: the value starts with '='
    "NodeName=n0 Name=gpu Type=gtx1060 =x",  # edit: a word with no key
    "NodeName=n0 Name=gpu Type=gtx\u00e9",  # edit: a non-ASCII value
    "NodeName=n0 Name=gpu Typ\u00e9=gtx1060",  # edit: a non-ASCII key
    'NodeName=n0 Name=gpu Type="gtx 1060"',  # edit: a quoted value with a blank
    "NodeName=n0 Name=gpu Type=gtx\\ 1060",  # edit: an escaped blank
    "Include /etc/slurm/nodes.conf",  # dgx1x4_slurm.conf-style Include (edit: the line added)
    "include   nodes.conf",  # edit: lower case, blanks
    "INCLUDE",  # edit: Include without a path
    "Include=/etc/slurm/nodes.conf",  # edit: Include as a key
    "SlurmctldHost=ctl1(127.0.0.1) ControlMachine=ctl1",  # genomedk_slurm.conf-style pair (edit: joined)
]


def _both_ways(content: str, monkeypatch) -> tuple:
    """parse_content's answer (pairs, include) or its error text, with and without the plain reader."""
    def run():
        try:
            return syntax.parse_content(content, "f.conf", 7)
        except syntax.ConfError as exc:
            return ("error", str(exc))

    fast = run()
    with monkeypatch.context() as m:
        m.setattr(syntax, "_plain_pairs", lambda stripped: None)
        slow = run()
    return fast, slow


@pytest.mark.parametrize("name,lines,plain", REAL, ids=[r[0] for r in REAL])
def test_real_files_read_alike_both_ways(name, lines, plain, corpus, monkeypatch):
    path = (SITES / name) if "/" not in name else (corpus / name)
    n = taken = 0
    for start, _, logical in syntax.logical_lines(path.read_text().splitlines()):
        content, _ = syntax.split_comment(logical)
        if not content.strip():
            continue
        n += 1
        taken += syntax._plain_pairs(content.strip()) is not None
        fast, slow = _both_ways(content, monkeypatch)
        assert fast == slow, f"{path}:{start + 1}: {logical!r}"
    assert (n, taken) == (lines, plain)


@pytest.mark.parametrize("line", EDITED)
def test_lines_at_the_plain_readers_limits_read_alike(line, monkeypatch):
    fast, slow = _both_ways(line, monkeypatch)
    assert fast == slow


def test_plain_reader_takes_the_usual_line_and_leaves_the_rest():
    assert syntax._plain_pairs("NodeName=n0\tName=gpu Type=gtx1060 File=/dev/nvidia0") == (
        [("NodeName", "n0"), ("Name", "gpu"), ("Type", "gtx1060"), ("File", "/dev/nvidia0")], None)
    assert syntax._plain_pairs("include   nodes.conf") == ([], "nodes.conf")
    assert syntax._plain_pairs("NodeName=n0 Name=gpu Type=gtx1060 File=") == (
        [("NodeName", "n0"), ("Name", "gpu"), ("Type", "gtx1060"), ("File", "")], None)
    for other in ('Type="gtx 1060"', "Type=gtx\\ 1060", "Typ\u00e9=x", "COUNT", "_Type=x", "INCLUDE"):
        assert syntax._plain_pairs(other) is None, other


def test_a_word_that_is_no_pair_is_still_the_patterns_error(monkeypatch):
    fast, _ = _both_ways("NodeName=n0 Name=gpu File=/dev/nvidia0 COUNT", monkeypatch)
    assert fast == ("error", "f.conf:7: expected Key=Value or 'Include PATH', found 'COUNT'")
