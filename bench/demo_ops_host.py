"""Host time per call of each op of the `baracuda demo` block (f32, 2 x 256 tokens, dim 512: the kernels take
microseconds), baracuda's drop-in against the same math in torch: forward with inputs that need grad (the graph is
recorded), and forward + backward.  Time to queue N calls, synced per round (bench/_host.per_call).
    python bench/demo_ops_host.py OUT.json [--n 200]"""
from __future__ import annotations

import argparse
import json
import sys

import torch

from _host import per_call


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--n", type=int, default=200)
    args = ap.parse_args(argv)
    import baracuda.torch as bt

    Fb, Ft = bt.nn.functional, torch.nn.functional
    T, D, H, S = 512, 512, 4, 256
    g = torch.Generator().manual_seed(0)

    def p(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g) * scale).cuda().requires_grad_()

    x, w, wq, wo, bo = p(T, D), 1 + p(D, scale=0.1).detach(), p(3 * D, D, scale=D ** -0.5), p(D, D), p(D)
    w.requires_grad_()
    u, wv = p(T, 8 * D), p(2 * D, D, scale=D ** -0.5)
    q, k, v = (p(2, H, S, D // H) for _ in range(3))
    tgt = torch.randint(0, 2 * D, (T,)).cuda()
    cases = {
        "rms_norm": (lambda F: F.rms_norm(x, (D,), w, 1e-6), None),
        "linear": (lambda F: F.linear(x, wq), None),
        "linear+bias": (lambda F: F.linear(x, wo, bo), None),
        "sdpa": (lambda F: F.scaled_dot_product_attention(q, k, v, is_causal=True), None),
        "add_rms_norm": (lambda F: bt.call("add_rms_norm", [x, x, w], {"normalized_shape": (D,), "eps": 1e-6})[1],
                         lambda: Ft.rms_norm(x + x, (D,), w, 1e-6)),
        "swiglu": (lambda F: bt.call("swiglu", [u], {"dim": -1}),
                   lambda: (lambda a, b: Ft.silu(a) * b)(*u.chunk(2, dim=-1))),
        "linear_cross_entropy": (lambda F: Fb.linear_cross_entropy(x, wv, tgt),
                                 lambda: Ft.cross_entropy(Ft.linear(x, wv), tgt)),
    }
    res = {"device": torch.cuda.get_device_name()}
    for name, (ours, theirs) in cases.items():
        t_fn = theirs if theirs is not None else (lambda: ours(Ft))
        b_fn = lambda: ours(Fb)   # noqa: E731
        for who, fn in (("torch", t_fn), ("baracuda", b_fn)):
            y = fn()
            up = torch.ones_like(y)
            res[f"{name} {who} fwd"] = per_call(fn, args.n) * 1e6
            res[f"{name} {who} fwd+bwd"] = per_call(lambda: torch.autograd.backward(fn(), up), args.n // 2) * 1e6
        print(name, {k.split(" ", 1)[1]: round(v, 1) for k, v in res.items() if k.startswith(name + " ")}, flush=True)
    a, b, c = torch.randn(512, 512).cuda(), torch.randn(512, 1536).cuda(), torch.empty(512, 1536).cuda()
    res["torch.mm"] = per_call(lambda: torch.mm(a, b), args.n) * 1e6
    res["torch.mm out="] = per_call(lambda: torch.mm(a, b, out=c), args.n) * 1e6
    print({k: round(v, 1) for k, v in res.items() if k.startswith("torch.mm")})
    json.dump(res, open(args.out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
