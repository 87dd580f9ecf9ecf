#!/usr/bin/env bash
# Issue #16 item 4's rows on the GPU machine in one device call, torch.compile peers included: torch.compile's
# caches (inductor's FX-graph and AOT-autograd caches, Triton's kernel cache, all on disk) are warmed first by
# PARALLEL throw-away runs (compiling is CPU-bound; their timings are discarded), then one measured run times every
# row alone on the GPU with the compiled peers loaded from the caches.
#   bash bench/item4_gpu.sh OUTDIR [WARM_SECONDS] [BENCH_SECONDS]
set -u
cd "$(dirname "$0")/.."
out=${1:?output directory}; wsec=${2:-150}; bsec=${3:-300}
mkdir -p "$out"
export PYTHONPATH="$PWD/src"
unset TRITON_INTERPRET
ops="sum,mean,amax,argmax,var,rms_norm,layer_norm,cumsum,logcumsumexp,cross_entropy,softmax,log_softmax,gelu,silu"
wl='last-\[16384,4096\]-bf16|first-\[16384,4096\]-bf16|last-\[16384,4096\]-f32|\[1,16777216\]|\[1048576,16\]|first-\[16,1048576\]|16384x4096-bf16|\[4096,4096\]-f32|\[4096,4096\]-bf16|4096x128256-bf16|64M-bf16'
i=0
for part in "sum,mean" "amax,argmax,var" "rms_norm,layer_norm,softmax,log_softmax" "cumsum,cumprod,logcumsumexp,cross_entropy,gelu,silu"; do
  timeout "$wsec" python -m baracuda.cli bench --op "$part" --workload "$wl" --max-seconds 20 --rep-seconds 0.01 \
    --no-overhead --time-budget $((wsec - 10)) --json "/tmp/warm$i.json" > "/tmp/warm$i.txt" 2>&1 &
  i=$((i + 1))
done
wait
timeout "$bsec" python -m baracuda.cli bench --op "$ops" --workload "$wl" --time-budget $((bsec - 15)) \
  --json "$out/item4.json" > "$out/item4.txt" 2>&1
grep -v "^\[" "$out/item4.txt" | tail -60 | cut -c1-220
# cumprod last and alone (the first run of this script ended in it)
timeout 90 python -m baracuda.cli bench --op cumprod --json "$out/item4_cumprod.json" > "$out/item4_cumprod.txt" 2>&1
echo "cumprod exit $?"; grep -v "^\[" "$out/item4_cumprod.txt" | tail -12 | cut -c1-220
