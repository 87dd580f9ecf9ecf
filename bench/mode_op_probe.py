"""Where a routed op's host time goes on the GPU host (issue #16: the mode's Llama forward is host-bound; session 9
run E measured rotate_half 255 us under the mode against 34 in eager, sdpa 181 against 45): per case, the time to
queue one call in eager and under ``bt.mode()`` (inputs that need grad, and without grad), then a cProfile of N
mode calls, the top functions by own time.
    python bench/mode_op_probe.py OUT.txt [--n 200] [--only NAME,...] [--backward]"""
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
        **resnet_cases(dev, dt),
    }


def resnet_cases(dev, dt):
    """A ResNet block's calls (bf16 channels-last, batch 2 at 14 x 14: the host's time, not the GPU's)."""
    cl = torch.channels_last
    xi = torch.randn(2, 64, 14, 14, device=dev, dtype=dt).to(memory_format=cl).requires_grad_()
    xc = xi.detach()
    w = torch.randn(64, 64, 3, 3, device=dev, dtype=dt).to(memory_format=cl).requires_grad_()
    bn = torch.nn.BatchNorm2d(64).to(dev, dt).train()
    F = torch.nn.functional
    y = F.relu(xc * 1.0)

    def relu_inplace():
        return F.relu(xi * 1.0, inplace=True)

    return {
        "conv2d": lambda: F.conv2d(xi, w, padding=1),
        "conv2d nograd": lambda: F.conv2d(xc, w.detach(), padding=1),
        "batch_norm": lambda: bn(xi),
        "relu_ (after mul)": relu_inplace,
        "add_ (residual)": lambda: (xi * 1.0).add_(y),
    }


def main(argv=None) -> int:
    import baracuda.torch as bt

    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--only", default="")
    ap.add_argument("--backward", action="store_true", help="also time (and profile) forward + backward")
    args = ap.parse_args(argv)
    out = io.StringIO()
    cs = cases()
    only = [s for s in args.only.split(",") if s]
    cs = {k: v for k, v in cs.items() if not only or k in only}
    bw = (False, True) if args.backward else (False,)
    print(f"{'op':20s} " + " ".join(f"{'eager' + t:>12s} {'mode' + t:>12s}" for t in ("", " fw+bw")[:len(bw)])
          + "  (us/call queued)", file=out)
    for name, fn in cs.items():
        row = []
        for b in bw:
            if b and "nograd" in name:
                row += [float("nan")] * 2
                continue
            row.append(queue_us(fn, b, args.n))
            with bt.mode():
                row.append(queue_us(fn, b, args.n))
        print(f"{name:20s} " + " ".join(f"{v:12.1f}" for v in row), file=out, flush=True)
    print(out.getvalue(), flush=True)
    for name, fn in cs.items():
        def once(fn=fn, b=args.backward and "nograd" not in name):
            r = fn()
            if b:
                r.float().sum().backward()
        with bt.mode() as md:
            once()
            torch.cuda.synchronize()
            pr = cProfile.Profile()
            pr.enable()
            for _ in range(args.n):
                once()
            pr.disable()
            torch.cuda.synchronize()
        s = io.StringIO()
        print(f"\n===== {name}: cProfile of {args.n} mode calls{' + backward' if args.backward else ''}; "
              f"routed {dict(md.routed)} =====", file=s)
        pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(22)
        out.write(s.getvalue())
    with open(args.out, "w") as fh:
        fh.write(out.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
