"""Host overhead of a baracuda call against the same torch call: ``baracuda bench --host``.

Tiny CUDA tensors (16 elements, and a [64, 4096] row block) make the GPU finish each kernel in a few
microseconds, so a loop of calls synchronized once at the end measures what the host spends per call.  Each
row is timed interleaved with its torch peer (``rounds`` alternations, median of the per-round times), so a
drift of the host's speed hits both alike.  Rows:

- ``fwd``: the drop-in forward under ``torch.no_grad()`` vs torch's (target <= 1.5x);
- ``fwd+bwd``: forward, then ``torch.autograd.backward`` with a ready upstream, inputs requiring grad
  (target <= 2.0x);
- ``mode``: the unchanged torch call under ``baracuda.torch.mode()`` (routed to the drop-in) vs torch's without
  the mode, both under one ``torch.no_grad()`` block (target <= 2.0x);
- ``mode_unrouted``: a call the mode does not route (``torch.sort``) with and without the mode (target <= 1.2x);
- ``plan.run``: ``Plan.run`` with ``out=`` and ``workspace=`` given (target <= 8 us);
- floors: torch's own call, an empty ``autograd.Function``, a bare Triton launch (``kernel[grid]`` and the compiled
  kernel's C launcher), a Python call of an empty function.
- the ``baracuda demo`` block (forward + backward), baracuda vs eager.
"""
from __future__ import annotations

import json
import statistics
import time

__all__ = ["run_host", "main", "demo_step", "per_call_us"]

OPS = ("add", "mul_scalar", "exp", "softmax", "sum", "layer_norm", "rms_norm", "cross_entropy", "matmul")


def _cases(torch, bt, size: str, dev):
    """op -> (torch fn, baracuda fn, make inputs (requires_grad) -> args)."""
    F, BF = torch.nn.functional, bt.nn.functional
    small = size == "16"
    R, C = (2, 8) if small else (64, 4096)
    n = 16 if small else 64 * 4096

    def rnd(*shape, grad=False):
        return torch.randn(*shape, device=dev).requires_grad_(grad)

    tgt = torch.randint(0, C, (R,), device=dev)
    w, b = torch.randn(C, device=dev), torch.randn(C, device=dev)
    K = 4 if small else 4096
    M = 4 if small else 64
    return {
        "add": (torch.add, bt.add, lambda g: (rnd(n, grad=g), rnd(n, grad=g))),
        "mul_scalar": (lambda x: torch.mul(x, 0.5), lambda x: bt.mul(x, 0.5), lambda g: (rnd(n, grad=g),)),
        "exp": (torch.exp, bt.exp, lambda g: (rnd(n, grad=g),)),
        "softmax": (lambda x: F.softmax(x, -1), lambda x: BF.softmax(x, -1), lambda g: (rnd(R, C, grad=g),)),
        "sum": (lambda x: torch.sum(x, -1), lambda x: bt.sum(x, -1), lambda g: (rnd(R, C, grad=g),)),
        "layer_norm": (lambda x: F.layer_norm(x, (C,), w, b), lambda x: BF.layer_norm(x, (C,), w, b),
                       lambda g: (rnd(R, C, grad=g),)),
        "rms_norm": (lambda x: F.rms_norm(x, (C,), w, 1e-6), lambda x: BF.rms_norm(x, (C,), w, 1e-6),
                     lambda g: (rnd(R, C, grad=g),)),
        "cross_entropy": (lambda x: F.cross_entropy(x, tgt), lambda x: BF.cross_entropy(x, tgt),
                          lambda g: (rnd(R, C, grad=g),)),
        "matmul": (torch.matmul, bt.matmul, lambda g: (rnd(M, K, grad=g), rnd(K, M, grad=g))),
    }


