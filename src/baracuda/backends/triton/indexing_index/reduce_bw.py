"""Triton index_reduce_backward: torch's gradients of index_reduce on the sorted segments of rows.py.

Each program owns [BR, BC] destination rows x columns; a row's run of source rows (found by binary search in the
stably sorted indices) is read twice: once for the run's statistics (amax/amin: how many values equal the result,
the input's own counted as torch does; prod: the zero count and the product of the non-zero values), once to write
each source row's gradient.  Every source row belongs to one run, so the writes are disjoint: no atomics,
deterministic.  mean: g / count; amax/amin: g / ties at the tied values; prod: g * the product of the others
(P / v without zeros, P_nonzero at the single zero, 0 with two or more zeros).  A row no index names passes g.
"""
from __future__ import annotations

import torch
import triton.language as tl

from ...._core.checks import flagged
from ....ops.indexing_index import dim_geometry, index_error
from .._lib.geometry import cdiv
from .._lib.launch import fast_kernel
from .._lib.register import register_triton
from ..layout.move import copy_into
from .rows import _SEG, _acc, _lower_bound, _normalize_kernel, _tile, _tiles, _v3, decode_flag


@fast_kernel
def _reduce_bw_kernel(gx_ptr, gs_ptr, g_ptr, x_ptr, o_ptr, src_ptr, keys_ptr, perm_ptr, rows, N, K, inner, n_cb,
                      steps, s3, MODE: tl.constexpr, SELF: tl.constexpr, ACC: tl.constexpr, BR: tl.constexpr,
                      BC: tl.constexpr):
    # (every operand is a contiguous (outer, N or K, inner) block: s3 = N * inner, source rows K * inner apart)
    r, c, rm, cm = _tile(tl.program_id(0), rows, inner, n_cb, BR, BC)
    o = r // N
    n = r - o * N
    lo = _lower_bound(keys_ptr, K, n, steps)
    cnt = tl.where(rm, _lower_bound(keys_ptr, K, n + 1, steps) - lo, 0)
    m2 = rm[:, None] & cm[None, :]
    at = (o * s3 + n * inner)[:, None] + c[None, :]
    gn = tl.load(g_ptr + at, mask=m2, other=0).to(ACC)
    xn = tl.load(x_ptr + at, mask=m2, other=0).to(ACC)
    on = tl.load(o_ptr + at, mask=m2, other=0).to(ACC)
    srow = (o * K * inner)[:, None] + c[None, :]
    top = tl.max(cnt, axis=0)
    one = tl.full([BR, BC], 1, ACC)
    # statistics of the run (and the input's own value where it takes part)
    ties = tl.where(xn == on, one, 0 * one)                     # amax / amin: torch counts the input's own value
    zeros = 0 * one
    prod = one
    if SELF:
        zeros = tl.where(xn == 0, one, zeros)
        prod = tl.where(xn != 0, xn, one)
    if MODE == 2 or MODE >= 4:
        t = 0
        while t < top:
            act = (t < cnt)[:, None] & m2
            kk = tl.load(perm_ptr + lo + t, mask=t < cnt, other=0)
            v = tl.load(src_ptr + srow + (kk * inner)[:, None], mask=act, other=0).to(ACC)
            ties += tl.where(act & (v == on), one, 0 * one)
            zeros += tl.where(act & (v == 0), one, 0 * one)
            prod = tl.where(act & (v != 0), prod * v, prod)
            t += 1
    den = cnt.to(ACC)[:, None]
    if SELF:
        den = den + 1
    t = 0
    while t < top:
        act = (t < cnt)[:, None] & m2
        kk = tl.load(perm_ptr + lo + t, mask=t < cnt, other=0)
        v = tl.load(src_ptr + srow + (kk * inner)[:, None], mask=act, other=0).to(ACC)
        if MODE == 3:
            w = gn / den
        elif MODE == 2:
            w = gn * tl.where(zeros == 0, prod / tl.where(v == 0, one, v), tl.where((zeros == 1) & (v == 0), prod, 0 * one))
        else:
            w = tl.where(v == on, gn / ties, 0 * one)
        tl.store(gs_ptr + srow + (kk * inner)[:, None], w.to(gs_ptr.dtype.element_ty), mask=act)
        t += 1
    if MODE == 3:
        wx = gn / den
    elif MODE == 2:
        wx = gn * tl.where(zeros == 0, prod / tl.where(xn == 0, one, xn), tl.where((zeros == 1) & (xn == 0), prod, 0 * one))
    else:
        wx = tl.where(xn == on, gn / ties, 0 * one)
    if not SELF:
        wx = 0 * wx
    tl.store(gx_ptr + at, tl.where((cnt > 0)[:, None], wx, gn).to(gx_ptr.dtype.element_ty), mask=m2)


def _bind(desc, pref):
    outer, n, inner = dim_geometry(desc.inputs[1].shape, desc.attr("dim"))
    k = desc.inputs[2].numel
    mode, incl = _SEG[desc.attr("reduce")], desc.attr("include_self")

    def run(desc_, inputs, outputs, ws):
        g, x, index, src, out = inputs
        gx, gs = outputs
        flag = ws.view(torch.int64)[:1]
        flag.zero_()
        rx = gx if gx.is_contiguous() else torch.empty(gx.shape, dtype=gx.dtype, device=gx.device)
        rs = gs if gs.is_contiguous() else torch.empty(gs.shape, dtype=gs.dtype, device=gs.device)
        if outer * n * inner:
            rs.zero_()     # (source rows with an out-of-range index get no gradient)
            idx = index.reshape(-1)
            keys = torch.empty(max(k, 1), dtype=torch.int64, device=g.device)
            if k:
                _normalize_kernel[(cdiv(k, 1024),)](keys, idx, flag, k, n, idx.stride(0), WRAP=False, BLOCK=1024,
                                                    num_warps=4)
            keys, perm = torch.sort(keys[:k], stable=True) if k else (keys.fill_(-1), torch.zeros_like(keys))
            ops = [_v3(t.contiguous(), (outer, n, inner))[0] for t in (g, x, out)]
            s3 = _v3(src.contiguous(), (outer, k, inner))[0]
            acc = _acc(g.dtype)
            rows = outer * n
            br, bc = _tiles(inner, rows, 8 if acc == tl.float64 else 4)
            n_cb = cdiv(inner, bc)
            _reduce_bw_kernel[(cdiv(rows, br) * n_cb,)](rx, rs, *ops, s3, keys, perm, rows, n, k, inner, n_cb,
                                                        max(1, (k + 1).bit_length()), n * inner, MODE=mode, SELF=incl,
                                                        ACC=acc, BR=br, BC=bc, num_warps=4)
        for r_, o_ in ((rx, gx), (rs, gs)):
            if r_ is not o_:
                copy_into(o_, r_)
        if k:
            flagged(flag, pref, lambda v: index_error(desc.op, "index", decode_flag(v), n, False))

    return run


def _run(desc, inputs, outputs, ws):
    _bind(desc, None)(desc, inputs, outputs, ws)


register_triton("index_reduce_backward", _run, bind=_bind, workspace=lambda d: 8,
                route="triton:index_reduce_backward:sorted-segments")
