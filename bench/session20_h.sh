#!/usr/bin/env bash
# Session 20, run H: the op database's solve 4096^2 rows against autograd's (bench/solve_plan_probe.py).
#   bash bench/session20_h.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 200 python bench/solve_plan_probe.py "$out/solve_plan_probe.json" 2>&1 | f | tail -70
