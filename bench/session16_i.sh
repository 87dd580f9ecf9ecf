#!/usr/bin/env bash
# Session 16, run I: ResNet-50 batch-256 steps under the mode, session 15's tree (.whl/base/src) against this one in
# separate processes, three rounds in alternating order, each process timing a fixed CPU loop first (the host speed
# the host-bound mode step depends on).
#   bash bench/session16_i.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
for pair in "base new" "new base" "base new"; do
  for tree in $pair; do
    r=$(( $(ls "$out" | grep -c "^resnet50_${tree}") + 1 ))
    src=$PWD/src; [ $tree = base ] && src=$PWD/.whl/base/src
    PYTHONPATH=$src timeout 100 python bench/resnet_mode.py "$out/resnet50_${tree}_$r.json" --model resnet50 --batch 256 --steps 9 > "$out/resnet50_${tree}_$r.txt" 2>&1
    echo "$tree $r $(grep '^resnet' "$out/resnet50_${tree}_$r.txt" | sed 's/"eager_peak_GB[^,]*,//; s/"mode_peak_GB[^,]*,//' | cut -c1-220)"
  done
done
