"""Scalar bodies of the activations and of every ``<op>_backward(g, saved)`` helper (same template and
signature as ``_ew_bodies``)."""
from __future__ import annotations

import triton
import triton.language as tl

from .._lib.math import (cos, cosh, cospi, digamma, exp, i1, log, log1p, pow, sigmoid, sin, sinh, sinpi, softplus,
                         sqrt, tanh, trigamma)

_SELU_A, _SELU_S = 1.6732632423543772, 1.0507009873554805
_LN2, _LN10, _PI = 0.6931471805599453, 2.302585092994046, 3.141592653589793


@triton.jit
def _relu(x, p0, p1, p2):
    return tl.where(x < 0, tl.zeros_like(x), x)      # NaN and -0.0 pass through, as torch


@triton.jit
def _gelu_erf(x, p0, p1, p2):
    return 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))


@triton.jit
def _gelu_tanh(x, p0, p1, p2):
    return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


@triton.jit
def _silu(x, p0, p1, p2):
    return x * sigmoid(x)


@triton.jit
def _hardtanh(x, p0, p1, p2):   # NaN propagates
    return tl.where(x < p0, p0, tl.where(x > p1, p1, x))


@triton.jit
def _leaky(x, p0, p1, p2):
    return tl.where(x > 0, x, x * p0)


@triton.jit
def _elu(x, p0, p1, p2):      # p0 = alpha, p1 = output scale (selu), p2 = 1/input scale (celu)
    return p1 * tl.where(x > 0, x, p0 * (exp(x * p2) - 1.0))


@triton.jit
def _mish(x, p0, p1, p2):
    return x * tanh(softplus(x))


@triton.jit
def _softplus(x, p0, p1, p2):   # p0 = beta, p1 = threshold
    bx = x * p0
    return tl.where(bx > p1, x, softplus(bx) / p0)


@triton.jit
def _softsign(x, p0, p1, p2):
    return x / (1.0 + tl.abs(x))


@triton.jit
def _tanhshrink(x, p0, p1, p2):
    return x - tanh(x)


@triton.jit
def _relu6_nan(x):
    # clamp(x, 0, 6) by compares, not tl.minimum/maximum: on the GPU those lower to min/max.f32, which return
    # the non-NaN operand (hardsigmoid(NaN) would be 0.5); a NaN fails both compares and passes through, as torch
    return tl.where(x < 0.0, 0.0, tl.where(x > 6.0, 6.0, x))


@triton.jit
def _hardswish(x, p0, p1, p2):   # p0 = 1/6 in the compute dtype
    return x * _relu6_nan(x + 3.0) * p0


@triton.jit
def _hardsigmoid(x, p0, p1, p2):
    # torch's formula: relu6(x + 3) * (1/6).  Clamping x + 3 first makes x = -3 give exactly +0.0 (x / 6 + 0.5
    # does not when f32 `/` is the approximate div.full.f32), and multiplying by p0 = 1/6 rounded to the
    # compute dtype is what torch's CUDA kernel does in f32 (bit-identical there); in f64 it is within 1 ulp of /6
    return _relu6_nan(x + 3.0) * p0


@triton.jit
def _hardshrink(x, p0, p1, p2):   # torch: 0 inside [-lambd, lambd] (empty for lambd < 0), else x; NaN stays NaN
    return tl.where((x >= -p0) & (x <= p0), 0.0, x)


@triton.jit
def _softshrink(x, p0, p1, p2):   # x * 0 inside: NaN stays NaN (torch; and -0.0 for x < 0, as its CUDA kernel)
    return tl.where(x > p0, x - p0, tl.where(x < -p0, x + p0, x * 0.0))


@triton.jit
def _threshold(x, p0, p1, p2):    # torch: value where x <= threshold, else x (NaN stays NaN)
    return tl.where(x <= p0, p1, x)


@triton.jit
def _logsigmoid(x, p0, p1, p2):
    return tl.minimum(x, 0.0) - log1p(exp(-tl.abs(x)))


