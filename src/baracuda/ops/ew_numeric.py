"""Elementwise rows, second table: the rest of torch's pointwise surface (sgn, isposinf/isneginf, true_divide,
float_power, nextafter, ldexp, heaviside, gcd/lcm, isclose, clamp_min/clamp_max with scalar or tensor bounds,
lerp with a tensor weight) and the seed's ternary ``fma``.

Rows only (the mechanism is ``elementwise.py``).  Where torch refuses mixed dtypes (heaviside, isclose, lerp)
the row says ``same_dtype`` and a mixed call raises ``DTypeMismatchError`` like torch's RuntimeError.
"""
from __future__ import annotations

import math

from .._core.dtypes import DType
from .._core.errors import DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import Attr, ErrorCase
from .elementwise import (ALL, CPLX, FLOAT, INT, NUM, EwDef, _EXTRA_ERRORS, add_ew_ops, cj, dropin_ew, ew_samples,
                          reduce_grad, tp)

_LN2 = math.log(2.0)


def _r(ctx, d, i, g):
    return reduce_grad(ctx, g, d.inputs[i].shape)


def _as(ctx, x, dt):
    """Cast a gradient to its input's dtype (float_power computes in f64 whatever the inputs are)."""
    return x if ctx.spec_of(x).dtype == dt else ctx.op("to_dtype", x, dtype=dt)


# -- backward rules ----------------------------------------------------------------------------------
def _g_true_divide(ctx, d, grads, s):
    g = grads[0]
    return (_r(ctx, d, 0, ctx.op("div", g, cj(ctx, s["b"]))),
            _r(ctx, d, 1, ctx.op("div_backward_b", g, s["a"], s["b"])))


def _g_nextafter(ctx, d, grads, s):
    # torch: the step is the identity in a where a != b (at a == b the result is b: zero), constant in b
    g = grads[0]
    return (_r(ctx, d, 0, ctx.op("where_backward", g, ctx.op("ne", s["a"], s["b"]), branch=1)),
            _r(ctx, d, 1, ctx.op("mul_scalar", g, scalar=0.0)))


def _g_float_power(ctx, d, grads, s):
    # torch: both operands go to f64, pow's gradient is taken there and cast back to each input's dtype
    g, f64 = grads[0], DType.f64
    a, b = _as(ctx, s["a"], f64), _as(ctx, s["b"], f64)
    da = _as(ctx, _r(ctx, d, 0, ctx.op("pow_backward_a", g, a, b)), d.inputs[0].dtype) \
        if d.inputs[0].dtype.is_floating else None
    db = _as(ctx, _r(ctx, d, 1, ctx.op("pow_backward_b", g, a, b)), d.inputs[1].dtype) \
        if d.inputs[1].dtype.is_floating else None
    return da, db


def _g_ldexp(ctx, d, grads, s):   # y = a * 2^b: dy/da = 2^b, dy/db = y * ln 2
    g = grads[0]
    da = ctx.op("ldexp", g, s["b"]) if d.inputs[0].dtype.is_floating else None
    db = ctx.op("mul_scalar", ctx.op("mul", g, s["out"]), scalar=_LN2) if d.inputs[1].dtype.is_floating else None
    return (None if da is None else _r(ctx, d, 0, da)), (None if db is None else _r(ctx, d, 1, db))


def _g_clamp_bound(keep, take):
    """clamp_min: x keeps the gradient where x >= min, the bound takes it where x < min (clamp_max: <=, >), as
    torch: at a NaN (in x or the bound) both comparisons are false and neither gets a gradient."""
    def rule(ctx, d, grads, s):
        g, n = grads[0], ctx.needs
        return (_r(ctx, d, 0, ctx.op("where_backward", g, ctx.op(keep, s["a"], s["b"]), branch=1)) if n[0] else None,
                _r(ctx, d, 1, ctx.op("where_backward", g, ctx.op(take, s["a"], s["b"]), branch=1)) if n[1] else None)
    return rule


def _g_fma(ctx, d, grads, s):
    g = grads[0]
    return _r(ctx, d, 0, ctx.op("mul", g, s["b"])), _r(ctx, d, 1, ctx.op("mul", g, s["a"])), _r(ctx, d, 2, g)


def _g_lerp_tensor(ctx, d, grads, s):   # y = a + w (b - a)
    g, w = grads[0], s["c"]
    gw = ctx.op("mul", g, cj(ctx, w))
    return (_r(ctx, d, 0, ctx.op("sub", g, gw)), _r(ctx, d, 1, gw),
            _r(ctx, d, 2, ctx.op("mul", g, cj(ctx, ctx.op("sub", s["b"], s["a"])))))


# -- attribute / dtype rules ---------------------------------------------------------------------------
def _tol_attr(name, default):
    return Attr(name, "float", default, ge=0, expected="a real number >= 0")


def _f64_out(op, inputs, attrs, r):
    return DType.f64


# -- peers -------------------------------------------------------------------------------------------
def _peer_fma(a, b, c):
    """torch has no fma: a * b + c in float64 (one rounding of the exact product short of a true fma, far
    below every tolerance), returned in the promoted dtype."""
    import torch

    dt = torch.result_type(a, b)
    dt = torch.promote_types(dt, c.dtype)
    if not dt.is_floating_point:
        return a.to(dt) * b.to(dt) + c.to(dt)
    return (a.double() * b.double() + c.double()).to(dt)


def _peer_isclose(a, b, rtol, atol, equal_nan):
    import torch

    a, b = torch.broadcast_tensors(a, b)   # torch 2.11's isclose does not broadcast its first argument
    return torch.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)


def _di(name, *args, attrs=()):
    return dropin_ew(name, *(args or ("input", "other")), attr_names=attrs, unsupported=("out",))


