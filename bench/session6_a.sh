#!/usr/bin/env bash
# The next device call after session 5 (which had no device time): the GPU tests of what session 5 changed
# (memory order of results, the in-place route, batch_norm's [N, C] walk, the convolution gradients' layout, the
# cuBLAS patch GEMM), then the real-model rows of issues #16 / #18 in one process each: the Llama table with every
# peer, and torchvision ResNet-18 / -50 under bt.mode() against eager.
#   bash bench/session6_a.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
python -m baracuda.cli info > "$out/info.txt" 2>&1; f "$out/info.txt" | sed -n 1,20p
timeout 170 python -m pytest -q -p no:warnings -n 14 --tb=line -rf tests/torch/test_memory_order.py tests/torch/test_mode.py \
  tests/norm_group tests/conv tests/pool tests/models tests/generic -k "not generic or convolution or batch_norm or relu" \
  > "$out/gpu_tests_session5.txt" 2>&1
grep -E "passed|failed" "$out/gpu_tests_session5.txt" | tail -1
grep -E "^/.*Error|^E  |^FAILED" "$out/gpu_tests_session5.txt" | sed 's#.*/src/##' | cut -c1-220 | sort | uniq -c | sort -rn | head -30
timeout 300 python -m baracuda.cli bench --model llama --variant eager,mode,patch,compile,compile+patch,liger \
  --json "$out/model_llama.json" > "$out/model_llama.txt" 2>&1; f "$out/model_llama.txt" | tail -10
timeout 110 python bench/resnet_mode.py "$out/resnet_mode.json" --model resnet18,resnet50 --batch 32 \
  > "$out/resnet_mode.txt" 2>&1; grep -E "^resnet" "$out/resnet_mode.txt" | cut -c1-300
