"""Every Sphinx-style cross-reference (``:func:``, ``:data:``, ``:class:``, ``:meth:``,
``:mod:``, ``:attr:``) in slurmkit's docstrings and in docs/*.md names something that exists
(docs/architecture.md, "Names in the docs").

A name is resolved from the source (ast; nothing is imported): a dotted ``slurmkit.`` name
against slurmkit's modules and what they define (functions, classes and their members,
module-level names, the names they import); any other name first against the enclosing class
(in a docstring of a class or of its methods), then the referencing module, then (a dotted name) as a name
of another package installed (``pandas.DataFrame``, ``json.dumps``: not slurmkit's to check).
A leading ``~`` and a trailing ``()`` are dropped, as Sphinx drops them.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "slurmkit"
ROLE = re.compile(r":(func|data|class|meth|mod|attr):`~?([A-Za-z_][\w.]*?)(?:\(\))?`")


@dataclass
class Module:
    """What one module defines (``defs``: top-level name -> its node, None for a plain
    assignment), imports (``imports``: local name -> dotted target) and, per class, its
    members (methods, class attributes, ``self.x`` assignments, nested classes)."""

    name: str
    tree: ast.Module
    defs: dict[str, ast.AST | None] = field(default_factory=dict)
    imports: dict[str, str] = field(default_factory=dict)
    members: dict[str, set[str]] = field(default_factory=dict)


def _targets(node: ast.AST) -> list[str]:
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        out = []
        for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
            out += [n.id for n in ast.walk(t) if isinstance(n, ast.Name)]
        return out
    return []


def _class_members(cls: ast.ClassDef) -> set[str]:
    out = set()
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        out.update(_targets(node))
    for node in ast.walk(cls):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                and isinstance(node.value, ast.Name) and node.value.id == "self":
            out.add(node.attr)
    return out


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _absolute(module: str, is_package: bool, level: int, target: str | None) -> str:
    if not level:
        return target or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[:len(base) - level + 1]
    return ".".join(base + ([target] if target else []))


def index() -> dict[str, Module]:
    """Every module of slurmkit by its dotted name."""
    mods = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = _module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        m = Module(name, tree)
        _fill(m, path.name == "__init__.py")
        mods[name] = m
    return mods


def _fill(m: Module, is_package: bool) -> None:
    """Fill ``m``'s ``defs``, ``imports`` and ``members`` from its tree."""
    name, tree, pkg = m.name, m.tree, is_package
    for node in ast.walk(tree):   # imports anywhere (those inside functions name things too)
        if isinstance(node, ast.Import):
            for a in node.names:
                m.imports.setdefault(a.asname or a.name.split(".")[0], a.name if a.asname else a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            src = _absolute(name, pkg, node.level, node.module)
            for a in node.names:
                m.imports.setdefault(a.asname or a.name, f"{src}.{a.name}")
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            m.defs[node.name] = node
            if isinstance(node, ast.ClassDef):
                m.members[node.name] = _class_members(node)
        for t in _targets(node):
            m.defs.setdefault(t, None)
        if isinstance(node, (ast.If, ast.Try)):   # names defined under a guard
            for sub in ast.walk(node):
                for t in _targets(sub):
                    m.defs.setdefault(t, None)
                if isinstance(sub, (ast.FunctionDef, ast.ClassDef)):
                    m.defs.setdefault(sub.name, sub)


class Resolver:
    """Resolves names against ``mods``, the modules of package ``root``."""

    def __init__(self, mods: dict[str, Module], root: str = "slurmkit"):
        self.mods, self.root = mods, root

    def absolute(self, parts: list[str], seen: frozenset = frozenset()) -> bool:
        """``parts`` (a dotted name from ``slurmkit``) exists."""
        for k in range(len(parts), 0, -1):
            mod = ".".join(parts[:k])
            if mod in self.mods:
                return k == len(parts) or self.in_module(self.mods[mod], parts[k:], seen)
        return False

    def in_module(self, m: Module, rest: list[str], seen: frozenset = frozenset()) -> bool:
        """``rest`` exists in module ``m``: a name it defines (and a member of it, for a class),
        a name it imports (followed), or one of its submodules."""
        head = rest[0]
        if (m.name, head) in seen:
            return False
        seen = seen | {(m.name, head)}
        if head in m.defs:
            if len(rest) == 1:
                return True
            return head in m.members and len(rest) == 2 and rest[1] in m.members[head]
        if f"{m.name}.{head}" in self.mods:
            return self.absolute(f"{m.name}.{head}".split(".") + rest[1:], seen)
        if head in m.imports:
            target = m.imports[head].split(".")
            if target[0] != self.root:
                return True   # another package's name: not slurmkit's to check
            return self.absolute(target + rest[1:], seen)
        return False

    def module(self, name: str) -> bool:
        """``name`` is one of the package's modules, or another package's (``logging``)."""
        if name.split(".")[0] == self.root:
            return name in self.mods
        return importlib.util.find_spec(name.split(".")[0]) is not None

    def resolves(self, name: str, module: str | None, cls: str | None) -> bool:
        parts = name.split(".")
        if parts[0] == self.root:
            return self.absolute(parts)
        if module is not None:
            m = self.mods[module]
            if cls is not None and len(parts) == 1 and parts[0] in m.members.get(cls, ()):
                return True
            if self.in_module(m, parts):
                return True
        if len(parts) > 1 and parts[0] != self.root and importlib.util.find_spec(parts[0]) is not None:
            return True   # another package's (json.dumps, pandas.DataFrame)
        return False


def _docstrings(m: Module):
    """``(line, text, enclosing class or None)`` of every docstring of module ``m``, and of
    each ``#:`` comment block (the attribute docs Sphinx reads)."""
    def walk(node, cls):
        doc = ast.get_docstring(node, clean=False) if isinstance(
            node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) else None
        if doc:
            yield (node.body[0].lineno, doc, cls)
        for child in getattr(node, "body", []):
            if isinstance(child, ast.ClassDef):
                yield from walk(child, child.name)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield from walk(child, cls)
    yield from walk(m.tree, None)


def dangling(mods: dict[str, Module] | None = None) -> list[str]:
    """``path:line: role name`` of every reference that names nothing, sorted."""
    mods = mods if mods is not None else index()
    r = Resolver(mods)
    out = []
    for name, m in mods.items():
        path = Path(*name.split("."))
        path = ROOT / (path / "__init__.py" if (ROOT / path).is_dir() else path.with_suffix(".py"))
        rel = path.relative_to(ROOT)
        texts = list(_docstrings(m))
        classes = [c for c in ast.walk(m.tree) if isinstance(c, ast.ClassDef)]
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.lstrip().startswith("#:"):   # an attribute's doc: its class's names first
                inside = [c for c in classes if c.lineno <= i <= c.end_lineno]
                texts.append((i, line, max(inside, key=lambda c: c.lineno).name if inside else None))
        for line, text, cls in texts:
            for role, ref in ROLE.findall(text):
                ok = r.module(ref) if role == "mod" else r.resolves(ref, name, cls)
                if not ok:
                    out.append(f"{rel}:{line}: :{role}:`{ref}`")
    for md in sorted((ROOT / "docs").glob("*.md")):
        for i, line in enumerate(md.read_text(encoding="utf-8").splitlines(), 1):
            for role, ref in ROLE.findall(line):
                ok = r.module(ref) if role == "mod" else r.resolves(ref, None, None)
                if not ok:
                    out.append(f"{md.relative_to(ROOT)}:{i}: :{role}:`{ref}`")
    return sorted(out)


def test_every_reference_in_docstrings_and_docs_names_something_that_exists():
    assert dangling() == []


def test_a_reference_to_a_missing_name_is_found():
    src = '''"""Module :func:`present`, :func:`absent`, :data:`~pkg.a.VALUE`, :meth:`C.run`, :meth:`C.gone`,
:func:`pkg.b.helper`, :func:`pkg.b.missing`."""
import json

from pkg.b import helper as renamed

VALUE = 1


class C:
    """:meth:`run` and :attr:`size` are C's, :meth:`stop` is not; :func:`json.dumps` is json's."""

    def run(self):
        """:func:`renamed` is pkg.b's helper; :func:`renamed.x` is nothing."""
        self.size = 0


def present():
    """:func:`pkg.a.present`."""
'''
    mods = {"pkg.a": Module("pkg.a", ast.parse(src)), "pkg.b": Module("pkg.b", ast.parse("def helper(): pass\n"))}
    for m in mods.values():
        _fill(m, is_package=False)
    r = Resolver(mods, root="pkg")
    found = [ref for _, text, cls in _docstrings(mods["pkg.a"]) for _, ref in ROLE.findall(text)
             if not r.resolves(ref, "pkg.a", cls)]
    assert found == ["absent", "C.gone", "pkg.b.missing", "stop", "renamed.x"]
