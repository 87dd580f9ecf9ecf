"""Strided addressing shared by the elementwise, cast and layout kernels: collapse a view's (shape, strides) to
at most ``RANK`` dims, turn a flat output index into the view's element offset, a program's flat block and an
operand's strides broadcast to the output shape."""
from __future__ import annotations

import triton
import triton.language as tl

RANK = 6


def collapse(shape, strides_list):
    """Drop size-1 dims and merge dims contiguous in every operand -> (shape, [strides per operand])."""
    dims = [(s, [st[i] for st in strides_list]) for i, s in enumerate(shape) if s != 1]
    merged: list = []
    for s, sts in dims:
        if merged:
            ps, psts = merged[-1]
            if all(pst == st * s for pst, st in zip(psts, sts)):
                merged[-1] = (ps * s, sts)
                continue
        merged.append((s, sts))
    if not merged:
        merged = [(1, [0] * len(strides_list))]
    return [m[0] for m in merged], [[m[1][k] for m in merged] for k in range(len(strides_list))]


def padded(shape, strides_list):
    """collapse() padded on the left to RANK dims; None when more than RANK dims remain."""
    dims, sts = collapse(shape, strides_list)
    if len(dims) > RANK:
        return None
    pad = RANK - len(dims)
    return [1] * pad + dims, [[0] * pad + st for st in sts]


def all_contiguous(ts) -> bool:
    """Every tensor of ``ts`` is contiguous (a plan's bound contiguous launch applies)."""
    for t in ts:
        if not t.is_contiguous():
            return False
    return True


def span(t) -> int:
    return 1 + sum((d - 1) * abs(s) for d, s in zip(t.shape, t.stride()) if d > 0)


@triton.jit
def unravel(offs, S1, S2, S3, S4, S5):
    """Row-major indices (i0..i5) of flat index ``offs`` over dims [S0..S5]."""
    i5 = offs % S5
    r = offs // S5
    i4 = r % S4
    r = r // S4
    i3 = r % S3
    r = r // S3
    i2 = r % S2
    r = r // S2
    i1 = r % S1
    i0 = r // S1
    return i0, i1, i2, i3, i4, i5


@triton.jit
def strided_offset(offs, S1, S2, S3, S4, S5, t0, t1, t2, t3, t4, t5):
    """Offset of flat row-major index ``offs`` (over dims [S0..S5]) in a view with strides t0..t5."""
    i0, i1, i2, i3, i4, i5 = unravel(offs, S1, S2, S3, S4, S5)
    return i0 * t0 + i1 * t1 + i2 * t2 + i3 * t3 + i4 * t4 + i5 * t5


@triton.jit
def strided_offset_i64(offs, S1, S2, S3, S4, S5, t0, t1, t2, t3, t4, t5):
    """strided_offset with the unravel in ``offs``'s own width and the products in int64: an int32 index (a grid
    axis, below 2^31) into a view whose offsets may pass 2^31 (an int64 division is ~10x the instructions)."""
    i0, i1, i2, i3, i4, i5 = unravel(offs, S1, S2, S3, S4, S5)
    return (i0.to(tl.int64) * t0 + i1.to(tl.int64) * t1 + i2.to(tl.int64) * t2 + i3.to(tl.int64) * t3
            + i4.to(tl.int64) * t4 + i5.to(tl.int64) * t5)


@triton.jit
def flat_offsets(n, I64: tl.constexpr, BLOCK: tl.constexpr):
    """(offsets, mask) of this program's BLOCK flat elements of n (int64 offsets under I64)."""
    pid = tl.program_id(0)
    if I64:
        offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    else:
        offs = pid * BLOCK + tl.arange(0, BLOCK)
    return offs, offs < n


@triton.jit
def tile_rows_cols(n_cb, I64: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr):
    """(rows, cols) of this program's [BR, BC] tile of a rows x columns space, the program id running over row
    blocks * n_cb column blocks (a 1-D grid: no 65535 limit); int64 under I64."""
    pid = tl.program_id(0)
    if I64:
        pid = pid.to(tl.int64)
    rb = pid // n_cb
    cb = pid - rb * n_cb
    r = rb * BR + tl.arange(0, BR)
    c = cb * BC + tl.arange(0, BC)
    if I64:
        r = r.to(tl.int64)
        c = c.to(tl.int64)
    return r, c


def expanded_strides(x: torch.Tensor, shape) -> list[int]:
    """Strides of ``x`` broadcast to ``shape`` (0 on broadcast axes)."""
    lead = len(shape) - x.dim()
    st = [0] * lead
    for i, (d, s) in enumerate(zip(x.shape, x.stride())):
        st.append(0 if (d == 1 and shape[lead + i] != 1) else s)
    return st
