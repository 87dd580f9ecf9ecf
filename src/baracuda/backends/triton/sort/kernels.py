"""Triton kernels of the sort family (the host side is rows.py / stats.py; the radix passes: radix.py).

Rows are contiguous [R, n] (the host moves the sort axis last).  The paths (three for sorts, three for topk):

* short rows (next_pow2(n) <= NMAX: 8192 packed keys, 4096 (key, index) pairs): ``_rows_kernel`` sorts BR
  rows x N positions in registers in one program (network.sort_tile) and writes the first K sorted
  entries of each row: the values (gathered from x at the sorted positions: exact, -0.0 and NaN payloads
  kept) and/or the int64 indices.  Rows of 8192 f32: one program per row, 64 KB of packed keys in flight.
* long rows (up to 2^24 and beyond), keys of <= 32 bits: the LSD radix sort of radix.py, BITS / 8 passes of 8-bit
  digits (a block histogram, a scan of the counts, a stable scatter of (value, int32 position) ranked in registers
  by a bitonic sort of 4096 (digit, position) int32s); 80 B moved per element of an f32 row: 1 x 2^24 f32 in
  3.19 ms on the H200, 4x torch's CUB radix sort's time (session 15).
* long rows of 64-bit keys (and ``forced(radix=False)``): block sort + merge passes.  ``_rows_kernel`` with
  BLOCK=True sorts blocks of NMAX positions into a workspace of (key int64, index int32) pairs; then
  log2(n / NMAX) passes of ``_merge_kernel`` each merge pairs of sorted runs of L into runs of 2L: every element
  finds its rank in the other run by a binary search (log2(L) + 1 probes, lexicographic on (key, index): all pairs
  distinct, so the ranks are a permutation) and is written to run start + own rank + that count.  The last pass
  writes the outputs (values gathered from x, int64 indices) directly.  1 x 2^24 f32: 11 passes of 12 B read +
  12 B written per element (the probes of a pass hit L2 for the runs' upper levels), 6.5 ms on the H200.
* topk of 16- and 32-bit keys with k <= 1024 on rows of >= max(4 next_pow2(k), 2048) positions: the threshold
  filter (topk_filter.py: ``_filter_kernel``), one program per row: one streaming read keeps the best key of each
  of M = 4096 strided chunks; the k-th best of those bounds the top k (at least k elements are as good); only the
  chunks holding survivors are re-read, their survivors compacted (in position order, at most C = max(2
  next_pow2(k), 256) per row), the exact k-th key among them found by a bitwise search, and the k taken sorted by
  ``sort_collected`` below.  Rows with more than C survivors (ties at the threshold: constant rows, periodic rows)
  are flagged on the device and finished by ``_select_kernel`` launched GATED (unflagged rows exit at once).
* topk of keys of <= 32 bits with k <= 1024 on rows of >= 4 next_pow2(k) positions not taken by the filter (8-bit
  keys; forced) and the filter's flagged rows: ``_select_kernel``, a radix select, one program per row.  BITS / 8
  passes over the row (chunks of CH positions; the row stays in L1 / L2) build a 256-bin histogram (tl.histogram) of one 8-bit digit of the order keys, high digit first, among the keys
  that share the digits found so far: the bin holding the k-th smallest key, and how many keys sort before it,
  give that key T digit by digit and the number r of its ties that belong in.  One more pass stores the
  positions of the keys below T and of the first r ties (by position: torch's stable order) into the index
  output, compacted by a running count and a prefix sum; they are read back, sorted in registers as packed
  (key, position) pairs and written as the outputs.  A bf16 row of 32768: three reads of the row and a sort of k
  keys, where the chunked path below sorts every chunk of the row.
* other topk with k <= KMAX (4096): ``_topk_kernel``, one program per row walks the row in chunks of C =
  max(next_pow2(k), 1024) positions, sorts each chunk descending and keeps the C best of (best, chunk) by
  an elementwise min of the ascending best and the descending chunk (a bitonic sequence holding the C
  smallest keys of the union), re-sorted by one merge stage.  Larger k runs the full sort and keeps k.
"""
from __future__ import annotations

