"""Scalar bodies of the second elementwise table (``ops/ew_numeric.py``) and of prelu/rrelu, for the same template
(``elementwise._ew_kernel``) and signature as ``_ew_bodies``: ``(operands..., p0, p1, p2) -> value``.

All of them stay memory-bound on an H100 except gcd/lcm: Euclid's loop runs until every lane of the block is
done (a data-dependent ``while`` on the block's max), ~20-40 integer remainders per element for random int32
(each ~20 instructions), so a 64M-element int32 gcd is compute-bound (~1-2 ms against ~0.25 ms of traffic),
like torch's CUDA kernel, which runs the same loop per thread.
"""
from __future__ import annotations

import triton
import triton.language as tl

from .activations import _bw_leaky, _leaky
from .math_bodies import BODIES as _B
from .math_bodies import _div, _maximum, _minimum, _pow
from .._lib.math import exp2, fma


@triton.jit
def _isposinf(x, p0, p1, p2):     # integers/bool: x - x == 0, never infinite
    return (x > 0) & ((x - x) != (x - x))


@triton.jit
def _isneginf(x, p0, p1, p2):
    return (x < 0) & ((x - x) != (x - x))


# -- nextafter: one ulp of the *storage* format, on its bits (torch steps bf16/f16 in their own format) --------
@triton.jit
def _next_bits(a, b, FT: tl.constexpr, IT: tl.constexpr):
    x = a.to(FT)                                    # exact: a holds a value of the result dtype
    bits = x.to(IT, bitcast=True)
    away = (b > a) == (a > 0)                       # away from zero: the magnitude bits grow by one
    one = tl.full(bits.shape, 1, IT)
    stepped = tl.where(away, bits + one, bits - one)
    low = tl.where(b > 0, one, (one << (bits.dtype.primitive_bitwidth - 1)) | one)   # smallest subnormal, b's sign
    r = tl.where(a == 0, low, stepped).to(FT, bitcast=True).to(a.dtype)
    r = tl.where(a == b, b, r)
    return tl.where((a != a) | (b != b), a + b, r)


@triton.jit
def _nextafter_f64(a, b, p0, p1, p2):
    return _next_bits(a, b, tl.float64, tl.int64)


@triton.jit
def _nextafter_f32(a, b, p0, p1, p2):
    return _next_bits(a, b, tl.float32, tl.int32)


@triton.jit
def _nextafter_bf16(a, b, p0, p1, p2):
    return _next_bits(a, b, tl.bfloat16, tl.int16)


@triton.jit
def _nextafter_f16(a, b, p0, p1, p2):
    return _next_bits(a, b, tl.float16, tl.int16)


@triton.jit
def _ldexp(a, b, p0, p1, p2):
    # a * 2^b in two exact power-of-two steps: 2^b alone overflows for b > 127 (f32) while the result need
    # not (torch.ldexp(1e-40, 200) = 1.6e20)
    h = tl.floor(b * 0.5)
    return a * exp2(h) * exp2(b - h)


@triton.jit
def _heaviside(a, b, p0, p1, p2):   # NaN input: neither == 0 nor > 0, gives 0 (torch)
    return tl.where(a == 0, b, tl.where(a > 0, 1, 0).to(b.dtype))


@triton.jit
def _gcd_loop(a, b):
    """torch's gcd: |a|, |b| (wrapping: INT_MIN stays negative), then Euclid with C remainder until every lane
    of the block has a == 0."""
    a = tl.abs(a)
    b = tl.abs(b)
    zero = tl.zeros_like(a)
    while tl.max((a != 0).to(tl.int32), axis=0) > 0:
        nz = a != 0
        c = a
        a = tl.where(nz, b % tl.where(nz, a, zero + 1), zero)
        b = tl.where(nz, c, b)
    return b


@triton.jit
def _gcd(a, b, p0, p1, p2):
    return _gcd_loop(a, b)


@triton.jit
def _lcm(a, b, p0, p1, p2):
    g = _gcd_loop(a, b)
    zero = tl.zeros_like(g)
    q = a // tl.where(g == 0, zero + 1, g)          # exact: g divides a
    # torch's abs(a / g * b) runs in C++'s int for 8/16-bit types (then truncates): lcm(127, 126) on int8 is
    # -126, not abs(wrapped) = 126
    if a.dtype.primitive_bitwidth < 32:
        r = tl.abs(q.to(tl.int32) * b.to(tl.int32)).to(a.dtype)
    else:
        r = tl.abs(q * b)
    return tl.where(g == 0, zero, r)


# -- isclose: torch's tensor formula, each intermediate rounded to the operands' dtype --------------------
@triton.jit
def _rnd(v, MODE: tl.constexpr):
    if MODE == 1:
        # f32 -> bf16 -> f32 with round-to-nearest-even on the bits (the interpreter's own bf16 cast truncates).
        # NaN passes unchanged: the GPU's canonical NaN is 0x7FFFFFFF, whose rounding add wraps to -0.0 (that
        # made isclose(3.0, NaN) True on the H100); inf has a zero mantissa and rounds to itself
        bits = v.to(tl.int32, bitcast=True)
        rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & -65536
        return tl.where((bits & 0x7FFFFFFF) > 0x7F800000, v, rounded.to(tl.float32, bitcast=True))
    elif MODE == 2:
        return v.to(tl.float16).to(tl.float32)
    else:
        return v


@triton.jit
def _finite_bits(v):
    """isfinite from the bits (exponent not all ones)."""
    if v.dtype == tl.float64:
        return (v.to(tl.int64, bitcast=True) & 0x7FFFFFFFFFFFFFFF) < 0x7FF0000000000000
    else:
        return (v.to(tl.int32, bitcast=True) & 0x7FFFFFFF) < 0x7F800000


