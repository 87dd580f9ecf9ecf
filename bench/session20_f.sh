#!/usr/bin/env bash
# Session 20, run F (G: again after svdvals asks gesvdj for no vectors, with the svd GPU tests first): the 4096^2
# f32 svd on gesvdj against torch's drivers (bench/svd_driver_check.py).
#   bash bench/session20_f.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 100 python -m pytest -q -p no:warnings -n 8 --tb=line -rf tests/linalg/test_spectral.py tests/generic -k "svd" > "$out/gpu_tests_svd.txt" 2>&1; tail -2 "$out/gpu_tests_svd.txt"
timeout 120 python bench/svd_driver_check.py "$out/svd_driver_check.json" 2>&1 | f | tail -5
