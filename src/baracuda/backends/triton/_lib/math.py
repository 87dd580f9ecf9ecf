"""Scalar math shared by the Triton kernels.

On the GPU, transcendental functions go to libdevice (accurate to ~1-2 ulp in f32, correctly rounded
where CUDA's math library is).  Triton's interpreter has no libdevice, so under TRITON_INTERPRET=1 the
same names bind to host versions computed in float64 with NumPy on the interpreter's arrays (accurate,
slow; the interpreter is for correctness of everything around the math: indexing, broadcasting, dtype
rules, masks).  The GPU suite checks the libdevice path.  ``digamma`` and ``trigamma`` have no libdevice entry:
they are written here once in portable Triton (recurrence + asymptotic series) and run on both.
"""
from __future__ import annotations

import math

import numpy as np
import triton
import triton.language as tl

from ...._core.device import triton_interpreting

# name -> NumPy float64 function (the interpreter's binding); on the GPU the libdevice function of that name
_HOST = {
    "exp": np.exp, "log": np.log, "tanh": np.tanh, "exp2": np.exp2, "expm1": np.expm1, "log2": np.log2,
    "log10": np.log10, "log1p": np.log1p, "sqrt": np.sqrt, "rsqrt": lambda x: 1.0 / np.sqrt(x), "sin": np.sin,
    "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh,
    "cosh": np.cosh, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh, "erfc": None, "erfinv": None,
    "lgamma": None, "cyl_bessel_i0": np.i0, "cyl_bessel_i1": None, "rint": np.rint, "trunc": np.trunc,
    "atan2": np.arctan2, "hypot": np.hypot, "copysign": np.copysign, "pow": np.power, "sinpi": None,
    "cospi": None, "erf": None, "fmod": np.fmod,
    # the hardware approximations (MUFU; ~2^-21 absolute on [-pi, pi] for sin / cos): the interpreter's are exact
    "fast_sinf": np.sin, "fast_cosf": np.cos,
    # the interpreter's fma: exact product of two f32 in f64, then one f64 rounding before the f32 one
    "fma": lambda a, b, c: a * b + c,
}


def _host_fill():
    from ...reference.elementwise import _erfinv, _i1, _lgamma

    erf = np.vectorize(math.erf, otypes=[np.float64])
    erfc = np.vectorize(math.erfc, otypes=[np.float64])
    _HOST.update({"erf": erf, "erfc": erfc, "erfinv": _erfinv, "lgamma": _lgamma, "cyl_bessel_i1": _i1,
                  "sinpi": _sinpi, "cospi": _cospi})


def _half_turns(x):
    """x = n + r with n the nearest integer and |r| <= 1/2 (exact); (-1)^n."""
    n = np.rint(x)
    return x - n, np.where(np.fmod(n, 2.0) == 0, 1.0, -1.0)


def _sinpi(x):
    """sin(pi x) as libdevice's: reduced exactly to |r| <= 1/2 (no rounding of pi x), +-0 at the integers (the poles
    of digamma / trigamma)."""
    r, sign = _half_turns(x)
    return np.where(x == np.floor(x), x * 0.0, sign * np.sin(np.pi * r))


def _cospi(x):
    r, sign = _half_turns(x)
    return sign * np.cos(np.pi * r)


def _host(fn):
    """Wrap a float64 NumPy function so the interpreter can call it on its tensors."""
    from triton.runtime.interpreter import TensorHandle

    def f(*xs):
        first = next(x for x in xs if isinstance(x, tl.tensor))
        arrs = [np.asarray(x.handle.data if isinstance(x, tl.tensor) else x, np.float64) for x in xs]
        with np.errstate(all="ignore"):
            r = np.asarray(fn(*arrs), np.float64)
        dt = first.handle.data.dtype
        return tl.tensor(TensorHandle(np.broadcast_to(r, first.handle.data.shape).astype(dt), first.dtype.scalar),
                         first.type)
    return f


if triton_interpreting():
    _host_fill()
    _F = {name: _host(fn) for name, fn in _HOST.items()}
else:
    from triton.language.extra import libdevice

    _F = {name: getattr(libdevice, name) for name in _HOST}

