#!/usr/bin/env bash
# Session 9, run H: masked_fill's vector loads (bounds mask only) — its GPU tests and bench row; the patch tests
# after the transformers-version fix; `baracuda demo` at the default size and at a GPU-sized bf16 block.
#   bash bench/session9_h.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 100 python -m pytest -q -p no:warnings -n 14 -v --tb=line -rf tests/torch/test_patch.py tests/indexing/test_masked.py \
  > "$out/gpu_tests.txt" 2>&1
grep -E "FAILED|ERROR|passed|failed" "$out/gpu_tests.txt" | tail -6 | cut -c1-300
timeout 100 python -m baracuda.cli bench --op masked_fill --max-seconds 60 --time-budget 80 \
  --json "$out/bench_masked_fill.json" > "$out/bench_masked_fill.txt" 2>&1
grep -v "^\[" "$out/bench_masked_fill.txt" | grep "masked_fill  " | cut -c1-190
timeout 100 python -m baracuda.cli demo > "$out/demo.txt" 2>&1; tail -2 "$out/demo.txt"
timeout 150 python -m baracuda.cli demo --dtype bfloat16 --batch 4 --seq 2048 --dim 2048 --heads 16 --reps 20 \
  > "$out/demo_bf16_2048.txt" 2>&1; tail -2 "$out/demo_bf16_2048.txt"
