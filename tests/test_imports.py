"""The package's import graph, built with ``ast`` (no import runs): no cycles, function-level
imports included, and no function-level import of a project module without a reason.

Every ``import`` statement of every module under ``simt_tiles/`` is an edge, wherever it stands
(module level, inside a function, under ``if``/``try``), relative or absolute.  ``from X import
name`` is an edge to ``X.name`` when that is a module (``from . import k01_naive``: the
submodule, not the package), else to ``X``; an import of ``a.b.c`` is also an edge to each package
above it (``a.b``) that is not an ancestor of the importer, since Python runs that ``__init__`` first.  A function-level import of a project module is
allowed only with a reason on its lines or on the comment line above its run of imports
(``# deferred: ...``), e.g. a module
that must not load Numba before the backend is chosen; heavy optional third-party packages
(torch, cupy, matplotlib, ...) need no mark here.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "simt_tiles"
#: the mark a function-level import of a project module carries (same line or the line above)
REASON = "# deferred:"


def module_files(root: Path = ROOT, package: str = PACKAGE) -> dict[str, Path]:
    """``{dotted module name: file}`` for every ``.py`` file of ``package`` under ``root``."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        rel = path.relative_to(root).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _resolve(module: str, is_package: bool, level: int, target: str | None) -> str:
    """The absolute name of ``from <level dots><target> import ...`` written in ``module``."""
    if level == 0:
        return target or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, target] if target else base)


class _Imports(ast.NodeVisitor):
    def __init__(self):
        self.found = []  # (node, depth of enclosing functions)
        self.depth = 0

    def visit_FunctionDef(self, node):
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Import(self, node):
        self.found.append((node, self.depth))

    visit_ImportFrom = visit_Import


def import_graph(files: dict[str, Path]):
    """``(edges, local)``: ``edges[m]`` the project modules ``m`` imports anywhere;
    ``local`` a list of ``(module, line, target, explained)`` for the function-level ones."""
    names = set(files)
    edges: dict[str, set] = {m: set() for m in files}
    local = []
    for mod, path in files.items():
        text = path.read_text()
        lines = text.splitlines()
        v = _Imports()
        v.visit(ast.parse(text, str(path)))
        is_pkg = path.name == "__init__.py"
        covered = {n for node, _ in v.found for n in range(node.lineno, node.end_lineno + 1)}
        for node, depth in v.found:
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = _resolve(mod, is_pkg, node.level, node.module)
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    targets.append(sub if sub in names else base)
            for t in targets:
                while t and t not in names and "." in t:  # ``import simt_tiles.x.y`` of a non-module attribute
                    t = t.rsplit(".", 1)[0]
                if t not in names or t == mod:
                    continue
                edges[mod].add(t)
                # importing a.b.c runs the package a.b's __init__ first, unless a.b is one of the
                # importer's own ancestors (then it is already running): an edge to that package too
                parts = t.split(".")
                for i in range(1, len(parts)):
                    pkg = ".".join(parts[:i])
                    if pkg in names and not (mod == pkg or mod.startswith(pkg + ".")):
                        edges[mod].add(pkg)
                if depth:
                    above = node.lineno - 1  # the comment line above this run of imports
                    while above in covered:
                        above -= 1
                    near = "\n".join(lines[node.lineno - 1:node.end_lineno] + lines[max(0, above - 1):above])
                    local.append((mod, node.lineno, t, REASON in near))
    return edges, local


def cycles(edges: dict[str, set]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    import sys

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 10000))
    try:
        for v in sorted(edges):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(old)
    return out


@functools.cache
def _package_graph():
    return import_graph(module_files())


def test_no_import_cycles():
    found = cycles(_package_graph()[0])
    assert not found, "import cycles (function-level imports count):\n" + "\n".join(
        f"  {len(c)} modules: {' , '.join(c)}" for c in found)


def test_function_level_imports_of_project_modules_say_why():
    _, local = _package_graph()
    bad = [f"  {m}:{line} imports {t}" for m, line, t, ok in local if not ok]
    assert not bad, (f"function-level imports of project modules without a '{REASON} <reason>' comment "
                     f"(import at module level, or say why not):\n" + "\n".join(bad))


def test_the_graph_sees_a_planted_cycle(tmp_path):
    """A cycle through a function-level ``from . import`` is found, and the import is reported."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .sub import b\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("def f():\n    from .. import a\n")
    edges, local = import_graph(module_files(tmp_path, "pkg"))
    assert cycles(edges) == [["pkg.a", "pkg.sub.b"]]
    assert local == [("pkg.sub.b", 2, "pkg.a", False)]


@pytest.mark.parametrize("line, target", [("from . import k01", "pkg.k01"), ("from .k01 import RUNG", "pkg.k01"),
                                          ("from . import RUNGS", "pkg"), ("import pkg.k01", "pkg.k01")])
def test_edges(tmp_path, line, target):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "k01.py").write_text("")
    (tmp_path / "pkg" / "user.py").write_text(line + "\n")
    edges, _ = import_graph(module_files(tmp_path, "pkg"))
    assert edges["pkg.user"] == {target}
