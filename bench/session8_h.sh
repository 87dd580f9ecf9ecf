#!/usr/bin/env bash
# Session 8, run H: the batched register linalg kernels after the no-row-move LU / Gauss-Jordan change (the warp
# sweep of bench/small_linalg_probe.py again, torch beside), then their GPU tests.   bash bench/session8_h.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 150 python bench/small_linalg_probe.py "$out/small_linalg_probe.json" 2>&1 | f | tail -6
timeout 260 python -m pytest -q -p no:warnings -n 14 --maxfail=60 -v --tb=line -rf tests/linalg tests/generic \
  -k "lu or det or inv or solve or linalg" > "$out/gpu_tests.txt" 2>&1
grep -E "FAILED|ERROR|passed|failed" "$out/gpu_tests.txt" | tail -12 | cut -c1-300
