"""Option types the ``simt-tiles`` commands share (``type=`` of an ``argparse`` option).  Light: the
commands' parsers are built before any backend is chosen, and the bench and the demo never import
:mod:`simt_tiles.cli`."""

from __future__ import annotations

import argparse
import os

__all__ = ["output_file", "positive_int", "positive_float", "env_flag", "numba_flag"]

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"", "0", "false", "no", "off"})


def env_flag(name: str, default: bool = False) -> bool:
    """The boolean environment variable ``name``: ``1``/``true``/``yes``/``on`` → True, ``0``/``false``/``no``/
    ``off`` or empty → False (case and surrounding blanks ignored), unset → ``default``; anything else is a
    ValueError naming the variable ("disable" must not switch a feature on)."""
    value = os.environ.get(name)
    if value is None:
        return default
    word = value.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise ValueError(f"{name}: expected one of 1, true, yes, on (on) or 0, false, no, off, empty (off); "
                     f"got {value!r}")


def numba_flag(value: str | None) -> bool:
    """A Numba integer switch (``NUMBA_ENABLE_CUDASIM``) read as ``numba.config`` reads it: ``int(value)``,
    non-zero → True; unset or not an integer → False (Numba warns and uses its default, 0)."""
    if value is None:
        return False
    try:
        return int(value) != 0
    except ValueError:
        return False


def output_file(text: str) -> str:
    """A file a command writes (``--json``, ``--md``, ``--plot``): its folder must exist and it must not be
    a folder, checked when the options are parsed rather than by a traceback after the run."""
    folder = os.path.dirname(text) or "."
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"expected a file to write; {text!r} is a folder")
    if not os.path.isdir(folder):
        raise argparse.ArgumentTypeError(f"no folder {folder!r} to write {os.path.basename(text)!r} in")
    return text


def _positive(text: str, convert, expected: str):
    """``convert(text)`` when it is a finite number > 0, else an argparse error naming ``expected``."""
    try:
        value = convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}; got {text!r}") from None
    if not (0 < value < float("inf")):
        raise argparse.ArgumentTypeError(f"expected {expected}; got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1 (``--jobs``): a bad value is an argparse error (exit 2), not a traceback after the parse."""
    return _positive(text, int, "an integer >= 1")


def positive_float(text: str) -> float:
    """A finite number > 0 (``--budget-s``)."""
    return _positive(text, float, "a number > 0")
