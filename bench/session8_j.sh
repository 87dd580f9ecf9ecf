#!/usr/bin/env bash
# Session 8, run J: histc / histogram / bincount after the local-histogram count kernel (run I has the before rows),
# then the sort-family GPU tests (histogram, search, unique).   bash bench/session8_j.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 100 python -m baracuda.cli bench --no-compile --op histc,histogram,bincount --max-seconds 15 --time-budget 90 \
  --json "$out/bench_hist.json" > "$out/bench_hist.txt" 2>&1
grep -v "^\[" "$out/bench_hist.txt" | grep -E "triton|torch " | cut -c1-190
timeout 150 python -m pytest -q -p no:warnings -n 14 --maxfail=60 -v --tb=line -rf tests/sort tests/generic \
  -k "hist or bincount or sort or search or unique" > "$out/gpu_tests.txt" 2>&1
grep -E "FAILED|ERROR|passed|failed" "$out/gpu_tests.txt" | tail -12 | cut -c1-300
