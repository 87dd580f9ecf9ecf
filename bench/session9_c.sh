#!/usr/bin/env bash
# Session 9, run C: the Llama 4L/2048 table with every peer after bt.patch stopped HF's packed-sequence scan (its
# host sync) for the model's own position ids; the patched step's timeline; the demo block's per-op host cost.
#   bash bench/session9_c.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 330 python -m baracuda.cli bench --model llama --variant eager,mode,patch,compile,compile+patch,liger \
  --json "$out/model_llama.json" > "$out/model_llama.txt" 2>&1; f "$out/model_llama.txt" | tail -10
timeout 100 python bench/step_timeline.py "$out/timeline_llama_patch.json" --variants patch 2>&1 | f | grep -v Warn \
  | tail -2 | cut -c1-700
(cd bench && timeout 120 python demo_ops_host.py "$out/demo_ops_host.json" 2>&1 | f | tail -9)
