#!/usr/bin/env bash
# Session 16, run B: the ResNet-50 step's timeline under the mode against eager, with the runtime / driver API calls
# (a synchronisation or an allocation shows as a long call); the random family's CUDA-graph test after the fix.
#   bash bench/session16_b.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 80 python -m pytest -q -p no:warnings tests/random/test_graph_safe.py --tb=short -rf > "$out/graph_safe.txt" 2>&1; f "$out/graph_safe.txt" | tail -3
timeout 240 python bench/step_timeline.py "$out/resnet50_timeline.json" --resnet resnet50 --batch 256 --variants eager,mode > "$out/resnet50_timeline.txt" 2>&1; tail -c 300 "$out/resnet50_timeline.txt"
python - "$out/resnet50_timeline.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for v, r in d.items():
    if not isinstance(r, dict) or "wall_ms" not in r: continue
    print(v, "wall", round(r["wall_ms"], 2), "busy", round(r["gpu_busy_ms"], 2), "idle_host", r["idle_host_ms"], "launches", r["launches"])
    print("  host_phase", r["host_phase_ms"], "marks", r["marks"])
    for k, x in list(r["api_ms"].items())[:8]: print("  api", k, x)
    for k, x in list(r["kernels_ms"].items())[:12]: print("  k", k[:110], x)
    for k, x in list(r["idle_before_kernel_ms"].items())[:6]: print("  idle<", k[:100], x)
PY
