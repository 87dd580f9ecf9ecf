"""roi_align / roi_pool forward and backward (ops/image_roi.py) on Triton.

One program per (roi, block of BLOCK output elements of that roi): the roi's box, batch index, sampling grid and bin
sizes are scalars of the program, the elements a vector over (c, ph, pw) -- flattened with c innermost when the
input's channels are contiguous (channels-last: each sample's four taps are coalesced channel vectors) and pw
innermost otherwise.  Every operand is read through its strides (no layout copy).  The adaptive sampling grid is a
runtime loop bound per roi.  Arithmetic in f32 (f64 for f64); the box edges of roi_pool in exact integer arithmetic.

The backward kernels run the same geometry and add into dx atomically (overlapping rois share input elements:
deterministic=False, as torchvision's CUDA kernels); half dtypes add into an f32 buffer cast once at the end.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ...._core.dtypes import DType
from ...._core.sku import MathPrecision, PrecisionGuarantee
from ....ops.image_roi import roi_geometry
from .._lib.atomics import red_add
from .._lib.geometry import cdiv, next_power_of_2
from .._lib.interp import INTERPRETING, loop
from .._lib.register import register_triton
from .._lib.scalars import join_f64, split_f64

FLT_MAX = tl.constexpr(3.4028234663852886e38)


@triton.jit
def _elements(e, C, PH, PW, CL: tl.constexpr):
    """(c, ph, pw) of flat element e of one roi: c innermost (CL) or pw innermost."""
    if CL:
        c = e % C
        t = e // C
        return c, t // PW, t % PW
    pw = e % PW
    t = e // PW
    return t // PH, t % PH, pw


@triton.jit
def _roi_batch(rois, k, s_rk, N):
    """The roi's image (C's truncating cast) and whether it is in [0, N) (a scalar: combine it with a vector mask by
    tl.where; the interpreter cannot AND a scalar bool into a vector)."""
    b = tl.load(rois + k * s_rk).to(tl.float64)
    ok = (b > -1.0) & (b < N)
    return tl.where(ok, b, 0.0).to(tl.int64), ok


@triton.jit
def _taps(y, SIZE):
    """torchvision's bilinear_interpolate along one axis: (low index, high index, low weight, high weight, inside)."""
    inside = (y >= -1.0) & (y <= SIZE)
    y = tl.minimum(tl.maximum(y, 0.0), SIZE)
    lo = y.to(tl.int32)
    end = lo >= SIZE - 1
    lo = tl.where(end, SIZE - 1, lo)
    hi = tl.where(end, SIZE - 1, lo + 1)
    y = tl.where(end, lo.to(y.dtype), y)
    frac = y - lo.to(y.dtype)
    return lo, hi, 1.0 - frac, frac, inside


