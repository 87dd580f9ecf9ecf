"""Triton kernels of the embedding and segment families.

Rows are [*, D] with D tiled by BD in the grid's second axis; every index is checked before it addresses memory
(out-of-range rows are masked: a bad token's output row is 0, nothing is written for it) and the embedding
kernels record the first bad value they see in a device flag word (``code = id + 1`` for id >= 0, ``id`` for a
negative id: never 0), which _core/checks.py turns into the named error.

Two ways of summing token rows into table rows (embedding's weight gradient, segment_sum, the bags' gradient):
* ``_scatter_add``: one atomic add per element into a zeroed f32/f64 output (fast, order-dependent:
  deterministic=False);
* ``_seg_reduce``: the ids sorted once (a stable sort: equal ids keep their token order), ``_lower_bound`` gives
  each table row its [start, end) run, and one program per (row, D tile) folds its run in token order
  (deterministic, bit-stable; also max / min / prod, which have no float atomics, and the backward's
  statistics).
"""
from __future__ import annotations

import triton
import triton.language as tl

from .._lib.atomics import red_add
from .._lib.interp import f64_arg, loop

# _seg_reduce modes
SUM, PROD, MAX, MIN, TIES, NZPROD, ZEROS, MAXBAG = 0, 1, 2, 3, 4, 5, 6, 7


@triton.jit
def _flag_bad(flag_ptr, ids, ok, mask):
    """Record a bad id (any one of them) in flag_ptr[0]: id + 1 for id >= 0, id itself below 0."""
    code = tl.where(ids >= 0, ids + 1, ids)
    tl.store(flag_ptr + ids * 0, code, mask=mask & (ok == 0))


@triton.jit
def _check_ids(ids_ptr, flag_ptr, N, V, BT: tl.constexpr):
    t = tl.program_id(0).to(tl.int64) * BT + tl.arange(0, BT)
    tm = t < N
    ids = tl.load(ids_ptr + t, mask=tm, other=0).to(tl.int64)
    _flag_bad(flag_ptr, ids, (ids >= 0) & (ids < V), tm)


@triton.jit
def _row_scales(ids_ptr, w_ptr, scale_ptr, N, V, D, sw, swd, max_norm, norm_type,
                L2: tl.constexpr, CT: tl.constexpr, INTERP: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr):
    """max_norm's factor per token: max_norm / (norm + 1e-7) where the row's norm exceeds max_norm, else 1."""
    t = tl.program_id(0).to(tl.int64) * BT + tl.arange(0, BT)
    tm = t < N
    ids = tl.load(ids_ptr + t, mask=tm, other=0).to(tl.int64)
    ok = tm & (ids >= 0) & (ids < V)
    row = tl.where(ok, ids, 0)
    p = f64_arg(norm_type, CT, INTERP)
    mx = f64_arg(max_norm, CT, INTERP)
    acc = tl.zeros([BT], CT)
    for d0 in loop(0, D, BD):
        dd = d0 + tl.arange(0, BD)
        m = ok[:, None] & (dd < D)[None, :]
        x = tl.abs(tl.load(w_ptr + row[:, None] * sw + dd[None, :] * swd, mask=m, other=0).to(CT))
        if L2:
            acc += tl.sum(x * x, 1)
        else:
            acc += tl.sum(tl.where(x > 0, tl.exp(p * tl.log(tl.maximum(x, 1e-30))), 0.0), 1)
    if L2:
        norm = tl.sqrt(acc)
    else:
        norm = tl.where(acc > 0, tl.exp(tl.log(tl.maximum(acc, 1e-30)) / p), 0.0)
    scale = tl.where(norm > mx, mx / (norm + 1e-7), 1.0)
    tl.store(scale_ptr + t, scale, mask=tm)


