"""Python floats as kernel arguments: Triton passes them as f32 scalars, so an f64 kernel that needs the full value
takes it as an (f32 hi, f32 lo) pair: ``split_f64`` on the host, ``join_f64`` in the kernel (~48 bits)."""
from __future__ import annotations

import torch
import triton
import triton.language as tl


def split_f64(v: float):
    """A Python float as (f32 hi, f32 lo): Triton passes floats as f32; join_f64 rebuilds ~48 bits for f64 kernels."""
    hi = float(torch.tensor(v, dtype=torch.float32, device="cpu"))   # (not the default device: no sync)
    return hi, float(v - hi)


@triton.jit
def join_f64(eps_hi, eps_lo, F64: tl.constexpr):
    # Triton passes a Python float as an f32 scalar: eps = hi + lo (both f32) restores ~48 bits for f64,
    # where eps rounded to f32 alone moves dx by ~1e-8 relative when mean(x^2) ~ eps
    if F64:
        return tl.cast(eps_hi, tl.float64) + tl.cast(eps_lo, tl.float64)
    else:
        return eps_hi
