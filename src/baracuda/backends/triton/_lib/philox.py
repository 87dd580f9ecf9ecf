"""Philox-4x32-10 (Salmon et al. 2011) with one widening multiply per product.

Bit-identical to ``tl.philox`` (same constants, rounds and key schedule).  ``tl.philox`` takes each round's two
32 x 32 products as a high half (``umulhi``) and a low half (a second multiply): four IMAD a round on sm_90.  Here a
product is one 32 -> 64-bit multiply whose halves are the two words, which ptxas emits as one IMAD.WIDE.U32: the
normal fill, instruction-bound, spends most of its integer work there.
"""
from __future__ import annotations

import triton
import triton.language as tl

__all__ = ["philox"]

_ROUND_A = tl.constexpr(0xD2511F53)
_ROUND_B = tl.constexpr(0xCD9E8D57)
_KEY_A = tl.constexpr(0x9E3779B9)
_KEY_B = tl.constexpr(0xBB67AE85)


@triton.jit
def _mul_wide(a, c: tl.constexpr):
    """(high word, low word) of the 64-bit product of the uint32 tensor a and the constant c."""
    p = a.to(tl.uint64) * tl.full((), c, tl.uint64)
    return (p >> 32).to(tl.uint32), p.to(tl.uint32)


@triton.jit
def philox(seed, c0, c1, c2, c3):
    """The four uint32 words of Philox-4x32-10 for the counter (c0, c1, c2, c3) (uint32 tensors) and the 64-bit
    key ``seed`` (its low word is the first key): ``tl.philox(seed, c0, c1, c2, c3)``."""
    s = (seed + tl.zeros((), tl.int64)).to(tl.uint64)       # (a constexpr seed of 1 too)
    k0 = (s & 0xFFFFFFFF).to(tl.uint32)
    k1 = ((s >> 32) & 0xFFFFFFFF).to(tl.uint32)
    for _ in tl.static_range(10):
        hb, lb = _mul_wide(c2, _ROUND_B)
        ha, la = _mul_wide(c0, _ROUND_A)
        c0 = hb ^ c1 ^ k0
        c2 = ha ^ c3 ^ k1
        c1 = lb
        c3 = la
        k0 = tl.add(k0, _KEY_A, sanitize_overflow=False)
        k1 = tl.add(k1, _KEY_B, sanitize_overflow=False)
    return c0, c1, c2, c3
