"""Scalar bodies of the elementwise template: ``(operands..., p0, p1, p2) -> value`` in the compute dtype.

Float math runs in f32 (f64 for f64); integer math runs in the promoted integer type itself, so it wraps
around like torch (never through f32).  Integer division/remainder by zero is undefined on the GPU (PTX
returns an unspecified value, torch's CUDA kernels likewise do not trap); the reference raises like torch
on the CPU.  ``BODIES`` maps op -> (desc, is_int) -> (body, p0, p1, p2).
"""
from __future__ import annotations

import math

import triton
import triton.language as tl

from .._lib.math import (acos, acosh, asin, asinh, atan, atan2, atanh, copysign, cos, cosh, digamma, erf, erfc, erfinv,
                    exp, exp2, expm1, fmod, hypot, i0, i1, lgamma, log, log1p, log2, log10, pow, rint, rsqrt, sigmoid,
                    sin, sinh, sinpi, sqrt, tan, tanh, trunc)

_LN2, _LN10, _PI = 0.6931471805599453, 2.302585092994046, 3.141592653589793


# -- arithmetic --------------------------------------------------------------------------------------
@triton.jit
def _neg(x, p0, p1, p2):
    return -x                 # integers: 0 - x, wraps around


@triton.jit
def _fneg(x, p0, p1, p2):
    return x * -1.0           # Triton's unary minus is 0 - x, which turns -0.0 into +0.0 (torch keeps the sign)


@triton.jit
def _scale(x, p0, p1, p2):
    return x * p0


@triton.jit
def _add(a, b, p0, p1, p2):
    return a + b


@triton.jit
def _add_alpha(a, b, p0, p1, p2):
    return a + p0 * b


@triton.jit
def _sub(a, b, p0, p1, p2):
    return a - b


@triton.jit
def _sub_alpha(a, b, p0, p1, p2):
    return a - p0 * b


@triton.jit
def _mul(a, b, p0, p1, p2):
    return a * b


@triton.jit
def _div(a, b, p0, p1, p2):
    return a / b


@triton.jit
def _div_trunc(a, b, p0, p1, p2):
    return trunc(a / b)


@triton.jit
def _idiv_trunc(a, b, p0, p1, p2):
    return a // b          # integer // is C division (rounds toward zero) in Triton


@triton.jit
def _fdiv_floor(a, b, p0, p1, p2):
    # torch's (and NumPy's) floor division: exact via fmod, then corrected — not floor(a / b), which
    # rounds wrongly when a / b is within an ulp of an integer
    m = fmod(a, b)         # exact C fmod (see _ffmod), as torch's CUDA kernel
    q = (a - m) / b
    q = tl.where((m != 0) & ((b < 0) != (m < 0)), q - 1.0, q)
    fq = tl.floor(q)
    fq = tl.where(q - fq > 0.5, fq + 1.0, fq)
    return tl.where(b == 0, a / b, tl.where(q == 0, copysign(tl.zeros_like(q), a / b), fq))


@triton.jit
def _idiv_floor(a, b, p0, p1, p2):
    q = a // b
    r = a % b
    return tl.where((r != 0) & ((r < 0) != (b < 0)), q - 1, q)


@triton.jit
def _iremainder(a, b, p0, p1, p2):  # sign of the divisor (Python); integer % is C remainder in Triton
    r = a % b
    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)


@triton.jit
def _fremainder(a, b, p0, p1, p2):  # torch's CUDA formula: fmod, then moved to the divisor's sign
    r = fmod(a, b)
    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)


@triton.jit
def _ifmod(a, b, p0, p1, p2):       # sign of the dividend (C)
    return a % b


@triton.jit
def _ffmod(a, b, p0, p1, p2):
    # Not the float `%`: on the GPU it lowers to LLVM frem, which NVPTX expands to a - trunc(a / b) * b --
    # wrong once |a / b| passes 2^24 (f32) / 2^53 (f64), e.g. fmod(1e30, 2.5), and +0.0 for fmod(-1, 1).
    # libdevice's fmod is exact (as is the interpreter's np.fmod) and is what torch's CUDA kernel calls.
    return fmod(a, b)


