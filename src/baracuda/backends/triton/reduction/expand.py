"""Broadcast stores: ``mean_backward`` (the gradient divided by the count) and ``broadcast_to`` where the output is
one block of a kept / broadcast pattern the elementwise template would index element by element.

The output (contiguous) is viewed as [P, A, B] and g (contiguous) as [P, A] (ROW: one value per row, broadcast
along the contiguous B: a reduction over trailing dims) or [P, B] (a value per column, broadcast along A: a
reduction over leading or middle dims).  A program stores a [BA, BB] tile: the g values it needs are loaded once
(BA or BB of them), divided by the count there (in the compute dtype: the same rounding as g / count per element),
and broadcast, so the kernel is a store stream with no per-element index arithmetic.  The template's strided
launch (4-d unravel per element) wrote bf16 [16384, 4096]'s mean gradient at 1.8 TB/s, 0.58x torch.compile.
Other patterns (more than one broadcast group with a kept group between, a strided g or output) keep the template.
"""
from __future__ import annotations

import math

import torch
import triton.language as tl

from .._lib.geometry import cdiv, next_power_of_2
from .._lib.launch import fast_kernel

__all__ = ["expand_pattern", "launch_expand"]

_TILE_BYTES = 16384  # output bytes per program: 8192 bf16 (tuned there), 4096 f32 (8192 f32 wrote mean's gradient of
                     # [16384, 4096] at 4.09 TB/s, 0.90x torch.compile; session 13 run C)


@fast_kernel
def _expand_kernel(g_ptr, y_ptr, A, B, count, ROW: tl.constexpr, DIV: tl.constexpr, CT: tl.constexpr,
                   BA: tl.constexpr, BB: tl.constexpr):
    p = tl.program_id(2).to(tl.int64)
    a = tl.program_id(0) * BA + tl.arange(0, BA)
    b = tl.program_id(1) * BB + tl.arange(0, BB)
    ma = a < A
    mb = b < B
    if ROW:
        q = tl.load(g_ptr + p * A + a, mask=ma, other=0)
    else:
        q = tl.load(g_ptr + p * B + b, mask=mb, other=0)
    if DIV:
        q = q.to(CT) / count
    q = q.to(y_ptr.dtype.element_ty)
    zero = tl.zeros([BA, BB], y_ptr.dtype.element_ty)
    v = zero + q[:, None] if ROW else zero + q[None, :]
    off = (p * A + a[:, None].to(tl.int64)) * B + b[None, :]
    tl.store(y_ptr + off, v, mask=ma[:, None] & mb[None, :])


def expand_pattern(out_shape, g_shape):
    """(P, A, B, ROW) of broadcasting a contiguous g of ``g_shape`` (keepdim: out_shape's rank, 1 on the broadcast
    dims) to a contiguous ``out_shape``, or None for a pattern this kernel does not take."""
    if len(g_shape) != len(out_shape) or math.prod(out_shape) == 0:
        return None
    groups: list = []      # [broadcast?, size]
    for o, g in zip(out_shape, g_shape):
        if o == 1:
            continue
        bc = g == 1
        if g not in (1, o):
            return None
        if groups and groups[-1][0] == bc:
            groups[-1][1] *= o
        else:
            groups.append([bc, o])
    kinds = tuple(bc for bc, _ in groups)
    sizes = [n for _, n in groups]
    if kinds == (False, True):          # kept rows, broadcast along the contiguous tail
        return 1, sizes[0], sizes[1], True
    if kinds == (True, False):          # broadcast rows of kept columns
        return 1, sizes[0], sizes[1], False
    if kinds == (False, True, False):   # [P, A, B]: a middle broadcast group
        return sizes[0], sizes[1], sizes[2], False
    if kinds == (True,):
        return 1, 1, sizes[0], True      # one value everywhere
    return None


def launch_expand(pattern, g, out, count: float | None):
    """out = broadcast(g) (/ count when given) for a pattern of :func:`expand_pattern`."""
    P, A, B, row = pattern
    bb = min(next_power_of_2(B), 1024)
    ba = max(1, min(max(1, _TILE_BYTES // out.element_size() // bb), next_power_of_2(A)))
    ct = tl.float64 if torch.float64 in (g.dtype, out.dtype) else tl.float32
    grid = (cdiv(A, ba), cdiv(B, bb), P)
    _expand_kernel[grid](g, out, A, B, float(count or 1.0), ROW=row, DIV=count is not None, CT=ct, BA=ba, BB=bb,
                         num_warps=8 if ba * bb >= 4096 else 4)