@triton.jit
def _emb_fwd(ids_ptr, w_ptr, out_ptr, scale_ptr, flag_ptr, N, V, D, sw, swd,
             RENORM: tl.constexpr, CT: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr):
    """out[t, :] = weight[ids[t], :] (times the token's max_norm scale)."""
    t = tl.program_id(0).to(tl.int64) * BT + tl.arange(0, BT)
    dd = tl.program_id(1) * BD + tl.arange(0, BD)
    tm = t < N
    ids = tl.load(ids_ptr + t, mask=tm, other=0).to(tl.int64)
    ok = (ids >= 0) & (ids < V)
    if tl.program_id(1) == 0:
        _flag_bad(flag_ptr, ids, ok, tm)
    row = tl.where(ok, ids, 0)
    dm = (dd < D)[None, :]
    x = tl.load(w_ptr + row[:, None] * sw + dd[None, :] * swd, mask=(tm & ok)[:, None] & dm, other=0)
    if RENORM:
        s = tl.load(scale_ptr + t, mask=tm, other=1.0)
        x = (x.to(CT) * s[:, None]).to(out_ptr.dtype.element_ty)
    tl.store(out_ptr + t[:, None] * D + dd[None, :], x, mask=tm[:, None] & dm)


@triton.jit
def _lower_bound(keys_ptr, out_ptr, N, NQ, STEPS, BQ: tl.constexpr):
    """out[q] = the first position of the sorted keys[0, N) whose key is >= q, for q in [0, NQ)."""
    q = tl.program_id(0).to(tl.int64) * BQ + tl.arange(0, BQ)
    lo = tl.zeros([BQ], tl.int64)
    hi = tl.zeros([BQ], tl.int64) + N
    for _ in loop(0, STEPS):
        act = lo < hi
        mid = (lo + hi) // 2
        v = tl.load(keys_ptr + tl.where(act, mid, 0), mask=act, other=0).to(tl.int64)
        go = act & (v < q)
        lo = tl.where(go, mid + 1, lo)
        hi = tl.where(act & (go == 0), mid, hi)
    tl.store(out_ptr + q, lo, mask=q < NQ)


@triton.jit
def _seg_reduce(src_ptr, perm_ptr, offs_ptr, srow_ptr, wt_ptr, ref_ptr, out_ptr, D, ss, sd, pad, ident,
                MODE: tl.constexpr, HAS_PERM: tl.constexpr, HAS_SROW: tl.constexpr, HAS_WT: tl.constexpr,
                MEAN: tl.constexpr, CT: tl.constexpr, BD: tl.constexpr):
    """out[s, dd] = fold over k in [offs[s], offs[s+1]) of src[srow[perm[k]], dd] (* wt[perm[k]]), in k order.
    MEAN divides by the run's length; row ``pad`` (>= 0) is written as 0.  TIES counts src == ref[s] (max / min
    backward), NZPROD multiplies the non-zeros, ZEROS counts the zeros (prod backward).  MAXBAG (embedding_bag's
    max backward): src is grad [B, D], srow the token's bag, ref the max_indices [B, D]; a token adds its bag's
    gradient where the bag's max index is this row, once per bag (a bag's tokens of one id are adjacent in the
    stable sort, so a repeat is the previous token's bag)."""
    s = tl.program_id(0).to(tl.int64)
    dd = tl.program_id(1) * BD + tl.arange(0, BD)
    dm = dd < D
    start = tl.load(offs_ptr + s)
    end = tl.load(offs_ptr + s + 1)
    acc = tl.zeros([BD], CT) + ident
    if MODE == 4:
        ref = tl.load(ref_ptr + s * D + dd, mask=dm, other=0).to(CT)
    last = start * 0 - 1
    for k in loop(start, end):
        if HAS_PERM:
            t = tl.load(perm_ptr + k)
        else:
            t = k
        if HAS_SROW:   # -1: a token outside every bag (contributes nothing)
            r = tl.load(srow_ptr + t)
            x = tl.load(src_ptr + tl.maximum(r, 0) * ss + dd * sd, mask=dm & (r >= 0), other=0).to(CT)
        else:
            r = t
            x = tl.load(src_ptr + t * ss + dd * sd, mask=dm, other=0).to(CT)
        if HAS_WT:
            x = x * tl.load(wt_ptr + t).to(CT)
        if MODE == 0:
            acc += x
        elif MODE == 1:
            acc *= x
        elif MODE == 2:
            acc = tl.where((x > acc) | (x != x), x, acc)   # NaN wins (jnp.maximum)
        elif MODE == 3:
            acc = tl.where((x < acc) | (x != x), x, acc)
        elif MODE == 4:
            acc += tl.where(x == ref, 1.0, 0.0)
        elif MODE == 5:
            acc *= tl.where(x == 0, 1.0, x)
        elif MODE == 7:
            mi = tl.load(ref_ptr + tl.maximum(r, 0) * D + dd, mask=dm & (r >= 0), other=-1)
            acc += tl.where((mi == s) & (r != last), x, 0.0)
            last = r
        else:
            acc += tl.where(x == 0, 1.0, 0.0)
    if MEAN:
        acc = acc / tl.maximum(end - start, 1).to(CT)
    if s == pad:
        acc = tl.zeros([BD], CT)
    tl.store(out_ptr + s * D + dd, acc.to(out_ptr.dtype.element_ty), mask=dm)


