"""The package version, in a module of its own: :mod:`simt_tiles.machine` and
:mod:`simt_tiles.autotune` read it without importing the package's ``__init__``."""

__version__ = "0.1.0"
