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


def measure(fn, x, w, t, reps=3):
    x.grad = w.grad = None
    fn(x, w, t)          # warm-up (compiles)
    x.grad = w.grad = None
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    loss = fn(x, w, t)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    times = []
    for _ in range(reps):
        x.grad = w.grad = None
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn(x, w, t)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return {"peak_GB": peak / 1e9, "ms": sorted(times)[len(times) // 2], "loss": float(loss)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--chunk", type=int, help="force the fused op's token chunk (the memory / time trade-off)")
    ap.add_argument("--fused-only", action="store_true", help="skip the eager / compile peers")
    a = ap.parse_args()
    if a.chunk:
        from baracuda.backends.triton.loss_ce import forced
        with forced(chunk=a.chunk):   # a fresh process: no plan sized for another chunk is cached yet
            return run(a)
    return run(a)


def run(a):
    g = torch.Generator(device="cuda").manual_seed(0)
    x = (torch.randn(a.tokens, a.hidden, device="cuda", generator=g) * 0.5).bfloat16().requires_grad_()
    w = (torch.randn(a.vocab, a.hidden, device="cuda", generator=g) * a.hidden ** -0.5).bfloat16().requires_grad_()
    t = torch.randint(0, a.vocab, (a.tokens,), device="cuda", generator=g)
    res = {"device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d"),
           "problem": f"{a.tokens}x{a.hidden}x{a.vocab} bf16"}
    res["chunk"] = a.chunk or "default"
    res["fused"] = measure(step_fused, x, w, t)
    if not a.fused_only:
        res["eager"] = measure(step_eager, x, w, t)
        res["compile"] = measure(torch.compile(step_eager), x, w, t)
        res["eager_f32_logits"] = measure(step_eager_f32, x, w, t)
        res["peak_ratio_vs_eager"] = res["fused"]["peak_GB"] / res["eager"]["peak_GB"]
        res["time_ratio_vs_compile"] = res["fused"]["ms"] / res["compile"]["ms"]
    print(json.dumps(res, indent=1))
    if a.json:
        json.dump(res, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
