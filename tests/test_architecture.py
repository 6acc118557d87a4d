"""slurmkit's import graph as grimp builds it for ``lint-imports`` (every import statement, those
inside functions included) has no circle: every strongly connected component is one module. The
``acyclic_siblings`` contract in ``.importlinter`` checks the same per package; this test names
the modules of any circle it finds (docs/architecture.md)."""

from __future__ import annotations

import sys

import grimp


def circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The import circles of ``graph``: its strongly connected components of more than one
    module (Tarjan's algorithm, iterative), each sorted; sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        m = stack.pop()
                        on_stack.discard(m)
                        comp.append(m)
                        if m == node:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
    return sorted(found)


def test_slurmkit_has_no_import_circle():
    assert circles(grimp.build_graph("slurmkit")) == []


def test_a_circle_through_an_import_inside_a_function_is_found(tmp_path, monkeypatch):
    pkg = tmp_path / "circlepkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from circlepkg.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from circlepkg import c\n    return c\n")
    (pkg / "c.py").write_text("import circlepkg.a\n")
    (pkg / "d.py").write_text("import circlepkg.a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        graph = grimp.build_graph("circlepkg", cache_dir=None)
    finally:
        for name in [m for m in sys.modules if m.startswith("circlepkg")]:
            del sys.modules[name]
    assert circles(graph) == [["circlepkg.a", "circlepkg.c", "circlepkg.sub.b"]]


def _long_functions():
    """scripts/long_functions.py (the one home of the count), loaded from its file."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / "long_functions.py"
    spec = importlib.util.spec_from_file_location("long_functions", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


#: The most lines a function of slurmkit may have, ``def`` to its last line (docs/architecture.md).
MAX_FUNCTION_LINES = 100


def test_no_function_in_slurmkit_is_over_100_lines():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "slurmkit"
    assert _long_functions().long_functions(root, MAX_FUNCTION_LINES) == []


def test_a_long_nested_function_is_found(tmp_path):
    body = "\n".join(f"            x{i} = {i}" for i in range(100))
    (tmp_path / "m.py").write_text(f"class C:\n    def f(self):\n        def g():\n{body}\n        return g\n")
    found = _long_functions().long_functions(tmp_path, MAX_FUNCTION_LINES)
    assert [(n, name) for n, _, name in found] == [(103, "C.f"), (101, "C.f.g")]
