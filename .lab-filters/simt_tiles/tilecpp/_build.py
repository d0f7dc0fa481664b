"""Compiling the CUDA Tile C++ sources to cubins, on any machine with the toolchain (no GPU).

    nvcc --enable-tile -std=c++20 -arch sm_90 --tilecubin SRC.cu -o SRC.cubin

``nvcc`` runs ``tileiras`` on the tile code (``--tilecubin`` keeps only that: no host or
SIMT code).  The toolchain comes from pip (``pip install 'simt-tiles[tilecpp]'``: the
``nvidia-cuda-nvcc``, ``-tileiras``, ``-crt``, ``nvidia-nvvm`` and ``nvidia-cuda-cccl``
wheels of one CUDA 13.x, 13.3 or newer) or a CUDA toolkit on ``PATH``; ``nvcc`` also needs a
host C++20 compiler (g++ 10 or newer).  The cubins go to
``$SIMT_TILES_CACHE_DIR/tilecpp/<nvcc version>-sm_90/`` (default ``~/.cache/simt_tiles``),
one per source, rebuilt when the source changes.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from ..codegen import CACHE_ENV

__all__ = [
    "ARCH",
    "INSTALL_HINT",
    "SRC_DIR",
    "Toolchain",
    "ToolchainError",
    "build",
    "cache_dir",
    "cubin_path",
    "toolchain",
]

ARCH = "sm_90"
SRC_DIR = Path(__file__).parent / "src"
#: the oldest CUDA with Tile C++
MIN_CUDA = (13, 3)
MIN_GXX = 10

INSTALL_HINT = (
    "the CUDA Tile C++ counterparts need CUDA 13.3 or newer with tileiras: "
    "`pip install 'simt-tiles[tilecpp]'` (the nvidia-cuda-nvcc, nvidia-cuda-tileiras, nvidia-cuda-crt, "
    "nvidia-nvvm and nvidia-cuda-cccl wheels) or a CUDA toolkit on PATH, and a host C++20 compiler "
    "(g++ 10 or newer: e.g. `apt-get install g++`)"
)


class ToolchainError(RuntimeError):
    """nvcc, tileiras or a C++20 host compiler is missing; the message says what to install."""


class Toolchain:
    """The nvcc that will compile (its bin directory must also hold tileiras) and its version."""

    def __init__(self, nvcc: Path, version: str, host: Path):
        self.nvcc, self.version, self.host = nvcc, version, host

    def __repr__(self) -> str:
        return f"Toolchain(nvcc={self.nvcc}, version={self.version}, host={self.host})"


def _pip_bins() -> list[Path]:
    """The bin folders of the pip CUDA wheels (``nvidia/cu13/bin``), if installed."""
    try:
        import nvidia
    except ImportError:
        return []
    return [Path(p) / sub / "bin" for p in nvidia.__path__ for sub in ("cu13", "cu14")]


def _version(nvcc: Path) -> str:
    out = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, timeout=60).stdout
    match = re.search(r"release [\d.]+, V([\d.]+)", out)
    if not match:
        raise ToolchainError(f"{nvcc} --version printed no release number; {INSTALL_HINT}")
    return match.group(1)


def _host_compiler() -> Path:
    for name in ("g++", "c++"):
        found = shutil.which(name)
        if not found:
            continue
        out = subprocess.run([found, "-dumpversion"], capture_output=True, text=True, timeout=60).stdout
        major = int(re.match(r"\d+", out.strip() or "0").group())
        if major >= MIN_GXX:
            return Path(found)
        raise ToolchainError(f"{found} is g++ {out.strip()}; Tile C++ needs C++20 (g++ {MIN_GXX} or newer). "
                             f"{INSTALL_HINT}")
    raise ToolchainError(f"no host C++ compiler (g++) found on PATH; {INSTALL_HINT}")


def toolchain() -> Toolchain:
    """The toolchain :func:`build` would use; :class:`ToolchainError` says what is missing."""
    candidates = [d / "nvcc" for d in _pip_bins()]
    on_path = shutil.which("nvcc")
    if on_path:
        candidates.append(Path(on_path))
    found = [c for c in candidates if c.is_file()]
    if not found:
        raise ToolchainError(f"nvcc not found (no pip nvidia-cuda-nvcc wheel, nothing on PATH); {INSTALL_HINT}")
    with_tileiras = [c for c in found if (c.parent / "tileiras").is_file()]
    if not with_tileiras:
        raise ToolchainError(f"tileiras not found beside {', '.join(map(str, found))}; {INSTALL_HINT}")
    nvcc = with_tileiras[0]
    version = _version(nvcc)
    if tuple(int(x) for x in version.split(".")[:2]) < MIN_CUDA:
        raise ToolchainError(f"{nvcc} is CUDA {version}; Tile C++ needs 13.3 or newer. {INSTALL_HINT}")
    return Toolchain(nvcc, version, _host_compiler())


def cache_dir(version: str) -> Path:
    """``$SIMT_TILES_CACHE_DIR/tilecpp/<version>-sm_90`` (the user's cache folder by default)."""
    base = os.environ.get(CACHE_ENV)
    if base:
        root = Path(base)
    else:
        root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "simt_tiles"
    return root / "tilecpp" / f"{version}-{ARCH}"


def sources() -> dict[str, Path]:
    """Every ``.cu`` source, by stem."""
    return {p.stem: p for p in sorted(SRC_DIR.glob("*.cu"))}


def _digest(src: Path) -> str:
    """The source's hash, with the shared headers' (src/*.cuh) it may include."""
    h = hashlib.sha256(src.read_bytes())
    for header in sorted(SRC_DIR.glob("*.cuh")):
        h.update(header.read_bytes())
    return h.hexdigest()


def cubin_path(out_dir: Path, stem: str) -> Path:
    return out_dir / f"{stem}.cubin"


def _compile(tc: Toolchain, src: Path, out: Path, verbose: bool) -> None:
    env = dict(os.environ, PATH=f"{tc.nvcc.parent}{os.pathsep}{tc.host.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        tmp_out = Path(tmp) / out.name
        cmd = [str(tc.nvcc), "--enable-tile", "-std=c++20", "-arch", ARCH, "--tilecubin", "-ccbin", str(tc.host),
               str(src), "-o", str(tmp_out)]
        if verbose:
            print(" ".join(cmd), flush=True)
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
        if res.returncode != 0 or not tmp_out.is_file():
            raise RuntimeError(f"nvcc failed on {src.name} (exit {res.returncode}):\n{res.stdout}{res.stderr}")
        os.replace(tmp_out, out)  # atomic: a concurrent reader sees the old cubin or the new one


def build(force: bool = False, verbose: bool = False) -> Path:
    """Compile every source whose cubin is missing or stale (``force``: all); return the folder."""
    tc = toolchain()
    out_dir = cache_dir(tc.version)
    out_dir.mkdir(parents=True, exist_ok=True)
    for stem, src in sources().items():
        cubin, stamp = cubin_path(out_dir, stem), out_dir / f"{stem}.sha256"
        digest = _digest(src)
        if not force and cubin.is_file() and stamp.is_file() and stamp.read_text() == digest:
            if verbose:
                print(f"{stem}: up to date", flush=True)
            continue
        _compile(tc, src, cubin, verbose)
        stamp.write_text(digest)
        if verbose:
            print(f"{stem}: {cubin} ({cubin.stat().st_size} bytes)", flush=True)
    return out_dir


def built_dir() -> Path | None:
    """The folder of up-to-date cubins for every source, if one exists (no compiler needed):
    the toolchain's own cache folder, else any version's under the cache root that has every
    cubin with current stamps (a machine with the cubins but without the toolchain)."""
    try:
        dirs = [cache_dir(toolchain().version)]
    except ToolchainError:
        dirs = []
    root = cache_dir("x").parent
    if root.is_dir():
        dirs += sorted((d for d in root.iterdir() if d.name.endswith(f"-{ARCH}")), reverse=True)
    for d in dirs:
        if all((d / f"{stem}.sha256").is_file() and (d / f"{stem}.sha256").read_text() == _digest(src)
               and cubin_path(d, stem).is_file() for stem, src in sources().items()):
            return d
    return None
