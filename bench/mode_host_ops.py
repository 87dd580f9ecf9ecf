"""Host time per call of each op a torchvision ResNet step routes under ``bt.mode()`` (GPU, ResNet-18 shapes at
batch 32, bf16, channels-last): torch eager against the mode, forward alone and forward + backward, the time to
*queue* N calls (no sync inside: the host cost when the GPU keeps up), then a cProfile of the mode's calls per op.

    python bench/mode_host_ops.py OUT.txt [--n 50]
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

import torch


def cases():
    cl = torch.channels_last
    dt = torch.bfloat16
    dev = "cuda"

    def act(n, c, h, w, grad=True):
        return torch.randn(n, c, h, w, device=dev, dtype=dt).to(memory_format=cl).requires_grad_(grad)

    conv = torch.nn.Conv2d(64, 64, 3, padding=1, bias=False).to(dev, dt).to(memory_format=cl)
    bn = torch.nn.BatchNorm2d(64).to(dev, dt).train()
    fc = torch.nn.Linear(512, 1000).to(dev, dt)
    x = act(32, 64, 56, 56)
    xs = act(32, 512, 7, 7)
    lg = torch.randn(32, 1000, device=dev, dtype=dt, requires_grad=True)
    y = torch.randint(0, 1000, (32,), device=dev)
    counter = torch.tensor(0, dtype=torch.long, device=dev)
    return {
        "conv3x3": (lambda: conv(x), True),
        "batch_norm": (lambda: bn(x), True),
        "bn_counter_add_": (lambda: counter.add_(1), False),
        "relu_inplace": (lambda: torch.nn.functional.relu(x * 1, inplace=True), True),
        "residual_add_": (lambda: (x * 1).add_(x), True),
        "max_pool": (lambda: torch.nn.functional.max_pool2d(x, 3, 2, 1), True),
        "adaptive_avg": (lambda: torch.nn.functional.adaptive_avg_pool2d(xs, 1), True),
        "linear": (lambda: fc(xs.mean((2, 3))), True),
        "cross_entropy": (lambda: torch.nn.functional.cross_entropy(lg, y), True),
        "mul_scalar(ref)": (lambda: x * 1, True),
    }


def queue_us(fn, backward, n):
    def once():
        r = fn()
        if backward:
            r.float().sum().backward() if r.dim() else r.backward()
    for _ in range(3):
        once()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        once()
    t = (time.perf_counter() - t0) / n * 1e6
    torch.cuda.synchronize()
    return t


def main(argv=None) -> int:
    import baracuda.torch as bt

    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--n", type=int, default=50)
    args = ap.parse_args(argv)
    out = io.StringIO()
    cs = cases()
    print(f"{'op':18s} {'eager fw':>9s} {'mode fw':>9s} {'eager fw+bw':>12s} {'mode fw+bw':>11s}  (us/call queued)",
          file=out)
    for name, (fn, bw) in cs.items():
        ef = queue_us(fn, False, args.n)
        eb = queue_us(fn, True, args.n) if bw else float("nan")
        with bt.mode():
            mf = queue_us(fn, False, args.n)
            mb = queue_us(fn, True, args.n) if bw else float("nan")
        print(f"{name:18s} {ef:9.1f} {mf:9.1f} {eb:12.1f} {mb:11.1f}", file=out)
    print(out.getvalue())
    for name, (fn, bw) in cs.items():
        with bt.mode():
            queue_us(fn, bw, 5)
            pr = cProfile.Profile()
            pr.enable()
            queue_us(fn, bw, args.n)
            pr.disable()
        print(f"\n===== {name} (fw{'+bw' if bw else ''}, {args.n} calls) =====", file=out)
        st = pstats.Stats(pr, stream=out)
        st.sort_stats("tottime").print_stats(28)
    open(args.out, "w").write(out.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
