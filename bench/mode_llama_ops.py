"""Host time per call of the ops HF's Llama forward routes under ``bt.mode()`` (issue #16: the mode's forward is
host-bound, session 9 run D), torch eager against the mode, inputs that need grad (the forward records its graph),
small bf16 tensors (the time to queue N calls: the host's cost), then cProfile of the mode's forward of the full
Llama 4L/2048 (3 forwards, graph recorded, no backward).
    python bench/mode_llama_ops.py OUT.txt [--n 200]"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys

import torch

from mode_host_ops import queue_us


def cases():
    dev, dt = "cuda", torch.bfloat16
    x = torch.randn(1, 16, 256, device=dev, dtype=dt, requires_grad=True)
    xf = x.float()
    w = torch.randn(256, device=dev, dtype=dt, requires_grad=True)
    W = torch.randn(256, 256, device=dev, dtype=dt, requires_grad=True)
    q = torch.randn(1, 4, 16, 64, device=dev, dtype=dt, requires_grad=True)
    cos = torch.randn(1, 1, 16, 64, device=dev, dtype=dt)

    def rot(t):
        return torch.cat((-t[..., 32:], t[..., :32]), dim=-1)
    return {
        "x.to(float32)": lambda: x.to(torch.float32),
        "pow(2)": lambda: xf.pow(2),
        "mean(-1, keepdim)": lambda: xf.mean(-1, keepdim=True),
        "v + 1e-6": lambda: xf + 1e-6,
        "rsqrt": lambda: torch.rsqrt(xf),
        "x * y": lambda: xf * xf,
        "to(bf16)": lambda: xf.to(dt),
        "w * y": lambda: w * x,
        "linear": lambda: torch.nn.functional.linear(x, W),
        "x[..., :32]": lambda: q[..., :32],
        "rotate_half": lambda: rot(q),
        "rope q": lambda: q * cos + rot(q) * cos,
        "silu": lambda: torch.nn.functional.silu(x),
        "sdpa": lambda: torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True),
        "x + y": lambda: x + x,
        "transpose": lambda: q.transpose(1, 2),
        "view": lambda: x.view(1, 16, 4, 64),
    }


def main(argv=None) -> int:
    import baracuda.torch as bt

    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--n", type=int, default=200)
    args = ap.parse_args(argv)
    out = io.StringIO()
    print(f"{'op':20s} {'eager':>8s} {'mode':>8s}  (us/call queued, inputs need grad)", file=out)
    for name, fn in cases().items():
        e = queue_us(fn, False, args.n)
        with bt.mode():
            m = queue_us(fn, False, args.n)
        print(f"{name:20s} {e:8.1f} {m:8.1f}", file=out)
    print(out.getvalue(), flush=True)
    from baracuda.bench import models as M

    model, ids, spec, cfg = M.build("llama", tiny=False, layers=None, device="cuda", dtype=torch.bfloat16)
    with bt.mode():
        model(input_ids=ids, labels=ids).loss.backward()
        model.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(3):
            loss = model(input_ids=ids, labels=ids).loss
            del loss
        torch.cuda.synchronize()
        pr.disable()
    for key in ("tottime", "cumulative"):
        pstats.Stats(pr, stream=out).sort_stats(key).print_stats(60)
    open(args.out, "w").write(out.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
