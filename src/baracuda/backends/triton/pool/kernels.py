"""The pooling kernels: one N-d forward kernel (every pooling op), a tap-unrolled forward for sliding windows of a
compile-time size (pool_fw_taps: what a 3x3 / 3x3x3 window runs), one gather-form backward kernel (and its
tap-unrolled form, pool_bw_taps, for a compile-time count of candidate outputs), max_unpool.

Every tensor is seen as (N, C, D, H, W) with its own strides (missing spatial dims: size 1, stride 0; an unbatched
input: N = 1), so 1-d, 2-d and 3-d pooling, NCHW and channels-last (NHWC / NDHWC) inputs, and any strided view run
the same code without a copy.  One lane per written element; the flat lane index is unravelled with the channels
innermost (CL) when the written tensor is channels-last, else the width innermost, so stores (and the matching
reads of a same-layout input) are coalesced.

Windows (constexpr MODE): 0 sliding (start o * s - p, step dilation, k taps), 1 adaptive (torch's
[floor(o L / O), ceil((o + 1) L / O))), 2 fractional (start int((o + u) a) - int(u a), a = (L - k) / (O - 1), the
last window at L - k; f32 arithmetic, f64 for f64, as torch's kernels).  Reductions (constexpr OP): 0 max (a NaN
wins and stays, ties keep the first in window order: torch's rule; indices are flat offsets in the plane),
1 average (torch's divisors), 2 lp (avg of x^p times the window volume, to the 1/p).
Taps are loops over runtime counts (KD x KH x KW: 9 for a 3x3 window), masked per lane.

Backward (gather form, deterministic): one lane per input element; per dim the outputs whose window may hold it
form a short run (sliding: ((k - 1) d) // s + 1 candidates, adaptive: ceil(O / L) + 1), each checked exactly; max
sums the gradients whose index names the element, average sums grad / divisor.  No atomics, no zero-fill pass.
"""
from __future__ import annotations

import triton
import triton.language as tl

from .._lib.interp import loop
from .._lib.launch import fast_kernel
from .._lib.math import pow as _pow
from .._lib.scalars import join_f64
from .._lib.strided import unravel


@triton.jit
def _unravel(offs, C, D, H, W, CL: tl.constexpr):
    """(n, c, d, h, w) of flat lane indices over (N, C, D, H, W): channels innermost when CL, else width."""
    if CL:      # (a size-1 leading dim specializes away)
        n, _, d, h, w, c = unravel(offs, 1, D, H, W, C)
    else:
        n, _, c, d, h, w = unravel(offs, 1, C, D, H, W)
    return n, c, d, h, w


@triton.jit
def _win(o, L, O, k, s, p, u, MODE: tl.constexpr, CT: tl.constexpr):
    """(first input position, taps) of output o's window along one dim."""
    if MODE == 0:
        return o * s - p, k
    elif MODE == 1:
        start = (o * L) // O
        return start, ((o + 1) * L + O - 1) // O - start
    else:
        zero = o * 0          # (L, k, O may be specialized to constexprs: tensors first)
        alpha = (zero + (L - k)).to(CT) / tl.maximum(zero + (O - 1), 1).to(CT)
        st = ((o.to(CT) + u) * alpha).to(tl.int32) - (u * alpha).to(tl.int32)
        return tl.where(o == O - 1, L - k, st), k


@triton.jit
def _wins(od, oh, ow, D, H, W, OD, OH, OW, kd, kh, kw, sd, sh, sw, pd, ph, pw, ud, uh, uw, MODE: tl.constexpr,
          CT: tl.constexpr):
    """_win of the three dims in one call (the interpreter pays per device-function call)."""
    d0, td = _win(od, D, OD, kd, sd, pd, ud, MODE, CT)
    h0, th = _win(oh, H, OH, kh, sh, ph, uh, MODE, CT)
    w0, tw = _win(ow, W, OW, kw, sw, pw, uw, MODE, CT)
    return d0, td, h0, th, w0, tw


@triton.jit
def _divs(d0, td, h0, th, w0, tw, D, H, W, kd, kh, kw, pd, ph, pw, MODE: tl.constexpr, COUNT_PAD: tl.constexpr):
    return (_div(d0, td, D, kd, pd, MODE, COUNT_PAD) * _div(h0, th, H, kh, ph, MODE, COUNT_PAD)
            * _div(w0, tw, W, kw, pw, MODE, COUNT_PAD))


