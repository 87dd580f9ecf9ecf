#!/usr/bin/env bash
# Session 17, run A: the normal fill with the hardware sin / cos (f32; untimed in session 16) beside torch and a
# constant fill (the write ceiling); the random family's GPU tests; scatter_add's two index forms against torch eager
# and torch.compile; where topk's time goes by kernel.
#   bash bench/session17_a.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 60 python bench/normal_fill.py "$out/normal_fill.json" 2>&1 | f | cut -c1-160
timeout 120 python -m pytest -q -p no:warnings -n 8 tests/random --tb=short -rf > "$out/tests_random.txt" 2>&1; f "$out/tests_random.txt" | tail -3
timeout 150 python bench/scatter_rows.py "$out/scatter_rows.json" 2>&1 | f | cut -c1-400
timeout 90 python bench/topk_profile.py "$out/topk_profile.json" 2>&1 | f | cut -c1-600
