"""Python floats as kernel arguments: Triton passes them as f32 scalars, so an f64 kernel that needs the full value
takes it as an (f32 hi, f32 lo) pair: ``split_f64`` on the host, ``join_f64`` in the kernel (~48 bits)."""
from __future__ import annotations

import functools
import math
import struct

import triton
import triton.language as tl


def split_f64(v: float):
    """A Python float as (f32 hi, f32 lo): Triton passes floats as f32; join_f64 rebuilds ~48 bits for f64 kernels.
    hi is v rounded to nearest f32 (IEEE, as torch's conversion; overflow -> inf); cached per value: kernels pass
    their eps / momentum / scale this way on every call (a torch scalar per call cost the host ~5 us each)."""
    v = float(v)
    return _split(v, math.copysign(1.0, v))   # (-0.0 == 0.0 for the cache: the sign is part of the key)


@functools.lru_cache(maxsize=4096)
def _split(v: float, sign: float):
    try:
        hi = struct.unpack("f", struct.pack("f", v))[0]
    except OverflowError:     # beyond f32's range: torch's conversion gives inf
        hi = math.copysign(math.inf, v)
    lo = v - hi
    return hi, (0.0 if math.isinf(hi) or math.isnan(lo) else float(lo))


@triton.jit
def join_f64(eps_hi, eps_lo, F64: tl.constexpr):
    # Triton passes a Python float as an f32 scalar: eps = hi + lo (both f32) restores ~48 bits for f64,
    # where eps rounded to f32 alone moves dx by ~1e-8 relative when mean(x^2) ~ eps
    if F64:
        return tl.cast(eps_hi, tl.float64) + tl.cast(eps_lo, tl.float64)
    else:
        return eps_hi
