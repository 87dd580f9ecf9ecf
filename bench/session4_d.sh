#!/usr/bin/env bash
# Session 4's fourth device call: issue #19's families (FFT, linalg) and the merged #17 / #18 additions on the GPU:
# their tests (every backend against the float64 reference), then bench rows against torch eager; the reduction rows
# changed this session (mean's gradient, narrow column reductions) with their torch.compile peers.
#   bash bench/session4_d.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 230 python -m pytest -q -p no:warnings -n 14 --maxfail=80 tests/fft tests/linalg tests/random tests/image/test_roi.py \
  tests/conv tests/reduction tests/generic \
  -k "fft or stft or freq or shift or linalg or cholesky or lu or solve or inv or det or ldl or qr or svd or eig or householder or orgqr or norm or cond or pinv or rank or matrix or vander or cross or vecdot or lstsq or penalt or specul or curand or uniform or normal or roi or nms or convolution or depthwise or mean_backward or broadcast or reduction" \
  > "$out/gpu_tests.txt" 2>&1
grep -E "passed|failed|^FAILED|^ERROR" "$out/gpu_tests.txt" | head -60 | cut -c1-220
timeout 100 python -m pytest -q -p no:warnings -x tests/generic/test_ops.py -k "test_forward and convolution and cudnn and bf16" 2>&1 | grep -E "^E|Error" | head -12 | cut -c1-300
timeout 260 python -m baracuda.cli bench --family linalg --family fft --no-compile --max-seconds 6 --time-budget 250 \
  --json "$out/bench_linalg_fft.json" > "$out/bench_linalg_fft.txt" 2>&1; f "$out/bench_linalg_fft.txt" | grep -E " fw | bw " | cut -c1-200 | head -70
