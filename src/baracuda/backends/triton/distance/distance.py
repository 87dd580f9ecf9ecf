"""Triton kernels of the distance ops.

* cosine_similarity / pairwise_distance: the statistical reduction kernel of ``reduction_stats.py`` (MODE COS:
  (x1.x1, x2.x2, x1.x2) per output; MODE NORM with two inputs: |x1 - x2 + eps|^p) on the broadcast shape, so
  each input is read once (bf16 [16384, 4096] x 2: 256 MB read, ~80 us at 3.2 TB/s on an H100).
* cosine_similarity_backward: one kernel, two passes over each reduced row (the three sums, then dx1 and dx2
  written together): 2 reads of x1/x2 (the second from L2 for rows that fit) + 2 writes.
* cdist / pdist: a direct tile kernel, [BI, BJ] output pairs per program, the M axis walked in BK steps
  with the [BI, BJ, BK] differences in registers (each loaded element is reused BJ or BI = 64 times): compute
  bound, ~2 FMA-class instructions per (i, j, k) for p = 2 (4096 x 4096 x 256 f32: 4.3 G triples, ~0.3 ms on an
  H100's ~30 T FMA/s).  No GEMM expansion (||a||^2 + ||b||^2 - 2ab cancels for near points).  pdist runs the
  same kernel on the upper-triangle tiles only (a host table of tile pairs), writing the condensed order.
* cdist_backward / pdist_backward: program = (rows block of the differentiated input, M block); it walks the
  other input's rows and sums g_ij * f(diff, dist_ij) over them in registers: deterministic, no atomics.  The
  per-pair factor g / dist^(p-1) is computed once per [BI, BJ] tile, the per-element part is one pow (or
  none for p = 1, 2, inf).  pdist_backward reads the condensed grad/out symmetrically (pair (min, max)).
"""
from __future__ import annotations

import functools
import math

import torch
import triton
import triton.language as tl

from ....ops._common import broadcast_shapes
from .._lib.register import register_triton
from .._lib.math import pow as _pow
from .._lib.math import sqrt as _sqrt
from .._lib.dtypes import ACC_TL as _TL
from .._lib.dtypes import acc_dtype as _acc
from .._lib.interp import INTERPRETING, loop
from .._lib.interp import f64_arg as _scalar
from ..reduction import COS, NORM, PNORM_KIND, bw_layout, run_stats, stats_workspace
from .._lib.launch import fast_kernel
from .._lib.geometry import cdiv

_BI, _BJ, _BK = 64, 64, 4          # forward tile: 16384 differences per step, 8 warps -> 64 per thread
_BW_BI, _BW_BJ, _BW_BK = 32, 32, 8  # backward tile: [32 rows, 32 pairs, 8 columns] per step


# -- cosine_similarity / pairwise_distance (the stats kernel) ----------------------------------------------
def _bshape(desc):
    x1, x2 = desc.inputs[1:3] if desc.op.endswith("_backward") else desc.inputs[:2]
    return broadcast_shapes(desc.op, ("x1", "x2"), (x1.shape, x2.shape))


def _run_cos(desc, inputs, outputs, ws):
    shape = _bshape(desc)
    x1, x2 = (x.expand(shape) for x in inputs)
    run_stats(x1, x2, outputs, (desc.attr("dim"),), shape, ws, COS, eps=desc.attr("eps"), acc=_acc(desc.dtype))


def _run_pw(desc, inputs, outputs, ws):
    shape = _bshape(desc)
    x1, x2 = (x.expand(shape) for x in inputs)
    p = desc.attr("p")
    run_stats(x1, x2, outputs, (len(shape) - 1,), shape, ws, NORM, pk=PNORM_KIND.get(p, 3), p=p, eps=desc.attr("eps"),
              acc=_acc(desc.dtype))


def _ws(dims_of):
    def ws(desc):
        shape = _bshape(desc)
        return stats_workspace(shape, dims_of(desc, shape), desc.dtype.itemsize, _acc(desc.dtype))
    return ws