# -- backward helpers: (g, saved, p0, p1, p2) -> dx --------------------------------------------------
@triton.jit
def _bw_mul_y(g, y, p0, p1, p2):          # exp; exp2 with p0 = ln 2
    return g * y * p0


@triton.jit
def _bw_div_x(g, x, p0, p1, p2):          # log (p0 = 1), log2 (p0 = ln 2), log10
    return g / (x * p0)


@triton.jit
def _bw_tanh(g, y, p0, p1, p2):
    return g * (1.0 - y * y)


@triton.jit
def _bw_expm1(g, y, p0, p1, p2):
    return g * (y + 1.0)


@triton.jit
def _bw_log1p(g, x, p0, p1, p2):
    return g / (1.0 + x)


@triton.jit
def _bw_sqrt(g, y, p0, p1, p2):
    return g / (2.0 * y)


@triton.jit
def _bw_rsqrt(g, y, p0, p1, p2):
    return -0.5 * g * y * y * y


@triton.jit
def _bw_recip(g, y, p0, p1, p2):
    return -g * y * y


@triton.jit
def _bw_sin(g, x, p0, p1, p2):
    return g * cos(x)


@triton.jit
def _bw_cos(g, x, p0, p1, p2):
    return -g * sin(x)


@triton.jit
def _bw_tan(g, x, p0, p1, p2):
    c = cos(x)
    return g / (c * c)


@triton.jit
def _bw_asin(g, x, p0, p1, p2):          # p0 = +1 (asin) / -1 (acos)
    return p0 * g / sqrt(1.0 - x * x)


@triton.jit
def _bw_atan(g, x, p0, p1, p2):
    return g / (1.0 + x * x)


@triton.jit
def _bw_sinh(g, x, p0, p1, p2):
    return g * cosh(x)


@triton.jit
def _bw_cosh(g, x, p0, p1, p2):
    return g * sinh(x)


@triton.jit
def _bw_asinh(g, x, p0, p1, p2):         # p0 = +1 (asinh: sqrt(x^2 + 1)) / -1 (acosh: sqrt(x^2 - 1))
    return g / sqrt(x * x + p0)


@triton.jit
def _bw_atanh(g, x, p0, p1, p2):
    return g / (1.0 - x * x)


@triton.jit
def _bw_erf(g, x, p0, p1, p2):           # p0 = +-2/sqrt(pi) (erf / erfc)
    return g * p0 * exp(-x * x)


@triton.jit
def _bw_erfinv(g, y, p0, p1, p2):
    return g * 0.886226925452758 * exp(y * y)


@triton.jit
def _bw_sigmoid(g, y, p0, p1, p2):
    return g * y * (1.0 - y)


@triton.jit
def _bw_lgamma(g, x, p0, p1, p2):
    return g * digamma(x)


@triton.jit
def _bw_digamma(g, x, p0, p1, p2):
    return g * trigamma(x)


@triton.jit
def _bw_i0(g, x, p0, p1, p2):
    return g * i1(x)


@triton.jit
def _bw_sinc(g, x, p0, p1, p2):
    px = x * 3.141592653589793
    return tl.where(x == 0, 0.0, g * (cospi(x) * px - sinpi(x)) / (px * x))


@triton.jit
def _bw_logit(g, x, p0, p1, p2):         # p0 = eps; no eps is passed as -1 (the window (-1, 2) masks nothing)
    r = g / (x * (1.0 - x))
    return tl.where((x < p0) | (x > 1.0 - p0), 0.0, r)


@triton.jit
def _bw_abs(g, x, p0, p1, p2):
    return tl.where(x > 0, g, tl.where(x < 0, -g, 0.0))


@triton.jit
def _bw_square(g, x, p0, p1, p2):
    return 2.0 * g * x


@triton.jit
def _bw_ident(g, x, p0, p1, p2):
    return g


