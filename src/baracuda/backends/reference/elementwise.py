"""NumPy bodies of the elementwise ops: float64 for float math, the exact integer/bool type for integer math.

Operands are converted to the op's compute dtype (``ew_compute_dtype``: f64, or the promoted integer type,
whose NumPy arithmetic wraps around like torch's) before the body runs.  Integer division/remainder by
zero raises ``ZeroDivisionError``, as torch does on the CPU.
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from ..._core.dtypes import DType
from ...ops.elementwise import EW_OPS, ew_compute_dtype, ew_operand_shapes, is_complex_desc
from . import register_reference
from ._complex import COMPLEX_BODIES, COMPLEX_OVERRIDES, NOT_HOLOMORPHIC, holomorphic

_SQRT2 = math.sqrt(2.0)
_LN2, _LN10 = math.log(2.0), math.log(10.0)
_SELU_A, _SELU_S = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
_SIXTH_F32 = float(np.float32(1.0 / 6.0))   # torch's hardsigmoid_backward scales by the f32 constant
_erf = np.vectorize(math.erf, otypes=[np.float64])
_erfc = np.vectorize(math.erfc, otypes=[np.float64])


def _lgamma1(v: float) -> float:
    if math.isnan(v):
        return v
    if math.isinf(v) or (v <= 0 and v == math.floor(v)):
        return math.inf          # poles at 0, -1, -2, ...
    return math.lgamma(v)


_lgamma = np.vectorize(_lgamma1, otypes=[np.float64])


def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def _softplus(x):
    return np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x)))


def _gelu(x, approximate):
    if approximate == "tanh":
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1.0 + _erf(x / _SQRT2))


def _gelu_d(x, approximate):
    if approximate == "tanh":
        k = math.sqrt(2.0 / math.pi)
        t = np.tanh(k * (x + 0.044715 * x ** 3))
        return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3 * 0.044715 * x ** 2)
    return 0.5 * (1.0 + _erf(x / _SQRT2)) + x * np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


def _silu_d(x):
    s = _sig(x)
    return s * (1.0 + x * (1.0 - s))


def _digamma(x):
    """psi(x) with torch's special values: psi(+-0) = -+inf, NaN at the negative integers (the poles) and -inf."""
    x = np.asarray(x, np.float64)
    refl = x < 0.5
    y = np.where(refl, 1.0 - x, x)
    acc = np.zeros_like(y)
    with np.errstate(all="ignore"):
        for _ in range(8):            # recurrence psi(y) = psi(y + 1) - 1/y up to y >= 8
            small = y < 8.0
            acc = acc - np.where(small, 1.0 / y, 0.0)
            y = np.where(small, y + 1.0, y)
        r = 1.0 / (y * y)
        # asymptotic series to B_14 (relative error < 2e-15 at y >= 8)
        psi = np.log(y) - 0.5 / y - r * (1 / 12 - r * (1 / 120 - r * (1 / 252 - r * (1 / 240 - r * (
            1 / 132 - r * (691 / 32760 - r / 12))))))
        psi = psi + acc
        # reflection psi(x) = psi(1 - x) - pi / tan(pi x), tan taken on x minus its nearest integer (exact; tan has
        # period pi), so -0.0 and +0.0 give +inf and -inf as torch
        psi = np.where(refl, psi - math.pi / np.tan(math.pi * np.where(x == 0, x, x - np.rint(x))), psi)
    return np.where((x < 0) & (x == np.floor(x)), np.nan, psi)


def _trigamma(x):
    """psi'(x) = polygamma(1, x): reflection below 0.5 (pi^2 / sin^2(pi x) - psi'(1 - x)), recurrence up to
    y >= 10, then the asymptotic series 1/y + 1/(2y^2) + sum B_2k / y^(2k+1) to B_14 (relative error < 1e-17).
    The poles (0 and the negative integers) give +inf: sin(pi x)^2 is taken on x minus its nearest integer (exact;
    period 1), exactly 0 there."""
    x = np.asarray(x, np.float64)
    refl = x < 0.5
    y = np.where(refl, 1.0 - x, x)
    acc = np.zeros_like(y)
    with np.errstate(all="ignore"):
        for _ in range(10):           # psi'(y) = psi'(y + 1) + 1/y^2
            small = y < 10.0
            acc = acc + np.where(small, 1.0 / (y * y), 0.0)
            y = np.where(small, y + 1.0, y)
        r = 1.0 / (y * y)
        series = (1.0 + (0.5 + (1 / 6 - r * (1 / 30 - r * (1 / 42 - r * (1 / 30 - r * (5 / 66 - r * (
            691 / 2730 - r * 7 / 6)))))) / y) / y) / y
        t = acc + series
        s = np.sin(math.pi * (x - np.rint(x)))
        return np.where(refl, math.pi * math.pi / (s * s) - t, t)


