"""Why the op database's solve 4096^2 f32 rows read 0.91x forward / 0.78x backward while autograd end to end reads
1.01x / 0.97x (run D): the same calls the bench runner makes -- plan.run of the cuSOLVER plan, BackwardPlan.run
with the saved LU -- timed as the runner times them (bench.timing.time_cuda) and by wall clock, each with its kernels
under torch.profiler, torch beside.   python bench/solve_plan_probe.py OUT.json"""
import json
import sys

import torch
from torch.profiler import ProfilerActivity, profile

import baracuda as bc
from baracuda._core.plan import BackwardPlan
from baracuda._core.sku import Backend
from baracuda.bench.runner import _saved
from baracuda.bench.timing import time_cuda
from _graph_timer import wall_ms

n = 4096
dev = bc.Device("cuda", 0)
g = torch.Generator(device="cuda").manual_seed(0)
A = [torch.randn(n, n, device="cuda", generator=g) + n ** 0.5 * torch.eye(n, device="cuda") for _ in range(2)]
B = [torch.randn(n, n, device="cuda", generator=g) for _ in range(2)]
G = [torch.randn(n, n, device="cuda", generator=g) for _ in range(2)]
pref = bc.PlanPreference(prefer=(Backend.CUSOLVER,))
desc = bc.Descriptor.like("solve", A[0], B[0])
plan = bc.Plan.select(desc, dev, pref)
outs = [plan.run(A[i], B[i]) for i in range(2)]
bwp = BackwardPlan.select(desc, dev, pref)
res = {"device": torch.cuda.get_device_name(), "fw_sku": str(plan.sku),
       "bw_skus": sorted({f"{s.backend}[{s.route}]" for s in bwp.skus}), "saves": list(bwp.saves)}


def kernels(fn):
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as p:
        fn()
        torch.cuda.synchronize()
    ev = sorted(p.key_averages(), key=lambda e: -e.device_time_total)
    return [[e.key[:80], e.count, round(e.device_time_total / 1e3, 3)] for e in ev[:12]]


def torch_bw(i):
    a, b = A[i].detach().requires_grad_(), B[i].detach().requires_grad_()
    x = torch.linalg.solve(a, b)
    return lambda: torch.autograd.grad(x, (a, b), G[i], retain_graph=True)


tb = [torch_bw(i) for i in range(2)]
cases = {
    "fw_ours": [lambda i=i: plan.run(A[i], B[i]) for i in range(2)],
    "fw_torch": [lambda i=i: torch.linalg.solve(A[i], B[i]) for i in range(2)],
    "bw_ours": [lambda i=i: bwp.run(G[i], None, None, **_saved(bwp, desc, (A[i], B[i]), outs[i])) for i in range(2)],
    "bw_torch": tb,
}
for name, fns in cases.items():
    t = time_cuda(fns)
    res[f"{name}_time_cuda_ms"] = round(t.ms, 3)
    res[f"{name}_how"] = getattr(t, "how", None)
    res[f"{name}_wall_ms"] = wall_ms(fns[0])
    res[f"{name}_kernels"] = kernels(fns[0])
    print(name, res[f"{name}_time_cuda_ms"], res[f"{name}_how"], res[f"{name}_wall_ms"], flush=True)
    for r in res[f"{name}_kernels"]:
        print("   ", r, flush=True)
json.dump(res, open(sys.argv[1], "w"), indent=1)
