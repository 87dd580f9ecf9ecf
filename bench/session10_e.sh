#!/usr/bin/env bash
# Session 10, run E: GPU tests of this session's changes (in-place path, batch_norm kernels); host cost per ResNet op
# under the mode after the in-place change (bench/mode_host_ops.py, with per-op cProfiles).
#   bash bench/session10_e.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 240 python -m pytest -q -p no:warnings tests/norm_group tests/torch/test_memory_order.py tests/torch/test_mode.py -x --tb=line -rf > "$out/tests.txt" 2>&1; f "$out/tests.txt" | tail -3
timeout 240 python -m pytest -q -p no:warnings tests/generic -k batch_norm -x --tb=line -rf > "$out/tests_generic.txt" 2>&1; f "$out/tests_generic.txt" | tail -3
(cd bench && timeout 200 python mode_host_ops.py "$out/mode_host_ops.txt" --n 30 2>&1 | f | head -14)
