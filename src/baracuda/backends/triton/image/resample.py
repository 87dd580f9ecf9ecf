"""interpolate / interpolate_backward: separable tap kernels for every mode, 1-d to 3-d, any strides.

Every mode is a per-dim matrix (ops/image.py: interp_matrix); its sparse rows become tap tables (index int32,
weight f32 — f64 for f64 inputs) of T_d taps per output index, built once per plan on the host from the same
float64 definition as the reference and uploaded once per device (a few KB: (out_d x T_d) per dim).  The backward
runs the same kernels on grad with the TRANSPOSED tables (per input index, the output indices that read it and
their weights): a gather, deterministic, no atomics, no zero fill.

Two kernels:
- ``_tile2_kernel`` (1-d and 2-d, the common case; tap counts constexpr, at most 64 taps per output): a program
  owns a [BP planes x BW output columns] tile of ONE output row.  The row's taps are scalars (loaded once per
  program), the column taps [BW] vectors from the transposed (T, out) table (contiguous: 16-byte loads), each
  shared by the BP planes; no per-element index arithmetic beyond the tap's address add.  NCHW: the planes are
  the flattened (n, c) pairs (a C = 3 image batch fills the tile too) and the output row is written along the
  columns; channels-last: the planes are the channels of one sample, contiguous, so the gathers and the store go
  along c.  int32 offsets where the reach fits.  Per output and tap: one address add, one load, one convert, one
  FMA (the old per-element kernel spent ~240 SASS instructions per bilinear output on the 5-d unravel and the
  per-tap table loads; this one ~25, see tests/image/test_image_sm90.py).
- ``_sep_kernel`` (3-d, wide antialias / area windows): one output element per lane, (n, c, o0, o1, o2) unravelled
  in the output's memory order (CL: channels last), sum_{t0, t1, t2} w0 w1 w2 x[n, c, i0, i1, i2] with x's own
  strides; runtime tap counts.
"""
from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

from ...._core.dtypes import DType
from ....ops.image import interp_matrices, interp_tables
from .._lib.geometry import cdiv, next_power_of_2
from .._lib.interp import INTERPRETING, loop
from .._lib.launch import fast_kernel
from .._lib.register import register_triton
from .._lib.strided import flat_offsets, unravel

_BLOCK = 2048 if INTERPRETING else 256    # (the interpreter's cost is per program and op: fewer programs there)
_LIMIT = 2 ** 31 - 2 ** 16
# (int64 offsets under the interpreter too: its int32 overflow check costs ~1 ms per multiply, int64 has none)


@fast_kernel
def _sep_kernel(x_ptr, y_ptr, i0_ptr, w0_ptr, i1_ptr, w1_ptr, i2_ptr, w2_ptr, total, C, O0, O1, O2,
                xn, xc, x0, x1, x2, yn, yc, y0, y1, y2, T0, T1, T2,
                CL: tl.constexpr, I64: tl.constexpr, BLOCK: tl.constexpr):
    offs, mask = flat_offsets(total, I64, BLOCK)
    if CL:      # output element order (n, o0, o1, o2, c) or (n, c, o0, o1, o2); a size-1 dim specializes away
        n, _, o0, o1, o2, c = unravel(offs, 1, O0, O1, O2, C)
    else:
        n, _, c, o0, o1, o2 = unravel(offs, 1, C, O0, O1, O2)
    base = n * xn + c * xc
    acc = tl.zeros([BLOCK], w0_ptr.dtype.element_ty)
    for t0 in loop(0, T0):
        j0 = tl.load(i0_ptr + o0 * T0 + t0, mask=mask, other=0).to(offs.dtype)
        v0 = tl.load(w0_ptr + o0 * T0 + t0, mask=mask, other=0.0)
        for t1 in loop(0, T1):
            j1 = tl.load(i1_ptr + o1 * T1 + t1, mask=mask, other=0).to(offs.dtype)
            v1 = v0 * tl.load(w1_ptr + o1 * T1 + t1, mask=mask, other=0.0)
            for t2 in loop(0, T2):
                j2 = tl.load(i2_ptr + o2 * T2 + t2, mask=mask, other=0).to(offs.dtype)
                v = v1 * tl.load(w2_ptr + o2 * T2 + t2, mask=mask, other=0.0)
                xv = tl.load(x_ptr + base + j0 * x0 + j1 * x1 + j2 * x2, mask=mask, other=0)
                acc += v * xv.to(acc.dtype)
    tl.store(y_ptr + n * yn + c * yc + o0 * y0 + o1 * y1 + o2 * y2, acc.to(y_ptr.dtype.element_ty), mask=mask)


