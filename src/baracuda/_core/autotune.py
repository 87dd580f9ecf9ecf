"""Autotune (``PlanPreference(autotune=True)``): time every eligible implementation once per descriptor on
the device and keep the fastest.  Inputs are random (never zeros: zeros run faster than real data on some
tensor-core paths), outputs and workspace are allocated once, each candidate is warmed up (compilation
stays out of the timing) and timed with CUDA events, median of a few repetitions."""
from __future__ import annotations

import statistics

from .registry import set_autotuner


def _random_inputs(desc, device):
    import torch

    dev = torch.device("cuda", device.index)
    xs = []
    for t in desc.inputs:
        if t.dtype.is_floating:
            xs.append(torch.rand(t.shape, device=dev, dtype=torch.float32).add_(0.5).to(t.dtype.torch))
        elif t.dtype.short == "bool":
            xs.append(torch.rand(t.shape, device=dev) > 0.5)
        else:
            xs.append(torch.randint(1, 8, t.shape, device=dev, dtype=t.dtype.torch))
    return xs


def fastest(desc, device, pref, impls, reps: int = 5):
    import torch

    from .plan import Plan

    xs = _random_inputs(desc, device)
    best, best_ms = impls[0], float("inf")
    for impl in impls:
        plan = Plan(desc, device, pref, impl)
        outs = [torch.empty(t.shape, dtype=t.dtype.torch, device=xs[0].device if xs else "cuda") for t in desc.outputs]
        ws = torch.empty(plan.workspace_size, dtype=torch.uint8, device="cuda") if plan.workspace_size else None
        plan.run(*xs, out=outs, workspace=ws)  # warm-up (compiles)
        times = []
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            plan.run(*xs, out=outs, workspace=ws)
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        ms = statistics.median(times)
        if ms < best_ms:
            best, best_ms = impl, ms
    return best


set_autotuner(fastest)
