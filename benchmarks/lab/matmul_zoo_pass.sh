#!/usr/bin/env bash
# Issue 32's one GPU call: the layout/batch/GEMV tests on the H200, then the shape zoo beside cuBLAS.
#   OUT=dir bash benchmarks/lab/matmul_zoo_pass.sh   (PYTHONPATH: this checkout; ~200 s with a cold cache)
set -uo pipefail
out=${OUT:-out}; mkdir -p "$out"
t0=$(date +%s); budget=${BUDGET_S:-205}
left() { echo $(( budget - ($(date +%s) - t0) - ${1:-0} )); }
export NUMBA_CACHE_DIR=/tmp/zoo-numba-cache SIMT_TILES_CACHE_DIR=/tmp/zoo-generated
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$out/gpu.txt" 2>&1
# the zoo's rows: A first (the classes), B if time is left ('_' is a space in a row name)
A="decode attention square_4096 dW_K=512 M=512_qkv small"
B="resnet skinny lora moe fat ragged primes square_2048 M=512_up M=4096 backward_dX dW_K=4096"
# the zoo's kernels compile (tens of seconds each) beside the tests
python3 -c "from simt_tiles.bench import matmul_zoo as z
for i, keys in enumerate((\"$A\", \"$B\")):
    z.warm([r for r in z.ZOO if any(s.replace('_', ' ') in r[0] for s in keys.split())], 10)
    open('$out/warm%d' % i, 'w').close()" > "$out/warm.log" 2>&1 &
warm=$!
timeout $(left ${ZOO_RESERVE:-100}) python3 -m pytest -q -n 6 -p no:cacheprovider tests/test_matmul_layouts.py \
  "tests/test_interop.py::test_cupy_non_contiguous_copied_once_by_matmul" > "$out/tests.log" 2>&1
echo "tests rc=$? at $(( $(date +%s) - t0 )) s" >> "$out/tests.log"
while [ ! -f "$out/warm0" ] && [ "$(left 70)" -gt 0 ]; do sleep 2; done
echo "zoo A warm at $(( $(date +%s) - t0 )) s" >> "$out/tests.log"
export ZOO_JOBS=16
timeout $(left 60) python3 -m simt_tiles bench matmul --zoo --zoo-only $A \
  --reps 10 --budget-s 0.25 --json "$out/zoo_a.json" --md "$out/zoo_a.md" > "$out/zoo_a.log" 2>&1
echo "zoo a rc=$? at $(( $(date +%s) - t0 )) s" >> "$out/zoo_a.log"
while [ ! -f "$out/warm1" ] && [ "$(left 30)" -gt 0 ]; do sleep 2; done
timeout $(left 5) python3 -m simt_tiles bench matmul --zoo --zoo-only $B \
  --reps 10 --budget-s 0.25 --json "$out/zoo_b.json" --md "$out/zoo_b.md" > "$out/zoo_b.log" 2>&1
echo "zoo b rc=$? at $(( $(date +%s) - t0 )) s" >> "$out/zoo_b.log"
kill $warm 2>/dev/null; rm -f "$out/warm0" "$out/warm1"
