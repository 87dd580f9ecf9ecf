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
from baracuda.backends.triton.reduction.reduce_kernels import _flat_col_kernel, _flat_fold_kernel



sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _graph_timer import timed  # noqa: E402


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
def _one_unrolled(x_ptr, p_ptr, cnt_ptr, o_ptr, R, rows_per, S, C: tl.constexpr, BR: tl.constexpr, BS: tl.constexpr,
                  MAX: tl.constexpr, U: tl.constexpr, LAST: tl.constexpr):
    """_one_launch with U independent loads in flight per iteration (rows_per a multiple of U * BR); LAST False: the
    partials only (then _fold)."""
    s = tl.program_id(0)
    r0 = s.to(tl.int64) * rows_per
    offs = tl.arange(0, BR * C)
    fill = 0.0 if not MAX else float("-inf")
    acc = tl.full([BR * C], fill, tl.float32)
    acc2 = tl.full([BR * C], fill, tl.float32)
    for start in loop(0, rows_per, U * BR):
        r = r0 + start
        v = tl.load(x_ptr + r * C + offs, mask=offs < (R - r) * C, other=fill, eviction_policy="evict_first").to(tl.float32)
        if U == 2:
            w = tl.load(x_ptr + (r + BR) * C + offs, mask=offs < (R - r - BR) * C, other=fill,
                        eviction_policy="evict_first").to(tl.float32)
        if MAX:
            acc = tl.maximum(acc, v)
            if U == 2:
                acc2 = tl.maximum(acc2, w)
        else:
            acc += v
            if U == 2:
                acc2 += w
    if MAX:
        acc = tl.maximum(acc, acc2)
        part = tl.max(tl.reshape(acc, [BR, C]), axis=0)
    else:
        part = tl.sum(tl.reshape(acc + acc2, [BR, C]), axis=0)
    tl.store(p_ptr + s * C + tl.arange(0, C), part)
    done = 0
    if LAST:
        done = tl.atomic_add(cnt_ptr, 1, sem="acq_rel")
    if LAST and done == S - 1:
        c = tl.arange(0, C)
        tot = tl.full([BS, C], fill, tl.float32)
        for q0 in loop(0, S, BS):
            q = q0 + tl.arange(0, BS)
            v = tl.load(p_ptr + q[:, None] * C + c[None, :], mask=(q < S)[:, None], other=fill, cache_modifier=".cg")
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
            if FOURTH:
                for BE in (1024, 2048, 4096):
                    BR = BE // C
                    for S in (512, 1024, 2048):
                        for U in (1, 2):
                            rows_per = -(-R // S)
                            rows_per = -(-rows_per // (U * BR)) * (U * BR)
                            S2 = -(-R // rows_per)
                            for warps in (4, 8):
                                part = torch.empty(C, S2, device="cuda", dtype=torch.float32)

                                if U == 2:
                                    continue      # (the library kernel reads one run an iteration)

                                def tr(i):
                                    _flat_col_kernel[(S2,)](xs[i % len(xs)], part, R, rows_per, S2, C=C, BR=BR,
                                                            MODE=int(MAX), NEG=False, num_warps=warps)
                                    _flat_fold_kernel[(C,)](part, o, S2, float(R), BS=1024, MODE=int(MAX), NEG=False,
                                                            DIV=False, num_warps=4)
                                o.zero_()
                                tr(0)
                                torch.cuda.synchronize()
                                err = (o.double() - ref).abs().max().item() / max(ref.abs().max().item(), 1e-30)
                                row(**base, impl="probe-transposed", BR=BR, S=S2, U=U, warps=warps, us=timed(tr),
                                    relerr=err)
                continue
            if SECOND:
                for BE in ((1024, 2048, 4096) if THIRD else (4096, 8192, 16384)):
                    BR = BE // C
                    for S in ((1024, 2048, 4096, 8192) if THIRD else (264, 512, 1024, 2048)):
                        for U in ((1,) if THIRD else (1, 2)):
                            rows_per = -(-R // S)
                            rows_per = -(-rows_per // (U * BR)) * (U * BR)
                            S2 = -(-R // rows_per)
                            for warps in ((2, 4, 8) if THIRD else (4, 8, 16)):
                                part = torch.empty(S2, C, device="cuda", dtype=torch.float32)
                                cnt = torch.zeros(1, device="cuda", dtype=torch.int32)

                                def one(i):
                                    _one_unrolled[(S2,)](xs[i % len(xs)], part, cnt, o, R, rows_per, S2, C=C, BR=BR,
                                                         BS=max(1, 2048 // C), MAX=MAX, U=U, LAST=True,
                                                         num_warps=warps)

                                def two(i):
                                    _one_unrolled[(S2,)](xs[i % len(xs)], part, cnt, o, R, rows_per, S2, C=C, BR=BR,
                                                         BS=max(1, 2048 // C), MAX=MAX, U=U, LAST=False,
                                                         num_warps=warps)
                                    _fold[(1,)](part, o, S2, C=C, BS=max(1, 4096 // C), MAX=MAX, num_warps=8)
                                for name, fn in (("one", one), ("two", two)):
                                    o.zero_()
                                    fn(0)
                                    torch.cuda.synchronize()
                                    err = (o.double() - ref).abs().max().item() / max(ref.abs().max().item(), 1e-30)
                                    row(**base, impl="probe-unrolled-" + name, BR=BR, S=S2, U=U, warps=warps,
                                        us=timed(fn), relerr=err)
                continue
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
                            _one_unrolled[(S2,)](xs[i % len(xs)], part, cnt, o, R, rows_per, S2, C=C, BR=BR,
                                                 BS=max(1, 2048 // C), MAX=MAX, U=1, LAST=False, num_warps=warps)
                            _fold[(1,)](part, o, S2, C=C, BS=max(1, 2048 // C), MAX=MAX, num_warps=4)

                        def one(i):
                            _one_unrolled[(S2,)](xs[i % len(xs)], part, cnt, o, R, rows_per, S2, C=C, BR=BR,
                                                 BS=max(1, 2048 // C), MAX=MAX, U=1, LAST=True, num_warps=warps)
                        for name, fn in (("two", two), ("one", one)):
                            fn(0)
                            torch.cuda.synchronize()
                            err = (o.double() - ref).abs().max().item() / max(ref.abs().max().item(), 1e-30)
                            row(**base, impl=f"probe-{name}", BR=BR, S=S2, warps=warps, us=timed(fn), relerr=err)
    json.dump(rows, open(out, "w"), indent=0)


SECOND = "--unrolled" in sys.argv or "--small" in sys.argv
FOURTH = "--transposed" in sys.argv   # the library's flat kernels (reduce_kernels.py: partials [C, S], one fold a column)
THIRD = "--small" in sys.argv     # many programs of small tiles (torch.compile's split: 1024 x 1024 rows)

if __name__ == "__main__":
    main(sys.argv[1])