@triton.jit
def _pow(a, b, p0, p1, p2):
    return pow(a, b)


@triton.jit
def _ipow(a, b, p0, p1, p2):
    r = tl.zeros_like(a) + 1
    base = a
    e = b
    for _ in range(63):     # square-and-multiply over the exponent's bits; wraps around like torch
        r = tl.where((e & 1) != 0, r * base, r)
        base = base * base
        e = e >> 1
    sgn = tl.where((b & 1) == 0, 1, -1).to(a.dtype)
    negv = tl.where(a == 1, 1, tl.where(a == -1, sgn, 0)).to(a.dtype)
    return tl.where(b < 0, negv, r)


@triton.jit
def _pow_scalar(x, p0, p1, p2):
    return pow(x, p0)


@triton.jit
def _ipow_scalar(x, p0, p1, p2):
    return _ipow(x, tl.zeros_like(x) + p0, p0, p1, p2)


@triton.jit
def _square_p(x, p0, p1, p2):
    return x * x


@triton.jit
def _atan2(a, b, p0, p1, p2):
    return atan2(a, b)


@triton.jit
def _hypot(a, b, p0, p1, p2):
    return hypot(a, b)


@triton.jit
def _copysign(a, b, p0, p1, p2):
    return copysign(a, b)


@triton.jit
def _maximum(a, b, p0, p1, p2):     # NaN-propagating
    return tl.where((a > b) | (a != a), a, b)


@triton.jit
def _minimum(a, b, p0, p1, p2):
    return tl.where((a < b) | (a != a), a, b)


@triton.jit
def _fmax(a, b, p0, p1, p2):        # NaN-suppressing
    return tl.where(a != a, b, tl.where((a > b) | (b != b), a, b))


@triton.jit
def _fmin(a, b, p0, p1, p2):
    return tl.where(a != a, b, tl.where((a < b) | (b != b), a, b))


@triton.jit
def _logaddexp(a, b, p0, p1, p2):
    m = tl.maximum(a, b)
    r = m + log1p(exp(-tl.abs(a - b)))
    return tl.where(a == b, a + 0.6931471805599453, r)   # equal infinities: -inf stays -inf, +inf stays +inf


@triton.jit
def _logaddexp2(a, b, p0, p1, p2):
    m = tl.maximum(a, b)
    r = m + log1p(exp2(-tl.abs(a - b))) / 0.6931471805599453
    return tl.where(a == b, a + 1.0, r)


@triton.jit
def _xlogy(a, b, p0, p1, p2):
    return tl.where((a == 0) & (b == b), 0.0, a * log(b))


@triton.jit
def _lerp(a, b, p0, p1, p2):
    return a + p0 * (b - a)


@triton.jit
def _eq(a, b, p0, p1, p2):
    return a == b


@triton.jit
def _ne(a, b, p0, p1, p2):
    return a != b


@triton.jit
def _lt(a, b, p0, p1, p2):
    return a < b


@triton.jit
def _le(a, b, p0, p1, p2):
    return a <= b


@triton.jit
def _gt(a, b, p0, p1, p2):
    return a > b


@triton.jit
def _ge(a, b, p0, p1, p2):
    return a >= b


@triton.jit
def _land(a, b, p0, p1, p2):
    return (a != 0) & (b != 0)


@triton.jit
def _lor(a, b, p0, p1, p2):
    return (a != 0) | (b != 0)


@triton.jit
def _lxor(a, b, p0, p1, p2):
    return (a != 0) ^ (b != 0)


@triton.jit
def _band(a, b, p0, p1, p2):
    return a & b


@triton.jit
def _bor(a, b, p0, p1, p2):
    return a | b


@triton.jit
def _bxor(a, b, p0, p1, p2):
    return a ^ b


@triton.jit
def _shl(a, b, p0, p1, p2):   # shifts >= the bit width (or negative) give 0, as torch
    bits = a.dtype.primitive_bitwidth
    ok = (b >= 0) & (b < bits)
    return tl.where(ok, a << tl.where(ok, b, 0), 0)


