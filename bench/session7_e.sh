#!/usr/bin/env bash
# Session 7, run E: the solve GPU tests and rows after solve's backward reuses the forward's LU.
#   bash bench/session7_e.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 200 python -m pytest -p no:warnings -n 14 --tb=line -rf tests/linalg tests/generic tests/torch -k "solve" \
  > "$out/gpu_tests_solve.txt" 2>&1
grep -E "passed|failed" "$out/gpu_tests_solve.txt" | tail -1; grep -E "^E  |^FAILED" "$out/gpu_tests_solve.txt" | cut -c1-230 | sort | uniq | head
timeout 200 python -m baracuda.cli bench --op solve,inv --time-budget 180 --json "$out/bench_solve.json" \
  > "$out/bench_solve.txt" 2>&1
f "$out/bench_solve.txt" | grep -E " fw | bw " | cut -c1-200
