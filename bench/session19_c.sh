#!/usr/bin/env bash
# Session 19, run C: the tap-unrolled depthwise kernels against torch eager / torch.compile / cuDNN (forced routes),
# the interpolate and grid_sample rows again (forward timed without autograd); the conv / pool / image GPU tests.
#   bash bench/session19_c.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 300 python bench/depthwise_ab.py "$out/depthwise.json" > "$out/depthwise.txt" 2>&1; f "$out/depthwise.txt" | grep -v "^{"
timeout 200 python bench/image_ab.py "$out/image.json" 2>&1 | f | python bench/image_brief.py

