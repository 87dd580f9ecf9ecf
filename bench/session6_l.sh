#!/usr/bin/env bash
# Session 6: the pooling GPU tests and rows after the tap-unrolled backward.   bash bench/session6_l.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 150 python -m pytest -p no:warnings -n 14 --tb=line -rf tests/pool tests/generic tests/torch -k "pool" \
  > "$out/gpu_tests_pool.txt" 2>&1
grep -E "passed|failed" "$out/gpu_tests_pool.txt" | tail -1; grep -E "^E  |^FAILED" "$out/gpu_tests_pool.txt" | cut -c1-230 | sort | uniq | head
timeout 150 python -m baracuda.cli bench --op max_pool2d,avg_pool2d,max_pool3d,adaptive_avg_pool2d --time-budget 140 \
  --json "$out/bench_pool.json" > "$out/bench_pool.txt" 2>&1
f "$out/bench_pool.txt" | grep -E " fw | bw " | cut -c1-200
