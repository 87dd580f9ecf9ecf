#!/usr/bin/env bash
# Session 17, run E: Nsight Compute source counters of topk's threshold filter (bf16 [8192, 32768], k = 1024) after
# the int32 carriers, exported per SASS instruction and summarized by opcode and stall (one tarball back); the filter
# at 4096 vs 8192 chunks a row with the carriers.
#   bash bench/session17_e.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 150 ncu --import-source yes --launch-skip 1 --launch-count 1 -k regex:_filter_kernel --section SourceCounters \
  --section WarpStateStats --section SchedulerStats --section Occupancy -o "$out/ncu_topk" python bench/sort_ncu.py topk > "$out/ncu_topk.log" 2>&1
tail -2 "$out/ncu_topk.log"
ncu -i "$out/ncu_topk.ncu-rep" --page source --csv --print-source sass > "$out/ncu_topk_sass.csv" 2>&1
ncu -i "$out/ncu_topk.ncu-rep" --page details > "$out/ncu_topk_details.txt" 2>&1
rm -f "$out/ncu_topk.ncu-rep"
timeout 120 python - "$out/topk_chunks.json" <<'PY' 2>&1 | f
import json, sys, torch, baracuda as bc
from baracuda.backends.triton.sort.rows import forced
sys.path.insert(0, "bench")
from _graph_timer import timed
x = torch.randn(8192, 32768, device="cuda", dtype=torch.bfloat16)
rows, ref = [], None
for force in (dict(), dict(filter_chunks=4096), dict(), dict(filter_chunks=4096)):
    with forced(**force):
        d = bc.Descriptor.like("topk", x, k=1024, dim=-1, largest=True, sorted=True)
        p = bc.Plan.select(d, "cuda")
        ws = torch.empty(max(p.workspace_size, 1), dtype=torch.uint8, device="cuda")
        out = p.run(x, workspace=ws)
        us = timed(lambda i: p.run(x, workspace=ws), n=4)
    ref = ref or out
    rows.append(dict(force=force, us=us, same=all(torch.equal(a, b) for a, b in zip(out, ref))))
    print(rows[-1], flush=True)
rows.append(dict(torch_us=timed(lambda i: torch.topk(x, 1024, dim=-1), n=4)))
print(rows[-1])
json.dump(rows, open(sys.argv[1], "w"), indent=1)
PY
cd "$out" && python - <<'PY'
import csv, collections, re
rows = list(csv.reader(open("ncu_topk_sass.csv")))
hdr = rows[1]; data = [r for r in rows[2:] if len(r) == len(hdr)]
iS, iE = hdr.index("Warp Stall Sampling (All Samples)"), hdr.index("Instructions Executed")
tot = sum(int(r[iS] or 0) for r in data); totE = sum(int(r[iE] or 0) for r in data)
print("samples", tot, "executed", totE, "sass lines", len(data))
# contiguous address windows of 64 instructions: where the samples sit
win = collections.Counter(); first = {}
for k, r in enumerate(data):
    w = k // 64; win[w] += int(r[iS] or 0); first.setdefault(w, r[1].strip()[:60])
for w, v in sorted(win.items(), key=lambda t: -t[1])[:12]:
    print(f"window {w:4d} (sass {w*64}-{w*64+63}) {v/tot:6.1%}  first: {first[w]}")
PY
tar czf "$out/ncu_topk.tgz" -C "$out" ncu_topk_sass.csv && rm -f "$out/ncu_topk_sass.csv"