@fast_kernel
def _cos_bw_kernel(g_ptr, a_ptr, b_ptr, da_ptr, db_ptr, inner, R, sao, sar, sai, sbo, sbr, sbi, sdo, sdr, sdi,
                   sgo, sgi, n_iblk, eps: tl.float64, ACC: tl.constexpr, I64: tl.constexpr, INTERP: tl.constexpr,
                   BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):
    """dx1 = g (x2 / (c1 c2) - s12 u1 / (c1^2 c2)), dx2 symmetric; c = max(|x|, eps), u = x / |x| (0 at 0)."""
    pid = tl.program_id(0)
    o = pid // n_iblk
    if I64:
        o = o.to(tl.int64)
    i = (pid % n_iblk) * BLOCK_I + tl.arange(0, BLOCK_I)
    i_ok = i < inner
    rr = tl.arange(0, BLOCK_R)
    s11 = tl.zeros([BLOCK_I], ACC)   # per-tile reductions folded into [BLOCK_I] vectors: no [R, I] accumulators
    s22 = tl.zeros([BLOCK_I], ACC)
    s12 = tl.zeros([BLOCK_I], ACC)
    for start in loop(0, R, BLOCK_R):
        r = start + rr
        if I64:
            r = r.to(tl.int64)
        m = (r < R)[:, None] & i_ok[None, :]
        a = tl.load(a_ptr + o * sao + r[:, None] * sar + i[None, :] * sai, mask=m, other=0).to(ACC)
        b = tl.load(b_ptr + o * sbo + r[:, None] * sbr + i[None, :] * sbi, mask=m, other=0).to(ACC)
        s11 += tl.sum(a * a, axis=0)
        s22 += tl.sum(b * b, axis=0)
        s12 += tl.sum(a * b, axis=0)
    e = _scalar(eps, ACC, INTERP)
    n1 = _sqrt(s11)
    n2 = _sqrt(s22)
    c1 = tl.maximum(n1, e)
    c2 = tl.maximum(n2, e)
    t12 = s12
    g = tl.load(g_ptr + o * sgo + i * sgi, mask=i_ok, other=0).to(ACC)
    k = g / (c1 * c2)                                        # coefficient of the other input
    q1 = tl.where(n1 == 0, 0.0, g * t12 / (c1 * c1 * c2 * tl.where(n1 == 0, 1.0, n1)))
    q2 = tl.where(n2 == 0, 0.0, g * t12 / (c2 * c2 * c1 * tl.where(n2 == 0, 1.0, n2)))
    for start in loop(0, R, BLOCK_R):
        r = start + rr
        if I64:
            r = r.to(tl.int64)
        m = (r < R)[:, None] & i_ok[None, :]
        a = tl.load(a_ptr + o * sao + r[:, None] * sar + i[None, :] * sai, mask=m, other=0).to(ACC)
        b = tl.load(b_ptr + o * sbo + r[:, None] * sbr + i[None, :] * sbi, mask=m, other=0).to(ACC)
        off = o * sdo + r[:, None] * sdr + i[None, :] * sdi
        tl.store(da_ptr + off, (k[None, :] * b - q1[None, :] * a).to(da_ptr.dtype.element_ty), mask=m)
        tl.store(db_ptr + off, (k[None, :] * a - q2[None, :] * b).to(db_ptr.dtype.element_ty), mask=m)


def _run_cos_bw(desc, inputs, outputs, ws):
    g, x1, x2 = inputs
    shape = _bshape(desc)
    if math.prod(shape) == 0:
        return
    dim = desc.attr("dim")
    (a, b), targets, (g,), (outer, R, inner), (sa, sb), sd, sg, (br, bi), i64, finish = bw_layout(
        shape, (dim,), (x1.expand(shape), x2.expand(shape)), outputs, (g,))
    n_iblk = cdiv(inner, bi)
    _cos_bw_kernel[(outer * n_iblk,)](g, a, b, targets[0], targets[1], inner, R, *sa, *sb, *sd, *sg, n_iblk,
                                      float(desc.attr("eps")), ACC=_TL[_acc(desc.dtype)], I64=i64, INTERP=INTERPRETING,
                                      BLOCK_R=br, BLOCK_I=bi, num_warps=8 if br * bi >= 2048 else 4)
    finish()