@triton.jit
def _scatter_add(src_ptr, ids_ptr, srow_ptr, wt_ptr, out_ptr, N, S, D, ss, sd, pad,
                 HAS_SROW: tl.constexpr, HAS_WT: tl.constexpr, CT: tl.constexpr, BT: tl.constexpr,
                 BD: tl.constexpr):
    """out[ids[t], dd] += src[srow[t], dd] (* wt[t]) by float atomics; ids outside [0, S) and ``pad`` skipped."""
    t = tl.program_id(0).to(tl.int64) * BT + tl.arange(0, BT)
    dd = tl.program_id(1) * BD + tl.arange(0, BD)
    tm = t < N
    ids = tl.load(ids_ptr + t, mask=tm, other=-1).to(tl.int64)
    ok = tm & (ids >= 0) & (ids < S) & (ids != pad)
    if HAS_SROW:   # -1: a token outside every bag
        r = tl.load(srow_ptr + t, mask=ok, other=0)
        ok = ok & (r >= 0)
        r = tl.maximum(r, 0)
    else:
        r = t
    m = ok[:, None] & (dd < D)[None, :]
    x = tl.load(src_ptr + r[:, None] * ss + dd[None, :] * sd, mask=m, other=0).to(CT)
    if HAS_WT:
        x = x * tl.load(wt_ptr + t, mask=ok, other=0).to(CT)[:, None]
    red_add(out_ptr + tl.where(ok, ids, 0)[:, None] * D + dd[None, :], x, mask=m)


@triton.jit
def _seg_grad(g_ptr, x_ptr, ids_ptr, offs_ptr, out_ptr, aux_ptr, aux2_ptr, dx_ptr, N, S, D, sx,
              MODE: tl.constexpr, CT: tl.constexpr, BT: tl.constexpr, BD: tl.constexpr):
    """dx of segment_<reduction> per position (MODE: 0 sum, 1 mean, 2 max/min, 3 prod); aux = ties (max / min) or
    the non-zero product (prod), aux2 = the zero count (prod); the run lengths (mean) come from offs."""
    t = tl.program_id(0).to(tl.int64) * BT + tl.arange(0, BT)
    dd = tl.program_id(1) * BD + tl.arange(0, BD)
    tm = t < N
    ids = tl.load(ids_ptr + t, mask=tm, other=-1).to(tl.int64)
    ok = tm & (ids >= 0) & (ids < S)
    row = tl.where(ok, ids, 0)
    dm = (dd < D)[None, :]
    m = ok[:, None] & dm
    at = row[:, None] * D + dd[None, :]
    g = tl.load(g_ptr + at, mask=m, other=0).to(CT)
    if MODE == 1:
        cnt = tl.load(offs_ptr + row + 1, mask=ok, other=1) - tl.load(offs_ptr + row, mask=ok, other=0)
        g = g / tl.maximum(cnt, 1).to(CT)[:, None]
    elif MODE == 2:
        x = tl.load(x_ptr + t[:, None] * sx + dd[None, :], mask=m, other=0).to(CT)
        y = tl.load(out_ptr + at, mask=m, other=0).to(CT)
        ties = tl.load(aux_ptr + at, mask=m, other=1.0).to(CT)
        g = tl.where(x == y, g / tl.maximum(ties, 1.0), 0.0)
    elif MODE == 3:
        x = tl.load(x_ptr + t[:, None] * sx + dd[None, :], mask=m, other=1).to(CT)
        p = tl.load(aux_ptr + at, mask=m, other=1.0).to(CT)
        z = tl.load(aux2_ptr + at, mask=m, other=0.0).to(CT)
        others = tl.where(x == 0, tl.where(z == 1, p, 0.0), tl.where(z == 0, p / tl.where(x == 0, 1.0, x), 0.0))
        g = g * others
    tl.store(dx_ptr + t[:, None] * D + dd[None, :], tl.where(m, g, 0.0).to(dx_ptr.dtype.element_ty),
             mask=tm[:, None] & dm)