def _erfinv(y):
    y = np.asarray(y, np.float64)
    a = np.clip(np.abs(y), 0, 1)
    with np.errstate(all="ignore"):   # initial guess (Giles), then Newton on erf in float64
        w = -np.log((1.0 - a) * (1.0 + a))
        x = np.sqrt(np.maximum(w, 0)) * np.sign(y)
        x = np.where(np.abs(y) < 0.9, y * math.sqrt(math.pi) / 2 * (1 + math.pi / 12 * y * y), x)
        for _ in range(60):
            x = x - (_erf(x) - y) / (2 / math.sqrt(math.pi) * np.exp(-x * x))
    x = np.where(np.abs(y) == 1, np.sign(y) * np.inf, x)
    return np.where(np.abs(y) > 1, np.nan, x)


def _i1(x):
    t, s = x / 2.0, np.zeros_like(x)
    term = t.copy()
    for k in range(60):
        s = s + term
        term = term * t * t / ((k + 1) * (k + 2))
    return s


def _sinc_d(x):
    px = math.pi * x
    with np.errstate(all="ignore"):
        d = (np.cos(px) * px - np.sin(px)) / (px * x)
    return np.where(x == 0, 0.0, d)


def _int(x):
    return x.dtype.kind in "iub"


def _nonzero_divisor(op, b):
    if np.any(b == 0):
        raise ZeroDivisionError(f"{op}: integer division by zero (torch raises on the CPU as well)")


def _div(d, a, b):
    mode = d.attr("rounding_mode")
    if mode is None:
        return a / b
    if not _int(a):
        return np.trunc(a / b) if mode == "trunc" else np.floor_divide(a, b)
    _nonzero_divisor(d.op, b)
    q = np.floor_divide(a, b)
    if mode == "trunc":   # C division rounds toward zero: undo floor where the signs differ and it was inexact
        q = q + ((np.remainder(a, b) != 0) & ((a < 0) != (b < 0))).astype(q.dtype)
    return q


def _imod(fn):
    def body(d, a, b):
        if _int(a):
            _nonzero_divisor(d.op, b)
        return fn(a, b)
    return body


def _pow(d, a, b):
    if not _int(a):
        return np.power(a, b)
    neg = b < 0
    r = np.power(a, np.where(neg, 0, b))
    negv = np.where(a == 1, 1, np.where(a == -1, np.where(b % 2 == 0, 1, -1), 0)).astype(r.dtype)
    return np.where(neg, negv, r)


def _shift(left):
    def body(d, a, b):
        bits = a.dtype.itemsize * 8
        bb = np.clip(b, 0, bits - 1).astype(a.dtype)
        if left:
            return np.where((b < 0) | (b >= bits), 0, np.left_shift(a, bb)).astype(a.dtype)
        fill = np.where(a < 0, -1, 0) if a.dtype.kind == "i" else 0
        return np.where((b < 0) | (b >= bits), fill, np.right_shift(a, bb)).astype(a.dtype)
    return body


def _alpha(d, b):
    al = d.attr("alpha")
    if b.dtype == np.bool_:
        return b & bool(al)
    # integer alpha is cast to the operand type first (wraps, e.g. -2 on uint8), like torch's scalar cast
    return b * (np.asarray(int(al)).astype(b.dtype) if _int(b) else al)


def _minmax_w(d, a, b):
    m = d.attr("mode")
    if m in ("max", "min"):
        lose = (a < b) if m == "max" else (a > b)
        return np.where(a == b, 0.5, np.where(lose, 0.0, 1.0))
    win = (a >= b) if m == "fmax" else (a <= b)
    return (win | np.isnan(b)).astype(np.float64)