@triton.jit
def _roi_align_kernel(x, rois, out, N, C, H, W, PH, PW, TOTAL,
                      s_xn, s_xc, s_xh, s_xw, s_rk, s_rc, s_ok, s_oc, s_oh, s_ow,
                      scale_hi, scale_lo, RATIO, ALIGNED: tl.constexpr, BACKWARD: tl.constexpr, CL: tl.constexpr,
                      ACC: tl.constexpr, F64: tl.constexpr, BLOCK: tl.constexpr):
    """Forward: out[k, c, ph, pw] = the bin's sample average of x.  BACKWARD: ``out`` is the upstream gradient
    (read) and ``x`` the gradient of the input (added into atomically)."""
    k = tl.program_id(0).to(tl.int64)
    e = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    ok = e < TOTAL
    c, ph, pw = _elements(e, C, PH, PW, CL)
    n, in_batch = _roi_batch(rois, k, s_rk, N)
    scale = join_f64(scale_hi, scale_lo, F64)
    r = rois + k * s_rk
    off = 0.5 if ALIGNED else 0.0
    x1 = tl.load(r + s_rc).to(ACC) * scale - off
    y1 = tl.load(r + 2 * s_rc).to(ACC) * scale - off
    rw = tl.load(r + 3 * s_rc).to(ACC) * scale - off - x1
    rh = tl.load(r + 4 * s_rc).to(ACC) * scale - off - y1
    if not ALIGNED:
        rw = tl.maximum(rw, 1.0)
        rh = tl.maximum(rh, 1.0)
    bh = rh / PH
    bw = rw / PW
    gh = tl.where(RATIO > 0, RATIO, tl.ceil(tl.minimum(rh / PH, 2.0 ** 30)).to(tl.int32))
    gw = tl.where(RATIO > 0, RATIO, tl.ceil(tl.minimum(rw / PW, 2.0 ** 30)).to(tl.int32))
    count = tl.maximum(gh * gw, 1).to(ACC)
    ok = tl.where(in_batch, ok, False)
    base = x + n * s_xn + c.to(tl.int64) * s_xc
    y0 = y1 + ph.to(ACC) * bh
    x0 = x1 + pw.to(ACC) * bw
    o_ptr = out + k * s_ok + c.to(tl.int64) * s_oc + ph * s_oh + pw * s_ow
    if BACKWARD:
        g = tl.load(o_ptr, mask=ok, other=0.0).to(ACC) / count
    else:
        acc = tl.zeros((BLOCK,), ACC)
    for iy in loop(0, gh):
        ylo, yhi, wyl, wyh, yin = _taps(y0 + (iy + 0.5) * bh / gh, H)
        for ix in loop(0, gw):
            xlo, xhi, wxl, wxh, xin = _taps(x0 + (ix + 0.5) * bw / gw, W)
            m = ok & yin & xin
            p_ll = base + ylo * s_xh + xlo * s_xw
            p_lh = base + ylo * s_xh + xhi * s_xw
            p_hl = base + yhi * s_xh + xlo * s_xw
            p_hh = base + yhi * s_xh + xhi * s_xw
            if BACKWARD:
                red_add(p_ll, g * wyl * wxl, mask=m)
                red_add(p_lh, g * wyl * wxh, mask=m)
                red_add(p_hl, g * wyh * wxl, mask=m)
                red_add(p_hh, g * wyh * wxh, mask=m)
            else:
                v = wyl * wxl * tl.load(p_ll, mask=m, other=0.0).to(ACC) + \
                    wyl * wxh * tl.load(p_lh, mask=m, other=0.0).to(ACC) + \
                    wyh * wxl * tl.load(p_hl, mask=m, other=0.0).to(ACC) + \
                    wyh * wxh * tl.load(p_hh, mask=m, other=0.0).to(ACC)
                acc += tl.where(m, v, 0.0)
    if not BACKWARD:
        tl.store(o_ptr, (acc / count).to(out.dtype.element_ty), mask=e < TOTAL)


@triton.jit
def _round_away(v):
    """C's round() (half away from zero), exactly: the fraction of |v| is exact in floating point."""
    a = tl.abs(v)
    f = tl.floor(a)
    r = tl.where(a - f >= 0.5, f + 1.0, f)
    r = tl.minimum(r, 2.0 ** 30)
    return tl.where(v < 0, -r, r).to(tl.int32)


@triton.jit
def _bin_edges(p, length, bins, start, size):
    """Rows floor(p l / P) .. ceil((p + 1) l / P) of a roi of length l >= 1 starting at ``start``, clipped to [0, size]."""
    lo = (p * length) // bins + start
    hi = ((p + 1) * length + bins - 1) // bins + start
    return tl.minimum(tl.maximum(lo, 0), size), tl.minimum(tl.maximum(hi, 0), size)