@triton.jit
def _bag_bounds(offs_ptr, flag_ptr, b, NOFF, N, FLAG: tl.constexpr):
    """Bag b's token range [start, end), clamped into [0, N]; flag_ptr[1] = 1 for offsets that are not a
    non-decreasing sequence starting at 0 within [0, N]."""
    start = tl.load(offs_ptr + b).to(tl.int64)
    end = tl.load(offs_ptr + b + 1, mask=b + 1 < NOFF, other=N).to(tl.int64)
    good = (start >= 0) & (end <= N) & (end >= start) & ((b > 0) | (start == 0))
    if FLAG:
        tl.store(flag_ptr + 1, 1, mask=good == 0)
    start = tl.minimum(tl.maximum(start, 0), N)
    end = tl.minimum(tl.maximum(end, start), N)
    return start, end


@triton.jit
def _bag_fwd(ids_ptr, offs_ptr, w_ptr, psw_ptr, scale_ptr, out_ptr, maxi_ptr, rows_ptr, flag_ptr,
             N, NOFF, V, D, sw, swd, pad, MODE: tl.constexpr, HAS_PSW: tl.constexpr, RENORM: tl.constexpr,
             CT: tl.constexpr, BD: tl.constexpr):
    """out[b] = sum (MODE 0) / mean (1) / max (2, with the row id of the first maximum) over the bag's tokens other
    than ``pad``; an empty bag is 0 (max index -1).  RENORM: rows scaled by the token's max_norm factor, and every
    token's renormalised row written to rows[k]."""
    b = tl.program_id(0).to(tl.int64)
    first = tl.program_id(1) == 0
    dd = tl.program_id(1) * BD + tl.arange(0, BD)
    dm = dd < D
    start, end = _bag_bounds(offs_ptr, flag_ptr, b, NOFF, N, True)
    acc = tl.zeros([BD], CT)
    mi = tl.zeros([BD], tl.int64) - 1
    cnt = start * 0
    for k in loop(start, end):
        i = tl.load(ids_ptr + k).to(tl.int64)
        ok = (i >= 0) & (i < V)
        if first:
            tl.store(flag_ptr, tl.where(i >= 0, i + 1, i), mask=ok == 0)
        keep = ok & (i != pad)
        x = tl.load(w_ptr + tl.where(ok, i, 0) * sw + dd * swd, mask=dm & ok, other=0).to(CT)
        if RENORM:
            x = x * tl.load(scale_ptr + k).to(CT)
            tl.store(rows_ptr + k * D + dd, x.to(rows_ptr.dtype.element_ty), mask=dm & ok)
        if HAS_PSW:
            x = x * tl.load(psw_ptr + k).to(CT)
        if MODE == 2:
            upd = (x > acc) | (tl.zeros([BD], tl.int64) + cnt == 0)
            upd = upd & (tl.zeros([BD], tl.int1) | keep)
            acc = tl.where(upd, x, acc)
            mi = tl.where(upd, i, mi)
        else:
            acc += tl.where(keep, x, 0.0)
        cnt += keep.to(tl.int64)
    if MODE == 1:
        acc = acc / tl.maximum(cnt, 1).to(CT)
    if MODE == 2:
        tl.store(maxi_ptr + b * D + dd, mi, mask=dm)
    tl.store(out_ptr + b * D + dd, acc.to(out_ptr.dtype.element_ty), mask=dm)


