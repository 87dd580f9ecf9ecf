#!/usr/bin/env bash
# Session 9, run B: the step timeline with Triton's driver launches counted and host / GPU marks (forward, layers
# done) for the HF Llama 4L/2048 (eager, patch) and the demo block; cProfile of the demo block and of the patched
# Llama step on the GPU host.
#   bash bench/session9_b.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 200 python bench/step_timeline.py "$out/timeline_llama.json" --variants eager,patch 2>&1 | f | grep -v Warn | tail -4 | cut -c1-1500
timeout 120 python bench/step_timeline.py "$out/timeline_demo.json" --demo 2>&1 | f | grep -v Warn | tail -4 | cut -c1-1500
(cd bench && timeout 90 python demo_host.py --device cuda --n 50 --profile > "$out/demo_host_profile.txt" 2>&1; head -3 "$out/demo_host_profile.txt")
(cd bench && timeout 200 python patch_host_profile.py "$out/patch_host_full.txt" --full > /dev/null 2>&1; head -3 "$out/patch_host_full.txt")
