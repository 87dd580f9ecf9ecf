#!/usr/bin/env bash
# Issue #19 on the GPU in one device call: `baracuda info` (the NVIDIA libraries' versions), the GPU
# tests of the FFT / linalg / #17 sampling families (one line per failure), then the issue's speed table (fft,
# rfft2, the batched 65536 x 32 x 32 and the 4096^2 factorizations / solves / inverses, forward and backward)
# against torch eager. torch.compile is not a separate peer here: inductor has no lowering for these ops and calls
# the same aten kernels (cuFFT / cuSOLVER / MAGMA) as eager.
#   bash bench/issue19_table.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
python -m baracuda.cli info > "$out/info.txt" 2>&1; f "$out/info.txt" | head -30
timeout 200 python -m pytest -q -p no:warnings -n 14 --tb=line -rf tests/fft tests/linalg tests/random \
  tests/generic -k "fft or stft or freq or shift or linalg or cholesky or lu or solve or inv or det or ldl or qr or svd or eig or householder or orgqr or matrix_norm or cond or pinv or rank or matrix_exp or matrix_power or vander or cross or vecdot or lstsq or penalt or specul or curand" \
  > "$out/gpu_tests_issue19.txt" 2>&1
grep -E "passed|failed" "$out/gpu_tests_issue19.txt" | tail -1
grep -E "^/.*Error|^E  " "$out/gpu_tests_issue19.txt" | sed 's#.*/src/##' | cut -c1-220 | sort | uniq -c | sort -rn | head -40
timeout 330 python -m baracuda.cli bench --op fft,rfft2,cholesky,lu_factor,solve,inv,qr,eigh,svd \
  --no-compile --max-seconds 6 --time-budget 315 --json "$out/bench_issue19.json" > "$out/bench_issue19.txt" 2>&1
f "$out/bench_issue19.txt" | grep -E " fw | bw " | cut -c1-200 | head -80
