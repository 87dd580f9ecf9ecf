#!/usr/bin/env bash
# Session 16, run F: batch_norm's partial folds as [16, 64] tiles (GPU tests; the kernels' times on
# [8, 256, 56, 56]; ResNet train steps under the mode against eager); topk bf16 k = 1024's chunks A/B.
#   bash bench/session16_f.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 200 python -m pytest -q -p no:warnings -n 8 tests/norm_group tests/generic -k "batch_norm or norm_group" --tb=short -rf > "$out/tests_bn.txt" 2>&1; f "$out/tests_bn.txt" | tail -3
timeout 60 python bench/bn_host_probe.py > "$out/bn_host_probe.txt" 2>&1; f "$out/bn_host_probe.txt" | grep -E "us$|_bn_|latency" | cut -c1-150 | head -14
timeout 200 python bench/resnet_mode.py "$out/resnet_mode.json" --model resnet18,resnet50 --batch 256 > "$out/resnet_mode.txt" 2>&1; grep '^resnet' "$out/resnet_mode.txt" | cut -c1-200
timeout 90 python bench/topk_m_ab.py "$out/topk_m_ab.json" 2>&1 | f | grep '^{'
