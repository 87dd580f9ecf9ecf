#!/usr/bin/env bash
# Session 6's second device call: the GPU tests after the conj-bit fix of the cuSOLVER operand copies (eig_backward and
# complex cholesky_solve no longer refused) and the cuDNN direct launch (tests/conv, tests/attention), the
# determinism probe of the cuSOLVER solves, then ResNet-18 / -50 under bt.mode() and the ResNet-18 host profile.
#   bash bench/session6_d.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 230 python -m pytest -q -p no:warnings -n 14 --tb=line -rf -v tests/linalg tests/conv tests/attention tests/generic \
  -k "linalg or cholesky or lu or solve or inv or det or ldl or triangular or eig or svd or qr or householder or convolution or attention or sdpa" \
  > "$out/gpu_tests.txt" 2>&1
grep -cE " PASSED" "$out/gpu_tests.txt"; grep -E "passed|failed" "$out/gpu_tests.txt" | tail -1
grep -E "^E  |^FAILED" "$out/gpu_tests.txt" | cut -c1-230 | sort | uniq | head -40
timeout 60 python bench/linalg_determinism_probe.py > "$out/determinism_probe.txt" 2>&1; grep -E "DIFFERS|mode|Error" "$out/determinism_probe.txt" | head -20
timeout 110 python bench/resnet_mode.py "$out/resnet_mode.json" --model resnet18,resnet50 --batch 32 \
  > "$out/resnet_mode.txt" 2>&1; grep -E "^resnet" "$out/resnet_mode.txt" | cut -c1-300
timeout 90 python bench/resnet_host_profile.py "$out/resnet18_host.txt" --model resnet18 --batch 32 --steps 3 > /dev/null 2>&1
grep -E "step|queued" "$out/resnet18_host.txt"; sed -n '/Ordered by: internal time/,/Ordered by: cumulative/p' "$out/resnet18_host.txt" | head -30 | cut -c1-160
