"""Fused linear cross-entropy vs eager F.cross_entropy(x @ W.T) and torch.compile of it: peak memory and time
of forward + backward, at 8192 tokens x 4096 hidden x 128256 vocab, bf16 (GPU only).

    python bench/lce_memory.py [--json OUT]
Peak memory is torch.cuda.max_memory_allocated above what is allocated before the step (x, W, targets, and for
the fused op nothing else), so both sides count their logits/gradient buffers and the gradients dx, dW.
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F

import baracuda as bc
import baracuda.torch as bt


def step_fused(x, w, t):
    loss = bt.nn.functional.linear_cross_entropy(x, w, t)   # the drop-in: fused training path under autograd
    loss.backward()
    return loss


def step_eager(x, w, t):
    """The issue's baseline: F.cross_entropy(x @ W.T) in the input dtype."""
    loss = F.cross_entropy(x @ w.T, t)
    loss.backward()
    return loss


def step_eager_f32(x, w, t):
    """The common variant that upcasts the logits to f32 first (HF-style): more memory."""
    loss = F.cross_entropy((x @ w.T).float(), t)
    loss.backward()
    return loss


def peak(fn, x, w, t):
    """Peak memory of one step above what is allocated before it (after a warm-up step that compiles)."""
    x.grad = w.grad = None
    fn(x, w, t)
    x.grad = w.grad = None
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    loss = fn(x, w, t)
    torch.cuda.synchronize()
    return {"peak_GB": (torch.cuda.max_memory_allocated() - base) / 1e9, "loss": float(loss)}


def step_ms(fn, x, w, t, queued=False):
    """One step between two CUDA events.  From an idle GPU (queued=False) the time includes the host's latency up
    to the step's first kernel; queued=True first gives the GPU ~10 ms of sleep, so the host enqueues the whole
    step ahead of it, as in a training loop (step i+1 is enqueued while step i runs): the GPU time of the step.
    Returns (GPU ms, host ms to enqueue the step)."""
    x.grad = w.grad = None
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    if queued:
        torch.cuda._sleep(20_000_000)
    s.record()
    h0 = time.perf_counter()
    fn(x, w, t)
    h1 = time.perf_counter()
    e.record()
    e.synchronize()
    return s.elapsed_time(e), (h1 - h0) * 1e3


def _stats(v):
    v = sorted(v)
    return {"ms": v[len(v) // 2], "ms_min": v[0], "ms_max": v[-1]}


def timed(fns, x, w, t, rounds):
    """Median step time of each function over `rounds` rounds that take the functions in turn (one step each per
    round, from an idle GPU and queued behind a sleep, see step_ms), so that clock and temperature drift over the
    run reaches every function alike; the spread (min, max) says how far apart two timings of one function can
    be.  "host_ms": the median host time to enqueue one (queued) step."""
    times = {name: {False: [], True: [], "host": []} for name in fns}
    for _ in range(rounds):
        for queued in (False, True):
            for name, fn in fns.items():
                ms, host = step_ms(fn, x, w, t, queued)
                times[name][queued].append(ms)
                if queued:
                    times[name]["host"].append(host)
    out = {name: {**_stats(v[False]), "queued": _stats(v[True]), "host_ms": _stats(v["host"])["ms"]}
           for name, v in times.items()}
    if "compile" in times:   # paired: fused / compile within each round (drift cancels), and how often <= 1
        for mode, key in ((False, "ratio_vs_compile_per_round"), (True, "queued_ratio_vs_compile_per_round")):
            r = [f / c for f, c in zip(times["fused"][mode], times["compile"][mode])]
            out["fused"][key] = {**{k.replace("ms", "ratio"): x for k, x in _stats(r).items()},
                                 "rounds_at_or_below_1": sum(x <= 1 for x in r), "rounds": len(r)}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--chunk", type=int, help="force the fused op's token chunk (the memory / time trade-off)")
    ap.add_argument("--fused-only", action="store_true", help="skip the eager / compile peers")
    ap.add_argument("--no-balance", action="store_true", help="uniform token chunks (a small last one)")
    ap.add_argument("--rounds", type=int, default=9, help="timing rounds (each times every function once)")
    ap.add_argument("--profile", action="store_true", help="print the GPU kernels of one step of each")
    a = ap.parse_args()
    from baracuda.backends.triton.loss.linear_ce import forced
    force = ({"chunk": a.chunk} if a.chunk else {}) | ({"balance": False} if a.no_balance else {})
    with forced(**force):   # a fresh process: no plan sized for another chunk is cached yet
        return run(a)


def run(a):
    g = torch.Generator(device="cuda").manual_seed(0)
    x = (torch.randn(a.tokens, a.hidden, device="cuda", generator=g) * 0.5).bfloat16().requires_grad_()
    w = (torch.randn(a.vocab, a.hidden, device="cuda", generator=g) * a.hidden ** -0.5).bfloat16().requires_grad_()
    t = torch.randint(0, a.vocab, (a.tokens,), device="cuda", generator=g)
    res = {"device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d"),
           "problem": f"{a.tokens}x{a.hidden}x{a.vocab} bf16"}
    res["chunk"] = (a.chunk or "default") if not a.no_balance else f"{a.chunk or 'default'}, uniform"
    fns = {"fused": step_fused}
    if not a.fused_only:
        compiled = torch.compile(step_eager)
        fns.update(eager=step_eager, compile=compiled, eager_f32_logits=step_eager_f32)
    for name, fn in fns.items():
        res[name] = peak(fn, x, w, t)
    for name, r in timed(fns, x, w, t, a.rounds).items():
        res[name].update(r)
    if not a.fused_only:
        res["peak_ratio_vs_eager"] = res["fused"]["peak_GB"] / res["eager"]["peak_GB"]
        res["time_ratio_vs_compile"] = res["fused"]["ms"] / res["compile"]["ms"]
        res["queued_time_ratio_vs_compile"] = res["fused"]["queued"]["ms"] / res["compile"]["queued"]["ms"]
    print(json.dumps(res, indent=1))
    if a.profile:
        steps = [("fused", step_fused)] + ([] if a.fused_only else [("compile", compiled)])
        for name, fn in steps:
            x.grad = w.grad = None
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                fn(x, w, t)
                torch.cuda.synchronize()
            print(f"-- kernels of one {name} step")
            print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=12, max_name_column_width=60))
    if a.json:
        json.dump(res, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
