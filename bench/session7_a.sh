#!/usr/bin/env bash
# Session 7, run A: where the mode's host time goes per ResNet op, and the patched Llama step against
# torch.compile's (wall, GPU busy, kernels).   bash bench/session7_a.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader > "$out/info.txt"
timeout 200 python bench/mode_host_ops.py "$out/mode_host_ops.txt" --n 50 2>&1 | f | head -20
timeout 360 python bench/model_profile.py "$out/profile_llama_patch_compile.json" --variant patch,compile --top 60 \
  2>&1 | f | cut -c1-400