def _keep_int(fn):
    return lambda d, x: x if _int(x) else fn(x)


def _n2n(d, x):
    if _int(x):
        return x
    fi = ml_dtypes.finfo(d.outputs[0].dtype.numpy)
    pos, neg = d.attr("posinf"), d.attr("neginf")
    return np.nan_to_num(x, nan=d.attr("nan"), posinf=float(fi.max) if pos is None else pos,
                         neginf=float(fi.min) if neg is None else neg)


def _logit(d, x):
    eps = d.attr("eps")
    if eps is not None:
        x = np.clip(x, eps, 1.0 - eps)
    return np.log(x / (1.0 - x))


def _logit_bw(d, g, x):
    r = g / (x * (1.0 - x))
    eps = d.attr("eps")
    return r if eps is None else np.where((x < eps) | (x > 1.0 - eps), 0.0, r)


def _clamp(x, lo, hi):   # clamp, hardtanh, relu6
    if _int(x):   # integer bounds are cast to the tensor's type first (wrapping, like torch's scalar cast)
        lo, hi = (None if v is None else np.asarray(int(v)).astype(x.dtype) for v in (lo, hi))
    # comparisons, not np.maximum: -0.0 inside the bounds stays -0.0 (torch's clamp), a NaN stays NaN
    if lo is not None:
        x = np.where(x < lo, lo, x).astype(x.dtype)
    if hi is not None:
        x = np.where(x > hi, hi, x).astype(x.dtype)
    return x


def _threshold(d, x):
    t, v = d.attr("threshold"), d.attr("value")
    if _int(x):   # torch converts both numbers to the tensor's type (truncation; the spec refuses overflow)
        t, v = (np.asarray(int(u)).astype(x.dtype) for u in (t, v))
    return np.where(x <= t, v, x)   # a NaN x stays (torch's comparison is false there)


def _split(d, x):
    return np.split(x, 2, axis=d.attr("dim"))


_GATES = {  # name -> (act(a, d), dact(a, d)) for gated = act(a) * b; glu is a * sigmoid(b) (handled below)
    "swiglu": (lambda a, d: a * _sig(a), lambda a, d: _silu_d(a)),
    "geglu": (lambda a, d: _gelu(a, d.attr("approximate")), lambda a, d: _gelu_d(a, d.attr("approximate"))),
    "reglu": (lambda a, d: np.maximum(a, 0.0), lambda a, d: (a > 0).astype(np.float64)),
}


def _gated(name):
    if name == "glu":
        return lambda d, x: (lambda a, b: a * _sig(b))(*_split(d, x))
    act = _GATES[name][0]
    return lambda d, x: (lambda a, b: act(a, d) * b)(*_split(d, x))


def _gated_bw(name):
    def body(d, g, x):
        a, b = _split(d, x)
        if name == "glu":
            s = _sig(b)
            return np.concatenate([g * s, g * a * s * (1.0 - s)], axis=d.attr("dim"))
        act, dact = _GATES[name]
        return np.concatenate([g * b * dact(a, d), g * act(a, d)], axis=d.attr("dim"))
    return body


def _act_mul(gate):
    act, dact = _GATES[gate]
    return {"": lambda d, a, b: act(a, d) * b, "_backward": lambda d, g, a, b: g * b * dact(a, d)}


