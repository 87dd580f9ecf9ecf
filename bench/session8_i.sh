#!/usr/bin/env bash
# Session 8, run I: the atomic-accumulating rows after relaxed order (embedding backward, segment_sum, histc,
# bincount), before (.whl/base/src, 2d19204) and after, and masked_fill alone (its first #17 run ran out of memory
# beside other workloads' inputs).   bash bench/session8_i.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
for v in base new; do
  src=$PWD/src; [ $v = base ] && src=$PWD/.whl/base/src
  PYTHONPATH=$src timeout 120 python -m baracuda.cli bench --no-compile --op embedding_backward,segment_sum,histc,bincount \
    --max-seconds 15 --time-budget 110 --json "$out/bench_atomics_$v.json" > "$out/bench_atomics_$v.txt" 2>&1
  grep -v "^\[" "$out/bench_atomics_$v.txt" | grep -E "triton|torch " | cut -c1-190
done
timeout 150 python -m baracuda.cli bench --op masked_fill --max-seconds 60 --time-budget 140 \
  --json "$out/bench_masked_fill.json" > "$out/bench_masked_fill.txt" 2>&1
grep -v "^\[" "$out/bench_masked_fill.txt" | tail -8 | cut -c1-190
