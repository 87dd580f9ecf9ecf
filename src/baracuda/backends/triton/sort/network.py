"""The in-register pieces of the sort family: order-preserving integer keys and a bitonic network on
(key, index) pairs.

Keys.  Every value maps to a signed int64 whose order is torch's order of the values: integers sign- (or
zero-) extend; a float's bit pattern s (as a signed int of its width) stays for s >= 0 and has its magnitude
bits flipped for s < 0 (then more negative floats are smaller ints); -0.0 maps to the key of +0.0 and every
NaN to the largest key of the width (NaN is larger than +inf).  Descending order is the complemented key
(~k = -k - 1: order-reversing, no overflow), so every sort below runs ascending.

Packed pairs.  For values of <= 32 bits the key and the row position pack into one int64,
``key << 32 | position``: keys are then distinct, one compare orders by (value, position) -- a stable sort --
and the network moves one register per element.  64-bit values carry (key int64, position int32) pairs and
compare lexicographically (PAIR).  Keys of <= 16 bits in rows below 2^16 positions go through the network as int32
carriers (``to_carrier``: (key + 2^15) << 16 | position, less 2^31): a compare-and-swap is one 32-bit min or max
where the int64 form took two compares and two selects (an offline sm_90 compile of the 8192-key bf16 row sort:
16.7k -> 8.7k SASS instructions), and every cross-lane exchange moves one register instead of two.  (A float64
carrier for 32-bit keys was tried: sm_90 has no 64-bit min / max, and its compare and selects came out larger.)

The network.  A tile of BR rows x N positions (powers of 2) is reshaped to a hypercube [2] * (log2 BR +
log2 N); stage s of the bitonic sort merges blocks of 2^s positions with s rounds of compare-and-swap, each
between the two halves of one axis of size 2.  log2(N) (log2(N) + 1) / 2 rounds in all; network bit j is exchanged
in log2(N) - j of them.  Where an exchange happens depends on where the bit lives: in a thread's registers (free),
across lanes (a shuffle), or across warps (shared memory and a barrier).  Two things make a one-row tile fast
(session 15, H200, 8192 f32 keys per row: 10.06 -> 4.76 -> 3.64 ms for 8192 rows):

* ``cube_order`` permutes the cube (a layout-only op) so that the network's low, most exchanged bits are the
  register bits, then the lane bits, then the warp bits: 8192 keys at 8 warps exchange in registers in 55 rounds,
  by shuffles in 30 and across warps in 6, against 31 / 45 / 15 in load order.
* ``_partner`` exchanges across warps with tl.gather on the cube permuted lanes-first (``lanes_first``): one store
  and one load of the tile through shared memory.  The xor_sum reduction it replaces went through a scratch with
  heavy bank conflicts (Nsight Compute: 756 M conflict wavefronts for 8192 rows, L1 82 % busy) at 1.3x the time.
  Other exchanges are the xor_sum over the axis (x ^ xor_sum(x) is the partner), which the code generator lowers
  to a register move or a shuffle.
"""
from __future__ import annotations

import triton
import triton.language as tl
from triton.runtime.jit import constexpr_function

I64_MAX = tl.constexpr(2 ** 63 - 1)


@triton.jit
def to_carrier(k):
    """A packed int64 key (key << 32 | position) of a key of <= 16 bits and a position < 2^16 - 1 (I64_MAX: padding)
    as one int32 of the same order: ((key + 2^15) << 16 | position) - 2^31, padding I32_MAX."""
    c = ((((k >> 32) + 32768) << 16) | (k & 0xFFFF)) - 2147483648
    return tl.where(k == I64_MAX, 2147483647, c).to(tl.int32)


@triton.jit
def from_carrier(c):
    """to_carrier's inverse."""
    u = c.to(tl.int64) + 2147483648
    k = (((u >> 16) - 32768) << 32) | (u & 0xFFFF)
    return tl.where(c == 2147483647, I64_MAX, k)


@triton.jit
def to_key(x, KIND: tl.constexpr, BITS: tl.constexpr, DESC: tl.constexpr):
    """The int64 order key of x (KIND 0: float, 1: signed int, 2: unsigned / bool) of BITS bits."""
    return order_key(x, KIND, BITS, DESC, tl.int64)