@triton.jit
def _roi_pool_kernel(x, rois, out, arg, N, C, H, W, PH, PW, TOTAL,
                     s_xn, s_xc, s_xh, s_xw, s_rk, s_rc, s_ok, s_oc, s_oh, s_ow, s_ak, s_ac, s_ah, s_aw,
                     scale_hi, scale_lo, CL: tl.constexpr, ACC: tl.constexpr, F64: tl.constexpr, BLOCK: tl.constexpr):
    k = tl.program_id(0).to(tl.int64)
    e = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    live = e < TOTAL
    c, ph, pw = _elements(e, C, PH, PW, CL)
    n, in_batch = _roi_batch(rois, k, s_rk, N)
    scale = join_f64(scale_hi, scale_lo, F64)
    r = rois + k * s_rk
    x1 = _round_away(tl.load(r + s_rc).to(ACC) * scale)
    y1 = _round_away(tl.load(r + 2 * s_rc).to(ACC) * scale)
    rw = tl.maximum(_round_away(tl.load(r + 3 * s_rc).to(ACC) * scale) - x1 + 1, 1)
    rh = tl.maximum(_round_away(tl.load(r + 4 * s_rc).to(ACC) * scale) - y1 + 1, 1)
    h0, h1 = _bin_edges(ph, rh, PH, y1, H)
    w0, w1 = _bin_edges(pw, rw, PW, x1, W)
    ok = tl.where(in_batch, live, False) & (h1 > h0) & (w1 > w0)
    base = x + n * s_xn + c.to(tl.int64) * s_xc
    best = tl.full((BLOCK,), -FLT_MAX, ACC)
    idx = tl.full((BLOCK,), -1, tl.int64)
    for dh in loop(0, (rh + PH - 1) // PH + 1):      # the tallest bin
        h = h0 + dh
        for dw in loop(0, (rw + PW - 1) // PW + 1):
            w = w0 + dw
            m = ok & (h < h1) & (w < w1)
            v = tl.load(base + h * s_xh + w * s_xw, mask=m, other=0.0).to(ACC)
            win = m & (v > best)          # strict: the first maximum in row-major order; NaN never wins
            best = tl.where(win, v, best)
            idx = tl.where(win, (h * W + w).to(tl.int64), idx)
    best = tl.where(ok, best, 0.0)
    idx = tl.where(ok, idx, -1)
    eo = k * s_ok + c.to(tl.int64) * s_oc + ph * s_oh + pw * s_ow
    tl.store(out + eo, best.to(out.dtype.element_ty), mask=live)
    tl.store(arg + k * s_ak + c.to(tl.int64) * s_ac + ph * s_ah + pw * s_aw, idx, mask=live)


@triton.jit
def _roi_pool_bw_kernel(g, rois, arg, dx, N, C, H, W, PH, PW, TOTAL,
                        s_gk, s_gc, s_gh, s_gw, s_rk, s_ak, s_ac, s_ah, s_aw, s_dn, s_dc, s_dh, s_dw,
                        ACC: tl.constexpr, BLOCK: tl.constexpr):
    """dx[n, c, argmax] += grad over the bins of one roi (a bin without a maximum, argmax -1, adds nothing)."""
    k = tl.program_id(0).to(tl.int64)
    e = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    c, ph, pw = _elements(e, C, PH, PW, False)
    n, in_batch = _roi_batch(rois, k, s_rk, N)
    c64 = c.to(tl.int64)
    a = tl.load(arg + k * s_ak + c64 * s_ac + ph * s_ah + pw * s_aw, mask=e < TOTAL, other=-1)
    m = tl.where(in_batch, e < TOTAL, False) & (a >= 0) & (a < H * W)
    a = tl.where(m, a, 0)
    v = tl.load(g + k * s_gk + c64 * s_gc + ph * s_gh + pw * s_gw, mask=m, other=0.0).to(ACC)
    red_add(dx + n * s_dn + c64 * s_dc + (a // W) * s_dh + (a % W) * s_dw, v, mask=m)


# -- launch --------------------------------------------------------------------------------------------------------
def _acc(dt: torch.dtype):
    return tl.float64 if dt == torch.float64 else tl.float32


def _grid(k: int, total: int):
    block = min(next_power_of_2(max(total, 1)), 1024 if INTERPRETING else 256)
    return (k, cdiv(total, block)), block


def _channels_last(t) -> bool:
    return t.shape[1] > 1 and t.stride(1) == 1


def _accumulator(out):
    """Where the atomics add: ``out`` itself (zeroed) for f32 / f64, an f32 buffer for half types."""
    if out.dtype in (torch.float32, torch.float64):
        return out.zero_()
    return torch.zeros(out.shape, dtype=torch.float32, device=out.device)


def _run_align(desc, inputs, outputs, ws):
    (n, c, h, w), k, (ph, pw) = roi_geometry(desc)
    bw = desc.op == "roi_align_backward"
    total = c * ph * pw
    if bw:
        g, rois = inputs
        dx = _accumulator(outputs[0])
        img, res, cl = dx, g, False
    else:
        x, rois = inputs
        img, res, cl = x, outputs[0], _channels_last(x)
    if k and total and n:
        grid, block = _grid(k, total)
        _roi_align_kernel[grid](img, rois, res, n, c, h, w, ph, pw, total, *img.stride(), *rois.stride(), *res.stride(),
                                *split_f64(desc.attr("spatial_scale")), desc.attr("sampling_ratio"),
                                ALIGNED=desc.attr("aligned"), BACKWARD=bw, CL=cl, ACC=_acc(img.dtype),
                                F64=img.dtype == torch.float64, BLOCK=block)
    elif not bw:
        outputs[0].zero_()
    if bw and img is not outputs[0]:
        outputs[0].copy_(img)


def _run_pool(desc, inputs, outputs, ws):
    (n, c, h, w), k, (ph, pw) = roi_geometry(desc)
    total = c * ph * pw
    grid, block = _grid(k, total)
    if desc.op == "roi_pool":
        x, rois = inputs
        out, arg = outputs
        if k and total:
            _roi_pool_kernel[grid](x, rois, out, arg, n, c, h, w, ph, pw, total, *x.stride(), *rois.stride(),
                                   *out.stride(), *arg.stride(), *split_f64(desc.attr("spatial_scale")),
                                   CL=_channels_last(x), ACC=_acc(x.dtype), F64=x.dtype == torch.float64, BLOCK=block)
        return
    g, rois, arg = inputs
    dx = _accumulator(outputs[0])
    if k and total and n:
        _roi_pool_bw_kernel[grid](g, rois, arg, dx, n, c, h, w, ph, pw, total, *g.stride(), rois.stride(0),
                                  *arg.stride(), *dx.stride(), ACC=_acc(dx.dtype), BLOCK=block)
    if dx is not outputs[0]:
        outputs[0].copy_(dx)


def _supports(desc):
    (_, c, _, _), _, (ph, pw) = roi_geometry(desc)
    return f"{c * ph * pw} outputs per roi (grid axis 1 holds 65535 blocks of 256)" if c * ph * pw > 65535 * 256 \
        else None


def _atomic_precision(desc, pref=None) -> PrecisionGuarantee:
    """Atomic adds in f32 (f64 for f64): the order of overlapping rois' terms varies from run to run."""
    f64 = desc.dtype == DType.f64
    return PrecisionGuarantee(MathPrecision.F64 if f64 else MathPrecision.F32, DType.f64 if f64 else DType.f32,
                              False, False)


register_triton("roi_align", _run_align, supports=_supports, route="triton:roi_align:bilinear-bins")
register_triton("roi_align_backward", _run_align, supports=_supports, precision=_atomic_precision,
                route="triton:roi_align_backward:atomic")
register_triton("roi_pool", _run_pool, supports=_supports, route="triton:roi_pool:max-bins")
register_triton("roi_pool_backward", _run_pool, supports=_supports, precision=_atomic_precision,
                route="triton:roi_pool_backward:atomic")