def _tile2_kernel(x_ptr, y_ptr, ih_ptr, wh_ptr, iw_ptr, ww_ptr, NP, C, OH, OW, n_pb, n_cb,
                  xn, xc, xh, xw, yn, yc, yh, yw,
                  TH: tl.constexpr, TW: tl.constexpr, SPLIT: tl.constexpr, I64: tl.constexpr,
                  BP: tl.constexpr, BW: tl.constexpr):
    # program -> (sample g, plane block, output row, column block), columns fastest: neighbouring programs read
    # the same input rows (L1 / L2 reuse of the taps' rows)
    pid = tl.program_id(0)
    cb = pid % n_cb
    r = pid // n_cb
    oh = r % OH
    r = r // OH
    pb = r % n_pb
    g = r // n_pb
    p = pb * BP + tl.arange(0, BP)
    ow = cb * BW + tl.arange(0, BW)
    pm = p < NP
    wm = ow < OW
    if I64:
        p = p.to(tl.int64)
        ow = ow.to(tl.int64)
        g = g.to(tl.int64)
        oh = oh.to(tl.int64)
    # NCHW gathers need no mask: a tail plane reads the last plane, a tail column tap index 0 (the table's other).
    # Channels-last ones mask the tail planes instead: an unclamped p keeps its contiguity, which gives the
    # channels-last gathers their layout (a warp's lanes along the channels, vector loads)
    if SPLIT:       # NCHW: planes are the flattened (n, c) pairs; one division per plane, not per element
        q = tl.minimum(p, NP - 1)
        n = q // C
        xb = n * xn + (q - n * C) * xc
        n = p // C
        yb = n * yn + (p - n * C) * yc
    else:           # channels-last: planes are the channels of sample g
        xb = g * xn + p * xc
        yb = g * yn + p * yc
    acc = tl.zeros([BW, BP], wh_ptr.dtype.element_ty)
    for th in tl.static_range(TH):
        jh = tl.load(ih_ptr + oh * TH + th).to(ow.dtype)      # scalars: the row's taps once per program
        vh = tl.load(wh_ptr + oh * TH + th)
        row = tl.zeros([BW, BP], wh_ptr.dtype.element_ty)
        for tw in tl.static_range(TW):
            # (TW, OW) table: a column tap's indices / weights are a contiguous [BW] vector shared by the BP
            # planes.  The same loads and broadcasts in every th pass: the compiler keeps one (CSE), so the
            # [BW] -> [BW, BP] layout conversion happens TW times a program, not TH x TW
            jw = tl.load(iw_ptr + tw * OW + ow, mask=wm, other=0).to(ow.dtype)
            vw = tl.load(ww_ptr + tw * OW + ow, mask=wm, other=0.0)
            col = xb[None, :] + (jw * xw)[:, None]
            if SPLIT:
                xv = tl.load(x_ptr + jh * xh + col)
            else:
                xv = tl.load(x_ptr + jh * xh + col, mask=pm[None, :], other=0.0)
            row += vw[:, None] * xv.to(acc.dtype)
        acc += vh * row
    tl.store(y_ptr + yb[None, :] + (oh * yh + ow * yw)[:, None], acc.to(y_ptr.dtype.element_ty),
             mask=wm[:, None] & pm[None, :])


# The kernel twice (see fast_kernel): NCHW with yw never specialized (one output a lane, the tile [columns, planes];
# specialized, Nsight Compute on the H200 showed 8.4 sectors a load request for bilinear x2 up, the L1 96 % busy),
# channels-last as Triton specializes it (its channel gathers vectorize).
_tile2_nc = fast_kernel(do_not_specialize=["yw"])(_tile2_kernel)
_tile2_cl = fast_kernel(_tile2_kernel)


def _pad3(t, fill):
    return (fill,) * (3 - len(t)) + tuple(t)


def _tables(desc, backward):
    """Per spatial dim (padded to 3 in front): (idx int32, w float64) host tables; transposed for the backward."""
    a = {k: desc.attr(k) for k in ("size", "mode", "align_corners", "scales", "antialias")}
    spatial = (desc.attr("input_size") if backward else desc.inputs[0].shape)[2:]
    mats = interp_matrices(a, spatial)
    tabs = [interp_tables(m.T if backward else m) for m in mats]
    unit = (np.zeros((1, 1), np.int32), np.ones((1, 1)))
    return [unit] * (3 - len(tabs)) + tabs


