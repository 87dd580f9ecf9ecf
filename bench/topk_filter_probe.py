"""topk's threshold filter (issue #17) against the radix select and torch.topk, [8192, 32768] bf16 and f32 rows,
k = 8 / 64 / 1024, under forced filter choices (warps, chunks M, survivor cap C); random rows, and two adversarial
sets: rows of 64 distinct values (every row overflows: filter + gated select) and ascending rows (strided chunks:
no overflow).  Each case also checks values == torch.topk and indices == the select path's.
python bench/topk_filter_probe.py OUT.json"""
import json
import sys

import torch

from baracuda.bench.timing import time_cuda
from baracuda.backends.triton.sort.rows import forced, topk_rows

res = {"device": torch.cuda.get_device_name()}
R, n = 8192, 32768
VARIANTS = [("select", dict(filter=False)), ("filter", {}), ("filter_w4", dict(filter_warps=4)),
            ("filter_w16", dict(filter_warps=16)), ("filter_m2048", dict(filter_chunks=2048)),
            ("filter_m8192", dict(filter_chunks=8192))]
for dt in (torch.bfloat16, torch.float32):
    g = torch.Generator(device="cuda").manual_seed(0)
    sets = {"randn": [torch.randn(R, n, device="cuda", dtype=dt, generator=g) for _ in range(2)],
            "ties64": [torch.randint(0, 64, (R, n), device="cuda", generator=g).to(dt) for _ in range(2)],
            "ascending": [torch.arange(n, device="cuda").to(dt).expand(R, n).contiguous()]}
    for k in (8, 64, 1024):
        v = torch.empty(R, k, device="cuda", dtype=dt)
        i = torch.empty(R, k, device="cuda", dtype=torch.int64)
        for data, xs in sets.items():
            if data != "randn" and k != 64:
                continue
            key = f"{str(dt)[6:]}_k{k}_{data}"
            res[f"{key}_torch_ms"] = time_cuda([lambda x=x: torch.topk(x, k) for x in xs]).ms
            with forced(filter=False):
                topk_rows(xs[0], v, i, k, True, None)
            ref_i = i.clone()
            for name, kw in VARIANTS:
                if data != "randn" and name not in ("select", "filter"):
                    continue
                with forced(**kw):
                    try:
                        res[f"{key}_{name}_ms"] = time_cuda(
                            [lambda x=x: topk_rows(x, v, i, k, True, None) for x in xs]).ms
                        topk_rows(xs[0], v, i, k, True, None)
                        res[f"{key}_{name}_ok"] = bool(torch.equal(v, torch.topk(xs[0], k).values)
                                                       and torch.equal(i, ref_i))
                    except Exception as e:   # noqa: BLE001 (a configuration that does not compile: recorded)
                        res[f"{key}_{name}_ms"] = f"error: {type(e).__name__}: {str(e)[:200]}"
            print(key, {a[len(key) + 1:]: (round(b, 3) if isinstance(b, float) else b) for a, b in res.items()
                        if a.startswith(key + "_")}, flush=True)
json.dump(res, open(sys.argv[1], "w"), indent=1)