@triton.jit
def _isclose_float(a, b, rtol, atol, eqnan, MODE: tl.constexpr):
    close = a == b
    both_nan = tl.where((a != a) & (b != b), eqnan, 0.0)     # eqnan: 1.0 when equal_nan
    close = close | (both_nan != 0)
    allowed = _rnd(atol + tl.abs(_rnd(rtol * b, MODE)), MODE)
    actual = tl.abs(_rnd(a - b, MODE))
    # a NaN operand makes actual NaN (not finite): false unless equal / both NaN
    return close | (_finite_bits(actual) & (actual <= allowed))


@triton.jit
def _isclose_wide(a, b, p0, p1, p2):
    return _isclose_float(a, b, p0, p1, p2, 0)


@triton.jit
def _isclose_bf16(a, b, p0, p1, p2):
    return _isclose_float(a, b, p0, p1, p2, 1)


@triton.jit
def _isclose_f16(a, b, p0, p1, p2):
    return _isclose_float(a, b, p0, p1, p2, 2)


@triton.jit
def _isclose_int(a, b, p0, p1, p2):
    # integer/bool operands (template with float parameters: p0, p1 stay f64): equality on the integers, the
    # rest in f32 on both operands cast to f32 (torch: 2^24 + 1 and 2^24 are close with atol=0.5; no wrap)
    x = a.to(tl.float32)
    y = b.to(tl.float32)
    allowed = p1.to(tl.float32) + tl.abs(p0.to(tl.float32) * y)
    return (a == b) | (tl.abs(x - y) <= allowed)


@triton.jit
def _exact_eq(a, b, p0, p1, p2):     # rtol = atol = 0: equality (and NaN pairs when p2 = equal_nan = 1)
    both_nan = tl.where((a != a) & (b != b), p2, 0)
    return (a == b) | (both_nan != 0)


@triton.jit
def _fma(a, b, c, p0, p1, p2):
    return fma(a, b, c)       # libdevice fma on the GPU: one rounding


@triton.jit
def _ifma(a, b, c, p0, p1, p2):
    return a * b + c


@triton.jit
def _lerp_t(a, b, w, p0, p1, p2):
    # torch's two-sided formula (exact at w = 0 and at w = 1), each product+sum one fma as in torch's kernels
    d = b - a
    return tl.where(tl.abs(w) < 0.5, fma(w, d, a), fma(-d, 1.0 - w, b))


@triton.jit
def _prelu(x, w, p0, p1, p2):
    return tl.where(x > 0, x, w * x)


@triton.jit
def _prelu_bw(g, x, w, p0, p1, p2):
    return tl.where(x > 0, g, w * g)


@triton.jit
def _prelu_wg(g, x, p0, p1, p2):
    return tl.where(x > 0, 0.0, x * g)


@triton.jit
def _rrelu_noise(x, r, p0, p1, p2):      # torch's rrelu_with_noise: x * noise where x <= 0 (a NaN x stays)
    return tl.where(x <= 0, x * r, x)


@triton.jit
def _rrelu_noise_bw(g, x, r, p0, p1, p2):
    return tl.where(x <= 0, g * r, g)


def _c(fn, p0=0.0, p1=0.0, p2=0.0):
    return lambda d, is_int: (fn, p0, p1, p2)


_NEXT = {"f64": _nextafter_f64, "f32": _nextafter_f32, "bf16": _nextafter_bf16, "f16": _nextafter_f16}
_CLOSE = {"bf16": _isclose_bf16, "f16": _isclose_f16}


def _isclose_sel(d, is_int):
    rtol, atol, eqnan = d.attr("rtol"), d.attr("atol"), float(d.attr("equal_nan"))
    src = d.inputs[0].dtype
    if rtol == 0 and atol == 0:
        return _exact_eq, 0.0, 0.0, eqnan
    if not src.is_floating:
        return _isclose_int, rtol, atol, 0.0, True     # 5th: the template keeps the parameters in f64
    return _CLOSE.get(src.short, _isclose_wide), rtol, atol, eqnan


def _slope(d, is_int):
    return _leaky, (d.attr("lower") + d.attr("upper")) / 2.0, 0.0, 0.0


def _slope_bw(d, is_int):
    return _bw_leaky, (d.attr("lower") + d.attr("upper")) / 2.0, 0.0, 0.0


BODIES = {
    "sgn": _B["sign"], "isposinf": _c(_isposinf), "isneginf": _c(_isneginf), "true_divide": _c(_div),
    "float_power": _c(_pow),      # f64 compute (the output is f64): libdevice pow in double
    "nextafter": lambda d, i: (_NEXT[d.outputs[0].dtype.short], 0.0, 0.0, 0.0),
    "ldexp": _c(_ldexp), "heaviside": _c(_heaviside), "gcd": _c(_gcd), "lcm": _c(_lcm), "isclose": _isclose_sel,
    "clamp_min": _c(_maximum), "clamp_max": _c(_minimum),   # NaN in either operand propagates (torch)
    "fma": lambda d, is_int: ((_ifma if is_int else _fma), 0.0, 0.0, 0.0), "lerp_tensor": _c(_lerp_t),
    "prelu": _c(_prelu), "prelu_backward": _c(_prelu_bw), "prelu_weight_grad": _c(_prelu_wg),
    "rrelu": _slope, "rrelu_backward": _slope_bw,
    "rrelu_with_noise": _c(_rrelu_noise), "rrelu_with_noise_backward": _c(_rrelu_noise_bw),
}
