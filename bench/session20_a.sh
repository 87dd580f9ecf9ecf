#!/usr/bin/env bash
# Session 20, runs A-C: the one-warp linalg kernels (linalg/warp.py) -- their GPU tests, the linalg GPU tests that
# route f32 n <= 32 to them, and issue #19's batched 65536 x 32x32 rows (bench/warp_linalg_ab.py).
# (run A filtered the linalg tests without "chol": there was no warp Cholesky yet; runs B and C ran
# session20_b.sh / session20_c.sh, this script under their names.)
#   bash bench/session20_a.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 150 python -m pytest -p no:warnings -q --tb=short -rf tests/linalg/test_warp_gpu.py > "$out/gpu_tests_warp.txt" 2>&1
tail -3 "$out/gpu_tests_warp.txt"; grep -E "^E  |^FAILED" "$out/gpu_tests_warp.txt" | cut -c1-250 | head -30
timeout 170 python bench/warp_linalg_ab.py "$out/warp_linalg_ab.json" 2>&1 | f | tail -12
timeout 200 python -m pytest -p no:warnings -q -n 14 --tb=line -rf tests/linalg tests/generic -k "solve or lu or det or inv or chol" \
  > "$out/gpu_tests_linalg.txt" 2>&1
grep -E "passed|failed" "$out/gpu_tests_linalg.txt" | tail -1; grep -E "^E  |^FAILED" "$out/gpu_tests_linalg.txt" | cut -c1-230 | sort | uniq | head -20
