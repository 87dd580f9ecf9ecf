#!/usr/bin/env bash
# Session 6's first device call: the GPU tests of the linear-algebra families after the batched cuBLAS paths
# (getrfBatched / getrsBatched / trsmBatched), one line per test (-v: a timeout still shows which failed); the
# ResNet-18 host profile under bt.mode() (queue time, torch.profiler CPU table, cProfile); the batched 65536 x 32 x 32
# rows of issue #19 (Triton and cuSOLVER / cuBLAS against torch).
#   bash bench/session6_c.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 240 python -m pytest -q -p no:warnings -n 14 --tb=line -rf -v tests/linalg tests/generic \
  -k "linalg or cholesky or lu or solve or inv or det or ldl or triangular" > "$out/gpu_tests_linalg.txt" 2>&1
grep -cE " PASSED" "$out/gpu_tests_linalg.txt"; grep -E " FAILED|^E  |^FAILED" "$out/gpu_tests_linalg.txt" | cut -c1-230 | sort | uniq | head -40
timeout 120 python bench/resnet_host_profile.py "$out/resnet18_host.txt" --model resnet18 --batch 32 --steps 3 > /dev/null 2>&1
grep -E "step|queued" "$out/resnet18_host.txt"; sed -n '/Self CPU %/,/Self CPU time total/p' "$out/resnet18_host.txt" | cut -c1-150 | head -50
timeout 180 python -m baracuda.cli bench --op cholesky,lu_factor,solve,inv --workload '65536' --no-compile --max-seconds 20 \
  --time-budget 170 --json "$out/bench_batched.json" > "$out/bench_batched.txt" 2>&1
f "$out/bench_batched.txt" | grep -E " fw | bw " | cut -c1-200 | head -40
