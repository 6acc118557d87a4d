"""Tests reach the shared corpus only through the ``corpus`` fixture of tests/conftest.py, which
skips with its reason when the folder is absent (a failure under ``CI=true``, by the skip policy):
no test module or helper other than tests/conftest.py builds the corpus's path itself (a
hard-coded path fails, or errors at import, in a checkout without the corpus instead of skipping).

Found in the code, not in comments or docstrings (those name ``../shared/corpus`` as a source):
a path ``... / "shared" / "corpus"``, the two names in a row among a call's arguments
(``Path("..", "shared", "corpus")``, ``os.path.join``), or a string holding ``shared/corpus``."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
#: the folder names of the corpus's path (kept apart here so this file does not match itself)
SHARED, CORPUS_DIR = "shared", "corpus"


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the string constants that stand alone as statements (docstrings and the like)."""
    return {id(node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)}


def _is(node: ast.AST, text: str) -> bool:
    return isinstance(node, ast.Constant) and node.value == text


def corpus_paths_built(source: str) -> list[int]:
    """The line numbers of ``source`` (Python) where the code builds the shared corpus's path
    itself, sorted; comments and docstrings do not count."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    joined = SHARED + "/" + CORPUS_DIR
    lines = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and _is(node.right, CORPUS_DIR)
                and (_is(node.left, SHARED)
                     or isinstance(node.left, ast.BinOp) and isinstance(node.left.op, ast.Div)
                     and _is(node.left.right, SHARED))):
            lines.add(node.lineno)
        elif isinstance(node, ast.Call) and any(_is(a, SHARED) and _is(b, CORPUS_DIR)
                                                for a, b in zip(node.args, node.args[1:])):
            lines.add(node.lineno)
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
              and joined in node.value):
            lines.add(node.lineno)
    return sorted(lines)


def test_only_tests_conftest_builds_the_corpus_path():
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        if path == TESTS / "conftest.py":
            continue
        found += [f"{path.relative_to(TESTS.parent)}:{n}" for n in corpus_paths_built(path.read_text())]
    assert found == [], ("use the corpus fixture of tests/conftest.py (a test parameter `corpus`, or a fixture "
                         f"built on it) instead of building the path: {found}")


def test_a_built_corpus_path_is_found_and_comments_and_docstrings_are_not():
    def s(text: str) -> str:
        return '"' + text + '"'

    sample = "\n".join([
        f'{s("A docstring naming ../" + SHARED + "/" + CORPUS_DIR + "/sacct.")}',                       # 1
        f"# a comment: ../{SHARED}/{CORPUS_DIR}",                                                          # 2
        f"A = Path(__file__).resolve().parents[2] / {s('..')} / {s(SHARED)} / {s(CORPUS_DIR)} / {s('x')}",  # 3
        f"B = REPO.parent / {s(SHARED)} / {s(CORPUS_DIR)}",                                                  # 4
        f"C = os.path.join(REPO, {s('..')}, {s(SHARED)}, {s(CORPUS_DIR)})",                                  # 5
        f"D = Path({s('../' + SHARED + '/' + CORPUS_DIR + '/fabric')})",                                     # 6
        f"E = work / {s(SHARED)} / {s('bin')} / {s('run-parts.sh')}",                                     # 7: a site's folder
        f"F = corpus / {s('sacct/habrok_gpu_cluster_parsable2.psv')}",                                     # 8: the fixture's
        "def f():",                                                                                          # 9
        f"    {s('In a docstring: ' + SHARED + '/' + CORPUS_DIR)}",                                          # 10
        "    return 1",                                                                                      # 11
    ])
    assert corpus_paths_built(sample) == [3, 4, 5, 6]
