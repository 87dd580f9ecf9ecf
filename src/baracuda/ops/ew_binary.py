"""Elementwise rows: arithmetic, comparisons, logical/bitwise, binary math and the ternary ops.

Rows only (see ``elementwise.py`` for the mechanism).  Backward rules compose other baracuda ops through
``ctx``; ``ctx.reduce_to`` sums broadcast gradients back to the operand's shape.
"""
from __future__ import annotations

import numpy as np

from .._core.dtypes import DType
from .._core.errors import InvalidProblemError, UnsupportedError
from .._core.spec import Attr, ErrorCase
from .creation import to_scalar
from .elementwise import (ALL, BOOL, CPLX, FLOAT, INT, NUM, EwDef, _EXTRA_ERRORS, add_ew_ops, cj,
                          dropin_ew, ew_samples, reduce_grad, tp)

NUMC, ALLC, FLOATC = NUM + CPLX, ALL + CPLX, FLOAT + CPLX   # rows torch also defines for complex64/128


def _r(ctx, d, i, g):
    return reduce_grad(ctx, g, d.inputs[i].shape)


def _scaled(ctx, g, k):
    """g * conj(k) (torch's gradient of alpha * b): a complex alpha multiplies by a 0-d complex fill."""
    if k == 1:
        return g
    if isinstance(k, complex):
        return ctx.op("mul", g, ctx.op("full", shape=(), value=k.conjugate(), dtype=ctx.spec_of(g).dtype))
    return ctx.op("mul_scalar", g, scalar=float(k))


# -- backward rules ----------------------------------------------------------------------------------
# (ctx.needs[i] False: nobody wants input i's gradient -- a broadcast mask, a scalar, a frozen weight -- so its
# multiply and its sum back to the input's shape are not run)
def _g_add(ctx, d, grads, s):
    g, n = grads[0], ctx.needs
    return (_r(ctx, d, 0, g) if n[0] else None,
            _r(ctx, d, 1, _scaled(ctx, g, d.attr("alpha"))) if n[1] else None)


def _g_sub(ctx, d, grads, s):
    g, n = grads[0], ctx.needs
    return (_r(ctx, d, 0, g) if n[0] else None,
            _r(ctx, d, 1, _scaled(ctx, g, -d.attr("alpha"))) if n[1] else None)


def _g_mul(ctx, d, grads, s):
    g, n = grads[0], ctx.needs
    return (_r(ctx, d, 0, ctx.op("mul", g, cj(ctx, s["b"]))) if n[0] else None,
            _r(ctx, d, 1, ctx.op("mul", g, cj(ctx, s["a"]))) if n[1] else None)


def _g_div(ctx, d, grads, s):
    g = grads[0]
    if d.attr("rounding_mode") is not None:   # piecewise constant: zero gradient (as torch)
        z = ctx.op("mul_scalar", g, scalar=0.0)
        return _r(ctx, d, 0, z), _r(ctx, d, 1, z)
    n = ctx.needs
    return (_r(ctx, d, 0, ctx.op("div", g, cj(ctx, s["b"]))) if n[0] else None,
            _r(ctx, d, 1, ctx.op("div_backward_b", g, s["a"], s["b"])) if n[1] else None)


def _g_mul_scalar(ctx, d, grads, s):
    return (ctx.op("mul_scalar", grads[0], scalar=d.attr("scalar")),)


def _g_minmax(mode):
    def rule(ctx, d, grads, s):
        g = grads[0]
        return (_r(ctx, d, 0, ctx.op("minmax_backward", g, s["a"], s["b"], mode=mode)),
                _r(ctx, d, 1, ctx.op("minmax_backward", g, s["b"], s["a"], mode=mode)))
    return rule


