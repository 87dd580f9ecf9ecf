"""Where a routed op's host time goes on the GPU host (issue #16: the mode's Llama forward is host-bound; session 9
run E measured rotate_half 255 us under the mode against 34 in eager, sdpa 181 against 45): per case, the time to
queue one call in eager and under ``bt.mode()`` (inputs that need grad, and without grad), then a cProfile of N
mode calls, the top functions by own time.
    python bench/mode_op_probe.py OUT.txt [--n 200] [--only NAME,...]"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats

import torch

from mode_host_ops import queue_us


def cases():
    dev, dt = "cuda", torch.bfloat16
    q = torch.randn(1, 4, 16, 64, device=dev, dtype=dt, requires_grad=True)
    qc = q.detach().clone()
    x = torch.randn(1, 16, 256, device=dev, dtype=dt, requires_grad=True)
    xf = x.float()
    a, b = q[..., 32:], q[..., :32]
    ac, bc = a.contiguous(), b.contiguous()
    return {
        "neg(strided)": lambda: -a,
        "neg(contig)": lambda: -ac,
        "cat(strided)": lambda: torch.cat((a, b), dim=-1),
        "cat(contig)": lambda: torch.cat((ac, bc), dim=-1),
        "rotate_half": lambda: torch.cat((-q[..., 32:], q[..., :32]), dim=-1),
        "rotate_half nograd": lambda: torch.cat((-qc[..., 32:], qc[..., :32]), dim=-1),
        "sdpa": lambda: torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True),
        "sdpa nograd": lambda: torch.nn.functional.scaled_dot_product_attention(qc, qc, qc, is_causal=True),
        "silu": lambda: torch.nn.functional.silu(x),
        "pow(2)": lambda: xf.pow(2),
        "x * y": lambda: xf * xf,
        "mul nograd": lambda: qc * qc,
    }


def main(argv=None) -> int:
    import baracuda.torch as bt

    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--only", default="")
    args = ap.parse_args(argv)
    out = io.StringIO()
    cs = cases()
    only = [s for s in args.only.split(",") if s]
    print(f"{'op':20s} {'eager':>8s} {'mode':>8s}  (us/call queued)", file=out)
    for name, fn in cs.items():
        e = queue_us(fn, False, args.n)
        with bt.mode():
            m = queue_us(fn, False, args.n)
        print(f"{name:20s} {e:8.1f} {m:8.1f}", file=out, flush=True)
    print(out.getvalue(), flush=True)
    for name, fn in cs.items():
        if only and name not in only:
            continue
        with bt.mode() as md:
            fn()
            torch.cuda.synchronize()
            pr = cProfile.Profile()
            pr.enable()
            for _ in range(args.n):
                fn()
            pr.disable()
            torch.cuda.synchronize()
        s = io.StringIO()
        print(f"\n===== {name}: cProfile of {args.n} mode calls; routed {dict(md.routed)} =====", file=s)
        pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(22)
        out.write(s.getvalue())
    with open(args.out, "w") as fh:
        fh.write(out.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