BODIES = {
    # arithmetic
    "neg": lambda d, x: -x,
    "mul_scalar": lambda d, x: x * d.attr("scalar"),
    "add": lambda d, a, b: a + _alpha(d, b),
    "sub": lambda d, a, b: a - _alpha(d, b),
    "mul": lambda d, a, b: a * b,
    "div": _div,
    "floor_divide": lambda d, a, b: _div_floor(d, a, b),
    "remainder": _imod(np.remainder),
    "fmod": _imod(np.fmod),
    "pow": _pow,
    "pow_scalar": lambda d, x: _pow(d, x, np.asarray(d.attr("exponent"), x.dtype if _int(x) else np.float64)),
    "atan2": lambda d, a, b: np.arctan2(a, b),
    "hypot": lambda d, a, b: np.hypot(a, b),
    "copysign": lambda d, a, b: np.copysign(a, b),
    "maximum": lambda d, a, b: np.maximum(a, b),
    "minimum": lambda d, a, b: np.minimum(a, b),
    "fmax": lambda d, a, b: np.fmax(a, b),
    "fmin": lambda d, a, b: np.fmin(a, b),
    "logaddexp": lambda d, a, b: np.logaddexp(a, b),
    "logaddexp2": lambda d, a, b: np.logaddexp2(a, b),
    "xlogy": lambda d, a, b: np.where((a == 0) & ~np.isnan(b), 0.0, a * np.log(b)),
    "lerp": lambda d, a, b: a + d.attr("weight") * (b - a),
    "eq": lambda d, a, b: a == b, "ne": lambda d, a, b: a != b, "lt": lambda d, a, b: a < b,
    "le": lambda d, a, b: a <= b, "gt": lambda d, a, b: a > b, "ge": lambda d, a, b: a >= b,
    "logical_and": lambda d, a, b: (a != 0) & (b != 0),
    "logical_or": lambda d, a, b: (a != 0) | (b != 0),
    "logical_xor": lambda d, a, b: (a != 0) ^ (b != 0),
    "bitwise_and": lambda d, a, b: a & b, "bitwise_or": lambda d, a, b: a | b, "bitwise_xor": lambda d, a, b: a ^ b,
    "bitwise_left_shift": _shift(True), "bitwise_right_shift": _shift(False),
    "where": lambda d, c, a, b: np.where(c, a, b),
    "clamp": lambda d, x: _clamp(x, d.attr("min"), d.attr("max")),
    "clamp_tensor": lambda d, x, lo, hi: np.minimum(np.maximum(x, lo), hi),
    "addcmul": lambda d, a, b, c: a + (np.asarray(int(d.attr("value"))).astype(a.dtype) if _int(a)
                                       else d.attr("value")) * b * c,
    "addcdiv": lambda d, a, b, c: a + d.attr("value") * b / c,
    # unary math
    "exp": lambda d, x: np.exp(x), "log": lambda d, x: np.log(x), "tanh": lambda d, x: np.tanh(x),
    "exp2": lambda d, x: np.exp2(x), "expm1": lambda d, x: np.expm1(x), "log2": lambda d, x: np.log2(x),
    "log10": lambda d, x: np.log10(x), "log1p": lambda d, x: np.log1p(x), "sqrt": lambda d, x: np.sqrt(x),
    "rsqrt": lambda d, x: 1.0 / np.sqrt(x), "reciprocal": lambda d, x: 1.0 / x,
    "sin": lambda d, x: np.sin(x), "cos": lambda d, x: np.cos(x), "tan": lambda d, x: np.tan(x),
    "asin": lambda d, x: np.arcsin(x), "acos": lambda d, x: np.arccos(x), "atan": lambda d, x: np.arctan(x),
    "sinh": lambda d, x: np.sinh(x), "cosh": lambda d, x: np.cosh(x), "asinh": lambda d, x: np.arcsinh(x),
    "acosh": lambda d, x: np.arccosh(x), "atanh": lambda d, x: np.arctanh(x),
    "erf": lambda d, x: _erf(x), "erfc": lambda d, x: _erfc(x), "erfinv": lambda d, x: _erfinv(x),
    "sigmoid": lambda d, x: _sig(x), "lgamma": lambda d, x: _lgamma(x), "digamma": lambda d, x: _digamma(x),
    "i0": lambda d, x: np.i0(x), "sinc": lambda d, x: np.sinc(x), "logit": _logit,
    "deg2rad": lambda d, x: x * (math.pi / 180.0), "rad2deg": lambda d, x: x * (180.0 / math.pi),
    "abs": lambda d, x: np.abs(x),
    "sign": lambda d, x: x if x.dtype == np.bool_ else np.where(np.isnan(x), 0, np.sign(x)).astype(x.dtype),
    "square": lambda d, x: x * x,
    "floor": _keep_int(np.floor), "ceil": _keep_int(np.ceil), "trunc": _keep_int(np.trunc),
    "round": _keep_int(np.rint), "frac": lambda d, x: x - np.trunc(x), "nan_to_num": _n2n,
    "isnan": lambda d, x: np.isnan(x.astype(np.float64)), "isinf": lambda d, x: np.isinf(x.astype(np.float64)),
    "isfinite": lambda d, x: np.isfinite(x.astype(np.float64)),
    "signbit": lambda d, x: np.signbit(x.astype(np.float64) if x.dtype == np.bool_ else x),
    "logical_not": lambda d, x: x == 0, "bitwise_not": lambda d, x: ~x,
    # activations
    "relu": lambda d, x: np.where(x < 0, 0, x).astype(x.dtype), "gelu": lambda d, x: _gelu(x, d.attr("approximate")),
    "silu": lambda d, x: x * _sig(x), "relu6": lambda d, x: _clamp(x, 0.0, 6.0),
    "leaky_relu": lambda d, x: np.where(x > 0, x, x * d.attr("negative_slope")),
    "elu": lambda d, x: np.where(x > 0, x, d.attr("alpha") * np.expm1(x)),
    "selu": lambda d, x: _SELU_S * np.where(x > 0, x, _SELU_A * np.expm1(x)),
    "celu": lambda d, x: np.maximum(x, 0.0) + np.minimum(0.0, d.attr("alpha") * np.expm1(x / d.attr("alpha"))),
    "mish": lambda d, x: x * np.tanh(_softplus(x)),
    "softplus": lambda d, x: np.where(x * d.attr("beta") > d.attr("threshold"), x,
                                      _softplus(x * d.attr("beta")) / d.attr("beta")),
    "softsign": lambda d, x: x / (1.0 + np.abs(x)), "tanhshrink": lambda d, x: x - np.tanh(x),
    "hardtanh": lambda d, x: _clamp(x, d.attr("min_val"), d.attr("max_val")),
    "hardswish": lambda d, x: x * np.clip(x + 3.0, 0.0, 6.0) / 6.0,
    "hardsigmoid": lambda d, x: np.clip(x / 6.0 + 0.5, 0.0, 1.0),
    # torch's NaN rules: hardshrink / softshrink / threshold keep a NaN x (the comparisons are false there);
    # hardshrink's zero band [-lambd, lambd] is empty for lambd < 0; softshrink's band is x * 0 (-0.0 for x < 0)
    "hardshrink": lambda d, x: np.where((x >= -d.attr("lambd")) & (x <= d.attr("lambd")), 0.0, x),
    "softshrink": lambda d, x: np.where(x > d.attr("lambd"), x - d.attr("lambd"),
                                        np.where(x < -d.attr("lambd"), x + d.attr("lambd"), x * 0.0)),
    "threshold": _threshold,
    "logsigmoid": lambda d, x: np.minimum(x, 0.0) - np.log1p(np.exp(-np.abs(x))),
    # backward helpers: (g, saved) -> dx
    "div_backward_b": lambda d, g, a, b: -g * a / (b * b),
    "minmax_backward": lambda d, g, a, b: g * _minmax_w(d, a, b),
    "pow_backward_a": lambda d, g, a, b: np.where(b == 0, 0.0, g * b * np.power(a, b - 1.0)),
    "pow_backward_b": lambda d, g, a, b: np.where((a == 0) & (b >= 0), 0.0, g * np.power(a, b) * np.log(a)),
    "where_backward": lambda d, g, c: np.where(c if d.attr("branch") == 1 else ~c, g, 0.0),
    "pow_scalar_backward": lambda d, g, x: (lambda e: np.where(e == 0, 0.0, g * e * np.power(x, e - 1.0)))(
        float(d.attr("exponent"))),
    "clamp_backward": lambda d, g, x: g * (((x >= d.attr("min")) if d.attr("min") is not None else True)
                                           & ((x <= d.attr("max")) if d.attr("max") is not None else True)),
    "exp_backward": lambda d, g, y: g * y, "log_backward": lambda d, g, x: g / x,
    "tanh_backward": lambda d, g, y: g * (1.0 - y * y), "exp2_backward": lambda d, g, y: g * y * _LN2,
    "expm1_backward": lambda d, g, y: g * (y + 1.0), "log2_backward": lambda d, g, x: g / (x * _LN2),
    "log10_backward": lambda d, g, x: g / (x * _LN10), "log1p_backward": lambda d, g, x: g / (1.0 + x),
    "sqrt_backward": lambda d, g, y: g / (2.0 * y), "rsqrt_backward": lambda d, g, y: -0.5 * g * y * y * y,
    "reciprocal_backward": lambda d, g, y: -g * y * y,
    "sin_backward": lambda d, g, x: g * np.cos(x), "cos_backward": lambda d, g, x: -g * np.sin(x),
    "tan_backward": lambda d, g, x: g / (np.cos(x) ** 2),
    "asin_backward": lambda d, g, x: g / np.sqrt(1.0 - x * x), "acos_backward": lambda d, g, x: -g / np.sqrt(1.0 - x * x),
    "atan_backward": lambda d, g, x: g / (1.0 + x * x), "sinh_backward": lambda d, g, x: g * np.cosh(x),
    "cosh_backward": lambda d, g, x: g * np.sinh(x), "asinh_backward": lambda d, g, x: g / np.sqrt(x * x + 1.0),
    "acosh_backward": lambda d, g, x: g / np.sqrt(x * x - 1.0), "atanh_backward": lambda d, g, x: g / (1.0 - x * x),
    "erf_backward": lambda d, g, x: g * (2.0 / math.sqrt(math.pi)) * np.exp(-x * x),
    "erfc_backward": lambda d, g, x: -g * (2.0 / math.sqrt(math.pi)) * np.exp(-x * x),
    "erfinv_backward": lambda d, g, y: g * (math.sqrt(math.pi) / 2.0) * np.exp(y * y),
    "sigmoid_backward": lambda d, g, y: g * y * (1.0 - y), "lgamma_backward": lambda d, g, x: g * _digamma(x),
    "digamma_backward": lambda d, g, x: g * _trigamma(x),
    "i0_backward": lambda d, g, x: g * _i1(x), "sinc_backward": lambda d, g, x: g * _sinc_d(x),
    "logit_backward": _logit_bw, "abs_backward": lambda d, g, x: g * np.sign(x),
    "square_backward": lambda d, g, x: 2.0 * g * x, "frac_backward": lambda d, g, x: g,
    "nan_to_num_backward": lambda d, g, x: g * np.isfinite(x),
    "relu_backward": lambda d, g, x: np.where(x > 0, g, 0.0),
    "gelu_backward": lambda d, g, x: g * _gelu_d(x, d.attr("approximate")),
    "silu_backward": lambda d, g, x: g * _silu_d(x),
    "relu6_backward": lambda d, g, x: np.where((x > 0) & (x < 6), g, 0.0),
    "leaky_relu_backward": lambda d, g, x: np.where(x > 0, g, g * d.attr("negative_slope")),
    "elu_backward": lambda d, g, x: np.where(x > 0, g, g * d.attr("alpha") * np.exp(x)),
    "selu_backward": lambda d, g, x: _SELU_S * np.where(x > 0, g, g * _SELU_A * np.exp(x)),
    "celu_backward": lambda d, g, x: np.where(x > 0, g, g * np.exp(x / d.attr("alpha"))),
    "mish_backward": lambda d, g, x: g * (lambda t: t + x * _sig(x) * (1.0 - t * t))(np.tanh(_softplus(x))),
    "softplus_backward": lambda d, g, x: np.where(x * d.attr("beta") > d.attr("threshold"), g,
                                                  g * _sig(x * d.attr("beta"))),
    "softsign_backward": lambda d, g, x: g / (1.0 + np.abs(x)) ** 2,
    "tanhshrink_backward": lambda d, g, x: g * np.tanh(x) ** 2,
    "hardtanh_backward": lambda d, g, x: np.where((x > d.attr("min_val")) & (x < d.attr("max_val")), g, 0.0),
    "hardswish_backward": lambda d, g, x: np.where(x < -3.0, 0.0, np.where(x <= 3.0, g * (x / 3.0 + 0.5), g)),
    "hardsigmoid_backward": lambda d, g, x: np.where((x > -3.0) & (x < 3.0), g * _SIXTH_F32, 0.0),
    # (torch: the shrinks pass g outside the band, none at a NaN; threshold passes g unless x <= threshold: at a NaN)
    "hardshrink_backward": lambda d, g, x: np.where((x > d.attr("lambd")) | (x < -d.attr("lambd")), g, 0.0),
    "softshrink_backward": lambda d, g, x: np.where((x > d.attr("lambd")) | (x < -d.attr("lambd")), g, 0.0),
    "threshold_backward": lambda d, g, x: np.where(x <= d.attr("threshold"), 0.0, g),
    "logsigmoid_backward": lambda d, g, x: g * _sig(-x),
    **{n: _gated(n) for n in ("glu", "swiglu", "geglu", "reglu")},
    **{f"{n}_backward": _gated_bw(n) for n in ("glu", "swiglu", "geglu", "reglu")},
    **{f"{act}_mul{k}": f for act, gate in (("silu", "swiglu"), ("gelu", "geglu")) for k, f in _act_mul(gate).items()},
}


