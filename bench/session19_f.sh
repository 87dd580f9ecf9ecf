#!/usr/bin/env bash
# Session 19, run F (after Nsight Compute, run E): pooling's width-lane tiles for NCHW (one output a lane), the
# interpolate tile as [columns, planes] (one NCHW output a lane), the depthwise weight gradient split for ~8
# programs an SM; the pooling / image / depthwise rows against torch eager and torch.compile in the same process;
# the conv / pool / image GPU tests (cuDNN's included: the wheels carried).
#   bash bench/session19_f.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 100 python bench/pool_ab.py "$out/pool.json" 2>&1 | f
timeout 130 python bench/image_ab.py "$out/image.json" 2>&1 | f | python bench/image_brief.py
timeout 100 python bench/depthwise_ab.py "$out/depthwise_default.json" default > "$out/depthwise_default.txt" 2>&1; f "$out/depthwise_default.txt" | grep -v "^{"
timeout 170 python -m pytest -q -p no:warnings -n 14 tests/conv tests/pool tests/image --tb=short -rf > "$out/tests.txt" 2>&1; f "$out/tests.txt" | tail -8
