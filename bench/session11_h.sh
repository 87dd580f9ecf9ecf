#!/usr/bin/env bash
# Session 11, run H: GPU tests of the global-sort unique, tensorinv / tensorsolve and the cuDNN workspace cap; the
# unique bench row (16M int64, against torch.unique).
#   bash bench/session11_h.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 150 python -m pytest -q -p no:warnings tests/sort/test_unique.py tests/conv/test_conv_cudnn.py tests/linalg/test_solve.py -k "unique or tensor or kept or raw or cudnn" -x --tb=short -rf > "$out/tests.txt" 2>&1; f "$out/tests.txt" | tail -3
timeout 120 python -m baracuda.cli bench --op unique,unique_consecutive --json "$out/bench_unique.json" > "$out/bench_unique.txt" 2>&1; f "$out/bench_unique.txt" | grep -E " fw | bw " | cut -c1-200
