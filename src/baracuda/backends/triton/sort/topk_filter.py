"""topk by a threshold filter (issue #17): one streaming read of each row instead of the radix select's digit
histograms, exact for every input (rows it cannot finish go to the radix select).

One program per row (``_filter_kernel``), order keys u (network.to_key, DESC = largest: the best key is the
smallest), M chunks per row (chunk j: the positions = j mod M; M >= next_pow2(k)), C survivor slots:

1. Pass 1 streams the row in tiles of M positions and keeps each chunk's best key (an elementwise min: no
   reduction, no scan).  T = the k-th smallest of the M chunk bests, found by a bitwise search (BITS steps, each
   counting the bests below a candidate: one tl.sum).  At least k elements of the row (k chunk bests) have u <= T,
   so the k-th smallest key of the row is <= T: every element of the top k is a survivor (u <= T).
2. Only chunks whose best is <= T hold survivors.  Their ids are compacted in ascending order (one prefix sum
   over M) into the row's buffer; if more than C, the row overflows.  Pass 2 then gathers just those chunks,
   tile r holding positions r M + id (G / next_pow2(#chunks) tiles per step, G = max(C, 1024) lanes: one step
   for a row of 32768 at k <= 64): ascending positions, so survivors are compacted by a prefix sum per step in
   position order into the buffer (positions int32), counted; more than C: overflow.  On random data a row of
   32768 with M = 4096 has about 1.15 k survivors in about k chunks: pass 2 reads k n / M elements (from L1 / L2),
   not the row.
3. The exact k-th key among the survivors (the same bitwise search over C keys) and its r ties that belong in
   (the lowest positions: a prefix sum in position order) give exactly k positions, stored in the row's index
   output; kernels.sort_collected sorts them as packed (key, position) pairs and writes values (gathered from x:
   exact, NaN payloads and -0.0 kept) and indices: the same result as the radix select.
4. Each row writes its overflow flag (int32, 0 / 1: no memset needed); ``_select_kernel`` with GATED then runs
   the radix select for the flagged rows only (the others read their flag and exit): sorted rows, constant rows
   and rows with more than C - k ties at the threshold stay exact at the select's cost plus pass 1.

Bytes per element (typical data): one read of the row from HBM (2 B bf16), pass 2's k n / M gathered elements
and the C survivor slots (int32, written and read back: L2).  The row walks of the radix select (BITS / 8
histogram passes + one collect pass over the row, each with a prefix sum or a histogram per element) are gone.
"""
from __future__ import annotations

import triton
import triton.language as tl

from .._lib.geometry import cdiv, next_power_of_2
from .._lib.interp import loop
from .._lib.launch import fast_kernel
from .kernels import sort_collected
from .network import order_key

I32_MAX = tl.constexpr(2 ** 31 - 1)

# pass 2's lanes per step: a row of 32768 with k <= 64 takes one step (one prefix sum), not 8; sm_90 at 8 warps: 64
# registers (4 programs per SM) for k <= 256, where 2048 lanes took 80-115
_GATHER = 1024


@triton.jit
def _kth(u, K, LO, BITS: tl.constexpr, N: tl.constexpr):
    """The K-th smallest of the N int32 keys u (all in [LO, LO + 2^BITS) but padding I32_MAX, which is never
    counted; at least K of them real): the largest t with fewer than K keys below it, bit by bit from the top (BITS
    counts).  16-bit keys: the top bit by one count, then _kth15 on two keys a word."""
    if BITS == 16:
        t = _kth15(u, K, _top_bit(u, K, LO), tl.full((), 15, tl.int32), N)
    else:
        t = tl.full((), 0, tl.int64) + LO
        for b in tl.static_range(BITS):
            cand = t + tl.full((), 1 << (BITS - 1 - b), tl.int64)      # <= LO + 2^BITS - 1: an int32
            below = tl.sum((u < cand.to(tl.int32)).to(tl.int32), 0)
            t = tl.where(below < K, cand, t)
        t = t.to(tl.int32)
    return t