def _g_clamp_tensor(ctx, d, grads, s):
    """torch's clamp backward with tensor bounds (y = min(max(x, lo), hi)): x gets g where lo <= x <= hi; lo gets
    g where x < lo and lo < hi; hi gets g where x > hi or hi < lo (so with lo > hi the result is hi and only hi has
    a gradient).  Every comparison is false at a NaN: no gradient there."""
    g, n, (x, lo, hi) = grads[0], ctx.needs, (s["a"], s["b"], s["c"])

    def masked(pred):
        return ctx.op("where_backward", g, pred, branch=1)
    return (_r(ctx, d, 0, masked(ctx.op("logical_and", ctx.op("ge", x, lo), ctx.op("le", x, hi)))) if n[0] else None,
            _r(ctx, d, 1, masked(ctx.op("logical_and", ctx.op("lt", x, lo), ctx.op("lt", lo, hi)))) if n[1] else None,
            _r(ctx, d, 2, masked(ctx.op("logical_or", ctx.op("gt", x, hi), ctx.op("lt", hi, lo)))) if n[2] else None)


def _g_mod(rounding):
    def rule(ctx, d, grads, s):   # a - b * q(a / b): da = g, db = -g * q
        g = grads[0]
        q = ctx.op("div", s["a"], s["b"], rounding_mode=rounding)
        return _r(ctx, d, 0, g), _r(ctx, d, 1, ctx.op("neg", ctx.op("mul", g, q)))
    return rule


def _g_pow(ctx, d, grads, s):
    # an integer operand (torch.pow(2, x): a weak-scalar base; x ** int_tensor) takes no gradient but enters the
    # other's formula in the result dtype
    g, n, out = grads[0], ctx.needs, d.outputs[0].dtype
    a, b = (v if d.inputs[i].dtype == out else ctx.op("to_dtype", v, dtype=out)
            for i, v in enumerate((s["a"], s["b"])))
    return (_r(ctx, d, 0, ctx.op("pow_backward_a", g, a, b)) if n[0] else None,
            _r(ctx, d, 1, ctx.op("pow_backward_b", g, a, b)) if n[1] else None)


def _g_atan2(ctx, d, grads, s):   # d/da = b / (a^2 + b^2), d/db = -a / (a^2 + b^2)
    g, a, b = grads[0], s["a"], s["b"]
    den = ctx.op("hypot", a, b)
    den = ctx.op("mul", den, den)
    w = ctx.op("div", g, den)
    return _r(ctx, d, 0, ctx.op("mul", w, b)), _r(ctx, d, 1, ctx.op("neg", ctx.op("mul", w, a)))


def _g_hypot(ctx, d, grads, s):
    w = ctx.op("div", grads[0], s["out"])
    return _r(ctx, d, 0, ctx.op("mul", w, s["a"])), _r(ctx, d, 1, ctx.op("mul", w, s["b"]))


def _g_copysign(ctx, d, grads, s):
    """a: |a| keeps its slope times the sign flip (zero where a == 0); b: torch's exact zero (zeros_like(b), not
    None: a b that requires grad gets a zero tensor)."""
    n = ctx.needs
    ga = None
    if n[0]:
        flip = ctx.op("mul", ctx.op("sign", s["a"]), ctx.op("sign", s["out"]))
        ga = _r(ctx, d, 0, ctx.op("mul", grads[0], flip))
    return ga, (ctx.op("zeros_like", s["b"]) if n[1] else None)


def _g_logaddexp(base2):
    e = "exp2" if base2 else "exp"

    def rule(ctx, d, grads, s):
        g, out = grads[0], s["out"]
        return (_r(ctx, d, 0, ctx.op("mul", g, ctx.op(e, ctx.op("sub", s["a"], out)))),
                _r(ctx, d, 1, ctx.op("mul", g, ctx.op(e, ctx.op("sub", s["b"], out)))))
    return rule


def _g_xlogy(ctx, d, grads, s):
    g = grads[0]
    return (_r(ctx, d, 0, ctx.op("mul", g, ctx.op("log", s["b"]))),
            _r(ctx, d, 1, ctx.op("div", ctx.op("mul", g, s["a"]), s["b"])))


