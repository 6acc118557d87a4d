#!/usr/bin/env python3
"""List the functions of slurmkit/ (nested ones included) longer than a limit, in lines from
``def`` to the function's last line (decorators excluded): ``end_lineno - lineno + 1``.

Usage: scripts/long_functions.py [--limit N] [ROOT]   (defaults: 100, slurmkit)
"""

from __future__ import annotations

import argparse
import ast
import pathlib


def long_functions(root: pathlib.Path, limit: int) -> list[tuple[int, str, str]]:
    """``(lines, path, qualified name)`` of every function under ``root`` longer than ``limit``
    lines, longest first."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        stack: list[tuple[ast.AST, str]] = [(tree, "")]
        while stack:
            node, prefix = stack.pop()
            for child in ast.iter_child_nodes(node):
                name = prefix
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    name = f"{prefix}{child.name}."
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = child.end_lineno - child.lineno + 1
                    if lines > limit:
                        found.append((lines, str(path), name[:-1]))
                stack.append((child, name))
    return sorted(found, key=lambda f: (-f[0], f[1], f[2]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=100)
    ap.add_argument("root", nargs="?", default="slurmkit")
    args = ap.parse_args()
    for lines, path, name in long_functions(pathlib.Path(args.root), args.limit):
        print(f"{lines:5d}  {path}  {name}")


if __name__ == "__main__":
    main()
