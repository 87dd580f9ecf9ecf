"""Host cost of the `baracuda demo` block (issue #16: the demo is 0.52x eager on the H100, host-bound).  The block
runs at a size whose kernels take microseconds; ``--proxy`` (CPU) replaces every baracuda kernel by nothing, so a
timing is the framework's Python cost per step.  Reports ms per forward+backward for baracuda and plain torch and
cProfile's top functions.   python bench/demo_host.py [--device cuda] [--proxy] [--profile]"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import sys

import torch


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--proxy", action="store_true")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--n", type=int, default=200)
    args = ap.parse_args(argv)
    from _host import per_call, stub_kernels

    if args.proxy:
        stub_kernels()
    import baracuda.torch as bt
    from baracuda import demo

    S, B, D, H = 16, 2, 64, 4
    params, x0 = demo.make_params(torch, S, B, D, H, args.device, torch.float32)
    p, x = demo.leaf_copies(params, x0)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)

    def step(use):
        demo.block(bt if use else torch, x, p, H, use).backward()

    res = {}
    for name, use in (("baracuda", True), ("torch", False)):
        res[name] = per_call(lambda: step(use), args.n, 10, 5, sync) * 1e3
    print({k: round(v, 3) for k, v in res.items()}, "ms/step")
    if args.profile:
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(100):
            step(True)
        sync()
        pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(45)
    return 0


if __name__ == "__main__":
    sys.exit(main())
