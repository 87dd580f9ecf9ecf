"""grid_sample (+ backward) and affine_grid (+ backward).

grid_sample: one kernel for 2-d and 3-d (ND constexpr; a 2-d problem is D = 1 with one z tap), every mode (MODE 0
bilinear, 1 nearest, 2 bicubic) and padding (PAD 0 zeros, 1 border, 2 reflection).  A program owns BP grid
points x a loop over channel blocks of BC: the coordinates and the T taps of each dim are computed once per
program (``_tap``: torch's unnormalize / clamp / reflect arithmetic in f32, f64 for f64), then every tap reads a
[BP, BC] tile of x with its own strides (NCHW or channels-last in place) and the output tile is written along
the points (coalesced for the contiguous NCHW output torch returns).  An NCHW x with C >= 8 and enough points
(``_staged``) is first copied channels-last into the workspace: a tap's channels become one contiguous vector
instead of C sectors H*W apart (sm_90: the bilinear bf16 channel-block loop 500 -> 336 SASS instructions for
64 x 32 outputs).
Backward: the same walk; dgrid is a channel sum per point (registers: deterministic), dx is scattered with
atomic adds (as torch's CUDA kernel) into an f32 (f64) workspace, channels-last when staged (a tap's adds hit
C contiguous words), cast / permuted into dx once: deterministic=False, said by the plan's precision
(require_deterministic refuses it).
affine_grid: one lane per output coordinate (theta row . (x, y[, z], 1)); backward: one program per (n, row) of
theta folds its grid points in a fixed order (deterministic).
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from ...._core.dtypes import DType
from ...._core.sku import MathPrecision, PrecisionGuarantee
from .._lib.atomics import red_add
from .._lib.geometry import cdiv, next_power_of_2
from .._lib.interp import INTERPRETING, loop
from .._lib.launch import fast_kernel
from .._lib.math import rint
from .._lib.register import register_triton

_MODES = {"bilinear": 0, "nearest": 1, "bicubic": 2}
_PADS = {"zeros": 0, "border": 1, "reflection": 2}
_A: tl.constexpr = tl.constexpr(-0.75)


@triton.jit
def _pad(v, S, PAD: tl.constexpr, ALIGN: tl.constexpr):
    """torch's compute_coordinates (border clamp, reflection then clamp) and its derivative."""
    g = v * 0.0 + 1.0
    if PAD == 2:
        if ALIGN:
            mn = v * 0.0
            span = S - 1.0
        else:
            mn = v * 0.0 - 0.5
            span = S * 1.0
        d = v - mn
        sign = tl.where(d < 0, -1.0, 1.0)
        a = tl.abs(d)
        sp = tl.where(span > 0, span, 1.0)
        flips = tl.floor(a / sp)
        extra = a - flips * sp
        even = (flips - 2.0 * tl.floor(flips * 0.5)) == 0
        v = tl.where(span > 0, tl.where(even, extra + mn, sp - extra + mn), 0.0)
        g = tl.where(span > 0, tl.where(even, sign, -sign), 0.0)
    if PAD >= 1:
        g = tl.where((v <= 0) | (v >= S - 1.0), 0.0, g)
        v = tl.minimum(tl.maximum(v, 0.0), S - 1.0)
    return v, g


@triton.jit
def _cubic(t, K: tl.constexpr):
    """Keys' weight (A = -0.75) of tap K at fraction t, and its derivative in t."""
    if K == 0:
        x = t + 1.0
        w = ((_A * x - 5.0 * _A) * x + 8.0 * _A) * x - 4.0 * _A
        dw = (3.0 * _A * x - 10.0 * _A) * x + 8.0 * _A
    elif K == 1:
        x = t
        w = ((_A + 2.0) * x - (_A + 3.0)) * x * x + 1.0
        dw = (3.0 * (_A + 2.0) * x - 2.0 * (_A + 3.0)) * x
    elif K == 2:
        x = 1.0 - t
        w = ((_A + 2.0) * x - (_A + 3.0)) * x * x + 1.0
        dw = -(3.0 * (_A + 2.0) * x - 2.0 * (_A + 3.0)) * x
    else:
        x = 2.0 - t
        w = ((_A * x - 5.0 * _A) * x + 8.0 * _A) * x - 4.0 * _A
        dw = -((3.0 * _A * x - 10.0 * _A) * x + 8.0 * _A)
    return w, dw


