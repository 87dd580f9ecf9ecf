"""topk's threshold filter at M = 8192 chunks (bf16 k = 1024's fastest, session 13 run E): 8 warps (128 registers and
16 B of stack on sm_90) against 16 warps (93 registers, no stack), [8192, 32768] bf16, checked against torch.topk.
python bench/topk_warps_ab.py"""
import torch

from baracuda.bench.timing import time_cuda
from baracuda.backends.triton.sort.rows import forced, topk_rows

R, n, k = 8192, 32768, 1024
g = torch.Generator(device="cuda").manual_seed(0)
xs = [torch.randn(R, n, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(2)]
v = torch.empty(R, k, device="cuda", dtype=xs[0].dtype)
i = torch.empty(R, k, device="cuda", dtype=torch.int64)
print("torch", round(time_cuda([lambda x=x: torch.topk(x, k) for x in xs]).ms, 3), flush=True)
for w in (8, 16):
    with forced(filter_chunks=8192, filter_warps=w):
        ms = time_cuda([lambda x=x: topk_rows(x, v, i, k, True, None) for x in xs]).ms
        topk_rows(xs[0], v, i, k, True, None)
        print("warps", w, round(ms, 3), "ok", bool(torch.equal(v, torch.topk(xs[0], k).values)), flush=True)
