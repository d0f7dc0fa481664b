"""Thin entry point: ``python benchmarks/bench_matmul.py ...`` = ``simt-tiles bench matmul ...``."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from simt_tiles.bench.matmul import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
