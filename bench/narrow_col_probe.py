"""Narrow first-dim reductions ([R, C], C <= 64 contiguous, over dim 0: issue #16 item 4, 0.78x torch.compile) against
candidate kernels (GPU): the rows of a split read as one flat contiguous block per load (no 2-D index arithmetic or
column mask), partial [S, C] sums, then their fold; also one launch whose last program folds the partials (a counter
in the workspace).  Each candidate is timed as the row is (CUDA-graph replays over input copies rotated past 2x L2),
beside torch eager, torch.compile and the current plan, in one process.  python bench/narrow_col_probe.py OUT.json"""
import json
import sys

import torch
import triton
import triton.language as tl

import baracuda as bc
from baracuda.backends.triton._lib.interp import loop



def timed(fn, n=24):
    """GPU us per call: n calls captured in one CUDA graph, replayed (as bench/reduce_sweep.py)."""
    for i in range(3):
        fn(i)
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn(0)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(n):
            fn(i)
    g.replay()
    torch.cuda.synchronize()
    ts = []
    for _ in range(7):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b) / n * 1e3)
    return sorted(ts)[3]


@triton.jit
def _flat_partial(x_ptr, p_ptr, R, rows_per, C: tl.constexpr, BR: tl.constexpr, MAX: tl.constexpr):
    s = tl.program_id(0)
    r0 = s.to(tl.int64) * rows_per
    offs = tl.arange(0, BR * C)
    if MAX:
        acc = tl.full([BR * C], float("-inf"), tl.float32)
    else:
        acc = tl.zeros([BR * C], tl.float32)
    for start in loop(0, rows_per, BR):
        r = r0 + start
        m = offs < (R - r) * C
        v = tl.load(x_ptr + r * C + offs, mask=m, other=0.0 if not MAX else float("-inf")).to(tl.float32)
        if MAX:
            acc = tl.maximum(acc, v)
        else:
            acc += v
    a2 = tl.reshape(acc, [BR, C])
    if MAX:
        part = tl.max(a2, axis=0)
    else:
        part = tl.sum(a2, axis=0)
    tl.store(p_ptr + s * C + tl.arange(0, C), part)


@triton.jit
def _fold(p_ptr, o_ptr, S, C: tl.constexpr, BS: tl.constexpr, MAX: tl.constexpr):
    c = tl.arange(0, C)
    if MAX:
        acc = tl.full([BS, C], float("-inf"), tl.float32)
    else:
        acc = tl.zeros([BS, C], tl.float32)
    for s0 in loop(0, S, BS):
        s = s0 + tl.arange(0, BS)
        v = tl.load(p_ptr + s[:, None] * C + c[None, :], mask=(s < S)[:, None],
                    other=0.0 if not MAX else float("-inf"))
        if MAX:
            acc = tl.maximum(acc, v)
        else:
            acc += v
    if MAX:
        out = tl.max(acc, axis=0)
    else:
        out = tl.sum(acc, axis=0)
    tl.store(o_ptr + c, out.to(o_ptr.dtype.element_ty))