@triton.jit
def _bw_finite(g, x, p0, p1, p2):
    return tl.where((x - x) == (x - x), g, 0.0)


@triton.jit
def _bw_pow_scalar(g, x, p0, p1, p2):
    return tl.where(p0 == 0, 0.0, g * p0 * pow(x, p0 - 1.0))


@triton.jit
def _bw_window(g, x, p0, p1, p2):        # relu6 / hardtanh / clamp: g inside (p0, p1) (p2 = 1: closed interval)
    inside = tl.where(p2 > 0, (x >= p0) & (x <= p1), (x > p0) & (x < p1))
    return tl.where(inside, g, 0.0)


@triton.jit
def _bw_relu(g, x, p0, p1, p2):
    return tl.where(x > 0, g, tl.zeros_like(g))


@triton.jit
def _bw_gelu_erf(g, x, p0, p1, p2):
    cdf = 0.5 * (1.0 + tl.erf(x * 0.7071067811865476))
    pdf = exp(-0.5 * x * x) * 0.3989422804014327
    return g * (cdf + x * pdf)


@triton.jit
def _bw_gelu_tanh(g, x, p0, p1, p2):
    u = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    t = tanh(u)
    du = 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * x * x)
    return g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du)


@triton.jit
def _bw_silu(g, x, p0, p1, p2):
    s = sigmoid(x)
    return g * s * (1.0 + x * (1.0 - s))


@triton.jit
def _bw_leaky(g, x, p0, p1, p2):
    return tl.where(x > 0, g, g * p0)


@triton.jit
def _bw_elu(g, x, p0, p1, p2):           # alpha, scale, 1/input scale
    return p1 * tl.where(x > 0, g, g * p0 * p2 * exp(x * p2))


@triton.jit
def _bw_mish(g, x, p0, p1, p2):
    t = tanh(softplus(x))
    return g * (t + x * sigmoid(x) * (1.0 - t * t))


@triton.jit
def _bw_softplus(g, x, p0, p1, p2):
    bx = x * p0
    return tl.where(bx > p1, g, g * sigmoid(bx))


@triton.jit
def _bw_softsign(g, x, p0, p1, p2):
    d = 1.0 + tl.abs(x)
    return g / (d * d)


@triton.jit
def _bw_tanhshrink(g, x, p0, p1, p2):
    t = tanh(x)
    return g * t * t


@triton.jit
def _bw_hardswish(g, x, p0, p1, p2):
    return tl.where(x < -3.0, 0.0, tl.where(x <= 3.0, g * (x / 3.0 + 0.5), g))


@triton.jit
def _bw_hardsigmoid(g, x, p0, p1, p2):
    return tl.where((x > -3.0) & (x < 3.0), g * 0.1666666716337204, 0.0)   # f32(1/6), as torch


@triton.jit
def _bw_shrink(g, x, p0, p1, p2):
    return tl.where((x > p0) | (x < -p0), g, 0.0)


@triton.jit
def _bw_threshold(g, x, p0, p1, p2):   # torch: g passes where not x <= threshold (a NaN x passes it)
    return tl.where(x <= p0, 0.0, g)


@triton.jit
def _bw_logsigmoid(g, x, p0, p1, p2):
    return g * sigmoid(-x)


@triton.jit
def _bw_div_b(g, a, b, p0, p1, p2):
    return -g * a / (b * b)


@triton.jit
def _bw_minmax(g, a, b, p0, p1, p2):     # p0: 0 max, 1 min, 2 fmax, 3 fmin
    lose = tl.where(p0 == 0, a < b, a > b)
    w_mm = tl.where(a == b, 0.5, tl.where(lose, 0.0, 1.0))
    win = tl.where(p0 == 2, a >= b, a <= b) | (b != b)
    w_f = tl.where(win, 1.0, 0.0)
    return g * tl.where(p0 < 2, w_mm, w_f)


@triton.jit
def _bw_pow_a(g, a, b, p0, p1, p2):
    return tl.where(b == 0, 0.0, g * b * pow(a, b - 1.0))


