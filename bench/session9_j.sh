#!/usr/bin/env bash
# Session 9, run J: masked_fill's bench row with the swept default (block 4096, 2 steps, 8 warps) and the masked /
# mode GPU tests.   bash bench/session9_j.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 70 python -m pytest -q -p no:warnings -n 14 --tb=line -rf tests/indexing/test_masked.py tests/torch/test_mode.py \
  > "$out/gpu_tests.txt" 2>&1
grep -E "FAILED|ERROR|passed|failed" "$out/gpu_tests.txt" | tail -6 | cut -c1-300
timeout 70 python -m baracuda.cli bench --op masked_fill --max-seconds 40 --time-budget 60 \
  --json "$out/bench_masked_fill.json" > "$out/bench_masked_fill.txt" 2>&1
grep -v "^\[" "$out/bench_masked_fill.txt" | grep "masked_fill  " | cut -c1-190