exp, log, tanh, exp2, expm1, log2, log10, log1p = (_F[n] for n in ("exp", "log", "tanh", "exp2", "expm1", "log2",
                                                                    "log10", "log1p"))
sqrt, rsqrt, sin, cos, tan, asin, acos, atan = (_F[n] for n in ("sqrt", "rsqrt", "sin", "cos", "tan", "asin", "acos",
                                                                 "atan"))
sinh, cosh, asinh, acosh, atanh, erf, erfc, erfinv = (_F[n] for n in ("sinh", "cosh", "asinh", "acosh", "atanh", "erf",
                                                                       "erfc", "erfinv"))
lgamma, i0, i1, rint, trunc, atan2, hypot, copysign = (_F[n] for n in ("lgamma", "cyl_bessel_i0", "cyl_bessel_i1",
                                                                        "rint", "trunc", "atan2", "hypot", "copysign"))
pow, sinpi, cospi, fmod, fma = _F["pow"], _F["sinpi"], _F["cospi"], _F["fmod"], _F["fma"]
fast_sin, fast_cos = _F["fast_sinf"], _F["fast_cosf"]


@triton.jit
def sigmoid(x):
    return 1.0 / (1.0 + exp(-x))


@triton.jit
def softplus(x):
    """log(1 + e^x) without overflow: max(x, 0) + log1p(e^-|x|)."""
    return tl.maximum(x, 0.0) + log1p(exp(-tl.abs(x)))


@triton.jit
def digamma(x):
    """psi(x): reflection below 0.5, recurrence up to >= 8, then the asymptotic series to B_14 (relative error
    < 2e-15).  torch's special values: psi(+-0) = -+inf (pi cospi / sinpi is +-inf there), NaN at the negative
    integers (the poles) and at -inf."""
    refl = x < 0.5
    y = tl.where(refl, 1.0 - x, x)
    acc = tl.zeros_like(y)
    for _ in tl.static_range(8):
        small = y < 8.0
        acc = acc - tl.where(small, 1.0 / y, 0.0)
        y = tl.where(small, y + 1.0, y)
    r = 1.0 / (y * y)
    s = r * (1.0 / 12 - r * (1.0 / 120 - r * (1.0 / 252 - r * (1.0 / 240 - r * (1.0 / 132 - r * (
        691.0 / 32760 - r * (1.0 / 12)))))))
    psi = log(y) - 0.5 / y - s + acc
    psi = tl.where(refl, psi - 3.141592653589793 * cospi(x) / sinpi(x), psi)
    return tl.where((x < 0) & (x == tl.floor(x)), float("nan"), psi)


@triton.jit
def trigamma(x):
    """psi'(x) = polygamma(1, x): reflection below 0.5 (pi^2 / sinpi(x)^2 - psi'(1 - x)), recurrence up to >= 8,
    then the asymptotic series 1/y + 1/(2y^2) + sum B_2k / y^(2k+1) to B_14 (relative error < 3e-14).  The poles
    (0 and the negative integers) give +inf: sinpi is exactly 0 there."""
    refl = x < 0.5
    y = tl.where(refl, 1.0 - x, x)
    acc = tl.zeros_like(y)
    for _ in tl.static_range(8):
        small = y < 8.0
        acc = acc + tl.where(small, 1.0 / (y * y), 0.0)
        y = tl.where(small, y + 1.0, y)
    r = 1.0 / (y * y)
    b = 1.0 / 6 - r * (1.0 / 30 - r * (1.0 / 42 - r * (1.0 / 30 - r * (5.0 / 66 - r * (691.0 / 2730 - r * (7.0 / 6))))))
    t = acc + (1.0 + (0.5 + b / y) / y) / y
    sp = sinpi(x)
    return tl.where(refl, 9.869604401089358 / (sp * sp) - t, t)


@triton.jit
def exp_acc(x, F64: tl.constexpr):
    """exp for reductions that accumulate in f32 or f64: f32 through tl.exp (ex2.approx, rel. error ~1e-7, far
    below the f32 tolerance), f64 through the accurate ``exp``."""
    if F64:
        return exp(x)
    else:
        return tl.exp(x)


@triton.jit
def log_acc(x, F64: tl.constexpr):
    if F64:
        return log(x)
    else:
        return tl.log(x)
