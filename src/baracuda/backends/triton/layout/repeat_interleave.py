"""Triton repeat_interleave: int repeats go through the layout index map (layout.py); a repeats TENSOR
(per-element counts) runs here, without any host sync (the output extent is the descriptor's output_size).

1. ``_cumsum_kernel``: one program scans the n counts (inclusive prefix sum, int64) in 1024-wide chunks.
   n is the extent of the repeated dim (segments, heads, tokens): microseconds up to ~10^6 counts.
2. ``_rinter_fwd_kernel``: output viewed as [outer, output_size, inner]; one [BR, BC] tile of output rows x
   inner columns per program.  Each output row finds its source row by a vectorized binary search in the
   prefix sums (ceil(log2(n+1)) steps of BR cached loads: per ROW, not per element), then copies BC
   contiguous inner elements.  16 KiB per program; for inner >= 8 bf16 elements the copy is 16-byte
   coalesced on both sides, so it runs near copy bandwidth like the tiled layout copies.
3. ``_rinter_bwd_kernel`` (the op repeat_interleave_backward): x-grad row i = sum of the grad rows
   [cum[i] - reps[i], cum[i]) — a segment sum, each program summing its tile's segments in a fixed order
   (deterministic, no atomics), accumulating in f32 (f64 for f64).  The loop runs max(reps in the tile)
   times; every grad byte is read once.
A wrong output_size (not the sum of the counts) is undefined here, as in torch's CUDA kernel with
output_size; the reference backend checks it.
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from .._lib.register import register_triton
from .._lib.geometry import outer_r_inner
from .index_maps import run_view, rank_ok
from .move import _FORCE, bits, copy_into, fill
from .._lib.launch import fast_kernel
from .._lib.strided import tile_rows_cols
from .._lib.geometry import cdiv, next_power_of_2

_SCAN = 1024
_TILE_BYTES = 16384
_LIMIT = 2 ** 31 - 2 ** 16


@fast_kernel
def _cumsum_kernel(cum_ptr, rep_ptr, n, rs, BLOCK: tl.constexpr):
    carry = tl.sum(tl.zeros([BLOCK], dtype=tl.int64), axis=0)
    s = 0
    while s < n:     # (while, not range: the interpreter cannot range() over a runtime scalar)
        o = s + tl.arange(0, BLOCK)
        v = tl.load(rep_ptr + o * rs, mask=o < n, other=0).to(tl.int64)
        c = tl.cumsum(v, axis=0) + carry
        tl.store(cum_ptr + o, c, mask=o < n)
        carry += tl.sum(v, axis=0)
        s += BLOCK


@fast_kernel
def _rinter_fwd_kernel(out_ptr, x_ptr, cum_ptr, rows, total, n, inner, steps, n_cb,
                       I64: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr):
    r, c = tile_rows_cols(n_cb, I64, BR, BC)
    rm = r < rows
    o = r // total
    j = r - o * total
    lo = r * 0
    hi = lo + n
    k = 0
    while k < steps:                    # first i with cum[i] > j
        k += 1
        act = lo < hi
        mid = (lo + hi) // 2
        cv = tl.load(cum_ptr + mid, mask=act & rm, other=0)
        right = cv <= j
        lo = tl.where(act & right, mid + 1, lo)
        hi = tl.where(act & (cv > j), mid, hi)
    ok = rm & (lo < n)
    src = (o * n + lo) * inner
    cm = c < inner
    v = tl.load(x_ptr + (src[:, None] + c[None, :]), mask=ok[:, None] & cm[None, :], other=0)
    tl.store(out_ptr + (r[:, None] * inner + c[None, :]), v, mask=rm[:, None] & cm[None, :])


@fast_kernel
def _rinter_bwd_kernel(out_ptr, g_ptr, cum_ptr, rows, total, n, inner, n_cb, ACC: tl.constexpr,
                       I64: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr):
    r, c = tile_rows_cols(n_cb, I64, BR, BC)
    rm = r < rows
    o = r // n
    i = r - o * n
    end = tl.load(cum_ptr + i, mask=rm, other=0)
    start = tl.load(cum_ptr + i - 1, mask=rm & (i > 0), other=0)
    cnt = end - start
    grow = o * total + start
    cm = c < inner
    acc = tl.zeros([BR, BC], dtype=ACC)
    t = 0
    top = tl.max(cnt, axis=0)
    while t < top:
        m = (t < cnt)[:, None] & cm[None, :]
        acc += tl.load(g_ptr + ((grow + t)[:, None] * inner + c[None, :]), mask=m, other=0).to(ACC)
        t += 1
    tl.store(out_ptr + (r[:, None] * inner + c[None, :]), acc.to(out_ptr.dtype.element_ty),
             mask=rm[:, None] & cm[None, :])


def _prefix(reps, n, device):
    cum = torch.empty(max(n, 1), dtype=torch.int64, device=device)
    if n:
        rs = 0 if reps.numel() == 1 else reps.stride(0) if reps.dim() else 0
        _cumsum_kernel[(1,)](cum, reps, n, rs, BLOCK=_SCAN, num_warps=4)
    return cum


def _geometry(shape, dim):
    """(outer, n, inner) of the repeated dim (dim None: the flattened tensor)."""
    if dim is None:
        return 1, math.prod(shape), 1
    return outer_r_inner(shape, dim)


def _tiles(inner, rows, size):
    bc = min(next_power_of_2(max(inner, 1)), max(16, _TILE_BYTES // size // 8))
    br = max(1, min(_TILE_BYTES // size // bc, next_power_of_2(max(rows, 1))))
    return br, bc


def _dense(t):
    if t.is_contiguous():
        return t
    d = torch.empty(t.shape, dtype=t.dtype, device=t.device)
    copy_into(d, t)
    return d


def _run_rinter(desc, inputs, outputs, ws):
    if len(inputs) == 1:
        return run_view(desc, inputs, outputs, ws)
    x, reps = inputs
    out = outputs[0]
    if out.numel() == 0:
        return
    outer, n, inner = _geometry(tuple(x.shape), desc.attr("dim"))
    total = desc.attr("output_size")
    if n == 0:
        return fill(out, 0)
    cum = _prefix(reps, n, x.device)
    xb, ob = bits(_dense(x)), bits(out)
    rows = outer * total
    br, bc = _tiles(inner, rows, x.element_size())
    n_cb = cdiv(inner, bc)
    steps = max(1, n.bit_length())
    i64 = max(rows * inner, x.numel()) >= _LIMIT or _FORCE.get("i64", False)
    _rinter_fwd_kernel[(cdiv(rows, br) * n_cb,)](ob, xb, cum, rows, total, n, inner, steps, n_cb,
                                                        I64=i64, BR=br, BC=bc, num_warps=4)


def _run_rinter_bw(desc, inputs, outputs, ws):
    g, reps = inputs
    out = outputs[0]
    if out.numel() == 0:
        return
    outer, n, inner = _geometry(desc.attr("shape"), desc.attr("dim"))
    total = g.shape[0 if desc.attr("dim") is None else desc.attr("dim")]
    cum = _prefix(reps, n, g.device)
    g = _dense(g)
    rows = outer * n
    acc = tl.float64 if g.dtype == torch.float64 else tl.float32
    br, bc = _tiles(inner, rows, 4 if acc == tl.float32 else 8)
    n_cb = cdiv(inner, bc)
    i64 = max(outer * total * inner, out.numel()) >= _LIMIT or _FORCE.get("i64", False)
    _rinter_bwd_kernel[(cdiv(rows, br) * n_cb,)](out, g, cum, rows, total, n, inner, n_cb, ACC=acc,
                                                        I64=i64, BR=br, BC=bc, num_warps=4)


register_triton("repeat_interleave", _run_rinter, supports=rank_ok, route="triton:layout_rows")
register_triton("repeat_interleave_backward", _run_rinter_bw, route="triton:segment_sum")
