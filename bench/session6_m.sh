#!/usr/bin/env bash
# The sixth session's last device call: pooling GPU tests after adaptive windows joined the tap-unrolled forward,
# and the adaptive rows.   bash bench/session6_m.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 100 python -m pytest -p no:warnings -n 14 --tb=line -rf tests/pool tests/generic -k "pool" \
  > "$out/gpu_tests_pool.txt" 2>&1
grep -E "passed|failed" "$out/gpu_tests_pool.txt" | tail -1; grep -E "^E  |^FAILED" "$out/gpu_tests_pool.txt" | cut -c1-230 | sort | uniq | head
timeout 60 python -m baracuda.cli bench --op adaptive_avg_pool2d,adaptive_max_pool2d --no-backward --time-budget 50 \
  --json "$out/bench_adaptive.json" > "$out/bench_adaptive.txt" 2>&1
f "$out/bench_adaptive.txt" | grep -E " fw | bw " | cut -c1-200
