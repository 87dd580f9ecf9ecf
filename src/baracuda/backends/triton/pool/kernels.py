"""The pooling kernels: one N-d forward kernel (every pooling op), one gather-form backward kernel, max_unpool.

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


@triton.jit
def _unravel(offs, C, D, H, W, CL: tl.constexpr):
    """(n, c, d, h, w) of flat lane indices over (N, C, D, H, W): channels innermost when CL, else width."""
    if CL:
        c = offs % C
        r = offs // C
        w = r % W
        r = r // W
        h = r % H
        r = r // H
        d = r % D
        n = r // D
    else:
        w = offs % W
        r = offs // W
        h = r % H
        r = r // H
        d = r % D
        r = r // D
        c = r % C
        n = r // C
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
def _div(start, taps, L, k, p, MODE: tl.constexpr, COUNT_PAD: tl.constexpr):
    """torch's average divisor factor of one dim: the window clipped to the padded input (count_include_pad; an
    adaptive window: its size) or the taps inside the input."""
    if MODE == 1:
        return taps
    elif COUNT_PAD:
        return tl.minimum(start + k, L + p) - start
    else:
        return tl.minimum(start + k, L) - tl.maximum(start, 0)


@fast_kernel
def pool_fw(x_ptr, u_ptr, y_ptr, i_ptr, total, C, D, H, W, OD, OH, OW,
            xn, xc, xd, xh, xw, yn, yc, yd, yh, yw, jn, jc, jd, jh, jw, un, uc, u0, u1, u2,
            kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw, KD, KH, KW, divisor, p_hi, p_lo,
            MODE: tl.constexpr, OP: tl.constexpr, CL: tl.constexpr, COUNT_PAD: tl.constexpr,
            HAS_DIV: tl.constexpr, FLOAT: tl.constexpr, F64: tl.constexpr, I64: tl.constexpr,
            BLOCK: tl.constexpr):
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
    d0, td = _win(od, D, OD, kd, sd, pd, ud, MODE, CT)
    h0, th = _win(oh, H, OH, kh, sh, ph, uh, MODE, CT)
    w0, tw = _win(ow, W, OW, kw, sw, pw, uw, MODE, CT)
    xb = x_ptr + n.to(tl.int64) * xn + c.to(tl.int64) * xc
    VT: tl.constexpr = CT if FLOAT else x_ptr.dtype.element_ty
    m = tl.zeros([BLOCK], VT)
    arg = tl.full([BLOCK], -1, IT)          # -1: nothing seen yet (the first valid tap always wins)
    acc = tl.zeros([BLOCK], CT)
    if OP == 2:
        p = join_f64(p_hi, p_lo, F64)
    # (the taps' arithmetic is hoisted per row: the interpreter pays per operation, the GPU per instruction)
    di = d0
    for a in loop(KD):
        vd = mask & (di >= 0) & (di < D)
        if MODE == 1:
            vd = vd & (a < td)
        hi = h0
        for b in loop(KH):
            vh = vd & (hi >= 0) & (hi < H)
            if MODE == 1:
                vh = vh & (b < th)
            row = xb + di * xd + hi * xh
            rowi = (di * H + hi) * W
            wi = w0
            for e in loop(KW):
                valid = vh & (wi >= 0) & (wi < W)
                if MODE == 1:
                    valid = valid & (e < tw)
                v = tl.load(row + wi * xw, mask=valid, other=0).to(VT)
                if OP == 0:
                    upd = valid & ((v > m) | (v != v) | (arg < 0))
                    m = tl.where(upd, v, m)
                    arg = tl.where(upd, rowi + wi, arg)
                elif OP == 1:
                    acc += tl.where(valid, v, 0.0)
                else:
                    acc += tl.where(valid, _pow(v, p), 0.0)
                wi += dw
            hi += dh
        di += dd
    yo = n.to(tl.int64) * yn + c.to(tl.int64) * yc + od * yd + oh * yh + ow * yw
    if OP == 0:
        tl.store(y_ptr + yo, m.to(y_ptr.dtype.element_ty), mask=mask)
        jo = n.to(tl.int64) * jn + c.to(tl.int64) * jc + od * jd + oh * jh + ow * jw
        tl.store(i_ptr + jo, arg.to(tl.int64), mask=mask)
    else:
        if HAS_DIV:
            div = tl.full([BLOCK], divisor, tl.int32).to(CT)
        else:
            div = (_div(d0, td, D, kd, pd, MODE, COUNT_PAD) * _div(h0, th, H, kh, ph, MODE, COUNT_PAD)
                   * _div(w0, tw, W, kw, pw, MODE, COUNT_PAD)).to(CT)
        r = acc / div
        if OP == 2:
            r = _pow(r * (kd * kh * kw), 1.0 / p)
        tl.store(y_ptr + yo, r.to(y_ptr.dtype.element_ty), mask=mask)


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
        start = o * s - p
        ok = (o < O) & (off >= 0) & (off % d == 0) & (off // d < k)
        return ok, _div(start, k, L, k, p, MODE, COUNT_PAD)
    else:
        start = (o * L) // O
        end = ((o + 1) * L + O - 1) // O
        return (o < O) & (start <= i) & (i < end), end - start


@fast_kernel
def pool_bw(g_ptr, i_ptr, dx_ptr, total, C, D, H, W, OD, OH, OW,
            gn, gc, gd, gh, gw, jn, jc, jd, jh, jw, xn, xc, xd, xh, xw,
            kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw, KD, KH, KW, divisor,
            MODE: tl.constexpr, OP: tl.constexpr, CL: tl.constexpr, COUNT_PAD: tl.constexpr,
            HAS_DIV: tl.constexpr, F64: tl.constexpr, I64: tl.constexpr, BLOCK: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    IT: tl.constexpr = tl.int64 if I64 else tl.int32
    offs = tl.program_id(0).to(IT) * BLOCK + tl.arange(0, BLOCK).to(IT)
    mask = offs < total
    n, c, di, hi, wi = _unravel(offs, C, D, H, W, CL)
    d0 = _first(di, D, OD, kd, sd, pd, dd, MODE)
    h0 = _first(hi, H, OH, kh, sh, ph, dh, MODE)
    w0 = _first(wi, W, OW, kw, sw, pw, dw, MODE)
    me = (di * H + hi) * W + wi
    gb = g_ptr + n.to(tl.int64) * gn + c.to(tl.int64) * gc
    jb = i_ptr + n.to(tl.int64) * jn + c.to(tl.int64) * jc
    acc = tl.zeros([BLOCK], CT)
    od = d0
    for a in loop(KD):
        vd, fd = _covers(di, od, D, OD, kd, sd, pd, dd, MODE, COUNT_PAD)
        vd = vd & mask
        oh = h0
        for b in loop(KH):
            vh, fh = _covers(hi, oh, H, OH, kh, sh, ph, dh, MODE, COUNT_PAD)
            vh = vh & vd
            go = od * gd + oh * gh
            jo = od * jd + oh * jh
            ow = w0
            for e in loop(KW):
                valid, fw = _covers(wi, ow, W, OW, kw, sw, pw, dw, MODE, COUNT_PAD)
                valid = valid & vh
                g = tl.load(gb + go + ow * gw, mask=valid, other=0.0).to(CT)
                if OP == 0:
                    j = tl.load(jb + jo + ow * jw, mask=valid, other=-1)
                    acc += tl.where(valid & (j == me), g, 0.0)
                elif HAS_DIV:
                    acc += tl.where(valid, g, 0.0)
                else:
                    acc += tl.where(valid, g / (fd * fh * fw).to(CT), 0.0)
                ow += 1
            oh += 1
        od += 1
    if OP == 1 and HAS_DIV:
        acc = acc / divisor
    xo = n.to(tl.int64) * xn + c.to(tl.int64) * xc + di * xd + hi * xh + wi * xw
    tl.store(dx_ptr + xo, acc.to(dx_ptr.dtype.element_ty), mask=mask)


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
