#!/usr/bin/env bash
# Session 6: issue #19's FFT rows with their backward (complex upstream gradients now) and the SVD 4096^2 rows.
#   bash bench/session6_j.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 150 python -m baracuda.cli bench --op fft,rfft2 --no-compile --max-seconds 20 --time-budget 140 \
  --json "$out/bench_fft.json" > "$out/bench_fft.txt" 2>&1
f "$out/bench_fft.txt" | grep -E " fw | bw " | cut -c1-200
timeout 200 python -m baracuda.cli bench --op svd --workload '4096' --no-compile --max-seconds 60 --time-budget 190 \
  --json "$out/bench_svd.json" > "$out/bench_svd.txt" 2>&1
f "$out/bench_svd.txt" | grep -E " fw | bw " | cut -c1-200
