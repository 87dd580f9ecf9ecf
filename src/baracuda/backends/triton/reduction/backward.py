"""Fused backward kernels of the reductions, one kernel (``_bw_kernel``) with a ``MODE`` constexpr:

  EXT     amax_backward          dx = (g / count) * (x == out)   count = ties (NaN matches NaN with nan=True)
  PROD    prod_backward          dx = g * (product of the other elements of the slice), zero-safe
  NANSUM  nansum_backward        dx = g * (x == x)   (mean=True: g / count(non-NaN) * (x == x))
  SELECT  value_select_backward  dx = g where the position is the selected index, else 0

One launch per call.  Where the reduced extent fits one tile (ONE: rows up to 8192 elements, 4096 f64, see
stats.single_tile; short reductions of inner > 1 lanes), the tile is loaded once and both the statistics and dx
come from the registers: x read once + dx written once, g/out 1/R of that (the floor; amax backward of bf16
[16384, 4096] was 2 reads + 1 write, 0.111 ms = 0.75x torch.compile, bench/results/2026-11-27-h100).  Longer
reductions: pass 1 (EXT, PROD, NANSUM with mean) gathers per-output statistics over R into per-lane
accumulators reduced once; pass 2 re-reads x (an L2 hit for rows <= ~64 KB) and writes dx.  NANSUM without mean
and SELECT have no statistics (SELECT's "x" is g with zero strides: a broadcast load, its values unused).
The layout (rows as lanes, the reduced operands made contiguous (outer, inner)) is stats.bw_layout's.
"""
from __future__ import annotations

import triton
import triton.language as tl

from .._lib.register import register_triton
from .._lib.interp import loop
from .stats import bw_layout, rtile, single_tile, tile_warps
from .._lib.launch import fast_kernel
from .._lib.geometry import cdiv

_EXT, _PROD, _NANSUM, _SELECT = 0, 1, 2, 3
_FORCE: dict = {}   # tuning sweeps only (bench/reduce_sweep.py): "tile" -> (BLOCK_R, BLOCK_I), "warps" -> int


@triton.jit
def _mul(a, b):
    return a * b


@triton.jit
def _stats_tile(v, m, ov, cnt, nfl, pl, MODE: tl.constexpr, NAN: tl.constexpr):
    """Pass-1 statistics of one tile, added to the per-lane accumulators (EXT: ties; PROD: zeros, non-finite
    elements, product of the non-zeros; NANSUM: non-NaN elements)."""
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
    return cnt, nfl, pl


@triton.jit
def _dx_tile(dx_ptr, o, r, i, m, v, ov, gv, q, zc, nf, p, sdo, sdr, sdi, MODE: tl.constexpr, NAN: tl.constexpr,
             ACC: tl.constexpr):
    """Pass 2: dx of one tile from its values v (unused by SELECT) and the lanes' statistics."""
    if MODE == 3:
        d = tl.where(r[:, None] == ov[None, :], gv[None, :], 0.0)
    elif MODE == 0:
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


@fast_kernel
def _bw_kernel(g_ptr, x_ptr, o_ptr, dx_ptr, inner, R, sxo, sxr, sxi, sdo, sdr, sdi, sgo, sgi, n_iblk,
               MODE: tl.constexpr, NAN: tl.constexpr, MEAN: tl.constexpr, ACC: tl.constexpr, I64: tl.constexpr,
               ONE: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):
    """ONE (R <= BLOCK_R): the reduced extent is one tile, loaded once; its statistics and dx come from the
    registers (1 read of x + 1 write of dx).  Otherwise pass 1 loops over R for the statistics and pass 2 re-reads
    x (from L2 for rows that fit) to write dx."""
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
    STATS: tl.constexpr = MODE == 0 or MODE == 1 or (MODE == 2 and MEAN)
    q = gv
    zc = tl.zeros([BLOCK_I], tl.int32)
    nf = tl.zeros([BLOCK_I], tl.int32)
    p = tl.full([BLOCK_I], 1, ACC)
    cnt = tl.zeros([BLOCK_R, BLOCK_I], tl.int32)    # EXT: ties; PROD: zeros; NANSUM: non-NaN
    nfl = tl.zeros([BLOCK_R, BLOCK_I], tl.int32)    # PROD: non-finite elements (inf, NaN)
    pl = tl.full([BLOCK_R, BLOCK_I], 1, ACC)        # PROD: product of the non-zero elements
    if ONE:
        r, m, v = rtile(x_ptr, o, 0, i, i_ok, R, sxo, sxr, sxi, 1, ACC, I64, BLOCK_R)
        if STATS:
            cnt, nfl, pl = _stats_tile(v, m, ov, cnt, nfl, pl, MODE, NAN)
    elif STATS:
        for start in loop(0, R, BLOCK_R):
            r, m, v = rtile(x_ptr, o, start, i, i_ok, R, sxo, sxr, sxi, 1, ACC, I64, BLOCK_R)
            cnt, nfl, pl = _stats_tile(v, m, ov, cnt, nfl, pl, MODE, NAN)
    if MODE == 1:
        zc = tl.sum(cnt, axis=0)
        nf = tl.sum(nfl, axis=0)
        p = tl.reduce(pl, 0, _mul)
    elif STATS:
        q = gv / tl.sum(cnt, axis=0).to(ACC)    # EXT count 0 (NaN result, nan=False): inf * 0 = NaN, as torch
    if ONE:
        _dx_tile(dx_ptr, o, r, i, m, v, ov, gv, q, zc, nf, p, sdo, sdr, sdi, MODE, NAN, ACC)
    else:
        for start in loop(0, R, BLOCK_R):
            r, m, v = rtile(x_ptr, o, start, i, i_ok, R, sxo, sxr, sxi, 1, ACC, I64, BLOCK_R)
            _dx_tile(dx_ptr, o, r, i, m, v, ov, gv, q, zc, nf, p, sdo, sdr, sdi, MODE, NAN, ACC)


def _bw_launch(mode, g, x, o, dx, shape, dims, nan=False, mean=False):
    import torch

    xs = (x,) if x is not None else ()
    views, (target,), (g, o), (outer, R, inner), xst, sd, sg, (br, bi), i64, finish = bw_layout(
        shape, dims, xs, (dx,), (g, o), single=single_tile(dx.dtype.itemsize))
    xv, (sxo, sxr, sxi) = (views[0], xst[0]) if xs else (g, (0, 0, 0))
    br, bi = _FORCE.get("tile", (br, bi))
    n_iblk = cdiv(inner, bi)
    acc = tl.float64 if dx.dtype == torch.float64 else tl.float32
    _bw_kernel[(outer * n_iblk,)](g, xv, o if o is not None else g, target, inner, R, sxo, sxr, sxi, *sd, *sg, n_iblk,
                                  MODE=mode, NAN=nan, MEAN=mean, ACC=acc, I64=i64, ONE=br >= R, BLOCK_R=br,
                                  BLOCK_I=bi, num_warps=_FORCE.get("warps", tile_warps(br, bi)))
    finish()


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
