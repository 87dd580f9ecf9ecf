#!/usr/bin/env bash
# Session 11, run C: cuDNN calls with a kept workspace and the raw stream; the conv call's host time layer by layer
# (bench/call_layers.py); GPU tests of the cuDNN backends; the ResNet-50 batch-256 timeline under the mode and the
# ResNet steps at batch 256 / 32 (this tree).
#   bash bench/session11_c.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 150 python -m pytest -q -p no:warnings tests/conv/test_conv_cudnn.py tests/attention/test_sdpa_cudnn.py -x --tb=short -rf > "$out/tests.txt" 2>&1; f "$out/tests.txt" | tail -3
(cd bench && timeout 60 python call_layers.py "$out/call_layers.json" 2>&1 | f | tail -9)
(cd bench && timeout 60 python cudnn_host.py "$out/cudnn_host.json" 2>&1 | f | tail -2)
timeout 150 python bench/step_timeline.py "$out/timeline_resnet50.json" --resnet resnet50 --batch 256 2>&1 | f | tail -2 | cut -c1-300
python bench/timeline_summary.py "$out/timeline_resnet50.json"
for b in 256 32; do
  timeout 140 python bench/resnet_mode.py "$out/resnet_b${b}.json" --batch $b 2>&1 | f | grep -E "^resnet|Error" | cut -c1-200
done
