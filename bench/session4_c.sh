#!/usr/bin/env bash
# Session 4's third device call: the merged FFT / torchvision-ops / depthwise code on the GPU (tests, bench rows vs
# torch), issue #16's Llama step and memory after the chunk / RoPE / GatedMLP changes (no background load this
# time), and where ResNet-18 under bt.mode(), the demo block and small cross-entropy spend their time.
#   bash bench/session4_c.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 170 python -m pytest -q -p no:warnings -n 12 --maxfail=40 tests/fft tests/image/test_roi.py tests/conv/test_depthwise.py \
  tests/generic -k "fft or stft or roi or nms or convolution" > "$out/gpu_tests.txt" 2>&1
grep -E "passed|failed|^FAILED|^ERROR" "$out/gpu_tests.txt" | head -30 | cut -c1-250
timeout 120 python -m baracuda.cli bench --model llama --variant eager,mode,patch,liger --json "$out/model_llama.json" > "$out/model_llama.txt" 2>&1; f "$out/model_llama.txt" | tail -7
timeout 100 python bench/memory_peak.py "$out/mem_llama.json" --model llama --variant patch,liger > "$out/mem_llama.txt" 2>&1
python - "$out/mem_llama.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for v, r in d["variants"].items():
    print(v, r.get("traced_peak_MB"), r.get("max_allocated_GB"), r.get("error", ""))
PY
timeout 150 python bench/kernel_profile.py "$out/kernel_profile.json" --case resnet18,demo > "$out/kernel_profile.txt" 2>&1; f "$out/kernel_profile.txt" | cut -c1-170 | head -60
timeout 150 python -m baracuda.cli bench --op fft,rfft2,fft_nd,convolution,roi_align,nms --workload "depthwise|2\^24|4096x1024|64x1024|roi|nms" --no-compile --max-seconds 6 \
  --time-budget 140 --json "$out/bench_new.json" > "$out/bench_new.txt" 2>&1; f "$out/bench_new.txt" | grep -E " fw | bw " | cut -c1-200 | head -50
