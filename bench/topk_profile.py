"""Where bt.topk's time goes at issue #17's k = 1024 row (GPU): torch.profiler over 10 calls of
bt.topk([8192, 32768] bf16, k) for k = 8, 64, 1024 and of torch.topk, the device time per kernel.
    python bench/topk_profile.py OUT.json"""
import json
import sys
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile

import baracuda.torch as bt

x = torch.randn(8192, 32768, device="cuda", dtype=torch.bfloat16)
res = {"device": torch.cuda.get_device_name(), "cases": {}}
for name, fn in (("bt", bt.topk), ("torch", torch.topk)):
    for k in (8, 64, 1024):
        for _ in range(3):
            fn(x, k)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as p:
            for _ in range(10):
                fn(x, k)
            torch.cuda.synchronize()
        per = defaultdict(lambda: [0.0, 0])
        for e in p.events():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                per[e.name][0] += e.device_time / 10 / 1e3
                per[e.name][1] += 1
        rows = sorted(((round(ms, 4), n // 10, kname[:90]) for kname, (ms, n) in per.items()), reverse=True)
        res["cases"][f"{name} k={k}"] = {"total_ms": round(sum(r[0] for r in rows), 4), "kernels": rows}
        print(f"{name} k={k}: {res['cases'][f'{name} k={k}']['total_ms']} ms", rows[:6], flush=True)
json.dump(res, open(sys.argv[1], "w"), indent=1)