@triton.jit
def _one_launch(x_ptr, p_ptr, cnt_ptr, o_ptr, R, rows_per, S, C: tl.constexpr, BR: tl.constexpr, BS: tl.constexpr,
                MAX: tl.constexpr):
    s = tl.program_id(0)
    r0 = s.to(tl.int64) * rows_per
    offs = tl.arange(0, BR * C)
    if MAX:
        acc = tl.full([BR * C], float("-inf"), tl.float32)
    else:
        acc = tl.zeros([BR * C], tl.float32)
    for start in loop(0, rows_per, BR):
        r = r0 + start
        m = offs < (R - r) * C
        v = tl.load(x_ptr + r * C + offs, mask=m, other=0.0 if not MAX else float("-inf")).to(tl.float32)
        if MAX:
            acc = tl.maximum(acc, v)
        else:
            acc += v
    a2 = tl.reshape(acc, [BR, C])
    if MAX:
        part = tl.max(a2, axis=0)
    else:
        part = tl.sum(a2, axis=0)
    tl.store(p_ptr + s * C + tl.arange(0, C), part)
    done = tl.atomic_add(cnt_ptr, 1, sem="acq_rel")
    if done == S - 1:
        c = tl.arange(0, C)
        if MAX:
            tot = tl.full([BS, C], float("-inf"), tl.float32)
        else:
            tot = tl.zeros([BS, C], tl.float32)
        for q0 in loop(0, S, BS):
            q = q0 + tl.arange(0, BS)
            v = tl.load(p_ptr + q[:, None] * C + c[None, :], mask=(q < S)[:, None],
                        other=0.0 if not MAX else float("-inf"), cache_modifier=".cg")
            if MAX:
                tot = tl.maximum(tot, v)
            else:
                tot += v
        if MAX:
            out = tl.max(tot, axis=0)
        else:
            out = tl.sum(tot, axis=0)
        tl.store(o_ptr + c, out.to(o_ptr.dtype.element_ty))
        tl.store(cnt_ptr, 0)


rows = []


def row(**r):
    rows.append(r)
    print(json.dumps(r), flush=True)


def main(out):
    for (R, C), dt in (((1048576, 16), torch.bfloat16), ((1048576, 16), torch.float32), ((262144, 64), torch.bfloat16),
                       ((4194304, 4), torch.bfloat16)):
        x = torch.randn(R, C, device="cuda", dtype=dt)
        nbytes = x.numel() * x.element_size()
        xs = [x] + [x.clone() for _ in range(max(0, -(-(160 << 20) // nbytes) - 1))]
        for op in ("sum", "amax"):
            MAX = op == "amax"
            tf = getattr(torch, op)
            ref = tf(x.double(), 0)
            base = dict(shape=[R, C], dtype=str(dt), op=op)
            row(**base, impl="torch", us=timed(lambda i: tf(xs[i % len(xs)], 0)))
            cf = torch.compile(lambda t: tf(t, 0))
            cf(x)
            row(**base, impl="torch.compile", us=timed(lambda i: cf(xs[i % len(xs)])))
            p = bc.Plan.select(bc.Descriptor.like(op, x, dims=(0,)), "cuda")
            row(**base, impl="baracuda", route=p.sku.route, us=timed(lambda i: p.run(xs[i % len(xs)])))
            o = torch.empty(C, device="cuda", dtype=dt)
            for BR in (64, 128, 256, 512):
                if BR * C > 8192 or BR * C < 2048:
                    continue
                for S in (264, 528, 1056):
                    rows_per = -(-R // S)
                    rows_per = -(-rows_per // BR) * BR
                    S2 = -(-R // rows_per)
                    for warps in (4, 8):
                        part = torch.empty(S2, C, device="cuda", dtype=torch.float32)
                        cnt = torch.zeros(1, device="cuda", dtype=torch.int32)

                        def two(i):
                            _flat_partial[(S2,)](xs[i % len(xs)], part, R, rows_per, C=C, BR=BR, MAX=MAX,
                                                 num_warps=warps)
                            _fold[(1,)](part, o, S2, C=C, BS=max(1, 2048 // C), MAX=MAX, num_warps=4)

                        def one(i):
                            _one_launch[(S2,)](xs[i % len(xs)], part, cnt, o, R, rows_per, S2, C=C, BR=BR,
                                               BS=max(1, 2048 // C), MAX=MAX, num_warps=warps)
                        for name, fn in (("two", two), ("one", one)):
                            fn(0)
                            torch.cuda.synchronize()
                            err = (o.double() - ref).abs().max().item() / max(ref.abs().max().item(), 1e-30)
                            row(**base, impl=f"probe-{name}", BR=BR, S=S2, warps=warps, us=timed(fn), relerr=err)
    json.dump(rows, open(out, "w"), indent=0)


if __name__ == "__main__":
    main(sys.argv[1])
