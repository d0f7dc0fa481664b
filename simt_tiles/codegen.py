"""Kernels written out as source code: generated once, kept as real files, cached by Numba.

Numba has no ``#pragma unroll``, and NVVM stops unrolling long loops (a 16-deep
k-loop of 64 FMAs stays a loop).  A rung that needs every step written out
builds its kernel as Python source text instead — scalar locals for the
accumulators, one line per step — and this module turns that text into a
kernel function:

    src = Source()
    with src.block("def kernel(a, b, c):"):
        src.line("c[0, 0] = a[0, 0] * b[0, 0]")
    fn = load_function("kernel", src.text(), header="from numba import cuda")

:func:`load_function` writes ``header + text`` to ``<cache dir>/<name>_<hash>.py``
(written once; the hash is of the text, so a new generator writes a new file)
and imports it like any module.  Because the kernel then lives in a real file,
``runtime.jit(fn, cache=True)`` lets Numba keep the compiled kernel on disk
next to it: the long compile of an unrolled kernel is paid once per machine,
not once per process.  The generated code is ordinary Python, so it runs in the
simulator too (it calls :mod:`simt_tiles.vector`'s helpers, which have
simulator versions).

The cache directory is ``$SIMT_TILES_CACHE_DIR`` if set, else the user's cache
directory (``$XDG_CACHE_HOME`` or ``~/.cache``, then ``simt_tiles/generated``).

Read what a rung generates:

    python -m simt_tiles.codegen dump k11_generated_split_k [--dtype float32] [--config default]
"""

from __future__ import annotations

from pathlib import Path
import argparse
import contextlib
import hashlib
import importlib.util
import os
import sys
import tempfile

from .registry import ladders

__all__ = ["Source", "cache_root", "cache_dir", "load_function", "CACHE_ENV"]

#: environment variable naming the directory generated sources (and Numba's cache of them) go to
CACHE_ENV = "SIMT_TILES_CACHE_DIR"


class Source:
    """Lines of Python source with an indentation level (four spaces per level)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 0

    def line(self, *texts: str) -> None:
        """One line per argument, at the current indentation."""
        for text in texts:
            self.lines.append("    " * self.depth + text)

    @contextlib.contextmanager
    def block(self, header: str):
        """``header`` (ending in ':'), then the lines written inside the ``with`` one level deeper."""
        if not header.rstrip().endswith(":"):
            raise ValueError(f"header: expected a line ending in ':'; got {header!r}")
        self.line(header)
        self.depth += 1
        start = len(self.lines)
        try:
            yield self
        finally:
            if len(self.lines) == start:
                self.line("pass")
            self.depth -= 1

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def cache_root() -> Path:
    """simt_tiles' cache directory: ``$SIMT_TILES_CACHE_DIR`` if set, else ``simt_tiles`` in the
    user's cache directory (``$XDG_CACHE_HOME`` or ``~/.cache``).  Not created here."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "simt_tiles"


def os_error(errno_: int | None, message: str) -> OSError:
    """An OSError carrying ``errno_`` whose text is ``message`` alone (``OSError(errno, text)`` prints
    ``[Errno N] text``, and ``text`` already names the cause)."""
    exc = OSError(message)
    exc.errno = errno_
    return exc


def _umask() -> int:
    """This process's umask, read without changing it where Linux shows it (``os.umask`` sets it, and another
    thread creating a file meanwhile would get the wrong mode)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def publish_mode(tmp: str) -> None:
    """Give a ``tempfile.mkstemp`` file (mode 0600) the mode a new file gets (0666 less the umask) before it
    is renamed into place: a shared cache directory's files stay readable by the others who use it."""
    os.chmod(tmp, 0o666 & ~_umask())


def cache_dir() -> Path:
    """Where generated sources are written (created if missing): ``$SIMT_TILES_CACHE_DIR`` itself
    if set, else ``generated`` in :func:`cache_root`."""
    path = Path(os.environ[CACHE_ENV]) if os.environ.get(CACHE_ENV) else cache_root() / "generated"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise os_error(exc.errno, f"simt_tiles: cannot create the generated kernels' directory {path} "
                       f"({exc.strerror or exc}); set {CACHE_ENV} to a writable directory") from exc
    return path


def _write_once(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` unless it is already there: an atomic rename, so a
    concurrent process sees the whole file or none, and an existing file keeps its
    timestamp (Numba's on-disk cache is keyed by the source file's stamp)."""
    try:
        if path.exists() and path.read_text(errors="replace") == text:  # (a garbage file is rewritten)
            return
    except OSError as exc:  # a file this user may not read (another user's cache): say which and what to do
        raise os_error(exc.errno, f"simt_tiles: cannot read the generated kernel {path} ({exc.strerror or exc}); "
                                  f"make it readable, delete it, or set {CACHE_ENV} to a directory of your own") \
            from exc
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        publish_mode(tmp)
        os.replace(tmp, path)
    except OSError as exc:  # a read-only directory, a full disk: say where and what to do
        with contextlib.suppress(OSError, TypeError):
            os.unlink(tmp)
        raise os_error(exc.errno, f"simt_tiles: cannot write the generated kernel {path} ({exc.strerror or exc}); "
                                  f"set {CACHE_ENV} to a writable directory with free space") from exc


def load_function(name: str, body: str, header: str = ""):
    """The function ``name`` defined by ``header + body``, imported from a file in :func:`cache_dir`."""
    if not name.isidentifier():
        raise ValueError(f"name: expected a Python identifier; got {name!r}")
    text = f'"""Generated by simt_tiles.codegen: do not edit (regenerated from its rung)."""\n{header}\n{body}'
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    module = f"_simt_tiles_gen_{name}_{digest}"
    if module in sys.modules:
        return getattr(sys.modules[module], name)
    path = cache_dir() / f"{name}_{digest}.py"
    _write_once(path, text)
    spec = importlib.util.spec_from_file_location(module, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[module] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        del sys.modules[module]  # a half-run module is never returned
        raise
    fn = getattr(mod, name)
    fn.__generated_path__ = str(path)
    return fn


def main(argv=None, prog: str = "simt-tiles codegen") -> int:
    p = argparse.ArgumentParser(prog=prog,
                                description="Print the source a generated rung compiles.")
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump", help="print a rung's generated kernel source")
    d.add_argument("variant", help="a generated rung, e.g. k11_generated_split_k")
    d.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    d.add_argument("--config", default="default", help="a preset name")
    args = p.parse_args(argv)

    for ladder, rungs in ladders().items():
        if args.variant in rungs:
            rung = rungs[args.variant]
            break
    else:
        print(f"variant: no rung named {args.variant!r}", file=sys.stderr)
        return 2
    if not hasattr(rung, "source"):
        print(f"variant: {args.variant} is not generated (read its file instead)", file=sys.stderr)
        return 2
    try:
        cfg = rung.resolve_config(args.config)
    except (ValueError, TypeError) as exc:  # a preset it does not have: named, as a bad variant is
        print(f"{prog} dump: {exc}", file=sys.stderr)
        return 2
    print(rung.source(cfg, args.dtype), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(prog="python -m simt_tiles.codegen"))
