"""Option types the ``simt-tiles`` commands share (``type=`` of an ``argparse`` option).  Light: the
commands' parsers are built before any backend is chosen, and the bench and the demo never import
:mod:`simt_tiles.cli`."""

from __future__ import annotations

import argparse
import os

__all__ = ["output_file"]


def output_file(text: str) -> str:
    """A file a command writes (``--json``, ``--md``, ``--plot``): its folder must exist and it must not be
    a folder, checked when the options are parsed rather than by a traceback after the run."""
    folder = os.path.dirname(text) or "."
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"expected a file to write; {text!r} is a folder")
    if not os.path.isdir(folder):
        raise argparse.ArgumentTypeError(f"no folder {folder!r} to write {os.path.basename(text)!r} in")
    return text
