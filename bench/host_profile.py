"""Host time of a training step's baracuda calls, and where it goes (GPU only).

    python bench/host_profile.py [--rows 16 --classes 128256] [--json OUT] [--profile]

With few rows the GPU finishes each kernel in microseconds, so the wall time of a loop of steps (synchronized
once at the end) is the host's time per step: what idles the GPU before a step's first kernel and what a
per-step host synchronization adds.  Cases: the cross-entropy training step through the drop-in (fused path)
under each PlanPreference.check_values mode, eager torch's step, and plan.run of a 1024-element add.
--profile also prints cProfile's top functions (by own time) of the default-mode step.
"""
import argparse
import cProfile
import io
import json
import pstats
import time

import torch
import torch.nn.functional as F

import baracuda as bc
import baracuda.torch as bt
from baracuda.bench import host as _host


def per_call_us(fn, n=300, warm=30):
    for _ in range(warm):
        fn()
    return _host.per_call_us(torch, fn, n)


def profile_text(fn, reps, sorts=(("tottime", 30), ("cumulative", 50))) -> str:
    """cProfile of reps calls of fn (then a synchronize): the top functions for each (sort key, count)."""
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize()
    prof.disable()
    s = io.StringIO()
    st = pstats.Stats(prof, stream=s)
    for key, top in sorts:
        st.sort_stats(key).print_stats(top)
    return s.getvalue()


def print_profile(fn, reps):
    print(profile_text(fn, reps))


def demo(profile):
    """The demo's Llama-style block (tokens 2x256, dim 512, f32), forward + backward: wall ms through baracuda
    (its eager fast path, and every call through the custom op), and through torch eager (best of 5,
    synchronized), and cProfile's view of the baracuda run."""
    from baracuda.bench.host import demo_step
    run = demo_step(torch, bt)
    from baracuda.torch import _call as _library

    def custom_op_only():
        _library.EAGER_FAST_PATH[0] = False
        try:
            return run(True)
        finally:
            _library.EAGER_FAST_PATH[0] = True
    for use in (True, False):
        run(use)
    custom_op_only()
    out = {"baracuda": min(run(True) for _ in range(5)), "eager": min(run(False) for _ in range(5)),
           "baracuda_custom_op_only": min(custom_op_only() for _ in range(5))}
    if profile:
        print_profile(lambda: run(True), 5)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=16)
    ap.add_argument("--classes", type=int, default=128256)
    ap.add_argument("--json")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--demo", action="store_true", help="also time and profile `baracuda demo`'s block (fw + bw)")
    a = ap.parse_args()
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(a.rows, a.classes, device="cuda", generator=g).to(torch.bfloat16).requires_grad_()
    t = torch.randint(0, a.classes, (a.rows,), device="cuda", generator=g)

    def step(fn):
        def run():
            x.grad = None
            fn(x, t).backward()
        return run

    ours = bt.nn.functional.cross_entropy

    def with_mode(mode):
        pref = bc.PlanPreference(check_values=mode)

        def fn(x, t):
            with bt.preference(pref):
                return ours(x, t)
        return fn

    res = {"device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d"),
           "problem": f"cross_entropy training step {a.rows}x{a.classes} bf16 (host-bound: few rows)",
           "us_per_step": {}}
    cases = [("eager", F.cross_entropy), ("baracuda_default", ours)]
    cases += [(f"baracuda_{m}", with_mode(m)) for m in ("deferred", "sync", "off")]
    for name, fn in cases:
        res["us_per_step"][name] = per_call_us(step(fn))
    n = 1024
    u, v = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    plan = bc.Plan.select(bc.Descriptor.make("add", ((n,), "f32"), ((n,), "f32")), "cuda")
    res["us_per_call_add_1024"] = {"plan.run": per_call_us(lambda: plan.run(u, v), 3000),
                                   "torch.add": per_call_us(lambda: torch.add(u, v), 3000)}
    bc.check_errors()
    print(json.dumps(res, indent=1))
    if a.profile:
        run = step(ours)
        for _ in range(30):
            run()
        torch.cuda.synchronize()
        print_profile(run, 200)
    if a.demo:
        res["demo_ms"] = demo(a.profile)
        print("demo fw+bw ms", res["demo_ms"])
    if a.json:
        json.dump(res, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