@triton.jit
def _div(start, taps, L, k, p, MODE: tl.constexpr, COUNT_PAD: tl.constexpr):
    """torch's average divisor factor of one dim: the window clipped to the padded input (count_include_pad; an
    adaptive window: its size) or the taps inside the input."""
    if MODE == 1:
        return taps
    elif COUNT_PAD:
        return tl.minimum(start + k, L + p) - start
    else:
        return tl.minimum(start + k, L) - tl.maximum(start, 0)


@triton.jit
def _fw_store(y_ptr, i_ptr, m, arg, acc, mask, n, c, od, oh, ow, yn, yc, yd, yh, yw, jn, jc, jd, jh, jw,
              d0, td, h0, th, w0, tw, D, H, W, kd, kh, kw, pd, ph, pw, divisor, p, MODE: tl.constexpr,
              OP: tl.constexpr, COUNT_PAD: tl.constexpr, HAS_DIV: tl.constexpr, CT: tl.constexpr):
    """The forward kernels' results (kernels.py's and tile.py's, any shape): max's value and flat index, or the sum
    over torch's divisor (lp: to the 1/p)."""
    yo = n.to(tl.int64) * yn + c.to(tl.int64) * yc + od * yd + oh * yh + ow * yw
    if OP == 0:
        tl.store(y_ptr + yo, m.to(y_ptr.dtype.element_ty), mask=mask)
        jo = n.to(tl.int64) * jn + c.to(tl.int64) * jc + od * jd + oh * jh + ow * jw
        tl.store(i_ptr + jo, arg.to(tl.int64), mask=mask)
    else:
        if HAS_DIV:
            div = divisor
        else:
            div = _divs(d0, td, h0, th, w0, tw, D, H, W, kd, kh, kw, pd, ph, pw, MODE, COUNT_PAD).to(CT)
        r = acc / div
        if OP == 2:
            r = _pow(r * (kd * kh * kw), 1.0 / p)
        tl.store(y_ptr + yo, r.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _bw_term(gb, jb, od, oh, ow, gd, gh, gw, jd, jh, jw, me, valid, f, OP: tl.constexpr, HAS_DIV: tl.constexpr,
             CT: tl.constexpr):
    """Both backward kernels' contribution of candidate outputs (od, oh, ow) to their input element: max's gradient
    where its index names the element, else the gradient over its divisor (a divisor_override divides at the end)."""
    g = tl.load(gb + od * gd + oh * gh + ow * gw, mask=valid, other=0.0).to(CT)
    if OP == 0:
        j = tl.load(jb + od * jd + oh * jh + ow * jw, mask=valid, other=-1)
        return tl.where(valid & (j == me), g, 0.0)
    elif HAS_DIV:
        return tl.where(valid, g, 0.0)
    else:
        return tl.where(valid, g / f.to(CT), 0.0)


@triton.jit
def _bw_store(dx_ptr, acc, mask, n, c, di, hi, wi, xn, xc, xd, xh, xw, divisor, OP: tl.constexpr,
              HAS_DIV: tl.constexpr):
    if OP == 1 and HAS_DIV:
        acc = acc / divisor
    xo = n.to(tl.int64) * xn + c.to(tl.int64) * xc + di * xd + hi * xh + wi * xw
    tl.store(dx_ptr + xo, acc.to(dx_ptr.dtype.element_ty), mask=mask)


@fast_kernel
def pool_fw(x_ptr, u_ptr, y_ptr, i_ptr, total, C, D, H, W, OD, OH, OW,
            xn, xc, xd, xh, xw, yn, yc, yd, yh, yw, jn, jc, jd, jh, jw, un, uc, u0, u1, u2,
            kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw, KD, KH, KW, divisor, p_hi, p_lo,
            MODE: tl.constexpr, OP: tl.constexpr, CL: tl.constexpr, COUNT_PAD: tl.constexpr,
            HAS_DIV: tl.constexpr, FLOAT: tl.constexpr, F64: tl.constexpr, I64: tl.constexpr,
            LOW: tl.constexpr, BLOCK: tl.constexpr, TB: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    IT: tl.constexpr = tl.int64 if I64 else tl.int32
    offs = tl.program_id(0).to(IT) * BLOCK + tl.arange(0, BLOCK).to(IT)
    mask = offs < total
    n, c, od, oh, ow = _unravel(offs, C, OD, OH, OW, CL)
    ud = 0.0
    uh = 0.0
    uw = 0.0
    if MODE == 2:
        ub = u_ptr + n * un + c * uc
        ud = tl.load(ub + u0, mask=mask, other=0.0).to(CT)
        uh = tl.load(ub + u1, mask=mask, other=0.0).to(CT)
        uw = tl.load(ub + u2, mask=mask, other=0.0).to(CT)
    d0, td, h0, th, w0, tw = _wins(od, oh, ow, D, H, W, OD, OH, OW, kd, kh, kw, sd, sh, sw, pd, ph, pw, ud, uh, uw,
                                   MODE, CT)
    xb = x_ptr + n.to(tl.int64) * xn + c.to(tl.int64) * xc
    VT: tl.constexpr = CT if FLOAT else x_ptr.dtype.element_ty
    m = tl.zeros([BLOCK], VT)
    arg = tl.full([BLOCK], -1, IT)          # flat index of the winner; -1: nothing seen yet
    acc = tl.zeros([BLOCK], CT)
    p = 1.0
    if OP == 2:
        p = join_f64(p_hi, p_lo, F64)
    khw = KH * KW
    for t0 in loop(0, KD * khw, TB):        # chunks of TB taps, vectorized [BLOCK, TB] (one chunk up to TB taps)
        t = t0 + tl.arange(0, TB)
        ta = t // khw
        tb = (t // KW) % KH
        te = t % KW
        di = d0[:, None] + (ta * dd)[None, :]
        hi = h0[:, None] + (tb * dh)[None, :]
        wi = w0[:, None] + (te * dw)[None, :]
        valid = (mask[:, None] & (t < KD * khw)[None, :] & (di >= 0) & (di < D) & (hi >= 0) & (hi < H)
                 & (wi >= 0) & (wi < W))
        if MODE == 1:   # adaptive windows have fewer taps than the loop's maximum
            valid = valid & (ta[None, :] < td[:, None]) & (tb[None, :] < th[:, None]) & (te[None, :] < tw[:, None])
        v = tl.load(xb[:, None] + di * xd + hi * xh + wi * xw, mask=valid, other=0).to(VT)
        if OP == 0:
            # the chunk's winner by torch's rule (the last NaN, else the first maximum), merged into the running
            # one: a NaN replaces anything, a larger value replaces a smaller one, ties keep the earlier tap
            isn = valid & (v != v)
            ok = valid & (v == v)
            vm = tl.where(ok, v, LOW)
            cm = tl.max(vm, 1).to(VT)   # (a reduction of 8- and 16-bit ints widens to 32 bits)
            big = KD * khw + TB
            first = tl.min(tl.where(ok & (vm == cm[:, None]), t[None, :], big), 1)
            lastnan = tl.max(tl.where(isn, t[None, :], -1), 1)
            anyv = tl.max(valid.to(tl.int32), 1) > 0
            hasnan = lastnan >= 0
            ct = tl.where(hasnan, lastnan, first)
            upd = anyv & (hasnan | ((cm > m) & (m == m)) | (arg < 0))
            if FLOAT:
                cm = tl.where(hasnan, float("nan"), cm)
            m = tl.where(upd, cm, m)
            ca = ct // khw
            cb = (ct // KW) % KH
            ce = ct % KW
            arg = tl.where(upd, ((d0 + ca * dd) * H + (h0 + cb * dh)) * W + (w0 + ce * dw), arg)
        elif OP == 1:
            acc += tl.sum(tl.where(valid, v, 0.0), 1)
        else:
            acc += tl.sum(tl.where(valid, _pow(v, p), 0.0), 1)
    _fw_store(y_ptr, i_ptr, m, arg, acc, mask, n, c, od, oh, ow, yn, yc, yd, yh, yw, jn, jc, jd, jh, jw,
              d0, td, h0, th, w0, tw, D, H, W, kd, kh, kw, pd, ph, pw, divisor, p, MODE, OP, COUNT_PAD, HAS_DIV, CT)


@fast_kernel
def pool_fw_taps(x_ptr, y_ptr, i_ptr, total, C, D, H, W, OD, OH, OW,
                 xn, xc, xd, xh, xw, yn, yc, yd, yh, yw, jn, jc, jd, jh, jw,
                 sd, sh, sw, pd, ph, pw, dd, dh, dw, divisor, p_hi, p_lo,
                 KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr, MODE: tl.constexpr, OP: tl.constexpr,
                 CL: tl.constexpr, COUNT_PAD: tl.constexpr, HAS_DIV: tl.constexpr, FLOAT: tl.constexpr,
                 F64: tl.constexpr, I64: tl.constexpr, LOW: tl.constexpr, BLOCK: tl.constexpr):
    """pool_fw for sliding windows of a compile-time size, or adaptive windows of a compile-time largest size
    (KD x KH x KW taps, unrolled; MODE as pool_fw's, 0 or 1): one [BLOCK] vector of outputs, one load per tap and
    lane, the running result merged tap by tap with pool_fw's rules (a NaN replaces anything and the last NaN's index
    wins, else the first maximum) -- no [BLOCK, TB] tiles, no per-tap index division, no cross-lane reductions."""
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    IT: tl.constexpr = tl.int64 if I64 else tl.int32
    offs = tl.program_id(0).to(IT) * BLOCK + tl.arange(0, BLOCK).to(IT)
    mask = offs < total
    n, c, od, oh, ow = _unravel(offs, C, OD, OH, OW, CL)
    if MODE == 0:
        d0 = od * sd - pd
        h0 = oh * sh - ph
        w0 = ow * sw - pw
        td = KD
        th = KH
        tw = KW
    else:           # adaptive: each output's own window, at most KD x KH x KW taps
        d0, td, h0, th, w0, tw = _wins(od, oh, ow, D, H, W, OD, OH, OW, KD, KH, KW, sd, sh, sw, pd, ph, pw,
                                       0.0, 0.0, 0.0, MODE, CT)
    xb = x_ptr + n.to(tl.int64) * xn + c.to(tl.int64) * xc
    VT: tl.constexpr = CT if FLOAT else x_ptr.dtype.element_ty
    m = tl.zeros([BLOCK], VT)
    arg = tl.full([BLOCK], -1, IT)
    acc = tl.zeros([BLOCK], CT)
    p = 1.0
    if OP == 2:
        p = join_f64(p_hi, p_lo, F64)
    for a in tl.static_range(KD):
        di = d0 + a * dd
        vd = mask & (di >= 0) & (di < D)
        if MODE == 1:
            vd = vd & (a < td)
        for b in tl.static_range(KH):
            hi = h0 + b * dh
            vh = vd & (hi >= 0) & (hi < H)
            if MODE == 1:
                vh = vh & (b < th)
            for e in tl.static_range(KW):
                wi = w0 + e * dw
                valid = vh & (wi >= 0) & (wi < W)
                if MODE == 1:
                    valid = valid & (e < tw)
                v = tl.load(xb + di * xd + hi * xh + wi * xw, mask=valid, other=0).to(VT)
                if OP == 0:
                    isn = v != v
                    upd = valid & (isn | ((v > m) & (m == m)) | (arg < 0))
                    m = tl.where(upd, v, m)
                    arg = tl.where(upd, (di * H + hi) * W + wi, arg)
                elif OP == 1:
                    acc += tl.where(valid, v.to(CT), 0.0)
                else:
                    acc += tl.where(valid, _pow(v.to(CT), p), 0.0)
    _fw_store(y_ptr, i_ptr, m, arg, acc, mask, n, c, od, oh, ow, yn, yc, yd, yh, yw, jn, jc, jd, jh, jw,
              d0, td, h0, th, w0, tw, D, H, W, KD, KH, KW, pd, ph, pw, divisor, p, MODE, OP, COUNT_PAD, HAS_DIV, CT)


@triton.jit
def _first(i, L, O, k, s, p, d, MODE: tl.constexpr):
    """The first output whose window may hold input position i."""
    if MODE == 0:
        num = i + p - (k - 1) * d
        return tl.where(num > 0, (num + s - 1) // s, 0)
    else:
        return (i * O) // L


@triton.jit
def _covers(i, o, L, O, k, s, p, d, MODE: tl.constexpr, COUNT_PAD: tl.constexpr):
    """(whether output o's window holds input position i, o's divisor factor along this dim)."""
    if MODE == 0:
        off = i + p - o * s
        ok = (o < O) & (off >= 0) & (off % d == 0) & (off // d < k)
        return ok, _div(o * s - p, k, L, k, p, MODE, COUNT_PAD)
    else:
        start = (o * L) // O
        end = ((o + 1) * L + O - 1) // O
        return (o < O) & (start <= i) & (i < end), end - start


@triton.jit
def _firsts(di, hi, wi, D, H, W, OD, OH, OW, kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw, MODE: tl.constexpr):
    return (_first(di, D, OD, kd, sd, pd, dd, MODE), _first(hi, H, OH, kh, sh, ph, dh, MODE),
            _first(wi, W, OW, kw, sw, pw, dw, MODE))


@triton.jit
def _covers3(di, hi, wi, od, oh, ow, D, H, W, OD, OH, OW, kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw,
             MODE: tl.constexpr, COUNT_PAD: tl.constexpr):
    """Whether the candidate outputs' windows hold the input element, and their divisors (three dims)."""
    vd, fd = _covers(di, od, D, OD, kd, sd, pd, dd, MODE, COUNT_PAD)
    vh, fh = _covers(hi, oh, H, OH, kh, sh, ph, dh, MODE, COUNT_PAD)
    vw, fw = _covers(wi, ow, W, OW, kw, sw, pw, dw, MODE, COUNT_PAD)
    return vd & vh & vw, fd * fh * fw


@triton.jit
def _bw_lanes(g_ptr, i_ptr, total, C, D, H, W, OD, OH, OW, gn, gc, jn, jc, kd, kh, kw, sd, sh, sw, pd, ph, pw,
              dd, dh, dw, MODE: tl.constexpr, CL: tl.constexpr, IT: tl.constexpr, BLOCK: tl.constexpr):
    """Both backward kernels' lanes: the program's [BLOCK] input elements (mask, n, c, di, hi, wi), each one's first
    candidate output per dim, its flat in-plane index (what max's saved index names) and its plane's grad / index
    bases."""
    offs = tl.program_id(0).to(IT) * BLOCK + tl.arange(0, BLOCK).to(IT)
    mask = offs < total
    n, c, di, hi, wi = _unravel(offs, C, D, H, W, CL)
    d0, h0, w0 = _firsts(di, hi, wi, D, H, W, OD, OH, OW, kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw, MODE)
    me = (di * H + hi) * W + wi
    gb = g_ptr + n.to(tl.int64) * gn + c.to(tl.int64) * gc
    jb = i_ptr + n.to(tl.int64) * jn + c.to(tl.int64) * jc
    return mask, n, c, di, hi, wi, d0, h0, w0, me, gb, jb


@fast_kernel
def pool_bw(g_ptr, i_ptr, dx_ptr, total, C, D, H, W, OD, OH, OW,
            gn, gc, gd, gh, gw, jn, jc, jd, jh, jw, xn, xc, xd, xh, xw,
            kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw, KD, KH, KW, divisor,
            MODE: tl.constexpr, OP: tl.constexpr, CL: tl.constexpr, COUNT_PAD: tl.constexpr,
            HAS_DIV: tl.constexpr, F64: tl.constexpr, I64: tl.constexpr, BLOCK: tl.constexpr, TB: tl.constexpr):
    """Lanes over dx; KD x KH x KW candidate outputs per element, vectorized [BLOCK, TB] in chunks of TB."""
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    IT: tl.constexpr = tl.int64 if I64 else tl.int32
    mask, n, c, di, hi, wi, d0, h0, w0, me, gb, jb = _bw_lanes(
        g_ptr, i_ptr, total, C, D, H, W, OD, OH, OW, gn, gc, jn, jc, kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw,
        MODE, CL, IT, BLOCK)
    me, gb, jb = me[:, None], gb[:, None], jb[:, None]
    acc = tl.zeros([BLOCK], CT)
    khw = KH * KW
    for t0 in loop(0, KD * khw, TB):
        t = t0 + tl.arange(0, TB)
        od = d0[:, None] + (t // khw)[None, :]
        oh = h0[:, None] + ((t // KW) % KH)[None, :]
        ow = w0[:, None] + (t % KW)[None, :]
        valid, f = _covers3(di[:, None], hi[:, None], wi[:, None], od, oh, ow, D, H, W, OD, OH, OW, kd, kh, kw,
                            sd, sh, sw, pd, ph, pw, dd, dh, dw, MODE, COUNT_PAD)
        valid = valid & mask[:, None] & (t < KD * khw)[None, :]
        acc += tl.sum(_bw_term(gb, jb, od, oh, ow, gd, gh, gw, jd, jh, jw, me, valid, f, OP, HAS_DIV, CT), 1)
    _bw_store(dx_ptr, acc, mask, n, c, di, hi, wi, xn, xc, xd, xh, xw, divisor, OP, HAS_DIV)


@fast_kernel
def pool_bw_taps(g_ptr, i_ptr, dx_ptr, total, C, D, H, W, OD, OH, OW,
                 gn, gc, gd, gh, gw, jn, jc, jd, jh, jw, xn, xc, xd, xh, xw,
                 kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw, divisor,
                 KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr, MODE: tl.constexpr, OP: tl.constexpr,
                 CL: tl.constexpr, COUNT_PAD: tl.constexpr, HAS_DIV: tl.constexpr, F64: tl.constexpr,
                 I64: tl.constexpr, BLOCK: tl.constexpr):
    """pool_bw with a compile-time count of candidate outputs per dim (KD x KH x KW, unrolled): one [BLOCK] vector of
    dx, one load of grad (and index) per candidate and lane -- no [BLOCK, TB] tiles or per-candidate divisions."""
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    IT: tl.constexpr = tl.int64 if I64 else tl.int32
    mask, n, c, di, hi, wi, d0, h0, w0, me, gb, jb = _bw_lanes(
        g_ptr, i_ptr, total, C, D, H, W, OD, OH, OW, gn, gc, jn, jc, kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw,
        MODE, CL, IT, BLOCK)
    acc = tl.zeros([BLOCK], CT)
    for a in tl.static_range(KD):
        od = d0 + a
        for b in tl.static_range(KH):
            oh = h0 + b
            for e in tl.static_range(KW):
                ow = w0 + e
                valid, f = _covers3(di, hi, wi, od, oh, ow, D, H, W, OD, OH, OW, kd, kh, kw, sd, sh, sw, pd, ph, pw,
                                    dd, dh, dw, MODE, COUNT_PAD)
                valid = valid & mask
                acc += _bw_term(gb, jb, od, oh, ow, gd, gh, gw, jd, jh, jw, me, valid, f, OP, HAS_DIV, CT)
    _bw_store(dx_ptr, acc, mask, n, c, di, hi, wi, xn, xc, xd, xh, xw, divisor, OP, HAS_DIV)


@fast_kernel
def unpool(x_ptr, i_ptr, y_ptr, total, C, D, H, W, OD, OH, OW,
           xn, xc, xd, xh, xw, jn, jc, jd, jh, jw, yn, yc, yd, yh, yw,
           ZERO: tl.constexpr, CL: tl.constexpr, I64: tl.constexpr, BLOCK: tl.constexpr):
    """ZERO: y = 0 (lanes over y).  Else lanes over x: y.plane[indices] = x; an index outside the plane writes
    nothing."""
    IT: tl.constexpr = tl.int64 if I64 else tl.int32
    offs = tl.program_id(0).to(IT) * BLOCK + tl.arange(0, BLOCK).to(IT)
    mask = offs < total
    if ZERO:
        n, c, od, oh, ow = _unravel(offs, C, OD, OH, OW, CL)
        yo = n.to(tl.int64) * yn + c.to(tl.int64) * yc + od * yd + oh * yh + ow * yw
        tl.store(y_ptr + yo, tl.zeros([BLOCK], y_ptr.dtype.element_ty), mask=mask)
    else:
        n, c, di, hi, wi = _unravel(offs, C, D, H, W, CL)
        xo = n.to(tl.int64) * xn + c.to(tl.int64) * xc + di * xd + hi * xh + wi * xw
        jo = n.to(tl.int64) * jn + c.to(tl.int64) * jc + di * jd + hi * jh + wi * jw
        v = tl.load(x_ptr + xo, mask=mask, other=0)
        j = tl.load(i_ptr + jo, mask=mask, other=-1)
        ok = mask & (j >= 0) & (j < OD * OH * OW)
        ow = j % OW
        oh = (j // OW) % OH
        od = j // OW // OH
        yo = n.to(tl.int64) * yn + c.to(tl.int64) * yc + od * yd + oh * yh + ow * yw
        tl.store(y_ptr + yo, v, mask=ok)
