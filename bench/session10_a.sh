#!/usr/bin/env bash
# Session 10, run A: the GPU host after session 9's call-path changes (baracuda bench --host, scalar_host.py), where
# a routed op's host time goes under the mode (bench/mode_op_probe.py: rotate_half, sdpa, ...), and the Llama
# 4L/2048 eager / mode rows.
#   bash bench/session10_a.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
(cd bench && timeout 150 python mode_op_probe.py "$out/mode_op_probe.txt" --only "rotate_half,neg(strided),cat(strided),sdpa,silu,pow(2)" 2>&1 | f | head -16)
timeout 120 python -m baracuda.cli bench --host --json "$out/host.json" > "$out/host.txt" 2>&1; f "$out/host.txt" | tail -30 | cut -c1-200
(cd bench && timeout 60 python scalar_host.py "$out/scalar_host.json" 2>&1 | f | tail -14)
timeout 200 python -m baracuda.cli bench --model llama --variant eager,mode --json "$out/model_llama.json" > "$out/model_llama.txt" 2>&1; f "$out/model_llama.txt" | tail -8
