#!/usr/bin/env bash
# Session 19, run G: the pooling rows once more (a channels-last global-average head on the tile kernel; windows past
# the tile's unroll on the N-d kernels) and the pooling GPU tests.   bash bench/session19_g.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 90 python bench/pool_ab.py "$out/pool.json" 2>&1 | f
timeout 80 python -m pytest -q -p no:warnings -n 14 tests/pool --tb=short -rf > "$out/tests.txt" 2>&1; f "$out/tests.txt" | grep -v "^$" | tail -4