@triton.jit
def _tap(c, S, K: tl.constexpr, MODE: tl.constexpr, PAD: tl.constexpr, ALIGN: tl.constexpr, I64: tl.constexpr):
    """Tap K of grid coordinate c along a dim of size S: (index, weight, d weight / d source, valid, d source / d c)."""
    if ALIGN:
        u = (c + 1.0) * 0.5 * (S - 1.0)
        m0 = (S - 1.0) * 0.5
    else:
        u = ((c + 1.0) * S - 1.0) * 0.5
        m0 = S * 0.5
    if MODE == 2:
        i0 = tl.floor(u)
        w, dw = _cubic(u - i0, K)
        pos, _g = _pad(i0 + (K - 1.0), S, PAD, ALIGN)
        valid = (pos >= 0) & (pos <= S - 1.0)
        idx = tl.where(valid, pos, 0.0).to(tl.int64 if I64 else tl.int32)
        mult = u * 0.0 + m0
    else:
        v, g = _pad(u, S, PAD, ALIGN)
        if MODE == 1:
            f = rint(v)
            w = v * 0.0 + 1.0
            dw = v * 0.0
        else:
            i0 = tl.floor(v)
            fr = v - i0
            f = i0 + K
            if K == 0:
                w = 1.0 - fr
                dw = v * 0.0 - 1.0
            else:
                w = fr
                dw = v * 0.0 + 1.0
        valid = (f >= 0) & (f <= S - 1.0)
        idx = tl.where(valid, f, 0.0).to(tl.int64 if I64 else tl.int32)
        mult = m0 * g
    return idx, w, dw, valid, mult


@triton.jit
def _taps(c, S, T: tl.constexpr, MODE: tl.constexpr, PAD: tl.constexpr, ALIGN: tl.constexpr, I64: tl.constexpr):
    """The T taps of one dim as a 4-tuple of _tap results (the unused entries repeat tap 0, never read)."""
    t0 = _tap(c, S, 0, MODE, PAD, ALIGN, I64)
    t1 = t0
    t2 = t0
    t3 = t0
    if T > 1:
        t1 = _tap(c, S, 1, MODE, PAD, ALIGN, I64)
    if T > 2:
        t2 = _tap(c, S, 2, MODE, PAD, ALIGN, I64)
        t3 = _tap(c, S, 3, MODE, PAD, ALIGN, I64)
    return t0, t1, t2, t3


@triton.jit
def _point(pid, NP, P, P1, P2, I64: tl.constexpr, BP: tl.constexpr):
    if I64:
        offs = pid.to(tl.int64) * BP + tl.arange(0, BP).to(tl.int64)
    else:
        offs = pid * BP + tl.arange(0, BP)
    mask = offs < NP
    n = offs // P
    p = offs % P
    return mask, n, p // (P1 * P2), (p // P2) % P1, p % P2


