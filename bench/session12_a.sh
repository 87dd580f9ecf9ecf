#!/usr/bin/env bash
# Session 12, run A: what session 11 never ran on a GPU (the counters under the mode, unique along a dim, the review's
# raw-stream helper), the host bench, and where the mode's Llama step loses to eager on this machine (timeline with
# per-kernel totals, per-op host cost).
#   bash bench/session12_a.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 150 python -m pytest -q -p no:warnings tests/torch/test_mode.py tests/sort/test_unique.py tests/linalg/test_solve.py -x --tb=short -rf > "$out/tests.txt" 2>&1; f "$out/tests.txt" | tail -3
timeout 90 python -m baracuda.cli bench --host --json "$out/host.json" > "$out/host.txt" 2>&1; f "$out/host.txt" | tail -25
timeout 150 python -m baracuda.cli bench --model llama --variant eager,mode --json "$out/model_llama.json" > "$out/model_llama.txt" 2>&1; f "$out/model_llama.txt" | tail -4
timeout 150 python bench/step_timeline.py "$out/llama_timeline.json" --model llama --variants eager,mode > "$out/llama_timeline.txt" 2>&1; tail -c 600 "$out/llama_timeline.txt"
timeout 100 python bench/mode_llama_ops.py "$out/mode_llama_ops.txt" > /dev/null 2>&1; head -40 "$out/mode_llama_ops.txt"