def _g_lerp(ctx, d, grads, s):
    w = d.attr("weight")
    return _r(ctx, d, 0, _scaled(ctx, grads[0], 1.0 - w)), _r(ctx, d, 1, _scaled(ctx, grads[0], w))


def _g_where(ctx, d, grads, s):
    g = grads[0]
    return (None, _r(ctx, d, 1, ctx.op("where_backward", g, s["a"], branch=1)),
            _r(ctx, d, 2, ctx.op("where_backward", g, s["a"], branch=2)))


def _g_addcmul(ctx, d, grads, s):
    g, v = grads[0], d.attr("value")
    return (_r(ctx, d, 0, g), _r(ctx, d, 1, _scaled(ctx, ctx.op("mul", g, cj(ctx, s["c"])), v)),
            _r(ctx, d, 2, _scaled(ctx, ctx.op("mul", g, cj(ctx, s["b"])), v)))


def _g_addcdiv(ctx, d, grads, s):
    g, v = grads[0], d.attr("value")
    return (_r(ctx, d, 0, g), _r(ctx, d, 1, _scaled(ctx, ctx.op("div", g, cj(ctx, s["c"])), v)),
            _r(ctx, d, 2, _scaled(ctx, ctx.op("div_backward_b", g, s["b"], s["c"]), v)))


# -- attribute / dtype rules ---------------------------------------------------------------------------
def _alpha_dtype(op, inputs, attrs, r):
    """torch's alpha_check, in its order: a bool alpha is for bool results only; integer and bool results need an
    integral alpha (an int or a bool: 2.0 is refused, as torch); a complex alpha is for complex results only."""
    al = attrs["alpha"]
    if isinstance(al, bool) and r != DType.bool:
        raise InvalidProblemError(op, "alpha", f"a number (a bool alpha is for bool results only; the result is {r})",
                                  al)
    if (r.is_integer or r == DType.bool) and not isinstance(al, int):
        raise InvalidProblemError(op, "alpha", f"an int or a bool for integral input tensors (alpha must not be a "
                                               f"floating point number; the result is {r})", al)
    if isinstance(al, complex) and not r.is_complex:
        raise InvalidProblemError(op, "alpha", f"a real number for non-complex input tensors (alpha must not be a "
                                               f"complex number; the result is {r})", al)
    return r


def _number_alpha(op, v, inputs, attrs):
    """alpha: a bool, an int, a float or a complex, kept as that Python type (torch's rules depend on it: an
    integral alpha for integer results, a complex one for complex results); NumPy scalars as their Python type."""
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v)
    if isinstance(v, (complex, np.complexfloating)):
        return complex(v)
    raise InvalidProblemError(op, "alpha", "a number (bool, int, float or complex)", repr(v))


_ALPHA = Attr("alpha", "any", 1, normalize=_number_alpha)
_ROUNDING = Attr("rounding_mode", "str", None, optional=True, choices=("trunc", "floor"),
                 expected="None, 'trunc' or 'floor'")


def _bound(name):
    return Attr(name, "number", None, optional=True)


def _div_dtype(op, inputs, attrs, r):
    if (r.is_complex or r == DType.bool) and attrs["rounding_mode"] is not None:
        raise UnsupportedError(op, f"rounding_mode={attrs['rounding_mode']!r} is not defined for "
                               f"{'complex' if r.is_complex else 'bool'} operands ({r}); torch refuses it too")
    return r if attrs["rounding_mode"] is not None or r.is_floating or r.is_complex else DType.f32


def _bounds(op, attrs):
    if attrs["min"] is None and attrs["max"] is None:
        raise InvalidProblemError(op, "min", "at least one of 'min' and 'max'", "neither")
    return attrs


def _weak_float_dtype(*names):
    """An integer tensor with a Python-float attribute computes in the default float dtype (torch)."""
    def rule(op, inputs, attrs, r):
        if not (r.is_floating or r.is_complex) and any(isinstance(attrs[n], float) for n in names):
            return DType.f32
        return r
    return rule


