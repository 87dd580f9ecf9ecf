"""Triton rotary embedding: one kernel for both pairings, both layouts, explicit positions and the inverse rotation.

x is walked as rows of D (its first three dims, any strides); a program owns ROWS rows and holds, per row, the
R/2 first and R/2 second elements of the pairs (INTERLEAVED constexpr: (2i, 2i + 1), else (i, i + R/2)), the R/2
cos / sin values of the row's position, and the D - R pass-through elements (a separate block, absent when
D == R).  The layout is not a kernel variant: a row's table row is ``q = i0 * q0 + i1 * q1 + i2 * q2`` with the
sequence coordinate's weights (bshd: (0, 1, 0), bhsd: (0, 0, 1)), or with HAS_POS the positions' strides per x dim,
q then being where the row's position is read; the table's row stride and batch stride (0 for [S, R/2] or a batch
of 1) place it.  So any strided x, tables and positions are read in place.  With positions a row whose position
is outside [0, P) reads row 0 (never out of bounds), writes NaN in its rotated dims and sets the flag word
(_core/checks.py raises it).  INVERSE rotates by -theta (the backward).  Computes in f32 (f64 for f64 x) and
rounds once.  Bytes: x read + y written + the tables (re-read per head from L2): bf16 [4, 2048, 32, 128] moves
64 MiB of x/y; the interleaved form reads x with stride-2 lanes (the two loads of a row hit the same sectors).
The backward is this kernel on (dy, cos, sin[, positions]) with INVERSE flipped: one launch.
"""
from __future__ import annotations

import torch
import triton.language as tl

from ...._core.checks import flagged
from ...._core.dtypes import DType
from ...._core.errors import InvalidProblemError
from ....ops.attention import seq_axis
from .._lib.geometry import cdiv, next_power_of_2
from .._lib.launch import fast_kernel
from .._lib.register import register_triton
from .._lib.strided import span

# a row's pairs and pass-through dims live in registers; 16k elements per row is far past any model's head dim
_MAX_D = 16384
_LIMIT = 2 ** 31 - 1


@fast_kernel
def _rope_kernel(x_ptr, c_ptr, s_ptr, p_ptr, y_ptr, flag_ptr, n_rows, N1, N2, D, HALF, P,
                 sx0, sx1, sx2, sxd, q0, q1, q2, tcb, tcs, tcd, tsb, tss, tsd,
                 INTERLEAVED: tl.constexpr, INVERSE: tl.constexpr, HAS_POS: tl.constexpr, F64: tl.constexpr,
                 ROWS: tl.constexpr, BH: tl.constexpr, BP: tl.constexpr, I64: tl.constexpr):
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
    q = i0 * q0 + i1 * q1 + i2 * q2                # the row's table row, or where its position is
    if HAS_POS:
        q = tl.load(p_ptr + q, mask=rm, other=0)
        if I64:
            q = q.to(tl.int64)
        bad = rm & ((q < 0) | (q >= P))
        q = tl.where(bad, 0, q)
        tl.store(flag_ptr, 1, mask=tl.sum(bad.to(tl.int32), 0) > 0)
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
    c = tl.load(c_ptr + (i0 * tcb + q * tcs)[:, None] + k[None, :] * tcd, mask=m, other=0.0).to(CT)
    s = tl.load(s_ptr + (i0 * tsb + q * tss)[:, None] + k[None, :] * tsd, mask=m, other=0.0).to(CT)
    if INVERSE:
        s = -s
    if HAS_POS:
        c = tl.where(bad[:, None], float("nan"), c)
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


def _table_strides(t):
    """(batch, row, pair) strides of a table: [S|P, R/2] and a batch of 1 have no batch stride."""
    sb = t.stride(0) if t.dim() == 3 and t.shape[0] != 1 else 0
    return sb, t.stride(-2), t.stride(-1)


def _row_weights(desc, pos):
    """(q0, q1, q2): a row (i0, i1, i2)'s table row (no positions: its sequence coordinate) or the offset of its
    position (positions [S] / [B|1, S]: their strides placed on x's batch and sequence dims)."""
    ax = seq_axis(desc.attr("layout"))
    if pos is None:
        w = [0, 0, 0]
        w[ax] = 1
        return tuple(w)
    sb = pos.stride(0) if pos.dim() == 2 and pos.shape[0] != 1 else 0
    w = [sb, 0, 0]
    w[ax] = pos.stride(-1)
    return tuple(w)


def _workspace(desc) -> int:
    return 4 if desc.attr("has_positions") else 0     # the int32 flag word of a position out of range


def _bind(desc, pref=None):
    layout, R, inter = desc.attr("layout"), desc.attr("rotary_dim"), desc.attr("interleaved")
    has_pos, inverse = desc.attr("has_positions"), desc.attr("inverse")
    B, N1, N2, D = desc.inputs[0].shape
    n_rows = B * N1 * N2
    P = desc.inputs[1].shape[-2]
    half = R // 2
    bh = next_power_of_2(max(half, 1))
    bp = next_power_of_2(D - R) if D > R else 0
    rows = max(1, min(2048 // next_power_of_2(2 * bh + bp), next_power_of_2(n_rows)))   # ~2k elements a program
    f64 = desc.dtype == DType.f64

    def run(desc_, inputs, outputs, ws):
        x, c, s = inputs[:3]
        pos = inputs[3] if has_pos else None
        out = outputs[0]
        if out.numel() == 0:
            return
        target = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
        flag = ws[:4].view(torch.int32) if has_pos else target
        if has_pos:
            flag.zero_()
        i64 = max(span(x), span(c), span(s), out.numel(), 0 if pos is None else span(pos)) > _LIMIT
        _rope_kernel[(cdiv(n_rows, rows),)](
            x, c, s, x if pos is None else pos, target, flag, n_rows, N1, N2, D, half, P, *x.stride(),
            *_row_weights(desc, pos), *_table_strides(c), *_table_strides(s), INTERLEAVED=inter, INVERSE=inverse,
            HAS_POS=has_pos, F64=f64, ROWS=rows, BH=bh, BP=bp, I64=i64, num_warps=4)
        if target is not out:
            out.copy_(target)
        if has_pos:
            flagged(flag, pref, lambda _: InvalidProblemError(
                "rope", "positions", f"positions in [0, {P}) (the tables' rows)", "a position out of range"))

    return run


def _run(desc, inputs, outputs, ws):
    _bind(desc)(desc, inputs, outputs, ws)


def _route(desc, pref):
    form = "interleaved" if desc.attr("interleaved") else "half"
    return f"triton:rope({form}{'+positions' if desc.attr('has_positions') else ''})"


register_triton("rope", _run, supports=_supports, bind=_bind, workspace=_workspace, route=_route)
