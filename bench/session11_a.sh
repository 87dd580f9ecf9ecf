#!/usr/bin/env bash
# Session 11, run A: the host-path changes for the ResNet step under the mode (batch_norm's backward on a tape per
# gradient pattern, batch_norm's launches bound, cuDNN's direct execute): GPU tests of what they touch, the cuDNN call's
# host time (direct vs the frontend's public execute), and the ResNet steps at batch 256 and 32 for the session's
# start (.whl/base11: git archive of the previous commit's src) and this tree, in the same run.
#   bash bench/session11_a.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 200 python -m pytest -q -p no:warnings tests/conv/test_conv_cudnn.py tests/norm_group tests/torch/test_mode.py -x --tb=short -rf > "$out/tests.txt" 2>&1; f "$out/tests.txt" | tail -4
(cd bench && timeout 60 python cudnn_host.py "$out/cudnn_host.json" 2>&1 | f | tail -3)
for b in 256 32; do
  for tree in base work; do
    src=$PWD/src; [ $tree = base ] && src=$PWD/.whl/base11/src
    PYTHONPATH=$src timeout 140 python bench/resnet_mode.py "$out/resnet_b${b}_$tree.json" --batch $b 2>&1 | f | grep -E "^resnet|Error" | sed "s/^/$tree b$b /" | cut -c1-300
  done
done
