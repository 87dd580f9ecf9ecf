"""The normal fill's elements per program and warps (GPU): plans selected under stream.forced(block=, warps=),
2^28 f32 and bf16, CUDA-graph replays (bench.timing.time_cuda), outputs compared bit for bit with the default.
    python bench/normal_sweep.py OUT.json"""
import json
import sys

import torch

import baracuda as bc
from baracuda.backends.triton.random import stream
from baracuda.bench.timing import time_cuda

res = {"device": torch.cuda.get_device_name(), "rows": []}
for dt in ("f32", "bf16"):
    n = 1 << 28
    d = bc.Descriptor.like("normal", shape=(n,), dtype=dt, seed=7)
    ref = bc.Plan.select(d, "cuda").run()
    for block, warps in ((1024, 4), (2048, 4), (2048, 8), (4096, 8), (4096, 16), (8192, 16), (1024, 2)):
        with stream.forced(block=block, warps=warps):
            p = bc.Plan.select(d, "cuda")
        out = p.run()
        ms = time_cuda([lambda: p.run()], budget_s=0.4).ms
        row = {"dtype": dt, "block": block, "warps": warps, "ms": ms, "TB/s": n * out.element_size() / ms / 1e9,
               "same": bool(torch.equal(out, ref))}
        res["rows"].append(row)
        print(json.dumps(row), flush=True)
json.dump(res, open(sys.argv[1], "w"), indent=1)
