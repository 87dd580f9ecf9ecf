"""Issue #19's 4096^2 f32 rows that stay below torch (H100, session 7: solve forward 0.92x, backward 0.78x; session 6:
svd forward 0.89x): where the time goes.  solve with a 4096 x 4096 right-hand side, ours and torch, forward and
forward + backward, each under torch.profiler (the kernels by CUDA time); svd under each of torch's cuSOLVER drivers
and ours.   python bench/linalg_large_probe.py OUT.json"""
import json
import sys

import torch
from torch.profiler import ProfilerActivity, profile

import baracuda.torch as bt
from _graph_timer import wall_ms

n = 4096
g = torch.Generator(device="cuda").manual_seed(0)
A = torch.randn(n, n, device="cuda", generator=g) + n ** 0.5 * torch.eye(n, device="cuda")
B = torch.randn(n, n, device="cuda", generator=g)
G = torch.randn(n, n, device="cuda", generator=g)
res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}


def kernels(fn):
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        fn()
        torch.cuda.synchronize()
    rows = []
    for e in sorted(p.key_averages(), key=lambda e: -e.device_time_total)[:10]:
        rows.append([e.key[:90], e.count, round(e.device_time_total / 1e3, 3)])
    return rows


def fwbw(solve):
    def f():
        a = A.detach().requires_grad_()
        b = B.detach().requires_grad_()
        torch.autograd.grad(solve(a, b), (a, b), G)
    return f


for name, solve in (("torch", torch.linalg.solve), ("ours", bt.linalg.solve)):
    res[f"solve_{name}_fw_ms"] = wall_ms(lambda: solve(A, B))
    res[f"solve_{name}_fwbw_ms"] = wall_ms(fwbw(solve))
    res[f"solve_{name}_fw_kernels"] = kernels(lambda: solve(A, B))
    res[f"solve_{name}_fwbw_kernels"] = kernels(fwbw(solve))
    print(name, res[f"solve_{name}_fw_ms"], res[f"solve_{name}_fwbw_ms"], flush=True)
    for k in ("fw", "fwbw"):
        for r in res[f"solve_{name}_{k}_kernels"]:
            print("  ", k, r, flush=True)
S = torch.randn(n, n, device="cuda", generator=g)
for drv in (None, "gesvd", "gesvdj", "gesvda"):
    try:
        res[f"svd_torch_{drv}_ms"] = wall_ms(lambda: torch.linalg.svd(S, full_matrices=False, driver=drv), reps=2)
    except Exception as e:   # noqa: BLE001
        res[f"svd_torch_{drv}_ms"] = f"error: {type(e).__name__}: {str(e)[:100]}"
    print("svd", drv, res[f"svd_torch_{drv}_ms"], flush=True)
res["svd_ours_ms"] = wall_ms(lambda: bt.linalg.svd(S, full_matrices=False), reps=2)
res["svd_torch_None_kernels"] = kernels(lambda: torch.linalg.svd(S, full_matrices=False))
print("svd ours", res["svd_ours_ms"], res["svd_torch_None_kernels"][:6], flush=True)
json.dump(res, open(sys.argv[1], "w"), indent=1)