@triton.jit
def _shr(a, b, p0, p1, p2):   # arithmetic for signed types: oversized shifts give the sign fill
    bits = a.dtype.primitive_bitwidth
    ok = (b >= 0) & (b < bits)
    return tl.where(ok, a >> tl.where(ok, b, 0), a >> (bits - 1))


@triton.jit
def _where(c, a, b, p0, p1, p2):
    return tl.where(c != 0, a, b)


@triton.jit
def _clamp(x, p0, p1, p2):    # NaN propagates (comparisons with NaN are false)
    return tl.where(x < p0, p0, tl.where(x > p1, p1, x))


@triton.jit
def _clamp_min(x, p0, p1, p2):
    return tl.where(x < p0, p0, x)


@triton.jit
def _clamp_max(x, p0, p1, p2):
    return tl.where(x > p1, p1, x)


@triton.jit
def _clamp_t(x, lo, hi, p0, p1, p2):
    y = tl.where(x < lo, lo, x)
    y = tl.where(y > hi, hi, y)
    return tl.where(x != x, x, y)


@triton.jit
def _addcmul(a, b, c, p0, p1, p2):
    return a + p0 * b * c


@triton.jit
def _addcdiv(a, b, c, p0, p1, p2):
    return a + p0 * b / c


# -- unary math --------------------------------------------------------------------------------------
@triton.jit
def _exp(x, p0, p1, p2):
    return exp(x)


@triton.jit
def _log(x, p0, p1, p2):
    return log(x)


@triton.jit
def _tanh(x, p0, p1, p2):
    return tanh(x)


@triton.jit
def _exp2(x, p0, p1, p2):
    return exp2(x)


@triton.jit
def _expm1(x, p0, p1, p2):
    return expm1(x)


@triton.jit
def _log2(x, p0, p1, p2):
    return log2(x)


@triton.jit
def _log10(x, p0, p1, p2):
    return log10(x)


@triton.jit
def _log1p(x, p0, p1, p2):
    return log1p(x)


@triton.jit
def _sqrt(x, p0, p1, p2):
    return sqrt(x)


@triton.jit
def _rsqrt(x, p0, p1, p2):
    return rsqrt(x)


@triton.jit
def _reciprocal(x, p0, p1, p2):
    return 1.0 / x


@triton.jit
def _sin(x, p0, p1, p2):
    return sin(x)


@triton.jit
def _cos(x, p0, p1, p2):
    return cos(x)


@triton.jit
def _tan(x, p0, p1, p2):
    return tan(x)


@triton.jit
def _asin(x, p0, p1, p2):
    return asin(x)


@triton.jit
def _acos(x, p0, p1, p2):
    return acos(x)


@triton.jit
def _atan(x, p0, p1, p2):
    return atan(x)


@triton.jit
def _sinh(x, p0, p1, p2):
    return sinh(x)


@triton.jit
def _cosh(x, p0, p1, p2):
    return cosh(x)


@triton.jit
def _asinh(x, p0, p1, p2):
    return asinh(x)


@triton.jit
def _acosh(x, p0, p1, p2):
    return acosh(x)


@triton.jit
def _atanh(x, p0, p1, p2):
    return atanh(x)


@triton.jit
def _erf(x, p0, p1, p2):
    return erf(x)


@triton.jit
def _erfc(x, p0, p1, p2):
    return erfc(x)


@triton.jit
def _erfinv(x, p0, p1, p2):
    return erfinv(x)


@triton.jit
def _sigmoid(x, p0, p1, p2):
    return sigmoid(x)


@triton.jit
def _lgamma(x, p0, p1, p2):
    return lgamma(x)


@triton.jit
def _digamma(x, p0, p1, p2):
    return digamma(x)


@triton.jit
def _i0(x, p0, p1, p2):
    return i0(x)


@triton.jit
def _sinc(x, p0, p1, p2):
    px = x * 3.141592653589793
    return tl.where(x == 0, 1.0, sinpi(x) / px)


@triton.jit
def _logit(x, p0, p1, p2):
    return log(x / (1.0 - x))


