#!/usr/bin/env bash
# Session 4's second device call (issue #16): the Llama table with every peer (one process), the memory peaks of
# the patched Llama and 8B stack against Liger, where the small-shape cross-entropy and the demo block spend their
# time (bench/kernel_profile.py), the host bench, and the reduction / gelu rows of item 4 against torch.compile.
#   bash bench/session4_b.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
wl='first-\[1048576,16\]-bf16|last-\[16384,4096\]-bf16|64M-bf16'
# compile caches for the item-4 rows, warmed in the background while the models run
(timeout 200 python -m baracuda.cli bench --op sum,mean,amax,gelu --workload "$wl" --max-seconds 20 --rep-seconds 0.01 \
  --no-overhead --time-budget 190 --json /tmp/warm.json > /tmp/warm.txt 2>&1 &)
timeout 100 python bench/kernel_profile.py "$out/kernel_profile.json" > "$out/kernel_profile.txt" 2>&1; f "$out/kernel_profile.txt" | cut -c1-160 | head -60
timeout 330 python -m baracuda.cli bench --model llama --variant eager,mode,patch,compile,compile+patch,liger --json "$out/model_llama.json" > "$out/model_llama.txt" 2>&1; f "$out/model_llama.txt" | tail -10
timeout 150 python bench/memory_peak.py "$out/mem_llama.json" --model llama --variant patch,liger > "$out/mem_llama.txt" 2>&1
python - "$out/mem_llama.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for v, r in d["variants"].items():
    print(v, r.get("traced_peak_MB"), r.get("max_allocated_GB"), r.get("error", ""))
    for t in r.get("top", [])[:14]:
        print("   ", t["MB"], t["count"], t["where"][-150:])
PY
timeout 200 python -m baracuda.cli bench --model llama3-8b-stack --variant eager,patch,liger --json "$out/model_8b.json" > "$out/model_8b.txt" 2>&1; f "$out/model_8b.txt" | tail -6
timeout 150 python -m baracuda.cli bench --op sum,mean,amax,gelu --workload "$wl" --time-budget 140 --json "$out/item4.json" > "$out/item4.txt" 2>&1; f "$out/item4.txt" | grep -E "fw|bw" | cut -c1-190 | head -40
timeout 150 python -m baracuda.cli bench --host --json "$out/host.json" > "$out/host.txt" 2>&1; tail -4 "$out/host.txt" | cut -c1-200
