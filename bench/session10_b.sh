#!/usr/bin/env bash
# Session 10, run B: GPU tests of the in-place pointwise path (tests/torch/test_mode.py, test_memory_order.py);
# torchvision ResNet-18 / -50 train steps under bt.mode() against eager at batch 32 and 256; the Llama 4L/2048
# eager / mode rows again (run A's 1.04x, once more).
#   bash bench/session10_b.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 240 python -m pytest -q -p no:warnings tests/torch/test_mode.py tests/torch/test_memory_order.py -x --tb=line -rf 2>&1 | f | tail -4
timeout 150 python bench/resnet_mode.py "$out/resnet_b32.json" --batch 32 2>&1 | f | grep -E "^resnet|Error" | cut -c1-400
timeout 200 python bench/resnet_mode.py "$out/resnet_b256.json" --batch 256 2>&1 | f | grep -E "^resnet|Error" | cut -c1-400
timeout 200 python -m baracuda.cli bench --model llama --variant eager,mode --json "$out/model_llama.json" > "$out/model_llama.txt" 2>&1; f "$out/model_llama.txt" | tail -5
