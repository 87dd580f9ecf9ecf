#!/usr/bin/env bash
# Session 6's last device call: the GPU tests of every family this session touched (linear algebra after the
# lower-fill Cholesky, batch_norm's eps, the convolution samples incl. the patch GEMM), one line per failure, then
# issue #19's Cholesky rows (4096^2 f32 / f64, 65536 x 32x32) against torch.
#   bash bench/session6_g.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 260 python -m pytest -p no:warnings -n 14 --tb=line -rf tests/linalg tests/norm_group tests/conv tests/generic \
  -k "linalg or cholesky or lu or solve or inv or det or ldl or triangular or eig or svd or qr or householder or convolution or batch_norm or not generic" \
  > "$out/gpu_tests.txt" 2>&1
grep -E "passed|failed" "$out/gpu_tests.txt" | tail -1; grep -E "^E  |^FAILED" "$out/gpu_tests.txt" | cut -c1-230 | sort | uniq | head -30
timeout 120 python -m baracuda.cli bench --op cholesky --no-compile --max-seconds 12 --time-budget 110 \
  --json "$out/bench_cholesky.json" > "$out/bench_cholesky.txt" 2>&1
f "$out/bench_cholesky.txt" | grep -E " fw | bw " | cut -c1-200 | head -20
