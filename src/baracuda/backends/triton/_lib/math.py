"""Scalar math shared by the Triton kernels.

On the GPU, transcendental functions go to libdevice (accurate to ~1-2 ulp in f32, correctly rounded
where CUDA's math library is).  Triton's interpreter has no libdevice, so under TRITON_INTERPRET=1 the
same names bind to host versions computed in float64 with NumPy on the interpreter's arrays (accurate,
slow; the interpreter is for correctness of everything around the math: indexing, broadcasting, dtype
rules, masks).  The GPU suite checks the libdevice path.  ``digamma`` has no libdevice entry: it is
written here once in portable Triton (recurrence + asymptotic series) and runs on both.
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
    # the interpreter's fma: exact product of two f32 in f64, then one f64 rounding before the f32 one
    "fma": lambda a, b, c: a * b + c,
}


def _host_fill():
    from ...reference.elementwise import _erfinv, _i1, _lgamma

    erf = np.vectorize(math.erf, otypes=[np.float64])
    erfc = np.vectorize(math.erfc, otypes=[np.float64])
    _HOST.update({"erf": erf, "erfc": erfc, "erfinv": _erfinv, "lgamma": _lgamma, "cyl_bessel_i1": _i1,
                  "sinpi": lambda x: np.sin(np.pi * x), "cospi": lambda x: np.cos(np.pi * x)})


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


@triton.jit
def sigmoid(x):
    return 1.0 / (1.0 + exp(-x))


@triton.jit
def softplus(x):
    """log(1 + e^x) without overflow: max(x, 0) + log1p(e^-|x|)."""
    return tl.maximum(x, 0.0) + log1p(exp(-tl.abs(x)))


@triton.jit
def digamma(x):
    """psi(x): reflection below 0.5, recurrence up to >= 8, then the asymptotic series (error < 1e-12)."""
    refl = x < 0.5
    y = tl.where(refl, 1.0 - x, x)
    acc = tl.zeros_like(y)
    for _ in tl.static_range(8):
        small = y < 8.0
        acc = acc - tl.where(small, 1.0 / y, 0.0)
        y = tl.where(small, y + 1.0, y)
    r = 1.0 / (y * y)
    s = r * (1.0 / 12 - r * (1.0 / 120 - r * (1.0 / 252 - r * (1.0 / 240 - r * (1.0 / 132)))))
    psi = log(y) - 0.5 / y - s + acc
    return tl.where(refl, psi - 3.141592653589793 * cospi(x) / sinpi(x), psi)


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