@triton.jit
def _bw_pow_b(g, a, b, p0, p1, p2):
    return tl.where((a == 0) & (b >= 0), 0.0, g * pow(a, b) * log(a))


@triton.jit
def _bw_where(g, c, p0, p1, p2):         # p0 = 1: keep where c, else where not c
    keep = tl.where(p0 == 1, c != 0, c == 0)
    return tl.where(keep, g, 0.0)


# act(a) * b and its gradient for a, g * b * act'(a) (the gradient for b is the forward op on (a, g))
@triton.jit
def _silu_mul(a, b, p0, p1, p2):
    return _silu(a, p0, p1, p2) * b


@triton.jit
def _gelu_erf_mul(a, b, p0, p1, p2):
    return _gelu_erf(a, p0, p1, p2) * b


@triton.jit
def _gelu_tanh_mul(a, b, p0, p1, p2):
    return _gelu_tanh(a, p0, p1, p2) * b


@triton.jit
def _bw_silu_mul(g, a, b, p0, p1, p2):
    return _bw_silu(g * b, a, p0, p1, p2)


@triton.jit
def _bw_gelu_erf_mul(g, a, b, p0, p1, p2):
    return _bw_gelu_erf(g * b, a, p0, p1, p2)


@triton.jit
def _bw_gelu_tanh_mul(g, a, b, p0, p1, p2):
    return _bw_gelu_tanh(g * b, a, p0, p1, p2)


def _c(fn, p0=0.0, p1=0.0, p2=0.0):
    return lambda d, is_int: (fn, p0, p1, p2)


def _a(fn, *names):
    return lambda d, is_int: (fn, *[float(d.attr(n)) for n in names], *[0.0] * (3 - len(names)))


def _clamp_bw(d, is_int):
    lo, hi = d.attr("min"), d.attr("max")
    return _bw_window, -float("inf") if lo is None else float(lo), float("inf") if hi is None else float(hi), 1.0


def _approx(erf_fn, tanh_fn):
    """The body of a gelu row: its tanh or erf form by the row's ``approximate``."""
    return lambda d, is_int: (tanh_fn if d.attr("approximate") == "tanh" else erf_fn, 0.0, 0.0, 0.0)


_gelu, _gelu_bw = _approx(_gelu_erf, _gelu_tanh), _approx(_bw_gelu_erf, _bw_gelu_tanh)


