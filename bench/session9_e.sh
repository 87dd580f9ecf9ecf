#!/usr/bin/env bash
# Session 9, run E: the host cost of the ops HF's Llama forward routes under bt.mode() (bench/mode_llama_ops.py)
# and a cProfile of the mode's forward at the 4L/2048 configuration.
#   bash bench/session9_e.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
(cd bench && timeout 200 python mode_llama_ops.py "$out/mode_llama_ops.txt" 2>&1 | f | head -22)
