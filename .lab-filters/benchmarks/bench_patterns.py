"""Thin entry point: ``python benchmarks/bench_patterns.py ...`` = ``simt-tiles bench patterns ...``."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from simt_tiles.bench.patterns import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