import triton
import triton.language as tl

from .._lib.interp import loop
from .._lib.launch import fast_kernel
from .network import I64_MAX, merge_tile, pair_less, pair_min, sort_tile, to_key


@triton.jit
def _keys(x_ptr, rows, cols, R, n, sxr, KIND: tl.constexpr, BITS: tl.constexpr, DESC: tl.constexpr,
          PAIR: tl.constexpr):
    """(keys, positions int32) of a [BR, N] tile of rows at cols: packed keys unless PAIR; padding is the
    largest pair (sorts last)."""
    m = (rows < R)[:, None] & (cols < n)[None, :]
    x = tl.load(x_ptr + rows[:, None] * sxr + cols[None, :], mask=m, other=0)
    k = to_key(x, KIND, BITS, DESC)
    pos = tl.zeros([rows.shape[0], cols.shape[0]], tl.int32) + cols[None, :]
    if PAIR:
        k = tl.where(m, k, I64_MAX)
    else:
        k = tl.where(m, (k << 32) | pos.to(tl.int64), I64_MAX)
    return k, pos


@triton.jit
def _positions(k, i, PAIR: tl.constexpr):
    """The row positions of sorted pairs (packed keys keep them in the low 32 bits)."""
    if PAIR:
        return i
    else:
        return (k - ((k >> 32) << 32)).to(tl.int32)


@triton.jit
def _emit(x_ptr, v_ptr, i_ptr, rows, pos, dest, m, sxr, svr, sir, STORE_V: tl.constexpr, STORE_I: tl.constexpr):
    """Write sorted entry dest of each row: x[row, pos] (gathered: exact values) and pos as int64."""
    if STORE_V:
        v = tl.load(x_ptr + rows * sxr + pos, mask=m)
        tl.store(v_ptr + rows * svr + dest, v, mask=m)
    if STORE_I:
        tl.store(i_ptr + rows * sir + dest, pos.to(tl.int64), mask=m)


@fast_kernel
def _rows_kernel(x_ptr, v_ptr, i_ptr, wk_ptr, wi_ptr, R, n, K, sxr, svr, sir,
                 N: tl.constexpr, LN: tl.constexpr, BR: tl.constexpr, LR: tl.constexpr, KIND: tl.constexpr,
                 BITS: tl.constexpr, DESC: tl.constexpr, PAIR: tl.constexpr, BLOCK: tl.constexpr,
                 STORE_V: tl.constexpr, STORE_I: tl.constexpr, LV: tl.constexpr = -1, LW: tl.constexpr = 0,
                 XW: tl.constexpr = True, FC: tl.constexpr = False):
    """Short rows: sort BR rows of <= N in registers and write their first K entries.  BLOCK: sort the
    N-position block program_id(1) of one row into the workspace (global positions, key + index)."""
    if BLOCK:
        rows = (tl.program_id(0) + tl.arange(0, 1)).to(tl.int64)
        base = tl.program_id(1) * N
    else:
        rows = (tl.program_id(0) * BR + tl.arange(0, BR)).to(tl.int64)    # (row * stride in int64)
        base = 0
    cols = base + tl.arange(0, N)
    k, i = _keys(x_ptr, rows, cols, R, n, sxr, KIND, BITS, DESC, PAIR)
    k, i = sort_tile(k, i, LN, LN + LR, 0, PAIR, LV, LW, XW, FC)
    pos = _positions(k, i, PAIR)
    r2 = rows[:, None]
    if BLOCK:
        m = (cols < n)[None, :] & (r2 < R)
        off = r2.to(tl.int64) * n + cols[None, :]
        tl.store(wk_ptr + off, k, mask=m)
        tl.store(wi_ptr + off, pos, mask=m)
    else:
        dest = tl.arange(0, N)[None, :]
        _emit(x_ptr, v_ptr, i_ptr, r2, pos, dest, (r2 < R) & (dest < K), sxr, svr, sir, STORE_V, STORE_I)


