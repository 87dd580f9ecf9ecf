"""Where a call's device and host time go (GPU): torch.profiler over a few repetitions of each case, the kernel
table (device time per kernel, launches) and the host total per repetition, as JSON and text.

    python bench/kernel_profile.py OUT.json [--case ce_fwd,ce_fwbw,demo]

Cases: ce_fwd / ce_fwbw (F.cross_entropy 64 x 4096 f32, the host bench's row: no grad / forward + backward),
demo (``baracuda demo``'s block forward + backward, f32, 2 x 256 tokens, dim 512), each through baracuda and eager;
resnet18 (torchvision ResNet-18 train step, batch 32, bf16 channels-last) under ``bt.mode()`` and eager.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

import baracuda.torch as bt
from baracuda.bench.host import demo_step


def _cases():
    F, BF = torch.nn.functional, bt.nn.functional
    x = torch.randn(64, 4096, device="cuda")
    t = torch.randint(0, 4096, (64,), device="cuda")
    xg = x.clone().requires_grad_()
    demo = demo_step(torch, bt)

    def fwbw(f):
        def run():
            f(xg, t).backward()
        return run
    def resnet():
        import torchvision

        torch.manual_seed(0)
        m = torchvision.models.resnet18(num_classes=1000).cuda().to(torch.bfloat16)
        m = m.to(memory_format=torch.channels_last).train()
        xi = torch.randn(32, 3, 224, 224, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
        yi = torch.randint(0, 1000, (32,), device="cuda")

        def step():
            m.zero_grad(set_to_none=True)
            F.cross_entropy(m(xi), yi).backward()

        def mode_step():
            with bt.mode():
                step()
        return {"baracuda": mode_step, "eager": step}

    return {
        "resnet18": resnet,
        "ce_fwd": {"baracuda": lambda: BF.cross_entropy(x, t), "eager": lambda: F.cross_entropy(x, t)},
        "ce_fwbw": {"baracuda": fwbw(BF.cross_entropy), "eager": fwbw(F.cross_entropy)},
        "demo": {"baracuda": lambda: demo(True), "eager": lambda: demo(False)},
    }


def profile_case(fn, reps: int = 20) -> dict:
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) / reps * 1e6
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages():
        dev = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
        if dev > 0 and e.device_type.name == "CUDA":
            rows.append({"kernel": e.key[:120], "calls_per_rep": e.count / reps, "us_per_rep": dev / reps})
    rows.sort(key=lambda r: -r["us_per_rep"])
    return {"wall_us_per_rep": round(wall, 1), "kernels": rows[:25],
            "device_us_per_rep": round(sum(r["us_per_rep"] for r in rows), 1),
            "launches_per_rep": sum(r["calls_per_rep"] for r in rows)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--case", default="ce_fwd,ce_fwbw,demo")
    args = ap.parse_args(argv)
    cases = _cases()
    res = {"device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d"),
           "command": "python bench/kernel_profile.py " + " ".join(argv or sys.argv[1:]), "cases": {}}
    for name in args.case.split(","):
        case = cases[name]() if callable(cases[name]) else cases[name]
        res["cases"][name] = {who: profile_case(fn, reps=5 if name == "resnet18" else 20) for who, fn in case.items()}
        for who, r in res["cases"][name].items():
            print(f"== {name} {who}: wall {r['wall_us_per_rep']} us, device {r['device_us_per_rep']} us, "
                  f"{r['launches_per_rep']:.0f} launches")
            for k in r["kernels"][:12]:
                print(f"   {k['us_per_rep']:8.1f} us  x{k['calls_per_rep']:.0f}  {k['kernel']}")
    json.dump(res, open(args.out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
