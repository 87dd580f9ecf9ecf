"""topk's radix select (issue #17) under forced chunk / warp choices against the chunked bitonic path and torch
eager, [8192, 32768] bf16 and f32 rows, k = 8 / 64 / 1024 (bench.timing.time_cuda: CUDA-graph replays, two input
sets).   python bench/topk_probe.py OUT.json"""
import json
import sys

import torch

from baracuda.bench.timing import time_cuda
from baracuda.backends.triton.sort.rows import forced, topk_rows

res = {"device": torch.cuda.get_device_name()}
R, n = 8192, 32768
for dt in (torch.bfloat16, torch.float32):
    xs = [torch.randn(R, n, device="cuda", dtype=dt) for _ in range(2)]
    for k in (8, 64, 1024):
        v = torch.empty(R, k, device="cuda", dtype=dt)
        i = torch.empty(R, k, device="cuda", dtype=torch.int64)
        key = f"{str(dt)[6:]}_k{k}"
        res[f"{key}_torch_ms"] = time_cuda([lambda x=x: torch.topk(x, k)for x in xs]).ms
        for name, kw in [("chunked", dict(select=False)), ("sel2048w4", dict(select_chunk=2048, select_warps=4)),
                         ("sel4096w8", dict(select_chunk=4096, select_warps=8)),
                         ("sel4096w16", dict(select_chunk=4096, select_warps=16)),
                         ("sel1024w4", dict(select_chunk=1024, select_warps=4))]:
            with forced(filter=False, **kw):      # (the select / chunked paths themselves: topk_filter_probe.py)
                res[f"{key}_{name}_ms"] = time_cuda([lambda x=x: topk_rows(x, v, i, k, True, None) for x in xs]).ms
                topk_rows(xs[0], v, i, k, True, None)
                tv, ti = torch.topk(xs[0], k)
                res[f"{key}_{name}_ok"] = bool(torch.equal(v, tv))
        print(key, {a: round(b, 3) for a, b in res.items() if a.startswith(key) and a.endswith("_ms")}, flush=True)
json.dump(res, open(sys.argv[1], "w"), indent=1)