BODIES = {
    "relu": _c(_relu), "gelu": _gelu, "silu": _c(_silu),
    "relu6": _c(_hardtanh, 0.0, 6.0), "leaky_relu": _a(_leaky, "negative_slope"),
    "elu": lambda d, i: (_elu, d.attr("alpha"), 1.0, 1.0), "selu": _c(_elu, _SELU_A, _SELU_S, 1.0),
    "celu": lambda d, i: (_elu, d.attr("alpha"), 1.0, 1.0 / d.attr("alpha")), "mish": _c(_mish),
    "softplus": _a(_softplus, "beta", "threshold"), "softsign": _c(_softsign), "tanhshrink": _c(_tanhshrink),
    "hardtanh": _a(_hardtanh, "min_val", "max_val"), "hardswish": _c(_hardswish, 1.0 / 6.0), "hardsigmoid": _c(_hardsigmoid, 1.0 / 6.0),
    "hardshrink": _a(_hardshrink, "lambd"), "softshrink": _a(_softshrink, "lambd"),
    "threshold": _a(_threshold, "threshold", "value"), "logsigmoid": _c(_logsigmoid),
    # backward helpers
    "exp_backward": _c(_bw_mul_y, 1.0), "exp2_backward": _c(_bw_mul_y, _LN2), "log_backward": _c(_bw_div_x, 1.0),
    "log2_backward": _c(_bw_div_x, _LN2), "log10_backward": _c(_bw_div_x, _LN10), "tanh_backward": _c(_bw_tanh),
    "expm1_backward": _c(_bw_expm1), "log1p_backward": _c(_bw_log1p), "sqrt_backward": _c(_bw_sqrt),
    "rsqrt_backward": _c(_bw_rsqrt), "reciprocal_backward": _c(_bw_recip), "sin_backward": _c(_bw_sin),
    "cos_backward": _c(_bw_cos), "tan_backward": _c(_bw_tan), "asin_backward": _c(_bw_asin, 1.0),
    "acos_backward": _c(_bw_asin, -1.0), "atan_backward": _c(_bw_atan), "sinh_backward": _c(_bw_sinh),
    "cosh_backward": _c(_bw_cosh), "asinh_backward": _c(_bw_asinh, 1.0), "acosh_backward": _c(_bw_asinh, -1.0),
    "atanh_backward": _c(_bw_atanh), "erf_backward": _c(_bw_erf, 1.1283791670955126),
    "erfc_backward": _c(_bw_erf, -1.1283791670955126), "erfinv_backward": _c(_bw_erfinv),
    "sigmoid_backward": _c(_bw_sigmoid), "lgamma_backward": _c(_bw_lgamma),
    "digamma_backward": _c(_bw_digamma), "i0_backward": _c(_bw_i0),
    "sinc_backward": _c(_bw_sinc),
    "logit_backward": lambda d, i: (_bw_logit, -1.0 if d.attr("eps") is None else d.attr("eps"), 0.0, 0.0),
    "abs_backward": _c(_bw_abs), "square_backward": _c(_bw_square), "frac_backward": _c(_bw_ident),
    "nan_to_num_backward": _c(_bw_finite), "pow_scalar_backward": _a(_bw_pow_scalar, "exponent"),
    "clamp_backward": _clamp_bw, "relu_backward": _c(_bw_relu), "gelu_backward": _gelu_bw,
    "silu_backward": _c(_bw_silu), "relu6_backward": _c(_bw_window, 0.0, 6.0, 0.0),
    "leaky_relu_backward": _a(_bw_leaky, "negative_slope"),
    "elu_backward": lambda d, i: (_bw_elu, d.attr("alpha"), 1.0, 1.0), "selu_backward": _c(_bw_elu, _SELU_A, _SELU_S, 1.0),
    "celu_backward": lambda d, i: (_bw_elu, d.attr("alpha"), 1.0, 1.0 / d.attr("alpha")),
    "mish_backward": _c(_bw_mish), "softplus_backward": _a(_bw_softplus, "beta", "threshold"),
    "softsign_backward": _c(_bw_softsign), "tanhshrink_backward": _c(_bw_tanhshrink),
    "hardtanh_backward": lambda d, i: (_bw_window, d.attr("min_val"), d.attr("max_val"), 0.0),
    "hardswish_backward": _c(_bw_hardswish), "hardsigmoid_backward": _c(_bw_hardsigmoid),
    "hardshrink_backward": _a(_bw_shrink, "lambd"), "softshrink_backward": _a(_bw_shrink, "lambd"),
    "threshold_backward": _a(_bw_threshold, "threshold"), "logsigmoid_backward": _c(_bw_logsigmoid),
    "div_backward_b": _c(_bw_div_b),
    "minmax_backward": lambda d, i: (_bw_minmax, float(("max", "min", "fmax", "fmin").index(d.attr("mode"))), 0.0, 0.0),
    "pow_backward_a": _c(_bw_pow_a), "pow_backward_b": _c(_bw_pow_b),
    "where_backward": lambda d, i: (_bw_where, float(d.attr("branch")), 0.0, 0.0),
    "silu_mul": _c(_silu_mul), "silu_mul_backward": _c(_bw_silu_mul),
    "gelu_mul": _approx(_gelu_erf_mul, _gelu_tanh_mul), "gelu_mul_backward": _approx(_bw_gelu_erf_mul, _bw_gelu_tanh_mul),
}
