#!/usr/bin/env bash
# Session 9, run A: where the GPU idles in a step (bench/step_timeline.py: the patched / eager HF Llama 4L/2048 and
# the `baracuda demo` block), `baracuda demo`, and the drop-ins' number-operand host cost after session 8's review.
#   bash bench/session9_a.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 200 python bench/step_timeline.py "$out/timeline_llama.json" --variants eager,patch 2>&1 | f | tail -8 | cut -c1-900
timeout 120 python bench/step_timeline.py "$out/timeline_demo.json" --demo 2>&1 | f | tail -6 | cut -c1-900
timeout 120 python -m baracuda.cli demo > "$out/demo.txt" 2>&1; tail -3 "$out/demo.txt"
(cd bench && timeout 90 python scalar_host.py "$out/scalar_host.json" 2>&1 | f | tail -14)
(cd bench && timeout 60 python demo_host.py --device cuda --n 50 2>&1 | f | tail -3)