def per_call_us(torch, fn, n: int) -> float:
    """Wall µs per call of ``fn`` over ``n`` calls, the GPU synchronized before and after."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / n * 1e6


def _paired(torch, ours, theirs, n: int, rounds: int) -> dict:
    """Median per-call µs of ``ours`` and ``theirs`` over ``rounds`` interleaved rounds of ``n`` calls each."""
    for f in (ours, theirs):
        for _ in range(20):
            f()
    a, b = [], []
    for _ in range(rounds):
        a.append(per_call_us(torch, ours, n))
        b.append(per_call_us(torch, theirs, n))
    ratios = sorted(x / y for x, y in zip(a, b))
    return {"baracuda_us": statistics.median(a), "torch_us": statistics.median(b),
            "ratio": statistics.median(ratios)}


def _floors(torch, n: int) -> dict:
    import triton

    _empty_kernel = triton.jit(_empty_body)
    x = torch.zeros(16, device="cuda")
    kernel = _empty_kernel[(1,)](x, 16)
    from ..backends.triton._lib.launch import _raw_stream

    def direct():
        kernel.run(1, 1, 1, _raw_stream(0), kernel.function, kernel.packed_metadata, None, None, None,
                   x.data_ptr(), 16)

    class _Nothing(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a.view_as(a)

        @staticmethod
        def backward(ctx, g):
            return g

    xg = torch.zeros(16, device="cuda", requires_grad=True)
    y = torch.zeros(16, device="cuda")

    def nothing():
        return None

    return {
        "torch.add_16": per_call_us(torch, lambda: torch.add(y, y), n),
        "torch.empty_like_16": per_call_us(torch, lambda: torch.empty_like(y), n),
        "triton_launch_kernel[grid]": per_call_us(torch, lambda: _empty_kernel[(1,)](x, 16), n),
        "triton_launch_direct": per_call_us(torch, direct, n),
        "autograd_function_apply": per_call_us(torch, lambda: _Nothing.apply(xg), n),
        "python_call": per_call_us(torch, nothing, n),
    }


def _empty_body(x_ptr, N: "tl.constexpr"):   # noqa: F821  (a bare Triton launch: the floor of any kernel's)
    pass


def demo_step(torch, bt):
    """``run(use_baracuda) -> ms``: one synchronized forward + backward of ``baracuda demo``'s block (tokens
    2x256, dim 512, f32) on fresh leaves, through baracuda or torch eager."""
    from ..demo import block, make_params

    params, x0 = make_params(torch, 256, 2, 512, 4, "cuda", torch.float32)
    leaves = ["w_qkv", "w_o", "b_o", "w_13", "w_2", "w_vocab", "norm1", "norm2", "norm_f"]

    def run(use):
        p = {k: (v.detach().clone().requires_grad_(k in leaves) if torch.is_tensor(v) else v)
             for k, v in params.items()}
        x = x0.detach().clone().requires_grad_()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        block(bt if use else torch, x, p, 4, use).backward()
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) * 1e3
    return run


def _demo(torch, bt, reps: int) -> dict:
    run = demo_step(torch, bt)
    for use in (True, False, True, False):
        run(use)
    ours, eager = [], []
    for _ in range(reps):
        ours.append(run(True))
        eager.append(run(False))
    return {"baracuda_ms": statistics.median(ours), "eager_ms": statistics.median(eager),
            "ratio": statistics.median(sorted(a / b for a, b in zip(ours, eager)))}


def run_host(n: int = 2000, rounds: int = 7, demo_reps: int = 9) -> dict:
    import torch

    import baracuda as bc
    import baracuda.torch as bt

    dev = torch.device("cuda")
    res = {"device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d"),
           "torch": torch.__version__, "calls_per_round": n, "rounds": rounds, "rows": []}
    for size in ("16", "64x4096"):
        for op, (theirs, ours, make) in _cases(torch, bt, size, dev).items():
            xs = make(False)
            with torch.no_grad():
                r = _paired(torch, lambda: ours(*xs), lambda: theirs(*xs), n, rounds)
            res["rows"].append({"op": op, "size": size, "row": "fwd", "target": 1.5, **r})
            print(_line(res["rows"][-1]), flush=True)
            xg = make(True)

            def step(fn, xg=xg):
                out = fn(*xg)
                torch.autograd.backward(out, torch.ones_like(out) if out.dim() else None)
            r = _paired(torch, lambda: step(ours), lambda: step(theirs), max(n // 4, 50), rounds)
            res["rows"].append({"op": op, "size": size, "row": "fwd+bwd", "target": 2.0, **r})
            print(_line(res["rows"][-1]), flush=True)

            def in_mode(xs=xs, theirs=theirs):
                theirs(*xs)
            mode = bt.mode()
            with torch.no_grad():   # (entered once: no_grad's own torch calls would pass through the mode too)
                with mode:
                    mode_us = [per_call_us(torch, in_mode, n) for _ in range(rounds)]
                plain = [per_call_us(torch, in_mode, n) for _ in range(rounds)]
            res["rows"].append({"op": op, "size": size, "row": "mode", "target": 2.0,
                                "baracuda_us": statistics.median(mode_us), "torch_us": statistics.median(plain),
                                "ratio": statistics.median(mode_us) / statistics.median(plain),
                                "routed": sum(mode.routed.values()), "fell_through": dict(mode.fell_through)})
            print(_line(res["rows"][-1]), flush=True)
    s = torch.randn(64, device=dev)
    with torch.no_grad():
        mode = bt.mode()
        with mode:
            m_us = [per_call_us(torch, lambda: torch.sort(s), n) for _ in range(rounds)]
        p_us = [per_call_us(torch, lambda: torch.sort(s), n) for _ in range(rounds)]
    res["rows"].append({"op": "sort (not routed)", "size": "64", "row": "mode_unrouted", "target": 1.2,
                        "baracuda_us": statistics.median(m_us), "torch_us": statistics.median(p_us),
                        "ratio": statistics.median(m_us) / statistics.median(p_us)})
    for size, shape in (("16", (16,)), ("64x4096", (64, 4096))):
        u, v = torch.randn(*shape, device=dev), torch.randn(*shape, device=dev)
        o = torch.empty_like(u)
        plan = bc.Plan.select(bc.Descriptor.make("add", (shape, "f32"), (shape, "f32")), "cuda")
        ws = torch.empty(max(plan.workspace_size, 1), dtype=torch.uint8, device=dev)
        us = statistics.median(per_call_us(torch, lambda: plan.run(u, v, out=o, workspace=ws), n)
                               for _ in range(rounds))
        res["rows"].append({"op": "add", "size": size, "row": "plan.run(out=, workspace=)", "target_us": 8.0,
                            "baracuda_us": us})
    res["floors_us"] = _floors(torch, n)
    res["demo"] = _demo(torch, bt, demo_reps)
    res["call_cache"] = bt._call.cache_info()._asdict()
    bc.check_errors()
    return res


def _line(r: dict) -> str:
    if "ratio" in r:
        met = r["ratio"] <= r["target"]
        return (f"{r['op']:18s} {r['size']:8s} {r['row']:26s} {r['baracuda_us']:12.1f} {r['torch_us']:9.1f} "
                f"{r['ratio']:6.2f} <={r['target']:<4g}  {'yes' if met else 'NO'}")
    met = r["baracuda_us"] <= r["target_us"]
    return (f"{r['op']:18s} {r['size']:8s} {r['row']:26s} {r['baracuda_us']:12.1f} {'':9s} {'':6s} "
            f"<={r['target_us']:g}us {'yes' if met else 'NO'}")


def format_table(res: dict) -> str:
    lines = [f"host overhead per call, {res['device']}, torch {res['torch']}, {res['date']} "
             f"(median of {res['rounds']} interleaved rounds of {res['calls_per_round']} calls)",
             f"{'op':18s} {'size':8s} {'row':26s} {'baracuda us':>12s} {'torch us':>9s} {'ratio':>6s} target  met"]
    lines += [_line(r) for r in res["rows"]]
    lines.append("floors (us per call): " + ", ".join(f"{k} {v:.1f}" for k, v in res["floors_us"].items()))
    d = res["demo"]
    lines.append(f"demo block fw+bw: baracuda {d['baracuda_ms']:.2f} ms, eager {d['eager_ms']:.2f} ms, "
                 f"ratio {d['ratio']:.2f} ({'faster' if d['ratio'] < 1 else 'SLOWER'})")
    return "\n".join(lines)


def main(args) -> int:
    import torch

    if not torch.cuda.is_available():
        print("bench --host: needs a CUDA device (it times host overhead against CUDA launches)")
        return 2
    res = run_host(n=args.host_calls, rounds=args.host_rounds)
    print(format_table(res))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0