@triton.jit
def _bag_prep(ids_ptr, offs_ptr, psw_ptr, srow_ptr, wt_ptr, flag_ptr, N, NOFF, V, pad, MEAN: tl.constexpr,
              HAS_PSW: tl.constexpr, BT: tl.constexpr):
    """Per token of bag b: srow = b and its weight (per_sample_weights, 1 / the bag's kept count for mean, 0 for
    padding); the backward then sums grad[srow] * wt rows by id.  Flags bad ids (word 0) and offsets (word 1)."""
    b = tl.program_id(0).to(tl.int64)
    start, end = _bag_bounds(offs_ptr, flag_ptr, b, NOFF, N, True)
    cnt = start * 0
    if MEAN:
        for k0 in loop(start, end, BT):
            k = k0 + tl.arange(0, BT)
            i = tl.load(ids_ptr + k, mask=k < end, other=-1).to(tl.int64)
            cnt += tl.sum(((k < end) & (i >= 0) & (i < V) & (i != pad)).to(tl.int64), 0)
    for k0 in loop(start, end, BT):
        k = k0 + tl.arange(0, BT)
        m = k < end
        i = tl.load(ids_ptr + k, mask=m, other=0).to(tl.int64)
        ok = (i >= 0) & (i < V)
        _flag_bad(flag_ptr, i, ok, m)
        if HAS_PSW:
            w = tl.load(psw_ptr + k, mask=m, other=0).to(wt_ptr.dtype.element_ty)
        else:
            w = tl.zeros([BT], wt_ptr.dtype.element_ty) + 1.0 / tl.maximum(cnt, 1).to(wt_ptr.dtype.element_ty)
        w = tl.where(ok & (i != pad), w, 0.0)
        tl.store(srow_ptr + k, b + k * 0, mask=m)
        tl.store(wt_ptr + k, w, mask=m)


@triton.jit
def _bag_max_bw(g_ptr, maxi_ptr, out_ptr, V, D, pad, CT: tl.constexpr, BD: tl.constexpr):
    """out[max_indices[b, j], j] += grad[b, j] (float atomics; -1 = an empty bag)."""
    b = tl.program_id(0).to(tl.int64)
    dd = tl.program_id(1) * BD + tl.arange(0, BD)
    dm = dd < D
    r = tl.load(maxi_ptr + b * D + dd, mask=dm, other=-1)
    ok = dm & (r >= 0) & (r < V) & (r != pad)
    g = tl.load(g_ptr + b * D + dd, mask=ok, other=0).to(CT)
    red_add(out_ptr + tl.where(ok, r, 0) * D + dd, g, mask=ok)


@triton.jit
def _psw_grad(g_ptr, ids_ptr, srow_ptr, w_ptr, out_ptr, N, V, D, sw, pad, ROWS: tl.constexpr, CT: tl.constexpr,
              BT: tl.constexpr, BD: tl.constexpr):
    """dper_sample_weights[k] = grad[bag(k)] . weight[ids[k]] (ROWS: . rows[k], the renormalised token rows); 0 for
    padding and tokens outside every bag."""
    k = tl.program_id(0).to(tl.int64) * BT + tl.arange(0, BT)
    km = k < N
    i = tl.load(ids_ptr + k, mask=km, other=-1).to(tl.int64)
    r = tl.load(srow_ptr + k, mask=km, other=-1)
    ok = km & (i >= 0) & (i < V) & (i != pad) & (r >= 0)
    acc = tl.zeros([BT], CT)
    for d0 in loop(0, D, BD):
        dd = d0 + tl.arange(0, BD)
        m = ok[:, None] & (dd < D)[None, :]
        g = tl.load(g_ptr + tl.where(ok, r, 0)[:, None] * D + dd[None, :], mask=m, other=0).to(CT)
        if ROWS:
            w = tl.load(w_ptr + k[:, None] * sw + dd[None, :], mask=m, other=0).to(CT)
        else:
            w = tl.load(w_ptr + tl.where(ok, i, 0)[:, None] * sw + dd[None, :], mask=m, other=0).to(CT)
        acc += tl.sum(g * w, 1)
    tl.store(out_ptr + k, acc.to(out_ptr.dtype.element_ty), mask=km)
