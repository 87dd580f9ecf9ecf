"""Fused backward kernels of the reductions, one kernel (``_bw_kernel``) with a ``MODE`` constexpr:

  EXT     amax_backward          dx = (g / count) * (x == out)   count = ties (NaN matches NaN with nan=True)
  PROD    prod_backward          dx = g * (product of the other elements of the slice), zero-safe
  NANSUM  nansum_backward        dx = g * (x == x)   (mean=True: g / count(non-NaN) * (x == x))
  SELECT  value_select_backward  dx = g where the position is the selected index, else 0

Pass 1 (EXT, PROD, NANSUM with mean) gathers per-output statistics over R into per-lane accumulators
reduced once (the tile's reduction over R stays inside a thread for inner > 1); pass 2 writes dx.  Bytes:
x read twice (the re-read of a row block hits L2 for rows <= ~64 KB) + dx written once, g/out 1/R of that:
~3 x 2 B per element for bf16, bandwidth-bound.  NANSUM without mean and SELECT are single-pass.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ....ops.reduction import keepdim_shape
from .._lib.register import register_triton
from .._lib.interp import loop
from .._lib.strided import span as _span
from .reduce import _canon, _np2, geometry
from .._lib.launch import fast_kernel
from .._lib.geometry import cdiv

_EXT, _PROD, _NANSUM, _SELECT = 0, 1, 2, 3


@triton.jit
def _mul(a, b):
    return a * b


@fast_kernel
def _bw_kernel(g_ptr, x_ptr, o_ptr, dx_ptr, inner, R, sxo, sxr, sxi, sdo, sdr, sdi, sgo, sgi, n_iblk,
               MODE: tl.constexpr, NAN: tl.constexpr, MEAN: tl.constexpr, ACC: tl.constexpr, I64: tl.constexpr,
               BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):
    pid = tl.program_id(0)
    o = pid // n_iblk
    if I64:
        o = o.to(tl.int64)
    i = (pid % n_iblk) * BLOCK_I + tl.arange(0, BLOCK_I)
    i_ok = i < inner
    gv = tl.load(g_ptr + o * sgo + i * sgi, mask=i_ok, other=0).to(ACC)
    if MODE == 0:
        ov = tl.load(o_ptr + o * sgo + i * sgi, mask=i_ok, other=0).to(ACC)
    elif MODE == 3:
        ov = tl.load(o_ptr + o * sgo + i * sgi, mask=i_ok, other=-1)      # the selected indices (i64)
    else:
        ov = gv
    rr = tl.arange(0, BLOCK_R)
    # pass 1: per-output statistics
    q = gv
    zc = tl.zeros([BLOCK_I], tl.int32)
    nf = tl.zeros([BLOCK_I], tl.int32)
    p = tl.full([BLOCK_I], 1, ACC)
    if MODE == 0 or MODE == 1 or (MODE == 2 and MEAN):
        cnt = tl.zeros([BLOCK_R, BLOCK_I], tl.int32)    # EXT: ties; PROD: zeros; NANSUM: non-NaN
        nfl = tl.zeros([BLOCK_R, BLOCK_I], tl.int32)    # PROD: non-finite elements (inf, NaN)
        pl = tl.full([BLOCK_R, BLOCK_I], 1, ACC)        # PROD: product of the non-zero elements
        for start in loop(0, R, BLOCK_R):
            r = start + rr
            if I64:
                r = r.to(tl.int64)
            m = (r < R)[:, None] & i_ok[None, :]
            v = tl.load(x_ptr + o * sxo + r[:, None] * sxr + i[None, :] * sxi, mask=m, other=1).to(ACC)
            if MODE == 0:
                eq = v == ov[None, :]
                if NAN:
                    eq = eq | ((v != v) & (ov != ov)[None, :])
                cnt += (m & eq).to(tl.int32)
            elif MODE == 1:
                z = v == 0
                cnt += (m & z).to(tl.int32)
                nfl += (m & ~(tl.abs(v) < float("inf"))).to(tl.int32)
                pl = pl * tl.where(z, 1, v)
            else:
                cnt += (m & (v == v)).to(tl.int32)
        if MODE == 1:
            zc = tl.sum(cnt, axis=0)
            nf = tl.sum(nfl, axis=0)
            p = tl.reduce(pl, 0, _mul)
        else:
            q = gv / tl.sum(cnt, axis=0).to(ACC)    # EXT count 0 (NaN result, nan=False): inf * 0 = NaN, as torch
    # pass 2: dx
    for start in loop(0, R, BLOCK_R):
        r = start + rr
        if I64:
            r = r.to(tl.int64)
        m = (r < R)[:, None] & i_ok[None, :]
        if MODE == 3:
            d = tl.where(r[:, None] == ov[None, :], gv[None, :], 0.0)
        else:
            v = tl.load(x_ptr + o * sxo + r[:, None] * sxr + i[None, :] * sxi, mask=m, other=1).to(ACC)
            if MODE == 0:
                eq = v == ov[None, :]
                if NAN:
                    eq = eq | ((v != v) & (ov != ov)[None, :])
                d = q[None, :] * eq.to(ACC)
            elif MODE == 1:
                # the exclusive product: no zero in the slice -> p / v; one zero -> p (of the non-zeros) at the
                # zero, 0 elsewhere; two or more -> 0.  A 0 turns into NaN where the other elements hold an
                # inf/NaN (0 * inf), as the left/right cumulative products torch multiplies would.
                nf_here = (~(tl.abs(v) < float("inf"))).to(tl.int32)
                zero = tl.where((nf[None, :] - nf_here) > 0, float("nan"), 0.0)
                at_zero = (zc[None, :] == 1) & (v == 0)
                excl = tl.where(zc[None, :] == 0, p[None, :] / v, tl.where(at_zero, p[None, :], zero))
                d = gv[None, :] * excl
            else:
                d = q[None, :] * (v == v).to(ACC)   # a product, as torch: all-NaN nanmean slices get NaN
        tl.store(dx_ptr + o * sdo + r[:, None] * sdr + i[None, :] * sdi, d.to(dx_ptr.dtype.element_ty), mask=m)


def _bw_launch(mode, g, x, o, dx, shape, dims, nan=False, mean=False):
    import torch

    outer, R, inner, perm = geometry(shape, dims)
    kshape = keepdim_shape(shape, dims)

    def small(t):   # g / out / indices are 1/R the size of x: made contiguous (outer, inner) at negligible cost
        t = t.reshape(kshape)
        return t.permute(perm).contiguous() if perm else t.contiguous()

    g = small(g)
    o = small(o) if o is not None else g
    if x is not None:
        xv, _, (sxo, sxr, sxi) = _canon(x, dims, shape)
    else:
        xv, sxo, sxr, sxi = g, 0, 0, 0
    tshape = tuple(shape[a] for a in perm) if perm else tuple(shape)
    target = dx if (perm is None and dx.is_contiguous()) else torch.empty(tshape, dtype=dx.dtype, device=dx.device)
    sdo, sdr, sdi, sgo, sgi = R * inner, inner, 1, inner, 1
    if inner == 1:
        # rows: map the rows onto the tile's second axis (outer' = 1, inner' = outer), R stays contiguous
        inner, outer, sxi, sxo, sdi, sdo, sgi, sgo = outer, 1, sxo, 0, R, 0, 1, 0
        br = min(_np2(R), 1024)
        bi = max(1, min(4096 // br, _np2(inner)))
    else:
        bi = min(_np2(inner), 128)
        br = max(1, min(4096 // bi, _np2(R)))
    n_iblk = cdiv(inner, bi)
    acc = tl.float64 if dx.dtype == torch.float64 else tl.float32
    i64 = max(_span(xv), outer * R * inner) >= 2 ** 31 - 65536
    _bw_kernel[(outer * n_iblk,)](g, xv, o, target, inner, R, sxo, sxr, sxi, sdo, sdr, sdi, sgo, sgi, n_iblk,
                                  MODE=mode, NAN=nan, MEAN=mean, ACC=acc, I64=i64, BLOCK_R=br, BLOCK_I=bi,
                                  num_warps=8 if br * bi >= 2048 else 4)
    if target is not dx:
        dx.copy_(target.permute([perm.index(a) for a in range(len(perm))]) if perm else target)


def _run_ext_bw(desc, inputs, outputs, ws):
    g, x, ov = inputs
    _bw_launch(_EXT, g, x, ov, outputs[0], desc.inputs[1].shape, desc.attr("dims"), nan=desc.attr("nan"))


def _run_prod_bw(desc, inputs, outputs, ws):
    g, x = inputs
    _bw_launch(_PROD, g, x, None, outputs[0], desc.inputs[1].shape, desc.attr("dims"))


def _run_nansum_bw(desc, inputs, outputs, ws):
    g, x = inputs
    _bw_launch(_NANSUM, g, x, None, outputs[0], desc.inputs[1].shape, desc.attr("dims"), mean=desc.attr("mean"))


def _run_select_bw(desc, inputs, outputs, ws):
    g, idx = inputs
    shape = desc.attr("shape")
    _bw_launch(_SELECT, g, None, idx, outputs[0], shape, (desc.attr("dim"),) if shape else ())


register_triton("amax_backward", _run_ext_bw, route="triton:reduce_backward(ext)")
register_triton("prod_backward", _run_prod_bw, route="triton:reduce_backward(prod)")
register_triton("nansum_backward", _run_nansum_bw, route="triton:reduce_backward(nansum)")
register_triton("value_select_backward", _run_select_bw, route="triton:reduce_backward(select)")