@fast_kernel
def _gs_kernel(x_ptr, grid_ptr, y_ptr, go_ptr, dx_ptr, dg_ptr, NP, P, C, D, H, W,
               xn, xc, xd, xh, xw, gn, g0, g1, g2, gk, yn, yc, y0, y1, y2, P1, P2,
               dxn, dxc, dxd, dxh, dxw, dgn, dg0, dg1, dg2, dgk,
               ND: tl.constexpr, MODE: tl.constexpr, PAD: tl.constexpr, ALIGN: tl.constexpr, T: tl.constexpr,
               BACKWARD: tl.constexpr, F64: tl.constexpr, I64: tl.constexpr, BP: tl.constexpr, BC: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    mask, n, p0, p1, p2 = _point(tl.program_id(0), NP, P, P1, P2, I64, BP)
    goff = n * gn + p0 * g0 + p1 * g1 + p2 * g2
    cx = tl.load(grid_ptr + goff, mask=mask, other=0.0).to(CT)
    cy = tl.load(grid_ptr + goff + gk, mask=mask, other=0.0).to(CT)
    if ND == 3:
        cz = tl.load(grid_ptr + goff + 2 * gk, mask=mask, other=0.0).to(CT)
    else:
        cz = cx * 0.0
    Sz = (cx * 0.0 + D).to(CT)
    Sy = (cx * 0.0 + H).to(CT)
    Sx = (cx * 0.0 + W).to(CT)
    TZ: tl.constexpr = T if ND == 3 else 1
    # every tap of every dim once per program (T <= 4 per dim), outside the channel and tap-combination loops
    XS = _taps(cx, Sx, T, MODE, PAD, ALIGN, I64)
    YS = _taps(cy, Sy, T, MODE, PAD, ALIGN, I64)
    if ND == 3:
        ZS = _taps(cz, Sz, T, MODE, PAD, ALIGN, I64)
    else:
        one = (n * 0, cx * 0.0 + 1.0, cx * 0.0, mask, cx * 0.0)    # D = 1: one unit tap, no z gradient
        ZS = (one, one, one, one)
    ax = cx * 0.0
    ay = cx * 0.0
    az = cx * 0.0
    for cb in loop(0, tl.cdiv(C, BC)):
        cc = cb * BC + tl.arange(0, BC)
        if I64:
            cc = cc.to(tl.int64)
        cm = cc < C
        yoff = n * yn + p0 * y0 + p1 * y1 + p2 * y2
        if BACKWARD:
            go = tl.load(go_ptr + yoff[:, None] + cc[None, :] * yc, mask=mask[:, None] & cm[None, :],
                         other=0.0).to(CT)
        else:
            acc = tl.zeros([BP, BC], CT)
        for tz in tl.static_range(TZ):
            iz, wz, dwz, vz, mz = ZS[tz]
            for ty in tl.static_range(T):
                iy, wy, dwy, vy, my = YS[ty]
                for tx in tl.static_range(T):
                    ix, wx, dwx, vx, mx = XS[tx]
                    ok = (mask & vz & vy & vx)[:, None] & cm[None, :]
                    xoff = n * xn + iz * xd + iy * xh + ix * xw
                    v = tl.load(x_ptr + xoff[:, None] + cc[None, :] * xc, mask=ok, other=0.0).to(CT)
                    w = wz * wy * wx
                    if BACKWARD:
                        doff = n * dxn + iz * dxd + iy * dxh + ix * dxw
                        red_add(dx_ptr + doff[:, None] + cc[None, :] * dxc,
                                      (w[:, None] * go).to(dx_ptr.dtype.element_ty), mask=ok)
                        gv = tl.sum(go * v, 1)
                        ax += dwx * wy * wz * gv * mx
                        ay += wx * dwy * wz * gv * my
                        az += wx * wy * dwz * gv * mz
                    else:
                        acc += w[:, None] * v
        if not BACKWARD:
            tl.store(y_ptr + yoff[:, None] + cc[None, :] * yc, acc.to(y_ptr.dtype.element_ty),
                     mask=mask[:, None] & cm[None, :])
    if BACKWARD:
        doff = n * dgn + p0 * dg0 + p1 * dg1 + p2 * dg2
        ty_ = dg_ptr.dtype.element_ty
        tl.store(dg_ptr + doff, ax.to(ty_), mask=mask)
        tl.store(dg_ptr + doff + dgk, ay.to(ty_), mask=mask)
        if ND == 3:
            tl.store(dg_ptr + doff + 2 * dgk, az.to(ty_), mask=mask)


def _pad_front(t, k, fill):
    return (fill,) * (k - len(t)) + tuple(t)


def _i64(*ts):
    """int64 offsets when an address can pass 2^31 elements, and under the interpreter (its int32 overflow check costs
    ~1 ms per multiply; int64 has none)."""
    return INTERPRETING or max(sum((d - 1) * abs(s) for d, s in zip(t.shape, t.stride())) for t in ts) >= 2 ** 31 - 2 ** 16


def _gs_geometry(desc):
    x, grid = desc.inputs[:2] if desc.op == "grid_sample" else desc.inputs[1:3]
    nd = len(x.shape) - 2
    mode = desc.attr("mode")
    t = {"bilinear": 2, "nearest": 1, "bicubic": 4}[mode]
    c = x.shape[1]
    # channel block: 32 for the bilinear / nearest forward, 16 with bicubic's 16 taps or the backward's extra tiles
    # (sm_90, 4 warps, BP 64: forward bicubic 120 registers, backward bicubic 220, 3-d bilinear 142; no spills)
    bc = min(next_power_of_2(max(c, 1)), 32 if t < 4 and desc.op == "grid_sample" else 16)
    return nd, t, bc, dict(ND=nd, MODE=_MODES[mode], PAD=_PADS[desc.attr("padding_mode")],
                           ALIGN=desc.attr("align_corners"), T=t, F64=x.dtype == DType.f64)


# points per program: 64 x a channel block of <= 32 on the GPU; under the interpreter one program takes a test's
# whole grid (its cost is per program and op, not per element)
_BP = 256 if INTERPRETING else 64


def _strides5(t, k):
    """(n, [c,] *spatial padded to 3 in front) strides of a (N, [C,] *s) tensor with k leading non-spatial dims."""
    st = t.stride()
    return tuple(st[:k]) + _pad_front(st[k:k + t.dim() - k], 3, 0)


def _staged(desc) -> bool:
    """Whether the kernel reads (and the backward accumulates dx into) a channels-last copy of x instead of x.

    An NCHW x puts a point's channels H*W apart: every (point, channel, tap) is its own 32-byte sector, ~4 KB of
    L2 -> SM traffic per bilinear point at C = 64 (537 MB for [8, 64, 128, 128] with a random 128^2 grid), and the
    backward's dx atomics land one per sector the same way.  A channels-last copy makes a tap's channels one
    contiguous vector (C x 2 bytes bf16): ~8x fewer sectors for a copy of 2 x x.nbytes of plain traffic.  Worth it
    where the taps' gathers outweigh the copy: C >= 8 and at least as many points x taps as x has positions.  (A
    channels-last x is read in place: the run skips the copy, the workspace is sized for it anyway.)"""
    x, grid = desc.inputs[:2] if desc.op == "grid_sample" else desc.inputs[1:3]
    if x.shape[1] < 8:
        return False
    taps = {"bilinear": 2, "nearest": 1, "bicubic": 4}[desc.attr("mode")] ** (len(x.shape) - 2)
    return math.prod(grid.shape[1:-1]) * taps >= math.prod(x.shape[2:])


def _stage_x(x, ws):
    """x itself when channels-last, else its channels-last copy in ws; and the first free byte of ws."""
    if x.stride(1) == 1:
        return x, 0
    xs, off = _ws_view(ws, 0, x.shape, x.dtype)
    xs.copy_(x)
    return xs, off


def _cl_perm(r):
    return (0,) + tuple(range(2, r)) + (1,)


def _ws_view(ws, offset, shape, dtype):
    """A (N, *spatial, C) buffer at ``offset`` bytes of ws, returned as the (N, C, *spatial) channels-last view."""
    n = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
    cl = ws[offset: offset + n].view(dtype).view([shape[i] for i in _cl_perm(len(shape))])
    inv = [0, len(shape) - 1] + list(range(1, len(shape) - 1))
    return cl.permute(inv), offset + -(-n // 256) * 256


def _run_gs(desc, inputs, outputs, ws):
    x, grid = inputs
    y = outputs[0]
    nd, t, bc, kw = _gs_geometry(desc)
    n = x.shape[0]
    pts = tuple(grid.shape[1:-1])
    P = math.prod(pts)
    if y.numel() == 0:
        return
    if _staged(desc):
        x, _ = _stage_x(x, ws)
    sp = _pad_front(x.shape[2:], 3, 1)
    p3 = _pad_front(pts, 3, 1)
    gs = grid.stride()
    gst = (gs[0],) + _pad_front(gs[1:-1], 3, 0) + (gs[-1],)
    _gs_kernel[(cdiv(n * P, _BP),)](x, grid, y, y, y, y, n * P, P, x.shape[1], *sp, *_strides5(x, 2), *gst,
                                    *_strides5(y, 2), p3[1], p3[2], *(0,) * 10, BACKWARD=False, I64=_i64(x, grid, y), BP=_BP, BC=bc,
                                    num_warps=4, **kw)


def _ws_gs(desc):
    x = desc.inputs[0]
    return x.nbytes if _staged(desc) else 0


def _run_gs_bw(desc, inputs, outputs, ws):
    g, x, grid = inputs
    dx, dgrid = outputs
    nd, t, bc, kw = _gs_geometry(desc)
    n = x.shape[0]
    pts = tuple(grid.shape[1:-1])
    P = math.prod(pts)
    staged = _staged(desc)
    off = 0
    if staged and dx.numel():
        x, off = _stage_x(x, ws)
    # dx accumulates in f32 (half types) and, staged, channels-last: a workspace, cast / permuted into dx once
    wide = torch.float64 if dx.dtype == torch.float64 else torch.float32
    if dx.numel() and (staged or dx.dtype != wide):
        acc, _ = _ws_view(ws, off, dx.shape, wide) if staged else (
            ws[: dx.numel() * 4].view(torch.float32).view(dx.shape), 0)
    else:
        acc = dx
    acc.zero_()
    if dgrid.numel() == 0 or x.shape[1] == 0:
        dgrid.zero_()
        if acc is not dx:
            dx.copy_(acc)
        return
    sp = _pad_front(x.shape[2:], 3, 1)
    p3 = _pad_front(pts, 3, 1)
    gs, ds = grid.stride(), dgrid.stride()
    gst = (gs[0],) + _pad_front(gs[1:-1], 3, 0) + (gs[-1],)
    dgst = (ds[0],) + _pad_front(ds[1:-1], 3, 0) + (ds[-1],)
    _gs_kernel[(cdiv(n * P, _BP),)](x, grid, g, g, acc, dgrid, n * P, P, x.shape[1], *sp, *_strides5(x, 2), *gst,
                                    *_strides5(g, 2), p3[1], p3[2], *_strides5(acc, 2), *dgst, BACKWARD=True,
                                    I64=_i64(x, grid, g, acc),
                                    BP=_BP, BC=bc, num_warps=4, **kw)
    if acc is not dx:
        dx.copy_(acc)


def _ws_gs_bw(desc):
    x = desc.inputs[1]
    wide = 8 if x.dtype == DType.f64 else 4
    if _staged(desc):
        return -(-x.nbytes // 256) * 256 + wide * x.numel
    return 4 * x.numel if x.dtype in (DType.f16, DType.bf16) else 0


def _atomic_precision(desc, pref=None):
    f64 = desc.dtype == DType.f64
    return PrecisionGuarantee(MathPrecision.F64 if f64 else MathPrecision.F32, DType.f64 if f64 else DType.f32,
                              False, False)


register_triton("grid_sample", _run_gs, workspace=_ws_gs, route="triton:grid_sample:taps")
register_triton("grid_sample_backward", _run_gs_bw, workspace=_ws_gs_bw, precision=_atomic_precision,
                route="triton:grid_sample_backward:taps(atomic dx)")


# -- affine_grid ---------------------------------------------------------------------------------------------------
@triton.jit
def _base(j, S, ALIGN: tl.constexpr):
    """torch's linspace(-1, 1, S) (times (S - 1)/S without align_corners) at integer j; 0 for S = 1."""
    Sf = S * 1.0
    v = -1.0 + 2.0 * j / tl.maximum(Sf - 1.0, 1.0)
    if not ALIGN:
        v = v * (Sf - 1.0) / Sf
    return tl.where(Sf > 1.0, v, 0.0)


@fast_kernel
def _ag_kernel(th_ptr, out_ptr, total, D, H, W, tn, ti, tk, ND: tl.constexpr, ALIGN: tl.constexpr,
               F64: tl.constexpr, BLOCK: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < total
    i = offs % ND
    p = offs // ND
    w = p % W
    h = (p // W) % H
    d = (p // (W * H)) % D
    n = p // (W * H * D)
    tb = th_ptr + n * tn + i * ti
    acc = tl.load(tb, mask=mask, other=0.0).to(CT) * _base(w.to(CT), W, ALIGN)
    acc += tl.load(tb + tk, mask=mask, other=0.0).to(CT) * _base(h.to(CT), H, ALIGN)
    if ND == 3:
        acc += tl.load(tb + 2 * tk, mask=mask, other=0.0).to(CT) * _base(d.to(CT), D, ALIGN)
    acc += tl.load(tb + ND * tk, mask=mask, other=0.0).to(CT)
    tl.store(out_ptr + offs, acc.to(out_ptr.dtype.element_ty), mask=mask)


@fast_kernel
def _ag_bw_kernel(g_ptr, out_ptr, P, D, H, W, gn, gd, gh, gw, gk, ND: tl.constexpr, ALIGN: tl.constexpr,
                  F64: tl.constexpr, BLOCK: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    row = tl.program_id(0)
    n = row // ND
    i = row % ND
    sx = tl.zeros([BLOCK], CT)
    sy = tl.zeros([BLOCK], CT)
    sz = tl.zeros([BLOCK], CT)
    s1 = tl.zeros([BLOCK], CT)
    for b in loop(0, tl.cdiv(P, BLOCK)):
        p = b * BLOCK + tl.arange(0, BLOCK)
        m = p < P
        w = p % W
        h = (p // W) % H
        d = p // (W * H)
        g = tl.load(g_ptr + n * gn + d * gd + h * gh + w * gw + i * gk, mask=m, other=0.0).to(CT)
        sx += g * _base(w.to(CT), W, ALIGN)
        sy += g * _base(h.to(CT), H, ALIGN)
        sz += g * _base(d.to(CT), D, ALIGN)
        s1 += g
    K: tl.constexpr = ND + 1
    ob = out_ptr + n * (ND * K) + i * K
    ty = out_ptr.dtype.element_ty
    tl.store(ob, tl.sum(sx, 0).to(ty))
    tl.store(ob + 1, tl.sum(sy, 0).to(ty))
    if ND == 3:
        tl.store(ob + 2, tl.sum(sz, 0).to(ty))
    tl.store(ob + ND, tl.sum(s1, 0).to(ty))


def _ag_dims(desc):
    size = desc.attr("size")
    nd = len(size) - 2
    return nd, _pad_front(size[2:], 3, 1), desc.attr("align_corners"), desc.dtype == DType.f64


def _run_ag(desc, inputs, outputs, ws):
    theta, out = inputs[0], outputs[0]
    nd, (D, H, W), align, f64 = _ag_dims(desc)
    total = out.numel()
    if total == 0:
        return
    # the kernel writes the (N, *spatial, nd) grid densely: a strided out= gets a contiguous temporary
    dst = out if out.is_contiguous() else torch.empty_like(out, memory_format=torch.contiguous_format)
    _ag_kernel[(cdiv(total, 1024),)](theta, dst, total, D, H, W, *theta.stride(), ND=nd, ALIGN=align, F64=f64,
                                     BLOCK=1024, num_warps=4)
    if dst is not out:
        out.copy_(dst)


def _run_ag_bw(desc, inputs, outputs, ws):
    g, theta = inputs
    out = outputs[0]
    nd, (D, H, W), align, f64 = _ag_dims(desc)
    n = theta.shape[0]
    if out.numel() == 0:
        return
    dst = out if out.is_contiguous() else torch.empty_like(out, memory_format=torch.contiguous_format)
    st = g.stride()
    _ag_bw_kernel[(n * nd,)](g, dst, D * H * W, D, H, W, st[0], *_pad_front(st[1:-1], 3, 0), st[-1], ND=nd,
                             ALIGN=align, F64=f64, BLOCK=min(1024, next_power_of_2(max(D * H * W, 16))),
                             num_warps=4)
    if dst is not out:
        out.copy_(dst)


register_triton("affine_grid", _run_ag, route="triton:affine_grid")
register_triton("affine_grid_backward", _run_ag_bw, route="triton:affine_grid_backward:ordered-fold")
