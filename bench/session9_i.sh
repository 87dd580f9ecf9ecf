#!/usr/bin/env bash
# Session 9, run I: the normal fill's Box-Muller per Philox block (each pair's log / sqrt once, one sinpi per
# element) and masked_fill's row kernel (int32 outer unravel, steps per program): the random and masked GPU tests,
# the random / bincount bench rows, and masked_fill's (block, iters, warps) sweep against torch / torch.compile.
#   bash bench/session9_i.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 110 python -m pytest -q -p no:warnings -n 14 -v --tb=line -rf tests/random tests/indexing/test_masked.py \
  > "$out/gpu_tests.txt" 2>&1
grep -E "FAILED|ERROR|passed|failed" "$out/gpu_tests.txt" | tail -8 | cut -c1-300
timeout 90 python -m baracuda.cli bench --no-compile --op normal,uniform,dropout,bincount --max-seconds 15 \
  --time-budget 80 --json "$out/bench_random.json" > "$out/bench_random.txt" 2>&1
grep -v "^\[" "$out/bench_random.txt" | grep -E "triton|torch " | cut -c1-190
timeout 130 python bench/masked_fill_sweep.py "$out/masked_fill_sweep.json" 2>&1 | tail -3 | cut -c1-600
