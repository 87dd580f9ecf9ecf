"""topk's threshold filter on bf16 [8192, 32768] rows, k = 1024: the default chunks per row (M = 4096) against
M = 8192 (8 warps; 16 B of stack on sm_90), alternated three times in one process, torch.topk beside them, each
output checked against torch.topk's values.   python bench/topk_m_ab.py OUT.json"""
import json
import sys

import torch

from baracuda.bench.timing import time_cuda
from baracuda.backends.triton.sort.rows import forced, topk_rows

R, n, k = 8192, 32768, 1024
g = torch.Generator(device="cuda").manual_seed(0)
xs = [torch.randn(R, n, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(2)]
v = torch.empty(R, k, device="cuda", dtype=xs[0].dtype)
i = torch.empty(R, k, device="cuda", dtype=torch.int64)
ref = torch.topk(xs[0], k).values
rows = []
for rnd in range(3):
    rows.append({"round": rnd, "variant": "torch.topk",
                 "ms": time_cuda([lambda x=x: torch.topk(x, k) for x in xs]).ms})
    for name, f in (("default (M 4096)", {}), ("M 8192", {"filter_chunks": 8192})):
        with forced(**f):
            ms = time_cuda([lambda x=x: topk_rows(x, v, i, k, True, None) for x in xs]).ms
            topk_rows(xs[0], v, i, k, True, None)
        rows.append({"round": rnd, "variant": name, "ms": ms, "values_equal_torch": bool(torch.equal(v, ref))})
    for r in rows[-3:]:
        print(json.dumps(r), flush=True)
json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, open(sys.argv[1], "w"), indent=1)
