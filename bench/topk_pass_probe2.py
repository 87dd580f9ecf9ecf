"""topk radix-select pass costs, second probe (issue #17): a 256-bin digit histogram by tl.histogram (256 / 16 bins)
against one built on the tensor cores (the digit's two 4-bit halves one-hot, [16, CH] x [CH, 16] int8 dot), and a
collect pass whose slots come from a per-row atomic counter instead of a prefix sum; [8192, 32768] bf16, one
program per row.   python bench/topk_pass_probe2.py OUT.json"""
import json
import sys

import torch
import triton
import triton.language as tl

from baracuda.bench.timing import time_cuda
from baracuda.backends.triton.sort.network import to_key


@triton.jit
def _pass(x_ptr, o_ptr, c_ptr, n, NCH, CH: tl.constexpr, WHAT: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([256], tl.int32)
    acc2 = tl.zeros([16, 16], tl.int32)
    b16 = tl.arange(0, 16)
    if WHAT == 3:
        tl.store(c_ptr + row, 0)
        tl.debug_barrier()
    for c in range(0, NCH):
        cols = c * CH + tl.arange(0, CH)
        m = cols < n
        u = to_key(tl.load(x_ptr + row * n + cols, mask=m, other=0), 0, 16, True) + 32768
        d = ((u >> 8) & 255).to(tl.int32)
        if WHAT == 0:
            acc += tl.histogram(d, 256, mask=m)
        elif WHAT == 1:
            acc += tl.histogram(d >> 4, 256, mask=m)
        elif WHAT == 2:
            hi = ((d[:, None] >> 4) == b16[None, :]) & m[:, None]
            lo = (d[:, None] & 15) == b16[None, :]
            acc2 += tl.dot(tl.trans(hi.to(tl.int8)), lo.to(tl.int8), out_dtype=tl.int32)
        else:
            take = m & (u < 24000)
            slot = tl.atomic_add(c_ptr + row + tl.zeros_like(cols), 1, mask=take, sem="relaxed")
            tl.store(o_ptr + row * 1024 + (slot & 1023), cols.to(tl.int64), mask=take)
    if WHAT == 2:
        acc = tl.reshape(acc2, [256])
    tl.store(o_ptr + row * 1024 + tl.arange(0, 256), acc.to(tl.int64))


R, n = 8192, 32768
xs = [torch.randn(R, n, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
o = torch.empty(R, 1024, device="cuda", dtype=torch.int64)
cnt = torch.zeros(R, device="cuda", dtype=torch.int32)
res = {"device": torch.cuda.get_device_name()}
x = xs[0]
for what, name in ((0, "hist256"), (1, "hist16"), (2, "dot16x16"), (3, "collect_atomic")):
    cfgs = ((256, 4), (512, 4), (512, 8)) if what == 2 else ((512, 4), (1024, 4), (2048, 4), (2048, 8), (4096, 8))
    for ch, w in cfgs:
        key = f"{name}_ch{ch}_w{w}_ms"
        try:
            res[key] = round(time_cuda([lambda x=x: _pass[(R,)](x, o, cnt, n, triton.cdiv(n, ch), CH=ch, WHAT=what,
                                                                  num_warps=w) for x in xs]).ms, 3)
        except Exception as e:   # noqa: BLE001 (a configuration that does not compile: recorded)
            res[key] = f"error: {type(e).__name__}: {str(e)[:200]}"
        print(key, res[key], flush=True)
    if what in (0, 2):      # the two 256-bin histograms agree
        _pass[(R,)](xs[0], o, cnt, n, triton.cdiv(n, 512), CH=512, WHAT=what, num_warps=4)
        res[f"{name}_row0"] = o[0, :256].tolist()
res["hist_agree"] = res.get("hist256_row0") == res.get("dot16x16_row0")
print("agree", res["hist_agree"])
json.dump(res, open(sys.argv[1], "w"), indent=1)