@fast_kernel
def _merge_kernel(x_ptr, v_ptr, i_ptr, ik_ptr, ii_ptr, ok_ptr, oi_ptr, R, n, K, L, STEPS, sxr, svr, sir,
                  T: tl.constexpr, PAIR: tl.constexpr, FINAL: tl.constexpr, STORE_V: tl.constexpr,
                  STORE_I: tl.constexpr):
    """One merge pass: runs of L sorted pairs -> runs of 2L (FINAL: into the outputs, first K entries)."""
    row = tl.program_id(0).to(tl.int64)       # rows on grid axis 0 (up to 2^31 - 1; axis 1 stops at 65535)
    p = tl.program_id(1) * T + tl.arange(0, T)
    m = p < n
    run = p // L
    other = (run ^ 1) * L
    olen = tl.maximum(tl.minimum(other + L, n) - other, 0)
    base = row * n
    k = tl.load(ik_ptr + base + p, mask=m, other=0)
    i = tl.load(ii_ptr + base + p, mask=m, other=0)
    lo = tl.zeros([T], tl.int32)
    hi = olen
    for _ in loop(0, STEPS):          # lo = the number of pairs of the other run below (k, i)
        act = lo < hi
        mid = (lo + hi) // 2
        q = tl.minimum(other + mid, n - 1)
        mk = tl.load(ik_ptr + base + q, mask=m & act, other=0)
        mi = tl.load(ii_ptr + base + q, mask=m & act, other=0)
        below = pair_less(mk, mi, k, i, True)
        lo = tl.where(act & below, mid + 1, lo)
        hi = tl.where(act & ~below, mid, hi)
    dest = (run // 2) * (2 * L) + (p - run * L) + lo
    if FINAL:
        _emit(x_ptr, v_ptr, i_ptr, row, i, dest, m & (dest < K), sxr, svr, sir, STORE_V, STORE_I)
    else:
        tl.store(ok_ptr + base + dest, k, mask=m)
        tl.store(oi_ptr + base + dest, i, mask=m)


@fast_kernel
def _topk_kernel(x_ptr, v_ptr, i_ptr, R, n, K, NCH, sxr, svr, sir, C: tl.constexpr, LC: tl.constexpr,
                 KIND: tl.constexpr, BITS: tl.constexpr, DESC: tl.constexpr, PAIR: tl.constexpr,
                 LV: tl.constexpr = -1, LW: tl.constexpr = 0, XW: tl.constexpr = True, FC: tl.constexpr = False):
    """The K first entries of each row's sort (K <= C), one program per row, chunks of C positions."""
    rows = (tl.program_id(0) + tl.arange(0, 1)).to(tl.int64)
    bk = tl.full([1, C], I64_MAX, tl.int64)
    bi = tl.full([1, C], 2147483647, tl.int32)
    for c in loop(0, NCH):
        cols = c * C + tl.arange(0, C)
        k, i = _keys(x_ptr, rows, cols, R, n, sxr, KIND, BITS, DESC, PAIR)
        k, i = sort_tile(k, i, LC, LC, 1, PAIR, LV, LW, XW, FC)
        bk, bi = pair_min(bk, bi, k, i, PAIR)
        bk, bi = merge_tile(bk, bi, LC, LC, PAIR, FC)
    pos = _positions(bk, bi, PAIR)
    dest = tl.arange(0, C)[None, :]
    r2 = rows[:, None]
    _emit(x_ptr, v_ptr, i_ptr, r2, pos, dest, (r2 < R) & (dest < K), sxr, svr, sir, True, True)


@fast_kernel
def _select_kernel(x_ptr, v_ptr, i_ptr, flag_ptr, R, n, K, NCH, sxr, svr, sir, LO, CH: tl.constexpr,
                   KP: tl.constexpr, LKP: tl.constexpr, KIND: tl.constexpr, BITS: tl.constexpr, DESC: tl.constexpr,
                   GATED: tl.constexpr, LV: tl.constexpr = -1, LW: tl.constexpr = 0, XW: tl.constexpr = True,
                   FC: tl.constexpr = False):
    """The K (<= KP) first entries of each row's sort by a radix select (module doc), one program per row; LO: the
    smallest order key, so that key - LO is an unsigned BITS-bit number.  GATED: only the rows whose int32 flag is
    set (the threshold filter's overflowed rows, topk_filter.py); the others exit at once."""
    row = tl.program_id(0).to(tl.int64)
    if GATED:
        if tl.load(flag_ptr + row) == 0:
            return
    bins = tl.arange(0, 256)
    prefix = tl.full((), 0, tl.int64)       # the digits of the K-th key found so far
    kr = tl.full((), 0, tl.int32) + K       # how many of the keys sharing them belong in
    for p in tl.static_range(BITS // 8):
        shift = BITS - 8 * (p + 1)
        h = tl.zeros([256], tl.int32)
        for c in loop(0, NCH):
            cols = c * CH + tl.arange(0, CH)
            m = cols < n
            u = to_key(tl.load(x_ptr + row * sxr + cols, mask=m, other=0), KIND, BITS, DESC) - LO
            if p > 0:
                m = m & ((u >> (shift + 8)) == prefix)
            h += tl.histogram(((u >> shift) & 255).to(tl.int32), 256, mask=m)
        d = tl.sum((tl.cumsum(h, 0) < kr).to(tl.int32), 0)      # the bin of the kr-th key
        kr -= tl.sum(tl.where(bins < d, h, 0), 0)
        prefix = prefix * 256 + d
    filled = tl.full((), 0, tl.int32)
    ties = tl.full((), 0, tl.int32)
    for c in loop(0, NCH):
        cols = c * CH + tl.arange(0, CH)
        m = cols < n
        u = to_key(tl.load(x_ptr + row * sxr + cols, mask=m, other=0), KIND, BITS, DESC) - LO
        eq = m & (u == prefix)
        take = (m & (u < prefix)) | (eq & (ties + tl.cumsum(eq.to(tl.int32), 0) <= kr))
        slot = filled + tl.cumsum(take.to(tl.int32), 0) - 1
        tl.store(i_ptr + row * sir + slot, cols.to(tl.int64), mask=take)
        filled += tl.sum(take.to(tl.int32), 0)
        ties += tl.sum(eq.to(tl.int32), 0)
    sort_collected(x_ptr, v_ptr, i_ptr, row, K, sxr, svr, sir, KP, LKP, KIND, BITS, DESC, LV, LW, XW, FC)


@triton.jit
def sort_collected(x_ptr, v_ptr, i_ptr, row, K, sxr, svr, sir, KP: tl.constexpr, LKP: tl.constexpr,
                   KIND: tl.constexpr, BITS: tl.constexpr, DESC: tl.constexpr, LV: tl.constexpr, LW: tl.constexpr,
                   XW: tl.constexpr, FC: tl.constexpr = False):
    """The K (<= KP) positions the program stored in row's index output (any order) sorted as packed (key,
    position) pairs and written as the row's values and indices (K = 0 writes nothing); topk_filter.py shares it.
    LV / LW / XW / FC: the network's layout (network.sort_tile) for the index row's loads."""
    tl.debug_barrier()
    rows = row + tl.arange(0, 1).to(tl.int64)
    j = tl.arange(0, KP)[None, :]
    jm = j < K
    pos = tl.load(i_ptr + rows[:, None] * sir + j, mask=jm, other=0).to(tl.int32)
    k = to_key(tl.load(x_ptr + rows[:, None] * sxr + pos, mask=jm, other=0), KIND, BITS, DESC)
    k = tl.where(jm, (k << 32) | pos.to(tl.int64), I64_MAX)
    k, pos = sort_tile(k, pos, LKP, LKP, 0, False, LV, LW, XW, FC)
    tl.debug_barrier()
    _emit(x_ptr, v_ptr, i_ptr, rows[:, None], _positions(k, pos, False), j, jm, sxr, svr, sir, True, True)
