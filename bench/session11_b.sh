#!/usr/bin/env bash
# Session 11, run B: where a ResNet call's host time goes on the GPU host (bench/mode_op_probe.py's ResNet cases,
# forward and forward + backward, with cProfiles) and the ResNet-50 batch-32 step's cProfile under the mode.
#   bash bench/session11_b.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
(cd bench && timeout 200 python mode_op_probe.py "$out/op_probe.txt" --n 300 --backward \
   --only "conv2d,conv2d nograd,batch_norm,relu_ (after mul),add_ (residual)" 2>&1 | f | head -12)
timeout 150 python bench/resnet_host_profile.py "$out/resnet50_host.txt" --model resnet50 --batch 32 2>&1 | f | tail -3
head -12 "$out/resnet50_host.txt"