@triton.jit
def _kth_at_most(u, K, LO, HI, BITS: tl.constexpr, N: tl.constexpr):
    """_kth for a result known to be <= HI (the survivors' K-th key is <= pass 1's threshold).  16-bit keys: the
    search runs from the smallest key over bit_length(HI - min) bits only (random bf16 rows: ~8 of 16)."""
    if BITS == 16:
        base = tl.min(u, 0)
        span = HI - base
        if span < 32768:
            nb = tl.full((), 0, tl.int32)           # bit_length(span): span < 2^nb
            for i in tl.static_range(15):
                nb += ((1 << i) <= span).to(tl.int32)
        else:
            base = _top_bit(u, K, LO)
            nb = tl.full((), 15, tl.int32)
        t = _kth15(u, K, base, nb, N)
    else:
        t = _kth(u, K, LO, BITS, N)
    return t


@triton.jit
def _top_bit(u, K, LO):
    """The first step of _kth for 16-bit keys: LO + 2^15 if fewer than K keys lie below it, else LO."""
    cand = LO + 32768
    below = tl.sum((u < cand).to(tl.int32), 0)
    return tl.where(below < K, cand, LO)


@triton.jit
def _kth15(u, K, base, nb, N: tl.constexpr):
    """The largest t in [base, base + 2^nb) (nb <= 15; fewer than K keys below base) with fewer than K keys below
    it, nb counts.  Each key as v = u - base clamped to [0, 2^15 - 1] (a key below base stays below every
    candidate, one above (padding too) below none), two v a uint32 word.  Candidate base + c (c in [1, 2^15 - 1]):
    v + 2^15 - c lies in [1, 2^16), so each 16-bit field of w + (2^15 - c) * 0x10001 carries nothing into the next,
    and its top bit is set iff v >= c.  One add, shift and mask a word: half the integer work of a compare and
    select a key, and half the lanes to sum."""
    v = tl.maximum(tl.minimum(u, base + 32767) - base, 0).to(tl.uint32)     # (u - base can overflow: padding)
    if N == 1:                                    # (a row of one chunk: the second field never below)
        w = v | (32767 << 16)
    else:
        lo_v, hi_v = tl.split(tl.reshape(v, [N // 2, 2]))
        w = lo_v | (hi_v << 16)
    NF: tl.constexpr = max(N, 2)
    t = tl.full((), 0, tl.uint32)
    for b in loop(0, nb):
        cand = t + (tl.full((), 1, tl.uint32) << (nb - 1 - b).to(tl.uint32))
        ge = ((w + (32768 - cand) * 0x10001) >> 15) & 0x10001
        s = tl.sum(ge, 0)
        below = NF - ((s & 0xFFFF) + (s >> 16)).to(tl.int32)
        t = tl.where(below < K, cand, t)
    return base + t.to(tl.int32)


@fast_kernel
def _filter_kernel(x_ptr, v_ptr, i_ptr, buf_ptr, flag_ptr, n, K, NT, sxr, svr, sir, LO, M: tl.constexpr,
                   C: tl.constexpr, LC: tl.constexpr, G: tl.constexpr, KP: tl.constexpr, LKP: tl.constexpr,
                   KIND: tl.constexpr, BITS: tl.constexpr, DESC: tl.constexpr, LV: tl.constexpr = -1,
                   LW: tl.constexpr = 0, XW: tl.constexpr = True, FC: tl.constexpr = False):
    """The K (<= KP) first entries of each row's sort by the threshold filter (module doc); NT = cdiv(n, M) tiles;
    buf: C (= 2^LC) int32 slots per row; flag: one int32 per row (1: overflowed, left to the radix select).  Pass 2
    gathers G / ns tiles per step (ns = next_pow2 of the chunks holding survivors, <= C <= G): lane l reads chunk id
    l % ns of tile l // ns (row-major: still position order)."""
    row = tl.program_id(0).to(tl.int64)
    xr = x_ptr + row * sxr
    br = buf_ptr + row * C
    lanes = tl.arange(0, M)
    best = tl.full([M], I32_MAX, tl.int32)        # pass 1: each chunk's best key
    for c in loop(0, NT):
        cols = c * M + lanes
        m = cols < n
        u = order_key(tl.load(xr + cols, mask=m, other=0), KIND, BITS, DESC, tl.int32)
        best = tl.minimum(best, tl.where(m, u, I32_MAX))
    t = _kth(best, K, LO, BITS, M)
    sel = (best <= t).to(tl.int32)                # the chunks holding survivors, ids ascending into the buffer
    nsel = tl.sum(sel, 0)
    ok = nsel <= C
    tl.store(br + tl.cumsum(sel, 0) - 1, lanes, mask=(sel != 0) & ok)
    tl.debug_barrier()
    lg = tl.full((), 0, tl.int32)                # ns = 2^lg = next_pow2(nsel) <= C <= G: lanes per tile
    for _ in tl.static_range(LC):
        lg += ((1 << lg) < nsel).to(tl.int32)
    L = tl.arange(0, G)
    slot = L & ((1 << lg) - 1)
    gm = (slot < nsel) & ok
    ids = tl.load(br + slot, mask=gm, other=0)
    tl.debug_barrier()                            # (every id read before the survivors overwrite them)
    cnt = tl.full((), 0, tl.int32)
    for c in loop(0, NT, G >> lg):                # pass 2: survivors of those chunks, in position order
        cols = (c + (L >> lg)) * M + ids
        m = gm & (cols < n)
        s = m & (order_key(tl.load(xr + cols, mask=m, other=0), KIND, BITS, DESC, tl.int32) <= t)
        slot = cnt + tl.cumsum(s.to(tl.int32), 0) - 1
        tl.store(br + slot, cols, mask=s & (slot < C))
        cnt += tl.sum(s.to(tl.int32), 0)
    ok = ok & (cnt <= C)
    tl.store(flag_ptr + row, tl.where(ok, 0, 1).to(tl.int32))
    tl.debug_barrier()
    g = tl.arange(0, C)
    jm = (g < cnt) & ok                           # the exact K-th key among the survivors, its ties by position
    pos = tl.load(br + g, mask=jm, other=0)
    u = tl.where(jm, order_key(tl.load(xr + pos, mask=jm, other=0), KIND, BITS, DESC, tl.int32), I32_MAX)
    t = _kth_at_most(u, K, LO, t, BITS, C)
    lt = (jm & (u < t)).to(tl.int32)
    eq = jm & (u == t)
    r = K - tl.sum(lt, 0)                         # the ties taken: the first r by position
    tl.static_assert(C < 32768)                   # (both counts fit their int32 halves, the high one positive)
    ps = tl.cumsum(lt | (eq.to(tl.int32) << 16), 0)          # both running counts from one scan
    c_eq = ps >> 16
    take = (lt != 0) | (eq & (c_eq <= r))
    dst = (ps & 0xFFFF) + tl.minimum(c_eq, r) - 1
    tl.store(i_ptr + row * sir + dst, pos.to(tl.int64), mask=take)
    sort_collected(x_ptr, v_ptr, i_ptr, row, tl.where(ok, K, 0), sxr, svr, sir, KP, LKP, KIND, BITS, DESC, LV,
                   LW, XW, FC)


def _cap(kp: int, warps: int) -> dict:
    """The register cap of the filter at 8 warps, where ptxas's own choice costs a program per SM (sm_90, offline):
    k > 512 (2048 survivor slots): 166 registers uncapped, 125 and no stack at 128 (two programs per SM); f32 k = 512:
    89 uncapped (two programs), 80 at 80 (three).  Elsewhere a cap raised the count (k = 256: 64 -> 88)."""
    if warps != 8:
        return {}
    return {"maxnreg": 128} if kp > 512 else {"maxnreg": 80} if kp == 512 else {}


def threshold_filter(xb, vb, i, buf, flags, k: int, lo: int, M: int, C: int, kind: int, bits: int, desc: bool,
                     warps: int, gather: int = _GATHER, net=None) -> None:
    """Launch the filter over the rows of xb ([R, n], contiguous rows): buf holds R * C int32, flags R int32 (set
    per row, no zeroing needed); gather: pass 2's lanes per step (a power of 2; at least C are used).  The caller
    then runs the gated radix select for the flagged rows.  net: the register network's layout constants
    (rows.net_layout; none: unpermuted)."""
    R, n = xb.shape
    kp = next_power_of_2(k)
    _filter_kernel[(R,)](xb, vb, i, buf, flags, n, k, cdiv(n, M), xb.stride(0), vb.stride(0), i.stride(0), lo, M=M,
                         C=C, LC=C.bit_length() - 1, G=max(C, gather), KP=kp, LKP=kp.bit_length() - 1, KIND=kind,
                         BITS=bits, DESC=desc, num_warps=warps, **_cap(kp, warps), **(net or {}))
