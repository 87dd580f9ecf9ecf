"""cProfile of the drop-in call path on tiny CUDA tensors (where the host time goes, per frame).

    python bench/callpath_profile.py [--calls 3000]

Profiles, for 16-element f32 tensors: bt.add under no_grad, bt.nn.functional.layer_norm forward + backward,
and torch.add / bt.add routed under bt.mode().  Prints the top functions by own time for each.
"""
import argparse
import cProfile
import io
import pstats

import torch

import baracuda.torch as bt


def prof(name, fn, calls):
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    p = cProfile.Profile()
    p.enable()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    p.disable()
    s = io.StringIO()
    pstats.Stats(p, stream=s).sort_stats("tottime").print_stats(18)
    print(f"==== {name} ({calls} calls)\n{s.getvalue()}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=3000)
    a = ap.parse_args()
    x, y = torch.randn(16, device="cuda"), torch.randn(16, device="cuda")
    w, b = torch.randn(16, device="cuda"), torch.randn(16, device="cuda")
    xg = torch.randn(4, 16, device="cuda", requires_grad=True)
    g = torch.ones(4, 16, device="cuda")

    def add_nograd():
        with torch.no_grad():
            bt.add(x, y)

    def ln_step():
        torch.autograd.backward(bt.nn.functional.layer_norm(xg, (16,), w, b), g)

    def mode_add():
        with torch.no_grad():
            torch.add(x, y)

    prof("bt.add no_grad", add_nograd, a.calls)
    prof("layer_norm fw+bw", ln_step, a.calls // 3)
    with bt.mode():
        prof("torch.add under bt.mode()", mode_add, a.calls)


if __name__ == "__main__":
    main()