def _addcmul_dtype(op, inputs, attrs, r):
    """torch: the result is the operands' promoted dtype whatever ``value`` is; for integer results value goes
    through torch's checked scalar conversion (a fraction truncates; a value out of the dtype's range is an error)."""
    if r.is_integer:
        to_scalar(op, "value", attrs["value"], r)
    return r


def _pow_scalar_dtype(op, inputs, attrs, r):
    e = attrs["exponent"]
    if r.is_integer and isinstance(e, int) and e < 0:
        raise InvalidProblemError(op, "exponent", "a non-negative exponent for integer tensors", e)
    return _weak_float_dtype("exponent")(op, inputs, attrs, r)


# -- peers -------------------------------------------------------------------------------------------
def _peer_div_bw_b(g, a, b):
    return -g * (a / (b * b)).conj()


def _peer_minmax_bw(g, a, b, mode):
    import torch

    ar, br = a.detach().clone().requires_grad_(True), b.detach().clone()
    fn = {"max": torch.maximum, "min": torch.minimum, "fmax": torch.fmax, "fmin": torch.fmin}[mode]
    (da,) = torch.autograd.grad(fn(ar, br), ar, g)
    return da


def _peer_pow_bw(i):
    def peer(g, a, b):
        import torch

        xs = [a.detach().clone().requires_grad_(i == 0), b.detach().clone().requires_grad_(i == 1)]
        (d,) = torch.autograd.grad(torch.pow(*xs), xs[i], g)
        return d
    return peer


def _peer_where_bw(g, c, branch):
    import torch

    return torch.where(c if branch == 1 else ~c, g, torch.zeros_like(g))


def _peer_clamp(x, min=None, max=None):
    import torch

    return torch.clamp(x, min=min, max=max)


def _peer_pow_scalar(x, exponent):
    import torch

    return torch.pow(x, exponent)


def _di(name, n=2, attrs=(), unsupported=("out",)):
    return dropin_ew(name, *(("input", "other") if n == 2 else ("input",)), attr_names=attrs, unsupported=unsupported)


