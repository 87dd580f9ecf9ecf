"""2-d sliding-window pooling on tiles, the window geometry at compile time.

The N-d kernels (kernels.py) give every lane one output, unravel it on its own (three divisions) and check each
tap against runtime strides: ~240 SASS instructions an output of a 3x3 s2 max pool (sm_90, offline).  Here a
program owns a [BA, BB] tile:
    C-lanes (channels-last): BA (n, h, w) positions, unravelled once a row, x BB channels along the lanes: every
             tap loads a contiguous channel vector;
    W-lanes (any other layout): BA of the width along dim 0, one output a lane, x BB rows (n, c, h) unravelled once
             each (see the note on the kernels' two instances at the end).
The kernel size, stride and dilation are constexprs (a 3x3 s2 window compiles to shifts and immediates) and each
tap's mask and offset are a row part plus a lane part.  Sliding windows only (an adaptive window that divides its
input is the sliding window k = s = L / O: pool.py rewrites it before it gets here); 1-d pooling runs as H = 1.
H200 (session 19, bf16 [64, 64, 112, 112] channels-last): max / avg 3x3 s2 backward 211 -> 145 / 188 -> 102 us.

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
from .kernels import _bw_store, _bw_term, _covers, _first, _fw_store


@triton.jit
def _tile(R, C, P, Q, WL: tl.constexpr, IT: tl.constexpr, BA: tl.constexpr, BB: tl.constexpr):
    """The program's tile and its mask: (ok, n, p, q, c), each broadcastable to the tile.  C-lanes ([BA, BB]): rows
    (n, p, q) over the P x Q positions of a batch element down dim 0 (a [BA, 1] unravel), channels along dim 1.
    W-lanes ([BA, BB], WL): the width q along dim 0, rows (n, c, p) along dim 1 ([1, BB]); grid axis 0 runs over the
    rows in both (the longer one: past 65535 blocks), axis 1 over the lanes' blocks."""
    r = tl.program_id(0).to(IT)
    b = tl.program_id(1).to(IT)
    if WL:          # (one return after the branches: a device function's returns must agree in type)
        q = b * BA + tl.arange(0, BA).to(IT)
        a = r * BB + tl.arange(0, BB).to(IT)
        t = a // P
        ok = (q < Q)[:, None] & (a < R)[None, :]
        n, p, q, c = (t // C)[None, :], (a % P)[None, :], q[:, None], (t % C)[None, :]
    else:
        a = r * BA + tl.arange(0, BA).to(IT)
        c = b * BB + tl.arange(0, BB).to(IT)
        t = a // Q
        ok = (a < R)[:, None] & (c < C)[None, :]
        n, p, q, c = (t // P)[:, None], (t % P)[:, None], (a % Q)[:, None], c[None, :]
    return ok, n.to(tl.int64), p, q, c.to(tl.int64)


def _pool2d_fw(x_ptr, y_ptr, i_ptr, R, C, H, W, OH, OW, xn, xc, xh, xw, yn, yc, yh, yw, jn, jc, jh, jw,
              PH, PW, divisor, p_hi, p_lo,
              KH: tl.constexpr, KW: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr, DH: tl.constexpr,
              DW: tl.constexpr, OP: tl.constexpr, WL: tl.constexpr, COUNT_PAD: tl.constexpr, HAS_DIV: tl.constexpr,
              FLOAT: tl.constexpr, F64: tl.constexpr, I64: tl.constexpr, LOW: tl.constexpr, BA: tl.constexpr,
              BB: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    IT: tl.constexpr = tl.int64 if I64 else tl.int32
    ok, n, oh, ow, c = _tile(R, C, OH, OW, WL, IT, BA, BB)
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
    th = arg // KW      # (the winner's flat in-plane index, torch's; -1 where no tap was inside the input)
    flat = tl.where(arg < 0, -1, (h0 + th * DH) * W + (w0 + (arg - th * KW) * DW))
    _fw_store(y_ptr, i_ptr, m, flat, acc, ok, n, c, 0, oh, ow, yn, yc, 0, yh, yw, jn, jc, 0, jh, jw,
              0, 1, h0, KH, w0, KW, 1, H, W, 1, KH, KW, 0, PH, PW, divisor, pw_, 0, OP, COUNT_PAD, HAS_DIV, CT)


def _pool2d_bw(g_ptr, i_ptr, dx_ptr, R, C, H, W, OH, OW, gn, gc, gh, gw, jn, jc, jh, jw, xn, xc, xh, xw,
              PH, PW, divisor,
              KH: tl.constexpr, KW: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr, DH: tl.constexpr,
              DW: tl.constexpr, CH: tl.constexpr, CW: tl.constexpr, OP: tl.constexpr, WL: tl.constexpr,
              COUNT_PAD: tl.constexpr, HAS_DIV: tl.constexpr, F64: tl.constexpr, I64: tl.constexpr,
              BA: tl.constexpr, BB: tl.constexpr):
    """Tiles of dx (positions x channels, as the forward's); CH x CW candidate outputs an element."""
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    IT: tl.constexpr = tl.int64 if I64 else tl.int32
    ok, n, hi, wi, c = _tile(R, C, H, W, WL, IT, BA, BB)
    oh0 = _first(hi, H, OH, KH, SH, PH, DH, 0)
    ow0 = _first(wi, W, OW, KW, SW, PW, DW, 0)
    me = hi * W + wi
    gb = g_ptr + n * gn + c * gc
    jb = i_ptr + n * jn + c * jc
    acc = tl.zeros([BA, BB], CT)
    for a in tl.static_range(CH):
        oh = oh0 + a
        vh, fh = _covers(hi, oh, H, OH, KH, SH, PH, DH, 0, COUNT_PAD)
        for e in tl.static_range(CW):
            ow = ow0 + e
            vw, fw = _covers(wi, ow, W, OW, KW, SW, PW, DW, 0, COUNT_PAD)
            acc += _bw_term(gb, jb, 0, oh, ow, 0, gh, gw, 0, jh, jw, me, ok & vh & vw, fh * fw, OP, HAS_DIV, CT)
    _bw_store(dx_ptr, acc, ok, n, c, 0, hi, wi, xn, xc, 0, xh, xw, divisor, OP, HAS_DIV)


# Each kernel twice (see fast_kernel): C-lanes as Triton specializes it, W-lanes with the width strides never
# specialized (one output a lane; specialized, a thread's 8 adjacent stride-2 gathers ran 1.3-1.7x slower on the H200).
pool2d_fw = fast_kernel(_pool2d_fw)
pool2d_fw_wl = fast_kernel(do_not_specialize=["xw", "yw", "jw"])(_pool2d_fw)
pool2d_bw = fast_kernel(_pool2d_bw)
pool2d_bw_wl = fast_kernel(do_not_specialize=["gw", "jw", "xw"])(_pool2d_bw)
