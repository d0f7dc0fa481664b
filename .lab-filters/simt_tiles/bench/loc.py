"""Lines of kernel code, counted mechanically from the sources (the SIMT-vs-Tile table's LOC column).

A counted line is a non-blank line that is not only a comment (``#`` in Python, ``//`` or inside
``/* */`` in C++) and not part of a docstring.  What is counted per system:

* **SIMT rung** (:func:`rung_lines`): the rung file's device-code functions — ``make_*``
  factories (``make_kernel`` holds the kernel Numba compiles; ``make_patch_loader`` and the like
  build device functions), module-level ``@jit`` kernels, code generators (``generate``,
  ``emit_*``, ``source``) — and those of them it imports from sibling modules (``_common``
  aside), followed one import deep at a time.  Config classes, presets, geometry and launchers
  are not counted.
* **Triton / cuTile Python** (:func:`function_lines`): the named ``@triton.jit`` / ``@ct.kernel``
  functions (and any helper named with them).
* **CUDA Tile C++** (:func:`cu_file_lines`): the whole ``.cu`` file and the project headers it
  includes (``#include "x.cuh"`` beside it; toolkit headers are not counted).
* **C++ operators** (:func:`cpp_lines`): the whole source string.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

__all__ = ["cpp_lines", "cu_file_lines", "function_lines", "python_lines", "rung_lines"]

_CODEGEN = re.compile(r"^(make_\w+|generate|source|emit_\w+)$")


def _docstring_lines(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                out.update(range(first.lineno, first.end_lineno + 1))
    return out


def python_lines(src: str, spans: list[tuple[int, int]] | None = None) -> int:
    """Counted lines of Python ``src`` (within the 1-based inclusive ``spans``, default all)."""
    lines = src.splitlines()
    doc = _docstring_lines(ast.parse(src))
    keep = range(1, len(lines) + 1) if spans is None else sorted({i for a, b in spans for i in range(a, b + 1)})
    return sum(1 for i in keep if i not in doc and lines[i - 1].strip() and not lines[i - 1].strip().startswith("#"))


def _span(node) -> tuple[int, int]:
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    return first, node.end_lineno


def function_lines(path: str | Path, names) -> int:
    """Counted lines of the functions called ``names`` (at any depth) in the Python file ``path``;
    ValueError when one is missing (a renamed kernel must not silently count 0)."""
    src = Path(path).read_text()
    found = {n.name: _span(n) for n in ast.walk(ast.parse(src)) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    missing = [n for n in names if n not in found]
    if missing:
        raise ValueError(f"function_lines: {missing} not found in {path}")
    return python_lines(src, [found[n] for n in names])


def cpp_lines(src: str) -> int:
    """Counted lines of C/C++ source text (``//`` and ``/* */`` comments removed)."""
    src = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), src, flags=re.DOTALL)
    return sum(1 for ln in src.splitlines() if ln.split("//", 1)[0].strip())


def cu_file_lines(path: str | Path, _seen: set | None = None) -> int:
    """Counted lines of a ``.cu`` file plus those of the headers beside it that it includes (once each)."""
    path = Path(path)
    seen = set() if _seen is None else _seen
    if path in seen:
        return 0
    seen.add(path)
    src = path.read_text()
    total = cpp_lines(src)
    for name in re.findall(r'^\s*#\s*include\s+"([^"]+)"', src, flags=re.MULTILINE):
        if (path.parent / name).is_file():
            total += cu_file_lines(path.parent / name, seen)
    return total


def _is_jit(node) -> bool:
    return any("jit" in ast.unparse(d) for d in node.decorator_list)


def _rung_spans(path: Path, names: set[str] | None, seen: set[Path]) -> list[tuple[str, list[tuple[int, int]]]]:
    """(source, spans) of the counted functions of ``path`` (``names``: only these, for a sibling rung)."""
    if path in seen:
        return []
    seen.add(path)
    src = path.read_text()
    tree = ast.parse(src)
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    picked = [f for f in funcs if (_CODEGEN.match(f.name) or _is_jit(f)) and (names is None or f.name in names)]
    out = [(src, [_span(f) for f in picked])]
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module and node.module != "_common":
            sib = path.parent / f"{node.module}.py"
            if sib.is_file():
                out += _rung_spans(sib, {a.name for a in node.names}, seen)
    return out


def rung_lines(module) -> int:
    """Counted lines of a SIMT rung (its module or dotted name): see the module docstring."""
    if isinstance(module, str):
        module = importlib.import_module(module)
    return sum(python_lines(src, spans) for src, spans in _rung_spans(Path(inspect.getsourcefile(module)), None, set())
               if spans)
