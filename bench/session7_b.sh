#!/usr/bin/env bash
# Session 7, run B: pooling GPU tests and rows after the global-mean head and adaptive taps; the reduction sweep;
# the patched Llama step's host time (tiny and full configurations).   bash bench/session7_b.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 170 python -m pytest -p no:warnings -n 14 --tb=line -rf tests/pool tests/generic tests/torch -k "pool" \
  > "$out/gpu_tests_pool.txt" 2>&1
grep -E "passed|failed" "$out/gpu_tests_pool.txt" | tail -1; grep -E "^E  |^FAILED" "$out/gpu_tests_pool.txt" | cut -c1-230 | sort | uniq | head
timeout 120 python -m baracuda.cli bench --op adaptive_avg_pool2d,max_pool2d --time-budget 100 \
  --json "$out/bench_pool.json" > "$out/bench_pool.txt" 2>&1
f "$out/bench_pool.txt" | grep -E " fw | bw " | cut -c1-200
timeout 200 python bench/reduce_sweep.py "$out/reduce_sweep.json" 2>&1 | f | cut -c1-250
timeout 90 python bench/patch_host_profile.py "$out/patch_host_tiny.txt" 2>&1 | f | head -4
timeout 120 python bench/patch_host_profile.py "$out/patch_host_full.txt" --full --steps 10 2>&1 | f | head -4