# -- cdist / pdist forward: [BI, BJ] pairs per program -------------------------------------------------------
@fast_kernel
def _dist_kernel(a_ptr, b_ptr, o_ptr, tiles_ptr, P, NR, M, sab, sap, sam, sbb, sbr, sbm, sob, sop, sor, n_jblk,
                 p: tl.float64, PK: tl.constexpr, PDIST: tl.constexpr, ACC: tl.constexpr, INTERP: tl.constexpr,
                 BI: tl.constexpr, BJ: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0)
    bb = tl.program_id(1).to(tl.int64)
    if PDIST:   # upper-triangle tiles only: (ti, tj) from the host's table
        ti = tl.load(tiles_ptr + 2 * pid)
        tj = tl.load(tiles_ptr + 2 * pid + 1)
    else:
        ti = pid // n_jblk
        tj = pid % n_jblk
    i = (ti * BI + tl.arange(0, BI)).to(tl.int64)
    j = (tj * BJ + tl.arange(0, BJ)).to(tl.int64)
    kk = tl.arange(0, BK)
    pp = _scalar(p, ACC, INTERP)
    acc = tl.zeros([BI, BJ], ACC)
    nan = tl.zeros([BI, BJ], ACC)
    for k0 in loop(0, M, BK):
        k = k0 + kk
        a = tl.load(a_ptr + bb * sab + i[:, None] * sap + k[None, :] * sam, mask=(i < P)[:, None] & (k < M)[None, :],
                    other=0).to(ACC)
        b = tl.load(b_ptr + bb * sbb + j[:, None] * sbr + k[None, :] * sbm, mask=(j < NR)[:, None] & (k < M)[None, :],
                    other=0).to(ACC)
        d = tl.abs(a[:, None, :] - b[None, :, :])          # padded columns are 0 - 0: neutral for every p
        if PK == 0:
            acc += tl.sum(tl.where(d != 0, 1.0, 0.0), 2)
        elif PK == 1:
            acc += tl.sum(d, 2)
        elif PK == 2:
            acc += tl.sum(d * d, 2)
        elif PK == 3:
            acc += tl.sum(_pow(d, pp), 2)
        else:
            nan += tl.sum((d != d).to(ACC), 2)
            acc = tl.maximum(acc, tl.max(tl.where(d != d, 0.0, d), 2))
    if PK == 2:
        acc = _sqrt(acc)
    elif PK == 3:
        acc = _pow(acc, 1.0 / pp)
    elif PK == 4:
        acc = tl.where(nan > 0, float("nan"), acc)
    if PDIST:
        m = (i[:, None] < j[None, :]) & (j < NR)[None, :]
        off = i[:, None] * NR - (i[:, None] * (i[:, None] + 1)) // 2 + j[None, :] - i[:, None] - 1
    else:
        m = (i < P)[:, None] & (j < NR)[None, :]
        off = bb * sob + i[:, None] * sop + j[None, :] * sor
    tl.store(o_ptr + off, acc.to(o_ptr.dtype.element_ty), mask=m)


@functools.lru_cache(maxsize=64)
def _upper_tiles(nt: int, device: str):
    pairs = [(a, b) for a in range(nt) for b in range(a, nt)]
    return torch.tensor(pairs, dtype=torch.int32, device=device).reshape(-1)


def _dist_pk(p):
    return PNORM_KIND.get(p, 3)


def _batched(desc):
    """(x1, x2) as 3-D (batch, rows, M) views with the broadcast batch."""
    x1, x2 = desc.inputs[:2] if desc.op == "cdist" else desc.inputs[1:3]
    batch = broadcast_shapes("cdist", ("x1", "x2"), (x1.shape[:-2], x2.shape[:-2]))
    return batch, x1.shape[-2], x2.shape[-2], x1.shape[-1]


def _flat3(x, batch):
    return x.expand(batch + tuple(x.shape[-2:])).reshape((-1,) + tuple(x.shape[-2:]))


def _run_cdist(desc, inputs, outputs, ws):
    batch, P, NR, M = _batched(desc)
    out = outputs[0]
    if out.numel() == 0:
        return
    a, b = _flat3(inputs[0], batch), _flat3(inputs[1], batch)
    target = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
    o3 = target.reshape(-1, P, NR)
    n_jblk = cdiv(NR, _BJ)
    _dist_kernel[(cdiv(P, _BI) * n_jblk, a.shape[0])](
        a, b, o3, a, P, NR, M, *a.stride(), *b.stride(), *o3.stride(), n_jblk, float(desc.attr("p")),
        PK=_dist_pk(desc.attr("p")), PDIST=False, ACC=_TL[_acc(desc.dtype)], INTERP=INTERPRETING, BI=_BI, BJ=_BJ, BK=_BK,
        num_warps=8)
    if target is not out:
        out.copy_(target)


