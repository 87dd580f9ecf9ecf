"""The sort family's LSD radix sort of long rows: three kernels per 8-bit digit (the launches: rows.py
``_radix_rows``; the other paths: kernels.py).

Keys.  network.to_key gives every value an int64 order key (torch's order: NaN largest, -0.0 == +0.0; descending:
the complemented key).  For a dtype of BITS bits the key spans 2^BITS consecutive integers, so its BITS low bits,
with the top bit flipped for floats and signed integers (key + 2^(BITS-1)), are an unsigned number in the same
order; bool and uint8 keys (0..255, or ~0..~255 descending) need no flip.  Its 8-bit digits, least significant
first: BITS / 8 passes, each a stable counting sort of the row on one digit, so the last leaves the row in
(key, position) order: torch's stable sort.  bool / uint8 / int8: 1 pass; bf16 / f16 / int16: 2; f32 / int32: 4;
f64 / int64: 8 (the same kernels, int64 keys).

What travels.  Between passes each row is (value, position int32) pairs in two ping-pong buffers of the
workspace, the values as x's bits, not the keys: the key is a few integer ops to recompute from the value, so the
last pass writes the sorted values from what it holds (exact: NaN payloads and -0.0 kept) where the merge path
gathers them from x at random positions, and the buffers of a 16-bit dtype hold 16-bit entries.  A pass over a
row: blocks of B positions (B = 4096: min(4096, nmax)), one program per (row, block) on a flat grid (axis 0 takes
2^31 - 1 programs; row * n in int64):

1. ``_radix_hist_kernel``: the 256-bin histogram of the block's digits (tl.histogram), stored digit-major:
   counts[row, digit, block].
2. ``_radix_scan_kernel``: per (row, digit) an exclusive scan over the blocks, in place: counts[row, d, b] becomes
   the number of keys of digit d in the row's blocks before b, totals[row, d] the row's count of digit d.  One
   program takes DG digits x CH blocks (a [DG, CH] tile of 4096 entries, a loop over the blocks).
3. ``_radix_scatter_kernel``: the stable rank of each key among the block's keys of its digit.  The packed int32s
   digit << log2(B) | block position are distinct; the bitonic network (network.sort_tile) sorts them in registers,
   and sorted slot j then holds the block's j-th key in (digit, position) order: its rank in its digit is j minus
   the block's keys of smaller digits (the exclusive cumsum of the block's histogram).  Its destination in the row:
   the row's keys of smaller digits (exclusive cumsum of totals) + counts[row, d, block] + that rank, one
   256-entry vector gathered per slot (tl.gather).  The values and positions are permuted into slot order in
   registers (tl.gather) and stored in that order: each digit's keys of a block are one contiguous run of stores.
   The first pass reads x itself (the position is the column); the last writes the first K entries of each row to
   the outputs (values, int64 indices), so the workspace holds passes - 1 buffers (at most 2).

Workspace (rows.sort_ws_bytes): counts R x 256 x ceil(n / B) int32 + totals R x 256 int32 + min(passes - 1, 2) x
R x n x (itemsize + 4) bytes: 16 B per f32 element (the merge path's: 24 B), 6 B per bf16 element, none for 8-bit
keys beyond the tables.

Why 8-bit digits ranked by a bitonic sort.  The sort is memory-bound on the H200 (4.8 TB/s) only if the passes are
few: per element, a middle f32 pass reads 4 B (histogram) + 8 B and writes 8 B; the first pass reads x twice and
writes 8 B (16 B), the last reads 12 B and writes 4 B + 8 B (24 B): 80 B per element for f32 (1.3 GB for 2^24:
about 0.3 ms of traffic at 4.5 TB/s), 28 B for bf16, 11 B for int8, 256 B for f64.  The merge path moves about
24 B per element in each of its 12 passes over a 2^24 f32 row (~290 B) plus its binary-search probes and a random
gather of the values.  4-bit digits would rank by a one-hot [B, 16] cumsum (16 registers per key: 512-key blocks
at 4 warps) but double the passes and the bytes (160 B per f32 element).  The bitonic ranking of 4096 int32s is 78
compare-exchange rounds over 16 registers per thread at 8 warps, a few hundred integer instructions per key and
pass (an estimate), so a 32-bit pass may be compute-bound rather than memory-bound.  Compiled offline for sm_90 the
scatter takes 114-128 registers at 8 warps, the histogram ~56, no spills.  The count tables are 256 int32s per
block (1 KB per 4096 keys: L2-resident, a quarter byte per key each way); 2048-key blocks would cut the rounds by
15 % for twice the table.

Measured (H200, session 12 run G, bench/sort_ab.py): one 2^24 f32 row 7.91 ms (the merge passes 7.76, torch 0.81),
unique of 16M int64 (8 passes) 17.7 ms against the merge path's 11.0: the in-block bitonic ranking is what costs,
not the traffic.  So the merge passes stay the default and this path is ``rows.forced(radix=True)``; a faster
ranking (a warp-level multisplit: a ballot per digit bit) is what would make it pay.
"""
from __future__ import annotations

import triton
import triton.language as tl

from .._lib.interp import loop
from .._lib.launch import fast_kernel
from .network import sort_tile, to_key

DIGITS = tl.constexpr(256)


