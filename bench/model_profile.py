"""Where a real model's train step spends its GPU time under each variant: torch.profiler over a few steps of
``baracuda bench --model`` models, kernels grouped by name (GPU only).

    python bench/model_profile.py OUT.json [--model llama] [--variant eager,mode,patch] [--steps 3] [--top 40]

Per variant: the step's wall time (no profiler), the GPU's busy time under the profiler (the union of kernel
intervals: wall minus busy is time the GPU waited on the host), the step's total CUDA time, the kernel count per step, and the top kernels (CUDA time per step, calls
per step), plus the mode's routing report (what fell through to torch and why) for the ``mode`` variant.  Used to
explain a variant's gap to eager with its profile (issue #16: "each row below target is explained with its
profile").
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from baracuda.bench import models as M


def _profile(step, steps: int, top: int) -> dict:
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) / steps * 1e3
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    kern = {}
    spans = []
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            spans.append((ev.time_range.start, ev.time_range.end))
            k = kern.setdefault(ev.name, [0.0, 0])
            k[0] += ev.device_time_total if hasattr(ev, "device_time_total") else ev.cuda_time_total
            k[1] += 1
    total = sum(v[0] for v in kern.values())
    rows = sorted(kern.items(), key=lambda kv: -kv[1][0])[:top]
    busy, end = 0.0, float("-inf")   # the union of the kernels' intervals: the GPU's busy time (overlaps once)
    for a, b in sorted(spans):
        if b > end:
            busy += b - max(a, end)
            end = b
    return {"wall_ms_per_step": round(wall, 3), "gpu_busy_ms_per_step": round(busy / steps / 1e3, 3),
            "cuda_ms_per_step": total / steps / 1e3, "kernels_per_step": sum(v[1] for v in kern.values()) / steps,
            "top": [{"kernel": n[:160], "ms_per_step": round(t / steps / 1e3, 4), "calls_per_step": c / steps}
                    for n, (t, c) in rows]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--model", default="llama")
    ap.add_argument("--variant", default="eager,mode,patch")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--layers", type=int, default=None)
    args = ap.parse_args(argv)
    import baracuda.torch as bt

    model, ids, spec, cfg = M.build(args.model, tiny=False, layers=args.layers, device="cuda",
                                    dtype=torch.bfloat16)
    res = {"device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d"), "config": cfg,
           "command": "python bench/model_profile.py " + " ".join(argv or sys.argv[1:]), "variants": {}}
    ctxs = {n: c for n, c, _ in M.VARIANTS}
    for name in args.variant.split(","):
        M._free(model, True)
        try:
            with ctxs[name](model, spec) as m:
                def step():
                    m.zero_grad(set_to_none=True)
                    loss = m(input_ids=ids, labels=ids).loss
                    loss.backward()
                    return loss
                res["variants"][name] = _profile(step, args.steps, args.top)
                if name == "mode":
                    with bt.mode(coverage=True) as rep:
                        step()
                    res["variants"][name]["report"] = rep.summary()[:6000]
        except Exception as e:  # noqa: BLE001
            res["variants"][name] = {"error": f"{type(e).__name__}: {e}"[:500]}
        print(name, json.dumps(res["variants"][name])[:3000], flush=True)
    json.dump(res, open(args.out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
