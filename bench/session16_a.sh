#!/usr/bin/env bash
# Session 16, run A: what sessions 14-15 never re-ran on a GPU after the call-path changes (torch/_call.py's shared
# grad rule, torch/_schema.py's versioned attribute string): the host bench, Llama under the mode against eager, the
# per-op host cost of a ResNet step under the mode, ResNet train steps; the random family's CUDA-graph test; topk's
# filter at 8 vs 16 warps.
#   bash bench/session16_a.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 90 python -m baracuda.cli bench --host --json "$out/host.json" > "$out/host.txt" 2>&1; f "$out/host.txt" | tail -25
timeout 150 python -m baracuda.cli bench --model llama --variant eager,mode,patch --json "$out/model_llama.json" > "$out/model_llama.txt" 2>&1; f "$out/model_llama.txt" | tail -5
(cd bench && timeout 120 python mode_host_ops.py "$out/mode_host_ops.txt" --n 30 2>&1 | f | head -16)
timeout 200 python bench/resnet_mode.py "$out/resnet_mode.json" --model resnet18,resnet50 --batch 256 > "$out/resnet_mode.txt" 2>&1; f "$out/resnet_mode.txt" | tail -8
timeout 80 python -m pytest -q -p no:warnings tests/random/test_graph_safe.py --tb=short -rf > "$out/graph_safe.txt" 2>&1; f "$out/graph_safe.txt" | tail -3
timeout 60 python bench/topk_warps_ab.py > "$out/topk_warps_ab.txt" 2>&1; f "$out/topk_warps_ab.txt" | tail -4
