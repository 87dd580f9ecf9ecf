"""Registration and launch of the pooling kernels (kernels.py): every pooling op, its backward, max_unpool.

No operand is copied: every kernel takes the strides of every tensor.  A drop-in call's outputs are allocated in
the input's memory format (``produce``: torch's rule, ops/_common.py: suggest_channels_last), so a channels-last
network stays channels-last; the Plan API's given or default (contiguous) outputs are written as they are.
Traffic: the forward reads each input element once per window holding it (3x3 s2: ~2.25 reads, L1/L2 hits
beyond the first) and writes y (+ int64 indices for max); the backward reads grad (+ indices) per candidate window
(3x3 s2: 4 per input element, cache hits) and writes dx once.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ...._core.dtypes import FLOAT_TYPES, DType
from ...._core.spec import Descriptor
from ....ops._common import suggest_channels_last
from ....ops.pool import (POOL_BACKWARD_OPS, UNPOOL_OPS, WINDOW_POOL_OPS, frac_sample_index,
                         window_of)
from ... import with_produce
from .._lib.geometry import cdiv, next_power_of_2
from .._lib.register import register_triton
from .._lib.scalars import split_f64
from ..reduction import reduce as _reduce
from .kernels import pool_bw, pool_bw_taps, pool_fw, pool_fw_taps, unpool
from .tile import pool2d_bw, pool2d_bw_wl, pool2d_fw, pool2d_fw_wl

_BLOCK = 256
_UNROLL = 64          # taps up to which a forward window is unrolled (3x3 = 9, 3x3x3 = 27, a 7x7 -> 1 global average = 49)
_UNROLL_BW = 27       # candidate outputs up to which the backward is unrolled (measured to 3x3x3: session 6, run 14)
_TAPS_BLOCK = 512
_MODE = {"sliding": 0, "adaptive": 1, "fractional": 2}
_I32 = 2 ** 31 - 1


def _dims(t, nd):
    """(sizes, strides) of t as (N, C, D, H, W): missing spatial dims size 1 stride 0, an unbatched tensor N = 1."""
    sh, st = list(t.shape), list(t.stride())
    if len(sh) == nd + 1:
        sh, st = [1] + sh, [0] + st
    pad = 3 - nd
    return sh[:2] + [1] * pad + sh[2:], st[:2] + [0] * pad + st[2:]


def _pad3(v, nd, fill):
    return (fill,) * (3 - nd) + tuple(v)


def _cl(sizes, strides) -> bool:
    """Whether the written tensor keeps the channels innermost (the lanes then run over C)."""
    return sizes[1] > 1 and strides[1] == 1


def _i64(*ts) -> bool:
    return any(t.numel() > _I32 or sum((s - 1) * abs(st) for s, st in zip(t.shape, t.stride())) > _I32 for t in ts)


def _window(desc, sp, out):
    """The descriptor's window, an adaptive one that divides its input (every L % O == 0, 28 -> 7) as the sliding
    window it is (k = s = L / O, no padding: the same taps, indices and divisors), which the tile kernel runs."""
    w = window_of(desc)
    if w.kind == "adaptive" and all(O and L % O == 0 for L, O in zip(sp[3 - w.nd:], out[3 - w.nd:])):
        k = tuple(L // O for L, O in zip(sp[3 - w.nd:], out[3 - w.nd:]))
        w = type(w)((w.nd, "sliding", k, k, (0,) * w.nd, (1,) * w.nd))
    return w


def _tile(sizes, strides, elems: int):
    """(W-lanes, rows, BA, BB, grid) of the 2-d tile kernels (tile.py) writing a (N, C, 1, H, W) tensor:
    channels-last, rows (n, h, w) x BB channels; else W-lanes, BA of the width x rows (n, c, h).  ``elems``
    elements a program channels-last (8 a thread at 4 warps; fewer where f64 or lp's pow would spill), half that
    W-lanes."""
    n, c, _, h, w = sizes
    if _cl(sizes, strides):
        bb = min(next_power_of_2(max(c, 1)), 64, elems)
        ba = max(1, elems // bb)
        return False, n * h * w, ba, bb, (cdiv(n * h * w, ba), cdiv(c, bb))
    elems //= 2         # (4 a thread: 8 took 114-128 registers, a quarter of the SM's warps)
    ba = min(next_power_of_2(max(w, 1)), 128, elems)
    bb = max(1, elems // ba)
    return True, n * c * h, ba, bb, (cdiv(n * c * h, bb), cdiv(w, ba))


class _Problem(NamedTuple):
    w: object        # the window (an adaptive one that divides its input: the sliding one, _window)
    sp: tuple        # input spatial sizes as (D, H, W)
    out: tuple       # output spatial sizes as (D, H, W)
    k: tuple         # taps / stride / padding / dilation per (D, H, W)
    s: tuple
    p: tuple
    d: tuple
    loops: tuple     # the forward's tap loop counts (KD, KH, KW)
    cand: tuple      # the backward's candidate outputs per dim
    tile: bool       # the 2-d tile kernels run it (sliding, <= 2 dims, within their unroll)


def _problem(desc) -> _Problem:
    """The geometry of a window pooling op or of its backward, computed once per plan (bind and route)."""
    bw = desc.op.endswith("_backward")
    nd = window_of(desc).nd
    x, y = (desc.inputs[1], desc.inputs[0]) if bw else (desc.inputs[0], desc.outputs[0])
    sp, out = _pad3(x.shape[-nd:], nd, 1), _pad3(y.shape[-nd:], nd, 1)
    w = _window(desc, sp, out)
    k, s, p, d = (_pad3(v, nd, f) for v, f in ((w.k, 1), (w.s, 1), (w.p, 0), (w.d, 1)))
    if w.kind == "adaptive":
        loops = tuple(max(((o + 1) * L + O - 1) // O - (o * L) // O for o in range(O)) if O else 1
                      for L, O in zip(sp, out))
        cand = tuple(min(cdiv(O, L) + 1, O) for L, O in zip(sp, out))
    else:
        loops = k
        cand = tuple(min(((kk - 1) * dd) // ss + 1, O) for kk, ss, dd, O in zip(k, s, d, out))
    unrolls = cand[1] * cand[2] <= _UNROLL_BW if bw else k[1] * k[2] <= _UNROLL
    return _Problem(w, sp, out, k, s, p, d, loops, cand, w.kind == "sliding" and nd <= 2 and unrolls)


def _tiles(taps: int):
    """(lanes, taps per chunk) of a [BLOCK, TB] tile: every tap of a window up to 64 in one chunk (3x3: 16 slots,
    3x3x3: 32, adaptive 7x7 -> 1: 64), ~4096 elements a program."""
    tb = min(next_power_of_2(max(taps, 1)), 64)
    return max(16, min(256, 4096 // tb)), tb


def _with_produce(run, desc, like: int = 0):
    """``run`` plus ``run.produce``: the drop-in's outputs allocated in input ``like``'s memory format."""
    return with_produce(run, desc, lambda xs: suggest_channels_last(xs[like]), like)


def _global_mean(desc):
    """An adaptive average pooling to 1 x ... x 1 (a CNN's global-average head), or its backward, as the reduction
    family's descriptor of the same computation: ``mean`` over the spatial dims (keepdim), whose bound kernel reads
    each element once with full-width loads (the pooling kernels gather one window per lane: 0.42x torch on
    ResNet-50's [64, 2048, 7, 7] head, session 6), or ``mean_backward``'s broadcast.  None for any other pooling."""
    if desc.op == "avg_pool_backward":
        w, g, x = window_of(desc), desc.inputs[0], desc.inputs[1]
        if w.kind != "adaptive" or any(v != 1 for v in g.shape[-w.nd:]) or not math.prod(x.shape):
            return None
        dims = tuple(range(len(x.shape) - w.nd, len(x.shape)))
        return Descriptor.make("mean_backward", g, shape=x.shape, dims=dims, keepdim=True, dtype=x.dtype)
    if not desc.op.startswith("adaptive_avg_pool"):
        return None
    x, nd = desc.inputs[0], window_of(desc).nd
    if any(v != 1 for v in desc.outputs[0].shape[-nd:]) or not math.prod(x.shape):
        return None
    return Descriptor.make("mean", x, dims=tuple(range(len(x.shape) - nd, len(x.shape))), keepdim=True)


def _bind_global_mean(desc, mdesc):
    run = (_reduce._bind if mdesc.op == "mean" else _reduce._bind_broadcast)(mdesc)

    def global_mean(desc_, inputs, outputs, ws):
        run(mdesc, inputs[:1], outputs[:1], ws)
    return _with_produce(global_mean, desc, like=0 if mdesc.op == "mean" else 1)


def _global_or(desc, run, tile: bool, like: int):
    """The plan's run: ``run`` (the pooling kernels), or for a global average its reduction-family route
    (_global_mean) -- except on a channels-last tensor with a window the tile kernel unrolls (ResNet's 7 x 7 head):
    there the reduction reads each channel's 49 values 2C bytes apart (47 us against torch's 26 for [64, 2048, 7, 7]
    bf16 on the H200) where the tile kernel's taps are contiguous channel vectors."""
    m = _global_mean(desc)
    if m is None:
        return _with_produce(run, desc, like)
    mean = _bind_global_mean(desc, m)
    if not tile:
        return mean
    nd = window_of(desc).nd

    def either(desc_, inputs, outputs, ws):
        if _cl(*_dims(inputs[like], nd)):
            return run(desc_, inputs, outputs, ws)
        return mean(desc_, inputs, outputs, ws)
    return _with_produce(either, desc, like)


def _workspace(desc):
    m = _global_mean(desc)
    return _reduce._workspace(m) if m is not None and m.op == "mean" else 0


def _route(desc, pref):
    m = _global_mean(desc)
    if m is None:
        return f"triton:{desc.op}"
    inner = (_reduce._route if m.op == "mean" else _reduce._route_broadcast)(m, pref)
    tiled = "; channels-last: the 2-d tile" if _problem(desc).tile else ""
    return f"triton:{desc.op}(global mean: {inner.removeprefix('triton:')}{tiled})"


def _bind_fw(desc, pref=None):
    nd = window_of(desc).nd
    op = desc.op
    x_spec = desc.inputs[0]
    is_max = "max" in op
    OP = 0 if is_max else 2 if op.startswith("lp_pool") else 1
    a = desc.attr_dict
    f64 = x_spec.dtype == DType.f64
    floating = x_spec.dtype.is_floating
    div = a.get("divisor_override")
    p_hi, p_lo = split_f64(a["norm_type"]) if OP == 2 else (0.0, 0.0)
    w, sp, out, k, s, p, d, loops, _, tile = _problem(desc)
    ui = [(frac_sample_index(nd, j)) for j in range(nd)]
    low = float("-inf") if floating else int(np.iinfo(x_spec.dtype.numpy).min)
    block, tb = _tiles(math.prod(loops))
    # a sliding or adaptive window of up to _UNROLL taps: the tap-unrolled kernel (KD / KH / KW compile-time)
    taps = w.kind in ("sliding", "adaptive") and math.prod(loops) <= _UNROLL

    def run(desc_, inputs, outputs, ws):
        x = inputs[0]
        y = outputs[0]
        ix = outputs[1] if is_max else y
        xs_, xst = _dims(x, nd)
        ys_, yst = _dims(y, nd)
        _, jst = _dims(ix, nd)
        total = y.numel()
        if total == 0:
            return
        if tile:
            wl, rows, ba, bb, grid = _tile(ys_, yst, 256 if f64 and OP == 2 else 512 if f64 else 1024)
            (pool2d_fw_wl if wl else pool2d_fw)[grid](
                x, y, ix, rows, ys_[1], *sp[1:], *out[1:], xst[0], xst[1], *xst[3:], yst[0], yst[1],
                *yst[3:], jst[0], jst[1], *jst[3:], *p[1:], div or 1, p_hi, p_lo, KH=k[1], KW=k[2], SH=s[1],
                SW=s[2], DH=d[1], DW=d[2], OP=OP, WL=wl, COUNT_PAD=a.get("count_include_pad", True),
                HAS_DIV=div is not None, FLOAT=floating, F64=f64, I64=_i64(x, y, ix), LOW=low, BA=ba, BB=bb,
                num_warps=4)
            return
        if taps:
            pool_fw_taps[(cdiv(total, _TAPS_BLOCK),)](
                x, y, ix, total, ys_[1], *sp, *out, *xst, *yst, *jst, *s, *p, *d, div or 1, p_hi, p_lo,
                KD=loops[0], KH=loops[1], KW=loops[2], MODE=_MODE[w.kind], OP=OP, CL=_cl(ys_, yst),
                COUNT_PAD=a.get("count_include_pad", True),
                HAS_DIV=div is not None, FLOAT=floating, F64=f64, I64=_i64(x, y, ix), LOW=low, BLOCK=_TAPS_BLOCK,
                num_warps=4)
            return
        if w.kind == "fractional":
            u = inputs[1]
            un, uc, uk = u.stride()
            uoff = _pad3([ui[j] * uk for j in range(nd)], nd, 0)
            if x.dim() == nd + 1:
                un = 0
        else:
            u, un, uc, uoff = x, 0, 0, (0, 0, 0)
        pool_fw[(cdiv(total, block),)](
            x, u, y, ix, total, ys_[1], *sp, *out, *xst, *yst, *jst, un, uc, *uoff, *k, *s, *p, *d, *loops,
            div or 1, p_hi, p_lo, MODE=_MODE[w.kind], OP=OP, CL=_cl(ys_, yst), COUNT_PAD=a.get("count_include_pad", True),
            HAS_DIV=div is not None, FLOAT=floating, F64=f64, I64=_i64(x, y, ix), LOW=low, BLOCK=block, TB=tb,
            num_warps=4)
    return _global_or(desc, run, tile, like=0)


def _bind_bw(desc, pref=None):
    nd = window_of(desc).nd
    a = desc.attr_dict
    is_max = desc.op == "max_pool_backward"
    f64 = desc.inputs[1].dtype == DType.f64
    div = a.get("divisor_override")
    w, sp, out, k, s, p, d, _, cand, tile = _problem(desc)
    block, tb = _tiles(math.prod(cand))
    taps = w.kind in ("sliding", "adaptive") and math.prod(cand) <= _UNROLL_BW

    def run(desc_, inputs, outputs, ws):
        g = inputs[0]      # (inputs[1], x, gives the shapes only: they are in the descriptor)
        ix = inputs[2] if is_max else g
        dx = outputs[0]
        total = dx.numel()
        if total == 0:
            return
        xs_, xst = _dims(dx, nd)
        _, gst = _dims(g, nd)
        _, jst = _dims(ix, nd)
        if tile:
            wl, rows, ba, bb, grid = _tile(xs_, xst, 512 if f64 else 1024)
            (pool2d_bw_wl if wl else pool2d_bw)[grid](
                g, ix, dx, rows, xs_[1], *sp[1:], *out[1:], gst[0], gst[1], *gst[3:], jst[0], jst[1],
                *jst[3:], xst[0], xst[1], *xst[3:], *p[1:], div or 1, KH=k[1], KW=k[2], SH=s[1], SW=s[2],
                DH=d[1], DW=d[2], CH=cand[1], CW=cand[2], OP=0 if is_max else 1, WL=wl,
                COUNT_PAD=a.get("count_include_pad", True), HAS_DIV=div is not None, F64=f64,
                I64=_i64(g, dx, ix), BA=ba, BB=bb, num_warps=4)
            return
        if taps:
            pool_bw_taps[(cdiv(total, _TAPS_BLOCK),)](
                g, ix, dx, total, xs_[1], *sp, *out, *gst, *jst, *xst, *k, *s, *p, *d, div or 1,
                KD=cand[0], KH=cand[1], KW=cand[2], MODE=_MODE[w.kind], OP=0 if is_max else 1, CL=_cl(xs_, xst),
                COUNT_PAD=a.get("count_include_pad", True), HAS_DIV=div is not None, F64=f64, I64=_i64(g, dx, ix),
                BLOCK=_TAPS_BLOCK, num_warps=4)
            return
        pool_bw[(cdiv(total, block),)](
            g, ix, dx, total, xs_[1], *sp, *out, *gst, *jst, *xst, *k, *s, *p, *d, *cand, div or 1,
            MODE=_MODE[w.kind], OP=0 if is_max else 1, CL=_cl(xs_, xst), COUNT_PAD=a.get("count_include_pad", True),
            HAS_DIV=div is not None, F64=f64, I64=_i64(g, dx, ix), BLOCK=block, TB=tb, num_warps=4)
    return _global_or(desc, run, tile, like=1)


def _bind_unpool(desc, pref=None):
    nd = int(desc.op[-2])
    sp = _pad3(desc.inputs[0].shape[-nd:], nd, 1)
    out = _pad3(desc.outputs[0].shape[-nd:], nd, 1)

    def run(desc_, inputs, outputs, ws):
        x, ix = inputs
        y = outputs[0]
        ys_, yst = _dims(y, nd)
        xs_, xst = _dims(x, nd)
        _, jst = _dims(ix, nd)
        i64 = _i64(x, ix, y)
        for zero, total, cl in ((True, y.numel(), _cl(ys_, yst)), (False, x.numel(), _cl(xs_, xst))):
            if total:
                unpool[(cdiv(total, _BLOCK),)](x, ix, y, total, xs_[1], *sp, *out, *xst, *jst, *yst, ZERO=zero,
                                               CL=cl, I64=i64, BLOCK=_BLOCK, num_warps=4)
    return run


def _reg(op, bind):
    if op.startswith("avg_pool"):       # (int64 average pooling: the reference backend's, as torch's CPU)
        register_triton(op, bind=bind, route=_route, workspace=_workspace, dtypes=frozenset(FLOAT_TYPES),
                        dtypes_note="integer average pooling runs on the reference backend (torch's CUDA kernels "
                                    "refuse it too)")
    else:
        register_triton(op, bind=bind, route=_route, workspace=_workspace)


for _op in WINDOW_POOL_OPS:
    _reg(_op, _bind_fw)
for _op in UNPOOL_OPS:
    _reg(_op, _bind_unpool)
for _op in POOL_BACKWARD_OPS:
    _reg(_op, _bind_bw)
