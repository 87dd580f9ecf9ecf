#!/usr/bin/env bash
# Session 6: the spectral backward GPU tests after the pullback change, and eigh 4096^2's backward row.
#   bash bench/session6_i.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 150 python -m pytest -p no:warnings -n 14 --tb=line -rf tests/linalg tests/generic -k "eig or svd or qr" \
  > "$out/gpu_tests_spectral.txt" 2>&1
grep -E "passed|failed" "$out/gpu_tests_spectral.txt" | tail -1; grep -E "^E  |^FAILED" "$out/gpu_tests_spectral.txt" | cut -c1-230 | sort | uniq | head
timeout 150 python -m baracuda.cli bench --op eigh --workload '4096.*f32' --no-compile --max-seconds 60 --time-budget 140 \
  --json "$out/bench_eigh.json" > "$out/bench_eigh.txt" 2>&1
f "$out/bench_eigh.txt" | grep -E " fw | bw " | cut -c1-200
