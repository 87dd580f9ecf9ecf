#!/usr/bin/env bash
# Session 16, run H: the ResNet-50 batch-256 step's timeline under the mode, session 15's tree (.whl/base/src) and
# this one alternating in separate processes: kernel totals, GPU busy / host-caused idle, the unprofiled marks.
#   bash bench/session16_h.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
for r in 1 2; do
for tree in base new; do
  src=$PWD/src; [ $tree = base ] && src=$PWD/.whl/base/src
  PYTHONPATH=$src timeout 120 python bench/step_timeline.py "$out/tl_${tree}_$r.json" --resnet resnet50 --batch 256 --variants mode > /dev/null 2>&1
  python - "$out/tl_${tree}_$r.json" $tree <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); r = d["mode"]
bn = {k[:22]: v for k, v in r["kernels_ms"].items() if "_bn_" in k}
print(sys.argv[2], "wall", round(r["wall_ms"], 2), "busy", round(r["gpu_busy_ms"], 2), "idle_host",
      {k: round(v, 2) for k, v in r["idle_host_ms"].items()}, "marks",
      {k: (round(v["host_ms"], 1), round(v["gpu_ms"], 1)) for k, v in r["marks"].items()}, bn)
PY
done
done
