"""Triton kernels of the statistical reductions: var/std(/_mean), vector_norm/norm, logsumexp (one kernel,
``_stats_kernel``, parametrised by a constexpr MODE), trace, and the fused backward ops.

Geometry is the reduction family's (imported from ``reduction.py``, unchanged): the input is put in the canonical
form (outer, R, inner) by ``geometry``/``_canon`` (size-1 axes dropped, adjacent axes merged, a permute+contiguous
copy only when the reduced axes form several groups), and ``_blocks`` picks the tile ([rows, R] for inner == 1,
[R, inner] otherwise: 16 KB of input per program, 16-byte accesses along the contiguous axis) and the split of R
into S chunks when there are fewer than ~4 programs per SM.  Split chunks write their partial *states* to the
workspace and a second launch of the same kernel (STAGE 2) combines them in a fixed order: deterministic, no
atomics.

One read of x for every op (bf16 [16384, 4096]: 2 B read per element, 128 MB -> ~40 us at 3.2 TB/s on an H100;
the outputs are 1/R of that).  The per-lane states, combined tile by tile:
  * var/std (MODE 0): (count, mean, M2) of the data shifted by K = the first element of the reduced row (one
    extra scalar load per row, the same K in every chunk of a row): the tile's mean and M2 are two passes over
    the registers, folded in with Chan's formula.  With 1e6 + N(0,1) data in f32 the shifted values are O(1),
    so var keeps ~1e-7 relative accuracy where E[x^2] - E[x]^2 loses every digit (the f32 ulp of 1e12 is 6e4).
  * logsumexp (MODE 1): (max m, s = sum exp(x - c)), c = m, or 0 where m is +-inf: one exp per element; a row
    of -inf gives -inf, a +inf gives +inf (torch's masked max), NaN propagates through s.
  * norms (MODE 2): sum of |x|^p (PK: 0 count, 1 |x|, 2 x^2, 3 pow), or max/min |x| with a NaN count (PK 4/5)
    because the hardware max drops NaN where torch returns it.
  * cosine similarity (MODE 3, used by ops/distance.py): (x.x, y.y, x.y) of two inputs in one pass.
  * NIN=2 with MODE 2 reads two inputs and reduces |x - y + eps| (pairwise_distance), rounding x - y and + eps
    to the input dtype like torch's two ops (a no-op for f32/f64; for halves the inf-norm gradient's
    |diff| == out test then sees the same values the forward reduced).
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from ...._core.dtypes import DType
from ....ops.reduction import keepdim_shape
from ....ops.reduction_stats import MOMENT_OPS, NORM_OPS, count_of
from .._lib.register import register_triton
from .._lib.math import exp as _exp
from .._lib.math import log as _log
from .._lib.math import pow as _pow
from .._lib.math import sqrt as _sqrt
from .._lib.dtypes import ACC_TL as _TL
from .._lib.dtypes import acc_dtype as _acc
from .._lib.interp import INTERPRETING, loop
from .._lib.interp import f64_arg as _scalar
from .._lib.strided import span as _span
from ..elementwise import launch
from .reduce import _blocks, _canon, geometry
from .._lib.launch import fast_kernel
from .._lib.geometry import cdiv, next_power_of_2
from .stats_flat import _chan, _run_flat_moment, flat_moment

VAR, LSE, NORM, COS = 0, 1, 2, 3


@triton.jit
def _safe(m):
    return tl.where((m == float("inf")) | (m == float("-inf")), 0.0, m)


@triton.jit
def _fold(a, b, c, v, w, m, k, pp, eps, AX: tl.constexpr, MODE: tl.constexpr, PK: tl.constexpr,
          NIN: tl.constexpr, ACC: tl.constexpr):
    """Fold one tile of raw elements (v, and w for two-input modes; m = valid lanes) into the states."""
    if MODE == 0:
        if AX == 1:
            d = tl.where(m, v - k[:, None], 0.0)
        else:
            d = tl.where(m, v - k[None, :], 0.0)
        tn = tl.sum(m.to(ACC), AX)
        tm = tl.sum(d, AX) / tl.where(tn > 0, tn, 1.0)
        if AX == 1:
            e = tl.where(m, d - tm[:, None], 0.0)
        else:
            e = tl.where(m, d - tm[None, :], 0.0)
        a, b, c = _chan(a, b, c, tn, tm, tl.sum(e * e, AX))
    elif MODE == 1:
        vv = tl.where(m, v, float("-inf"))
        mn = tl.maximum(a, tl.max(vv, AX))
        cn = _safe(mn)
        if AX == 1:
            t = tl.sum(_exp(vv - cn[:, None]), AX)
        else:
            t = tl.sum(_exp(vv - cn[None, :]), AX)
        b = b * _exp(a - cn) + t
        a = mn
    elif MODE == 2:
        t = tl.abs(v)
        if PK == 0:
            b += tl.sum(tl.where(m & (t != 0), 1.0, 0.0), AX)
        elif PK == 1:
            b += tl.sum(tl.where(m, t, 0.0), AX)
        elif PK == 2:
            b += tl.sum(tl.where(m, t * t, 0.0), AX)
        elif PK == 3:
            b += tl.sum(tl.where(m, _pow(t, pp), 0.0), AX)
        else:
            nan = m & (t != t)
            c += tl.sum(nan.to(ACC), AX)
            if PK == 4:
                b = tl.maximum(b, tl.max(tl.where(m & ~nan, t, float("-inf")), AX))
            else:
                b = tl.minimum(b, tl.min(tl.where(m & ~nan, t, float("inf")), AX))
    else:
        a += tl.sum(v * v, AX)
        b += tl.sum(w * w, AX)
        c += tl.sum(v * w, AX)
    return a, b, c


@triton.jit
def _fold_partial(a, b, c, ta, tb, tc, m, AX: tl.constexpr, MODE: tl.constexpr, PK: tl.constexpr):
    """Fold one tile of partial states (stage 2; masked lanes hold each mode's neutral state)."""
    if MODE == 0:
        tn = tl.sum(ta, AX)
        tm = tl.sum(ta * tb, AX) / tl.where(tn > 0, tn, 1.0)
        if AX == 1:
            e = tl.where(m, tb - tm[:, None], 0.0)
        else:
            e = tl.where(m, tb - tm[None, :], 0.0)
        a, b, c = _chan(a, b, c, tn, tm, tl.sum(tc, AX) + tl.sum(ta * e * e, AX))
    elif MODE == 1:
        mn = tl.maximum(a, tl.max(ta, AX))
        cn = _safe(mn)
        if AX == 1:
            t = tl.sum(tb * _exp(ta - cn[:, None]), AX)
        else:
            t = tl.sum(tb * _exp(ta - cn[None, :]), AX)
        b = b * _exp(a - cn) + t
        a = mn
    elif MODE == 2:
        if PK == 4:
            b = tl.maximum(b, tl.max(tb, AX))
        elif PK == 5:
            b = tl.minimum(b, tl.min(tb, AX))
        else:
            b += tl.sum(tb, AX)
        c += tl.sum(tc, AX)
    else:
        a += tl.sum(ta, AX)
        b += tl.sum(tb, AX)
        c += tl.sum(tc, AX)
    return a, b, c


@fast_kernel
def _stats_kernel(x_ptr, y_ptr, pa_ptr, pb_ptr, pc_ptr, o0_ptr, o1_ptr, o2_ptr,
                  n_lanes, inner, n_iblk, R, chunk, S, sxo, sxi, tso, tsr, tsi, syo, syr, syi,
                  p: tl.float64, corr: tl.float64, eps: tl.float64,
                  MODE: tl.constexpr, PK: tl.constexpr, SQRT: tl.constexpr, STAGE: tl.constexpr,
                  NIN: tl.constexpr, WRITE1: tl.constexpr, AX: tl.constexpr, ACC: tl.constexpr,
                  I64: tl.constexpr, INTERP: tl.constexpr, B0: tl.constexpr, B1: tl.constexpr,
                  LANES: tl.constexpr, STEP: tl.constexpr):
    """STAGE 0: x -> results; 1: x -> partial states (o0, o1, o2) of chunk s; 2: partial states (pa, pb, pc,
    laid out (outer, S, inner) with strides tso/tsr/tsi) -> results.  AX == 1: lanes are rows (inner == 1), the
    tile is [B0 rows, B1 of R]; AX == 0: lanes are B1 inner positions of outer index o, the tile [B0 of R, B1].
    LANES / STEP: the lane count (B0 or B1) and the R-step (B1 or B0)."""
    pid = tl.program_id(0)
    s = tl.program_id(1)
    pp = _scalar(p, ACC, INTERP)
    ee = _scalar(eps, ACC, INTERP)
    if AX == 1:
        o = pid * B0 + tl.arange(0, B0)
        ok = o < n_lanes
        i = o * 0
    else:
        i = (pid % n_iblk) * B1 + tl.arange(0, B1)
        ok = i < inner
        o = pid // n_iblk + i * 0
    rr = tl.arange(0, STEP)
    if I64:
        o = o.to(tl.int64)
        i = i.to(tl.int64)
    xbase = o * sxo + i * sxi                      # x at r = 0: the shift K of the var modes
    k = tl.zeros([LANES], ACC)
    if MODE == 0:
        k = tl.load(x_ptr + xbase, mask=ok & (R > 0), other=0).to(ACC)
    a = tl.zeros([LANES], ACC)
    b = tl.zeros([LANES], ACC)
    c = tl.zeros([LANES], ACC)
    if MODE == 1:
        a = a - float("inf")
    if MODE == 2:
        if PK == 4:
            b = b - float("inf")
        if PK == 5:
            b = b + float("inf")
    if STAGE == 2:
        tbase = o * tso + i * tsi
        n_r = S
        r0 = s * 0
    else:
        tbase = xbase
        n_r = chunk
        r0 = s * chunk
    if I64:
        r0 = r0.to(tl.int64)
    for start in loop(0, n_r, STEP):
        r = r0 + start + rr
        if STAGE == 2:
            rok = r < S
        else:
            rok = r < R
        if AX == 1:
            m = ok[:, None] & rok[None, :]
            off = tbase[:, None] + r[None, :] * tsr
        else:
            m = rok[:, None] & ok[None, :]
            off = tbase[None, :] + r[:, None] * tsr
        if STAGE == 2:
            na = 0.0
            if MODE == 1:
                na = float("-inf")
            nb = 0.0
            if MODE == 2:
                if PK == 4:
                    nb = float("-inf")
                if PK == 5:
                    nb = float("inf")
            ta = tl.load(pa_ptr + off, mask=m, other=na)
            tb = tl.load(pb_ptr + off, mask=m, other=nb)
            tc = tl.load(pc_ptr + off, mask=m, other=0.0)
            a, b, c = _fold_partial(a, b, c, ta, tb, tc, m, AX, MODE, PK)
        else:
            v = tl.load(x_ptr + off, mask=m, other=0).to(ACC)
            w = v
            if NIN == 2:
                if AX == 1:
                    offy = o[:, None] * syo + r[None, :] * syr
                else:
                    offy = o[None, :] * syo + r[:, None] * syr + i[None, :] * syi
                w = tl.load(y_ptr + offy, mask=m, other=0).to(ACC)
                if MODE == 2:   # pairwise_distance: x - y + eps rounded per step to the dtype, as torch's ops
                    v = ((v - w).to(x_ptr.dtype.element_ty).to(ACC) + ee).to(x_ptr.dtype.element_ty).to(ACC)
            a, b, c = _fold(a, b, c, v, w, m, k, pp, ee, AX, MODE, PK, NIN, ACC)
    if STAGE == 1:
        dst = (o * S + s) * inner + i
        tl.store(o0_ptr + dst, a, mask=ok)
        tl.store(o1_ptr + dst, b, mask=ok)
        tl.store(o2_ptr + dst, c, mask=ok)
    else:
        dst = o * inner + i
        if MODE == 0:
            r = c / tl.maximum(a - _scalar(corr, ACC, INTERP), 0.0)
            if SQRT:
                r = _sqrt(r)
            if WRITE1:
                mean = tl.where(a > 0, k + b, float("nan"))
                tl.store(o1_ptr + dst, mean.to(o1_ptr.dtype.element_ty), mask=ok)
        elif MODE == 1:
            r = _safe(a) + _log(b)
        elif MODE == 2:
            if PK == 2:
                r = _sqrt(b)
            elif PK == 3:
                r = _pow(b, 1.0 / pp)
            elif PK >= 4:
                r = tl.where(c > 0, float("nan"), b)
            else:
                r = b
        else:
            r = c / (tl.maximum(_sqrt(a), ee) * tl.maximum(_sqrt(b), ee))
        tl.store(o0_ptr + dst, r.to(o0_ptr.dtype.element_ty), mask=ok)


# -- host side: one reduction over canonical geometry, split or not --------------------------------------
def plan_geometry(shape, dims, itemsize):
    outer, R, inner, perm = geometry(shape, dims)
    kind, b0, b1, _, S, chunk = _blocks(outer, R, inner, itemsize)
    return (outer, R, inner, perm), (kind, b0, b1, S, chunk)


def stats_workspace(shape, dims, itemsize, acc: DType) -> int:
    (outer, R, inner, _), (_, _, _, S, _) = plan_geometry(shape, dims, itemsize)
    if S == 1 or outer * inner == 0:
        return 0
    return 3 * ((outer * S * inner * acc.itemsize + 15) // 16 * 16)


def stage2_tile(outer, S, inner):
    """Stage 2 reads 3 partial arrays of S x inner per outer index (S <= R / 128): 1024-element tiles on 4 warps
    keep 8 values per thread per array (the 8192-wide stage-1 tiles would need ~170 registers here)."""
    if inner == 1:
        b1 = min(next_power_of_2(S), 1024)
        return True, max(1, min(1024 // b1, next_power_of_2(outer))), b1
    b1 = min(next_power_of_2(inner), 128)
    return False, max(1, min(1024 // b1, next_power_of_2(S))), b1


def _tile(row, b0, b1):
    return dict(AX=1 if row else 0, B0=b0, B1=b1, LANES=b0 if row else b1, STEP=b1 if row else b0)


def run_stats(x, y, outs, dims, shape, ws, mode, pk=0, sqrt=False, p=2.0, corr=0.0, eps=0.0, acc=DType.f32):
    """Reduce ``x`` (and ``y``, same shape) over ``dims`` into ``outs`` (1 or 2 tensors of the reduced shape)."""
    (outer, R, inner, _), (kind, b0, b1, S, chunk) = plan_geometry(shape, dims, x.element_size())
    if outer * inner == 0:
        return
    xv, _, (sxo, sxr, sxi) = _canon(x, dims, shape)
    yv, sy = (xv, (0, 0, 0))
    if y is not None:
        yv, _, sy = _canon(y, dims, shape)
    targets = [o if o.is_contiguous() else torch.empty(o.shape, dtype=o.dtype, device=o.device) for o in outs]
    o0, o1 = targets[0], targets[-1]
    i64 = max(_span(xv), _span(yv), outer * S * inner) >= 2 ** 31 - 65536
    row = kind == "row"
    n_iblk = 1 if row else cdiv(inner, b1)
    grid0 = cdiv(outer, b0) if row else outer * n_iblk
    warps = 8 if b0 * b1 * x.element_size() >= 8192 else 4
    common = dict(MODE=mode, PK=pk, SQRT=sqrt, NIN=2 if y is not None else 1, WRITE1=len(outs) > 1,
                  ACC=_TL[acc], I64=i64, INTERP=INTERPRETING, num_warps=warps)
    lanes = outer if row else inner
    if S == 1:
        _stats_kernel[(grid0, 1)](xv, yv, xv, xv, xv, o0, o1, o0, lanes, inner, n_iblk, R, chunk, 1, sxo, sxi,
                                  sxo, sxr, sxi, *sy, float(p), float(corr), float(eps), STAGE=0,
                                  **_tile(row, b0, b1), **common)
    else:
        n = outer * S * inner
        step = (n * acc.itemsize + 15) // 16 * 16
        parts = [ws[j * step: j * step + n * acc.itemsize].view(acc.torch) for j in range(3)]
        _stats_kernel[(grid0, S)](xv, yv, xv, xv, xv, *parts, lanes, inner, n_iblk, R, chunk, S, sxo, sxi,
                                  sxo, sxr, sxi, *sy, float(p), float(corr), float(eps), STAGE=1,
                                  **_tile(row, b0, b1), **common)
        row2, c0, c1 = stage2_tile(outer, S, inner)
        nib2 = 1 if row2 else cdiv(inner, c1)
        g2 = cdiv(outer, c0) if row2 else outer * nib2
        common.update(num_warps=4)
        _stats_kernel[(g2, 1)](xv, yv, *parts, o0, o1, o0, outer if row2 else inner, inner, nib2, R, S, S, sxo, sxi,
                               S * inner, inner, 1, *sy, float(p), float(corr), float(eps), STAGE=2,
                               **_tile(row2, c0, c1), **common)
    for o, t in zip(outs, targets):
        if t is not o:
            o.copy_(t)


PNORM_KIND = {0.0: 0, 1.0: 1, 2.0: 2, math.inf: 4, -math.inf: 5}


def _run_moment(desc, inputs, outputs, ws):
    x = inputs[0]
    fl = flat_moment(desc)
    if fl is not None and x.is_contiguous():
        _run_flat_moment(fl, desc, x, outputs, ws)
        return
    run_stats(x, None, outputs, desc.attr("dims"), desc.inputs[0].shape, ws, VAR, sqrt=desc.op.startswith("std"),
              corr=desc.attr("correction"), acc=_acc(desc.dtype))


def _run_norm(desc, inputs, outputs, ws):
    o = desc.attr("ord")
    run_stats(inputs[0], None, outputs, desc.attr("dims"), desc.inputs[0].shape, ws, NORM, pk=PNORM_KIND.get(o, 3), p=o,
              acc=_acc(desc.dtype, desc.outputs[0].dtype))


def _run_lse(desc, inputs, outputs, ws):
    run_stats(inputs[0], None, outputs, desc.attr("dims"), desc.inputs[0].shape, ws, LSE, acc=_acc(desc.dtype))


def _ws(desc):
    need = stats_workspace(desc.inputs[0].shape, desc.attr("dims"), desc.inputs[0].dtype.itemsize,
                           _acc(desc.dtype, desc.outputs[0].dtype))
    fl = flat_moment(desc) if desc.op in MOMENT_OPS else None
    if fl is not None and (fl[0] == "cols" or fl[0] == "wide" and fl[3] > 1):  # two f32 [C, S] partials
        n = fl[3] * geometry(desc.inputs[0].shape, desc.attr("dims"))[2] * 4
        need = max(need, (n + 15) // 16 * 16 + n)
    return need


def _route(desc, pref):
    fl = flat_moment(desc) if desc.op in MOMENT_OPS else None
    if fl is not None:
        return {"cols": "triton:stats_flatcol_split%d", "wide": "triton:stats_widecol_split%d"}.get(
            fl[0], "triton:stats_flatrow%d") % fl[3 if fl[0] != "rows" else 1]
    (_, _, _, perm), (kind, _, _, S, _) = plan_geometry(desc.inputs[0].shape, desc.attr("dims"),
                                                        desc.inputs[0].dtype.itemsize)
    return f"triton:stats_{kind}" + (f"_split{S}" if S > 1 else "") + ("+permute" if perm else "")


# -- var/std backward: the mean recomputed (shifted sum), then the write ----------------------------------------
@triton.jit
def rtile(x_ptr, o, start, i, i_ok, R, sxo, sxr, sxi, other, ACC: tl.constexpr, I64: tl.constexpr,
          BLOCK_R: tl.constexpr):
    """The [BLOCK_R, BLOCK_I] tile of reduced positions [start, start + BLOCK_R) of lanes i (see bw_layout), in
    the accumulation dtype (``other`` where masked): (r, mask, values)."""
    r = start + tl.arange(0, BLOCK_R)
    if I64:
        r = r.to(tl.int64)
    m = (r < R)[:, None] & i_ok[None, :]
    v = tl.load(x_ptr + o * sxo + r[:, None] * sxr + i[None, :] * sxi, mask=m, other=other).to(ACC)
    return r, m, v


@triton.jit
def _var_dx(dx_ptr, o, r, i, m, v, k, ms, g, add, sdo, sdr, sdi):
    d = g[None, :] * ((v - k[None, :]) - ms[None, :]) + add[None, :]
    tl.store(dx_ptr + o * sdo + r[:, None] * sdr + i[None, :] * sdi, d.to(dx_ptr.dtype.element_ty), mask=m)


@fast_kernel
def _var_bw_kernel(g_ptr, x_ptr, o_ptr, gm_ptr, dx_ptr, inner, R, sxo, sxr, sxi, sdo, sdr, sdi, sgo, sgi, n_iblk,
                   scale: tl.float64, inv_n: tl.float64, STD: tl.constexpr, GM: tl.constexpr, ACC: tl.constexpr,
                   I64: tl.constexpr, INTERP: tl.constexpr, ONE: tl.constexpr, BLOCK_R: tl.constexpr,
                   BLOCK_I: tl.constexpr):
    """dx = g' * scale * (x - mean) [+ gm / N]; g' = g, or g / (2 std) (0 where std == 0) for std.  Tile
    [BLOCK_R, BLOCK_I]: R on axis 0, independent lanes (rows or inner positions) on axis 1.  The mean is the sum
    of x - K (K = x[r=0], so large means cancel exactly) / N.  ONE (R <= BLOCK_R: the whole reduced extent is one
    tile, rows up to 8192 elements): the tile is loaded once, summed and written from the registers, 1 read +
    1 write of x's size (the floor); otherwise a summing pass, then a second read (an L2 hit for rows that fit)
    that writes: 2 reads + 1 write."""
    pid = tl.program_id(0)
    o = pid // n_iblk
    if I64:
        o = o.to(tl.int64)
    i = (pid % n_iblk) * BLOCK_I + tl.arange(0, BLOCK_I)
    i_ok = i < inner
    sc = _scalar(scale, ACC, INTERP)
    k = tl.load(x_ptr + o * sxo + i * sxi, mask=i_ok & (R > 0), other=0).to(ACC)
    g = tl.load(g_ptr + o * sgo + i * sgi, mask=i_ok, other=0).to(ACC)
    if STD:
        sd = tl.load(o_ptr + o * sgo + i * sgi, mask=i_ok, other=1).to(ACC)
        g = tl.where(sd == 0, 0.0, g / (2.0 * sd))
    g = g * sc
    add = tl.zeros([BLOCK_I], ACC)
    if GM:
        add = tl.load(gm_ptr + o * sgo + i * sgi, mask=i_ok, other=0).to(ACC) * _scalar(inv_n, ACC, INTERP)
    if ONE:
        r, m, v = rtile(x_ptr, o, 0, i, i_ok, R, sxo, sxr, sxi, 0, ACC, I64, BLOCK_R)
        ms = tl.sum(tl.where(m, v - k[None, :], 0.0), axis=0) * _scalar(inv_n, ACC, INTERP)
        _var_dx(dx_ptr, o, r, i, m, v, k, ms, g, add, sdo, sdr, sdi)
    else:
        acc = tl.zeros([BLOCK_I], ACC)
        for start in loop(0, R, BLOCK_R):
            r, m, v = rtile(x_ptr, o, start, i, i_ok, R, sxo, sxr, sxi, 0, ACC, I64, BLOCK_R)
            acc += tl.sum(tl.where(m, v - k[None, :], 0.0), axis=0)
        ms = acc * _scalar(inv_n, ACC, INTERP)
        for start in loop(0, R, BLOCK_R):
            r, m, v = rtile(x_ptr, o, start, i, i_ok, R, sxo, sxr, sxi, 0, ACC, I64, BLOCK_R)
            _var_dx(dx_ptr, o, r, i, m, v, k, ms, g, add, sdo, sdr, sdi)


def single_tile(itemsize: int) -> int:
    """The longest reduced extent a (reduce, then write) backward keeps in one tile, read once: 8192 elements of
    up to 4 bytes (16 warps: 16 values a thread), 4096 f64."""
    return 4096 if itemsize > 4 else 8192


def tile_warps(br: int, bi: int) -> int:
    return 16 if br * bi >= 8192 else 8 if br * bi >= 2048 else 4


def bw_layout(shape, dims, xs, dxs, reduced, single: int = 0):
    """Canonical layout for a (reduce, then write) backward kernel: the views of ``xs`` (same shape) and their
    strides, the output targets for ``dxs``, the reduced operands as contiguous (outer, inner), and the launch
    tile.  Rows (inner == 1) become the lanes of the tile's second axis with R contiguous along the first (as
    amax_backward does); ``single``: rows up to that many elements take one tile (BLOCK_R >= R: the kernel reads
    x once), longer ones tiles of 1024.  Returns (xviews, targets, reduced, (outer, R, inner), [x strides], out strides,
    reduced strides, (BLOCK_R, BLOCK_I), i64, finish); call finish() after the launch."""
    outer, R, inner, perm = geometry(shape, dims)
    kshape = keepdim_shape(shape, dims)
    red = [None if t is None else (t.reshape(kshape).permute(perm).contiguous() if perm else t.contiguous())
           for t in reduced]
    views, xst = [], []
    for x in xs:
        xv, _, st = _canon(x, dims, shape)
        views.append(xv)
        xst.append(list(st))
    tshape = tuple(shape[a] for a in perm) if perm else shape
    targets = [dx if (perm is None and dx.is_contiguous()) else torch.empty(tshape, dtype=dx.dtype, device=dx.device)
               for dx in dxs]
    sd, sg = [R * inner, inner, 1], [inner, 1]
    lanes = inner
    if inner == 1:   # rows -> lanes: (outer, R, 1) is read as (1, R, outer)
        lanes = outer
        for st in xst:
            st[0], st[2] = 0, st[0]
        sd, sg = [0, 1, R], [0, 1]
        outer = 1
        br = min(next_power_of_2(max(R, 1)), max(1024, next_power_of_2(single) if R <= single else 0))
        bi = max(1, min(4096 // br, next_power_of_2(max(lanes, 1))))
    else:
        # columns: narrower lane blocks until there are ~2 programs per SM (a [16384, 4096] reduction over dim 0
        # would otherwise run 32 programs of 128 columns); 16 columns still fill whole 32 B sectors for 2 B types
        bi = min(next_power_of_2(inner), 128)
        while bi > 16 and outer * cdiv(inner, bi) < 264:
            bi //= 2
        br = max(1, min(4096 // bi, next_power_of_2(max(R, 1))))
    i64 = max([_span(v) for v in views] + [outer * R * lanes]) >= 2 ** 31 - 65536

    def finish():
        for dx, t in zip(dxs, targets):
            if t is not dx:
                dx.copy_(t.permute([perm.index(a) for a in range(len(perm))]) if perm else t)
    return views, targets, red, (outer, R, lanes), xst, tuple(sd), tuple(sg), (br, bi), i64, finish


def _run_var_bw(desc, inputs, outputs, ws):
    g, x, out = inputs[:3]
    gm = inputs[3] if len(inputs) == 4 else None
    shape, dims = desc.inputs[1].shape, desc.attr("dims")
    n = count_of(shape, dims)
    if math.prod(shape) == 0:
        return
    (xv,), (target,), (g, out, gm), (outer, R, inner), (sx,), sd, sg, (br, bi), i64, finish = bw_layout(
        shape, dims, (x,), (outputs[0],), (g, out, gm), single=single_tile(desc.dtype.itemsize))
    n_iblk = cdiv(inner, bi)
    dof = n - desc.attr("correction")
    scale = 2.0 / dof if dof != 0 else math.inf    # torch: 2 / (N - correction), unclamped
    _var_bw_kernel[(outer * n_iblk,)](g, xv, out, gm if gm is not None else g, target, inner, R, *sx, *sd, *sg,
                                      n_iblk, scale, 1.0 / n, STD=desc.attr("std"), GM=gm is not None,
                                      ACC=_TL[_acc(desc.dtype)], I64=i64, INTERP=INTERPRETING, ONE=br >= R,
                                      BLOCK_R=br, BLOCK_I=bi, num_warps=tile_warps(br, bi))
    finish()


# -- elementwise backward bodies (the elementwise template: grad and out broadcast from the reduced shape) --
@triton.jit
def _lse_bw(g, x, o, p0, p1):
    return g * _exp(x - o)


@triton.jit
def _sgn(x):
    return tl.where(x > 0, 1.0, tl.where(x < 0, -1.0, 0.0)).to(x.dtype)


@triton.jit
def _nbw_zero(g, x, n, p, p1):
    return tl.zeros_like(x)


@triton.jit
def _nbw_l1(g, x, n, p, p1):
    return _sgn(x) * g


@triton.jit
def _nbw_l2(g, x, n, p, p1):
    return g * tl.where(n == 0, 0.0, x / n)


@triton.jit
def _nbw_lt1(g, x, n, p, p1):
    # torch: sgn(x) * |x|^(p-1) (0 where x == 0) * g * n^(1-p)
    return _sgn(x) * tl.where(x == 0, 0.0, _pow(tl.abs(x), p - 1.0)) * g * _pow(n, 1.0 - p)


@triton.jit
def _nbw_lt2(g, x, n, p, p1):
    return _sgn(x) * _pow(tl.abs(x), p - 1.0) * tl.where(n == 0, 0.0, g / _pow(n, p - 1.0))


@triton.jit
def _nbw_ge2(g, x, n, p, p1):
    return x * _pow(tl.abs(x), p - 2.0) * tl.where(n == 0, 0.0, g / _pow(n, p - 1.0))


def _norm_body(p):
    return {0.0: _nbw_zero, 1.0: _nbw_l1, 2.0: _nbw_l2}.get(p) or (_nbw_lt1 if p < 1 else _nbw_lt2 if p < 2
                                                                   else _nbw_ge2)


def _run_ew_bw(body_of):
    def run(desc, inputs, outputs, ws):
        g, x, out = inputs
        ks = keepdim_shape(desc.inputs[1].shape, desc.attr("dims"))
        f64 = DType.f64 in (desc.inputs[0].dtype, desc.inputs[1].dtype)
        p = desc.attr_dict.get("ord", 0.0)
        launch(body_of(p), [g.reshape(ks), x, out.reshape(ks)], outputs[0], p,
               compute=tl.float64 if f64 else tl.float32)
    return run


# -- trace: one program walks the diagonal (stride s0 + s1); backward writes g on the diagonal ------------
@fast_kernel
def _trace_kernel(x_ptr, o_ptr, n, sd, ACC: tl.constexpr, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], ACC)
    for start in loop(0, n, BLOCK):
        i = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + i.to(tl.int64) * sd, mask=i < n, other=0).to(ACC)
    tl.store(o_ptr, tl.sum(acc, 0).to(o_ptr.dtype.element_ty))


@fast_kernel
def _trace_bw_kernel(g_ptr, o_ptr, total, cols, BLOCK: tl.constexpr):
    idx = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    g = tl.load(g_ptr)
    v = tl.where(idx // cols == idx % cols, g, 0.0)
    tl.store(o_ptr + idx, v.to(o_ptr.dtype.element_ty), mask=idx < total)


def _run_trace(desc, inputs, outputs, ws):
    x = inputs[0]
    n = min(x.shape)
    acc = _TL[_acc(desc.dtype)] if desc.dtype.is_floating else tl.int64     # integers: int64, wrapping (torch)
    _trace_kernel[(1,)](x, outputs[0], n, x.stride(0) + x.stride(1), ACC=acc,
                        BLOCK=min(1024, next_power_of_2(max(n, 1))))


def _run_trace_bw(desc, inputs, outputs, ws):
    out = outputs[0]
    target = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
    total = target.numel()
    if total:
        _trace_bw_kernel[(cdiv(total, 4096),)](inputs[0], target, total, target.shape[1], BLOCK=4096)
    if target is not out:
        out.copy_(target)


for _op in MOMENT_OPS:
    register_triton(_op, _run_moment, route=_route, workspace=_ws)
for _op in NORM_OPS:
    register_triton(_op, _run_norm, route=_route, workspace=_ws)
register_triton("logsumexp", _run_lse, route=_route, workspace=_ws)
register_triton("var_backward", _run_var_bw, route="triton:var_backward")
register_triton("vector_norm_backward", _run_ew_bw(_norm_body), route="triton:ew_template(norm_backward)")
register_triton("logsumexp_backward", _run_ew_bw(lambda p: _lse_bw), route="triton:ew_template(logsumexp_backward)")
register_triton("trace", _run_trace, route="triton:trace")
register_triton("trace_backward", _run_trace_bw, route="triton:trace_backward")