def _channels_last(t) -> bool:
    """Whether the (N, C, *s) tensor is laid out with C fastest (channels_last / channels_last_3d, C > 1)."""
    st = t.stride()
    return t.dim() > 2 and t.shape[1] > 1 and st[1] == 1 and all(st[1] <= s for s in st[2:])


# the tile kernel unrolls every tap: up to 64 per output (bicubic's backward x2 up: 8 x 8) and 16 column taps
# (the [BW] tap vectors live in registers); wider windows (antialias / area far down) take the per-element kernel
_MAX_TAPS, _MAX_TW = 64, 16
# outputs per program on 4 warps: 16 a thread where an output has <= 4 taps (the program's ~170 fixed SASS
# instructions -- the program id's and the planes' divisions, the tap tables -- over more outputs), 8 up to 16
# taps, 4 above (each column tap keeps its [BW, BP] offsets and weights live: at 8 a thread bicubic's backward
# x2 up, 8 column taps, took 240 registers on sm_90)
_TILE = 8192 if INTERPRETING else 2048


def _tile2_geometry(y, widths):
    """(SPLIT, groups, planes, BP, BW) of the tile kernel for output y; None where it does not apply."""
    th, tw = widths
    if y.dim() > 4 or th * tw > _MAX_TAPS or tw > _MAX_TW:
        return None
    n, c, ow = y.shape[0], y.shape[1], y.shape[-1]
    tile = _TILE if th * tw <= 4 else _TILE // 2 if th * tw <= 16 else _TILE // 4
    if _channels_last(y):       # the channels of one sample along the lanes: contiguous gathers and store
        bp = min(next_power_of_2(c), 64)
        return False, n, c, bp, max(1, min(next_power_of_2(ow), tile // bp))
    bw = min(next_power_of_2(ow), 256)
    return True, 1, n * c, max(1, min(next_power_of_2(n * c), tile // bw)), bw


def _bind(desc, pref=None):
    backward = desc.op == "interpolate_backward"
    host = _tables(desc, backward)
    widths = tuple(i.shape[1] for i, _ in host)
    wdt = torch.float64 if desc.dtype == DType.f64 else torch.float32
    dev_tabs: dict = {}

    def tables(dev):
        t = dev_tabs.get(dev)
        if t is None:
            # row-major (out, T) tables for the per-element kernel; the tile kernel's last dim as (T, out):
            # each column tap a contiguous vector
            t = dev_tabs[dev] = ([u for i, w in host for u in (torch.from_numpy(i).to(dev),
                                                               torch.from_numpy(w).to(dev, wdt))],
                                 [torch.from_numpy(np.ascontiguousarray(a.T)).to(dev, wdt if a.dtype.kind == "f"
                                                                                  else torch.int32)
                                  for a in host[2]])
        return t

    def run(desc_, inputs, outputs, ws):
        x, y = inputs[0], outputs[0]
        total = y.numel()
        if total == 0:
            return
        rows, cols = tables(x.device)
        xs, ys = x.stride(), y.stride()
        reach = max(sum((d - 1) * abs(s) for d, s in zip(t.shape, t.stride())) for t in (x, y)) + total
        i64 = INTERPRETING or reach >= _LIMIT
        geo = _tile2_geometry(y, widths[1:])
        if geo is not None:
            split, groups, planes, bp, bw = geo
            oh, ow = _pad3(y.shape[2:], 1)[1:]
            n_pb, n_cb = cdiv(planes, bp), cdiv(ow, bw)
            xh, xw = _pad3(xs[2:], 0)[1:]
            yh, yw = _pad3(ys[2:], 0)[1:]
            (_tile2_nc if split else _tile2_cl)[(groups * n_pb * oh * n_cb,)](
                x, y, rows[2], rows[3], *cols, planes, y.shape[1], oh, ow, n_pb, n_cb, xs[0], xs[1], xh, xw,
                ys[0], ys[1], yh, yw, TH=widths[1], TW=widths[2], SPLIT=split, I64=i64, BP=bp, BW=bw,
                num_warps=4)
            return
        n, c = y.shape[:2]
        _sep_kernel[(cdiv(total, _BLOCK),)](
            x, y, *rows, total, c, *_pad3(y.shape[2:], 1), xs[0], xs[1], *_pad3(xs[2:], 0), ys[0], ys[1],
            *_pad3(ys[2:], 0), *widths, CL=_channels_last(y), I64=i64, BLOCK=_BLOCK, num_warps=4)
    return run


def _route(op):
    what = "(gather: transposed tables)" if op.endswith("backward") else ""
    return f"triton:{op}:separable-taps{what}"


for _op in ("interpolate", "interpolate_backward"):
    register_triton(_op, bind=_bind, route=_route(_op))