_TERN = (((3, 5), (3, 5), (3, 5)), ((0, 2), (0, 2), (0, 2)), ((2, 3, 4), (3, 4), (4,)), ((4, 1), (1, 3), ()))
add_ew_ops([
    EwDef("sgn", 1, tp("sgn"), "torch.sgn", "jax.numpy.sign", dtypes=ALL + CPLX, bw="x",
          dropin=_di("sgn", "input"),
          doc="sign of real numbers; z / |z| for complex z (0 at 0); gradient (g - Re(conj(g) sgn) sgn) / |z|",
          samples=ew_samples("wide", avoid=(0.0,))),
    *[EwDef(n, 1, tp(n), f"torch.{n}", f"jax.numpy.{n}", out="bool", dtypes=ALL, dropin=_di(n, "input"))
      for n in ("isposinf", "isneginf")],
    EwDef("true_divide", 2, tp("true_divide"), "torch.true_divide", "jax.numpy.true_divide", _g_true_divide,
          out="float", dtypes=ALL + CPLX, dropin=_di("true_divide"), samples=ew_samples(("wide", "nonzero"))),
    EwDef("float_power", 2, tp("float_power"), "torch.float_power", "jax.numpy.float_power", _g_float_power,
          dtype_rule=_f64_out, dtypes=ALL,
          dropin=dropin_ew("float_power", "input", "exponent", unsupported=("out",)),
          doc="computes in float64 whatever the operands' dtypes (torch)", samples=ew_samples(("positive", "expo"))),
    EwDef("nextafter", 2, tp("nextafter"), "torch.nextafter", "jax.numpy.nextafter", _g_nextafter,
          dtypes=FLOAT,
          dropin=_di("nextafter"), doc="steps one ulp of the result dtype (bf16/f16 step in their own format)",
          samples=ew_samples("any")),
    EwDef("ldexp", 2, tp("ldexp"), "torch.ldexp", "jax.numpy.ldexp", _g_ldexp, saves=("inputs", "outputs"),
          out="float", dtypes=ALL, dropin=_di("ldexp"), samples=ew_samples(("any", "wide")),
          doc="a * 2^b; bool operands are 0/1 (torch's CUDA kernel and its decomposition; its CPU kernel has no "
              "bool exponent for a floating mantissa)"),
    EwDef("heaviside", 2, tp("heaviside"), "torch.heaviside", "jax.numpy.heaviside", out="same", dtypes=ALL,
          same_dtype=True, dropin=dropin_ew("heaviside", "input", "values", unsupported=("out",)),
          samples=ew_samples(("grid", "any"))),
    *[EwDef(n, 2, tp(n), f"torch.{n}", f"jax.numpy.{n}", dtypes=INT, dropin=_di(n), samples=ew_samples("wide"))
      for n in ("gcd", "lcm")],
    EwDef("isclose", 2, _peer_isclose, "torch.isclose", "jax.numpy.isclose", out="bool", dtypes=ALL + CPLX,
          same_dtype=True,
          attrs=(_tol_attr("rtol", 1e-05), _tol_attr("atol", 1e-08), Attr("equal_nan", "bool", False)),
          dropin=_di("isclose", attrs=("rtol", "atol", "equal_nan")),
          samples=ew_samples("grid", attrs=({}, {"rtol": 0.25, "atol": 0.5, "equal_nan": True}))),
    EwDef("clamp_min", 2, tp("clamp_min"), "torch.clamp_min", "jax.numpy.maximum", _g_clamp_bound("ge", "lt"), dtypes=ALL,
          dropin=dropin_ew("clamp_min", "input", "min", unsupported=("out",)),
          doc="a Python-number bound is a 0-d tensor of torch's weak-scalar dtype", samples=ew_samples("wide")),
    EwDef("clamp_max", 2, tp("clamp_max"), "torch.clamp_max", "jax.numpy.minimum", _g_clamp_bound("le", "gt"), dtypes=ALL,
          dropin=dropin_ew("clamp_max", "input", "max", unsupported=("out",)), samples=ew_samples("wide")),
    EwDef("fma", 3, _peer_fma, None, None, _g_fma, dtypes=NUM,
          doc="a * b + c with one rounding on float types (the seed's ternary Fma); integers wrap",
          samples=ew_samples("wide", shapes=_TERN)),
    EwDef("lerp_tensor", 3, lambda a, b, c: __import__("torch").lerp(a, b, c), "torch.lerp (tensor weight)",
          None, _g_lerp_tensor, dtypes=FLOAT + CPLX, same_dtype=True,
          samples=ew_samples(("any", "any", "weight"), shapes=_TERN)),
])

_EXTRA_ERRORS.update({
    "heaviside": [ErrorCase((((3,), "f32"), ((3,), "f64")), {}, DTypeMismatchError,
                            r"heaviside: argument 'b': expected dtype f32", "mixed-dtypes")],
    "isclose": [ErrorCase((((3,), "f32"), ((3,), "f32")), {"rtol": -1.0}, InvalidProblemError,
                          r"isclose: argument 'rtol': expected a real number >= 0", "neg-rtol"),
                ErrorCase((((3,), "i32"), ((3,), "i64")), {}, DTypeMismatchError,
                          r"isclose: argument 'b': expected dtype i32", "mixed-dtypes")],
    "lerp_tensor": [ErrorCase((((3,), "f32"), ((3,), "f32"), ((3,), "f64")), {}, DTypeMismatchError,
                              r"lerp_tensor: argument 'c': expected dtype f32", "mixed-dtypes")],
    "gcd": [ErrorCase((((3,), "i32"), ((3,), "bool")), {}, UnsupportedError, r"gcd: argument 'b' has dtype bool",
                      "bool")],
})
