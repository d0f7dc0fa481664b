"""The compile gate's side of the suite: Python code run in a subprocess with Numba's real CUDA
target (``NUMBA_ENABLE_CUDASIM=0``: PTX needs it, no GPU does), so it coexists with the
simulator.  In that code, :func:`simt_tiles.compile_gate.compile_configs` compiles configs
that are not presets (the rung's other fields kept)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_real_target(code: str | None = None, *, args: list[str] | None = None, env: dict | None = None,
                    cwd: str | None = None) -> subprocess.CompletedProcess:
    """``python -c code`` (dedented) or ``python *args`` with the real target and this checkout first
    on the path; stdout and stderr captured as text."""
    full_env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0",
                "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), **(env or {})}
    argv = [sys.executable, *(args if args is not None else ["-c", textwrap.dedent(code)])]
    return subprocess.run(argv, env=full_env, capture_output=True, text=True, cwd=cwd)
