"""Reductions that trail torch.compile (issue #16 item 4) under forced tile / split choices (GPU): the column
split of narrow first-dim reductions ([1M, 16] bf16 over dim 0) and amax's backward over the last dim, with
torch eager and torch.compile timed in the same process.  python bench/reduce_sweep.py OUT.json"""
import json
import sys

import torch

import baracuda as bc
from baracuda.backends.triton.reduction import backward as B, reduce as R


def timed(fn, n=50):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(5):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(n):
            fn()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b) / n * 1e3)
    return sorted(ts)[2]   # us, median of 5


rows = []


def row(**r):
    rows.append(r)
    print(json.dumps(r), flush=True)


for shape, dt in (((1048576, 16), torch.bfloat16), ((1048576, 16), torch.float32), ((262144, 64), torch.bfloat16),
                  ((65536, 256), torch.bfloat16)):
    x = torch.randn(*shape, device="cuda", dtype=dt)
    nbytes = x.numel() * x.element_size()
    for op in ("sum", "amax"):
        tf = getattr(torch, op)
        row(shape=shape, dtype=str(dt), op=op, impl="torch", us=timed(lambda: tf(x, 0)))
        cf = torch.compile(lambda t: tf(t, 0))
        row(shape=shape, dtype=str(dt), op=op, impl="torch.compile", us=timed(lambda: cf(x)))
        for force in ({}, {"target": 256}, {"target": 512}, {"target": 2048}, {"tile": 16384},
                      {"tile": 16384, "target": 256}, {"tile": 32768, "target": 256}, {"tile": 4096},
                      {"tile": 4096, "target": 2048}):
            R._FORCE.clear()
            R._FORCE.update(force)
            p = bc.Plan.select(bc.Descriptor.like(op, x, dims=(0,)), "cuda")
            us = timed(lambda: p.run(x))
            row(shape=shape, dtype=str(dt), op=op, impl="baracuda", force=force, us=us,
                gbs=nbytes / us / 1e3, route=p.sku.route)
R._FORCE.clear()

x = torch.randn(16384, 4096, device="cuda", dtype=torch.bfloat16)
o = x.amax(-1, keepdim=True)
g = torch.randn_like(o)
cf = torch.compile(lambda x, o, g: (x == o) * (g / (x == o).sum(-1, keepdim=True)))
row(op="amax_backward", impl="torch.compile(formula)", us=timed(lambda: cf(x, o, g)))
for force in ({}, {"warps": 4}, {"warps": 16}, {"tile": (4096, 2)}, {"tile": (4096, 2), "warps": 16},
              {"tile": (4096, 4), "warps": 16}, {"tile": (4096, 2), "warps": 4}):
    B._FORCE.clear()
    B._FORCE.update(force)
    p = bc.Plan.select(bc.Descriptor.like("amax_backward", g.reshape(-1), x, o.reshape(-1), dims=(1,), keepdim=False, nan=False),
                       "cuda")
    us = timed(lambda: p.run(g.reshape(-1), x, o.reshape(-1)))
    row(op="amax_backward", impl="baracuda", force={k: list(v) if isinstance(v, tuple) else v for k, v in force.items()},
        us=us, gbs=2 * x.numel() * 2 / us / 1e3)
B._FORCE.clear()
json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, open(sys.argv[1], "w"), indent=1)
