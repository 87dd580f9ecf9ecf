"""var over narrow rows / columns (issue #16 item 4: var-first-[1048576,16] 0.34x and var-last-[1048576,16] 0.30x
torch.compile on the H100, session 6) against flat-load candidates (GPU): columns -- each split's shifted sums
(x - K, K = the column's first element) over runs of 1024 contiguous elements, folded per column with Chan's formula;
rows of C <= 64 -- BM rows read as one flat run, the mean then M2 from the registers (two exact passes).  Timed as
the bench rows are (CUDA-graph replays over input copies rotated past 2x L2) beside torch, torch.compile and the
current plan.  python bench/var_narrow_probe.py OUT.json"""
import json
import sys

import torch
import triton
import triton.language as tl

import baracuda as bc
from baracuda.backends.triton._lib.interp import loop

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from narrow_col_probe import timed  # noqa: E402


@triton.jit
def _chan(na, ma, qa, nb, mb, qb):
    n = na + nb
    f = tl.where(n > 0, nb / tl.where(n > 0, n, 1.0), 0.0)
    d = mb - ma
    return n, ma + d * f, qa + qb + d * d * na * f


@triton.jit
def _var_cols_stage1(x_ptr, s1_ptr, s2_ptr, R, rows_per, S, C: tl.constexpr, BR: tl.constexpr):
    s = tl.program_id(0)
    r0 = s.to(tl.int64) * rows_per
    offs = tl.arange(0, BR * C)
    k = tl.load(x_ptr + offs % C).to(tl.float32)           # the shift: row 0, repeated over the run
    a1 = tl.zeros([BR * C], tl.float32)
    a2 = tl.zeros([BR * C], tl.float32)
    for start in loop(0, rows_per, BR):
        r = r0 + start
        m = offs < (R - r) * C
        d = tl.where(m, tl.load(x_ptr + r * C + offs, mask=m, other=0, eviction_policy="evict_first").to(tl.float32) - k, 0.0)
        a1 += d
        a2 += d * d
    c = tl.arange(0, C)
    tl.store(s1_ptr + c * S + s, tl.sum(tl.reshape(a1, [BR, C]), axis=0))
    tl.store(s2_ptr + c * S + s, tl.sum(tl.reshape(a2, [BR, C]), axis=0))


@triton.jit
def _var_cols_fold(x_ptr, s1_ptr, s2_ptr, v_ptr, m_ptr, R, rows_per, S, corr, BS: tl.constexpr):
    c = tl.program_id(0)
    k = tl.load(x_ptr + c).to(tl.float32)
    n = tl.zeros([BS], tl.float32)
    mu = tl.zeros([BS], tl.float32)
    q = tl.zeros([BS], tl.float32)
    for s0 in loop(0, S, BS):
        sp = s0 + tl.arange(0, BS)
        ok = sp < S
        ns = tl.where(ok, tl.minimum(rows_per, R - sp.to(tl.int64) * rows_per), 0).to(tl.float32)
        a1 = tl.load(s1_ptr + c * S + sp, mask=ok, other=0.0)
        a2 = tl.load(s2_ptr + c * S + sp, mask=ok, other=0.0)
        ms = tl.where(ns > 0, a1 / tl.where(ns > 0, ns, 1.0), 0.0)
        qs = tl.maximum(a2 - a1 * ms, 0.0)
        n, mu, q = _chan(n, mu, q, ns, ms, qs)
    N, MU, Q = tl.reduce((n, mu, q), 0, _chan)
    tl.store(v_ptr + c, (Q / tl.maximum(N - corr, 0.0)).to(v_ptr.dtype.element_ty))
    tl.store(m_ptr + c, (k + MU).to(m_ptr.dtype.element_ty))


@triton.jit
def _var_rows(x_ptr, v_ptr, n_rows, corr, C: tl.constexpr, BM: tl.constexpr):
    p = tl.program_id(0)
    r0 = p.to(tl.int64) * BM
    offs = tl.arange(0, BM * C)
    m = offs < (n_rows - r0) * C
    x = tl.reshape(tl.load(x_ptr + r0 * C + offs, mask=m, other=0, eviction_policy="evict_first").to(tl.float32), [BM, C])
    mean = tl.sum(x, axis=1) / C
    d = x - mean[:, None]
    var = tl.sum(d * d, axis=1) / (C - corr)
    rows = r0 + tl.arange(0, BM)
    tl.store(v_ptr + rows, var.to(v_ptr.dtype.element_ty), mask=rows < n_rows)


rows = []


def row(**r):
    rows.append(r)
    print(json.dumps(r), flush=True)


def main(out):
    for (R, C), dt in (((1048576, 16), torch.bfloat16), ((1048576, 16), torch.float32), ((262144, 64), torch.bfloat16)):
        x = torch.randn(R, C, device="cuda", dtype=dt) * 2 + 3
        nbytes = x.numel() * x.element_size()
        xs = [x] + [x.clone() for _ in range(max(0, -(-(160 << 20) // nbytes) - 1))]
        for dim in (0, 1):
            base = dict(shape=[R, C], dtype=str(dt), dim=dim)
            ref = torch.var(x.double(), dim)
            row(**base, impl="torch", us=timed(lambda i: torch.var(xs[i % len(xs)], dim)))
            cf = torch.compile(lambda t: torch.var(t, dim))
            cf(x)
            row(**base, impl="torch.compile", us=timed(lambda i: cf(xs[i % len(xs)])))
            p = bc.Plan.select(bc.Descriptor.like("var", x, dims=(dim,), correction=1.0), "cuda")
            row(**base, impl="baracuda", route=p.sku.route, us=timed(lambda i: p.run(xs[i % len(xs)])))
            if dim == 0:
                v, mu = torch.empty(C, device="cuda", dtype=dt), torch.empty(C, device="cuda", dtype=dt)
                for BE in (1024, 2048):
                    BR = BE // C
                    for S in (512, 1024):
                        rows_per = -(-(-(-R // S)) // BR) * BR
                        S2 = -(-R // rows_per)
                        s1 = torch.empty(C, S2, device="cuda", dtype=torch.float32)
                        s2 = torch.empty(C, S2, device="cuda", dtype=torch.float32)
                        for warps in (4, 8):
                            def fn(i):
                                xi = xs[i % len(xs)]
                                _var_cols_stage1[(S2,)](xi, s1, s2, R, rows_per, S2, C=C, BR=BR, num_warps=warps)
                                _var_cols_fold[(C,)](xi, s1, s2, v, mu, R, rows_per, S2, 1.0, BS=1024, num_warps=4)
                            fn(0)
                            torch.cuda.synchronize()
                            err = ((v.double() - ref).abs() / ref.abs()).max().item()
                            row(**base, impl="probe-cols", BE=BE, S=S2, warps=warps, us=timed(fn), relerr=err)
            else:
                v = torch.empty(R, device="cuda", dtype=dt)
                for BM in (64, 128, 256, 512):
                    if BM * C > 16384:
                        continue
                    for warps in (4, 8):
                        def fn(i):
                            _var_rows[(-(-R // BM),)](xs[i % len(xs)], v, R, 1.0, C=C, BM=BM, num_warps=warps)
                        fn(0)
                        torch.cuda.synchronize()
                        err = ((v.double() - ref).abs() / ref.abs()).max().item()
                        row(**base, impl="probe-rows", BM=BM, warps=warps, us=timed(fn), relerr=err)
    json.dump(rows, open(out, "w"), indent=0)


if __name__ == "__main__":
    main(sys.argv[1])
