"""Triton rotary embedding: one kernel for both pairings and both layouts.

x is walked as rows of D (its first three dims, any strides); a program owns ROWS rows and holds, per row, the
R/2 first and R/2 second elements of the pairs (INTERLEAVED constexpr: (2i, 2i + 1), else (i, i + R/2)), the R/2
cos / sin values of the row's position, and the D - R pass-through elements (a separate block, absent when
D == R).  The layout is not a kernel variant: the tables' strides are given per x dim (bshd: (batch, seq, 0),
bhsd: (batch, 0, seq); a [S, R/2] table has batch stride 0), so any strided x and tables are read in place.
Computes in f32 (f64 for f64 x) and rounds once.  Bytes: x read + y written + the tables (re-read per head from
L2): bf16 [4, 2048, 32, 128] moves 64 MiB of x/y; the interleaved form reads x with stride-2 lanes (the two
loads of a row hit the same sectors).  The backward is this kernel on (dy, cos, -sin).
"""
from __future__ import annotations

import torch
import triton.language as tl

from ...._core.dtypes import DType
from ....ops.attention import seq_axis
from .._lib.geometry import cdiv, next_power_of_2
from .._lib.launch import fast_kernel
from .._lib.register import register_triton
from .._lib.strided import span

# a row's pairs and pass-through dims live in registers; 16k elements per row is far past any model's head dim
_MAX_D = 16384
_LIMIT = 2 ** 31 - 1


@fast_kernel
def _rope_kernel(x_ptr, c_ptr, s_ptr, y_ptr, n_rows, N1, N2, D, HALF,
                 sx0, sx1, sx2, sxd, tc0, tc1, tc2, tcd, ts0, ts1, ts2, tsd,
                 INTERLEAVED: tl.constexpr, F64: tl.constexpr, ROWS: tl.constexpr, BH: tl.constexpr,
                 BP: tl.constexpr, I64: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    if I64:
        rows = rows.to(tl.int64)
    rm = rows < n_rows
    i2 = rows % N2
    r = rows // N2
    i1 = r % N1
    i0 = r // N1
    xo = (i0 * sx0 + i1 * sx1 + i2 * sx2)[:, None]
    yo = (rows * D)[:, None]
    k = tl.arange(0, BH)
    m = rm[:, None] & (k < HALF)[None, :]
    if INTERLEAVED:
        ja = 2 * k
        jb = 2 * k + 1
    else:
        ja = k
        jb = k + HALF
    a = tl.load(x_ptr + xo + ja[None, :] * sxd, mask=m, other=0.0).to(CT)
    b = tl.load(x_ptr + xo + jb[None, :] * sxd, mask=m, other=0.0).to(CT)
    c = tl.load(c_ptr + (i0 * tc0 + i1 * tc1 + i2 * tc2)[:, None] + k[None, :] * tcd, mask=m, other=0.0).to(CT)
    s = tl.load(s_ptr + (i0 * ts0 + i1 * ts1 + i2 * ts2)[:, None] + k[None, :] * tsd, mask=m, other=0.0).to(CT)
    OUT: tl.constexpr = y_ptr.dtype.element_ty
    tl.store(y_ptr + yo + ja[None, :], (a * c - b * s).to(OUT), mask=m)
    tl.store(y_ptr + yo + jb[None, :], (b * c + a * s).to(OUT), mask=m)
    if BP > 0:   # dims R..D-1 pass through
        p = 2 * HALF + tl.arange(0, BP)
        mp = rm[:, None] & (p < D)[None, :]
        v = tl.load(x_ptr + xo + p[None, :] * sxd, mask=mp, other=0.0)
        tl.store(y_ptr + yo + p[None, :], v.to(OUT), mask=mp)


def _supports(desc):
    D = desc.inputs[0].shape[3]
    if D > _MAX_D:
        return f"head dim D={D} over {_MAX_D}: the kernel holds a row in registers"
    return None


def _table_strides(t, layout):
    """A table's strides per x dim (0, 1, 2) and per pair index: [S, R/2] has no batch stride, a batch of 1 none
    either; the sequence stride goes to x's sequence axis."""
    sb = t.stride(0) if t.dim() == 3 and t.shape[0] != 1 else 0
    ss, sk = t.stride(-2), t.stride(-1)
    return (sb, ss, 0, sk) if seq_axis(layout) == 1 else (sb, 0, ss, sk)


def _run(desc, inputs, outputs, ws):
    x, c, s = inputs
    out = outputs[0]
    if out.numel() == 0:
        return
    target = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
    layout, R = desc.attr("layout"), desc.attr("rotary_dim")
    B, N1, N2, D = x.shape
    n_rows = B * N1 * N2
    half = R // 2
    bh = next_power_of_2(max(half, 1))
    bp = next_power_of_2(D - R) if D > R else 0
    rows = max(1, min(2048 // next_power_of_2(2 * bh + bp), next_power_of_2(n_rows)))   # ~2k elements a program
    i64 = max(span(x), span(c), span(s), out.numel()) > _LIMIT
    _rope_kernel[(cdiv(n_rows, rows),)](
        x, c, s, target, n_rows, N1, N2, D, half, *x.stride(), *_table_strides(c, layout),
        *_table_strides(s, layout), INTERLEAVED=desc.attr("interleaved"), F64=desc.dtype == DType.f64, ROWS=rows,
        BH=bh, BP=bp, I64=i64, num_warps=4)
    if target is not out:
        out.copy_(target)


register_triton("rope", _run, supports=_supports,
                route=lambda d, p: f"triton:rope({'interleaved' if d.attr('interleaved') else 'half'})")
