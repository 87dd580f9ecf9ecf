#!/usr/bin/env bash
# Session 6's closing device call: the linear-algebra GPU tests after the upper=False Cholesky fix, and the Cholesky
# rows of issue #19 again.   bash bench/session6_h.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 220 python -m pytest -p no:warnings -n 14 --tb=line -rf tests/linalg tests/generic \
  -k "linalg or cholesky or lu or solve or inv or det or ldl or triangular or eig or svd or qr or householder" \
  > "$out/gpu_tests_linalg.txt" 2>&1
grep -E "passed|failed" "$out/gpu_tests_linalg.txt" | tail -1; grep -E "^E  |^FAILED" "$out/gpu_tests_linalg.txt" | cut -c1-230 | sort | uniq | head -30
timeout 120 python -m baracuda.cli bench --op cholesky --no-compile --max-seconds 12 --time-budget 110 \
  --json "$out/bench_cholesky.json" > "$out/bench_cholesky.txt" 2>&1
f "$out/bench_cholesky.txt" | grep -E " fw | bw " | cut -c1-200 | head -20
