"""Elementwise rows: unary math (torch.exp ... torch.nan_to_num), with generated ``<op>_backward`` helpers.

``bw="x"`` rows save the input, ``bw="out"`` rows the output (cheaper where the derivative is a function of
the output: exp, tanh, sigmoid, sqrt, ...).  Float-only functions take integer/bool inputs and return f32
(``out="float"``, as torch); rounding functions keep integer dtypes unchanged (``out="same"``).
"""
from __future__ import annotations

import math

from .._core.dtypes import DType
from .._core.spec import Attr
from .elementwise import ALL, BOOL, CPLX, FLOAT, INT, NUM, EwDef, add_ew_ops, dropin_ew, ew_samples, tp, zero_grad


def _scale_rule(k):
    return lambda ctx, d, grads, s: (ctx.op("mul_scalar", grads[0], scalar=k),)


def _square_dtype(op, inputs, attrs, r):
    """torch.square is pow(x, 2): a bool tensor with the integer exponent promotes to i64 (square(bool) is i64)."""
    return DType.i64 if r == DType.bool else r


_N2N = tuple(Attr(k, "float", d, optional=True) for k, d in (("nan", 0.0), ("posinf", None), ("neginf", None)))


def _di(name, attrs=()):
    return dropin_ew(name, "input", attr_names=attrs, unsupported=("out",))


# more torch names with the same signature (torch.arccos for torch.acos, torch.special.expit for sigmoid, ...)
_ALIASES = {
    "asin": ("torch.arcsin",), "acos": ("torch.arccos",), "atan": ("torch.arctan",), "asinh": ("torch.arcsinh",),
    "acosh": ("torch.arccosh",), "atanh": ("torch.arctanh",), "sigmoid": ("torch.special.expit",),
    "erf": ("torch.special.erf",), "erfc": ("torch.special.erfc",), "erfinv": ("torch.special.erfinv",),
    "exp2": ("torch.special.exp2",), "expm1": ("torch.special.expm1",), "log1p": ("torch.special.log1p",),
    "i0": ("torch.special.i0",), "sinc": ("torch.special.sinc",), "lgamma": ("torch.special.gammaln",),
    "digamma": ("torch.special.digamma", "torch.special.psi"), "logit": ("torch.special.logit",),
    "abs": ("torch.absolute",), "trunc": ("torch.fix",),
}


# the math functions torch also defines for complex64/128 (holomorphic: their gradient is g * conj(f'(z)))
_COMPLEX = frozenset({"exp", "log", "tanh", "exp2", "expm1", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal",
                      "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh",
                      "sigmoid", "abs", "square", "isnan", "isinf", "isfinite"})


def _dt(name, dtypes):
    return dtypes + CPLX if name in _COMPLEX else dtypes


def _f(name, domain="any", bw="x", jax=None, torch_name=None, dtypes=ALL, **kw):
    """A float-valued math function: integer/bool inputs give f32 (torch)."""
    return EwDef(name, 1, tp(name), torch_name or f"torch.{name}", jax or f"jax.numpy.{name}",
                 bw=bw, out="float", dtypes=_dt(name, dtypes), dropin=_di(name), aliases=_ALIASES.get(name, ()), **kw,
                 samples=ew_samples(domain))