@triton.jit
def _digit(x, SHIFT, KIND: tl.constexpr, BITS: tl.constexpr, DESC: tl.constexpr):
    """The 8-bit digit of x's unsigned order key at bit SHIFT (int32)."""
    k = to_key(x, KIND, BITS, DESC)
    d = ((k >> SHIFT) & 255).to(tl.int32)
    if KIND != 2:       # the top digit of a signed key: flip its sign bit (key + 2^(BITS-1))
        d = tl.where(SHIFT == BITS - 8, d ^ 128, d)
    return d


@fast_kernel
def _radix_hist_kernel(src_ptr, cnt_ptr, n, NB, ssr, SHIFT, B: tl.constexpr, KIND: tl.constexpr,
                       BITS: tl.constexpr, DESC: tl.constexpr):
    """counts[row, :, block] = the histogram of the digits at SHIFT of block program_id % NB of row program_id // NB
    (rows of src have stride ssr)."""
    pid = tl.program_id(0)
    row = (pid // NB).to(tl.int64)
    blk = pid % NB
    cols = blk * B + tl.arange(0, B)
    m = cols < n
    d = _digit(tl.load(src_ptr + row * ssr + cols, mask=m, other=0), SHIFT, KIND, BITS, DESC)
    h = tl.histogram(d, DIGITS, mask=m)
    tl.store(cnt_ptr + (row * DIGITS + tl.arange(0, DIGITS)) * NB + blk, h)


@fast_kernel
def _radix_scan_kernel(cnt_ptr, tot_ptr, NB, NCH, DG: tl.constexpr, CH: tl.constexpr):
    """Exclusive scan of counts[row, d, :] in place over the NB blocks for DG digits d, and totals[row, d]."""
    groups: tl.constexpr = DIGITS // DG
    pid = tl.program_id(0)
    row = (pid // groups).to(tl.int64)
    dg = (pid % groups) * DG + tl.arange(0, DG)
    base = (row * DIGITS + dg) * NB
    carry = tl.zeros([DG], tl.int32)
    for c in loop(0, NCH):
        b = c * CH + tl.arange(0, CH)
        m = (dg < DIGITS)[:, None] & (b < NB)[None, :]
        ptr = cnt_ptr + base[:, None] + b[None, :]
        x = tl.load(ptr, mask=m, other=0)
        tl.store(ptr, carry[:, None] + tl.cumsum(x, 1) - x, mask=m)
        carry += tl.sum(x, 1)
    tl.store(tot_ptr + row * DIGITS + dg, carry)


@fast_kernel
def _radix_scatter_kernel(src_ptr, spos_ptr, dv_ptr, dpos_ptr, v_ptr, i_ptr, cnt_ptr, tot_ptr, n, K, NB, ssr, svr,
                          sir, SHIFT, B: tl.constexpr, LB: tl.constexpr, KIND: tl.constexpr, BITS: tl.constexpr,
                          DESC: tl.constexpr, FIRST: tl.constexpr, LAST: tl.constexpr, STORE_V: tl.constexpr,
                          STORE_I: tl.constexpr, LV: tl.constexpr = -1, LW: tl.constexpr = 0,
                          XW: tl.constexpr = True, FC: tl.constexpr = False):
    """One pass's stable scatter of a block (module doc): (value, position) pairs from src / spos (FIRST: x and
    the column) to their digit's place in dv / dpos (rows of n), or (LAST) the first K of each row to v / i."""
    pid = tl.program_id(0)
    row = (pid // NB).to(tl.int64)
    blk = pid % NB
    j = tl.arange(0, B)
    cols = blk * B + j
    m = cols < n
    x = tl.load(src_ptr + row * ssr + cols, mask=m, other=0)
    d = _digit(x, SHIFT, KIND, BITS, DESC)
    h = tl.histogram(d, DIGITS, mask=m)
    p = tl.where(m, (d << LB) | j, DIGITS << LB)        # padding sorts last
    p, _ = sort_tile(p, p, LB, LB, 0, False, LV, LW, XW, FC)    # (int32 keys: FC changes nothing)
    at = p & (B - 1)                                    # the block position of sorted slot j
    digits = tl.arange(0, DIGITS)
    tot = tl.load(tot_ptr + row * DIGITS + digits)
    before = tl.load(cnt_ptr + (row * DIGITS + digits) * NB + blk)
    start = (tl.cumsum(tot, 0) - tot) + before - (tl.cumsum(h, 0) - h)
    dest = tl.gather(start, tl.minimum(p >> LB, DIGITS - 1), 0) + j
    ok = j < n - blk * B
    val = tl.gather(x, at, 0)
    if FIRST:
        pos = blk * B + at
    else:
        pos = tl.gather(tl.load(spos_ptr + row * n + cols, mask=m, other=0), at, 0)
    if LAST:
        ok = ok & (dest < K)
        if STORE_V:
            tl.store(v_ptr + row * svr + dest, val, mask=ok)
        if STORE_I:
            tl.store(i_ptr + row * sir + dest, pos.to(tl.int64), mask=ok)
    else:
        tl.store(dv_ptr + row * n + dest, val, mask=ok)
        tl.store(dpos_ptr + row * n + dest, pos, mask=ok)