@triton.jit
def _logit_eps(x, p0, p1, p2):
    y = tl.minimum(tl.maximum(x, p0), 1.0 - p0)
    y = tl.where(x != x, x, y)
    return log(y / (1.0 - y))


@triton.jit
def _abs(x, p0, p1, p2):
    return tl.abs(x)


@triton.jit
def _sign(x, p0, p1, p2):
    return tl.where(x > 0, 1, tl.where(x < 0, -1, 0)).to(x.dtype)


@triton.jit
def _ident(x, p0, p1, p2):
    return x


@triton.jit
def _floor(x, p0, p1, p2):
    return tl.floor(x)


@triton.jit
def _ceil(x, p0, p1, p2):
    return tl.ceil(x)


@triton.jit
def _trunc(x, p0, p1, p2):
    return trunc(x)


@triton.jit
def _round(x, p0, p1, p2):   # half to even (rint), as torch.round
    return rint(x)


@triton.jit
def _frac(x, p0, p1, p2):
    return x - trunc(x)


@triton.jit
def _nan_to_num(x, p0, p1, p2):
    inf = (x == x) & ((x - x) != (x - x))
    return tl.where(x != x, p0, tl.where(inf & (x > 0), p1, tl.where(inf, p2, x)))


@triton.jit
def _isnan(x, p0, p1, p2):
    return x != x


@triton.jit
def _isinf(x, p0, p1, p2):
    return (x == x) & ((x - x) != (x - x))


@triton.jit
def _isfinite(x, p0, p1, p2):
    return (x - x) == (x - x)


@triton.jit
def _fsignbit(x, p0, p1, p2):
    return copysign(tl.zeros_like(x) + 1.0, x) < 0


@triton.jit
def _isignbit(x, p0, p1, p2):
    return x < 0


@triton.jit
def _lnot(x, p0, p1, p2):
    return x == 0


@triton.jit
def _bnot(x, p0, p1, p2):
    return x ^ (tl.zeros_like(x) - 1)    # all ones of x's type (``~`` of an unsigned type trips the interpreter)


def _int_float(i, f):
    return lambda d, is_int: (i if is_int else f, 0.0, 0.0, 0.0)


def _c(fn, p0=0.0, p1=0.0, p2=0.0):
    return lambda d, is_int: (fn, p0, p1, p2)


def _alpha(plain, scaled):
    # (a bool alpha, for bool operands, is passed as 0.0 / 1.0: the kernels hold bool as 0/1)
    return lambda d, is_int: (plain, 0.0, 0.0, 0.0) if d.attr("alpha") == 1.0 else (scaled, float(d.attr("alpha")),
                                                                                    0.0, 0.0)


def _div_sel(d, is_int):
    mode = d.attr("rounding_mode")
    if mode is None:
        return _div, 0.0, 0.0, 0.0
    if mode == "trunc":
        return (_idiv_trunc if is_int else _div_trunc), 0.0, 0.0, 0.0
    return (_idiv_floor if is_int else _fdiv_floor), 0.0, 0.0, 0.0


def _clamp_sel(d, is_int):
    lo, hi = d.attr("min"), d.attr("max")
    if lo is None:
        return _clamp_max, 0.0, float(hi), 0.0
    if hi is None:
        return _clamp_min, float(lo), 0.0, 0.0
    return _clamp, float(lo), float(hi), 0.0


def _n2n_sel(d, is_int):
    import ml_dtypes

    if is_int:
        return _ident, 0.0, 0.0, 0.0
    fi = ml_dtypes.finfo(d.outputs[0].dtype.numpy)
    pos, neg = d.attr("posinf"), d.attr("neginf")
    return (_nan_to_num, d.attr("nan"), float(fi.max) if pos is None else pos,
            float(fi.min) if neg is None else neg)


def _pow_scalar_sel(d, is_int):
    e = d.attr("exponent")
    if is_int:
        return _ipow_scalar, float(e), 0.0, 0.0
    if e == 2:
        return _square_p, 0.0, 0.0, 0.0
    return _pow_scalar, float(e), 0.0, 0.0