@triton.jit
def order_key(x, KIND: tl.constexpr, BITS: tl.constexpr, DESC: tl.constexpr, KT: tl.constexpr):
    """to_key's order key as integer type KT: int64, or int32 for keys of <= 32 bits (one register and 32-bit
    integer ops per element: the threshold filter's streaming passes)."""
    if KIND == 0:
        if BITS == 64:
            s = x.to(tl.int64, bitcast=True)
        elif BITS == 32:
            s = x.to(tl.int32, bitcast=True).to(KT)
        else:
            s = x.to(tl.int16, bitcast=True).to(KT)
        mag = (1 << (BITS - 1)) - 1
        k = tl.where(s < 0, s ^ mag, s)
        if BITS == 16 and KT == tl.int64:
            # half types on their bits (|x| = 0: either zero; |x| above inf's bits: NaN): the register sort's keys
            # (bf16 [8192, 8192]: 158 -> 127 registers, 2.98 -> 2.43 ms on an H200, session 17 run G)
            a = s & 0x7FFF
            inf: tl.constexpr = 0x7F80 if x.dtype == tl.bfloat16 else 0x7C00
            k = tl.where(a == 0, 0, k)
            k = tl.where(a > inf, mag, k)
        else:
            # compared as floats: half types in f32 (exact; the interpreter compares them as bit patterns), two at
            # a time (HSETP2) in the threshold filter's streaming pass (int32 keys), where the bits' form measured
            # 3-7 % slower (run G)
            xc = x
            if BITS == 16:
                xc = x.to(tl.float32)
            k = tl.where(xc == 0, 0, k)
            k = tl.where(xc != xc, mag, k)
    else:
        k = x.to(KT)
    if DESC:
        k = ~k
    return k


@constexpr_function
def cube_order(ND, LV, LW):
    """The hypercube axis permutation that puts the network's most exchanged (low) position bits where exchanges are
    cheapest.  A tile loaded as LV-element vectors at LW warps holds position bits [0, LV) and [LV + 5 + LW, ND) in
    registers, [LV, LV + 5) in lanes and [LV + 5, LV + 5 + LW) in warps; the network's bit j is exchanged in
    ND - j rounds.  Returned: for each axis of the permuted cube, the loaded cube's axis, such that the network's bits
    are, low to high, the register bits, the lane bits, then the warp bits (8192 keys at 8 warps: 55 rounds in
    registers, 30 shuffles, 6 through shared memory, against 31 / 45 / 15 in load order).  Any permutation sorts
    correctly (positions travel in the keys); identity when the tile is smaller than one layout repetition."""
    ND, LV, LW = int(ND), int(LV), int(LW)
    if ND < LV + 5 + LW:
        return tl.constexpr(list(range(ND)))
    lane, warp = list(range(LV, LV + 5)), list(range(LV + 5, LV + 5 + LW))
    phys = list(range(LV)) + list(range(LV + 5 + LW, ND)) + lane + warp     # network bit -> loaded bit
    return tl.constexpr([ND - 1 - phys[ND - 1 - a] for a in range(ND)])


@constexpr_function
def lanes_first(ND, WB, j):
    """For a cube permuted by cube_order with its warp bits from WB up (lanes: the five below): the permutation
    that makes the lane bits the innermost (then the register bits, then the warp bits), its inverse, and the axis
    of network bit j in the permuted cube.  tl.gather across warps stores and loads the tile through shared memory
    by the cube's logical index: lanes innermost put the 32 lanes on consecutive words, where cube_order's
    registers-first order strides them 32 elements apart."""
    ND, WB, j = int(ND), int(WB), int(j)
    bits = list(range(WB - 5, WB)) + list(range(WB - 5)) + list(range(WB, ND))     # new low -> high
    perm = [ND - 1 - bits[ND - 1 - a] for a in range(ND)]
    inv = [perm.index(a) for a in range(ND)]
    return tl.constexpr([perm, inv, perm.index(ND - 1 - j)])


@triton.jit
def _partner(k, j: tl.constexpr, ND: tl.constexpr, WB: tl.constexpr):
    """k's partner across network bit j (the value at position ^ 2^j); bits from WB up cross warps (lanes_first)."""
    if j >= WB:
        pi: tl.constexpr = lanes_first(ND, WB, j)
        h = tl.permute(k, pi.value[0])
        ax: tl.constexpr = pi.value[2]
        other = 1 - tl.reshape(tl.arange(0, 2), [1] * ax + [2] + [1] * (ND - 1 - ax))
        idx = tl.broadcast_to(other, h.shape)
        return tl.permute(tl.gather(h, idx, ax), pi.value[1])
    else:
        return k ^ tl.xor_sum(k, ND - 1 - j, keep_dims=True)


@triton.jit
def _axis_bit(ND: tl.constexpr, j: tl.constexpr):
    """0 / 1 along hypercube axis ND - 1 - j (the j-th innermost), broadcastable against the cube."""
    return tl.reshape(tl.arange(0, 2), [1] * (ND - j - 1) + [2] + [1] * j)


