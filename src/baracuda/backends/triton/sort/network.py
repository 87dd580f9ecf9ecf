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
compare lexicographically (PAIR).

The network.  A tile of BR rows x N positions (powers of 2) is reshaped to a hypercube [2] * (log2 BR +
log2 N); stage s of the bitonic sort merges blocks of 2^s positions with s rounds of compare-and-swap, each
between the two halves of one axis of size 2 (the partner is x ^ xor_sum over that axis, which the code
generator lowers to a register / shuffle exchange).  log2(N) (log2(N) + 1) / 2 rounds in all; 8192 packed
keys: 91 rounds over 32 int64 registers per thread (8 warps).
"""
from __future__ import annotations

import triton
import triton.language as tl

I64_MAX = tl.constexpr(2 ** 63 - 1)


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
        xc = x
        if BITS == 16:       # compare half types in f32 (exact; the interpreter compares them as bit patterns)
            xc = x.to(tl.float32)
        k = tl.where(xc == 0, 0, k)
        k = tl.where(xc != xc, mag, k)
    else:
        k = x.to(KT)
    if DESC:
        k = ~k
    return k


@triton.jit
def _axis_bit(ND: tl.constexpr, j: tl.constexpr):
    """0 / 1 along hypercube axis ND - 1 - j (the j-th innermost), broadcastable against the cube."""
    return tl.reshape(tl.arange(0, 2), [1] * (ND - j - 1) + [2] + [1] * j)


@triton.jit
def _cas(k, i, flip, j: tl.constexpr, ND: tl.constexpr, PAIR: tl.constexpr):
    """Compare-and-swap across the j-th innermost axis: the lower half keeps the smaller pair unless flip."""
    ax: tl.constexpr = ND - 1 - j
    pk = k ^ tl.xor_sum(k, ax, keep_dims=True)
    right = _axis_bit(ND, j)
    if PAIR:
        pi = i ^ tl.xor_sum(i, ax, keep_dims=True)
        gt = (k > pk) | ((k == pk) & (i > pi))
        swap = gt != ((flip ^ right) != 0)
        i = tl.where(swap, pi, i)
    else:
        swap = (k > pk) != ((flip ^ right) != 0)
    k = tl.where(swap, pk, k)
    return k, i


@triton.jit
def _merge(k, i, stage: tl.constexpr, ORDER: tl.constexpr, ND: tl.constexpr, PAIR: tl.constexpr):
    """One bitonic merge stage over the innermost `stage` axes; ORDER 0 ascending, 1 descending, 2 alternating
    by the next axis (the blocks of 2^stage positions sort in opposite directions, forming bitonic blocks)."""
    if ORDER == 2:
        flip = _axis_bit(ND, stage)
    else:
        flip = ORDER
    for t in tl.static_range(stage):
        k, i = _cas(k, i, flip, stage - 1 - t, ND, PAIR)
    return k, i


@triton.jit
def sort_tile(k, i, LN: tl.constexpr, ND: tl.constexpr, ORDER: tl.constexpr, PAIR: tl.constexpr):
    """Sort each row (the innermost LN of ND hypercube axes) of the tile k (with i when PAIR) by (k, i);
    ORDER 0 ascending, 1 descending."""
    shape: tl.constexpr = k.shape
    if ND > 0:
        h = tl.reshape(k, [2] * ND)
        hi = tl.reshape(i, [2] * ND) if PAIR else h
        for s in tl.static_range(1, LN + 1):
            h, hi = _merge(h, hi, s, 2 if s < LN else ORDER, ND, PAIR)
        k = tl.reshape(h, shape)
        if PAIR:
            i = tl.reshape(hi, shape)
    return k, i


@triton.jit
def merge_tile(k, i, LN: tl.constexpr, ND: tl.constexpr, PAIR: tl.constexpr):
    """Sort bitonic rows ascending (the last stage of the network only)."""
    shape: tl.constexpr = k.shape
    if ND > 0:
        h = tl.reshape(k, [2] * ND)
        hi = tl.reshape(i, [2] * ND) if PAIR else h
        h, hi = _merge(h, hi, LN, 0, ND, PAIR)
        k = tl.reshape(h, shape)
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
