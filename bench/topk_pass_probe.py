"""What one pass of topk's radix select costs (issue #17), [8192, 32768] bf16, one program per row: streaming the
row in chunks (load + order key + sum), + a 256-bin tl.histogram, + the collect pass's prefix sum and store, and the
whole row at once (one [32768] tile) for each.   python bench/topk_pass_probe.py OUT.json"""
import json
import sys

import torch
import triton
import triton.language as tl

from baracuda.bench.timing import time_cuda
from baracuda.backends.triton.sort.network import to_key


@triton.jit
def _pass(x_ptr, o_ptr, n, NCH, CH: tl.constexpr, WHAT: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([256], tl.int32)
    tot = tl.full((), 0, tl.int32)
    for c in range(0, NCH):
        cols = c * CH + tl.arange(0, CH)
        m = cols < n
        u = to_key(tl.load(x_ptr + row * n + cols, mask=m, other=0), 0, 16, True) + 32768
        if WHAT == 0:
            tot += tl.sum(u.to(tl.int32), 0)
        elif WHAT == 1:
            acc += tl.histogram(((u >> 8) & 255).to(tl.int32), 256, mask=m)
        else:
            take = m & (u < 30000)
            slot = tot + tl.cumsum(take.to(tl.int32), 0) - 1
            tl.store(o_ptr + row * 1024 + (slot & 1023), cols.to(tl.int64), mask=take)
            tot += tl.sum(take.to(tl.int32), 0)
    tl.store(o_ptr + row * 1024 + tl.arange(0, 256), (acc + tot).to(tl.int64))


R, n = 8192, 32768
xs = [torch.randn(R, n, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
o = torch.empty(R, 1024, device="cuda", dtype=torch.int64)
res = {"device": torch.cuda.get_device_name()}
for what, name in ((0, "stream"), (1, "histogram"), (2, "collect")):
    for ch, w in ((2048, 4), (4096, 8), (8192, 8), (32768, 16), (32768, 32)):
        try:
            res[f"{name}_ch{ch}_w{w}_ms"] = round(time_cuda(
                [lambda x=x: _pass[(R,)](x, o, n, triton.cdiv(n, ch), CH=ch, WHAT=what, num_warps=w)
                 for x in xs]).ms, 3)
        except Exception as e:   # noqa: BLE001 (a configuration that does not compile: recorded)
            res[f"{name}_ch{ch}_w{w}_ms"] = f"error: {type(e).__name__}: {str(e)[:200]}"
        print(name, ch, w, res[f"{name}_ch{ch}_w{w}_ms"], flush=True)
json.dump(res, open(sys.argv[1], "w"), indent=1)
