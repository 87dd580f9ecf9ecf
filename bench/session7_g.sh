#!/usr/bin/env bash
# Session 7, run G: reduction GPU tests after the split path is bound; its host time per call.
#   bash bench/session7_g.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 150 python -m pytest -p no:warnings -n 14 --tb=line -rf tests/reduction tests/reduction_stats tests/generic \
  -k "reduction or sum or mean or amax or argmax or aminmax or nanmean or count_nonzero" > "$out/gpu_tests_reduction.txt" 2>&1
grep -E "passed|failed" "$out/gpu_tests_reduction.txt" | tail -1; grep -E "^E  |^FAILED" "$out/gpu_tests_reduction.txt" | cut -c1-230 | sort | uniq | head
timeout 60 python bench/split_host.py 2>&1 | f | tee "$out/split_host.txt"
