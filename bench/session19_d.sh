#!/usr/bin/env bash
# Session 19, run D: the depthwise table with torch's default cudnn.benchmark = False (run C had it on), the Triton
# route's tile sweep (bp / bc / warps); the conv / pool / image GPU tests on the committed tree.
#   bash bench/session19_d.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 150 python bench/depthwise_ab.py "$out/depthwise_default.json" default > "$out/depthwise_default.txt" 2>&1; f "$out/depthwise_default.txt" | grep -v "^{"
timeout 100 python bench/depthwise_ab.py "$out/depthwise_sweep.json" sweep > "$out/depthwise_sweep.txt" 2>&1; f "$out/depthwise_sweep.txt" | tail -2
timeout 260 python -m pytest -q -p no:warnings -n 12 tests/conv tests/pool tests/image --tb=short -rf > "$out/tests.txt" 2>&1; f "$out/tests.txt" | tail -8
