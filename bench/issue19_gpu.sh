#!/usr/bin/env bash
# Issue #19's families (FFT, linear algebra) and the #17 sampling additions on the GPU machine in one device call:
# their tests (every backend against the float64 reference; one line per failure in the log), then the bench rows
# of the issue's table against torch eager (linalg timed by per-call events: torch's MAGMA peers abort under
# CUDA-graph capture).
#   bash bench/issue19_gpu.sh OUTDIR [TEST_SECONDS] [BENCH_SECONDS]
source "$(dirname "$0")/device_env.sh" "$@"
tsec=${2:-240}; bsec=${3:-300}
timeout "$tsec" python -m pytest -q -p no:warnings -n 14 --tb=line -rf tests/fft tests/linalg tests/random \
  tests/generic -k "fft or stft or freq or shift or linalg or cholesky or lu or solve or inv or det or ldl or qr or svd or eig or householder or orgqr or matrix_norm or cond or pinv or rank or matrix_exp or matrix_power or vander or cross or vecdot or lstsq or penalt or specul or curand" \
  > "$out/gpu_tests_issue19.txt" 2>&1
grep -E "passed|failed" "$out/gpu_tests_issue19.txt" | tail -1
grep -E "^/work.*Error|^/.*Error" "$out/gpu_tests_issue19.txt" | sed 's#.*/src/##' | cut -c1-200 | sort | uniq -c | sort -rn | head -40
timeout "$bsec" python -m baracuda.cli bench --family linalg --family fft --op apply_penalties,speculative_sampling \
  --no-compile --max-seconds 8 --time-budget $((bsec - 15)) --json "$out/bench_issue19.json" > "$out/bench_issue19.txt" 2>&1
f "$out/bench_issue19.txt" | grep -E " fw | bw " | cut -c1-200 | head -80
