"""Strided addressing shared by the cast and layout kernels: collapse a view's (shape, strides) to at
most ``RANK`` dims and turn a flat output index into the view's element offset."""
from __future__ import annotations

import triton
import triton.language as tl  # noqa: F401  (Triton requires tl in the globals of a jit function)

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


def _merged_stride(shape, strides):
    """Stride of ``shape`` flattened to one axis, or None when the dims do not merge."""
    dims = [(d, s) for d, s in zip(shape, strides) if d != 1]
    for (d0, s0), (d1, s1) in zip(dims, dims[1:]):
        if s0 != s1 * d1:
            return None
    return dims[-1][1] if dims else 0


def view3(t, dim: int):
    """(t', (s_outer, s_R, s_inner)): t' is t, or a contiguous copy when t cannot be viewed as (outer, R, inner)."""
    if t.dim() == 0:
        return t, (0, 0, 0)
    so = _merged_stride(t.shape[:dim], t.stride()[:dim])
    si = _merged_stride(t.shape[dim + 1:], t.stride()[dim + 1:])
    if so is None or si is None:
        t = t.contiguous()
        return view3(t, dim)
    return t, (so, t.stride(dim), si)
