"""topk's threshold filter: the number of chunks M per row against k (issue #17), [8192, 32768] random rows, bf16
and f32, k = 8 ... 1024, M = 2048 / 4096 / 8192, beside torch.topk; every result's values checked against
torch.topk and its indices against the select path's.  Session 12's partial probe put k = 8 best at M = 2048 and
k = 1024 at M = 8192 (the default was 4096 for all).
python bench/topk_m_sweep.py OUT.json"""
import json
import sys

import torch

from baracuda.bench.timing import time_cuda
from baracuda.backends.triton.sort.rows import forced, topk_rows

res = {"device": torch.cuda.get_device_name(), "rows": []}
R, n = 8192, 32768
for dt in (torch.bfloat16, torch.float32):
    g = torch.Generator(device="cuda").manual_seed(0)
    xs = [torch.randn(R, n, device="cuda", dtype=dt, generator=g) for _ in range(2)]
    for k in (8, 32, 128, 256, 512, 1024):
        v = torch.empty(R, k, device="cuda", dtype=dt)
        i = torch.empty(R, k, device="cuda", dtype=torch.int64)
        row = {"dtype": str(dt)[6:], "k": k, "torch": time_cuda([lambda x=x: torch.topk(x, k) for x in xs]).ms}
        with forced(filter=False):
            topk_rows(xs[0], v, i, k, True, None)
        ref_i, ref_v = i.clone(), torch.topk(xs[0], k).values
        ok = True
        for M in (2048, 4096, 8192):
            if M < k:
                continue
            with forced(filter_chunks=M):
                row[f"M{M}"] = time_cuda([lambda x=x: topk_rows(x, v, i, k, True, None) for x in xs]).ms
                topk_rows(xs[0], v, i, k, True, None)
                ok &= bool(torch.equal(v, ref_v) and torch.equal(i, ref_i))
        row["ok"] = ok
        res["rows"].append(row)
        print(json.dumps({a: (round(b, 3) if isinstance(b, float) else b) for a, b in row.items()}), flush=True)
json.dump(res, open(sys.argv[1], "w"), indent=1)
