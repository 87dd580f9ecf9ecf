#!/usr/bin/env bash
# Session 13, run D: mean's gradient (the expand kernel's store tiles now 16 KB for every dtype: f32 took 32 KB) on
# the item-4 rows beside torch eager and torch.compile, and the reduction tests on the GPU once more.
#   bash bench/session13_d.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 120 python -m pytest -q -p no:warnings tests/reduction/test_reduction.py -x --tb=short -rf > "$out/tests.txt" 2>&1
f "$out/tests.txt" | tail -3
timeout 200 python -m baracuda.cli bench --op mean,broadcast_to --workload 'last-\[16384,4096\]|first-\[16384,4096\]' \
  --json "$out/mean_bw.json" > "$out/mean_bw.txt" 2>&1; echo "bench exit $?"
grep -v "^\[" "$out/mean_bw.txt" | tail -30 | cut -c1-170
