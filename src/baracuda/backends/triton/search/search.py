"""Triton searchsorted / bucketize / isin.

searchsorted / bucketize: one binary search per query value, ``steps = bit_length(M)`` halvings of [lo, hi)
(a query past the sequence's end takes M).  torch's comparison: the lower bound moves right while not (s >= v),
the upper bound while not (s > v).  ``sorter``: the sequence is read at ``sorter[row, mid]``; a sorter value
outside [0, M) is clamped for the load and flagged (``_core/checks.py: flagged``: InvalidProblemError naming the
value).  16M queries into 1M f32 boundaries: 21 dependent loads per query from the L2-resident 4 MB sequence.

isin: each program compares BLOCK elements with every test element, CHUNK at a time (O(N * M) compares; no sort).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ...._core.checks import flagged
from ...._core.errors import InvalidProblemError
from .._lib.geometry import cdiv
from .._lib.launch import fast_kernel
from .._lib.register import register_triton
from ..layout.move import bits

_BLOCK = 1024


@triton.jit
def flat_block(n, BLOCK: tl.constexpr):
    p = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    return p, p < n


@triton.jit
def lower_upper(seq_ptr, srt_ptr, flag_ptr, base, v, ok, m, steps, HAS_SORTER: tl.constexpr, RIGHT: tl.constexpr):
    """The insertion index of each ``v`` into the row of ``m`` values at ``seq_ptr + base`` (int64)."""
    lo = tl.zeros(v.shape, tl.int64)
    hi = lo + m
    k = 0
    while k < steps:     # (while: the interpreter cannot range() over a runtime scalar)
        act = ok & (lo < hi)
        mid = (lo + hi) // 2
        at = base + tl.minimum(mid, m - 1)
        if HAS_SORTER:
            j = tl.load(srt_ptr + at, mask=act, other=0)
            bad = act & ((j < 0) | (j >= m))
            tl.store(flag_ptr + tl.zeros_like(j), j + 1, mask=bad)
            at = base + tl.where(bad, 0, j)
        s = tl.load(seq_ptr + at, mask=act, other=0)
        if RIGHT:
            go = ~(s > v)
        else:
            go = ~(s >= v)
        lo = tl.where(act & go, mid + 1, lo)
        hi = tl.where(act & ~go, mid, hi)
        k += 1
    return lo


@fast_kernel
def _search_kernel(out_ptr, seq_ptr, x_ptr, srt_ptr, flag_ptr, n, per_row, m, steps,
                   HAS_SORTER: tl.constexpr, RIGHT: tl.constexpr, BLOCK: tl.constexpr):
    p, pm = flat_block(n, BLOCK)
    v = tl.load(x_ptr + p, mask=pm, other=0)
    base = (p // per_row) * m
    lo = lower_upper(seq_ptr, srt_ptr, flag_ptr, base, v, pm, m, steps, HAS_SORTER, RIGHT)
    tl.store(out_ptr + p, lo, mask=pm)


@fast_kernel
def _isin_kernel(out_ptr, x_ptr, t_ptr, n, m, INVERT: tl.constexpr, BLOCK: tl.constexpr, CHUNK: tl.constexpr):
    p, pm = flat_block(n, BLOCK)
    v = tl.load(x_ptr + p, mask=pm, other=0)
    hit = tl.zeros([BLOCK], tl.int32)
    j = 0
    while j < m:
        o = j + tl.arange(0, CHUNK)
        t = tl.load(t_ptr + o, mask=o < m, other=0)
        eq = (v[:, None] == t[None, :]) & (o < m)[None, :]
        hit = tl.maximum(hit, tl.max(eq.to(tl.int32), axis=1))
        j += CHUNK
    if INVERT:
        hit = 1 - hit
    tl.store(out_ptr + p, hit.to(tl.int8), mask=pm)


def search(out, seq, x, sorter, right, flag):
    """out[...] = the insertion indices of ``x`` into the rows of ``seq`` (contiguous out; any operands)."""
    n = x.numel()
    m = seq.shape[-1]
    if n == 0:
        return
    seq, x = seq.contiguous(), x.contiguous()
    srt = sorter.contiguous() if sorter is not None else seq
    per_row = n if seq.dim() == 1 else max(x.shape[-1], 1)     # (a batched sequence: x has its leading dims)
    _search_kernel[(cdiv(n, _BLOCK),)](out, seq, x, srt, flag, n, per_row, m, int(m).bit_length(),
                                       HAS_SORTER=sorter is not None, RIGHT=right, BLOCK=_BLOCK, num_warps=4)


def _run_search(desc, pref):
    def run(desc_, inputs, outputs, ws):
        out = outputs[0]
        res = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
        flag = ws.view(torch.int64)[:1]
        flag.zero_()
        if desc.op == "bucketize":
            x, seq = inputs
            sorter = None
        else:
            seq, x = inputs[:2]
            sorter = inputs[2] if len(inputs) == 3 else None
        search(res, seq, x, sorter, desc.attr("right"), flag)
        if res is not out:
            out.copy_(res)
        if sorter is not None:
            m = seq.shape[-1]
            flagged(flag, pref, lambda v: InvalidProblemError(
                "searchsorted", "sorter", f"indices in [0, {m}) (the sorted_sequence's last dim)", int(v) - 1))
    return run


def _run_isin(desc, pref):
    def run(desc_, inputs, outputs, ws):
        x, t = (a.contiguous() for a in inputs)
        out = outputs[0]
        res = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
        if x.numel():
            _isin_kernel[(cdiv(x.numel(), 256),)](bits(res), x, t, x.numel(), t.numel(),
                                                  INVERT=desc.attr("invert"), BLOCK=256, CHUNK=64, num_warps=4)
        if res is not out:
            out.copy_(res)
    return run



register_triton("searchsorted", bind=_run_search, workspace=lambda d: 8,
                route="triton:searchsorted:binary-search")
register_triton("bucketize", bind=_run_search, workspace=lambda d: 8,
                route="triton:bucketize:binary-search")
register_triton("isin", bind=_run_isin, route="triton:isin:all-pairs")
