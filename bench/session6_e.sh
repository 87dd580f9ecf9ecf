#!/usr/bin/env bash
# Session 6's third device call: the linear-algebra GPU tests after the operand-copy fix (colmajor always copies:
# the solves had overwritten (B, n, 1) right-hand sides), one line per test; the determinism probe again; then
# issue #19's Cholesky / eigh / solve rows with SPD inputs and the batched cuBLAS paths, forward and backward.
#   bash bench/session6_e.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 200 python -m pytest -p no:warnings -n 14 --tb=line -rf -v tests/linalg tests/generic \
  -k "linalg or cholesky or lu or solve or inv or det or ldl or triangular or eig or svd or qr or householder" \
  > "$out/gpu_tests_linalg.txt" 2>&1
grep -cE "PASSED" "$out/gpu_tests_linalg.txt"; grep -E "passed|failed" "$out/gpu_tests_linalg.txt" | tail -1
grep -E " FAILED |^E  " "$out/gpu_tests_linalg.txt" | sed 's/^\[gw[0-9]*\] \[ *[0-9]*%\] //' | cut -c1-230 | sort | uniq | head -40
timeout 60 python bench/linalg_determinism_probe.py > "$out/determinism_probe.txt" 2>&1; grep -cE " same " "$out/determinism_probe.txt"; grep -E "DIFFERS|Error" "$out/determinism_probe.txt" | head
timeout 250 python -m baracuda.cli bench --op cholesky,eigh,solve,lu_factor --workload '4096|65536' --no-compile --max-seconds 12 \
  --time-budget 240 --json "$out/bench_issue19_b.json" > "$out/bench_issue19_b.txt" 2>&1
f "$out/bench_issue19_b.txt" | grep -E " fw | bw " | cut -c1-200 | head -60
