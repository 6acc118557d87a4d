"""The reports' goldens: ``report weekly``, ``report store`` + ``report period`` and ``report
jobs`` on the shared corpus's sacct captures, and on the benches' generated inputs at a small
seeded size, made again with the current code and compared with the JSON kept in
tests/fixtures/report_goldens/ (SOURCE.md there: each golden's input, the commit that made it,
the command that makes them again, and the differences accepted since, each a fix).

Floats compare within a relative 1e-9, everything else exactly; a failure names the golden and
the first key path that differs. :data:`EXCEPTIONS` lists key paths not compared, each with why
(empty: every figure is compared)."""

from __future__ import annotations


import pytest
from goldens_script import goldens_script



G = goldens_script()

#: {golden name, or "*" for every golden: {key path ("[]" for any list index): why it is not
#: compared}}. A difference that is a fix regenerates the golden instead (SOURCE.md says why).
EXCEPTIONS: dict[str, dict[str, str]] = {}

BENCH = [n for n in G.goldens() if n.startswith("bench_")]
CORPUS_GOLDENS = [n for n in G.goldens() if n not in BENCH]


@pytest.fixture(scope="module")
def corpus_ctx(corpus, tmp_path_factory):
    return G.Context(corpus, tmp_path_factory.mktemp("goldens"))


@pytest.fixture(scope="module")
def bench_ctx(tmp_path_factory):
    return G.Context(None, tmp_path_factory.mktemp("goldens-bench"))


def _compare(name: str, got: dict) -> None:
    want = G.read_golden(name)
    exceptions = {**EXCEPTIONS.get("*", {}), **EXCEPTIONS.get(name, {})}
    diff = G.first_difference(want, got, exceptions=exceptions)
    assert diff is None, (f"{name}: {diff} (the golden: tests/fixtures/report_goldens/{name}.json; "
                          "a fix regenerates it with scripts/report_goldens.py --only NAME and says why in SOURCE.md)")


@pytest.mark.parametrize("name", CORPUS_GOLDENS)
def test_corpus_golden(name, corpus_ctx):
    _compare(name, G.make(name, corpus_ctx))


@pytest.mark.parametrize("name", BENCH)
def test_bench_golden(name, bench_ctx):
    got = G.make(name, bench_ctx)
    want = G.read_golden(name)
    # a changed generator is not a changed figure: said apart
    assert got["input_sha256"] == want["input_sha256"], (
        f"{name}: the bench's generator makes another input than the golden's (SHA-256 {got['input_sha256']}, "
        f"the golden's {want['input_sha256']}): regenerate the golden with the code before the generator changed")
    _compare(name, got)


def test_every_golden_is_made_and_named_in_source():
    """The folder holds a file for each golden and no other; SOURCE.md names each."""
    folder = G.GOLDENS
    on_disk = {p.name.removesuffix(".json") for p in folder.glob("*.json")}
    assert on_disk == set(G.goldens())
    source = (folder / "SOURCE.md").read_text()
    assert [n for n in G.goldens() if f"`{n}`" not in source] == []


def test_first_difference_names_the_key_path():
    """On Habrok's weekly golden: an edited figure, a list one item short, a key added and a
    float within the tolerance."""
    want = G.read_golden("weekly_habrok")
    got = G.read_golden("weekly_habrok")
    assert G.first_difference(want, got) is None
    got["by_partition"][3]["gpu_hours"] = want["by_partition"][3]["gpu_hours"] + 0.01
    assert G.first_difference(want, got).startswith("by_partition[3].gpu_hours: want ")
    assert G.first_difference(want, got, exceptions={"by_partition[].gpu_hours": "why"}) is None
    got = G.read_golden("weekly_habrok")
    got["totals"]["gpu_hours"] *= 1 + 1e-12
    assert G.first_difference(want, got) is None
    got["totals"]["new_figure"] = 1
    assert G.first_difference(want, got) == "totals.new_figure: new key (not in the golden): 1"
    got = G.read_golden("weekly_habrok")
    got["outcomes"].pop()
    assert G.first_difference(want, got) == f"outcomes: {len(want['outcomes']) - 1} items, the golden {len(want['outcomes'])}"
    got = G.read_golden("weekly_habrok")
    got["totals"]["jobs"] = float(got["totals"]["jobs"])
    assert G.first_difference(want, got) is None      # 90 == 90.0 (JSON has one number type)