@triton.jit
def _cas(k, i, flip, j: tl.constexpr, ND: tl.constexpr, PAIR: tl.constexpr, WB: tl.constexpr,
         CARRIER: tl.constexpr = False):
    """Compare-and-swap across the j-th innermost axis: the lower half keeps the smaller pair unless flip.
    CARRIER: k holds int32 carriers (to_carrier), ordered by min / max."""
    right = _axis_bit(ND, j)
    pk = _partner(k, j, ND, WB)
    if CARRIER:
        k = tl.where((flip ^ right) != 0, tl.maximum(k, pk), tl.minimum(k, pk))
    else:
        if PAIR:
            pi = _partner(i, j, ND, WB)
            gt = (k > pk) | ((k == pk) & (i > pi))
            swap = gt != ((flip ^ right) != 0)
            i = tl.where(swap, pi, i)
        else:
            swap = (k > pk) != ((flip ^ right) != 0)
        k = tl.where(swap, pk, k)
    return k, i


@triton.jit
def _merge(k, i, stage: tl.constexpr, ORDER: tl.constexpr, ND: tl.constexpr, PAIR: tl.constexpr,
           WB: tl.constexpr = 64, CARRIER: tl.constexpr = False):
    """One bitonic merge stage over the innermost `stage` axes; ORDER 0 ascending, 1 descending, 2 alternating
    by the next axis (the blocks of 2^stage positions sort in opposite directions, forming bitonic blocks)."""
    if ORDER == 2:
        flip = _axis_bit(ND, stage)
    else:
        flip = ORDER
    for t in tl.static_range(stage):
        k, i = _cas(k, i, flip, stage - 1 - t, ND, PAIR, WB, CARRIER)
    return k, i


@triton.jit
def sort_tile(k, i, LN: tl.constexpr, ND: tl.constexpr, ORDER: tl.constexpr, PAIR: tl.constexpr,
              LV: tl.constexpr = -1, LW: tl.constexpr = 0, XW: tl.constexpr = True, FC: tl.constexpr = False):
    """Sort each row (the innermost LN of ND hypercube axes) of the tile k (with i when PAIR) by (k, i);
    ORDER 0 ascending, 1 descending.  LV >= 0: the tile was loaded as 2^LV-element vectors by 2^LW warps, and the
    network runs on the cube permuted by cube_order (one row per tile only), exchanging across warps by tl.gather
    unless XW is off (rows.net_layout gives all three).  FC: packed int64 keys of <= 16 bits and positions below
    2^16 run as int32 carriers (module doc)."""
    shape: tl.constexpr = k.shape
    CARRIER: tl.constexpr = FC and not PAIR and k.dtype == tl.int64
    if ND > 0:
        if CARRIER:
            k = to_carrier(k)
        h = tl.reshape(k, [2] * ND)
        hi = tl.reshape(i, [2] * ND) if PAIR else h
        WB: tl.constexpr = ND - LW if (LV >= 0 and LN == ND and ND >= LV + 5 + LW and XW) else 64
        if LV >= 0 and LN == ND:
            order: tl.constexpr = cube_order(ND, LV, LW)
            h = tl.permute(h, order.value)
            if PAIR:
                hi = tl.permute(hi, order.value)
        for s in tl.static_range(1, LN + 1):
            h, hi = _merge(h, hi, s, 2 if s < LN else ORDER, ND, PAIR, WB, CARRIER)
        k = tl.reshape(h, shape)
        if CARRIER:
            k = from_carrier(k)
        if PAIR:
            i = tl.reshape(hi, shape)
    return k, i


@triton.jit
def merge_tile(k, i, LN: tl.constexpr, ND: tl.constexpr, PAIR: tl.constexpr, FC: tl.constexpr = False):
    """Sort bitonic rows ascending (the last stage of the network only)."""
    shape: tl.constexpr = k.shape
    CARRIER: tl.constexpr = FC and not PAIR and k.dtype == tl.int64
    if ND > 0:
        if CARRIER:
            k = to_carrier(k)
        h = tl.reshape(k, [2] * ND)
        hi = tl.reshape(i, [2] * ND) if PAIR else h
        h, hi = _merge(h, hi, LN, 0, ND, PAIR, 64, CARRIER)
        k = tl.reshape(h, shape)
        if CARRIER:
            k = from_carrier(k)
        if PAIR:
            i = tl.reshape(hi, shape)
    return k, i


@triton.jit
def pair_min(k1, i1, k2, i2, PAIR: tl.constexpr):
    """Elementwise min of two (key, index) tensors."""
    if PAIR:
        lt = (k2 < k1) | ((k2 == k1) & (i2 < i1))
        i1 = tl.where(lt, i2, i1)
    else:
        lt = k2 < k1
    return tl.where(lt, k2, k1), i1


@triton.jit
def pair_less(k1, i1, k2, i2, PAIR: tl.constexpr):
    """(k1, i1) < (k2, i2) elementwise."""
    if PAIR:
        return (k1 < k2) | ((k1 == k2) & (i1 < i2))
    else:
        return k1 < k2