def _run_pdist(desc, inputs, outputs, ws):
    x = inputs[0]
    N, M = x.shape
    out = outputs[0]
    if out.numel() == 0:
        return
    assert _BI == _BJ
    tiles = _upper_tiles(cdiv(N, _BI), str(x.device))
    _dist_kernel[(tiles.numel() // 2, 1)](
        x, x, out, tiles, N, N, M, 0, *x.stride(), 0, *x.stride(), 0, 0, 0, 1, float(desc.attr("p")),
        PK=_dist_pk(desc.attr("p")), PDIST=True, ACC=_TL[_acc(desc.dtype)], INTERP=INTERPRETING, BI=_BI, BJ=_BJ, BK=_BK,
        num_warps=8)


# -- backward: dx_i = sum_j g_ij f(x_i - y_j, d_ij) ---------------------------------------------------------
@fast_kernel
def _dist_bw_kernel(g_ptr, d_ptr, a_ptr, b_ptr, o_ptr, P, NR, M, sab, sap, sam, sbb, sbr, sbm, sgb, sgi, sgj,
                    sdb, sdi, sdj, sob, sop, som, p: tl.float64, PK: tl.constexpr, LT1: tl.constexpr,
                    LT2: tl.constexpr, PDIST: tl.constexpr, ACC: tl.constexpr, INTERP: tl.constexpr,
                    BI: tl.constexpr, BJ: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0)
    kb = tl.program_id(1)
    bb = tl.program_id(2).to(tl.int64)
    i = (pid * BI + tl.arange(0, BI)).to(tl.int64)
    k = (kb * BK + tl.arange(0, BK)).to(tl.int64)
    i_ok = i < P
    k_ok = k < M
    pp = _scalar(p, ACC, INTERP)
    a = tl.load(a_ptr + bb * sab + i[:, None] * sap + k[None, :] * sam, mask=i_ok[:, None] & k_ok[None, :],
                other=0).to(ACC)
    acc = tl.zeros([BI, BK], ACC)
    jj = tl.arange(0, BJ)
    for j0 in loop(0, NR, BJ):
        j = (j0 + jj).to(tl.int64)
        pm = i_ok[:, None] & (j < NR)[None, :]
        if PDIST:   # condensed index of the pair (min, max); the diagonal has no pair
            lo = tl.minimum(i[:, None], j[None, :])
            hi = tl.maximum(i[:, None], j[None, :])
            pm = pm & (lo != hi)
            kpair = lo * NR - (lo * (lo + 1)) // 2 + hi - lo - 1
            off_g = kpair * sgi
            off_d = kpair * sdi
        else:
            off_g = bb * sgb + i[:, None] * sgi + j[None, :] * sgj
            off_d = bb * sdb + i[:, None] * sdi + j[None, :] * sdj
        g = tl.load(g_ptr + off_g, mask=pm, other=0).to(ACC)
        dist = tl.load(d_ptr + off_d, mask=pm, other=0).to(ACC)
        # the per-pair factor, once per [BI, BJ]: g / dist (p = 2), g / dist^(p-1) (general), 0 at dist 0
        if PK == 2:
            w = tl.where(dist == 0, 0.0, g / tl.where(dist == 0, 1.0, dist))
        elif PK == 3:
            w = tl.where(dist == 0, 0.0, g / _pow(tl.where(dist == 0, 1.0, dist), pp - 1.0))
        else:
            w = g
        w = tl.where(pm, w, 0.0)
        b = tl.load(b_ptr + bb * sbb + j[:, None] * sbr + k[None, :] * sbm, mask=(j < NR)[:, None] & k_ok[None, :],
                    other=0).to(ACC)
        diff = a[:, None, :] - b[None, :, :]
        sgn = tl.where(diff > 0, 1.0, tl.where(diff < 0, -1.0, 0.0))
        if PK == 1:
            f = sgn
        elif PK == 2:
            f = diff
        elif PK == 4:
            f = tl.where(tl.abs(diff) == dist[:, :, None], sgn, 0.0)
        else:
            ad = tl.abs(diff)
            if LT2:
                f = sgn * _pow(ad, pp - 1.0)
                if LT1:
                    f = tl.where(diff == 0, 0.0, f)
            else:
                f = diff * _pow(ad, pp - 2.0)
        acc += tl.sum(w[:, :, None] * f, 1)
    tl.store(o_ptr + bb * sob + i[:, None] * sop + k[None, :] * som, acc.to(o_ptr.dtype.element_ty),
             mask=i_ok[:, None] & k_ok[None, :])


def _launch_bw(g, d, a, b, out, P, NR, M, gst, dst, p, pdist, acc):
    pk = _dist_pk(p)
    if pk == 0:
        out.zero_()
        return
    grid = (cdiv(P, _BW_BI), cdiv(M, _BW_BK), a.shape[0] if a.dim() == 3 else 1)
    ast = a.stride() if a.dim() == 3 else (0,) + a.stride()
    bst = b.stride() if b.dim() == 3 else (0,) + b.stride()
    ost = out.stride() if out.dim() == 3 else (0,) + out.stride()
    _dist_bw_kernel[grid](g, d, a, b, out, P, NR, M, *ast, *bst, *gst, *dst, *ost, float(p), PK=pk,
                          LT1=p < 1, LT2=p < 2, PDIST=pdist, ACC=acc, INTERP=INTERPRETING, BI=_BW_BI, BJ=_BW_BJ,
                          BK=_BW_BK, num_warps=4)


def _run_cdist_bw(desc, inputs, outputs, ws):
    g, x1, x2, d = inputs
    out = outputs[0]
    if out.numel() == 0:
        return
    batch, P, NR, M = _batched(desc)
    wrt = desc.attr("wrt")
    if (NR if wrt == 0 else P) == 0:    # a sum over no rows of the other operand (it is empty)
        out.zero_()
        return
    a, b = _flat3(x1, batch), _flat3(x2, batch)
    g3, d3 = g.reshape(-1, P, NR), d.reshape(-1, P, NR)
    target = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
    o3 = target.reshape((-1,) + tuple(out.shape[-2:]))
    gs, ds = g3.stride(), d3.stride()
    if wrt == 0:
        _launch_bw(g3, d3, a, b, o3, P, NR, M, gs, ds, desc.attr("p"), False, _TL[_acc(desc.dtype)])
    else:   # dx2_j = sum_i g_ij f(x2_j - x1_i): the same kernel with the roles (and g/dist strides) swapped
        _launch_bw(g3, d3, b, a, o3, NR, P, M, (gs[0], gs[2], gs[1]), (ds[0], ds[2], ds[1]), desc.attr("p"), False,
                   _TL[_acc(desc.dtype)])
    if target is not out:
        out.copy_(target)


def _run_pdist_bw(desc, inputs, outputs, ws):
    g, x, d = inputs
    out = outputs[0]
    N, M = x.shape
    if out.numel() == 0:
        return
    if N < 2:
        out.zero_()
        return
    target = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
    _launch_bw(g, d, x, x, target, N, N, M, (0, g.stride(0), 0), (0, d.stride(0), 0), desc.attr("p"), True,
               _TL[_acc(desc.dtype)])
    if target is not out:
        out.copy_(target)


register_triton("cosine_similarity", _run_cos, route="triton:stats(cos)",
                workspace=_ws(lambda d, shape: (d.attr("dim"),)))
register_triton("pairwise_distance", _run_pw, route="triton:stats(norm2in)",
                workspace=_ws(lambda d, shape: (len(shape) - 1,)))
register_triton("cosine_similarity_backward", _run_cos_bw, route="triton:cosine_similarity_backward")
register_triton("cdist", _run_cdist, route="triton:dist_tile")
register_triton("pdist", _run_pdist, route="triton:dist_tile(upper)")
register_triton("cdist_backward", _run_cdist_bw, route="triton:dist_bw_tile")
register_triton("pdist_backward", _run_pdist_bw, route="triton:dist_bw_tile(condensed)")
