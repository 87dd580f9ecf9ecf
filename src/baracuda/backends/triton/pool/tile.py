"""2-d sliding-window pooling of channels-last tensors on [positions, channels] tiles, the window at compile time.

The N-d kernels (kernels.py) give every lane one output and unravel it on its own, and check each tap against
runtime strides.  Here a program owns a [BA, BB] tile: BA (n, h, w) positions, unravelled once a row, by BB channels
along the lanes, so every tap loads a contiguous channel vector (8 bf16 a thread); the kernel size, stride and
dilation are constexprs (a 3x3 s2 window compiles to shifts and immediates) and each tap's mask and offset are a
row part plus a channel part.  Measured on the H200 (session 19, bf16 [64, 64, 112, 112] channels-last): max / avg
pool 3x3 s2 backward 211 -> 142 / 188 -> 102 us, forward 89 -> 90 / 48 -> 41 us.  NCHW stays on the N-d kernels:
this tile with the width along the lanes ran 1.3-1.7x slower there (a thread's adjacent outputs read stride-2
addresses: 8x the L1 sectors a load instruction).  Sliding windows only (an adaptive window that divides its input
is the sliding window k = s = L / O: pool.py rewrites it before it gets here); 1-d pooling runs as H = 1.

Forward (OP 0 max with torch's flat in-plane index, 1 average with torch's divisors, 2 lp) and the gather-form
backward (max: the gradients whose index names the element; average: grad / divisor), both deterministic, no
atomics.  The max merge is torch's: a NaN replaces anything and the last NaN wins, else the first maximum.
"""
from __future__ import annotations

import triton
import triton.language as tl

from .._lib.launch import fast_kernel
from .._lib.math import pow as _pow
from .._lib.scalars import join_f64
from .kernels import _div


