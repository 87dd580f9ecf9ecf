#!/usr/bin/env bash
# Session 16, run G: ResNet-50 train steps (batch 256) under the mode against eager, session 15's tree (.whl/base/src,
# `git archive cbe5a92 src`) and this one alternating in separate processes on one machine; the small
# cross_entropy's host cost; GPU tests of sort (topk's 8192 chunks) and random.
#   bash bench/session16_g.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
for r in 1 2; do
  for tree in base new; do
    src=$PWD/src; [ $tree = base ] && src=$PWD/.whl/base/src
    PYTHONPATH=$src timeout 100 python bench/resnet_mode.py "$out/resnet50_${tree}_$r.json" --model resnet50 --batch 256 > "$out/resnet50_${tree}_$r.txt" 2>&1
    echo "$tree $r $(grep '^resnet' "$out/resnet50_${tree}_$r.txt" | cut -c1-170)"
  done
done
timeout 60 python bench/ce_host_probe.py "$out/ce_host_probe.txt" 2>&1 | f | head -4
timeout 200 python -m pytest -q -p no:warnings -n 8 tests/sort tests/random --tb=short -rf > "$out/tests_sort_random.txt" 2>&1; f "$out/tests_sort_random.txt" | tail -3
