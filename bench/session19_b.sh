#!/usr/bin/env bash
# Session 19, run B: the channels-last pooling tiles (NCHW back on the N-d kernels), the interpolate tile kernel and
# grid_sample's channels-last staging, against torch eager and torch.compile in the same process; the pooling and
# image GPU tests.  ab_new/src: HEAD + pool/ + image/, carried (the conv family was being edited).
#   bash bench/session19_b.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
export PYTHONPATH=$PWD/ab_new/src
timeout 150 python bench/pool_ab.py "$out/pool.json" 2>&1 | f
timeout 300 python bench/image_ab.py "$out/image.json" 2>&1 | f | python bench/image_brief.py
timeout 240 python -m pytest -q -p no:warnings -n 8 tests/pool tests/image --tb=short -rf > "$out/tests.txt" 2>&1; f "$out/tests.txt" | tail -6
