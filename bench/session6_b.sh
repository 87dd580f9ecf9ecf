#!/usr/bin/env bash
# The second device call after session 5: the kernel rows of issues #17 / #18 / #16 item 4 that session 5 touched or
# gave a peer, each against torch eager and torch.compile in one process: the ViT patch embedding (now a cuBLAS
# patch GEMM), channels-last ResNet-50 convolutions and depthwise, pooling, top-k / top-p sampling (now against
# torch's sort-based filter + multinomial), and the reductions of item 4; then the host bench.
#   bash bench/session6_b.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 200 python -m baracuda.cli bench --op convolution --workload 'vit_b16|depthwise-144x56|resnet50-64x56\^2->64-k3' \
  --time-budget 190 --json "$out/bench_conv.json" > "$out/bench_conv.txt" 2>&1
f "$out/bench_conv.txt" | grep -E " fw | bw " | cut -c1-210 | head -30
timeout 150 python -m baracuda.cli bench --op max_pool2d,avg_pool2d,adaptive_avg_pool2d,top_k_top_p_sampling,batch_norm \
  --time-budget 140 --json "$out/bench_pool_sampling_bn.json" > "$out/bench_pool_sampling_bn.txt" 2>&1
f "$out/bench_pool_sampling_bn.txt" | grep -E " fw | bw " | cut -c1-210 | head -30
timeout 150 python -m baracuda.cli bench --op sum,mean,amax --workload 'first-\[1048576,16\]-bf16|last-\[16384,4096\]-bf16' \
  --time-budget 140 --json "$out/item4.json" > "$out/item4.txt" 2>&1
f "$out/item4.txt" | grep -E " fw | bw " | cut -c1-210 | head -30
timeout 80 python -m baracuda.cli bench --host --json "$out/host.json" > "$out/host.txt" 2>&1; tail -4 "$out/host.txt" | cut -c1-200
