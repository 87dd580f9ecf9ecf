"""Where the host time of a real model's train step goes under ``bt.mode()`` (GPU; issue #16).

    python bench/mode_host_profile.py OUT.json [--model llama] [--layers 4] [--tiny-gpu]

The model is run at a configuration whose kernels take microseconds (hidden 256, seq 64, batch 1, unless
--full), so a step's wall time (synchronized once per 10 steps) is its host time.  Reported per variant (eager,
mode): host ms per step, the routed calls per step by torch name, and cProfile's top functions by own and by
cumulative time of the mode's step.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
import time

import torch

from baracuda.bench import models as M

sys.path.insert(0, __import__("os").path.dirname(__file__))
from _host import host_bound, per_call  # noqa: E402


def _wall_ms(step, n=20, warm=5):
    return per_call(step, n, warm, 3) * 1e3


def _us(fn, n=400):
    return round(per_call(fn, n, 20, 5) * 1e6, 2)


def op_rows() -> list:
    """Host us per call of the ops HF Llama routes, on tiny bf16 tensors: torch, the drop-in, the drop-in under the
    mode, the bound launcher alone; forward, and forward + backward (upstream given)."""
    import torch.nn.functional as F

    import baracuda.torch as bt
    from baracuda.torch._call import bound

    d = dict(device="cuda", dtype=torch.bfloat16)
    a, b = torch.randn(64, 256, **d), torch.randn(64, 256, **d)
    w = torch.randn(256, 256, **d)
    q = torch.randn(1, 4, 64, 64, **d)
    cases = {
        "mul": (lambda m, x, y: m.mul(x, y), (a, b), "mul", {}),
        "add": (lambda m, x, y: m.add(x, y), (a, b), "add", {}),
        "rsqrt": (lambda m, x: m.rsqrt(x), (a.abs() + 1,), "rsqrt", {}),
        "mean": (lambda m, x: m.mean(x, -1, keepdim=True), (a,), None, None),
        "silu": (lambda m, x: m.nn.functional.silu(x), (a,), "silu", {}),
        "linear": (lambda m, x, y: m.nn.functional.linear(x, y), (a, w), None, None),
        "cat": (lambda m, x, y: m.cat([x, y], -1), (a, b), None, None),
        "sdpa": (lambda m, x, y, z: m.nn.functional.scaled_dot_product_attention(x, y, z, is_causal=True),
                 (q, q.clone(), q.clone()), None, None),
    }
    rows = []
    for name, (fn, xs, op, attrs) in cases.items():
        r = {"op": name}
        r["torch_fwd"] = _us(lambda: fn(torch, *xs))
        r["bt_fwd"] = _us(lambda: fn(bt, *xs))
        with bt.mode():
            r["mode_fwd"] = _us(lambda: fn(torch, *xs))
        if op is not None:
            go = bound(op, attrs, xs).go
            r["launcher"] = _us(lambda: go(list(xs)))
        gs = [x.detach().clone().requires_grad_(x.is_floating_point()) for x in xs]
        up = torch.ones_like(fn(torch, *gs))

        def fb(m):
            torch.autograd.backward(fn(m, *gs), up)
        r["torch_fwdbwd"] = _us(lambda: fb(torch), 200)
        r["bt_fwdbwd"] = _us(lambda: fb(bt), 200)
        with bt.mode():
            r["mode_fwdbwd"] = _us(lambda: fb(torch), 200)
        rows.append(r)
        print(r, flush=True)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--model", default="llama")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--full", action="store_true", help="the benchmark's own configuration")
    args = ap.parse_args(argv)
    import baracuda.torch as bt

    if not args.full:
        host_bound(M, args.model)
    model, ids, spec, cfg = M.build(args.model, tiny=False, layers=args.layers, device="cuda", dtype=torch.bfloat16)
    res = {"device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d"), "config": cfg,
           "command": "python bench/mode_host_profile.py " + " ".join(argv or sys.argv[1:])}

    def step():
        model.zero_grad(set_to_none=True)
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        return loss

    res["ops"] = op_rows()
    res["eager_ms"] = _wall_ms(step)
    with bt.mode() as m:
        res["mode_ms"] = _wall_ms(step)
        n0 = sum(m.routed.values())
        step()
        res["routed_per_step"] = sum(m.routed.values()) - n0
    with bt.mode() as m:
        step()
        res["routed"] = dict(m.routed.most_common())
        res["fell_through"] = dict(m.fell_through.most_common())
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(10):
            step()
        torch.cuda.synchronize()
        prof.disable()
    s = io.StringIO()
    st = pstats.Stats(prof, stream=s)
    st.sort_stats("tottime").print_stats(60)
    st.sort_stats("cumulative").print_stats(90)
    res["profile"] = s.getvalue()
    print(json.dumps({k: v for k, v in res.items() if k != "profile"}, indent=1))
    json.dump(res, open(args.out, "w"), indent=1)
    open(args.out.replace(".json", ".txt"), "w").write(res["profile"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
