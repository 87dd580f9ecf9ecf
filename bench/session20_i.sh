#!/usr/bin/env bash
# Session 20, run I: cholesky's backward rows (op database: 65536 x 32^2 and 4096^2, now with backward=True) and the
# svd rows the table run (E) skipped for its time budget.
#   bash bench/session20_i.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 150 python -m baracuda.cli bench --op cholesky --no-compile --max-seconds 20 --time-budget 140 \
  --json "$out/bench_cholesky.json" > "$out/bench_cholesky.txt" 2>&1
f "$out/bench_cholesky.txt" | grep -E " fw | bw " | cut -c1-200
timeout 200 python -m baracuda.cli bench --op svd --workload 4096 --no-compile --max-seconds 60 --time-budget 190 \
  --json "$out/bench_svd.json" > "$out/bench_svd.txt" 2>&1
f "$out/bench_svd.txt" | grep -E " fw | bw " | cut -c1-200
