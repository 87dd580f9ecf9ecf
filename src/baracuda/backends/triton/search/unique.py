"""Triton unique_consecutive, unique and mode.

unique_consecutive (any length, no host read: the distinct count is written on the device):
1. ``_new_kernel``: new[i] = 1 where element (or slice along ``dim``) i differs from i - 1 (i == 0 always new),
   and each BLOCK's count of them.
2. ``_offsets_kernel`` (one program): exclusive block offsets, 1024 blocks a step; the total is the 4th output.
3. ``_emit_kernel``: run index = block offset + inclusive cumsum(new) - 1: inverse[i] = it; counts[it] += 1 (int64
   atomics: order-independent, deterministic); a new element's value (dim=None) or its slice index (dim) is
   written at it; ``_rows_kernel`` copies the slices (zeros past the count).

unique, dim=None, up to 4096 elements: one program sorts the values in registers (tl.sort's bitonic network; the
padding lanes hold the dtype's largest value), writes the first of each run of equal values, counts them
(atomics), then finds each input's index by a binary search of the distinct values (a CTA barrier between the
two).  NaN inputs: unspecified order in that network (torch counts each NaN apart).
unique, dim=None, longer inputs: the sort family's global sort (``sort_rows``: stable, every NaN after +inf), then
the three unique_consecutive kernels on the sorted values, ``_emit_kernel`` scattering each run index to the input
position the sort moved (PERM).  Each NaN is its own run there (NaN != NaN), as torch's.
unique along a dim: the slices' lexicographic order by one stable sort per slice element, the last first
(``_sorted_slices``: L sorts of n keys for n slices of L elements), the slices gathered in that order, then the
same three kernels on the slices and ``_rows_kernel`` for the distinct ones.  NaN inside slices: unspecified.

mode: one program per row; each element's count is a tiled all-pairs comparison (R^2 / 4096 tiles of 64 x 64);
the best (count, then the smaller value) is kept in a fixed order, then the row's last position of that value.
Rows up to 16384 (longer rows: 64k tiles each; the sort-based form is the sort family's).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ...._core.dtypes import as_dtype
from .._lib.atomics import red_add
from .._lib.config import overrides
from .._lib.geometry import cdiv, next_power_of_2
from .._lib.launch import fast_kernel
from .._lib.register import register_triton
from ..layout.move import bits
from ..sort.rows import sort_rows, sort_ws_bytes
from .search import flat_block, lower_upper

_BLOCK = 1024
_SMALL = 4096
_MODE_ROW = 16384
_FORCE, forced = overrides("""Force ``small`` (the most elements unique sorts in one program; past it, the global sort
path) in tests.""")


@fast_kernel
def _new_kernel(new_ptr, cnt_ptr, x_ptr, n, L, BLOCK: tl.constexpr, LB: tl.constexpr):
    """new[i] for ``n`` slices of ``L`` contiguous elements each (L = 1: elements)."""
    p, pm = flat_block(n, BLOCK)
    diff = tl.zeros([BLOCK], tl.int32)
    j = 0
    while j < L:
        o = j + tl.arange(0, LB)
        ok = pm[:, None] & (p > 0)[:, None] & (o < L)[None, :]
        a = tl.load(x_ptr + p[:, None] * L + o[None, :], mask=ok, other=0)
        b = tl.load(x_ptr + (p - 1)[:, None] * L + o[None, :], mask=ok, other=0)
        if a.dtype.is_fp16() or a.dtype.is_bf16():   # (as floats: the interpreter compares half types' bits,
            a, b = a.to(tl.float32), b.to(tl.float32)   # where NaN == NaN and -0.0 != 0.0)
        diff = tl.maximum(diff, tl.max((a != b).to(tl.int32), axis=1))
        j += LB
    new = tl.where(pm & ((p == 0) | (diff > 0)), 1, 0)
    tl.store(new_ptr + p, new.to(tl.int8), mask=pm)
    tl.store(cnt_ptr + tl.program_id(0), tl.sum(new.to(tl.int64), axis=0))


@fast_kernel
def _offsets_kernel(off_ptr, num_ptr, cnt_ptr, nb, BLOCK: tl.constexpr):
    carry = tl.sum(tl.zeros([BLOCK], dtype=tl.int64), axis=0)
    s = 0
    while s < nb:
        o = s + tl.arange(0, BLOCK)
        v = tl.load(cnt_ptr + o, mask=o < nb, other=0)
        tl.store(off_ptr + o, tl.cumsum(v, axis=0) - v + carry, mask=o < nb)
        carry += tl.sum(v, axis=0)
        s += BLOCK
    tl.store(num_ptr, carry)


@fast_kernel
def _emit_kernel(vals_ptr, inv_ptr, counts_ptr, x_ptr, new_ptr, off_ptr, perm_ptr, n, ROWS: tl.constexpr,
                 PERM: tl.constexpr, BLOCK: tl.constexpr):
    """PERM: x is the input sorted and perm its sort's positions (each in [0, n)): the run index of sorted element p
    is the inverse of input element perm[p]."""
    p, pm = flat_block(n, BLOCK)
    new = tl.load(new_ptr + p, mask=pm, other=0).to(tl.int64)
    run = tl.load(off_ptr + tl.program_id(0)) + tl.cumsum(new, axis=0) - 1
    if PERM:
        tl.store(inv_ptr + tl.load(perm_ptr + p, mask=pm, other=0), run, mask=pm)
    else:
        tl.store(inv_ptr + p, run, mask=pm)
    red_add(counts_ptr + run, tl.full([BLOCK], 1, tl.int64), mask=pm)
    first = pm & (new != 0)
    if ROWS:                  # the slice index of each run's first slice
        tl.store(vals_ptr + run, p, mask=first)
    else:
        tl.store(vals_ptr + run, tl.load(x_ptr + p, mask=first, other=0), mask=first)


@fast_kernel
def _column_kernel(out_ptr, x_ptr, perm_ptr, n, L, j, PERM: tl.constexpr, BLOCK: tl.constexpr):
    """out[p] = element j of slice perm[p] (PERM) or of slice p, of ``n`` slices of ``L`` contiguous elements."""
    p, pm = flat_block(n, BLOCK)
    r = tl.load(perm_ptr + p, mask=pm, other=0) if PERM else p
    tl.store(out_ptr + p, tl.load(x_ptr + r * L + j, mask=pm, other=0), mask=pm)


@fast_kernel
def _compose_kernel(out_ptr, perm_ptr, order_ptr, n, BLOCK: tl.constexpr):
    """out[p] = perm[order[p]] (both permutations of [0, n))."""
    p, pm = flat_block(n, BLOCK)
    tl.store(out_ptr + p, tl.load(perm_ptr + tl.load(order_ptr + p, mask=pm, other=0), mask=pm, other=0), mask=pm)


@fast_kernel
def _rows_kernel(out_ptr, x_ptr, start_ptr, num_ptr, n, L, BLOCK: tl.constexpr):
    """out[r, :] = x[start[r], :] for r < num, zeros for num <= r < n (``n * L`` elements)."""
    p, pm = flat_block(n * L, BLOCK)
    r = p // L
    num = tl.load(num_ptr)
    ok = pm & (r < num)
    s = tl.load(start_ptr + r, mask=ok, other=0)
    v = tl.load(x_ptr + s * L + p % L, mask=ok, other=0)
    tl.store(out_ptr + p, v, mask=pm)


@fast_kernel
def _unique_small_kernel(vals_ptr, inv_ptr, counts_ptr, num_ptr, sorted_ptr, x_ptr, n, steps,
                         PAD: tl.constexpr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    m = o < n
    x = tl.load(x_ptr + o, mask=m, other=0)
    if x.dtype.is_floating():          # (the interpreter has no bf16 constant: through f32)
        pad = tl.full([BLOCK], PAD, tl.float32).to(x.dtype)
    else:
        pad = tl.full([BLOCK], PAD, x.dtype)
    s = tl.sort(tl.where(m, x, pad))
    tl.store(sorted_ptr + o, s)
    tl.debug_barrier()
    prev = tl.load(sorted_ptr + o - 1, mask=m & (o > 0), other=0)
    new = m & ((o == 0) | (s != prev))
    run = tl.cumsum(new.to(tl.int64), axis=0) - 1
    tl.store(vals_ptr + run, s, mask=new)
    red_add(counts_ptr + run, tl.full([BLOCK], 1, tl.int64), mask=m)
    num = tl.sum(new.to(tl.int64), axis=0)
    tl.store(num_ptr, num)
    tl.debug_barrier()
    inv = lower_upper(vals_ptr, vals_ptr, num_ptr, 0, x, m, num, steps, False, False)
    tl.store(inv_ptr + o, inv, mask=m)


@fast_kernel
def _mode_kernel(val_ptr, idx_ptr, x_ptr, R, B: tl.constexpr):
    base = tl.program_id(0).to(tl.int64) * R
    best_c = tl.sum(tl.zeros([B], tl.int32), axis=0) - 1
    best_v = tl.load(x_ptr + base)
    i = 0
    while i < R:
        oi = i + tl.arange(0, B)
        mi = oi < R
        xi = tl.load(x_ptr + base + oi, mask=mi, other=0)
        c = tl.zeros([B], tl.int32)
        j = 0
        while j < R:
            oj = j + tl.arange(0, B)
            xj = tl.load(x_ptr + base + oj, mask=oj < R, other=0)
            c += tl.sum(((xi[:, None] == xj[None, :]) & (oj < R)[None, :]).to(tl.int32), axis=1)
            j += B
        c = tl.where(mi, c, -1)
        cmax = tl.max(c, axis=0)
        # (the fallback is >= every candidate; min widens small types: back to the row's, exactly)
        vmin = tl.min(tl.where(c == cmax, xi, tl.max(xi, axis=0)), axis=0).to(best_v.dtype)
        better = (cmax > best_c) | ((cmax == best_c) & (vmin < best_v))
        best_c = tl.where(better, cmax, best_c)
        best_v = tl.where(better, vmin, best_v)
        i += B
    last = tl.max(tl.full([B], -1, tl.int64), axis=0)
    i = 0
    while i < R:
        oi = i + tl.arange(0, B)
        xi = tl.load(x_ptr + base + oi, mask=oi < R, other=0)
        last = tl.maximum(last, tl.max(tl.where((oi < R) & (xi == best_v), oi.to(tl.int64), -1), axis=0))
        i += B
    tl.store(val_ptr + tl.program_id(0), best_v)
    tl.store(idx_ptr + tl.program_id(0), last)


# -- host side ------------------------------------------------------------------------------------------
def _raw(t):
    return bits(t) if t.dtype == torch.bool else t


def _pad_value(dt):
    if dt.is_floating_point:
        return float("inf")
    return 255 if dt in (torch.bool, torch.uint8) else torch.iinfo(dt).max


def _targets(outputs):
    return [o if o.is_contiguous() else torch.empty(o.shape, dtype=o.dtype, device=o.device) for o in outputs]


def _finish(outputs, res):
    for o, r in zip(outputs, res):
        if r is not o:
            o.copy_(r)


def _run_unique(desc, pref):
    dim = desc.attr("dim")
    consecutive = desc.op == "unique_consecutive"

    def run(desc_, inputs, outputs, ws):
        x = inputs[0]
        res = _targets(outputs)
        vals, inv, counts, num = res
        counts.zero_()
        vals.zero_()
        num.zero_()
        if dim is not None:
            x = x.movedim(dim, 0)
        x = _raw(x.contiguous())
        n = x.shape[0] if dim is not None else x.numel()
        if n:
            perm = None
            if not consecutive and (dim is not None or n > _FORCE.get("small", _SMALL)):
                # the slices (elements) in sorted order, whose runs the block scan below finds as
                # unique_consecutive's (each NaN its own run: NaN != NaN, as torch's); the inverse is scattered back
                # through the sort's positions
                x, perm = _sorted_slices(x, n, x.numel() // n)
            if consecutive or perm is not None:
                L = x.numel() // n if dim is not None else 1
                nb = cdiv(n, _BLOCK)
                new = torch.empty(n, dtype=torch.int8, device=x.device)
                cnt = torch.empty(2 * nb, dtype=torch.int64, device=x.device)
                _new_kernel[(nb,)](new, cnt, x, n, L, BLOCK=_BLOCK, LB=min(next_power_of_2(L), 16), num_warps=4)
                _offsets_kernel[(1,)](cnt[nb:], num, cnt, nb, BLOCK=1024, num_warps=4)
                starts = torch.empty(n, dtype=torch.int64, device=x.device) if dim is not None else None
                _emit_kernel[(nb,)](starts if dim is not None else _raw(vals), inv, counts, x, new, cnt[nb:],
                                    perm if perm is not None else new, n, ROWS=dim is not None, PERM=perm is not None,
                                    BLOCK=_BLOCK, num_warps=4)
                if dim is not None:
                    moved = torch.empty((n,) + tuple(x.shape[1:]), dtype=x.dtype, device=x.device)
                    _rows_kernel[(cdiv(n * L, _BLOCK),)](moved, x, starts, num, n, L, BLOCK=_BLOCK, num_warps=4)
                    vals.copy_(moved.view(vals.dtype).movedim(0, dim) if vals.dtype == torch.bool else
                               moved.movedim(0, dim))
            else:
                block = max(next_power_of_2(n), 16)
                scratch = torch.empty(block, dtype=x.dtype, device=x.device)
                _unique_small_kernel[(1,)](_raw(vals), inv, counts, num, scratch, x.reshape(-1), n,
                                           int(n).bit_length(), PAD=_pad_value(x.dtype), BLOCK=block,
                                           num_warps=min(max(block // 256, 1), 8))
        _finish(outputs, res)
    return run


def _sorted_slices(x, n: int, L: int):
    """(the ``n`` slices of ``L`` contiguous elements of ``x`` in lexicographic order, ties in input order, as a
    contiguous copy; the input position of each, an int64 [1, n] tensor).  The sort family's stable sort (NaN after
    +inf) once per slice element, the last first, each permuting the order the previous ones left; slices of one
    element: the values sorted as they are."""
    ws = torch.empty(max(sort_ws_bytes(1, n, as_dtype(x.dtype)), 1), dtype=torch.uint8, device=x.device)
    order = torch.empty((1, n), dtype=torch.int64, device=x.device)
    srt = torch.empty_like(x)
    if L == 1:
        sort_rows(x.reshape(1, n), srt.reshape(1, n), order, n, False, ws)
        return srt, order
    col = torch.empty((1, n), dtype=x.dtype, device=x.device)
    perm = spare = None
    grid = (cdiv(n, _BLOCK),)
    for j in range(L - 1, -1, -1):
        _column_kernel[grid](col, x, order if perm is None else perm, n, L, j, PERM=perm is not None,
                             BLOCK=_BLOCK, num_warps=4)
        sort_rows(col, None, order, n, False, ws)
        if perm is None:
            perm, spare = order.clone(), torch.empty_like(order)
        else:
            _compose_kernel[grid](spare, perm, order, n, BLOCK=_BLOCK, num_warps=4)
            perm, spare = spare, perm
    count = torch.full((1,), n, dtype=torch.int64, device=x.device)
    _rows_kernel[(cdiv(n * L, _BLOCK),)](srt, x, perm, count, n, L, BLOCK=_BLOCK, num_warps=4)
    return srt, perm


def _run_mode(desc, pref):
    dim, keepdim = desc.attr("dim"), desc.attr("keepdim")

    def run(desc_, inputs, outputs, ws):
        x = inputs[0]
        x2 = _raw((x.movedim(dim, -1) if x.dim() else x.reshape(1)).contiguous())
        R = x2.shape[-1]
        rows = x2.numel() // R
        res = _targets(outputs)
        if rows:
            _mode_kernel[(rows,)](_raw(res[0]), res[1], x2, R, B=64, num_warps=4)
        _finish(outputs, res)
    return run


def _supports_mode(desc):
    x = desc.inputs[0]
    r = x.shape[desc.attr("dim")] if x.shape else 1
    return None if r <= _MODE_ROW else f"mode rows longer than {_MODE_ROW} (all-pairs counts); got {r}"



for _op in ("unique", "unique_consecutive"):
    register_triton(_op, bind=_run_unique,
                    route=f"triton:{_op}:" + ("block-scan" if _op == "unique_consecutive" else "sort+block-scan"))
register_triton("mode", bind=_run_mode, supports=_supports_mode, route="triton:mode:all-pairs")
