"""Sphinx configuration of the simt_tiles course and reference (MyST Markdown).

Build: ``sphinx-build -W -b html docs docs/_build/html`` (``pip install -e '.[docs]'``).
The lesson, performance and SIMT-vs-Tile pages are generated at every build by
``docs/generate.py`` from the registry of ladders and the committed results.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# Kernels import numba.cuda; the docs build needs no GPU.
os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS.parent))
sys.path.insert(0, str(DOCS))

import generate

generate.generate(DOCS / "generated")

project = "simt_tiles"
author = "the simt_tiles developers"
copyright = "the simt_tiles developers, MIT license"

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon"]
source_suffix = {".md": "markdown"}
myst_heading_anchors = 3
exclude_patterns = ["_build", "examples", "README.md"]
html_theme = "alabaster"
html_static_path: list[str] = []

autodoc_member_order = "bysource"
autodoc_default_options = {"members": False}
# docstrings are written for readers of the source; a few use NumPy-style sections
napoleon_google_docstring = False
nitpicky = False
suppress_warnings = ["myst.header"]


def _plain_text_docstrings(app, what, name, obj, options, lines):
    """The kernels' public docstrings are written for readers of the source and ``help()``,
    not as reStructuredText: show them verbatim (a literal block), as ``help()`` does."""
    if name.startswith("simt_tiles.kernels.") and lines:
        lines[:] = ["::", ""] + ["   " + ln for ln in lines] + [""]


def setup(app):
    app.connect("autodoc-process-docstring", _plain_text_docstrings)
