#!/usr/bin/env bash
# Session 10, run C: where a torchvision ResNet-50 step (batch 256, bf16, channels-last) spends its GPU time, eager
# against bt.mode() (bench/step_timeline.py --resnet): wall, busy, host-caused idle, kernels by GPU time.
#   bash bench/session10_c.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
for m in resnet50 resnet18; do
timeout 200 python bench/step_timeline.py "$out/timeline_$m.json" --resnet $m --batch 256 2>&1 | f | tail -2 | cut -c1-600
python - "$out/timeline_$m.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
a, b = d["eager"], d["mode"]
print("marks eager", a["marks"], "\nmarks mode", b["marks"])
def agg(k):
    out = {}
    for n, v in k.items():
        out[n.rsplit(" (x", 1)[0][:100]] = v
    return out
ka, kb = agg(a["kernels_ms"]), agg(b["kernels_ms"])
print("eager kernels", round(sum(ka.values()), 2), "mode kernels", round(sum(kb.values()), 2))
for n, v in sorted(ka.items(), key=lambda t: -t[1])[:14]:
    print(f"E {v:8.3f}  {n}")
for n, v in sorted(kb.items(), key=lambda t: -t[1])[:22]:
    print(f"M {v:8.3f}  {n}")
PY
done
