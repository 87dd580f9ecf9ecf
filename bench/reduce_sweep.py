"""Reductions that trail torch.compile (issue #16 item 4) under forced tile / split choices (GPU): the column
split of narrow first-dim reductions ([1M, 16] bf16 over dim 0), with torch eager and torch.compile timed in the same
process (CUDA-graph replays over input copies rotated past 2x L2: GPU time, HBM-bound).  (amax's backward over the last dim was swept in session 7 run B with
bench/reduce_sweep.py of commit cabdb85: every tile / warp choice 92-116 us, the default 92 us = 2.9 TB/s.)  python bench/reduce_sweep.py OUT.json"""
import json
import sys

import torch

import baracuda as bc
from baracuda.backends.triton.reduction import reduce as R

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _graph_timer import timed  # noqa: E402



rows = []


def row(**r):
    rows.append(r)
    print(json.dumps(r), flush=True)


for shape, dt in (((1048576, 16), torch.bfloat16), ((1048576, 16), torch.float32), ((262144, 64), torch.bfloat16)):
    # input copies rotated call by call, past 2x the 50 MB L2 (the bench harness's rule): HBM-bound, not L2 hits
    x = torch.randn(*shape, device="cuda", dtype=dt)
    nbytes = x.numel() * x.element_size()
    xs = [x] + [x.clone() for _ in range(max(0, -(-(100 << 20) // nbytes) - 1))]
    for op in ("sum", "amax"):
        tf = getattr(torch, op)
        row(shape=shape, dtype=str(dt), op=op, impl="torch", us=timed(lambda i: tf(xs[i % len(xs)], 0)))
        cf = torch.compile(lambda t: tf(t, 0))
        cf(x)
        row(shape=shape, dtype=str(dt), op=op, impl="torch.compile", us=timed(lambda i: cf(xs[i % len(xs)])))
        for force in ({}, {"target": 256}, {"target": 512}, {"target": 2048}, {"tile": 16384},
                      {"tile": 16384, "target": 256}, {"tile": 32768, "target": 256}, {"tile": 4096},
                      {"tile": 4096, "target": 2048}):
            R._FORCE.clear()
            R._FORCE.update(force)
            p = bc.Plan.select(bc.Descriptor.like(op, x, dims=(0,)), "cuda")
            us = timed(lambda i: p.run(xs[i % len(xs)]))
            row(shape=shape, dtype=str(dt), op=op, impl="baracuda", force=force, us=us,
                gbs=nbytes / us / 1e3, route=p.sku.route)
R._FORCE.clear()

json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, open(sys.argv[1], "w"), indent=1)
