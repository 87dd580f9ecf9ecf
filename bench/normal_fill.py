"""The normal fill's bandwidth (GPU): bt.randn against torch.randn, 2^28 elements of f32 / bf16 and 2^26 of f64,
per-call CUDA events (the fill is ~100x its launch), bytes written / time; a constant fill of the same output
(`fill_`) beside them as the write ceiling.  Run once per tree for an A/B.
    python bench/normal_fill.py OUT.json"""
import json
import sys

import torch

import baracuda.torch as bt
from baracuda.bench.timing import time_cuda

rows = []
def const_fill(n, device, dtype):
    return torch.empty(n, device=device, dtype=dtype).fill_(1.5)


for dt, n in ((torch.float32, 1 << 28), (torch.bfloat16, 1 << 28), (torch.float64, 1 << 26)):
    for name, fn in (("fill_ (write ceiling)", const_fill), ("torch.randn", torch.randn), ("bt.randn", bt.randn)):
        ms = time_cuda([lambda: fn(n, device="cuda", dtype=dt)], graph=False).ms
        rows.append({"fill": name, "dtype": str(dt), "n": n, "ms": ms, "TB/s": n * dt.itemsize / ms / 1e9})
        print(json.dumps(rows[-1]), flush=True)
y = bt.randn(1 << 20, device="cuda")
rows.append({"moments of bt.randn(2^20)": [y.mean().item(), y.std().item()]})
json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, open(sys.argv[1], "w"), indent=1)
