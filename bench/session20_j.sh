#!/usr/bin/env bash
# Session 20, run J: det / slogdet / logdet on the one-warp LU (OUT modes) -- the warp GPU tests, the batched rows
# (bench/warp_linalg_ab.py, now with det and slogdet), the generic det tests.
#   bash bench/session20_j.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 90 python -m pytest -p no:warnings -q --tb=short -rf tests/linalg/test_warp_gpu.py > "$out/gpu_tests_warp.txt" 2>&1
tail -3 "$out/gpu_tests_warp.txt"; grep -E "^E  |^FAILED" "$out/gpu_tests_warp.txt" | cut -c1-250 | head -20
timeout 100 python bench/warp_linalg_ab.py "$out/warp_linalg_ab.json" 2>&1 | f | tail -10
timeout 60 python -m pytest -p no:warnings -q -n 14 --tb=line -rf tests/linalg tests/generic -k "det" \
  > "$out/gpu_tests_det.txt" 2>&1
tail -2 "$out/gpu_tests_det.txt"; grep -E "^E  |^FAILED" "$out/gpu_tests_det.txt" | cut -c1-230 | sort | uniq | head -10
