#!/usr/bin/env bash
# Session 8, run C: the GPU tests of indexing / embedding / sort after the segment-bounds and radix-select changes,
# then issue #17's rows with torch eager and torch.compile peers (topk's peer: torch.topk itself).
#   bash bench/session8_c.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 200 python -m pytest -q -p no:warnings -n 14 --maxfail=60 -v --tb=line -rf tests/sort tests/indexing \
  tests/embedding > "$out/gpu_tests.txt" 2>&1
grep -E "FAILED|ERROR|passed|failed" "$out/gpu_tests.txt" | tail -12 | cut -c1-300
timeout 360 python -m baracuda.cli bench --op gather,index_select,index_add,scatter_add,topk,top_k_top_p_sampling \
  --max-seconds 40 --time-budget 330 --json "$out/bench.json" > "$out/bench.txt" 2>&1
grep -v "^\[" "$out/bench.txt" | tail -40 | cut -c1-200
