#!/usr/bin/env bash
# Session 10, run F: `baracuda demo` at its new GPU default (bf16, 4 x 2048 tokens, dim 2048, 16 heads) and the old
# small f32 block; issue #16's Llama 4L/2048 table with every peer on this session's tree.
#   bash bench/session10_f.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 150 python -m baracuda.cli demo > "$out/demo.txt" 2>&1; tail -2 "$out/demo.txt"
timeout 60 python -m baracuda.cli demo --dtype float32 --batch 2 --seq 256 --dim 512 --heads 4 > "$out/demo_small.txt" 2>&1; tail -2 "$out/demo_small.txt"
timeout 330 python -m baracuda.cli bench --model llama --variant eager,mode,patch,compile,liger --json "$out/model_llama.json" > "$out/model_llama.txt" 2>&1; f "$out/model_llama.txt" | tail -9
