#!/usr/bin/env bash
# Session 10, run D: batch_norm's statistics and backward sums with per-lane accumulators (one cross-lane reduction
# per program): GPU tests, the op's bench rows, the ResNet-50 / -18 batch-256 timelines and steps again, and a
# cProfile of the ResNet-50 step under the mode (host time by function).
#   bash bench/session10_d.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 200 python -m pytest -q -p no:warnings tests/norm_group tests/torch/test_memory_order.py -x --tb=line -rf 2>&1 | f | tail -3
timeout 200 python -m pytest -q -p no:warnings tests/generic -k batch_norm -x --tb=line -rf 2>&1 | f | tail -3
timeout 150 python -m baracuda.cli bench --op batch_norm --json "$out/bench_bn.json" > "$out/bench_bn.txt" 2>&1; f "$out/bench_bn.txt" | grep -v "^#" | tail -14 | cut -c1-170
timeout 200 python bench/step_timeline.py "$out/timeline_resnet50.json" --resnet resnet50 --batch 256 2>&1 | f | tail -2 | cut -c1-600
python bench/timeline_summary.py "$out/timeline_resnet50.json" 8
timeout 200 python bench/resnet_mode.py "$out/resnet_b256.json" --batch 256 2>&1 | f | grep -E "^resnet|Error" | cut -c1-300
timeout 120 python bench/resnet_host_profile.py "$out/resnet50_host.txt" --model resnet50 --batch 32 2>&1 | f | tail -3
head -70 "$out/resnet50_host.txt" | cut -c1-160