# -- second table (ops/ew_numeric.py, prelu/rrelu) ------------------------------------------------------
_INT_OF = {2: np.int16, 4: np.int32, 8: np.int64}


def _nextafter(d, a, b):
    """One ulp of the result dtype towards b, on the bits (bf16/f16 step in their own format, as torch)."""
    ft = np.dtype(d.outputs[0].dtype.numpy)
    it = _INT_OF[ft.itemsize]
    x, y = a.astype(ft), b.astype(ft)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    bits = np.ascontiguousarray(x).view(it)
    away = (y64 > x64) == (x64 > 0)            # away from zero: the magnitude bits grow by one
    stepped = np.where(away, bits + 1, bits - 1).astype(it)
    tiny = np.where(y64 > 0, 1, np.iinfo(it).min + 1).astype(it)   # smallest subnormal with y's sign
    r = np.where(x64 == 0, tiny, stepped).astype(it).view(ft).astype(np.float64)
    r = np.where(x64 == y64, y64, r)
    return np.where(np.isnan(x64) | np.isnan(y64), np.nan, r)


def _torch_gcd(a, b):
    """torch's loop exactly: |a|, |b| (wrapping, so INT_MIN stays negative), then Euclid with C remainder."""
    a, b = np.abs(a), np.abs(b)
    while np.any(a != 0):
        nz = a != 0
        c = a
        a = np.where(nz, np.fmod(b, np.where(nz, a, 1)), 0).astype(a.dtype)
        b = np.where(nz, c, b)
    return b


