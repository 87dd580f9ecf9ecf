#!/usr/bin/env bash
# Session 6's fourth device call: the complex cholesky_solve / cholesky_inverse tests after the two-trsm path, and
# the potrf probe (upper vs lower fill mode at 4096^2 against torch).
#   bash bench/session6_f.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 120 python -m pytest -p no:warnings -n 14 --tb=line -rf tests/linalg tests/generic \
  -k "cholesky_solve or cholesky_inverse or potrs" > "$out/gpu_tests_chol.txt" 2>&1
grep -E "passed|failed" "$out/gpu_tests_chol.txt" | tail -1; grep -E "^E  |^FAILED" "$out/gpu_tests_chol.txt" | cut -c1-230 | sort | uniq | head -20
timeout 90 python bench/potrf_probe.py > "$out/potrf_probe.txt" 2>&1; f "$out/potrf_probe.txt" | tail -5
