#!/usr/bin/env bash
# Session 9, run D: the Llama 4L/2048 step under bt.mode() measured 39.6 ms in session 6 (run 1) and 45.6 ms in run C:
# eager and mode with the session-6 tree (.whl/base6/src = git archive 2d52a0e src) and this one, same process
# order, and each tree's per-kernel GPU time under the mode (bench/step_timeline.py).
#   bash bench/session9_d.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
for v in base6 new; do
  src=$PWD/src; [ $v = base6 ] && src=$PWD/.whl/base6/src
  PYTHONPATH=$src timeout 150 python -m baracuda.cli bench --model llama --variant eager,mode \
    --json "$out/model_llama_$v.json" > "$out/model_llama_$v.txt" 2>&1; f "$out/model_llama_$v.txt" | grep -E "^(eager|mode) "
  PYTHONPATH=$src timeout 100 python bench/step_timeline.py "$out/timeline_mode_$v.json" --variants mode > /dev/null 2>&1
done
python - "$out" <<'PY'
import json, sys
a, b = (json.load(open(f"{sys.argv[1]}/timeline_mode_{v}.json"))["mode"] for v in ("base6", "new"))
print("busy", a["gpu_busy_ms"], b["gpu_busy_ms"], "launches", a["launches"], b["launches"])
for n in sorted(set(a["kernels_ms"]) | set(b["kernels_ms"]), key=lambda n: -max(a["kernels_ms"].get(n, 0), b["kernels_ms"].get(n, 0)))[:30]:
    print(f'{a["kernels_ms"].get(n, 0):8.3f} {b["kernels_ms"].get(n, 0):8.3f}  {n[:110]}')
PY