@triton.jit
def _tile(R, C, P, Q, IT: tl.constexpr, BA: tl.constexpr, BB: tl.constexpr):
    """The program's tile: row mask, rows (n, p, q) over the P x Q positions of a batch element ([BA, 1] each),
    channels ([1, BB]) and the [BA, BB] mask."""
    a = tl.program_id(0).to(IT) * BA + tl.arange(0, BA).to(IT)
    c = tl.program_id(1).to(IT) * BB + tl.arange(0, BB).to(IT)
    q = a % Q
    t = a // Q
    ok = (a < R)[:, None] & (c < C)[None, :]
    return ok, (t // P)[:, None].to(tl.int64), (t % P)[:, None], q[:, None], c[None, :].to(tl.int64)


@fast_kernel
def pool2d_fw(x_ptr, y_ptr, i_ptr, R, C, H, W, OH, OW, xn, xc, xh, xw, yn, yc, yh, yw, jn, jc, jh, jw,
              PH, PW, divisor, p_hi, p_lo,
              KH: tl.constexpr, KW: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr, DH: tl.constexpr,
              DW: tl.constexpr, OP: tl.constexpr, COUNT_PAD: tl.constexpr, HAS_DIV: tl.constexpr,
              FLOAT: tl.constexpr, F64: tl.constexpr, I64: tl.constexpr, LOW: tl.constexpr, BA: tl.constexpr,
              BB: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    IT: tl.constexpr = tl.int64 if I64 else tl.int32
    ok, n, oh, ow, c = _tile(R, C, OH, OW, IT, BA, BB)
    h0 = oh * SH - PH
    w0 = ow * SW - PW
    xb = x_ptr + n * xn + c * xc
    VT: tl.constexpr = CT if FLOAT else x_ptr.dtype.element_ty
    m = tl.full([BA, BB], LOW, VT)
    arg = tl.full([BA, BB], -1, tl.int32)       # the winner's tap (kh * KW + kw); -1: no tap inside the input yet
    acc = tl.zeros([BA, BB], CT)
    pw_ = 1.0
    if OP == 2:
        pw_ = join_f64(p_hi, p_lo, F64)
    for kh in tl.static_range(KH):
        hi = h0 + kh * DH
        vh = (hi >= 0) & (hi < H)
        ph = xb + hi * xh
        for kw in tl.static_range(KW):
            wi = w0 + kw * DW
            valid = ok & vh & (wi >= 0) & (wi < W)
            v = tl.load(ph + wi * xw, mask=valid, other=LOW).to(VT)
            if OP == 0:
                # v > m is false once m is NaN: only a later NaN replaces it; the first valid tap always counts
                upd = (v > m) | ((arg < 0) & valid)
                if FLOAT:
                    upd = upd | (v != v)
                m = tl.where(upd, v, m)
                arg = tl.where(upd, kh * KW + kw, arg)
            elif OP == 1:
                acc += tl.where(valid, v.to(CT), 0.0)
            else:
                acc += tl.where(valid, _pow(v.to(CT), pw_), 0.0)
    yo = n * yn + c * yc + oh * yh + ow * yw
    if OP == 0:
        tl.store(y_ptr + yo, m.to(y_ptr.dtype.element_ty), mask=ok)
        th = arg // KW
        flat = (h0 + th * DH) * W + (w0 + (arg - th * KW) * DW)
        jo = n * jn + c * jc + oh * jh + ow * jw
        tl.store(i_ptr + jo, tl.where(arg < 0, -1, flat).to(tl.int64), mask=ok)
    else:
        if HAS_DIV:
            r = acc / divisor
        else:
            r = acc / (_div(h0, KH, H, KH, PH, 0, COUNT_PAD) * _div(w0, KW, W, KW, PW, 0, COUNT_PAD)).to(CT)
        if OP == 2:
            r = _pow(r * (KH * KW), 1.0 / pw_)
        tl.store(y_ptr + yo, r.to(y_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _cands(i, P, K: tl.constexpr, S: tl.constexpr, D: tl.constexpr):
    """The first output whose window may hold input position i along one dim (the candidates follow it)."""
    num = i + P - (K - 1) * D
    return tl.where(num > 0, (num + S - 1) // S, 0)


@triton.jit
def _hits(i, o, L, P, O, K: tl.constexpr, S: tl.constexpr, D: tl.constexpr, COUNT_PAD: tl.constexpr):
    """(whether output o's window holds input position i, o's divisor factor along this dim)."""
    off = i + P - o * S
    return ((o < O) & (off >= 0) & (off % D == 0) & (off // D < K)), _div(o * S - P, K, L, K, P, 0, COUNT_PAD)


@fast_kernel
def pool2d_bw(g_ptr, i_ptr, dx_ptr, R, C, H, W, OH, OW, gn, gc, gh, gw, jn, jc, jh, jw, xn, xc, xh, xw,
              PH, PW, divisor,
              KH: tl.constexpr, KW: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr, DH: tl.constexpr,
              DW: tl.constexpr, CH: tl.constexpr, CW: tl.constexpr, OP: tl.constexpr,
              COUNT_PAD: tl.constexpr, HAS_DIV: tl.constexpr, F64: tl.constexpr, I64: tl.constexpr,
              BA: tl.constexpr, BB: tl.constexpr):
    """Tiles of dx (positions x channels, as the forward's); CH x CW candidate outputs an element."""
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    IT: tl.constexpr = tl.int64 if I64 else tl.int32
    ok, n, hi, wi, c = _tile(R, C, H, W, IT, BA, BB)
    oh0 = _cands(hi, PH, KH, SH, DH)
    ow0 = _cands(wi, PW, KW, SW, DW)
    me = hi * W + wi
    gb = g_ptr + n * gn + c * gc
    jb = i_ptr + n * jn + c * jc
    acc = tl.zeros([BA, BB], CT)
    for a in tl.static_range(CH):
        oh = oh0 + a
        vh, fh = _hits(hi, oh, H, PH, OH, KH, SH, DH, COUNT_PAD)
        for e in tl.static_range(CW):
            ow = ow0 + e
            vw, fw = _hits(wi, ow, W, PW, OW, KW, SW, DW, COUNT_PAD)
            valid = ok & vh & vw
            g = tl.load(gb + oh * gh + ow * gw, mask=valid, other=0.0).to(CT)
            if OP == 0:
                j = tl.load(jb + oh * jh + ow * jw, mask=valid, other=-1)
                acc += tl.where(valid & (j == me), g, 0.0)
            elif HAS_DIV:
                acc += g
            else:   # (a candidate outside the window may have a zero divisor factor: masked after the division)
                acc += tl.where(valid, g / (fh * fw).to(CT), 0.0)
    if OP == 1 and HAS_DIV:
        acc = acc / divisor
    xo = n * xn + c * xc + hi * xh + wi * xw
    tl.store(dx_ptr + xo, acc.to(dx_ptr.dtype.element_ty), mask=ok)