_SHIFT = ("wide", "shift")
_A = dict(avoid=(0.0,))
add_ew_ops([
    # arithmetic (the first rows: other families and baracuda.torch build on them)
    EwDef("neg", 1, tp("neg"), "torch.neg", "jax.lax.neg", lambda ctx, d, g, s: (ctx.op("neg", g[0]),), saves=(),
          dtypes=NUMC, dropin=_di("neg", 1), aliases=("torch.negative",)),
    EwDef("mul_scalar", 1, lambda x, scalar: x * scalar, "torch.mul (Python scalar)", "jax.lax.mul", _g_mul_scalar,
          saves=(), attrs=(Attr("scalar", "float", 1.0),),
          dtypes=FLOATC, samples=ew_samples(attrs=({"scalar": -1.75},))),
    EwDef("add", 2, tp("add"), "torch.add", "jax.lax.add", _g_add, saves=(), attrs=(_ALPHA,), dtype_rule=_alpha_dtype, dtypes=ALLC,
          dropin=_di("add", attrs=("alpha",)), samples=ew_samples("wide", attrs=({}, {"alpha": -2}))),
    EwDef("sub", 2, tp("sub"), "torch.sub", "jax.lax.sub", _g_sub, saves=(), attrs=(_ALPHA,), dtype_rule=_alpha_dtype, dtypes=NUMC,
          dropin=_di("sub", attrs=("alpha",)), aliases=("torch.subtract",),
          samples=ew_samples("wide", attrs=({}, {"alpha": 3}))),
    EwDef("mul", 2, tp("mul"), "torch.mul", "jax.lax.mul", _g_mul, dtypes=ALLC, dropin=_di("mul"),
          aliases=("torch.multiply",), samples=ew_samples("wide")),
    EwDef("div", 2, tp("div"), "torch.div", "jax.lax.div", _g_div, dtypes=ALLC,
          attrs=(_ROUNDING,), dtype_rule=_div_dtype,
          dropin=_di("div", attrs=("rounding_mode",)), aliases=("torch.divide",),
          samples=ew_samples(("wide", "nonzero"), attrs=({}, {"rounding_mode": "trunc"}, {"rounding_mode": "floor"}))),
    EwDef("floor_divide", 2, tp("floor_divide"), "torch.floor_divide", "jax.numpy.floor_divide",
          dtypes=NUM, dropin=_di("floor_divide"), samples=ew_samples(("wide", "nonzero"))),
    EwDef("remainder", 2, tp("remainder"), "torch.remainder", "jax.numpy.remainder", _g_mod("floor"),
          dtypes=NUM, dropin=_di("remainder"), samples=ew_samples(("wide", "nonzero"))),
    EwDef("fmod", 2, tp("fmod"), "torch.fmod", "jax.lax.rem", _g_mod("trunc"),
          dtypes=NUM, dropin=_di("fmod"), samples=ew_samples(("wide", "nonzero"))),
    EwDef("pow", 2, tp("pow"), "torch.pow", "jax.lax.pow", _g_pow, dtypes=NUMC,
          dropin=dropin_ew("pow", "input", "exponent", unsupported=("out",)), samples=ew_samples(("positive", "expo"))),
    EwDef("pow_scalar", 1, _peer_pow_scalar, "torch.pow (Python exponent)", "jax.lax.pow",
          dtypes=NUMC, attrs=(Attr("exponent", "number", 2.0),), dtype_rule=_pow_scalar_dtype,
          bw="x", samples=ew_samples("positive", attrs=({"exponent": 2}, {"exponent": 0.5}, {"exponent": -1.5}))),
    EwDef("atan2", 2, tp("atan2"), "torch.atan2", "jax.lax.atan2", _g_atan2, out="float", dtypes=ALL,
          dropin=_di("atan2"), aliases=("torch.arctan2",), samples=ew_samples(("any", "nonzero"))),
    EwDef("hypot", 2, tp("hypot"), "torch.hypot", "jax.numpy.hypot", _g_hypot, saves=("inputs", "outputs"),
          dtypes=FLOAT, dropin=_di("hypot"), samples=ew_samples("nonzero")),
    EwDef("copysign", 2, tp("copysign"), "torch.copysign", "jax.numpy.copysign", _g_copysign,
          saves=("inputs", "outputs"), out="float", dtypes=ALL,
          dropin=_di("copysign"), samples=ew_samples("nonzero")),
    EwDef("maximum", 2, tp("maximum"), "torch.maximum", "jax.lax.max", _g_minmax("max"), dtypes=ALL,
          dropin=_di("maximum"), samples=ew_samples("wide")),
    EwDef("minimum", 2, tp("minimum"), "torch.minimum", "jax.lax.min", _g_minmax("min"), dtypes=ALL,
          dropin=_di("minimum"), samples=ew_samples("wide")),
    EwDef("fmax", 2, tp("fmax"), "torch.fmax", "jax.numpy.fmax", _g_minmax("fmax"), dtypes=ALL,
          dropin=_di("fmax"), samples=ew_samples("wide")),
    EwDef("fmin", 2, tp("fmin"), "torch.fmin", "jax.numpy.fmin", _g_minmax("fmin"), dtypes=ALL,
          dropin=_di("fmin"), samples=ew_samples("wide")),
    EwDef("logaddexp", 2, tp("logaddexp"), "torch.logaddexp", "jax.numpy.logaddexp", _g_logaddexp(False),
          saves=("inputs", "outputs"), dropin=_di("logaddexp")),
    EwDef("logaddexp2", 2, tp("logaddexp2"), "torch.logaddexp2", "jax.numpy.logaddexp2", _g_logaddexp(True),
          saves=("inputs", "outputs"), dropin=_di("logaddexp2")),
    EwDef("xlogy", 2, tp("xlogy"), "torch.xlogy", "jax.scipy.special.xlogy", _g_xlogy, out="float", dtypes=ALL,
          dropin=_di("xlogy"), aliases=("torch.special.xlogy",), samples=ew_samples(("any", "positive"))),
    EwDef("lerp", 2, lambda a, b, weight: __import__("torch").lerp(a, b, weight), "torch.lerp (scalar weight)",
          None, _g_lerp, saves=(), attrs=(Attr("weight", "float", 0.5),), dtypes=FLOATC,
          dropin=dropin_ew("lerp", "input", "end", attr_names=("weight",), unsupported=("out",)),
          samples=ew_samples(attrs=({"weight": 0.25},))),
    # comparisons and logical / bitwise (no gradients)
    *[EwDef(n, 2, tp(n), f"torch.{n}", f"jax.numpy.{j}", out="bool", dtypes=ALLC if n in ("eq", "ne") else ALL,
            dropin=_di(n), aliases=(f"torch.{j}",) if n != "eq" else (), samples=ew_samples("wide")) for n, j in (
        ("eq", "equal"), ("ne", "not_equal"), ("lt", "less"), ("le", "less_equal"), ("gt", "greater"),
        ("ge", "greater_equal"))],
    *[EwDef(f"logical_{n}", 2, tp(f"logical_{n}"), f"torch.logical_{n}", f"jax.numpy.logical_{n}", out="bool",
            dtypes=ALL, dropin=_di(f"logical_{n}"), samples=ew_samples("wide")) for n in ("and", "or", "xor")],
    *[EwDef(f"bitwise_{n}", 2, tp(f"bitwise_{n}"), f"torch.bitwise_{n}", f"jax.numpy.bitwise_{n}",
            dtypes=INT + BOOL, dropin=_di(f"bitwise_{n}"), samples=ew_samples("wide")) for n in ("and", "or", "xor")],
    *[EwDef(f"bitwise_{n}", 2, tp(f"bitwise_{n}"), f"torch.bitwise_{n}", f"jax.lax.shift_{j}", dtypes=INT,
            dropin=_di(f"bitwise_{n}"), samples=ew_samples(_SHIFT)) for n, j in (("left_shift", "left"),
                                                                    ("right_shift", "right_arithmetic"))],
    # ternary
    EwDef("where", 3, lambda c, a, b: __import__("torch").where(c, a, b), "torch.where", "jax.numpy.where", _g_where,
          dtypes=ALLC, arg_dtypes={0: BOOL}, value_args=(1, 2),
          dropin=dropin_ew("where", "condition", "input", "other", unsupported=("out",)),
          samples=ew_samples(("cond", "any", "any"))),
    EwDef("clamp", 1, _peer_clamp, "torch.clamp", "jax.numpy.clip", attrs=(_bound("min"), _bound("max")),
          check_attrs=_bounds, dtype_rule=_weak_float_dtype("min", "max"), dtypes=NUM,
          bw="x", dropin=_di("clamp", 1, ("min", "max")),
          aliases=("torch.clip",),
          samples=ew_samples("wide", avoid=(-0.5, 0.25, 0.5, 0.75, 1.0, 5.0),
                             attrs=({"min": -0.5, "max": 0.75}, {"min": 1, "max": 5}, {"min": 0.25}, {"max": 0.5}))),
    EwDef("clamp_tensor", 3, lambda x, lo, hi: __import__("torch").clamp(x, lo, hi), "torch.clamp (tensor bounds)",
          "jax.numpy.clip", _g_clamp_tensor, dtypes=NUM, samples=ew_samples("wide")),
    EwDef("addcmul", 3, lambda a, b, c, value: __import__("torch").addcmul(a, b, c, value=value), "torch.addcmul",
          None, _g_addcmul, dtypes=NUMC, attrs=(Attr("value", "number", 1),), dtype_rule=_addcmul_dtype,
          doc="integer operands keep their dtype whatever value is: a float value is truncated to an int (torch)",
          dropin=dropin_ew("addcmul", "input", "tensor1", "tensor2", attr_names=("value",), unsupported=("out",)),
          samples=ew_samples(attrs=({"value": 2},))),
    EwDef("addcdiv", 3, lambda a, b, c, value: __import__("torch").addcdiv(a, b, c, value=value), "torch.addcdiv",
          None, _g_addcdiv, dtypes=FLOATC, attrs=(Attr("value", "float", 1.0),),
          dropin=dropin_ew("addcdiv", "input", "tensor1", "tensor2", attr_names=("value",), unsupported=("out",)),
          samples=ew_samples(("any", "any", "nonzero"), attrs=({"value": -0.5},))),
    # backward helpers (their own kernels from the same template)
    EwDef("div_backward_b", 3, _peer_div_bw_b, None, internal=True,
          dtypes=FLOATC, samples=ew_samples(("any", "any", "nonzero"), lean=True)),
    EwDef("minmax_backward", 3, _peer_minmax_bw, None, internal=True,
          attrs=(Attr("mode", "str", "max", choices=("max", "min", "fmax", "fmin"),
                      expected="'max', 'min', 'fmax' or 'fmin'"),),
                      samples=ew_samples(attrs=({"mode": "max"}, {"mode": "fmin"}), lean=True)),
    EwDef("pow_backward_a", 3, _peer_pow_bw(0), None, internal=True,
          dtypes=FLOATC, samples=ew_samples(("any", "positive", "any"), lean=True)),
    EwDef("pow_backward_b", 3, _peer_pow_bw(1), None, internal=True,
          dtypes=FLOATC, samples=ew_samples(("any", "positive", "any"), lean=True)),
    EwDef("where_backward", 2, _peer_where_bw, None, internal=True, attrs=(Attr("branch", "int", 1, choices=(1, 2), expected="1 or 2"),), arg_dtypes={1: BOOL},
          dtypes=FLOATC,
          value_args=(0,),
          samples=ew_samples(("any", "cond"), attrs=({"branch": 1}, {"branch": 2}), lean=True)),
])

