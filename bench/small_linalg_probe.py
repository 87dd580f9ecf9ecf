"""Batched 32x32 register kernels (issue #19) under forced warps per program: lu_factor / solve / inv / cholesky of
65536 x 32x32 f32 on Triton with 1, 2 and 4 warps (plans.py's _tile, swept), torch eager beside each
(bench.timing.time_cuda: CUDA-graph replays, two input sets).   python bench/small_linalg_probe.py OUT.json"""
import json
import sys

import torch

import baracuda as bc
from baracuda.bench.timing import time_cuda
from baracuda.backends.triton.linalg import plans as P

dev = bc.Device("cuda", 0)
pref = bc.PlanPreference(prefer=(bc.Backend.TRITON,))
B, n = 65536, 32
g = torch.Generator(device="cuda").manual_seed(0)
A = [torch.randn(B, n, n, device="cuda", generator=g) + 4 * torch.eye(n, device="cuda") for _ in range(2)]
S = [a @ a.transpose(-1, -2) + n * torch.eye(n, device="cuda") for a in A]
b = [torch.randn(B, n, 1, device="cuda", generator=g) for _ in range(2)]
cases = {
    "lu_factor": (lambda i: (A[i],), {}, lambda i: torch.linalg.lu_factor(A[i])),
    "solve": (lambda i: (A[i], b[i]), {}, lambda i: torch.linalg.solve(A[i], b[i])),
    "inv": (lambda i: (A[i],), {}, lambda i: torch.linalg.inv(A[i])),
    "cholesky": (lambda i: (S[i],), {}, lambda i: torch.linalg.cholesky(S[i])),
}
res = {"device": torch.cuda.get_device_name()}
orig = P._tile
for op, (args, attrs, peer) in cases.items():
    res[f"{op}_torch_ms"] = round(time_cuda([lambda i=i: peer(i) for i in range(2)]).ms, 4)
    for w in (1, 2, 4):
        P._tile = lambda m, w=w: (max(2, 1 << (max(m, 1) - 1).bit_length()), w)
        try:
            plan = bc.Plan.select(bc.Descriptor.like(op, *args(0), **attrs), dev, pref)
            res[f"{op}_w{w}_ms"] = round(time_cuda([lambda i=i: plan.run(*args(i)) for i in range(2)]).ms, 4)
        except Exception as e:   # noqa: BLE001 (recorded)
            res[f"{op}_w{w}_ms"] = f"error: {type(e).__name__}: {str(e)[:160]}"
        finally:
            P._tile = orig
    print(op, {k: v for k, v in res.items() if k.startswith(op)}, flush=True)
json.dump(res, open(sys.argv[1], "w"), indent=1)