add_ew_ops([
    _f("exp", bw="out", jax="jax.lax.exp"),
    _f("log", "positive", jax="jax.lax.log"),
    _f("tanh", bw="out", jax="jax.lax.tanh"),
    _f("exp2", bw="out"),
    _f("expm1", bw="out"),
    _f("log2", "positive"),
    _f("log10", "positive"),
    _f("log1p", "positive"),
    _f("sqrt", "positive", bw="out"),
    _f("rsqrt", "positive", bw="out", jax="jax.lax.rsqrt"),
    _f("reciprocal", "nonzero", bw="out", jax="jax.numpy.reciprocal"),
    _f("sin"), _f("cos"), _f("tan", "unit"), _f("asin", "unit", jax="jax.numpy.arcsin"),
    _f("acos", "unit", jax="jax.numpy.arccos"), _f("atan", jax="jax.numpy.arctan"),
    _f("sinh"), _f("cosh"), _f("asinh", jax="jax.numpy.arcsinh"), _f("acosh", "ge1", jax="jax.numpy.arccosh"),
    _f("atanh", "unit", jax="jax.numpy.arctanh"),
    _f("erf", jax="jax.lax.erf"), _f("erfc", jax="jax.lax.erfc"),
    _f("erfinv", "unit", bw="out", jax="jax.lax.erf_inv"),
    _f("sigmoid", bw="out", jax="jax.nn.sigmoid"),
    _f("lgamma", "positive", jax="jax.lax.lgamma"),
    _f("digamma", "positive", jax="jax.lax.digamma"),   # digamma_backward: g * polygamma(1, x)
    _f("i0", jax="jax.numpy.i0"),
    _f("sinc", "nonzero", jax="jax.numpy.sinc"),
    EwDef("logit", 1, tp("logit"), "torch.logit", "jax.scipy.special.logit", bw="x", out="float",
          dtypes=ALL, attrs=(Attr("eps", "float", None, optional=True, ge=0, le=0.5,
                                    expected="None or a number in [0, 0.5]"),),
          dropin=_di("logit", ("eps",)), aliases=_ALIASES["logit"],
          samples=ew_samples("prob", avoid=(0.2, 0.8), attrs=({}, {"eps": 0.2}))),
    EwDef("deg2rad", 1, tp("deg2rad"), "torch.deg2rad", "jax.numpy.deg2rad", _scale_rule(math.pi / 180.0), saves=(),
          out="float", dtypes=ALL, dropin=_di("deg2rad")),
    EwDef("rad2deg", 1, tp("rad2deg"), "torch.rad2deg", "jax.numpy.rad2deg", _scale_rule(180.0 / math.pi), saves=(),
          out="float", dtypes=ALL, dropin=_di("rad2deg")),
    # integer-preserving
    # bool: torch's CUDA kernel (and its CUDA OpInfo) takes it, abs(bool) is the bool itself; torch's CPU kernel
    # (2.13) refuses ("abs_cpu" not implemented for 'Bool'): accepted on every device, as on the GPU
    EwDef("abs", 1, tp("abs"), "torch.abs", "jax.lax.abs", bw="x", dtypes=_dt("abs", ALL),
          out="real", dropin=_di("abs"), aliases=_ALIASES["abs"], doc="|z| of complex z is real (hypot: no overflow)",
          samples=ew_samples("wide", avoid=(0.0,))),
    # piecewise constant: torch's gradient is an exact zero (zero_grad: a fill, nothing saved)
    EwDef("sign", 1, tp("sign"), "torch.sign", "jax.lax.sign", zero_grad, saves=(), dtypes=ALL, dropin=_di("sign"),
          samples=ew_samples("wide")),
    EwDef("square", 1, tp("square"), "torch.square", "jax.numpy.square", bw="x", dtypes=_dt("square", ALL),
          dtype_rule=_square_dtype,
          dropin=_di("square"), samples=ew_samples("wide")),
    *[EwDef(n, 1, tp(n), f"torch.{n}", f"jax.numpy.{n}", zero_grad, saves=(), dtypes=NUM, dropin=_di(n),
            aliases=_ALIASES.get(n, ()), samples=ew_samples("nonint")) for n in ("floor", "ceil", "trunc")],
    EwDef("round", 1, tp("round"), "torch.round (half to even)", "jax.numpy.round", zero_grad, saves=(), dtypes=NUM,
          dropin=_di("round"), samples=ew_samples("nonint")),
    EwDef("frac", 1, tp("frac"), "torch.frac", None, bw="x", dtypes=FLOAT, dropin=_di("frac"),
          samples=ew_samples("nonint")),
    EwDef("nan_to_num", 1, tp("nan_to_num"), "torch.nan_to_num", "jax.numpy.nan_to_num", bw="x", dtypes=NUM + BOOL,
          attrs=_N2N,
          dropin=_di("nan_to_num", ("nan", "posinf", "neginf")),
          samples=ew_samples(attrs=({}, {"nan": 1.5, "posinf": 7.0, "neginf": -7.0}))),
    # predicates (bool results) and bitwise
    *[EwDef(n, 1, tp(n), f"torch.{n}", f"jax.numpy.{n}", out="bool", dtypes=_dt(n, ALL), dropin=_di(n))
      for n in ("isnan", "isinf", "isfinite", "signbit", "logical_not")],
    EwDef("bitwise_not", 1, tp("bitwise_not"), "torch.bitwise_not", "jax.numpy.invert",
          dtypes=INT + BOOL, dropin=_di("bitwise_not"), samples=ew_samples("wide")),
])
