#!/usr/bin/env bash
# The whole check-and-benchmark pass on the GPU machine, in one call:
#   bash benchmarks/gpu_pass.sh [steps...]     (the checkout on PYTHONPATH, numba-cuda/CuPy/torch installed)
# steps (default all): tests bench conv patterns tile ncu sanitize sanitize_patterns; on request: fast (matmul
# k11/k12 sweep + ncu + sanitizers), small (64x64 tiles and splits at small/ragged sizes), ncu_small (the
# default's kernel durations at ragged ~1000 sizes), ncu_conv (stall reasons of the conv default's two
# weight paths; ncu_conv_stalls: every stall reason as a raw metric), ncu_im2col (conv2d_nchw's im2col copy), split_rule (the default's split-K row choice, timed), sanitize_cases (the sanitizers on SANITIZE_CASES), conv_default (the conv default path), dispatch (host/wall/GPU µs per call,
# the 256³ matmul configs, then the stream/graph and launch tests),
# tilecpp (Tile C++ checks; SIMT_TILES_CACHE_DIR must hold the cubins built off the GPU), tile_table (the
# SIMT-vs-Tile table: needs cuda.tile + tileiras and cuda-cccl importable), conv_tune (conv2d's shipped tuning),
# zoo (issue 32's matmul zoo), narrow (its narrow class: zoo rows and a tile/split sweep), waves (its mid-wave class: tiles and splits past 132 tiles), conv33 (issue 33's host time, NCHW zoo, resnet18), unmeasured (session 35's kernels: GPU tests, probes, ncu, sanitizers), new37 (session 37's volume filters, 16-bit softmax, batched tensor-core matmul: GPU tests, memcheck, probes), mma_guards (issue 30's hoisted guards, timed and memchecked), catchup (sessions 35-38's unmeasured paths in one call: GPU tests, the depthwise/large-filter decisions, the volume rx presets), s39 (session 39's changes: the tests the H100 failed, the new 16-bit softmax and mma defaults' tests and timings, the torch layer), s39b (session 39's offline branches: k12 ry, k05 vec, depthwise planes), k11_skew (issue 33: k11's padded patch rows, probe + ncu), mma_frag (issue 30: fragments two k-slices ahead), s42 (sessions 41-42's fixes' GPU tests, session 41's new defaults at untimed points), torch (issue 35), soak (issue 36), leak_probe (its leak reports), defaults (every
# public function's default on the committed benchmark problems against the committed times: issue 29).
# Logs, JSON, markdown and plots go to $OUT (or ./out).  CONV_ARGS / PATTERNS_ARGS add options; PARTS (s39, s39b, k11_skew, s42)
# names the parts of those steps to run (default all; each part's name is its step's own).
set -uo pipefail
out=${OUT:-out}; mkdir -p "$out"
steps=${*:-tests bench conv patterns tile ncu sanitize sanitize_patterns}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee "$out/gpu.txt"
# limit T: T seconds, or less where DEADLINE (epoch seconds, optional: the whole call's end) leaves less
limit() { local t=$1 r; [ -n "${DEADLINE:-}" ] && r=$(( DEADLINE - $(date +%s) - ${2:-15} )) && [ $r -lt $t ] && t=$r; echo $t; }
# part NAME: whether a step's part NAME runs (PARTS, default all: e.g. PARTS="tests probe" for a shorter call)
part() { [ -z "${PARTS:-}" ] || [[ " $PARTS " == *" $1 "* ]]; }
# choices SIZE...: what matmul(a, b) picks at each size on this GPU (float32: rung, config)
choices() {
  python3 -c "import sys, numpy as np; from simt_tiles.kernels.matmul import choose
for s in sys.argv[1:]:
    m, n, k = (list(map(int, s.split('x'))) * 3)[:3]; r, c = choose(None, None, m, n, k, np.float32)
    print(s, r.name, c)" "$@"
}
for step in $steps; do
  echo "=== $step ($(date +%T))"
  case $step in
    tests)
      # one Numba disk cache for the run: what the warm step builds, every xdist worker then loads
      export NUMBA_CACHE_DIR=${NUMBA_CACHE_DIR:-/tmp/simt-tiles-numba-cache}
      # the generated matmul rungs compile for tens of seconds each: fill the disk cache in parallel first
      # (beside the compile gate, which assembles PTX and does not touch Numba's disk cache)
      # (and the default-path conv2d kernels that several tests call with the same fixed filters, k11's
      # small-tile presets, which test_matmul and test_matmul_fast both launch, and k12 with 64x64 tiles:
      # the float32 default up to 32 128x128 tiles, every small matmul(a, b) of every worker); the cores
      # split by work: the warm step ~860 core-seconds cold, the gate ~590 (session 18: 72 s on 12, 148 s on 4;
      # 10 and 6 should finish both in ~90 s)
      python3 benchmarks/warm_kernel_cache.py -j ${WARM_JOBS:-10} --conv-tests --presets 64x64 64x128 128x64 \
        --configs k12_async_copy:bm=64,bn=64,wm=32,wn=32,tn=4,min_blocks=4 ${WARM_CONFIGS:-} > "$out/warm_cache.log" 2>&1 &
      # every test, the "gpu" hypothesis profile: configs from each rung's presets plus a pool drawn
      # once per run, so each (kernel, config, dtype) compiles once; the summary line says how many
      # kernels were compiled and in how long, --durations where the time went
      # the compile gate once (its log and cubins are read by the gate/SASS tests), then pytest across
      # the host's cores (compilation is CPU-bound; one GPU serves every worker). SIGINT at the limit,
      # not SIGTERM: pytest then still prints which tests failed and why.
      export SIMT_TILES_GATE_LOG="$out/compile-gate.log" SIMT_TILES_GATE_CUBINS=/tmp/simt-tiles-cubins
      python3 -m simt_tiles compile-gate -j ${GATE_JOBS:-6} > "$SIMT_TILES_GATE_LOG" 2>&1
      echo "compile gate rc=$? $(tail -1 "$SIMT_TILES_GATE_LOG") ($(date +%T))"; wait; tail -1 "$out/warm_cache.log"
      # --dist worksteal: an idle worker takes queued tests from a busy one (compile times vary 100x)
      export SIMT_TILES_HYPOTHESIS_PROFILE=${SIMT_TILES_HYPOTHESIS_PROFILE:-gpu}
      t=$(limit ${TEST_TIMEOUT:-480} 20); echo "pytest limit ${t} s"; tests_start=$(date +%s)
      # -v: a line per finished test as it finishes, so a pass cut at its limit still says what failed and
      # what ran; passed.txt lists what passed or skipped: TEST_RESUME=<that file> (carried) runs only the rest
      [ -n "${TEST_RESUME:-}" ] && export SIMT_TILES_DESELECT_FILE=$TEST_RESUME && echo "resume: $(wc -l < $TEST_RESUME) tests done before"
      SIMT_TILES_COMPILE_LOG="$out/compiles.tsv" timeout -s INT -k 30 $t python3 -m pytest -v -n "${TEST_JOBS:-16}" --dist worksteal --tb=short -rfE \
        -p no:cacheprovider -p no:benchmark --durations=0 --durations-min=2 --junitxml="$out/junit.xml" tests ${TEST_ARGS:-} > "$out/pytest.log" 2>&1
      echo "pytest rc=$? ($(date +%T), $(( $(date +%s) - tests_start )) s)"
      pkill -9 -f "exec(eval(sys.stdin.readline()))" 2>/dev/null  # xdist workers a cut run's teardown left behind
      { cat ${TEST_RESUME:-/dev/null}; sed -nE 's/^\[gw[0-9]+\] \[ *[0-9]+%\] (PASSED|SKIPPED|XFAIL) (.*[^ ]) *$/\2/p' "$out/pytest.log"; } > "$out/passed.txt"
      echo "$(wc -l < "$out/passed.txt") tests passed or skipped so far; failed: $(grep -cE '^\[gw[0-9]+\] \[ *[0-9]+%\] (FAILED|ERROR)' "$out/pytest.log")"
      grep -E "^(FAILED|ERROR)|^\[gw[0-9]+\] \[ *[0-9]+%\] (FAILED|ERROR)|passed|failed" "$out/pytest.log" | tail -60 ;;
    bench)
      timeout 400 python3 benchmarks/bench_matmul.py --json "$out/matmul_h200.json" --md "$out/matmul_h200.md" \
        --plot "$out/matmul_h200.png" ${BENCH_ARGS:-} 2>&1 | tee "$out/bench.log" | grep -v '^|' ;;
    conv|patterns)
      args_var=$(echo "${step}_ARGS" | tr a-z A-Z)
      timeout ${BENCH_TIMEOUT:-400} python3 -m simt_tiles bench $step --json "$out/${step}_h200.json" \
        --md "$out/${step}_h200.md" --plot "$out/${step}_h200.png" ${!args_var:-} 2>&1 | tee "$out/$step.log" \
        | grep -v '^|' | tail -80 ;;
    tile)
      timeout 300 python3 benchmarks/lab/tile_smoke.py 2>&1 | tee "$out/tile_smoke.log" | tail -40 ;;
    fast)
      # the fast matmul rungs (issue 14): the README's matmul_fast table plus the session-9 small-tile /
      # split-K rows that won somewhere (custom rows, kept in the results file) in one run with Triton; then
      # the ragged / 1024 sweep (matmul_ragged_h200.*): k11 masked (pad=2) against padded copies (pad=3)
      # at ragged sizes from 251x263x257 to 1031x997x1013 (decides tuned/h200.json rules.matmul_pad), and
      # k12 tiles that might pass Triton at 1024^3; then Nsight Compute on the default at 4096^3 and
      # 1024^3, and the three sanitizers on ragged shapes for every small-tile preset, split and the
      # padded path (benchmarks/lab/run_fast_once.py)
      K=k11_generated_split_k; K12=k12_async_copy; c64="bm=64,bn=64,wm=32,wn=32,tn=4,min_blocks=4"
      c64x128="bm=64,wm=32,wn=64,min_blocks=3"; c128x64="bn=64,min_blocks=3"
      ragged="$K:$c64,pad=2 $K:$c64,pad=3 $K:splits=3,pad=2 $K:splits=3,pad=3 $K:splits=4,pad=3
        $K:$c64x128,splits=2,pad=3 $K12:$c64 $K12:$c64x128 $K12:$c128x64 $K12:splits=2"
      python3 benchmarks/warm_kernel_cache.py -j 16 --no-conv --dtypes float32 --presets 64x64 64x128 128x64 \
        --configs $ragged 2>&1 | tee "$out/warm_cache.log" | tail -1
      timeout ${BENCH_TIMEOUT:-400} python3 -m simt_tiles bench matmul --variants $K $K12 --default \
        --no-extra-peers --config $K:$c64 $K:$c64,splits=2 $K:$c64x128,splits=2 $K:splits=2 $K:splits=4 \
        --json "$out/matmul_fast_h200.json" --md "$out/matmul_fast_h200.md" 2>&1 | tee "$out/fast.log" | grep -v '^|'
      timeout ${BENCH_TIMEOUT:-400} python3 -m simt_tiles bench matmul --variants $K12 --default --no-extra-peers \
        --sizes 1024 1000 1031x997x1013 509x503x521 251x263x257 --config $ragged \
        --json "$out/matmul_ragged_h200.json" --md "$out/matmul_ragged_h200.md" 2>&1 | tee "$out/ragged.log" \
        | grep -v '^|'
      python3 benchmarks/lab/ragged_rule.py "$out/matmul_ragged_h200.json" | tee "$out/ragged_rule.txt"
      m=sm__sass_thread_inst_executed_op_ffma_pred_on.sum,smsp__inst_executed.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread
      timeout 120 ncu --clock-control none -k regex:matmul_k11 --metrics "$m" --csv \
        python3 benchmarks/lab/run_fast_once.py --shapes 4096 1024 --cases default \
        > "$out/ncu_matmul_fast_h200.csv" 2> "$out/ncu_fast.err"; echo "ncu rc=$?"
      for tool in memcheck racecheck synccheck; do
        timeout 150 compute-sanitizer --tool $tool --report-api-errors no python3 benchmarks/lab/run_fast_once.py \
          --shapes 131x97x67 260x132x100 > "$out/sanitize_fast_$tool.log" 2>&1
        echo "$tool rc=$?"; tail -2 "$out/sanitize_fast_$tool.log"
      done
      # one file holding every output of the step (a caller may get only a few files back)
      tar czf "$out/fast_outputs.tgz" -C "$out" $(cd "$out" && ls matmul_fast_h200.* matmul_ragged_h200.* fast.log \
        ragged.log ragged_rule.txt warm_cache.log ncu_matmul_fast_h200.csv ncu_fast.err sanitize_fast_*.log 2>/dev/null) ;;
    small)
      # the split-K rule's small and ragged sizes (tuned/h200.json rules.matmul_split_k): 64x64 tiles with k12
      # (cp.async zero-fill: any K tail, any alignment) at 1-4 splits and k11 padded, beside the default,
      # cuBLAS and Triton (matmul_small_h200.*): SM load balance decides (272 64x64 blocks on 132 SMs)
      K=k11_generated_split_k; K12=k12_async_copy; c64="bm=64,bn=64,wm=32,wn=32,tn=4,min_blocks=4"
      c64x128="bm=64,wm=32,wn=64,min_blocks=3"; c128x64="bn=64,min_blocks=3"
      # tiles whose grid fills whole waves at 1031x997 (benchmarks/notes/matmul.md, "Waves and tiles"): 32x64 (64 threads of 8x4, cuBLAS's
      # tile there) 33x16 = 528 blocks, four per SM; 32x128 / 128x32 (64 threads of 8x8) 264, two per SM
      c32x64="bm=32,bn=64,wm=32,wn=32,tm=8,tn=4,min_blocks=6"
      c32x128="bm=32,bn=128,wm=32,wn=64,tm=8,tn=8,min_blocks=4"; c128x32="bm=128,bn=32,wm=64,wn=32,tm=8,tn=8,min_blocks=4"
      cfgs=${SMALL_CONFIGS:-"$K12:$c64 $K12:$c64,splits=2 $K12:$c64,splits=4 $K:$c64 $K12:$c32x64 $K12:$c32x64,splits=2
        $K12:$c32x128 $K12:$c128x32 $K12:$c32x128,splits=2 $K12:$c128x64,splits=2 $K12:$c64x128,splits=2"}
      choices ${SMALL_SIZES:-509x503x521 768 1031x997x1013 1280x1024x1024 1536} | tee "$out/small_choices.txt"
      python3 benchmarks/warm_kernel_cache.py -j 8 --no-conv --dtypes float32 --configs $cfgs 2>&1 | tail -1
      timeout $(limit ${BENCH_TIMEOUT:-200}) python3 -m simt_tiles bench matmul --variants $K12 --default --no-extra-peers \
        --reps 15 --sizes ${SMALL_SIZES:-509x503x521 768 1031x997x1013 1280x1024x1024 1536} --config $cfgs \
        --json "$out/matmul_small_h200.json" --md "$out/matmul_small_h200.md" 2>&1 | tee "$out/small.log" \
        | grep -v '^|' | tail -3 ;;
    ncu_small)
      # where the default's time goes at the ragged ~1000 sizes: every kernel's duration (A's transpose, B's
      # padded copy, the tile kernel, the split sum) under Nsight Compute, one pass per kernel
      timeout $(limit 180) ncu --clock-control none --metrics gpu__time_duration.sum --csv \
        python3 benchmarks/lab/run_fast_once.py --shapes ${NCU_SIZES:-1031x997x1013 1024x997x1024 1024} --cases default \
        > "$out/ncu_small_h200.csv" 2> "$out/ncu_small.err"; echo "ncu rc=$?"
      grep -E 'simt_tiles|matmul_k1' "$out/ncu_small_h200.csv" | awk -F'","' '{print $5, $9, $NF}' | cut -c1-150 ;;
    ncu_conv)
      # the conv default's two weight paths at 8192² 5×5 / 7×7 constant (k10 PARAMS: a NumPy filter as kernel
      # parameters; STAGED: a device filter, as a CuPy one, staged per block): warp stall reasons and issue rates side by side
      timeout $(limit 240) ncu --clock-control none --section WarpStateStats --section SchedulerStats \
        --section LaunchStats --section Occupancy -k regex:k10 --csv python3 benchmarks/lab/ncu_conv_once.py \
        > "$out/ncu_conv_h200.csv" 2> "$out/ncu_conv.err"; echo "ncu rc=$?"; grep -E "constant" "$out/ncu_conv_h200.csv" ;;
    ncu_im2col)
      # issue 33: the im2col copy's limits (0.74 TB/s at resnet18 layer1.0.conv1, N = 32; notes/conv_nchw.md):
      # speed of light, memory workload, warp stalls and occupancy of its launches on two layers
      timeout $(limit 180) ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis \
        --section WarpStateStats --section Occupancy -k regex:im2col --csv python3 benchmarks/lab/ncu_im2col_once.py \
        > "$out/ncu_im2col_h200.csv" 2> "$out/ncu_im2col.err"; echo "ncu rc=$?"
      grep -E "layer|Memory Throughput|DRAM Throughput|Stall Long Scoreboard|Achieved Occupancy" "$out/ncu_im2col_h200.csv" | cut -c1-200 | head -24 ;;
    sanitize_cases)
      # memcheck, racecheck and synccheck on ragged shapes for the matmul cases in SANITIZE_CASES
      # (run_fast_once.py's "variant:preset[:splits[:pad]]" or "variant:field=value,...")
      for tool in memcheck racecheck synccheck; do
        timeout $(limit 150) compute-sanitizer --tool $tool --report-api-errors no python3 benchmarks/lab/run_fast_once.py \
          --shapes 131x97x67 260x132x100 --cases ${SANITIZE_CASES:-default} > "$out/sanitize_cases_$tool.log" 2>&1
        echo "$tool rc=$?"; tail -2 "$out/sanitize_cases_$tool.log"
      done ;;
    ncu_conv_stalls)
      # the same launches, every warp-stall reason per issued instruction (the section's chart, as raw
      # metrics), instructions issued and the kernel's duration: where STAGED's extra cycles go
      timeout $(limit 240) ncu --clock-control none -k regex:k10 --csv --metrics \
        "regex:^smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$,smsp__inst_executed.sum,gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active" \
        python3 benchmarks/lab/ncu_conv_once.py > "$out/ncu_conv_stalls_h200.csv" 2> "$out/ncu_conv_stalls.err"
      echo "ncu rc=$?"; grep -c stalled "$out/ncu_conv_stalls_h200.csv" ;;
    split_rule)
      # what matmul(a, b) picks from rules.matmul_split_k on this GPU (variant, tile, splits; rows may name a
      # tile and "balance" splits), then the default timed at the small/ragged sizes beside cuBLAS/Triton
      choices ${SMALL_SIZES:-509x503x521 768 1024 1031x997x1013 1280x1024x1024 1536} | tee "$out/split_rule.txt"
      timeout $(limit ${BENCH_TIMEOUT:-200}) python3 -m simt_tiles bench matmul --variants k12_async_copy --default \
        --reps 15 --sizes ${SMALL_SIZES:-509x503x521 768 1024 1031x997x1013 1280x1024x1024 1536} \
        --json "$out/matmul_split_rule_h200.json" --md "$out/matmul_split_rule_h200.md" 2>&1 | tail -12 ;;
    conv_default)
      OUT="$out" bash benchmarks/lab/conv_default_gpu.sh 2>&1 | tee "$out/conv_default.log" | tail -30 ;;
    dispatch)
      # host, wall and GPU µs per call; the k11 configs at 256³ (their kernels warmed first: a cold
      # generated kernel compiles for tens of seconds); then the stream/graph GPU tests
      python3 benchmarks/warm_kernel_cache.py -j 16 --dtypes float32 --presets 64x64 128x64 --no-conv 2>&1 \
        | tail -1
      timeout $(limit 420) python3 -m simt_tiles bench dispatch --out "$out" 2>&1 | tee "$out/dispatch.log" | tail -60
      [ "${DISPATCH_TESTS:-1}" = 0 ] && continue  # (the tests step runs them too)
      timeout -s INT $(limit 300) python3 -m pytest -q --tb=short -rfE -p no:cacheprovider tests/test_streams_graphs.py \
        tests/test_launch.py > "$out/dispatch_tests.log" 2>&1
      echo "pytest rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" "$out/dispatch_tests.log" | tail -30 ;;
    tilecpp)
      timeout 200 python3 benchmarks/lab/tilecpp_gpu.py "$out/tilecpp_h200.json" 2>&1 | tee "$out/tilecpp.log" | tail -40 ;;
    tile_table)
      timeout 400 python3 -m simt_tiles bench tile --reps 10 --out "$out" ${TILE_TABLE_ARGS:-} 2>&1 \
        | tee "$out/tile_table.log" | tail -30 ;;
    conv_tune)
      # the shipped conv2d entries: tune the 12 benchmark problems, then write them into simt_tiles/tuned/
      python3 benchmarks/warm_kernel_cache.py -j 15 --conv-tuning 2>&1 | tail -1
      timeout 400 python3 benchmarks/tune_tables.py run --functions conv2d --out "$out" 2>&1 | tee "$out/conv_tune.log" | tail -20
      python3 benchmarks/tune_tables.py table "$out/autotune_h200.json" ;;
    ncu)
      m=l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,smsp__inst_executed.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed
      timeout 300 ncu --clock-control none --metrics "$m" --csv \
        python3 benchmarks/lab/run_rungs_once.py --shapes 1024 --variants k03_smem_tiled k05_regblock_2d k06_transposed \
        k07_padded k08_swizzled k09_double_buffered k10_warptiled --config k07_padded:pad=1 \
        > "$out/ncu.csv" 2> "$out/ncu.err"; echo "ncu rc=$?"; grep -c matmul "$out/ncu.csv" ;;
    sanitize)
      for tool in memcheck racecheck; do
        timeout 300 compute-sanitizer --tool $tool python3 benchmarks/lab/run_rungs_once.py \
          > "$out/sanitize_$tool.log" 2>&1; echo "$tool rc=$?"; tail -3 "$out/sanitize_$tool.log"
      done ;;
    sanitize_patterns)
      # one sanitizer run per ladder, each with its own time limit (all in one run did not finish
      # within 130 s under memcheck); racecheck only where shared memory is used
      for tool in memcheck racecheck; do
        for ladder in softmax reduce elementwise conv2d separable conv_nchw; do
          [ $tool = racecheck ] && [ $ladder = elementwise ] && continue
          log="$out/sanitize_${tool}_$ladder.log"
          timeout ${SANITIZE_TIMEOUT:-150} compute-sanitizer --tool $tool python3 benchmarks/lab/run_patterns_once.py \
            --only $ladder > "$log" 2>&1
          echo "$tool $ladder rc=$? checks ok: $(grep -c ' ok' "$log") $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log")"
        done
      done ;;
    zoo)
      # issue 32: the layout/batch/GEMV tests, then the matmul shape zoo beside cuBLAS and torch FP32
      OUT="$out" BUDGET_S=$(limit ${ZOO_BUDGET:-400}) bash benchmarks/lab/matmul_zoo_pass.sh 2>&1 | tail -40 ;;
    narrow)
      # issue 32's narrow class (dispatch.narrow_plan): the zoo's narrow rows with the default, then the
      # tiles and splits around the rule's picks at measured and unmeasured narrow sizes
      K12=k12_async_copy; c64="bm=64,bn=64,wm=32,wn=32,tn=4,min_blocks=4"; c128x64="bn=64,min_blocks=3"
      c64x128="bm=64,wm=32,wn=64,min_blocks=3"; c32x64="bm=32,bn=64,wm=32,wn=32,tm=8,tn=4,min_blocks=6"
      # k11 beside k12: k12 first writes Aᵀ (an extra read and write of A: ~50/N of the product's time at
      # 50 TFLOP/s and 4 TB/s), which tall, narrow products (N ≤ 256) pay most (benchmarks/notes/matmul.md)
      K=k11_generated_split_k
      cfgs=${NARROW_CONFIGS:-"$K12:$c64,splits=4 $K12:$c64,splits=8 $K12:$c128x64 $K12:$c128x64,splits=4
        $K12:$c32x64,splits=8 $K:$c128x64 $K:$c128x64,splits=4 $K:$c64,splits=4 $K:$c64,splits=8 $K:splits=2"}
      sizes=${NARROW_SIZES:-"4096x64x4096 64x4096x4096 100352x64x576 32x1000x2048 4096x128x4096 2048x64x8192
        6272x256x2304 25088x128x1152 100352x128x576"}
      choices $sizes | tee "$out/narrow_choices.txt"
      python3 benchmarks/warm_kernel_cache.py -j 16 --no-conv --dtypes float32 --configs $cfgs > "$out/narrow_warm.log" 2>&1 &
      ZOO_JOBS=16 timeout $(limit ${NARROW_ZOO_TIMEOUT:-150}) python3 -m simt_tiles bench matmul --zoo --zoo-only resnet \
        skinny attention --reps 10 --budget-s 0.25 --json "$out/zoo_narrow.json" --md "$out/zoo_narrow.md" \
        > "$out/zoo_narrow.log" 2>&1; echo "zoo rc=$?"; wait
      timeout $(limit ${BENCH_TIMEOUT:-150}) python3 -m simt_tiles bench matmul --variants $K12 --default --no-extra-peers \
        --reps 10 --budget-s 0.25 --sizes $sizes --config $cfgs --json "$out/matmul_narrow_h200.json" \
        --md "$out/matmul_narrow_h200.md" > "$out/narrow.log" 2>&1; echo "sweep rc=$?" ;;
    waves)
      # issue 32's mid-wave class (dispatch.wave_plan): products past 132 tiles of 128x128 that fill one to
      # four waves (before session 32 the catch-all row ran k12 128x128 unsplit, however empty the last
      # wave): tiles and splits at LLM prefill, GPT-2 and ragged sizes, with controls that fill whole waves
      K12=k12_async_copy; c64="bm=64,bn=64,wm=32,wn=32,tn=4,min_blocks=4"; c128x64="bn=64,min_blocks=3"
      c64x128="bm=64,wm=32,wn=64,min_blocks=3"
      cfgs=${WAVES_CONFIGS:-"$K12:splits=2 $K12:splits=3 $K12:splits=4 $K12:$c128x64 $K12:$c128x64,splits=2
        $K12:$c128x64,splits=3 $K12:$c64x128 $K12:$c64x128,splits=2 $K12:$c64 $K12:$c64,splits=2"}
      sizes=${WAVES_SIZES:-"512x11008x4096 1024x11008x4096 777x5555x333 1024x3072x768 3000 1536x4096x4096
        2048 4096"}
      choices $sizes | tee "$out/waves_choices.txt"
      python3 benchmarks/warm_kernel_cache.py -j 16 --no-conv --dtypes float32 --configs $cfgs > "$out/waves_warm.log" 2>&1
      echo "warm rc=$? ($(date +%T))"
      timeout $(limit ${BENCH_TIMEOUT:-300}) python3 -m simt_tiles bench matmul --variants $K12 --default --no-extra-peers \
        --reps 10 --budget-s 0.25 --sizes $sizes --config $cfgs --json "$out/matmul_waves.json" \
        --md "$out/matmul_waves.md" > "$out/waves.log" 2>&1; echo "sweep rc=$?" ;;
    defaults)
      # issue 29: each default against its committed time (benchmarks/lab/defaults_check.py; compiles first)
      timeout $(limit ${DEFAULTS_TIMEOUT:-300}) python3 benchmarks/lab/defaults_check.py -j 16 --json "$out/defaults_h200.json" \
        > "$out/defaults.log" 2>&1; echo "defaults rc=$?"; grep -v "^\[" "$out/defaults.log" | tail -45 ;;
    unmeasured)
      # session 35's kernels, tested only in the simulator until now: softmax k09 (by name), depthwise conv2d_nchw
      # and conv2d k11 past 7x7 (both default paths). Their GPU tests, then each beside what it replaces and its
      # peers in the same run, Nsight Compute's DRAM bytes of k09, the sanitizers on every softmax variant.
      # DEPTHWISE_OLD: the k04_depthwise.py of c006160 (`git show`; the device copy has no git history)
      export NUMBA_CACHE_DIR=${NUMBA_CACHE_DIR:-/tmp/simt-tiles-numba-cache}
      SIMT_TILES_HYPOTHESIS_PROFILE=${SIMT_TILES_HYPOTHESIS_PROFILE:-gpu} timeout -s INT $(limit ${UNMEASURED_TESTS_TIMEOUT:-150}) \
        python3 -m pytest -q -n ${TEST_JOBS:-12} -p no:cacheprovider --tb=short -rfE tests/test_softmax.py \
        tests/test_conv_nchw_depthwise.py tests/test_conv2d_large.py -k "k09 or depthwise or large" > "$out/unmeasured_tests.log" 2>&1
      echo "tests rc=$?"; tail -3 "$out/unmeasured_tests.log"
      timeout $(limit ${K09_TIMEOUT:-120}) python3 benchmarks/lab/softmax_ticket_probe.py --reps 12 --peers \
        --k09 '[{}, {"min_blocks": 1}]' --knobs '[{}]' --json "$out/k09_probe.json" \
        --shapes 1024x128256,1024x151936,64x128256,8x151936,33x77824,4096x50257,600x50257,2048x65024,4096x94209,4096x32000 \
        > "$out/k09_probe.log" 2>&1; echo "k09 probe rc=$?"; tail -14 "$out/k09_probe.log"
      timeout $(limit ${DEPTHWISE_TIMEOUT:-130}) python3 benchmarks/lab/depthwise_probe.py ${DEPTHWISE_OLD:+--old-source $DEPTHWISE_OLD} \
        --ablate --json "$out/depthwise_probe.json" > "$out/depthwise_probe.log" 2>&1; echo "depthwise probe rc=$?"; tail -14 "$out/depthwise_probe.log"
      timeout $(limit ${LARGE_FILTER_TIMEOUT:-130}) python3 benchmarks/lab/large_filter_probe.py --json "$out/large_filter_probe.json" \
        > "$out/large_filter_probe.log" 2>&1; echo "large-filter probe rc=$?"; tail -20 "$out/large_filter_probe.log"
      timeout $(limit 60) ncu -k regex:k09 -c 1 --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum \
        python3 benchmarks/lab/ncu_k08_once.py 1024 128256 variant=k09_register_pieces > "$out/ncu_k09.log" 2>&1
      echo "ncu rc=$?"; grep -E "dram__|gpu__time" "$out/ncu_k09.log"
      for tool in racecheck memcheck; do
        timeout $(limit 90) compute-sanitizer --tool $tool python3 benchmarks/lab/run_patterns_once.py --only softmax \
          > "$out/sanitize_${tool}_softmax.log" 2>&1
        echo "$tool softmax rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitize_${tool}_softmax.log")"
      done ;;
    new37)
      # session 37's paths, tested only in the simulator until now: 3-D correlate/convolve (k12_volume), 16-bit
      # softmax/log_softmax, the tensor-core matmul's batches (grid z) and 1-D operands. GPU tests, memcheck on
      # the volume rung, then each probe (every output checked against its peer before timing)
      export NUMBA_CACHE_DIR=${NUMBA_CACHE_DIR:-/tmp/simt-tiles-numba-cache}
      SIMT_TILES_HYPOTHESIS_PROFILE=${SIMT_TILES_HYPOTHESIS_PROFILE:-gpu} timeout -s INT $(limit ${NEW37_TESTS_TIMEOUT:-150}) \
        python3 -m pytest -q -n ${TEST_JOBS:-12} -p no:cacheprovider --tb=short -rfE tests/test_conv3d_volume.py \
        tests/test_softmax16.py tests/test_bias_relu16.py tests/test_mma.py tests/test_interop.py \
        tests/test_matmul_layouts.py::test_zero_stride_copy_runs_on_the_calls_stream > "$out/new37_tests.log" 2>&1
      echo "tests rc=$?"; tail -3 "$out/new37_tests.log"
      SIMT_TILES_HYPOTHESIS_PROFILE=ci timeout $(limit 120) compute-sanitizer --tool memcheck --report-api-errors no \
        python3 -m pytest -q -p no:cacheprovider tests/test_conv3d_volume.py > "$out/new37_memcheck.log" 2>&1
      echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' "$out/new37_memcheck.log")"
      timeout $(limit 120) python3 benchmarks/lab/volume_filter_probe.py --json "$out/volume_filter_probe.json" \
        > "$out/volume_filter_probe.log" 2>&1; echo "volume probe rc=$?"; tail -12 "$out/volume_filter_probe.log"
      timeout $(limit 120) python3 benchmarks/lab/softmax16_probe.py --json "$out/softmax16_probe.json" \
        > "$out/softmax16_probe.log" 2>&1; echo "softmax16 probe rc=$?"; tail -12 "$out/softmax16_probe.log"
      timeout $(limit 150) python3 -m simt_tiles.bench.mma --out "$out/mma_batched" --peers cublas \
        --presets "bf16:default;bf16:large;tf32:default" --sizes 32x512x512x64,32x512x64x512,4096x4096x4096 \
        > "$out/mma_batched.log" 2>&1; echo "mma batched rc=$?"; tail -12 "$out/mma_batched.log" ;;
    catchup)
      # every unmeasured path of sessions 35-38 in one call (the device never came in 36-38): their GPU tests in one
      # pytest, then the two default-path decisions of session 35 (depthwise stride 2, k11 past 7x7: each beside what
      # it replaced), then the volume filters with k12's rx presets, with what is left of DEADLINE
      export NUMBA_CACHE_DIR=${NUMBA_CACHE_DIR:-/tmp/simt-tiles-numba-cache}
      SIMT_TILES_HYPOTHESIS_PROFILE=${SIMT_TILES_HYPOTHESIS_PROFILE:-gpu} timeout -s INT $(limit ${CATCHUP_TESTS_TIMEOUT:-240} 130) \
        python3 -m pytest -q -n ${TEST_JOBS:-14} -p no:cacheprovider --tb=short -rfE tests/test_softmax.py \
        tests/test_conv_nchw_depthwise.py tests/test_conv2d_large.py tests/test_conv3d_volume.py tests/test_softmax16.py \
        tests/test_bias_relu16.py tests/test_mma.py tests/test_interop.py tests/test_reduce16.py \
        tests/test_matmul_layouts.py::test_zero_stride_copy_runs_on_the_calls_stream \
        -k "k09 or depthwise or large or volume or softmax16 or bias_relu16 or mma or interop or zero_stride or reduce16" \
        > "$out/catchup_tests.log" 2>&1
      echo "tests rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" "$out/catchup_tests.log" | tail -25 | cut -c1-400
      t=$(limit 100 130); timeout $t python3 benchmarks/lab/depthwise_probe.py ${DEPTHWISE_OLD:+--old-source $DEPTHWISE_OLD} \
        --ablate --budget $(( t - 15 )) --json "$out/depthwise_probe.json" > "$out/depthwise_probe.log" 2>&1
      echo "depthwise probe rc=$?"; tail -16 "$out/depthwise_probe.log" | cut -c1-300
      timeout $(limit 110 40) python3 benchmarks/lab/large_filter_probe.py --quick --json "$out/large_filter_probe.json" \
        > "$out/large_filter_probe.log" 2>&1; echo "large-filter probe rc=$?"; tail -16 "$out/large_filter_probe.log" | cut -c1-300
      timeout $(limit 150 3) python3 benchmarks/lab/volume_filter_probe.py --reps 10 --calls 20 --json "$out/volume_filter_probe.json" \
        > "$out/volume_filter_probe.log" 2>&1; echo "volume probe rc=$?"; tail -12 "$out/volume_filter_probe.log" | cut -c1-300 ;;
    s39)
      # session 39's changes on a GPU: the tests the last H100 run failed (16-bit views, the fast-guard test, the volume
      # default) and the new defaults' tests (16-bit softmax's vec=8 "half", the mma presets' guards); the 16-bit
      # default beside torch (k08 rows, and k08 half where k05 is the default today); the mma defaults' guards beside
      # guards 1 at 4096³ and a ragged size; the torch layer's host time per op (no digits model)
      export NUMBA_CACHE_DIR=${NUMBA_CACHE_DIR:-/tmp/simt-tiles-numba-cache}
      part tests && { SIMT_TILES_HYPOTHESIS_PROFILE=${SIMT_TILES_HYPOTHESIS_PROFILE:-gpu} timeout -s INT $(limit 150 120) python3 -m pytest -q \
        -n ${TEST_JOBS:-14} -p no:cacheprovider --tb=short -rfE tests/test_softmax16.py tests/test_softmax16_vec.py \
        tests/test_interop.py tests/test_reduce16.py tests/test_conv3d_volume.py tests/test_torch_ops.py tests/test_mma.py \
        tests/test_matmul_layouts.py -k "softmax16 or vec or pairs or storage_view or 16bit or reduce16 or fast_guard or \
        default_takes or taps or guards or default_sources or tiny_values or negative_batch_stride or empty_inner" \
        > "$out/s39_tests.log" 2>&1
      echo "tests rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" "$out/s39_tests.log" | tail -15 | cut -c1-300; }
      part softmax && { timeout $(limit 100 60) python3 benchmarks/lab/softmax16_probe.py --vec '[{"vec": 8, "loads": 4}]' --vec-everywhere \
        --shapes 1024x128256,4096x50257,64x128256,8x151936 --json "$out/softmax16_s39.json" > "$out/softmax16_s39.log" 2>&1
      echo "softmax16 rc=$?"; grep -vE "Warning|warn\(" "$out/softmax16_s39.log" | tail -40 | cut -c1-200; }
      part mma && { timeout $(limit 90 40) python3 -m simt_tiles.bench.mma --out "$out/mma_s39" --peers cublas --sizes 4096x4096x4096,1031x997x1013 \
        --presets "tf32:default;tf32:default,guards=2;tf32:default,guards=3;bf16:default;bf16:default,guards=1;bf16:large;bf16:large,guards=1" \
        > "$out/mma_s39.log" 2>&1; echo "mma rc=$?"; grep -E "^\| (4096|1031)" "$out/mma_s39.log" | cut -c1-160; }
      part torch && { timeout $(limit 60 3) python3 benchmarks/bench_torch.py --out "$out/torch_s39" --skip-digits 2>&1 \
        | tail -40 | cut -c1-200; } ;;
    s39b)
      # session 39's offline branches, each off by default until this run: k12 RY outputs in y (the volume probe's
      # default configs), k05's 16-bit wide loads, depthwise planes per block (the one-warp tiles' layers)
      export NUMBA_CACHE_DIR=${NUMBA_CACHE_DIR:-/tmp/simt-tiles-numba-cache}
      part s39b_tests && { SIMT_TILES_HYPOTHESIS_PROFILE=${SIMT_TILES_HYPOTHESIS_PROFILE:-gpu} timeout -s INT $(limit 120 300) python3 -m pytest -q \
        -n ${TEST_JOBS:-14} -p no:cacheprovider --tb=short -rfE tests/test_conv3d_volume.py tests/test_softmax16_k05_vec.py \
        tests/test_conv_nchw_depthwise.py -k "ry or vec or planes" > "$out/s39b_tests.log" 2>&1
      echo "tests rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" "$out/s39b_tests.log" | tail -15 | cut -c1-300; }
      part volume && { timeout $(limit 150 150) python3 benchmarks/lab/volume_filter_probe.py --reps 10 --calls 20 --json "$out/volume_ry.json" \
        > "$out/volume_ry.log" 2>&1; echo "volume rc=$?"; grep -E " ok | skipped" "$out/volume_ry.log" | cut -c1-160 | tail -40; }
      part k05 && { timeout $(limit 90 60) python3 benchmarks/lab/softmax16_probe.py --k05-vec --json "$out/softmax16_k05_vec.json" \
        > "$out/softmax16_k05_vec.log" 2>&1; echo "k05 vec rc=$?"; grep -vE "Warn|warn\(" "$out/softmax16_k05_vec.log" | tail -30 | cut -c1-160; }
      part depthwise && { timeout $(limit 60 3) python3 benchmarks/lab/depthwise_probe.py --planes --json "$out/depthwise_planes.json" \
        > "$out/depthwise_planes.log" 2>&1; echo "depthwise rc=$?"; tail -20 "$out/depthwise_planes.log" | cut -c1-300; } ;;
    s42)
      # sessions 41-42's paths never run on a GPU: the K = 0 / ragged-N matmul fixes, the stride-2 NaN tests after the
      # unflatten refactor, the 0-d reduce, the two-pass inf cval (tests); session 41's new defaults at the points
      # its runs did not time (k11 skew 15x15 / 21x21, k12 rx3y2 at 7^3: defaults_s41.py)
      export NUMBA_CACHE_DIR=${NUMBA_CACHE_DIR:-/tmp/simt-tiles-numba-cache}
      part s42_tests && { SIMT_TILES_HYPOTHESIS_PROFILE=${SIMT_TILES_HYPOTHESIS_PROFILE:-gpu} timeout -s INT $(limit 150 300) python3 -m pytest -q \
        -n ${TEST_JOBS:-14} -p no:cacheprovider --tb=short -rfE tests/test_matmul_layouts.py tests/test_conv_nchw_general.py tests/test_reduce.py \
        tests/test_conv2d_separable.py tests/test_conv2d_ndimage.py tests/test_torch_ops.py \
        tests/test_softmax16_k05_spill16.py \
        -k "empty_inner or ragged_n or stride2 or zero_d or infinite_cval or output_forms or spill16 or non_finite_weight or \
        contiguous_as or second_derivatives or dynamic_shapes or empty_images" \
        > "$out/s42_tests.log" 2>&1
      echo "tests rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" "$out/s42_tests.log" | tail -15 | cut -c1-300; }
      part held16 && { timeout $(limit 120 60) python3 benchmarks/lab/softmax16_probe.py --k05-vec held16 \
        --shapes 4096x50257,2048x65024,1024x50257,4096x32000 --json "$out/softmax16_held16.json" > "$out/softmax16_held16.log" 2>&1
      echo "held16 rc=$?"; grep -vE "Warn|warn\(" "$out/softmax16_held16.log" | tail -30 | cut -c1-180; }
      part s41_defaults && { timeout $(limit 150 60) python3 benchmarks/lab/defaults_s41.py --json "$out/defaults_s41.json" \
        > "$out/defaults_s41.log" 2>&1; echo "defaults_s41 rc=$?"; tail -14 "$out/defaults_s41.log" | cut -c1-200; } ;;
    k11_skew)
      # issue 33, session 40 (benchmarks/notes/conv2d.md): k11's window loads with the patch rows padded by 16 bytes
      # every 128 (Config.skew; 4-way bank-conflicted before) — the GPU tests, every filter of the probe beside the
      # default, then Nsight Compute's shared-memory wavefronts, conflicts, FMA pipe and stalls at 9x9, both layouts
      export NUMBA_CACHE_DIR=${NUMBA_CACHE_DIR:-/tmp/simt-tiles-numba-cache}
      part k11_tests && { SIMT_TILES_HYPOTHESIS_PROFILE=${SIMT_TILES_HYPOTHESIS_PROFILE:-gpu} timeout -s INT $(limit 100 250) python3 -m pytest -q \
        -n ${TEST_JOBS:-14} -p no:cacheprovider --tb=short -rfE tests/test_conv2d_large.py > "$out/k11_skew_tests.log" 2>&1
      echo "tests rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" "$out/k11_skew_tests.log" | tail -8 | cut -c1-300; }
      part probe && { timeout $(limit 200 70) python3 benchmarks/lab/large_filter_probe.py --skew --no-alt --no-peer --reps 10 \
        --json "$out/large_filter_skew.json" > "$out/large_filter_skew.log" 2>&1
      echo "probe rc=$?"; grep -E "^\|" "$out/large_filter_skew.log" | cut -c1-220; }
      part ncu && { timeout $(limit 90 3) ncu --clock-control none --section WarpStateStats --section SchedulerStats -c 6 -k regex:k11 \
        --metrics l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,gpu__time_duration.sum \
        --csv python3 benchmarks/lab/ncu_conv_once.py --filters 9 --skew 128 > "$out/ncu_k11_skew.csv" 2> "$out/ncu_k11_skew.err"
      echo "ncu rc=$?"; grep -E "shared_op_ld|pipe_fma|pipe_lsu|time_duration|Stall|Issued Warp" "$out/ncu_k11_skew.csv" \
        | awk -F'","' '{print $1" | "$(NF-2)" | "$NF}' | cut -c1-160 | head -60; } ;;
    mma_frag)
      # issue 30, session 40 (benchmarks/notes/mma.md): k13/k14 with fragments two k-slices ahead (Config.frag 2, 3)
      # beside the presets and cuBLAS; the rule: frag=2 only if >= 3% faster at 4096^3 and 8192^3
      timeout $(limit 200 3) python3 -m simt_tiles.bench.mma --out "$out/mma_frag" --peers cublas \
        --sizes 4096x4096x4096,8192x8192x8192,1031x997x1013 \
        --presets "bf16:large;bf16:large,frag=2;bf16:large,frag=3;bf16:default,stages=3;bf16:default,stages=3,frag=2;tf32:large;tf32:large,frag=2;tf32:default;tf32:default,frag=2" \
        > "$out/mma_frag.log" 2>&1; echo "mma frag rc=$?"; grep -E "^\| (4096|8192|1031)" "$out/mma_frag.log" | cut -c1-170 ;;
    mma_guards)
      # issue 30, session 36 (benchmarks/notes/mma.md): k13/k14 with the copies' guards hoisted (Config.guards 2, 3)
      # beside the default (1) and cuBLAS, and TF32 rounded once a block in shared memory (round_in_smem 2, session 36 (b));
      # then guards 3's size-0 copies of out-of-range addresses and the in-place rounding under memcheck
      timeout $(limit ${MMA_TIMEOUT:-360}) python3 -m simt_tiles.bench.mma --out "$out/mma_s36" --peers cublas \
        --sizes 4096x4096x4096,8192x8192x8192,6144x6144x6144,1031x997x1013 \
        --presets "bf16:large;bf16:large,guards=2;bf16:large,guards=3;bf16:default;bf16:default,guards=3;tf32:large;tf32:large,guards=2;tf32:large,guards=3;tf32:default,guards=3;tf32:large,guards=3,round_in_smem=2;tf32:default,guards=3,round_in_smem=2" \
        > "$out/mma_guards.log" 2>&1; echo "mma guards rc=$?"; tail -25 "$out/mma_guards.log"
      SIMT_TILES_HYPOTHESIS_PROFILE=${SIMT_TILES_HYPOTHESIS_PROFILE:-gpu} timeout $(limit 150) compute-sanitizer --tool memcheck --report-api-errors no \
        python3 -m pytest -q -p no:cacheprovider tests/test_mma.py -k "hoisted_guards or round_in_smem" > "$out/mma_guards_memcheck.log" 2>&1
      echo "memcheck rc=$? $(grep -E 'ERROR SUMMARY' "$out/mma_guards_memcheck.log")"; tail -3 "$out/mma_guards_memcheck.log" ;;
    conv33)
      # issue 33: NumPy-filter host time, the NCHW layer zoo (stride 2, depthwise) beside cuDNN, resnet18
      timeout $(limit ${CONV33_TIMEOUT:-400}) python3 benchmarks/lab/conv_issue33.py --out "$out" 2>&1 \
        | tee "$out/conv33.log" | tail -40 ;;
    torch)
      # issue 35: the torch operators' tests (gradcheck, opcheck, fullgraph compile), then host overhead per op
      # inside torch and the digits model beside plain torch (8 workers: serial, 200 s reached 45 of 71 tests)
      SIMT_TILES_HYPOTHESIS_PROFILE=gpu-quick timeout -s INT $(limit ${TORCH_TESTS_TIMEOUT:-200}) python3 -m pytest -q -n 8 -p no:cacheprovider \
        tests/test_torch_ops.py tests/test_softmax_backward.py > "$out/torch_tests.log" 2>&1; tail -3 "$out/torch_tests.log"
      timeout $(limit ${TORCH_BENCH_TIMEOUT:-300}) python3 benchmarks/bench_torch.py --out "$out/torch_h200" --epochs ${TORCH_EPOCHS:-15} 2>&1 | tail -30 ;;
    leak_probe)
      # issue 36: what the leak check reports for freed allocations (benchmarks/lab/leak_probe.py), N=100
      for c in numba numba_close cupy cupy_keep both_close; do
        timeout 60 compute-sanitizer --tool memcheck --leak-check full python3 benchmarks/lab/leak_probe.py $c 100 \
          > "$out/leak_$c.log" 2>&1; echo "leak_probe $c rc=$? $(grep -c 'Leaked' "$out/leak_$c.log") leak reports; $(grep -E 'ERROR SUMMARY' "$out/leak_$c.log")"
      done ;;
    soak_faults)
      # issue 36: the fault tests on the GPU (real allocations; not the subprocess kills or Ctrl-Cs, each a
      # cold k11 compile, 30-50 s) and the soak's verdict tests
      export SIMT_TILES_CACHE_DIR=${SIMT_TILES_CACHE_DIR:-/tmp/stc} NUMBA_CACHE_DIR=${NUMBA_CACHE_DIR:-/tmp/nbc}
      timeout -s INT $(limit ${FAULTS_TIMEOUT:-150}) python3 -m pytest -q -p no:cacheprovider tests/test_faults.py \
        tests/test_soak.py -k "not killed and not ctrl_c" > "$out/test_faults.log" 2>&1; echo "fault tests rc=$?"; tail -3 "$out/test_faults.log" ;;
    soak|soak_memcheck)
      # issue 36 (benchmarks/notes/faults.md): one cache pair for the fills, the soak and the memcheck soak (the
      # same seed draws the same problems; --problems 1 is the first draw of --problems 3)
      export SIMT_TILES_CACHE_DIR=${SIMT_TILES_CACHE_DIR:-/tmp/stc} NUMBA_CACHE_DIR=${NUMBA_CACHE_DIR:-/tmp/nbc}
      if [ $step = soak ]; then P=${SOAK_PROBLEMS:-3}; else P=${SOAK_MEMCHECK_PROBLEMS:-1}; fi
      # the fill: the soak's warm-up calls split over SOAK_FILL_JOBS processes (each problem's calls in one), so
      # the disk-cached kernels (matmul k11/k12, conv2d k10: 5-50 s cold each) compile in parallel, not one
      # after another in the soak's warm-up; skipped when a fill of as many problems finished before, and for
      # soak_memcheck with SOAK_MEMCHECK_FILL=0 (run beside the soak's fill: its warm-up compiles what it needs)
      if { [ $step = soak ] || [ "${SOAK_MEMCHECK_FILL:-1}" != 0 ]; } &&
         ! ls "$SIMT_TILES_CACHE_DIR"/soak_filled_p* 2>/dev/null | awk -F_p -v p=$P '$NF >= p {f=1} END {exit !f}'; then
        J=${SOAK_FILL_JOBS:-12}; fill_start=$(date +%s); ft=$(limit ${SOAK_FILL_TIMEOUT:-180}); fd="$out/.fill_$step"; mkdir -p "$fd"
        for i in $(seq 0 $((J - 1))); do
          timeout -k 5 $ft python3 -m simt_tiles bench soak --fill $i/$J --problems $P > "$fd/$i.log" 2>&1 &
        done
        wait; cat "$fd"/*.log > "$out/${step}_fill.log"; rm -rf "$fd"; fails=$(grep -c "^soak fill.* [1-9][0-9]* \(wrong\|errors\)" "$out/${step}_fill.log")
        echo "fill (problems $P, $J processes): $(grep -c '^soak fill' "$out/${step}_fill.log") of $J done, $fails with wrong results or errors, $(( $(date +%s) - fill_start )) s"
        [ "$(grep -c '^soak fill' "$out/${step}_fill.log")" = $J ] && mkdir -p "$SIMT_TILES_CACHE_DIR" && touch "$SIMT_TILES_CACHE_DIR/soak_filled_p$P"
      fi
      # SOAK_AFTER_PID: the measured soak starts once that process (a memcheck soak run beside the fill) is gone
      if [ $step = soak ] && [ -n "${SOAK_AFTER_PID:-}" ]; then
        while kill -0 "$SOAK_AFTER_PID" 2>/dev/null; do sleep 1; done; echo "soak: waited for $SOAK_AFTER_PID ($(date +%T))"
      fi
      if [ $step = soak ]; then
        # SOAK_MINUTES of measured calls after the warm-up (every problem x form once per thread, the stream
        # forms on every stream: in-process compiles and module loads) and a settle (SOAK_SETTLE_S, 20 s) before
        # the memory baseline; SOAK_ARGS adds options (--gc-freeze); the soak cuts its
        # measured phase to end inside the limit (--wall-limit-s: the "minutes run" target then fails, saying so)
        want=$(awk -v m=${SOAK_MINUTES:-5} 'BEGIN {print int(m * 60 + 0.5)}'); t=$(limit $(( want + ${SOAK_OVERHEAD_S:-150} )))
        echo "soak: ${SOAK_MINUTES:-5} min, limit $t s"
        timeout -k 10 $t python3 -m simt_tiles bench soak --minutes ${SOAK_MINUTES:-5} --threads ${SOAK_THREADS:-16} \
          --streams ${SOAK_STREAMS:-4} --problems $P --settle-s ${SOAK_SETTLE_S:-20} --wall-limit-s $(( t - 10 )) \
          ${SOAK_ARGS:-} --out "$out" > "$out/soak.log" 2>&1
        echo "soak rc=$? (0: every target passed, 1: one failed; $out/soak_*.json)"; grep -E "^(- (PASS|FAIL|INFO)|\*\*|phases|memory)" "$out/soak.log" | cut -c1-400
      else
        # memcheck over a 1-minute soak: SOAK_MEMCHECK_MINUTES of measured calls after the warm-up, which calls
        # every public function in every form on every thread (so each is checked whatever the minute reaches:
        # the JSON's calls_per_function). 4 threads on 2 streams: memcheck serialises and instruments every
        # launch (kernels 10-100x slower), so more threads add no checked code, only a longer warm-up; the latency and
        # memory targets are information there (--ignore). --release frees every cache and destroys the
        # context at the end: --leak-check full reports what is still allocated then. rc 9: memcheck errors.
        t=$(limit ${SOAK_MEMCHECK_TIMEOUT:-300}); echo "memcheck soak: limit $t s"
        # SOAK_MEMCHECK_ARGS: compute-sanitizer's other options; --show-backtrace no by default, because host
        # backtraces keep every allocating call's Python frames, and so its arrays, alive (notes/faults.md, session 22)
        timeout -k 10 $t compute-sanitizer --tool memcheck --leak-check full --report-api-errors no --error-exitcode 9 \
          ${SOAK_MEMCHECK_ARGS:---show-backtrace no} \
          python3 -m simt_tiles bench soak --minutes ${SOAK_MEMCHECK_MINUTES:-1} --threads ${SOAK_MEMCHECK_THREADS:-4} \
          --streams 2 --problems $P --settle-s 5 --sample-s 15 --wall-limit-s $(( t - 20 )) --release \
          --ignore latency,memory --json "$out/soak_memcheck.json" --md "$out/soak_memcheck.md" > "$out/soak_memcheck.log" 2>&1
        echo "memcheck soak rc=$? (0: clean and every target passed, 9: memcheck errors, 1: a soak target failed)"
        grep -E "ERROR SUMMARY|LEAK SUMMARY|^(- (PASS|FAIL|INFO)|\*\*|phases)" "$out/soak_memcheck.log" | cut -c1-400
      fi ;;
  esac
done
# BUNDLE=name: every output in one tarball (a call returns at most 8 files), the logs that matter beside it.
# It bundles, then empties $OUT: a caller's own log under $OUT (this script's output redirected there) is bundled
# half-written and deleted, and a later `tar` of its files in the same call overwrites the bundle with nothing
# (session 19 lost a whole test pass so): redirect outside $OUT, or leave nothing to run after this script.
if [ -n "${BUNDLE:-}" ]; then
  (cd "$out" && tar czf "../$BUNDLE.tgz" . && find . -mindepth 1 -delete && mv "../$BUNDLE.tgz" .)
fi