_EXTRA_ERRORS.update({
    "add": [ErrorCase((((3,), "i32"), ((3,), "i32")), {"alpha": 0.5}, InvalidProblemError,
                      r"add: argument 'alpha': expected an int or a bool for integral input tensors", "int-alpha"),
            ErrorCase((((3,), "i64"), ((3,), "u8")), {"alpha": 2.0}, InvalidProblemError,
                      r"alpha must not be a floating point number; the result is i64\), got 2.0", "integral-float"),
            ErrorCase((((3,), "f32"), ((3,), "f32")), {"alpha": 1j}, InvalidProblemError,
                      r"add: argument 'alpha': expected a real number for non-complex", "complex-alpha")],
    "div": [ErrorCase((((3,), "f32"), ((3,), "f32")), {"rounding_mode": "ceil"}, InvalidProblemError,
                      r"div: argument 'rounding_mode': expected None, 'trunc' or 'floor'", "bad-rounding"),
            ErrorCase((((3,), "bool"), ((3,), "bool")), {"rounding_mode": "floor"}, UnsupportedError,
                      r"div: rounding_mode='floor' is not defined for bool operands", "bool-rounding")],
    "sub": [ErrorCase((((3,), "bool"), ((3,), "bool")), {}, UnsupportedError, r"sub: argument 'a' has dtype bool",
                      "bool-sub")],
    "clamp": [ErrorCase((((3,), "f32"),), {}, InvalidProblemError, r"clamp: argument 'min': expected at least one",
                        "no-bounds")],
    "pow_scalar": [ErrorCase((((3,), "i32"),), {"exponent": -1}, InvalidProblemError,
                             r"pow_scalar: argument 'exponent': expected a non-negative exponent", "int-neg-exp")],
    "where": [ErrorCase((((3,), "f32"), ((3,), "f32"), ((3,), "f32")), {}, UnsupportedError,
                        r"where: argument 'a' has dtype f32; the op is defined for bool", "float-cond")],
})
