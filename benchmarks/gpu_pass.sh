#!/usr/bin/env bash
# The whole check-and-benchmark pass on the GPU machine, in one call:
#   source .gpu-carry/setup.sh && bash benchmarks/gpu_pass.sh [steps...]
# steps (default all): tests bench ncu sanitize.  Logs and JSON go to $OUT (or ./out).
set -uo pipefail
out=${OUT:-out}; mkdir -p "$out"
steps=${*:-tests bench ncu sanitize}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee "$out/gpu.txt"
for step in $steps; do
  echo "=== $step ($(date +%T))"
  case $step in
    tests)
      timeout ${TEST_TIMEOUT:-250} python3 -m pytest -q -x --tb=short -p no:cacheprovider tests 2>&1 \
        | tee "$out/pytest.log" | tail -30 ;;
    bench)
      timeout 400 python3 benchmarks/bench_matmul.py --json "$out/matmul_h200.json" --md "$out/matmul_h200.md" \
        ${BENCH_ARGS:-} 2>&1 | tee "$out/bench.log" | grep -v '^|' ;;
    ncu)
      m=l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,smsp__inst_executed.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed
      timeout 300 ncu --clock-control none --metrics "$m" --csv \
        python3 benchmarks/run_rungs_once.py --shapes 1024 --variants k03_smem_tiled k05_regblock_2d k06_transposed \
        k07_padded k08_swizzled k09_double_buffered k10_warptiled --config k07_padded:pad=1 \
        > "$out/ncu.csv" 2> "$out/ncu.err"; echo "ncu rc=$?"; grep -c matmul "$out/ncu.csv" ;;
    sanitize)
      for tool in memcheck racecheck; do
        timeout 300 compute-sanitizer --tool $tool python3 benchmarks/run_rungs_once.py \
          > "$out/sanitize_$tool.log" 2>&1; echo "$tool rc=$?"; tail -3 "$out/sanitize_$tool.log"
      done ;;
  esac
done
