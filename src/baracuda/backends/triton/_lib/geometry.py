"""The (outer, R, inner) geometry of an op along one dim: R the extent of the dim, outer / inner the products of
the dims before / after it.  Softmax, the normalizations, the gated elementwise ops, repeat_interleave and the
losses view their operands this way (the multi-dim reductions canonicalize to the same form in
reduction/reduce.py's ``geometry``)."""
from __future__ import annotations

import math


def outer_r_inner(shape, dim) -> tuple[int, int, int]:
    """(outer, R, inner) of ``shape`` along ``dim`` (a 0-d shape counts as (1,))."""
    shape = tuple(shape) or (1,)
    return math.prod(shape[:dim]), shape[dim], math.prod(shape[dim + 1:])


def _merged_stride(shape, strides):
    """Stride of ``shape`` flattened to one axis, or None when the dims do not merge."""
    dims = [(d, s) for d, s in zip(shape, strides) if d != 1]
    for (d0, s0), (d1, s1) in zip(dims, dims[1:]):
        if s0 != s1 * d1:
            return None
    return dims[-1][1] if dims else 0


def view3(t, dim: int):
    """(t', (s_outer, s_R, s_inner)): t' is t, or a contiguous copy when t cannot be viewed as (outer, R, inner)."""
    if t.dim() == 0 or t.numel() == 0:   # (a zero-size tensor launches nothing; torch calls any strides contiguous)
        return t, (0, 0, 0)
    so = _merged_stride(t.shape[:dim], t.stride()[:dim])
    si = _merged_stride(t.shape[dim + 1:], t.stride()[dim + 1:])
    if so is None or si is None:
        return view3(t.contiguous(), dim)
    return t, (so, t.stride(dim), si)


def lanes_view(t, outer, r, inner):
    """(grid_a, L, sa, sl, sr) of t seen as (outer, R, inner): lanes are rows when inner == 1, inner positions
    otherwise (then each program owns one outer index)."""
    v = t.reshape(outer, r, inner)
    if inner == 1:
        return v, 1, outer, 0, v.stride(0), v.stride(1)
    return v, outer, inner, v.stride(0), v.stride(2), v.stride(1)


# Host-side integer helpers.  triton.cdiv / triton.next_power_of_2 are constexpr functions: called from host code
# each unwraps its arguments through Triton's constexpr machinery (~1-4 us a call on the H100 host, several per
# launch); these are the same integers in plain Python.
def cdiv(a: int, b: int) -> int:
    """ceil(a / b) for non-negative ints (triton.cdiv)."""
    return -(-a // b)


WS_ALIGN = 256     # workspace regions start on 256-byte boundaries (any dtype's view of them is aligned)


def ws_align(b: int) -> int:
    """``b`` bytes rounded up to the workspace region alignment."""
    return -(-b // WS_ALIGN) * WS_ALIGN


def next_power_of_2(n: int) -> int:
    """The smallest power of two >= n, 0 for 0 (triton.next_power_of_2)."""
    return 0 if n == 0 else 1 << (int(n) - 1).bit_length()
