#!/usr/bin/env bash
# Session 20, run D: where the 4096^2 f32 solve (forward, backward) and svd time goes, ours and torch's
# (bench/linalg_large_probe.py).
#   bash bench/session20_d.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 400 python bench/linalg_large_probe.py "$out/linalg_large_probe.json" 2>&1 | f | tail -60