def _lcm(d, a, b):
    g = _torch_gcd(a, b)
    gs = np.where(g == 0, 1, g)
    wide = np.int32 if a.dtype.itemsize < 4 else a.dtype   # C++ computes 8/16-bit a / g * b in int
    return np.where(g == 0, 0, np.abs((a // gs).astype(wide) * b.astype(wide)).astype(a.dtype)).astype(a.dtype)


_HALF = {"bf16": ml_dtypes.bfloat16, "f16": np.float16}


def _isclose(d, a, b):
    """torch's formula step by step: each intermediate is a tensor op rounded to the operands' dtype;
    integer/bool operands compare equal as integers, the rest runs on both cast to f32."""
    rtol, atol, eqnan = d.attr("rtol"), d.attr("atol"), d.attr("equal_nan")
    close = a == b
    src = d.inputs[0].dtype
    if src.is_floating:
        st = _HALF.get(src.short)
        ct = np.float32 if st is not None else a.dtype.type

        def rnd(v):
            return v.astype(st).astype(ct) if st is not None else v.astype(ct)
        x, y = a.astype(ct), b.astype(ct)
        if eqnan:
            close = close | (np.isnan(x) & np.isnan(y))
        if rtol == 0 and atol == 0:
            return close
        allowed = rnd(ct(atol) + np.abs(rnd(ct(rtol) * y)))
        actual = np.abs(rnd(x - y))
        return close | (np.isfinite(actual) & (actual <= allowed))
    if rtol == 0 and atol == 0:
        return close
    x, y = a.astype(np.float32), b.astype(np.float32)   # integers/bool: torch casts both to f32 (no wrap)
    return close | (np.abs(x - y) <= np.float32(atol) + np.abs(np.float32(rtol) * y))


def _prelu(d, x, w):
    return np.where(x > 0, x, w * x)


def _f64(*xs):
    return [x.astype(np.float64) for x in xs]


def _lerp_t(d, a, b, w):
    """torch's two-sided formula (exact at w = 0 and w = 1); torch's kernels fuse each product and sum into
    one fma, so the products and sums run in f64 here (the difference b - a is rounded once, as in torch)."""
    diff = b - a
    a, b, w, diff = _f64(a, b, w, diff)
    return np.where(np.abs(w) < 0.5, a + w * diff, b - diff * (1.0 - w))


def _rrelu_slope(d):
    return (d.attr("lower") + d.attr("upper")) / 2.0


BODIES.update({
    "sgn": BODIES["sign"],
    "isposinf": lambda d, x: np.isposinf(x.astype(np.float64)),
    "isneginf": lambda d, x: np.isneginf(x.astype(np.float64)),
    "true_divide": lambda d, a, b: a / b,
    "float_power": lambda d, a, b: np.power(a, b),
    "nextafter": _nextafter,
    "ldexp": lambda d, a, b: a.astype(np.float64) * np.exp2(b.astype(np.float64)),   # no overflow of 2^b alone
    "heaviside": lambda d, a, b: np.where(a == 0, b, (a > 0).astype(a.dtype)),
    "gcd": lambda d, a, b: _torch_gcd(a, b),
    "lcm": _lcm,
    "isclose": _isclose,
    "clamp_min": lambda d, a, b: np.maximum(a, b),
    "clamp_max": lambda d, a, b: np.minimum(a, b),
    "fma": lambda d, a, b, c: a * b + c if _int(a) else (lambda x, y, z: x * y + z)(*_f64(a, b, c)),
    "lerp_tensor": _lerp_t,
    "prelu": _prelu,
    "prelu_backward": lambda d, g, x, w: np.where(x > 0, g, w * g),
    "prelu_weight_grad": lambda d, g, x: np.where(x > 0, 0.0, x * g),
    "rrelu": lambda d, x: np.where(x > 0, x, x * _rrelu_slope(d)),
    "rrelu_backward": lambda d, g, x: np.where(x > 0, g, g * _rrelu_slope(d)),
    # training mode: torch's rrelu_with_noise (noise <= 0 elements only; a NaN x is no x <= 0: kept, gradient g)
    "rrelu_with_noise": lambda d, x, r: np.where(x <= 0, x * r, x),
    "rrelu_with_noise_backward": lambda d, g, x, r: np.where(x <= 0, g * r, g),
})


def _div_floor(d, a, b):
    if _int(a):
        _nonzero_divisor(d.op, b)
    return np.floor_divide(a, b)


# complex64/128 (backends/reference/_complex.py): new bodies, g * conj(f'(z)) for holomorphic backward helpers,
# complex bodies where the real one does not carry over
BODIES.update(COMPLEX_BODIES)
for _name, _e in EW_OPS.items():
    if "_backward" in _name and DType.c64 in _e.dtypes and _name not in NOT_HOLOMORPHIC:
        BODIES[_name] = holomorphic(BODIES[_name])
for _name, _cf in COMPLEX_OVERRIDES.items():
    BODIES[_name] = (lambda real, cf: lambda d, *xs: cf(d, *xs) if is_complex_desc(d) else real(d, *xs))(
        BODIES[_name], _cf)

missing = set(EW_OPS) - set(BODIES)
if missing:  # every op in the table must have its oracle
    raise ImportError(f"reference elementwise: no body for {sorted(missing)}")


def _convert(desc, xs):
    """Operands -> the compute dtype (f64 for float math, the promoted integer/bool type otherwise)."""
    ct = ew_compute_dtype(desc)
    ct = np.dtype(np.complex128) if ct.is_complex else ct.numpy   # complex math in complex128
    e = EW_OPS[desc.op]
    vals = set(e.value_args if e.value_args is not None else range(len(xs)))
    xs = [np.asarray(x).astype(ct, copy=False) if i in vals else np.asarray(x) for i, x in enumerate(xs)]
    if e.align is not None:   # e.g. prelu's per-channel weight as [C, 1, ..., 1]
        xs = [x.reshape(s) for x, s in zip(xs, ew_operand_shapes(desc))]
    return xs


for _name, _fn in BODIES.items():
    def _run(desc, *xs, _fn=_fn):
        with np.errstate(all="ignore"):  # inf/nan follow IEEE, integers wrap around, as torch
            return _fn(desc, *_convert(desc, xs))
    register_reference(_name, _run)
