#!/usr/bin/env bash
# The conv default path's device pass (issue 15): warm k10's disk cache, first-call latency (cold and warm
# cache), bench conv (3×3/5×5 with k05 and k10; 7×7 with k05, k08, k10), compute-sanitizer on k10.
# Usage (on the GPU machine, repository root): OUT=dir bash benchmarks/lab/conv_default_gpu.sh
set -uo pipefail
export PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
cold=$(mktemp -d)
echo "== warm"; timeout 100 $py benchmarks/lab/conv_default_once.py warm --jobs 15
echo "== first call, warm cache"; timeout 30 $py benchmarks/lab/conv_default_once.py first-call numpy
common="--only filter2d --modes constant reflect --reps 10 --no-separable-sweep --k05-shapes --k07-shapes --k08-shapes --k09-shapes"
echo "== bench"; timeout 200 $py -m simt_tiles bench conv $common --filters 3 5 7 --variants k05_register_tile_2d k10_runtime_weights --k10-shapes 32x4x4x6x1 --json "$OUT/conv_default_h200.json" --md "$OUT/conv_default_h200.md"
echo "== first call, cold cache (beside memcheck)"
(NUMBA_CACHE_DIR=$cold/nb SIMT_TILES_CACHE_DIR=$cold/gen timeout 60 $py benchmarks/lab/conv_default_once.py first-call numpy > "$OUT/cold.txt" 2>&1) &
(timeout 100 compute-sanitizer --tool memcheck --print-limit 5 $py benchmarks/lab/conv_default_once.py sanitize > "$OUT/memcheck.txt" 2>&1) &
(timeout 100 compute-sanitizer --tool racecheck --print-limit 5 $py benchmarks/lab/conv_default_once.py sanitize > "$OUT/racecheck.txt" 2>&1) &
wait
tail -3 "$OUT/cold.txt"; echo "-- memcheck"; tail -4 "$OUT/memcheck.txt"; echo "-- racecheck"; tail -4 "$OUT/racecheck.txt"
