#!/usr/bin/env bash
# Session 9, run G: GPU tests of this session's changes (patch's packed-sequence scan, masked_fill's row kernel, the
# overloads' positional path, the real models); masked_fill's bench row; the Llama 4L/2048 table with every peer
# (second run after the scan change) and the Llama-3-8B-shaped stack (eager, mode, patch, Liger).
#   bash bench/session9_g.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 150 python -m pytest -q -p no:warnings -n 14 -v --tb=line -rf tests/torch/test_patch.py tests/indexing/test_masked.py \
  tests/torch/test_overloads.py tests/models > "$out/gpu_tests.txt" 2>&1
grep -E "FAILED|ERROR|passed|failed" "$out/gpu_tests.txt" | tail -8 | cut -c1-300
timeout 120 python -m baracuda.cli bench --op masked_fill --max-seconds 60 --time-budget 100 \
  --json "$out/bench_masked_fill.json" > "$out/bench_masked_fill.txt" 2>&1
grep -v "^\[" "$out/bench_masked_fill.txt" | grep "masked_fill  " | cut -c1-190
timeout 300 python -m baracuda.cli bench --model llama --variant eager,mode,patch,compile,compile+patch,liger \
  --json "$out/model_llama.json" > "$out/model_llama.txt" 2>&1; f "$out/model_llama.txt" | tail -9
timeout 200 python -m baracuda.cli bench --model llama3-8b-stack --variant eager,mode,patch,liger \
  --json "$out/model_8b.json" > "$out/model_8b.txt" 2>&1; f "$out/model_8b.txt" | tail -7