def _logit_sel(d, is_int):
    eps = d.attr("eps")
    return (_logit, 0.0, 0.0, 0.0) if eps is None else (_logit_eps, eps, 0.0, 0.0)


def _sign_sel(d, is_int):
    return (_ident if d.inputs[0].dtype.short == "bool" else _sign), 0.0, 0.0, 0.0


def _bnot_sel(d, is_int):
    return (_lnot if d.inputs[0].dtype.short == "bool" else _bnot), 0.0, 0.0, 0.0


BODIES = {
    "neg": _int_float(_neg, _fneg), "mul_scalar": lambda d, i: (_scale, d.attr("scalar"), 0.0, 0.0),
    "add": _alpha(_add, _add_alpha), "sub": _alpha(_sub, _sub_alpha), "mul": _c(_mul), "div": _div_sel,
    "floor_divide": _int_float(_idiv_floor, _fdiv_floor), "remainder": _int_float(_iremainder, _fremainder),
    "fmod": _int_float(_ifmod, _ffmod),
    "pow": _int_float(_ipow, _pow), "pow_scalar": _pow_scalar_sel, "atan2": _c(_atan2), "hypot": _c(_hypot),
    "copysign": _c(_copysign), "maximum": _c(_maximum), "minimum": _c(_minimum), "fmax": _c(_fmax),
    "fmin": _c(_fmin), "logaddexp": _c(_logaddexp), "logaddexp2": _c(_logaddexp2), "xlogy": _c(_xlogy),
    "lerp": lambda d, i: (_lerp, d.attr("weight"), 0.0, 0.0),
    "eq": _c(_eq), "ne": _c(_ne), "lt": _c(_lt), "le": _c(_le), "gt": _c(_gt), "ge": _c(_ge),
    "logical_and": _c(_land), "logical_or": _c(_lor), "logical_xor": _c(_lxor),
    "bitwise_and": _c(_band), "bitwise_or": _c(_bor), "bitwise_xor": _c(_bxor),
    "bitwise_left_shift": _c(_shl), "bitwise_right_shift": _c(_shr),
    "where": _c(_where), "clamp": _clamp_sel, "clamp_tensor": _c(_clamp_t),
    "addcmul": lambda d, i: (_addcmul, d.attr("value"), 0.0, 0.0),
    "addcdiv": lambda d, i: (_addcdiv, d.attr("value"), 0.0, 0.0),
    "exp": _c(_exp), "log": _c(_log), "tanh": _c(_tanh), "exp2": _c(_exp2), "expm1": _c(_expm1), "log2": _c(_log2),
    "log10": _c(_log10), "log1p": _c(_log1p), "sqrt": _c(_sqrt), "rsqrt": _c(_rsqrt), "reciprocal": _c(_reciprocal),
    "sin": _c(_sin), "cos": _c(_cos), "tan": _c(_tan), "asin": _c(_asin), "acos": _c(_acos), "atan": _c(_atan),
    "sinh": _c(_sinh), "cosh": _c(_cosh), "asinh": _c(_asinh), "acosh": _c(_acosh), "atanh": _c(_atanh),
    "erf": _c(_erf), "erfc": _c(_erfc), "erfinv": _c(_erfinv), "sigmoid": _c(_sigmoid), "lgamma": _c(_lgamma),
    "digamma": _c(_digamma), "i0": _c(_i0), "sinc": _c(_sinc), "logit": _logit_sel,
    "deg2rad": _c(_scale, math.pi / 180.0), "rad2deg": _c(_scale, 180.0 / math.pi),
    "abs": _c(_abs), "sign": _sign_sel, "square": _c(_square_p),
    "floor": _int_float(_ident, _floor), "ceil": _int_float(_ident, _ceil), "trunc": _int_float(_ident, _trunc),
    "round": _int_float(_ident, _round), "frac": _c(_frac), "nan_to_num": _n2n_sel,
    "isnan": _c(_isnan), "isinf": _c(_isinf), "isfinite": _c(_isfinite), "signbit": _int_float(_isignbit, _fsignbit),
    "logical_not": _c(_lnot), "bitwise_not": _bnot_sel,
}
