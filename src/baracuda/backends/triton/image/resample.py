"""interpolate / interpolate_backward: one separable tap kernel for every mode, 1-d to 3-d, any strides.

Every mode is a per-dim matrix (ops/image.py: interp_matrix); its sparse rows become tap tables (index int32,
weight f32 — f64 for f64 inputs) of T_d taps per output index, built once per plan on the host from the same
float64 definition as the reference and uploaded once per device (a few KB: (out_d x T_d) per dim).  The kernel
writes one output element per lane: (n, c, o0, o1, o2) unravelled in the output's memory order (CL: channels
last, c fastest, so a channels_last input and output are read and written along c, coalesced), then
sum_{t0, t1, t2} w0 w1 w2 x[n, c, i0, i1, i2] with x's own strides (no copy of a strided input); missing spatial
dims are size 1 with one unit tap.  The backward is the same kernel on grad with the TRANSPOSED tables (per input
index, the output indices that read it and their weights): a gather, deterministic, no atomics, no zero fill.
Cost per output: T0 T1 T2 loads of x (bilinear 4, bicubic 16, cache hits for neighbours) + the table loads (L1);
x2 up/down of bf16 [8, 64, 128, 128] is ~17 + 67 MB of HBM traffic, ~30-40 us at ~2.5 TB/s if the gathers stay
in L1/L2.
"""
from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

from ...._core.dtypes import DType
from ....ops.image import interp_matrices, interp_tables
from .._lib.geometry import cdiv
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


def _bind(desc, pref=None):
    backward = desc.op == "interpolate_backward"
    host = _tables(desc, backward)
    wdt = torch.float64 if desc.dtype == DType.f64 else torch.float32
    dev_tabs: dict = {}

    def run(desc_, inputs, outputs, ws):
        x, y = inputs[0], outputs[0]
        total = y.numel()
        if total == 0:
            return
        tabs = dev_tabs.get(x.device)
        if tabs is None:
            tabs = dev_tabs[x.device] = [t for i, w in host for t in (torch.from_numpy(i).to(x.device),
                                                                       torch.from_numpy(w).to(x.device, wdt))]
        n, c = y.shape[:2]
        o = _pad3(y.shape[2:], 1)
        xs = x.stride()
        ys = y.stride()
        reach = max(sum((d - 1) * abs(s) for d, s in zip(t.shape, t.stride())) for t in (x, y)) + total
        _sep_kernel[(cdiv(total, _BLOCK),)](
            x, y, *tabs, total, c, *o, xs[0], xs[1], *_pad3(xs[2:], 0), ys[0], ys[1], *_pad3(ys[2:], 0),
            *(i.shape[1] for i, _ in host), CL=_channels_last(y), I64=INTERPRETING or reach >= _LIMIT, BLOCK=_BLOCK, num_warps=4)
    return run


for _op in ("interpolate", "interpolate_backward"):
    register_triton(_op, bind=_bind, route=f"triton:{_op}:separable-taps" + ("(gather: transposed tables)"
                                                                             if _op.endswith("backward") else ""))
