"""Issue #19's batched small-matrix rows: 65536 x 32x32 f32 lu_factor / solve (forward, and its backward) /
lu_solve / inv / cholesky / det / slogdet.  Ours (the plan chosen: linalg/warp.py's one-warp kernels where they
apply), small.py's kernels and the cuSOLVER / cuBLAS backend forced, torch eager and torch.compile -- all in this
process, GPU time by CUDA-graph replays over two input sets (bench.timing.time_cuda).  A backward row is
(forward + backward) minus the forward, each timed the same way, with autograd.grad on a fresh graph per call.
    python bench/warp_linalg_ab.py OUT.json [B]"""
import json
import sys

import torch

import baracuda as bc
import baracuda.torch as bt
from baracuda._core.sku import Backend
from baracuda.bench.timing import time_cuda
from baracuda.backends.triton.linalg import plans as P

dev = bc.Device("cuda", 0)
B = int(sys.argv[2]) if len(sys.argv) > 2 else 65536
n = 32
g = torch.Generator(device="cuda").manual_seed(0)
A = [torch.randn(B, n, n, device="cuda", generator=g) + 4 * torch.eye(n, device="cuda") for _ in range(2)]
S = [a @ a.transpose(-1, -2) + n * torch.eye(n, device="cuda") for a in A]
b = [torch.randn(B, n, 1, device="cuda", generator=g) for _ in range(2)]
up = [torch.randn(B, n, 1, device="cuda", generator=g) for _ in range(2)]
LU = [torch.linalg.lu_factor(a) for a in A]
res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "B": B, "n": n}


def ms(fns):
    return round(time_cuda(fns).ms, 4)


def plan_ms(op, args, backend=None, force_small=False):
    pref = bc.PlanPreference(prefer=(backend,)) if backend else bc.PlanPreference()
    orig = P._W
    if force_small:
        P._W = None
    try:
        p = bc.Plan.select(bc.Descriptor.like(op, *args(0)), dev, pref)
        return ms([lambda i=i: p.run(*args(i)) for i in range(2)]), p.sku.route
    except Exception as e:   # noqa: BLE001 (recorded)
        return f"error: {type(e).__name__}: {str(e)[:160]}", None
    finally:
        P._W = orig


cases = {
    "lu_factor": (lambda i: (A[i],), lambda i: torch.linalg.lu_factor(A[i])),
    "solve": (lambda i: (A[i], b[i]), lambda i: torch.linalg.solve(A[i], b[i])),
    "lu_solve": (lambda i: (*LU[i], b[i]), lambda i: torch.linalg.lu_solve(*LU[i], b[i])),
    "inv": (lambda i: (A[i],), lambda i: torch.linalg.inv(A[i])),
    "cholesky": (lambda i: (S[i],), lambda i: torch.linalg.cholesky(S[i])),
    "det": (lambda i: (A[i],), lambda i: torch.linalg.det(A[i])),
    "slogdet": (lambda i: (A[i],), lambda i: torch.linalg.slogdet(A[i])),
}
for op, (args, peer) in cases.items():
    row = {"torch_ms": ms([lambda i=i: peer(i) for i in range(2)])}
    try:
        cpeer = torch.compile(peer, dynamic=False)
        row["compile_ms"] = ms([lambda i=i: cpeer(i) for i in range(2)])
    except Exception as e:   # noqa: BLE001
        row["compile_ms"] = f"error: {type(e).__name__}: {str(e)[:120]}"
    row["ours_ms"], row["route"] = plan_ms(op, args)
    row["small_ms"], row["small_route"] = plan_ms(op, args, Backend.TRITON, force_small=True)
    row["cusolver_ms"], row["cusolver_route"] = plan_ms(op, args, Backend.CUSOLVER)
    if isinstance(row["ours_ms"], float):
        row["x_torch"] = round(row["torch_ms"] / row["ours_ms"], 3)
    res[op] = row
    print(op, row, flush=True)


# solve's backward: fresh leaves per call, autograd.grad of (A, b)
def fwbw(fn, i, grad=True):
    a = A[i].detach().requires_grad_(grad)
    bb = b[i].detach().requires_grad_(grad)
    x = fn(a, bb)
    if grad:
        torch.autograd.grad(x, (a, bb), up[i])


row = {}
for name, fn in (("torch", torch.linalg.solve), ("ours", bt.linalg.solve)):
    row[f"{name}_fw_ms"] = ms([lambda i=i: fwbw(fn, i, False) for i in range(2)])
    row[f"{name}_fwbw_ms"] = ms([lambda i=i: fwbw(fn, i) for i in range(2)])
    row[f"{name}_bw_ms"] = round(row[f"{name}_fwbw_ms"] - row[f"{name}_fw_ms"], 4)
row["x_torch_bw"] = round(row["torch_bw_ms"] / row["ours_bw_ms"], 3)
row["x_torch_fwbw"] = round(row["torch_fwbw_ms"] / row["ours_fwbw_ms"], 3)
# accuracy against torch in this run (f32 both)
x_t = torch.linalg.solve(A[0], b[0])
x_o = bt.linalg.solve(A[0], b[0])
row["max_rel_diff_vs_torch"] = float(((x_o - x_t).abs().max() / x_t.abs().max()).item())


def backward_error(x):
    """max over matrices of |A x - b| / (|A| |x| + |b|) (inf-norms, in float64): what a stable solver bounds by
    ~n eps, where the difference of two f32 solutions also carries the condition number"""
    a64, b64, x64 = A[0].double(), b[0].double(), x.double()
    r = (a64 @ x64 - b64).abs().amax((-2, -1))
    den = a64.abs().sum(-1).amax(-1) * x64.abs().amax((-2, -1)) + b64.abs().amax((-2, -1))
    return float((r / den).max().item())


row["backward_error_torch"] = backward_error(x_t)
row["backward_error_ours"] = backward_error(x_o)
res["solve_backward"] = row
print("solve_backward", row, flush=True)
json.dump(res, open(sys.argv[1], "w"), indent=1)
